"""The contamination check (SPEC §11; seed 001 §5.1 few-shot leakage, §8.2):
is a corpus entry in the method's prompt, coaching data or any other text
the run carries about itself?

Rule. Every text is compared after folding away what a trivial disguise
changes (`champollion.core.text.fold_for_comparison`: NFKC, case folded,
punctuation and symbols as spaces, invisible characters dropped, whitespace
runs collapsed). Each text field of the run's meta (the prompt, the model
slug, the condition, ... whatever RunMeta carries) is one *item*, each
coaching string another, each `{source, target}` example a third kind (its
source and target together). An entry is contaminated when
  - its reference appears in an item and is at least MIN_REFERENCE_CHARS
    characters long (folded): matched with every space taken out on both
    sides, so that a reference split or joined by spaces, punctuation or
    zero-width characters is still found; a shorter reference ("OK",
    "Guardar") is a word or stock phrase a prompt may quote for its own
    reasons (instructions, glossaries), so alone it is no evidence; or
  - its source and its reference both appear in the same item as whole
    words, whatever their length (a few-shot example, or a coaching example
    whose source and target are the entry's). An entry whose source and
    reference are the same text (a name, a number) is judged by the first
    rule only.
A source alone is never contamination: monolingual sources are expected to be
public (seed 001 §5.1, indirect contamination). A contaminated entry
disqualifies the run (on a secret tier the gateway holds it for a
maintainer's review instead of answering with the verdict).

Beyond these matches, `reference_ngram_overlap` is the share of the
corpus's reference word 8-grams (words of the folded references, counted
with repetition) that also occur in one item; above 1% the run card warns.

Entries are checked one at a time as the gateway readies them, so no
reference is kept. The items are indexed once: suffix arrays over the items
joined by a newline (which folded text never contains, so no match spans two
items), one over their words padded with spaces (whole-word matches), one
with the spaces taken out, find any string in time logarithmic in the text's
size, and a set of hashed word 8-grams serves the overlap. A 100,000-entry
run against a 1 MB prompt stays linear in the number of entries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from pydivsufsort import divsufsort, sa_search

from champollion.core.text import fold_for_comparison

MIN_REFERENCE_CHARS = 16
NGRAM_WORDS = 8
OVERLAP_WARNING_SHARE = 0.01
# How the overlap warning starts (corpus-level cards leave it out).
OVERLAP_WARNING_PREFIX = "integrity.reference_ngram_overlap:"
# Ids (and reasons) listed in the card; the count covers them all.
MAX_LISTED_ENTRIES = 100
_SEPARATOR = "\n"

# One item of coaching data: a text, or a (source, target) example.
Coaching = str | tuple[str, str]


def _word_ngrams(text: str) -> list[int]:
    words = text.split(" ")
    return [hash(tuple(words[start:start + NGRAM_WORDS])) for start in range(len(words) - NGRAM_WORDS + 1)]


def _dense(folded: str) -> str:
    return folded.replace(" ", "")


@dataclass
class _Haystack:
    """Texts joined into one UTF-8 haystack with its suffix array. A UTF-8
    needle matches only at character boundaries, so a byte match is a
    character match."""
    haystack: bytes
    suffixes: np.ndarray
    # Byte offset where each item starts, ascending.
    starts: np.ndarray

    @classmethod
    def of(cls, texts: list[str]) -> "_Haystack":
        starts, offset = [], 0
        for text in texts:
            starts.append(offset)
            offset += len(text.encode("utf-8")) + len(_SEPARATOR)
        haystack = _SEPARATOR.join(texts).encode("utf-8")
        return cls(haystack, divsufsort(haystack), np.array(starts))

    def occurrences(self, needle: str) -> np.ndarray:
        """Byte offsets where `needle` starts, in no particular order."""
        count, left = sa_search(self.haystack, self.suffixes, needle.encode("utf-8"))
        return self.suffixes[left:left + count] if count else self.suffixes[:0]

    def items_of(self, offsets: np.ndarray) -> np.ndarray:
        """The sorted, distinct items the byte offsets fall in."""
        if len(self.starts) == 1:  # the usual case, a prompt alone: skip the sort
            return np.zeros(min(len(offsets), 1), dtype=np.int64)
        return np.unique(np.searchsorted(self.starts, offsets, side="right") - 1)


@dataclass
class _Index:
    """The items: their paths, their folded words padded with spaces (a
    needle padded alike matches whole words), the same without spaces, and
    their word 8-grams."""
    paths: list[str]
    words: _Haystack
    dense: _Haystack
    ngrams: set[int]

    @classmethod
    def of(cls, items: list[tuple[str, tuple[str, ...]]]) -> "_Index":
        """`items`: (path, folded texts) pairs; an example's texts are its
        source and target."""
        words = [_SEPARATOR.join(f" {part} " for part in parts) for _, parts in items]
        dense = [_SEPARATOR.join(_dense(part) for part in parts) for _, parts in items]
        ngrams = {gram for _, parts in items for part in parts for gram in _word_ngrams(part)}
        return cls([path for path, _ in items], _Haystack.of(words), _Haystack.of(dense), ngrams)


@dataclass
class ContaminationCheck:
    """Fed the corpus entry by entry (`add`), then read (`integrity`)."""
    index: _Index | None
    contaminated_count: int = 0
    contaminated_entries: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    reference_ngrams: int = 0
    ngrams_found: int = 0

    @classmethod
    def of(cls, prompt: str | None, coaching_data: Sequence[Coaching],
           fields: Sequence[tuple[str, str]] = ()) -> "ContaminationCheck":
        """`coaching_data` as RunMeta.coaching_data has it, in order, so that
        reasons name `meta.coaching_data[i]`; `fields`: the run's other
        texts as (path, text), e.g. ("meta.model_slug", ...)."""
        items = []
        if prompt is not None:
            items.append(("meta.prompt", (prompt,)))
        items.extend((path, (text,)) for path, text in fields)
        for position, item in enumerate(coaching_data):
            items.append((f"meta.coaching_data[{position}]", (item,) if isinstance(item, str) else tuple(item)))
        items = [(path, tuple(map(fold_for_comparison, parts))) for path, parts in items]
        items = [(path, parts) for path, parts in items if any(parts)]
        return cls(_Index.of(items) if items else None)

    def add(self, entry_id: str, source: str, reference: str, *extra_references: str) -> None:
        """One entry; every reference is checked (an entry with further
        references is contaminated by any of them)."""
        if self.index is None:
            return
        source = fold_for_comparison(source)
        references = [fold_for_comparison(text) for text in (reference, *extra_references)]
        reason = next(filter(None, (self._finding(source, text) for text in references)), None)
        if reason is not None:
            self.contaminated_count += 1
            if len(self.contaminated_entries) < MAX_LISTED_ENTRIES:
                self.contaminated_entries.append(entry_id)
                self.reasons.append(reason.format(entry_id=entry_id))
        for text in references:
            grams = _word_ngrams(text)
            self.reference_ngrams += len(grams)
            self.ngrams_found += sum(gram in self.index.ngrams for gram in grams)

    def _finding(self, source: str, reference: str) -> str | None:
        """Why the entry is contaminated (with an {entry_id} to fill), or
        None; `source` and `reference` folded."""
        index = self.index
        if not reference:
            return None  # nothing but punctuation: nothing to find
        if len(reference) >= MIN_REFERENCE_CHARS:
            found = index.dense.occurrences(_dense(reference))
            if not len(found):
                return None
            first = index.paths[index.dense.items_of(found.min(keepdims=True))[0]]
            return f"reference of entry {{entry_id}} appears verbatim in {first}"
        found = index.words.occurrences(f" {reference} ")
        if not len(found) or not source or source == reference:
            return None
        with_source = np.intersect1d(index.words.items_of(found),
                                     index.words.items_of(index.words.occurrences(f" {source} ")))
        if not len(with_source):
            return None
        return f"source and reference of entry {{entry_id}} appear together in {index.paths[with_source[0]]}"

    def overlap(self) -> float | None:
        """Share of reference word 8-grams found in the coaching text; None
        without coaching text or without a reference of 8 words."""
        if self.index is None or not self.reference_ngrams:
            return None
        return self.ngrams_found / self.reference_ngrams

    def integrity(self) -> dict:
        """The run card's `integrity` block, less submissions_with_fingerprint
        (the store's to fill)."""
        reasons = list(self.reasons)
        unlisted = self.contaminated_count - len(self.contaminated_entries)
        if unlisted:
            reasons.append(f"... and {unlisted} more contaminated entries")
        return {
            "disqualified": self.contaminated_count > 0,
            "reasons": reasons,
            "contaminated_entries": list(self.contaminated_entries),
            "contaminated_entry_count": self.contaminated_count,
            "reference_ngram_overlap": self.overlap(),
        }

    def warning(self) -> str | None:
        overlap = self.overlap()
        if overlap is None or overlap <= OVERLAP_WARNING_SHARE:
            return None
        return (f"{OVERLAP_WARNING_PREFIX} {overlap:.1%} of the references' word {NGRAM_WORDS}-grams "
                f"appear in meta.prompt or meta.coaching_data (above {OVERLAP_WARNING_SHARE:.0%})")
