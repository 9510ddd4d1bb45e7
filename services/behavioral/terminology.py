"""Glossary terms: which rendering an output uses (SPEC §2.4).

A term applies to an entry whose source contains the source term (whole
words, any case), as written or lemmatised ("houses" -> "house", with the
source language's lookup lemmatizer). The output adheres when it contains the prescribed target
or an alternative as whole words, or — for one-word renderings — a word the
target analyzer lemmatises to that rendering's lemma (an inflected form).
"""
from __future__ import annotations

import re
from functools import lru_cache

from services.contract import Term


@lru_cache(maxsize=4096)
def _phrase(text: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(text.lower())}(?!\w)")


_WORD = re.compile(r"\w+")


def lemmatised(text: str, lemmas: dict[str, str]) -> str:
    """The text lower-cased with every word replaced by its lemma."""
    return _WORD.sub(lambda match: lemmas.get(match.group(), match.group()), text.lower())


def applies(term: Term, source: str, source_lemmatised: str) -> bool:
    pattern = _phrase(term.source)
    return pattern.search(source.lower()) is not None or pattern.search(source_lemmatised) is not None


def rendering_used(term: Term, output: str, output_lemmas: list[set[str]], lemmas_of) -> int | None:
    """Index into term.renderings of the first rendering the output uses, or
    None. `output_lemmas` are the lemmas of each output word; `lemmas_of`
    gives a rendering's lemmas (empty without an analyzer)."""
    lowered = output.lower()
    for index, rendering in enumerate(term.renderings):
        if _phrase(rendering).search(lowered):
            return index
    for index, rendering in enumerate(term.renderings):
        if " " not in rendering.strip():
            wanted = lemmas_of(rendering)
            if wanted and any(wanted & lemmas for lemmas in output_lemmas):
                return index
    return None
