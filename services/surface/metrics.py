"""Surface metrics of one batch, with the statistics the gateway sums.

Rates travel as [numerator, denominator] statistics; chrF++, BLEU and TER as
sacreBLEU's own per-segment statistics, so corpus values are exactly what
sacreBLEU's ``corpus_score`` gives on the whole corpus.

References: chrF++, BLEU and TER use every reference of an entry (sacreBLEU's
several reference streams; `nrefs` in their signatures); exact match and the
length ratio use the primary reference; equivalent match accepts any
reference or acceptable variant.
"""
from __future__ import annotations

from champollion import __version__
from champollion.core.sacrebleu_adapter import (
    SACREBLEU_VERSION,
    build_metric,
    reference_count,
    score_from_statistics,
    segment_statistics,
    signature,
)
from champollion.core.text import normalise_for_match
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
)


def length_ratio(prediction: str, reference: str) -> float | None:
    """Characters of prediction / characters of reference, both normalised;
    None for an empty reference (such an entry is rejected at validation)."""
    reference_chars = len(normalise_for_match(reference))
    if reference_chars == 0:
        return None
    return len(normalise_for_match(prediction)) / reference_chars


# The metrics computed from sacreBLEU's segment statistics.
SACREBLEU_METRICS = ("chrf_plus_plus", "bleu", "ter")


class SurfaceScorer:
    name = "surface"
    version = __version__
    metrics = (
        "exact_match_rate",
        "equivalent_match_rate",
        "chrf_plus_plus",
        "bleu",
        "ter",
        "length_ratio",
    )

    def languages(self) -> list[str]:
        return []

    def components(self) -> list[ComponentInfo]:
        return [ComponentInfo(kind="library", name="sacrebleu", version=SACREBLEU_VERSION)]

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        """The metrics the request asks for; sacreBLEU's statistics (the
        costly part) only for chrF++, BLEU and TER when asked."""
        target = context.target
        sacrebleu_ids = context.wanted(SACREBLEU_METRICS)
        scorers = {
            "chrf_plus_plus": lambda: build_metric("chrf_plus_plus"),
            "bleu": lambda: build_metric("bleu", bleu_tokenizer=target.surface.bleu_tokenizer),
            "ter": lambda: build_metric("ter", ter_asian_support=target.surface.ter_asian_support),
        }
        built = {metric_id: scorers[metric_id]() for metric_id in sacrebleu_ids}
        hypotheses = [entry.prediction for entry in entries]
        references = [entry.references for entry in entries]
        segment_stats = {metric_id: segment_statistics(metric, hypotheses, references)
                         for metric_id, metric in built.items()}
        matching = context.wants("exact_match_rate") or context.wants("equivalent_match_rate")
        wants_ratio = context.wants("length_ratio")

        outputs = []
        for index, entry in enumerate(entries):
            values: dict = {}
            stats: dict = {}
            if matching:
                self._matches(entry, context, values, stats)
            for metric_id, metric in built.items():
                statistics = segment_stats[metric_id][index]
                stats[metric_id] = statistics
                if metric_id != "bleu":  # BLEU has a corpus value only, no entry value
                    values[metric_id] = score_from_statistics(metric, statistics)
            if wants_ratio:
                ratio = length_ratio(entry.prediction, entry.reference)
                values["length_ratio"] = ratio
                stats["length_ratio"] = [ratio, 1.0] if ratio is not None else [0.0, 0.0]
            outputs.append(EntryOutput(id=entry.id, values=values, stats=stats))
        nrefs = reference_count(references)
        return BatchOutput(
            entries=outputs,
            signatures={metric_id: signature(metric, nrefs) for metric_id, metric in built.items()},
        )

    @staticmethod
    def _matches(entry: EntryInput, context: BatchContext, values: dict, stats: dict) -> None:
        prediction = normalise_for_match(entry.prediction)
        exact = prediction == normalise_for_match(entry.reference)
        equivalent = exact or prediction in {
            normalise_for_match(text) for text in (*entry.references, *entry.acceptable_variants)
        }
        for metric_id, matched in (("exact_match_rate", exact), ("equivalent_match_rate", equivalent)):
            if context.wants(metric_id):
                values[metric_id] = float(matched)
                stats[metric_id] = [float(matched), 1.0]
