"""Hallucination: output content with no corresponding source content
(SPEC §2.4, decision revised). Per entry, the output tokens flagged by any of:
  oscillation           copies of a phrase (up to MAX_PERIOD words) repeated
                        back to back beyond what language allows (Raunak et
                        al. 2021): any repeat of a phrase of two words or
                        more, a word more than twice in a row; repeats the
                        reference itself has are allowed
  number_not_in_source  numbers with no counterpart in the source: values
                        neither the source nor the reference has, beyond the
                        source's numbers the output does not reproduce
                        (digits, or number words where spaCy knows the source
                        language's). A number standing for a source number is
                        a translation of it, converted ("80 feet" -> "25
                        Meter", "8pm" -> "20 Uhr", "four" -> "4") or wrong
                        ("4.5%" -> "45 %"): number_mismatch_rate judges those
  detached_from_source  every token, when the output is detached from its
                        source (see detachment.py)

No rule reads capitalisation or length against one reference: German
capitalises every noun, and a free human translation may be longer than
another; both flagged human translations more often than MT (issue 18).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from operator import eq
from typing import Callable, Iterator

from services.behavioral.detachment import Detachment
from services.behavioral.numbers import NUMBER_PATTERN, canonical, numbers_in

# Longest repeated phrase looked for, in words: the scan costs MAX_PERIOD
# comparisons per word, so it stays linear in the text's length.
MAX_PERIOD = 16
_TOKEN = re.compile(rf"{NUMBER_PATTERN}|[\w'’-]+")
# Back-to-back copies language tolerates: "very very", "die die"; not three.
_TOLERATED_WORD_COPIES = 1
# Flagged stretches located per reason and entry, at most (the counts are always complete).
MAX_SPANS = 20


def tokens_of(text: str) -> list[str]:
    """Words and numbers (punctuation left out)."""
    return _TOKEN.findall(text)


def _stretches(flagged: set[int], places: list[tuple[int, int]]) -> list[list[int]]:
    """[start, end) character spans of the flagged tokens, neighbouring
    tokens joined into one stretch (a loop is one span, not one per word)."""
    stretches: list[list[int]] = []
    previous = None
    for index in sorted(flagged):
        if previous is not None and index == previous + 1:
            stretches[-1][1] = places[index][1]
        else:
            stretches.append(list(places[index]))
        previous = index
    return stretches[:MAX_SPANS]


def _phrase_key(phrase: tuple[str, ...]) -> tuple[str, ...]:
    """The same loop read from any word of it ("a b c a b c" = "b c a b c a"):
    its smallest rotation."""
    return min(phrase[i:] + phrase[:i] for i in range(len(phrase)))


def _loops(words: list[str]) -> Iterator[tuple[int, int, int]]:
    """(start, period, copies beyond the first) of each back-to-back repeat:
    a stretch where every word equals the word `period` places later."""
    count = len(words)
    for period in range(1, min(MAX_PERIOD, count // 2) + 1):
        # The positions whose word comes again `period` places later, found at
        # C speed (most texts have few): each run of them is one stretch.
        matches = compress(range(count - period), map(eq, words, words[period:]))
        run_start = run_end = None
        for position in matches:
            if run_end is not None and position == run_end:
                run_end += 1
                continue
            if run_start is not None and (run_end - run_start) // period:
                yield run_start, period, (run_end - run_start) // period
            run_start, run_end = position, position + 1
        if run_start is not None and (run_end - run_start) // period:
            yield run_start, period, (run_end - run_start) // period


@lru_cache(maxsize=4096)
def _allowed_repeats(reference_words: tuple[str, ...]) -> dict[tuple[str, ...], int]:
    """Phrase key -> the copies of it the reference repeats back to back.
    Kept per reference: every system scored on a corpus has the same ones."""
    allowed: dict[tuple[str, ...], int] = {}
    for start, period, copies in _loops(list(reference_words)):
        key = _phrase_key(reference_words[start:start + period])
        allowed[key] = max(allowed.get(key, 0), copies)
    return allowed


def oscillation(words: list[str], reference_words: list[str]) -> set[int]:
    allowed = _allowed_repeats(tuple(reference_words))
    flagged: set[int] = set()
    for start, period, copies in _loops(words):
        tolerated = _TOLERATED_WORD_COPIES if period == 1 else 0
        extra = copies - max(tolerated, allowed.get(_phrase_key(tuple(words[start:start + period])), 0))
        if extra > 0:
            end = start + (copies + 1) * period
            flagged.update(range(end - extra * period, end))
    return flagged


def unsupported_numbers(tokens: list[str], source: str, reference: str,
                        is_number_word: Callable[[str], bool] | None = None) -> set[int]:
    available = numbers_in(source) | numbers_in(reference)
    values = {index: canonical(token) for index, token in enumerate(tokens) if token[0].isdigit()}
    unmatched = []
    for index, value in values.items():
        if available[value] > 0:
            available[value] -= 1
        else:
            unmatched.append(index)
    if not unmatched:
        return set()
    # Source numbers the output does not reproduce: each may stand behind one unmatched number.
    counterparts = sum((numbers_in(source) - Counter(values.values())).values())
    if is_number_word is not None:
        counterparts += sum(1 for word in tokens_of(source)
                            if not word[0].isdigit() and any(is_number_word(part) for part in word.split("-")))
    return set(unmatched[counterparts:])


@dataclass
class Findings:
    flagged: int  # flagged tokens
    tokens: int
    reasons: dict[str, list] = field(default_factory=dict)  # kind -> the flagged tokens (detached: why)
    # Kind -> [start, end) character spans of the flagged stretches of the output
    # (what a reviewer is shown as suggested spans: gateway/review/prefill.py).
    spans: dict[str, list[list[int]]] = field(default_factory=dict)


def findings(output: str, source: str, reference: str, detachment: Detachment | None = None,
             is_number_word: Callable[[str], bool] | None = None) -> Findings:
    """The output's flagged tokens by kind, with where they stand. For a
    detached output, the similarities that made it so (no span: all of it).
    `is_number_word` tells the source language's number words ("four"), where known."""
    matches = list(_TOKEN.finditer(output))
    tokens = [match.group() for match in matches]
    if detachment is not None and detachment.detached and tokens:
        return Findings(len(tokens), len(tokens), {"detached_from_source": [detachment.explanation()]})
    lowered = [token.lower() for token in tokens]
    checks = {
        "oscillation": oscillation(lowered, [token.lower() for token in tokens_of(reference)]),
        "number_not_in_source": unsupported_numbers(tokens, source, reference, is_number_word),
    }
    flagged = set().union(*checks.values())
    places = [match.span() for match in matches]
    return Findings(len(flagged), len(tokens),
                    {kind: [tokens[i] for i in sorted(found)] for kind, found in checks.items() if found},
                    {kind: _stretches(found, places) for kind, found in checks.items() if found})


def hallucinated(output: str, source: str, reference: str, detachment: Detachment | None = None,
                 is_number_word: Callable[[str], bool] | None = None) -> tuple[int, int, dict[str, list[str]]]:
    """(flagged tokens, tokens, reasons: kind -> the flagged tokens), as `findings` gives them."""
    found = findings(output, source, reference, detachment, is_number_word)
    return found.flagged, found.tokens, found.reasons
