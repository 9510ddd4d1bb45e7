"""Code-switching: output words in the source language (SPEC §2.4).

A word counts when it is written in Latin letters in a target that is not
(e.g. English inside Cree syllabics or Korean), or when it is a word of the
source language's lexicon; never when the target's analyzer accepts it, the
target's lexicon has it, or the card lists it as a loanword. A capitalised
word that also stands in the source is a name carried over, not a switch.

Lemma tables miss words that never inflect (German "fast", "fort") and many
nouns ("Veteran", "Munition"); where spaCy has corpus word probabilities for
both languages (de, el, en, es), a word as written is also the target's when
it is at least 1/e as frequent in target text as in source text
(TARGET_PROBABILITY_MARGIN): German "fast" is (-7.9 vs -9.1), "the" is not
(-9.4 vs -3.5). Corpus lists alone cannot be used: the German one holds
"the" and "file", from English quoted on the web.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

# Natural-log probability a target word may fall short of the same word's in the source language.
TARGET_PROBABILITY_MARGIN = 1.0


def _is_latin(word: str) -> bool:
    return any(unicodedata.name(char, "").startswith("LATIN") for char in word)


@dataclass
class CodeSwitchDetector:
    source_words: frozenset[str] | None
    target_words: frozenset[str] | None
    loanwords: frozenset[str]
    target_uses_latin: bool
    accepts: object = None  # the target analyzer's `accepts`, when there is one
    # Word as written -> log probability in each language's corpus (empty: unknown).
    target_probabilities: dict[str, float] = field(default_factory=dict)
    source_probabilities: dict[str, float] = field(default_factory=dict)

    def _frequent_in_target(self, word: str) -> bool:
        target = self.target_probabilities.get(word)
        if target is None or not self.source_probabilities:
            return False
        source = self.source_probabilities.get(word)
        return source is None or target >= source - TARGET_PROBABILITY_MARGIN

    def is_target_word(self, word: str) -> bool:
        lowered = word.lower()
        if lowered in self.loanwords:
            return True
        if self.target_words is not None and lowered in self.target_words:
            return True
        if self._frequent_in_target(word):
            return True
        return self.accepts is not None and self.accepts(word)

    def switched(self, words: list[str], source: str) -> list[str]:
        found = []
        for word in words:
            if word[:1].isupper() and word in source:
                continue
            if not self.target_uses_latin and _is_latin(word):
                if word.lower() not in self.loanwords:
                    found.append(word)
                continue
            if self.source_words is not None and word.lower() in self.source_words and not self.is_target_word(word):
                found.append(word)
        return found
