"""Structural metrics of one batch: FST acceptance (micro average over
words), orthographic accuracy (card rules) and morphological accuracy (gold
annotations), each as [numerator, denominator] statistics for the gateway."""
from __future__ import annotations

from functools import cache
from importlib import metadata

from champollion import __version__
from champollion.core.analyzers import Analyzer, AnalyzerRegistry, ReadingAnalyzer
from champollion.core.cards import LanguageCard
from champollion.core.plugins import STANDARDS_PACKAGE, discover, statistics
from champollion.core.scripts import script_name
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
)
from services.structural.morphology import matched_gold
from services.structural.orthography import Orthography
from services.structural.text_words import TextWords

# Rejected words listed per entry, at most (the counts are always complete).
MAX_LISTED = 20


@cache  # reads the package's metadata file: once per process, not per batch
def _hfst_version() -> str:
    try:
        return metadata.version("hfst")
    except metadata.PackageNotFoundError:
        return "not installed"


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


class StructuralScorer:
    name = "structural"
    version = __version__
    metrics = ("fst_acceptance_rate", "morphological_accuracy", "orthographic_accuracy")

    def __init__(self, languages: list[str] | None = None, registry: AnalyzerRegistry | None = None):
        self._languages = sorted(languages or [])
        self.registry = registry or AnalyzerRegistry()
        # Language code -> discovered eval-standard plugins, built once.
        self._plugins: dict = {}
        # Words of predictions, per (keep_hyphenated, extra word characters)
        # (cached per chunk type).
        self._words: dict[tuple[bool, str], TextWords] = {}
        # Language code -> its card's orthographic rules.
        self._orthographies: dict[str, Orthography] = {}

    def languages(self) -> list[str]:
        return self._languages

    def components(self) -> list[ComponentInfo]:
        found = [ComponentInfo(kind="library", name="hfst", version=_hfst_version())]
        for code, analyzer in sorted(self.registry.loaded().items()):
            found.append(ComponentInfo(kind="analyzer", name=f"{code}:{analyzer.name}",
                                       version=_hfst_version(), detail=f"sha256:{analyzer.sha256}"))
        return found

    def _plugins_for(self, card: LanguageCard, analyzer: Analyzer | None):
        if card.code not in self._plugins:
            self._plugins[card.code] = discover(card, analyzer)
        return self._plugins[card.code]

    def _run_plugins(self, card, analyzer, entries, outputs, signatures, warnings, context: BatchContext) -> None:
        """Each asked-for plugin metric, verdict and reasons per entry; a
        plugin that fails on any entry gives no values for the batch (and a
        warning)."""
        discovered = self._plugins_for(card, analyzer)
        warnings.extend(discovered.problems)
        for plugin in discovered.plugins:
            if not context.wants(plugin.metric):
                continue
            try:
                verdicts = [plugin.score_entry(entry) for entry in entries]
            except Exception as error:
                warnings.append(f"plugin {plugin.id} failed: {type(error).__name__}: {error}; "
                                f"{plugin.metric} keeps its universal value")
                continue
            for output, verdict in zip(outputs, verdicts):
                output.values[plugin.metric] = verdict.value
                output.values[plugin.verdict_key] = verdict.verdict
                output.values[f"{plugin.id}_reasons"] = list(verdict.reasons)
                output.stats[plugin.metric] = statistics(verdict)
            # Plugins see words through the analyzer: its transliteration is theirs too.
            reads = f"|translit:{analyzer.reads}" if analyzer is not None and analyzer.reads else ""
            signatures[plugin.metric] = (f"standard:{STANDARDS_PACKAGE}.{card.code}.{type(plugin).__name__}"
                                         f"{reads}|version:{__version__}")

    def _orthography(self, card: LanguageCard) -> Orthography:
        if card.code not in self._orthographies:
            self._orthographies[card.code] = Orthography(card)
        return self._orthographies[card.code]

    def _splitter(self, keep_hyphenated: bool, extra_chars: str) -> TextWords:
        key = (keep_hyphenated, extra_chars)
        if key not in self._words:
            self._words[key] = TextWords(keep_hyphenated, extra_chars=extra_chars)
        return self._words[key]

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        card = context.target
        warnings: list[str] = []
        wants_fst, wants_morphology, wants_orthography = (context.wants(metric_id) for metric_id in self.metrics)
        # Plugins produce other families' metrics: they may run when the
        # selection holds a metric that is not one of this family's.
        plugins_may_run = context.plugins and bool(card.eval_metrics) and (
            context.metrics is None or not context.metrics <= set(self.metrics))
        analyzer = None
        if wants_fst or wants_morphology or plugins_may_run:
            analyzer = self.registry.for_scoring(
                card, warnings, if_missing="fst_acceptance_rate and morphological_accuracy are null",
                if_caveat="fst_acceptance_rate and morphological_accuracy are not representative")
        orthography = self._orthography(card)
        # The card's letters split words for every metric; its rules check them for one.
        checked_orthography = orthography if wants_orthography and orthography else None
        split_words = self._splitter(card.words.keep_hyphenated, orthography.extra_chars)
        unruled: dict[str, None] = {}
        outputs = []
        for entry in entries:
            words = split_words(entry.prediction) if analyzer is not None or checked_orthography else []
            values: dict = {}
            stats: dict = {}
            if analyzer is not None and wants_fst:
                self._fst_acceptance(analyzer, words, values, stats)
            if analyzer is not None and wants_morphology:
                if entry.morphology:
                    self._morphology(analyzer, entry, words, values, stats)
                else:
                    # Every entry carries every metric's statistics; without
                    # gold this one adds nothing to the corpus rate.
                    stats["morphological_accuracy"] = [0.0, 0.0]
            if checked_orthography:
                self._orthographic(checked_orthography, words, values, stats, unruled)
            outputs.append(EntryOutput(id=entry.id, values=values, stats=stats))
        warnings.extend(
            f"orthographic_accuracy leaves out words in {code} ({script_name(code)}): the {card.code} card has "
            "no orthographic rule for that script" for code in unruled)
        signatures = self._signatures(analyzer if wants_fst or wants_morphology else None, checked_orthography,
                                     context)
        if plugins_may_run:
            self._run_plugins(card, analyzer, entries, outputs, signatures, warnings, context)
        return BatchOutput(entries=outputs, signatures=signatures, warnings=warnings)

    @staticmethod
    def _orthographic(orthography: Orthography, words: list[str], values: dict, stats: dict,
                      unruled: dict[str, None]) -> None:
        """Words with no violation / words checked; a word of a script the
        card has no rule for is not checked (listed, and its script warned of)."""
        wrong, unchecked, correct, checked = [], [], 0, 0
        for word in words:
            result = orthography.check(word)
            if result.problems is None:
                unchecked.append(word)
                unruled.update(dict.fromkeys(result.unruled))
                continue
            checked += 1
            correct += not result.problems
            wrong += [f"{word}: {problem}" for problem in result.problems]
        values["orthographic_accuracy"] = _ratio(correct, checked)
        values["orthographic_violations"] = wrong[:MAX_LISTED]
        if unchecked:
            values["orthographic_unchecked"] = unchecked[:MAX_LISTED]
        stats["orthographic_accuracy"] = [float(correct), float(checked)]

    @staticmethod
    def _fst_acceptance(analyzer: Analyzer, words: list[str], values: dict, stats: dict) -> None:
        rejected = analyzer.rejected(words)
        accepted = len(words) - len(rejected)
        values["fst_acceptance_rate"] = _ratio(accepted, len(words))
        values["fst_accepted"] = accepted
        values["fst_words"] = len(words)
        values["fst_rejected"] = rejected[:MAX_LISTED]
        stats["fst_acceptance_rate"] = [float(accepted), float(len(words))]

    @staticmethod
    def _morphology(analyzer: Analyzer, entry: EntryInput, words, values, stats) -> None:
        gold = list(entry.morphology)
        gold_lemmas = [analyzer.lemmas(word) for word, _ in gold]
        predicted = [analyzer.parsed(word) for word in words]
        matched = matched_gold(gold, predicted, gold_lemmas)
        values["morphological_accuracy"] = matched / len(gold)
        stats["morphological_accuracy"] = [float(matched), float(len(gold))]

    @staticmethod
    def _signatures(analyzer: Analyzer | ReadingAnalyzer | None, orthography: Orthography | None,
                    context: BatchContext) -> dict[str, str]:
        signatures = {}
        if analyzer is not None:
            # Words of a script the card transliterates are looked up transliterated: say by what.
            reads = f"|translit:{analyzer.reads}" if analyzer.reads else ""
            described = (f"analyzer:{analyzer.name}|sha256:{analyzer.sha256}|hfst:{_hfst_version()}"
                         f"|case:as-written,lower,capitalised{reads}|version:{__version__}")
            signatures.update(dict.fromkeys(context.wanted(("fst_acceptance_rate", "morphological_accuracy")),
                                            described))
        if orthography:
            signatures["orthographic_accuracy"] = f"{orthography.signature()}|version:{__version__}"
        return signatures
