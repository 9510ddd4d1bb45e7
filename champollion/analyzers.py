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
from pathlib import Path

from champollion.cards import AnalyzerFile, CompoundRule, LanguageCard
from champollion.files import sha256_of_file

DEFAULT_FST_DIR = Path(__file__).resolve().parents[1] / "build" / "fst"
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
    """One loaded analyzer with its lookup caches. Lookups go through a lock:
    the batches of concurrent requests score in several threads."""
    path: Path
    sha256: str
    compounds: CompoundRule | None = None
    # How its analyses read: "giellalt" or "apertium" (see parse_analysis).
    tag_format: str = "giellalt"
    # Why results from this file are not what the card promises (see caveats_of).
    caveats: tuple[str, ...] = ()
    _transducer: object = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _accepted: dict[str, bool] = field(default_factory=dict, repr=False)
    _part_tags: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @classmethod
    def load(cls, path: Path, compounds: CompoundRule | None = None, tag_format: str = "giellalt") -> "Analyzer":
        import hfst  # optional dependency: imported only when an analyzer is used

        transducer = hfst.HfstInputStream(str(path)).read()
        return cls(path=path, sha256=sha256_of_file(path), compounds=compounds, tag_format=tag_format,
                   _transducer=transducer)

    def _lookup(self, form: str, limit: int) -> list[str]:
        with self._lock:
            results = self._transducer.lookup(form, max_number=limit)
        return [_FLAG_DIACRITIC.sub("", analysis) for analysis, _weight in results]

    @staticmethod
    def _case_forms(word: str) -> dict[str, None]:
        """As written, lower-cased, capitalised: the analyzers do not fold case."""
        return dict.fromkeys((word, word.lower(), word[:1].upper() + word[1:].lower()))

    def analyses(self, word: str, limit: int = -1) -> list[str]:
        """Analyses of the first case form that has any."""
        for form in self._case_forms(unicodedata.normalize("NFC", word)):
            found = self._lookup(form, limit)
            if found:
                return found
        return []

    def parsed(self, word: str, limit: int = -1) -> list["ParsedAnalysis"]:
        """Analyses as lemma + tags."""
        return [parse_analysis(raw, self.tag_format) for raw in self.analyses(word, limit)]

    def lemmas(self, word: str) -> set[str]:
        return {analysis.lemma for analysis in self.parsed(word)}

    def _has_analysis(self, form: str) -> bool:
        with self._lock:
            # 'raw' skips the wrapper's conversion of paths to strings.
            return bool(self._transducer.lookup(form, max_number=1, output="raw"))

    def accepts(self, word: str) -> bool:
        """At least one analysis (directly, or as a run-time compound) of an
        NFC word; cached per word type, since text is Zipfian and most tokens
        repeat."""
        known = self._accepted.get(word)
        if known is None:
            known = any(self._has_analysis(form) for form in self._case_forms(word)) or (
                self._is_compound(word.lower(), 0)
            )
            self._accepted[word] = known
        return known

    def rejected(self, words: list[str]) -> list[str]:
        """The words `accepts` refuses, in order (one call per sentence
        rather than per token: the per-token path is the cache)."""
        known = self._accepted
        rejected = []
        for word in words:
            accepted = known.get(word)
            if accepted is None:
                accepted = self.accepts(word)
            if not accepted:
                rejected.append(word)
        return rejected

    def _ends_with(self, form: str, tag: str) -> bool:
        key = (form, tag)
        if key not in self._part_tags:
            self._part_tags[key] = any(analysis.endswith(tag) for analysis in self._lookup(form, -1))
        return self._part_tags[key]

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

    def for_card(self, card: LanguageCard) -> Analyzer:
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
                self._loaded[card.code] = replace(analyzer, caveats=caveats_of(entry, analyzer, card.code))
            return self._loaded[card.code]

    def for_scoring(self, card: LanguageCard, warnings: list[str], if_missing: str, if_caveat: str) -> Analyzer | None:
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
