"""The contamination check (SPEC §11; seed 001 §5.1 few-shot leakage, §8.2):
is a corpus entry in the method's prompt, coaching data or any other text
the run carries about itself?

Rule. Every text is compared on its skeleton (`champollion.core.skeleton`:
HTML entities decoded, NFKD with combining marks stripped, case folded,
default-ignorable characters and variation selectors dropped, blank-looking
letters such as U+3164 made spaces, UTS #39 confusables mapped to their
prototype, punctuation and symbols as spaces, whitespace runs collapsed), so
that Cyrillic look-alikes, stripped or added accents, joiners between letters
and entities disguise nothing. Each text field of the run's meta (the
prompt, the model slug, the condition, ... whatever RunMeta carries) is one
*item*, each coaching string another, each `{source, target}` example a
third kind (its source and target together), and each glossary term of at
least GLOSSARY_MIN_WORDS words (either side) a fourth (shorter terms are
terminology, often the benchmark's own, and may be whole short entries). An
entry is contaminated when
  - its reference is at least MIN_REFERENCE_CHARS characters long (its
    skeleton) and appears, with every space taken out on both sides (so that
    a reference split or joined by spaces, punctuation or zero-width
    characters is still found): in an item; in reverse character order or
    reverse word order in an item; or across items, in the concatenation of
    every item in order or of any two items in either order (a reference
    split over the model slug and the condition); a shorter reference ("OK",
    "Guardar") is a word or stock phrase a prompt may quote for its own
    reasons (instructions, glossaries), so alone it is no evidence; or
  - its source and its reference both appear in the same item (glossary
    terms aside) as whole words, whatever their length (a few-shot example,
    or a coaching example whose source and target are the entry's). An
    entry whose source and reference are the same text (a name, a number)
    is judged by the first rule only.
A source alone is never contamination: monolingual sources are expected to be
public (seed 001 §5.1, indirect contamination). A contaminated entry
disqualifies the run (on a secret tier the gateway holds it for a
maintainer's review instead of answering with the verdict).

Beyond these matches, `reference_ngram_overlap` is the share of the
corpus's reference word 8-grams (words of the references' skeletons, counted
with repetition) that also occur in one item; above 1% the run card warns.

Entries are checked one at a time as the gateway readies them, so no
reference is kept. The items are indexed once: suffix arrays find any string
in time logarithmic in the text's size, one over the items' words padded
with spaces joined by a newline (which a skeleton never contains, so no
match spans two items: whole-word matches), one over the items with the
spaces taken out followed by the joins across items (each item cut to its
first and last SPAN_CHARS characters there, since a match across a join
lies that close to it: the joins add little to a large prompt); and a set
of hashed word 8-grams serves the overlap. A 100,000-entry run against a
1 MB prompt stays linear in the number of entries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from pydivsufsort import divsufsort, sa_search

from champollion.core.skeleton import skeleton
from champollion.core.text import fold_for_comparison

MIN_REFERENCE_CHARS = 16
NGRAM_WORDS = 8
OVERLAP_WARNING_SHARE = 0.01
# How the overlap warning starts (corpus-level cards leave it out).
OVERLAP_WARNING_PREFIX = "integrity.reference_ngram_overlap:"
# Ids (and reasons) listed in the card; the count covers them all.
MAX_LISTED_ENTRIES = 100
# A glossary term with this many words on either side is an item.
GLOSSARY_MIN_WORDS = 4
# A reference split across items is found when it is at most this long (its
# skeleton, spaces out); every item's first and last SPAN_CHARS characters
# take part in the joins.
SPAN_CHARS = 4096
# Items paired two by two (in both orders) for the joins: the first ones.
MAX_PAIRED_ITEMS = 16
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
    # Byte offset where each text starts, ascending.
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
        """The sorted, distinct texts the byte offsets fall in."""
        if len(self.starts) == 1:  # the usual case, a prompt alone: skip the sort
            return np.zeros(min(len(offsets), 1), dtype=np.int64)
        return np.unique(np.searchsorted(self.starts, offsets, side="right") - 1)


def _ends(text: str) -> str:
    """The text as the joins need it: its first and last SPAN_CHARS
    characters, cut apart by a separator when it is longer."""
    return text if len(text) <= 2 * SPAN_CHARS else f"{text[:SPAN_CHARS]}{_SEPARATOR}{text[-SPAN_CHARS:]}"


@dataclass
class _Joins:
    """The texts of the joins across items, after the items in the dense
    haystack: the concatenation of every item in order, and each ordered
    pair of the first MAX_PAIRED_ITEMS items. `segments` maps a byte offset
    of the haystack (from `first`, the first join's text) to the item whose
    characters lie there."""
    texts: list[str]
    segment_starts: np.ndarray
    segment_items: np.ndarray

    @classmethod
    def of(cls, items: list[str], offset: int) -> "_Joins":
        """`items`: each item's dense text; `offset`: the byte offset where
        the joins begin in the haystack."""
        if len(items) < 2:
            return cls([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        sequences = [list(range(len(items)))]
        paired = range(min(len(items), MAX_PAIRED_ITEMS))
        sequences += [[first, second] for first in paired for second in paired
                      if first != second and second != first + 1]  # adjacent pairs are in the concatenation
        texts, starts, owners = [], [], []
        for sequence in sequences:
            text = []
            for position, item in enumerate(sequence):
                piece = _ends(items[item])
                if len(sequence) == 2:  # a pair: the first's end, the second's start
                    piece = piece[-SPAN_CHARS:] if position == 0 else piece[:SPAN_CHARS]
                starts.append(offset)
                owners.append(item)
                offset += len(piece.encode("utf-8"))
                text.append(piece)
            texts.append("".join(text))
            offset += len(_SEPARATOR)
        return cls(texts, np.array(starts), np.array(owners))

    def items_spanned(self, start: int, length: int) -> list[int]:
        """The items a match of `length` bytes at `start` runs over, in order."""
        first = np.searchsorted(self.segment_starts, start, side="right") - 1
        last = np.searchsorted(self.segment_starts, start + length - 1, side="right") - 1
        return [int(item) for item in self.segment_items[first:last + 1]]


_ORDERS = ("", "in reverse character order ", "in reverse word order ")


@dataclass
class _Index:
    """The items: their paths, their skeletons' words padded with spaces (a
    needle padded alike matches whole words; glossary terms left out), the
    same without spaces (as written, in reverse character order, in reverse
    word order) followed by the joins across items, and their word 8-grams."""
    paths: list[str]
    word_paths: list[str]
    words: _Haystack | None
    dense: _Haystack
    joins: _Joins
    ngrams: set[int]

    @classmethod
    def of(cls, items: list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]) -> "_Index":
        """`items`: (path, texts, their skeletons, paired); an example's
        texts are its source and target; `paired`: whether the item counts
        for the source-and-reference rule."""
        paired = [(path, parts) for path, _, parts, counts in items if counts]
        words = [_SEPARATOR.join(f" {part} " for part in parts) for _, parts in paired]
        dense = [_SEPARATOR.join(_dense(part) for part in parts) for _, _, parts, _ in items]
        # Reversed from the text as written: a character's skeleton may be two (m is rn).
        dense += [_SEPARATOR.join(_dense(skeleton(text[::-1])) for text in texts) for _, texts, _, _ in items]
        dense += [_SEPARATOR.join("".join(reversed(part.split(" "))) for part in parts) for _, _, parts, _ in items]
        offset = sum(len(text.encode("utf-8")) + len(_SEPARATOR) for text in dense)
        joins = _Joins.of(["".join(_dense(part) for part in parts) for _, _, parts, _ in items], offset)
        ngrams = {gram for _, _, parts, _ in items for part in parts for gram in _word_ngrams(part)}
        return cls([path for path, _, _, _ in items], [path for path, _ in paired],
                   _Haystack.of(words) if words else None, _Haystack.of(dense + joins.texts), joins, ngrams)

    def dense_finding(self, needle: str) -> str | None:
        """Where the dense `needle` is: "verbatim in PATH", "in reverse
        character order in PATH", ..., "split across PATH + PATH"; None."""
        found = self.dense.occurrences(needle)
        if not len(found):
            return None
        # The first text it is in: an item as written before one reversed, before a join.
        text = int(self.dense.items_of(found)[0])
        count = len(self.paths)
        if text < len(_ORDERS) * count:
            order, item = divmod(text, count)
            return f"{_ORDERS[order] or 'verbatim '}in {self.paths[item]}"
        first = int(found[np.searchsorted(self.dense.starts, found, side="right") - 1 == text].min())
        spanned = self.joins.items_spanned(first, len(needle.encode("utf-8")))
        return f"split across {' + '.join(self.paths[item] for item in spanned)}"


def _long(reference: str, raw_reference: str) -> bool:
    """Whether the reference is long enough to be evidence alone: at least
    MIN_REFERENCE_CHARS characters once folded (fold_for_comparison: its
    skeleton may be longer, m being rn, or shorter, marks stripped)."""
    if len(reference) < MIN_REFERENCE_CHARS // 4:
        return False  # decided without folding it again
    if len(reference) >= MIN_REFERENCE_CHARS * 4:
        return True  # a character's skeleton is at most a few
    return len(fold_for_comparison(raw_reference)) >= MIN_REFERENCE_CHARS


def _glossary_items(glossary: Sequence[tuple[str, str]]) -> list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
    """The glossary's terms of GLOSSARY_MIN_WORDS words or more (either side)."""
    items = []
    for position, (source, target) in enumerate(glossary):
        parts = (skeleton(source), skeleton(target))
        if max(len(part.split()) for part in parts) >= GLOSSARY_MIN_WORDS:
            items.append((f"glossary[{position}]", (source, target), parts, False))
    return items


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
           fields: Sequence[tuple[str, str]] = (), glossary: Sequence[tuple[str, str]] = ()) -> "ContaminationCheck":
        """`coaching_data` as RunMeta.coaching_data has it, in order, so that
        reasons name `meta.coaching_data[i]`; `fields`: the run's other
        texts as (path, text), e.g. ("meta.model_slug", ...); `glossary`:
        the run's glossary as (source, target) terms, in order."""
        items = []
        if prompt is not None:
            items.append(("meta.prompt", (prompt,)))
        items.extend((path, (text,)) for path, text in fields)
        for position, item in enumerate(coaching_data):
            items.append((f"meta.coaching_data[{position}]", (item,) if isinstance(item, str) else tuple(item)))
        items = [(path, parts, tuple(map(skeleton, parts)), True) for path, parts in items]
        items += _glossary_items(glossary)
        items = [item for item in items if any(item[2])]
        return cls(_Index.of(items) if items else None)

    def add(self, entry_id: str, source: str, reference: str, *extra_references: str) -> None:
        """One entry; every reference is checked (an entry with further
        references is contaminated by any of them)."""
        if self.index is None:
            return
        folded_source = skeleton(source)
        texts = (reference, *extra_references)
        references = [skeleton(text) for text in texts]
        reason = next(filter(None, (self._finding(folded_source, folded, text)
                                    for folded, text in zip(references, texts))), None)
        if reason is not None:
            self.contaminated_count += 1
            if len(self.contaminated_entries) < MAX_LISTED_ENTRIES:
                self.contaminated_entries.append(entry_id)
                self.reasons.append(reason.format(entry_id=entry_id))
        for text in references:
            grams = _word_ngrams(text)
            self.reference_ngrams += len(grams)
            self.ngrams_found += sum(gram in self.index.ngrams for gram in grams)

    def _finding(self, source: str, reference: str, raw_reference: str) -> str | None:
        """Why the entry is contaminated (with an {entry_id} to fill), or
        None; `source` and `reference` skeletons, `raw_reference` as sent."""
        index = self.index
        if not reference:
            return None  # nothing but punctuation: nothing to find
        if _long(reference, raw_reference):
            where = index.dense_finding(_dense(reference))
            return None if where is None else f"reference of entry {{entry_id}} appears {where}"
        if index.words is None:
            return None
        found = index.words.occurrences(f" {reference} ")
        if not len(found) or not source or source == reference:
            return None
        with_source = np.intersect1d(index.words.items_of(found),
                                     index.words.items_of(index.words.occurrences(f" {source} ")))
        if not len(with_source):
            return None
        return (f"source and reference of entry {{entry_id}} appear together in "
                f"{index.word_paths[with_source[0]]}")

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
