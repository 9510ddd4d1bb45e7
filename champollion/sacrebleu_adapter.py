"""The one place that touches sacreBLEU's private statistics API.

sacreBLEU computes corpus scores from summed per-segment statistics, but the
hooks that expose them (``_extract_corpus_statistics``,
``_compute_score_from_stats``) are private. Every use goes through this module,
and ``tests/test_sacrebleu_adapter.py`` pins their behaviour, so an upgrade
breaks here and nowhere else.

Metric ids and their sacreBLEU configuration:
  chrf_plus_plus  CHRF(word_order=2)
  bleu            BLEU(tokenize=<card>)   (smoothing 'exp', 4-grams: defaults)
  ter             TER(asian_support=<card>)
The statistics layout does not depend on the tokenizer, so the gateway rebuilds
a corpus score from summed statistics with a metric object of the same kind.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

SACREBLEU_VERSION = sacrebleu.__version__
SACREBLEU_METRICS = ("chrf_plus_plus", "bleu", "ter")


@lru_cache(maxsize=None)
def build_metric(metric_id: str, bleu_tokenizer: str = "13a", ter_asian_support: bool = False):
    """A configured sacreBLEU metric object; cached, since building a MeCab
    tokenizer is costly and the objects hold no per-corpus state we rely on."""
    if metric_id == "chrf_plus_plus":
        return CHRF(word_order=2)
    if metric_id == "bleu":
        return BLEU(tokenize=bleu_tokenizer)
    if metric_id == "ter":
        return TER(asian_support=ter_asian_support)
    raise KeyError(f"not a sacreBLEU metric: {metric_id}")


def segment_statistics(metric, hypotheses: Sequence[str], references: Sequence[str]) -> list[list[float]]:
    """One statistics vector per (hypothesis, single reference) pair."""
    return metric._extract_corpus_statistics(list(hypotheses), [list(references)])


def score_from_statistics(metric, statistics: Sequence[float]) -> float:
    """The metric's score from (summed) statistics, as ``corpus_score`` would give."""
    return float(metric._compute_score_from_stats(list(statistics)).score)


def signature(metric) -> str:
    """sacreBLEU's reproducibility signature. Every entry has exactly one
    reference, so the reference count is fixed instead of being learnt from a
    corpus call."""
    metric.num_refs = 1
    return metric.get_signature().format()
