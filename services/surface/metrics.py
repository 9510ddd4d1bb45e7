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
        target = context.target
        chrf = build_metric("chrf_plus_plus")
        bleu = build_metric("bleu", bleu_tokenizer=target.surface.bleu_tokenizer)
        ter = build_metric("ter", ter_asian_support=target.surface.ter_asian_support)
        hypotheses = [entry.prediction for entry in entries]
        references = [entry.references for entry in entries]
        chrf_stats = segment_statistics(chrf, hypotheses, references)
        bleu_stats = segment_statistics(bleu, hypotheses, references)
        ter_stats = segment_statistics(ter, hypotheses, references)

        outputs = []
        for index, entry in enumerate(entries):
            prediction = normalise_for_match(entry.prediction)
            exact = prediction == normalise_for_match(entry.reference)
            equivalent = exact or prediction in {
                normalise_for_match(text) for text in (*entry.references, *entry.acceptable_variants)
            }
            ratio = length_ratio(entry.prediction, entry.reference)
            outputs.append(
                EntryOutput(
                    id=entry.id,
                    values={
                        "exact_match_rate": float(exact),
                        "equivalent_match_rate": float(equivalent),
                        "chrf_plus_plus": score_from_statistics(chrf, chrf_stats[index]),
                        "ter": score_from_statistics(ter, ter_stats[index]),
                        "length_ratio": ratio,
                    },
                    stats={
                        "exact_match_rate": [float(exact), 1.0],
                        "equivalent_match_rate": [float(equivalent), 1.0],
                        "chrf_plus_plus": chrf_stats[index],
                        "bleu": bleu_stats[index],
                        "ter": ter_stats[index],
                        "length_ratio": [ratio, 1.0] if ratio is not None else [0.0, 0.0],
                    },
                )
            )
        nrefs = reference_count(references)
        return BatchOutput(
            entries=outputs,
            signatures={
                "chrf_plus_plus": signature(chrf, nrefs),
                "bleu": signature(bleu, nrefs),
                "ter": signature(ter, nrefs),
            },
        )
