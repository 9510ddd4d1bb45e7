"""The corpus-level form of a run card scored against a secret registered
corpus (seed 001 §5.2, §8.1: on holdout and gold corpora references are
never exposed). It keeps the corpus-level scores, intervals and the
difficulty breakdown and leaves out everything that could carry or reveal a
reference or the corpus's private metadata: the per-entry results (values,
verdicts, rejected words, statistics), the families' own messages, which may
quote text, the provenance breakdown (named after private documents) and the
contamination verdict (an oracle of guessed references). Who gets which form is
decided in gateway/server/registered.py."""
from __future__ import annotations

import re
from collections import Counter

from gateway.card.breakdowns import SIZE_AND_SPEED_KEYS
from gateway.card.contamination import OVERLAP_WARNING_PREFIX
from champollion.core.tiers import tier_of
from gateway.card.metrics import FAMILIES

# A family's message as the merge passes it on ("structural: ...").
_FAMILY_MESSAGE = re.compile(rf"^({'|'.join(FAMILIES)}): ")
# A failed family as the evaluation reports it; the reason in parentheses
# is the family's error text.
_FAMILY_FAILURE = re.compile(rf"^family '({'|'.join(FAMILIES)})' failed \(.*\): ([^()]*)$", re.DOTALL)


def withheld_notice(tier: str) -> str:
    return (f"per-entry results withheld: the corpus is {tier} (seed 001 §5.2: its references are never "
            "exposed); this card has corpus-level scores, intervals and breakdowns only")


def _corpus_level_warnings(warnings: list[str]) -> list[str]:
    """The gateway's own warnings as they are (counts, metric ids, domain
    names); a family's messages counted, not quoted; a family's failure
    without its error text."""
    kept, withheld = [], Counter()
    for warning in warnings:
        failure = _FAMILY_FAILURE.match(warning)
        message = _FAMILY_MESSAGE.match(warning)
        if failure:
            kept.append(f"family {failure.group(1)!r} failed (reason withheld): {failure.group(2)}")
        elif message:
            withheld[message.group(1)] += 1
        else:
            kept.append(warning)
    for family, count in withheld.items():
        kept.append(f"{family}: {count} message{'s' if count > 1 else ''} withheld (a family's messages may "
                    "quote corpus text; the stored run card keeps them)")
    return kept


def _corpus_level_integrity(integrity: dict | None) -> dict | None:
    """The submission count, without the verdict: whether a prompt contains
    an entry (and which, and how much of the references' n-grams) would
    answer a submitter's guesses about the references, one submission at a
    time. The verdict, and whether the run is held for review, are the
    maintainers' (the stored card keeps them)."""
    if integrity is None:
        return None
    return {"disqualified": False, "verdict_withheld": True,
            "submissions_with_fingerprint": integrity.get("submissions_with_fingerprint")}


def _corpus_level_scores(scores: dict | None) -> dict | None:
    """The scores less `by_provenance`, whose keys are the private corpus's
    provenance documents (difficulty tiers, in `by_difficulty`, are public
    with the sources)."""
    if scores is None:
        return None
    return {**scores, "by_provenance": {}}


def corpus_level(card: dict) -> dict:
    """A copy of `card` (run-level blocks; its entries, if any, are dropped)
    with nothing per entry, no family message quoted and no contamination
    detail."""
    redacted = {key: value for key, value in card.items() if key != "entries"}
    warnings = [warning for warning in card.get("warnings") or [] if not warning.startswith(OVERLAP_WARNING_PREFIX)]
    redacted["warnings"] = [withheld_notice(tier_of(card)), *_corpus_level_warnings(warnings)]
    if "integrity" in card:
        redacted["integrity"] = _corpus_level_integrity(card["integrity"])
    if "scores" in card:
        redacted["scores"] = _corpus_level_scores(card["scores"])
    redacted["entries"] = []
    return redacted


LADDER_NOTICE = ("scores withheld: on a holdout or gold corpus a run's scores reach anyone but a maintainer only "
                 "through the public board's Ladder (the `ladder` block: the value the board releases, rounded to "
                 "the margin a run must beat); exact scores answered to each submission would let a submitter "
                 "climb the holdout itself")


def ladder_only(card: dict) -> dict:
    """A corpus-level card (corpus_level) as a non-maintainer reads a run of
    a secret tier: every value computed from the references withheld (null,
    tier `unscored`, no interval, breakdown or adequacy count), its `ladder`
    release, size, speed and costs kept (issue 33: a climb on exact
    answers overfits the holdout, whatever the board shows)."""
    shown = dict(card)
    scores = dict(card.get("scores") or {})
    for key, value in scores.items():
        if key in SIZE_AND_SPEED_KEYS:
            continue
        scores[key] = {} if isinstance(value, dict) else ("unscored" if key == "quality_tier" else None)
    shown["scores"] = scores
    shown["adequacy"] = None
    # The floor rule's warning quotes the composite's bounds.
    warnings = [warning for warning in card.get("warnings") or [] if not warning.startswith("quality_tier is baseline")]
    shown["warnings"] = [*warnings[:1], LADDER_NOTICE, *warnings[1:]]  # after corpus_level's notice
    return shown
