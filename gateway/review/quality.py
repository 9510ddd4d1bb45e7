"""WMT-style annotator quality control (issue 36), reported beside the
campaign's own reliability test (gateway/review/results.py).

Two checks per rater, as WMT's Appraise runs them on ESA campaigns since
WMT23 (its ComputeAnnotatorMetrics command):

- BAD vs REF. BAD: the rater's scores of degraded outputs (our CONTROL
  tasks' degraded column); REF: the same rater's scores of the same outputs
  intact (its RATE ratings of that entry and system). A rater who reads the
  outputs scores BAD lower: one-sided Mann-Whitney U test that BAD is
  stochastically less than REF, on raw scores (Appraise dropped z-scores for
  this at WMT23). No pair, or every BAD equal to its REF: p = 1 (nothing
  shows the rater saw the damage), as Appraise does. The rater passes when
  p < WMT_P, and is not judged (None) with fewer pairs than our own test
  needs (protocol.MIN_CONTROL_PAIRS): with three pairs even a rater who
  scores every BAD below every REF gets p = 1/20 = 0.05.
- Repeats. The rater's two scores of an item shown twice (RATE and REPEAT):
  how many pairs, their mean absolute difference, and the share that differ
  by at most REPEAT_TOLERANCE points.

Why both tests, ours and WMT's. The campaign's own test (one-sided Wilcoxon
signed-rank on the differences REF - BAD) uses the pairing: each degraded
score is compared with the score of its own original, so an item's own
difficulty cancels out; it assumes the differences are symmetric about their
median. The Mann-Whitney U test forgets the pairing and compares the two
samples as wholes: it assumes nothing of the pairs, only independent draws,
and so asks less of the data but sees less (a rater who lowers every BAD a
little below its REF while its REF scores spread widely passes Wilcoxon and
may fail Mann-Whitney). We keep Wilcoxon to decide who is excluded (our
controls are built as pairs) and report Mann-Whitney so that a campaign's
raters can be read on WMT's scale. Pure: numbers in, plain JSON out."""
from __future__ import annotations

import math

import numpy as np

from gateway.review.protocol import MIN_CONTROL_PAIRS

# WMT's level: a rater whose BAD items are not scored lower at this level is unreliable.
WMT_P = 0.05
# Two scores of a repeated item within this many points (of 0..100) count as consistent.
REPEAT_TOLERANCE = 10.0


def bad_below_ref_p(bad: list[float], ref: list[float]) -> float:
    """One-sided Mann-Whitney U p-value that the BAD scores are lower than the REF ones (1.0 when there is no
    pair or every BAD equals its REF; `bad[i]` and `ref[i]` are one pair)."""
    if len(bad) != len(ref):
        raise ValueError(f"bad and ref: one score each per pair, got {len(bad)} and {len(ref)}")
    if not bad or all(b == r for b, r in zip(bad, ref)):
        return 1.0
    from scipy.stats import mannwhitneyu  # imported when used: the gateway imports this module at start

    p_value = float(mannwhitneyu(bad, ref, alternative="less").pvalue)
    return 1.0 if math.isnan(p_value) else p_value


def bad_ref_check(pairs: list[tuple[float, float]]) -> dict:
    """WMT's BAD vs REF check of one rater from its (REF score, BAD score) pairs."""
    ref = [float(original) for original, _ in pairs]
    bad = [float(degraded) for _, degraded in pairs]
    p_value = bad_below_ref_p(bad, ref)
    return {"pairs": len(pairs), "bad_mean": float(np.mean(bad)) if bad else None,
            "ref_mean": float(np.mean(ref)) if ref else None, "p_value": p_value,
            "passes": p_value < WMT_P if len(pairs) >= MIN_CONTROL_PAIRS else None}


def repeat_consistency(pairs: list[tuple[float, float]]) -> dict:
    """How consistent one rater is on the items shown twice, from its (first score, repeated score) pairs."""
    differences = [abs(float(first) - float(again)) for first, again in pairs]
    return {"pairs": len(pairs),
            "mean_abs_diff": float(np.mean(differences)) if differences else None,
            "within_tolerance_share": float(np.mean([d <= REPEAT_TOLERANCE for d in differences]))
            if differences else None,
            "tolerance": REPEAT_TOLERANCE}
