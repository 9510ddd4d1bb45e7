"""`champollion.core.words.words_of` for a stream of texts, once per chunk type.

words_of runs several regular expressions over every text; on running text
that is most of the structural family's time (more than the FST lookups). No
word, and nothing words_of skips except a {placeholder}, spans whitespace, so
a text's words are the words of its whitespace-separated chunks in order. The
chunks are Zipfian like the words ("the", "said,", "it."), so each distinct
chunk is split once per process (bounded cache) and a text costs a split and
dictionary lookups. A text with a '{' goes to words_of whole: "{count, plural,
...}" spans spaces; so does one with a NARROW NO-BREAK SPACE where hyphenated
forms are kept (syllabics ᐁ ᓂᐹᔮᐣ is one word). tests/test_fst_cache.py checks
the two agree.
"""
from __future__ import annotations

import unicodedata
from itertools import chain

from champollion.core.type_cache import DEFAULT_LIMIT, TypeCache
from champollion.core.words import words_of


class TextWords:
    def __init__(self, keep_hyphenated: bool, limit: int = DEFAULT_LIMIT, extra_chars: str = ""):
        self.keep_hyphenated = keep_hyphenated
        self.extra_chars = extra_chars
        self._chunks: TypeCache[str, tuple[str, ...]] = TypeCache(self._split_each, limit)

    def _split_each(self, chunks: list[str]) -> list[tuple[str, ...]]:
        return [tuple(words_of(chunk, self.keep_hyphenated, self.extra_chars)) for chunk in chunks]

    def __call__(self, text: str) -> list[str]:
        """What words_of(text, keep_hyphenated, extra_chars) gives."""
        text = unicodedata.normalize("NFC", text)
        if "{" in text or (self.keep_hyphenated and "\u202f" in text):
            return words_of(text, self.keep_hyphenated, self.extra_chars)
        return list(chain.from_iterable(self._chunks.get_many(text.split())))
