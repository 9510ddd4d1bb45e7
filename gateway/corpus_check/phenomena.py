"""Phenomenon coverage (seed 001 §6.2): the universal phenomena and those
the language cards name (linguisticChallenges, contactInfluences, and
registers and scripts when a card lists more than one), each with the
entries whose `phenomena` labels cover it.

Labels are free text, so they are matched loosely: a label is lower-cased
with runs of spaces, '-', '/', '.', ':' turned into '_'; it covers a
phenomenon when every word of the label matches a word of the phenomenon,
or of one of its listed synonyms (universal ones: UNIVERSAL_PHENOMENA), or
is one of the words its kind allows a label to add (like "loanword" for a
contact influence), and at least one word is not such an addition
(corpus_rules: STOP_WORDS, PREFIX_LETTERS, QUALIFIERS)."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from champollion.core.cards import LanguageCard
from champollion.core.corpus_rules import (
    PREFIX_LETTERS,
    QUALIFIERS,
    SCRIPT_NAMES,
    STOP_WORDS,
    UNIVERSAL_PHENOMENA,
)
from gateway.corpus_check.results import RuleResult

_SEPARATORS = re.compile(r"[\s\-/.:_,;]+")
_WORD = re.compile(r"[^\W\d_]+")


def normalise_label(label: str) -> str:
    return _SEPARATORS.sub("_", unicodedata.normalize("NFKC", label).casefold()).strip("_")


def _words(text: str) -> tuple[str, ...]:
    return tuple(word for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
                 if word not in STOP_WORDS)


def _singulars(word: str) -> set[str]:
    """The word and what it may be the plural of (-s, -es, -ies)."""
    found = {word}
    if word.endswith("ies") and len(word) > 4:
        found.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 4:
        found.add(word[:-2])
    if word.endswith("s") and len(word) > 3:
        found.add(word[:-1])
    return found


def words_match(a: str, b: str) -> bool:
    for one in _singulars(a):
        for other in _singulars(b):
            shorter, longer = sorted((one, other), key=len)
            if one == other or (len(shorter) >= PREFIX_LETTERS and longer.startswith(shorter)):
                return True
    return False


@dataclass(frozen=True)
class Phenomenon:
    id: str
    title: str
    # "universal", or the card it comes from ("target card spa").
    origin: str
    kind: str  # universal, challenge, contact, register, script
    words: tuple[str, ...]
    synonyms: tuple[str, ...] = ()

    def covered_by(self, label: str) -> bool:
        """`label` normalised (normalise_label)."""
        if label == self.id or label in self.synonyms:
            return True
        label_words = [word for word in label.split("_") if word and word not in STOP_WORDS]
        qualifiers = QUALIFIERS.get(self.kind, ())
        for words in (self.words, *(tuple(synonym.split("_")) for synonym in self.synonyms)):
            own = [word for word in label_words if any(words_match(word, mine) for mine in words)]
            if own and all(word in qualifiers for word in label_words if word not in own):
                return True
        return False


def universal_phenomena() -> list[Phenomenon]:
    return [Phenomenon(pid, title, "universal", "universal", _words(pid.replace("_", " ")), synonyms)
            for pid, title, synonyms in UNIVERSAL_PHENOMENA]


def card_phenomena(card: LanguageCard, side: str) -> list[Phenomenon]:
    """What `card` asks a corpus to test, `side` being "target" or "source":
    its challenges and contact influences, its scripts when it has several,
    and, for the target, its registers when it has several (the register
    a translation must hit is the target's)."""
    origin = f"{side} card {card.code}"
    found = []
    lists = [("challenge", text, text) for text in card.linguistic_challenges]
    lists += [("contact", f"contact influence: {text}", text) for text in card.contact_influences]
    if side == "target" and len(card.registers) > 1:
        lists += [("register", f"register: {text}", text) for text in card.registers]
    if len(card.scripts) > 1:
        lists += [("script", f"script: {code} ({SCRIPT_NAMES.get(code, code)})",
                   f"{code} {SCRIPT_NAMES.get(code, '')}") for code in card.scripts]
    for kind, title, text in lists:
        found.append(Phenomenon(f"{side}:{kind}:{normalise_label(text)}", title, origin, kind, _words(text)))
    return found


def check_phenomena(entries: list[dict], target: LanguageCard | None, source: LanguageCard | None,
                    cards_problem: str | None) -> tuple[dict, list[RuleResult]]:
    """Coverage of the universal phenomena and of the cards' (`cards_problem`
    says why a card is missing, when one is)."""
    pair = (card_phenomena(target, "target") if target else []) + (card_phenomena(source, "source") if source else [])
    wanted = universal_phenomena() + pair
    labels: dict[str, list[str]] = {}
    for entry in entries:
        for label in entry.get("phenomena") or ():
            normalised = normalise_label(label)
            if normalised:
                labels.setdefault(normalised, []).append(entry["id"])
    rows, used = [], set()
    for phenomenon in wanted:
        matching = [label for label in labels if phenomenon.covered_by(label)]
        used.update(matching)
        ids = list(dict.fromkeys(entry_id for label in matching for entry_id in labels[label]))
        rows.append({"id": phenomenon.id, "title": phenomenon.title, "origin": phenomenon.origin,
                     "kind": phenomenon.kind, "labels": matching, "entries": len(ids), "entry_ids": ids})
    unlabelled = [entry["id"] for entry in entries if not entry.get("phenomena")]
    section = {
        "phenomena": rows,
        "missing": [row["title"] for row in rows if not row["entries"]],
        "other_labels": {label: len(ids) for label, ids in sorted(labels.items()) if label not in used},
        "entries_without_labels": len(unlabelled),
        "cards": cards_problem,
    }
    results = []
    for rule_id, origin_test in (("universal_phenomena", lambda o: o == "universal"),
                                 ("pair_phenomena", lambda o: o != "universal")):
        mine = [row for row in rows if origin_test(row["origin"])]
        missing = [row["title"] for row in mine if not row["entries"]]
        if rule_id == "pair_phenomena" and cards_problem:
            results.append(RuleResult(rule_id, None, cards_problem))
        elif missing:
            results.append(RuleResult(rule_id, False, f"{len(missing)} of {len(mine)} not covered: "
                                                       f"{'; '.join(missing)}"))
        else:
            results.append(RuleResult(rule_id, True, f"all {len(mine)} covered" if mine
                                      else "the cards name none"))
    return section, results
