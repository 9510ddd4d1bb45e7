"""Hallucination: output content with no corresponding source content
(SPEC §2.4 decision). Per entry, the output tokens flagged by any of:
  oscillation   copies of an n-gram (n <= 4) repeated back to back beyond
                what language allows (Raunak et al. 2021): any repeat of a
                longer n-gram, a word more than twice in a row; repeats the
                reference itself has are allowed
  excess        tokens beyond twice the reference's length
  number        numbers that the source does not contain
  name          capitalised words (not sentence-initial) found neither in
                the source nor in the reference
"""
from __future__ import annotations

import re
from typing import Iterator

from services.behavioral.numbers import canonical, numbers_in

MAX_NGRAM = 4
_TOKEN = re.compile(r"\d+(?:[ \u00a0\u202f]\d{3})*(?:[.,]\d+)*|[\w'’-]+")
# A capital after these (or at the start) begins a sentence, not a name.
_SENTENCE_OPENERS = ".!?¿¡:«\"“‘("
# Back-to-back copies language tolerates: "very very", "no, no"; not three.
_TOLERATED_WORD_COPIES = 1


def tokens_of(text: str) -> list[tuple[str, int]]:
    """Words and numbers with their start offsets (punctuation left out)."""
    return [(match.group(), match.start()) for match in _TOKEN.finditer(text)]


def _tandem_runs(words: list[str]) -> Iterator[tuple[int, int, int]]:
    """(start, n, copies beyond the first) of each back-to-back repeat."""
    for n in range(1, MAX_NGRAM + 1):
        start = 0
        while start + 2 * n <= len(words):
            gram = words[start:start + n]
            copies = 0
            while words[start + (copies + 1) * n:start + (copies + 2) * n] == gram:
                copies += 1
            if copies:
                yield start, n, copies
                start += (copies + 1) * n
            else:
                start += 1


def oscillation(words: list[str], reference_words: list[str]) -> set[int]:
    allowed: dict[tuple[str, ...], int] = {}
    for start, n, copies in _tandem_runs(reference_words):
        gram = tuple(reference_words[start:start + n])
        allowed[gram] = max(allowed.get(gram, 0), copies)
    flagged: set[int] = set()
    for start, n, copies in _tandem_runs(words):
        tolerated = _TOLERATED_WORD_COPIES if n == 1 else 0
        extra = copies - max(tolerated, allowed.get(tuple(words[start:start + n]), 0))
        if extra > 0:
            end = start + (copies + 1) * n
            flagged.update(range(end - extra * n, end))
    return flagged


def unsupported_numbers(tokens: list[str], source: str) -> set[int]:
    available = numbers_in(source)
    flagged = set()
    for index, token in enumerate(tokens):
        if token[0].isdigit():
            value = canonical(token)
            if available[value] > 0:
                available[value] -= 1
            else:
                flagged.add(index)
    return flagged


def unsupported_names(tokens: list[tuple[str, int]], output: str, source: str, reference: str) -> set[int]:
    known = f"{source} {reference}".lower()
    flagged = set()
    for index, (token, offset) in enumerate(tokens):
        before = output[:offset].rstrip()
        sentence_initial = not before or before[-1] in _SENTENCE_OPENERS
        if token[:1].isupper() and not sentence_initial and not token.isupper() and token.lower() not in known:
            flagged.add(index)
    return flagged


def hallucinated(output: str, source: str, reference: str) -> tuple[int, int, dict[str, list[str]]]:
    """(flagged tokens, tokens, reasons: kind -> the flagged tokens)."""
    located = tokens_of(output)
    tokens = [token for token, _ in located]
    lowered = [token.lower() for token in tokens]
    reference_tokens = [token.lower() for token, _ in tokens_of(reference)]
    checks = {
        "oscillation": oscillation(lowered, reference_tokens),
        "excess_length": set(range(2 * len(reference_tokens), len(tokens))),
        "number_not_in_source": unsupported_numbers(tokens, source),
        "name_not_in_source": unsupported_names(located, output, source, reference),
    }
    flagged = set().union(*checks.values())
    reasons = {kind: [tokens[i] for i in sorted(found)] for kind, found in checks.items() if found}
    return len(flagged), len(tokens), reasons
