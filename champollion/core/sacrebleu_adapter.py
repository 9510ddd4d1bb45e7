"""The one place that touches sacreBLEU's private statistics API.

sacreBLEU computes corpus scores from summed per-segment statistics, but the
hooks that expose them (``_extract_corpus_statistics``,
``_compute_score_from_stats``, ``_preprocess_segment``, the signature class) are
private. Every use goes through this module, and
``tests/test_sacrebleu_adapter.py`` pins their behaviour, so an upgrade breaks
here and nowhere else.

Metric ids and their sacreBLEU configuration:
  chrf_plus_plus  CHRF(word_order=2)
  bleu            BLEU(tokenize=<card>)   (smoothing 'exp', 4-grams: defaults)
  ter             TER(asian_support=<card>)
The statistics layout does not depend on the tokenizer, so the gateway rebuilds
a corpus score from summed statistics with a metric object of the same kind.

Segment statistics come from the compiled module ``champollion.core.native._stats``
when it was built (identical to sacreBLEU's, statistic for statistic: see
tests/test_native_stats.py), else from sacreBLEU itself. sacreBLEU's own
preprocessing (tokenizers, lowercasing) runs in Python either way.
``CHAMPOLLION_PURE_SACREBLEU=1`` forces sacreBLEU's code.
"""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from champollion.core.native import _stats as _native

SACREBLEU_VERSION = sacrebleu.__version__
SACREBLEU_METRICS = ("chrf_plus_plus", "bleu", "ter")
PURE_SACREBLEU_ENV = "CHAMPOLLION_PURE_SACREBLEU"


@lru_cache(maxsize=None)
def build_metric(metric_id: str, bleu_tokenizer: str = "13a", ter_asian_support: bool = False):
    """A configured sacreBLEU metric object; cached, since building a MeCab
    tokenizer is costly. The objects are shared between threads, so nothing
    here relies on the state sacreBLEU keeps on them per corpus call."""
    if metric_id == "chrf_plus_plus":
        return CHRF(word_order=2)
    if metric_id == "bleu":
        return BLEU(tokenize=bleu_tokenizer)
    if metric_id == "ter":
        return TER(asian_support=ter_asian_support)
    raise KeyError(f"not a sacreBLEU metric: {metric_id}")


# `--ter-asian-support` is off unless given: `-l SRC-TGT` does not set it.
CLI_TER_ASIAN_SUPPORT = False


def cli_bleu_tokenizer(target_language: str) -> str:
    """The BLEU tokenizer sacreBLEU's CLI picks for `-l SRC-TGT` when TGT is
    `target_language` (as `-l` is written: ISO 639-1 where the language has
    a code there): BLEU's own language map (`zh`, `ja-mecab`, `ko-mecab`),
    else its default, `13a`. Read from sacreBLEU's class rather than by
    building a metric, which would load MeCab."""
    return BLEU._TOKENIZER_MAP.get(target_language, BLEU.TOKENIZER_DEFAULT)


def native_statistics_enabled() -> bool:
    """Whether segment statistics come from the compiled module (read on
    every call, so tests can compare both paths)."""
    return _native is not None and os.environ.get(PURE_SACREBLEU_ENV, "") != "1"


def segment_statistics(
    metric, hypotheses: Sequence[str], references_per_entry: Sequence[Sequence[str]]
) -> list[list[float]]:
    """One statistics vector per hypothesis, against that entry's references
    (one or several; entries may differ in how many), as sacreBLEU computes
    them from reference streams: best edits and mean length for TER, best
    F-score's counts for chrF, counts clipped by the largest reference count
    and the closest reference length for BLEU."""
    hypotheses = list(hypotheses)
    references = [list(refs) for refs in references_per_entry]
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    if any(not refs for refs in references):
        raise ValueError("every entry needs at least one reference")
    if native_statistics_enabled():
        return native_segment_statistics(metric, hypotheses, references)
    return metric._extract_corpus_statistics(hypotheses, reference_streams(references))


def reference_streams(references_per_entry: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-entry reference lists as sacreBLEU's reference streams (one list
    per reference position); None where an entry has fewer references, which
    sacreBLEU drops for that entry."""
    width = max((len(refs) for refs in references_per_entry), default=0)
    return [[refs[k] if k < len(refs) else None for refs in references_per_entry] for k in range(width)]


def native_segment_statistics(metric, hypotheses: list[str], references: list[list[str]]) -> list[list]:
    """`segment_statistics` from the compiled module, whatever the
    environment says (for equality checks); the module must be built."""
    if _native is None:
        raise RuntimeError("champollion.core.native._stats is not built")
    preprocess = metric._preprocess_segment
    hyps = [preprocess(text) for text in hypotheses]
    refs = [[preprocess(text) for text in entry] for entry in references]
    if isinstance(metric, TER):
        return _native.ter_statistics(hyps, refs)
    if isinstance(metric, CHRF):
        return _native.chrf_statistics(
            hyps, refs, metric.char_order, metric.word_order, metric.beta, metric.whitespace, metric.eps_smoothing
        )
    if isinstance(metric, BLEU):
        return _native.bleu_statistics(hyps, refs, metric.max_ngram_order)
    raise TypeError(f"no compiled statistics for {type(metric).__name__}")


def score_from_statistics(metric, statistics: Sequence[float]) -> float:
    """The metric's score from (summed) statistics, as ``corpus_score`` would give."""
    return float(metric._compute_score_from_stats(list(statistics)).score)


def reference_count(references_per_entry: Sequence[Sequence[str]]) -> int | str:
    """sacreBLEU's `nrefs`: the number of references when every entry has the
    same number, else 'var'."""
    counts = {len(refs) for refs in references_per_entry}
    return counts.pop() if len(counts) == 1 else "var"


def signature(metric, nrefs: int | str = 1) -> str:
    """sacreBLEU's reproducibility signature with `nrefs` (see
    ``reference_count``). Built from a copy of the metric's settings: the
    metric objects are shared, so their own ``num_refs`` is never set."""
    settings = dict(vars(metric))
    settings["num_refs"] = -1 if nrefs == "var" else nrefs
    return metric._SIGNATURE_TYPE(settings).format()


def merged_signature(current: str | None, other: str) -> str:
    """The signature of a run whose batches gave `current` and `other`. Two
    sacreBLEU signatures that differ only in `nrefs` give 'nrefs:var', as
    sacreBLEU says of a corpus whose entries differ in reference count; any
    other difference keeps the first (the configuration is the same in every
    batch of a run)."""
    if current is None:
        return other
    if current == other:
        return current
    fields, others = current.split("|"), other.split("|")
    if len(fields) != len(others):
        return current
    merged = []
    for mine, theirs in zip(fields, others):
        if mine == theirs:
            merged.append(mine)
        elif mine.startswith("nrefs:") and theirs.startswith("nrefs:"):
            merged.append("nrefs:var")
        else:
            return current
    return "|".join(merged)
