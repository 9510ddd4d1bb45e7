"""Finite-state analyzers (HFST optimized-lookup `.hfstol` files), shared by
the families that need a language's morphology (structural, behavioral).

A language card lists analyzer file names in priority order (`fst.analyzer`);
they are resolved against the analyzer directories (`CHAMPOLLION_FST_DIR`,
several separated by ':'; default `build/fst`). The first file found is loaded,
once per process and only when a run needs it, and remembered with its SHA-256
so a run card can say exactly which analyzer scored it, and with its caveats:
a file the card marks as a test fragment, or whose SHA-256 is not the one the
card expects, is used but never silently.
"""
from __future__ import annotations

import os
import re
import threading
import unicodedata
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import not_
from pathlib import Path

from champollion.core.cards import AnalyzerFile, CompoundRule, LanguageCard
from champollion.core.files import sha256_of_file
from champollion.core.scripts import CardScripts
from champollion.core.type_cache import DEFAULT_LIMIT, TypeCache

DEFAULT_FST_DIR = Path(__file__).resolve().parents[2] / "build" / "fst"
# Flag diacritics (@P.PERS.1@, ...): the Python binding returns them inside
# analyses of optimized-lookup files; they are bookkeeping, not analysis.
_FLAG_DIACRITIC = re.compile(r"@[PNRDCU]\.[^@]*@")


def analyzer_dirs() -> list[Path]:
    configured = os.environ.get("CHAMPOLLION_FST_DIR")
    if configured:
        return [Path(part) for part in configured.split(os.pathsep) if part]
    return [DEFAULT_FST_DIR]


class AnalyzerMissing(LookupError):
    """The card declares analyzers but none can be loaded (no file, or no hfst)."""


@dataclass
class Analyzer:
    """One loaded analyzer with its per-type lookup caches (bounded, per
    process). Lookups go through a lock, taken once for all the new word types
    of a sentence: the batches of concurrent requests score in several threads."""
    path: Path
    sha256: str
    compounds: CompoundRule | None = None
    # How its analyses read: "giellalt" or "apertium" (see parse_analysis).
    tag_format: str = "giellalt"
    # Why results from this file are not what the card promises (see caveats_of).
    caveats: tuple[str, ...] = ()
    _transducer: object = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Word types cached per analyzer (bounded; see TypeCache).
    cache_limit: int = field(default=DEFAULT_LIMIT, repr=False)
    _accepted: TypeCache = field(init=False, repr=False)
    _part_tags: TypeCache = field(init=False, repr=False)
    _all_analyses: TypeCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._accepted = TypeCache(self._accepts_each, self.cache_limit)
        self._part_tags = TypeCache(self._ends_with_each, self.cache_limit)
        # Lists of analyses are bigger than verdicts: fewer are kept.
        self._all_analyses = TypeCache(self._analyses_each, max(2, self.cache_limit // 5))

    @property
    def name(self) -> str:
        return self.path.name

    @classmethod
    def load(cls, path: Path, compounds: CompoundRule | None = None, tag_format: str = "giellalt",
             cache_limit: int = DEFAULT_LIMIT) -> "Analyzer":
        import hfst  # optional dependency: imported only when an analyzer is used

        transducer = hfst.HfstInputStream(str(path)).read()
        return cls(path=path, sha256=sha256_of_file(path), compounds=compounds, tag_format=tag_format,
                   _transducer=transducer, cache_limit=cache_limit)

    def _lookup(self, form: str, limit: int) -> list[str]:
        with self._lock:
            results = self._transducer.lookup(form, max_number=limit)
        return [_FLAG_DIACRITIC.sub("", analysis) for analysis, _weight in results]

    @staticmethod
    def _case_forms(word: str) -> dict[str, None]:
        """As written, lower-cased, capitalised: the analyzers do not fold case."""
        return dict.fromkeys((word, word.lower(), word[:1].upper() + word[1:].lower()))

    def _first_analyses(self, word: str, limit: int) -> list[str]:
        for form in self._case_forms(word):
            found = self._lookup(form, limit)
            if found:
                return found
        return []

    def _analyses_each(self, words: list[str]) -> list[tuple[str, ...]]:
        return [tuple(self._first_analyses(word, -1)) for word in words]

    def analyses(self, word: str, limit: int = -1) -> list[str]:
        """Analyses of the first case form that has any (all of them cached
        per word type; a limited lookup is not)."""
        word = unicodedata.normalize("NFC", word)
        if limit < 0:
            return list(self._all_analyses.get(word))
        return self._first_analyses(word, limit)

    def parsed(self, word: str, limit: int = -1) -> list["ParsedAnalysis"]:
        """Analyses as lemma + tags."""
        return [parse_analysis(raw, self.tag_format) for raw in self.analyses(word, limit)]

    def lemmas(self, word: str) -> set[str]:
        return {analysis.lemma for analysis in self.parsed(word)}

    def _accepts_each(self, words: list[str]) -> list[bool]:
        """Uncached acceptance of distinct word types: the direct lookups of a
        whole batch under one lock, then run-time compounds for the rest."""
        lookup = self._transducer.lookup
        with self._lock:
            # 'raw' skips the wrapper's conversion of paths to strings.
            direct = [any(lookup(form, max_number=1, output="raw") for form in self._case_forms(word))
                      for word in words]
        if self.compounds is None:
            return direct
        return [known or self._is_compound(word.lower(), 0) for word, known in zip(words, direct)]

    def reading(self, word: str) -> str:
        """The form looked up for `word` (see ReadingAnalyzer): itself."""
        return word

    @property
    def reads(self) -> str | None:
        """What is transliterated before lookup, for signatures (see ReadingAnalyzer): nothing."""
        return None

    def accepts(self, word: str) -> bool:
        """At least one analysis (directly, or as a run-time compound) of an
        NFC word; cached per word type, since text is Zipfian and most tokens
        repeat."""
        return self._accepted.get(word)

    def rejected(self, words: list[str]) -> list[str]:
        """The words `accepts` refuses, in order: one cache pass for a whole
        sentence, and one lookup per word type not seen before."""
        flags = self._accepted.get_many(words)
        if all(flags):
            return []
        return list(compress(words, map(not_, flags)))

    def _ends_with_each(self, keys: list[tuple[str, str]]) -> list[bool]:
        return [any(analysis.endswith(tag) for analysis in self._lookup(form, -1)) for form, tag in keys]

    def _ends_with(self, form: str, tag: str) -> bool:
        return self._part_tags.get((form, tag))

    def _is_compound(self, word: str, parts: int) -> bool:
        """`parts` left parts are already split off before `word`."""
        rule = self.compounds
        if rule is None:
            return False
        if parts > 0 and self._ends_with(word, rule.right_tag):
            return True
        if parts + 1 >= rule.max_parts:
            return False
        for cut in range(rule.min_part_chars, len(word) - rule.min_part_chars + 1):
            if self._ends_with(word[:cut], rule.left_tag) and self._is_compound(word[cut:], parts + 1):
                return True
        return False


class ReadingAnalyzer:
    """An analyzer seen through its card's transliterations: a word written in
    a script the card transliterates (Plains Cree syllabics) is looked up as
    its transliteration (SRO), so the same text scores the same in either
    script; other words are looked up as written. Answers as Analyzer does,
    and names the word as written wherever it lists words (`rejected`)."""

    def __init__(self, analyzer: Analyzer, scripts: CardScripts):
        self.analyzer = analyzer
        self.scripts = scripts
        # Transliterating costs more than a lookup: once per word type.
        self._readings: TypeCache[str, str] = TypeCache(
            lambda words: [scripts.reading(word) for word in words], analyzer.cache_limit)

    def __getattr__(self, name: str):
        return getattr(self.analyzer, name)  # name, sha256, caveats, tag_format, ...

    @property
    def reads(self) -> str | None:
        return self.scripts.reading_signature()

    def reading(self, word: str) -> str:
        return self._readings.get(unicodedata.normalize("NFC", word))

    def analyses(self, word: str, limit: int = -1) -> list[str]:
        return self.analyzer.analyses(self.reading(word), limit)

    def parsed(self, word: str, limit: int = -1) -> list[ParsedAnalysis]:
        return self.analyzer.parsed(self.reading(word), limit)

    def lemmas(self, word: str) -> set[str]:
        return self.analyzer.lemmas(self.reading(word))

    def accepts(self, word: str) -> bool:
        return self.analyzer.accepts(self.reading(word))

    def rejected(self, words: list[str]) -> list[str]:
        flags = self.analyzer._accepted.get_many(self._readings.get_many(words))
        return list(compress(words, map(not_, flags)))


def caveats_of(entry: AnalyzerFile, analyzer: Analyzer, code: str) -> tuple[str, ...]:
    """What a run card must say about scoring with this file: the card marks
    it as a test fragment, or its SHA-256 is not the one the card expects."""
    found = []
    if entry.test_fragment:
        found.append(f"{analyzer.name} is the {code} card's test fragment, not a full analyzer")
    if entry.sha256 and entry.sha256 != analyzer.sha256:
        found.append(f"{analyzer.path} has SHA-256 {analyzer.sha256}, not the {entry.sha256} the {code} card "
                     "expects: a different analyzer than the card's")
    return tuple(found)


class AnalyzerRegistry:
    """One analyzer per language per process, loaded on first use."""

    def __init__(self, directories: list[Path] | None = None):
        self.directories = directories
        self._loaded: dict[str, Analyzer] = {}
        self._lock = threading.Lock()

    def candidates(self, card: LanguageCard) -> list[tuple[AnalyzerFile, Path]]:
        directories = self.directories if self.directories is not None else analyzer_dirs()
        return [(entry, directory / entry.file) for entry in card.fst.analyzers for directory in directories]

    def for_card(self, card: LanguageCard) -> Analyzer | ReadingAnalyzer:
        with self._lock:
            if card.code not in self._loaded:
                candidates = self.candidates(card)
                found = next(((entry, path) for entry, path in candidates if path.is_file()), None)
                if found is None:
                    looked = ", ".join(str(path) for _, path in candidates)
                    raise AnalyzerMissing(f"no analyzer for {card.code}: looked for {looked}")
                entry, path = found
                try:
                    analyzer = Analyzer.load(path, card.fst.compounds, card.fst.tag_format)
                except ImportError as error:
                    raise AnalyzerMissing(f"no analyzer for {card.code}: {path} needs the hfst package "
                                          f"(the fst extra), which is not installed ({error.name})") from None
                analyzer = replace(analyzer, caveats=caveats_of(entry, analyzer, card.code))
                scripts = CardScripts(card.orthography.scripts)
                self._loaded[card.code] = ReadingAnalyzer(analyzer, scripts) if scripts.transliterations else analyzer
            return self._loaded[card.code]

    def for_scoring(self, card: LanguageCard, warnings: list[str], if_missing: str,
                    if_caveat: str) -> Analyzer | ReadingAnalyzer | None:
        """The card's analyzer for a batch, or None when it names none or it
        cannot be loaded; what the run card must know goes into `warnings`,
        each ending in what it means for the family's metrics."""
        if not card.fst.analyzers:
            return None
        try:
            analyzer = self.for_card(card)
        except AnalyzerMissing as error:
            warnings.append(f"{error}; {if_missing}")
            return None
        warnings.extend(f"{caveat}: {if_caveat}" for caveat in analyzer.caveats)
        return analyzer

    def loaded(self) -> dict[str, Analyzer]:
        return dict(self._loaded)


# Two analysis formats, named by the card's `fst.tag_format`:
#   giellalt  "PV/e+nipâw+V+AI+Cnj+1Sg"  (prefix tags contain '/')
#   apertium  "casa<n><f><pl>"
_APERTIUM_TAG = re.compile(r"<([^<>]+)>")


@dataclass(frozen=True)
class ParsedAnalysis:
    raw: str
    lemma: str
    tags: tuple[str, ...]


def parse_analysis(raw: str, tag_format: str) -> ParsedAnalysis:
    if tag_format == "apertium":
        lemma = raw.split("<", 1)[0]
        return ParsedAnalysis(raw, lemma, tuple(_APERTIUM_TAG.findall(raw)))
    if tag_format == "giellalt":
        parts = raw.split("+")
        prefixes = [part for part in parts if "/" in part]
        rest = [part for part in parts if "/" not in part]
        lemma = rest[0] if rest else ""
        return ParsedAnalysis(raw, lemma, tuple(prefixes + rest[1:]))
    raise ValueError(f"unknown fst.tag_format {tag_format!r} (giellalt or apertium)")
