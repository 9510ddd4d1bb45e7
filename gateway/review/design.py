"""Building a review campaign's tasks: which entries, who rates what, in which
order, and the quality controls slipped into each reviewer's queue.

The rules, as this module applies them:

- Sampling (`sample_entries`). The corpus is split into strata by
  (difficulty, domain), a missing value being a stratum value of its own. Each
  stratum gets its proportional share of the sample: the integer parts first,
  then the places left over go to the strata with the largest remainders
  (ties broken at random). Within a stratum the entries are drawn at random.
  The chosen ids come back in corpus order, so that a campaign reads in the
  corpus's order whatever the seed.
- Assignment (`assign_items`). Every entry goes to `overlap` distinct
  reviewers. The entries are shuffled and dealt round a shuffled circle of
  reviewers, `overlap` consecutive seats per entry: consecutive seats are
  distinct reviewers, and dealing round a circle keeps every reviewer's load
  within one of the others'.
- A reviewer's queue (`reviewer_tasks`). One RATE task per entry, in random
  order. Then the two WMT-style controls, on distinct entries chosen at
  random: REPEAT (the same task again: a reliable rater scores it about the
  same) and CONTROL (one output, chosen at random, degraded by `degrade`: a
  reliable rater scores it lower). Each control goes somewhere after its
  original, never right after it unless the original is last, so that the
  reviewer does not see the two side by side. Every task shows the systems in
  its own random order: the reviewer cannot tell which column is which run.
  Counts are `share * n` rounded half up (Python's `round` rounds half to
  even), at least one of each once a reviewer has 10 entries, and the two
  together never more than the entries.
- Degrading (`degrade`). WMT's "bad reference": a span of the text replaced
  by a span of about the same length from another text (the donor: another
  output, another entry's reference). The span's length grows with the text:
  1 unit up to 3, 2 up to 5, 3 up to 8, 4 up to 15, 5 up to 20, a quarter
  above. Units are words, or characters (a base character with its combining
  marks) for texts mostly in a script written without spaces between words
  (the scripts of champollion.core.generic_cards.SPACELESS_SCRIPTS: Han, kana,
  Thai, Lao, Khmer, Myanmar, Tibetan...). The text around the span keeps its
  own spacing. The result always differs from the text; see `degrade` for the
  fallbacks when the donor's span happens to be the same.

Everything depends on the arguments only: the same arguments and seed give
the same result (numpy.random.default_rng(seed)).
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import numpy as np

from gateway.review.protocol import CONTROL, CONTROL_SHARE, RATE, REPEAT, REPEAT_SHARE

# A reviewer with this many entries gets at least one control of each kind.
MIN_ENTRIES_FOR_CONTROLS = 10


# --- sampling -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusItem:
    """An entry of the registered corpus that can be sampled."""
    entry_id: str
    difficulty: int | None  # 1..5 or None
    domain: str | None


def _stratum_quotas(sizes: list[int], count: int, rng: np.random.Generator) -> list[int]:
    """Largest-remainder apportionment of `count` places over strata of these sizes."""
    total = sum(sizes)
    exact = [count * size / total for size in sizes]
    quotas = [math.floor(share) for share in exact]
    left = count - sum(quotas)
    # Random tie-break: strata with equal remainders are otherwise favoured by corpus order.
    tie_break = rng.permutation(len(sizes))
    by_remainder = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - quotas[i]), tie_break[i]))
    for i in by_remainder[:left]:
        quotas[i] += 1
    return quotas


def sample_entries(entries: list[CorpusItem], count: int, seed: int) -> list[str]:
    """`count` entry ids (all of them when count >= len), stratified by (difficulty, domain): each stratum gets its
    proportional share (largest-remainder rounding), entries drawn at random within a stratum; returned in corpus
    order."""
    if count < 0:
        raise ValueError(f"count: must be 0 or more, got {count}")
    _check_unique("entries", [entry.entry_id for entry in entries])
    if count >= len(entries):
        return [entry.entry_id for entry in entries]
    rng = np.random.default_rng(seed)
    # Strata in order of first appearance: dict order, no sorting of None against ints.
    strata: dict[tuple[int | None, str | None], list[int]] = {}
    for index, entry in enumerate(entries):
        strata.setdefault((entry.difficulty, entry.domain), []).append(index)
    members = list(strata.values())
    quotas = _stratum_quotas([len(group) for group in members], count, rng)
    chosen: list[int] = []
    for group, quota in zip(members, quotas):
        chosen.extend(int(i) for i in rng.choice(group, size=quota, replace=False))
    return [entries[i].entry_id for i in sorted(chosen)]


# --- assignment -----------------------------------------------------------------------------------------------------


def _check_unique(field: str, names: list[str]) -> None:
    if any(not name or not name.strip() for name in names):
        raise ValueError(f"{field}: an empty name")
    repeated = sorted(name for name, times in Counter(names).items() if times > 1)
    if repeated:
        raise ValueError(f"{field}: listed more than once: {', '.join(map(repr, repeated))}")


def assign_items(entry_ids: list[str], reviewers: list[str], overlap: int, seed: int) -> dict[str, list[str]]:
    """Each entry id to `overlap` distinct reviewers, balanced (reviewers' loads differ by at most one).
    ValueError (a one-line message naming the field: 'overlap: ...', 'reviewers: ...') when overlap < 1 or
    overlap > len(reviewers) or reviewers has duplicates/empty names."""
    _check_unique("reviewers", reviewers)
    _check_unique("entry_ids", entry_ids)
    if not reviewers:
        raise ValueError("reviewers: none given")
    if not 1 <= overlap <= len(reviewers):
        raise ValueError(f"overlap: must be between 1 and the number of reviewers ({len(reviewers)}), got {overlap}")
    rng = np.random.default_rng(seed)
    circle = [reviewers[i] for i in rng.permutation(len(reviewers))]
    dealing_order = [entry_ids[i] for i in rng.permutation(len(entry_ids))]
    seats: dict[str, list[str]] = {}
    for turn, entry_id in enumerate(dealing_order):
        first = turn * overlap
        seats[entry_id] = [circle[(first + k) % len(circle)] for k in range(overlap)]
    return {entry_id: seats[entry_id] for entry_id in entry_ids}


# --- a reviewer's queue ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    position: int  # 0-based place in the reviewer's queue
    entry_id: str
    kind: str  # protocol.RATE / REPEAT / CONTROL
    systems: tuple[str, ...]  # run ids in the order shown (shuffled per task: blind)
    degraded: str | None  # CONTROL: the run id whose output is shown degraded; else None


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def control_counts(entries: int, repeat_share: float = REPEAT_SHARE,
                   control_share: float = CONTROL_SHARE) -> tuple[int, int]:
    """(repeats, controls) for a reviewer with this many entries."""
    repeats = _round_half_up(repeat_share * entries)
    controls = _round_half_up(control_share * entries)
    if entries >= MIN_ENTRIES_FOR_CONTROLS:
        repeats, controls = max(repeats, 1), max(controls, 1)
    repeats = min(repeats, entries)
    return repeats, min(controls, entries - repeats)  # each control on an entry of its own


def _insert_after(queue: list[tuple[str, str]], task: tuple[str, str], original: int,
                  rng: np.random.Generator) -> None:
    """Insert `task` at a random place after queue[original], not right after it when there is room."""
    # Insertion index i puts the task before queue[i]; original + 1 is "right after".
    first = original + 2 if original + 2 <= len(queue) else original + 1
    queue.insert(int(rng.integers(first, len(queue) + 1)), task)


def reviewer_tasks(entry_ids: list[str], systems: list[str], seed: int,
                   repeat_share: float = REPEAT_SHARE, control_share: float = CONTROL_SHARE) -> list[Task]:
    """One reviewer's queue: a RATE task per entry id (shuffled order), then REPEAT tasks for round(share*n)
    of them (at least 1 when n >= 10) and CONTROL tasks for round(share*n) others (at least 1 when n >= 10),
    each placed at a random position after its original (never directly after it when possible). A CONTROL
    task degrades one system's output, chosen at random. Columns shuffled in every task."""
    _check_unique("entry_ids", entry_ids)
    _check_unique("systems", systems)
    if not systems:
        raise ValueError("systems: none given")
    for field, share in (("repeat_share", repeat_share), ("control_share", control_share)):
        if not 0 <= share <= 1:
            raise ValueError(f"{field}: must be between 0 and 1, got {share}")
    rng = np.random.default_rng(seed)
    queue: list[tuple[str, str]] = [(entry_ids[i], RATE) for i in rng.permutation(len(entry_ids))]
    repeats, controls = control_counts(len(entry_ids), repeat_share, control_share)
    picked = [entry_ids[i] for i in rng.choice(len(entry_ids), size=repeats + controls, replace=False)]
    extras = [(entry_id, REPEAT if k < repeats else CONTROL) for k, entry_id in enumerate(picked)]
    # Inserting only ever adds tasks between an original and its control, never removes any: a control placed
    # apart from its original stays apart.
    for extra in extras:
        _insert_after(queue, extra, queue.index((extra[0], RATE)), rng)
    tasks = []
    for position, (entry_id, kind) in enumerate(queue):
        shown = tuple(systems[i] for i in rng.permutation(len(systems)))
        degraded = systems[int(rng.integers(len(systems)))] if kind == CONTROL else None
        tasks.append(Task(position, entry_id, kind, shown, degraded))
    return tasks


# --- degrading an output --------------------------------------------------------------------------------------------

# Unicode character-name prefixes of the scripts written without spaces between words (the stdlib's view of
# champollion.core.generic_cards.SPACELESS_SCRIPTS, without its fontTools dependency).
_SPACELESS_NAME_PREFIXES = (
    "CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA",
    "BOPOMOFO", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN", "TAI THAM", "TAI LE", "NEW TAI LUE", "TAI VIET",
    "AHOM", "YI SYLLABLE", "JAVANESE", "BALINESE", "BUGINESE",
)
_WORD = re.compile(r"\S+")


def _is_spaceless_letter(char: str) -> bool:
    return unicodedata.name(char, "").startswith(_SPACELESS_NAME_PREFIXES)


def written_without_spaces(text: str) -> bool:
    """Whether most of the text's letters are of a script written without spaces between words."""
    letters = [char for char in text if unicodedata.category(char).startswith("L")]
    return bool(letters) and 2 * sum(map(_is_spaceless_letter, letters)) >= len(letters)


def _character_units(text: str) -> list[tuple[int, int]]:
    """(start, end) of each visible character with the combining marks after it (Thai vowels and tones)."""
    units: list[list[int]] = []
    for index, char in enumerate(text):
        if char.isspace():
            continue
        if units and unicodedata.category(char).startswith("M") and units[-1][1] == index:
            units[-1][1] = index + 1
        else:
            units.append([index, index + 1])
    return [(start, end) for start, end in units]


def _units(text: str, by_character: bool) -> list[tuple[int, int]]:
    """(start, end) of the text's units: characters, or whitespace-separated words."""
    if by_character:
        return _character_units(text)
    return [match.span() for match in _WORD.finditer(text)]


def span_length(units: int) -> int:
    """How many units of a text of this many units are replaced (WMT's bad-reference lengths)."""
    for most, length in ((3, 1), (5, 2), (8, 3), (15, 4), (20, 5)):
        if units <= most:
            return length
    return units // 4


def _splice(text: str, units: list[tuple[int, int]], first: int, count: int, piece: str) -> str:
    """The text with units[first:first+count] (and the spacing between them) replaced by `piece`."""
    return text[:units[first][0]] + piece + text[units[first + count - 1][1]:]


def _rearranged(text: str, units: list[tuple[int, int]], order: list[int]) -> str:
    """The text with its units in `order`, every separator left where it was."""
    pieces, previous_end = [], 0
    for slot, unit in zip(units, order):
        pieces.append(text[previous_end:slot[0]])
        pieces.append(text[units[unit][0]:units[unit][1]])
        previous_end = slot[1]
    return "".join(pieces) + text[previous_end:]


def _without(text: str, units: list[tuple[int, int]], first: int, count: int) -> str:
    """The text less units[first:first+count] and the spacing after them (before them at the end)."""
    last = first + count - 1
    if last + 1 < len(units):
        return text[:units[first][0]] + text[units[last + 1][0]:]
    return text[:units[first - 1][1]] + text[units[last][1]:]


def _degrade_one_unit(text: str, unit: tuple[int, int], donor_words: list[str]) -> str:
    """A one-unit text: its unit becomes the donor's first unit, else (the same) its characters reversed, else
    (a palindrome) another of the donor's units, else (nothing left to try) the unit doubled."""
    word = text[unit[0]:unit[1]]
    replacements = donor_words[:1] + [word[::-1]] + donor_words[1:]
    replacement = next((candidate for candidate in replacements if candidate != word), word + word)
    return text[:unit[0]] + replacement + text[unit[1]:]


def degrade(text: str, donor: str, seed: int) -> str:
    """WMT's "bad reference" control: a span of the text replaced by a span of another text (`donor`) of about
    the same length. Span length by the text's word count: 1 word for <=3, 2 for 4-5, 3 for 6-8, 4 for 9-15,
    5 for 16-20, n//4 above. Texts without spaces (CJK, Thai) are handled as characters. The result always
    differs from `text` (if the donor span happens to equal the original span, reverse the span's words or
    use a different span / fall back to reversing word order); a one-word text gets its word replaced by the
    donor's first word (or reversed characters if equal).

    Fallbacks, in order, until the result differs: the span's units reversed; the whole text's units reversed;
    the span deleted (the text's units all alike: "ha ha ha"). An empty text becomes the donor's first unit;
    ValueError when the donor is empty too (nothing to degrade with)."""
    by_character = written_without_spaces(text)
    units = _units(text, by_character)
    donor_units = _units(donor, by_character)
    donor_words = [donor[start:end] for start, end in donor_units]
    if not units:
        if not donor_words:
            raise ValueError("text: empty, and so is the donor: nothing to degrade it with")
        return donor_words[0]
    if len(units) == 1:
        return _degrade_one_unit(text, units[0], donor_words)
    rng = np.random.default_rng(seed)
    length = span_length(len(units))
    first = int(rng.integers(0, len(units) - length + 1))
    if donor_units:
        donor_first = int(rng.integers(0, max(len(donor_units) - length, 0) + 1))
        donor_last = min(donor_first + length, len(donor_units)) - 1
        piece = donor[donor_units[donor_first][0]:donor_units[donor_last][1]]
    else:
        piece = ""
    span = list(range(first, first + length))
    candidates = (
        lambda: _splice(text, units, first, length, piece),
        lambda: _rearranged(text, units, list(range(first)) + span[::-1] + list(range(first + length, len(units)))),
        lambda: _rearranged(text, units, list(range(len(units)))[::-1]),
        lambda: _without(text, units, first, length),
    )
    for candidate in candidates:
        result = candidate()
        if result != text:
            return result
    raise AssertionError("unreachable: deleting a span of a text of two or more units changes it")
