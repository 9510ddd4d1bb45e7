"""The Ladder (Blum & Hardt 2015, "The Ladder: a reliable leaderboard for
machine learning competitions"): what a public board of a secret-tier
corpus releases about the runs on it (issue 33; docs/integrity-and-access.md
"The public holdout board: a Ladder").

Runs enter in the order they were published. The first sets the board; a
later one takes the lead only when it beats the leader by more than a
margin, the half-width of the paired bootstrap interval of the difference
(run - leader, compare.py's resampling of the stored per-entry statistics),
widened for the number of comparisons the board has made so far (the
interval at level 1 - alpha/t for the t-th comparison, Bonferroni), and
only when the two runs' statistics differ on at least `min_changed`
entries. The released value changes only then, rounded to that margin;
every other run releases nothing of its own. Pure: no store, no gateway."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.bootstrap import ALPHA, percentile_interval, resampled_sums
from gateway.card.compare import ComparableRun
from gateway.card.corpus import corpus_value, values_from_sums

# The metric the public board climbs on: every run has it (the surface
# family), it is defined on every entry, and higher is better.
LADDER_METRIC = "chrf_plus_plus"
# A run whose statistics differ from the leader's on fewer entries never
# takes the lead: its effect would be a function of a few entries (the
# corpus framework's minimum group, docs/integrity-and-access.md).
MIN_CHANGED_ENTRIES = 10


@dataclass(frozen=True)
class Rung:
    """What the Ladder made of one run: whether it took the lead, the
    board's released value after it, the margin it had to beat (None for
    the first run: its own interval's half-width is its rounding step), its
    difference from the leader it was compared with, and on how many
    entries their statistics differ."""
    run_id: str
    stepped: bool
    released: float | None
    margin: float | None
    difference: float | None = None
    changed_entries: int | None = None


def round_to(value: float, step: float) -> float:
    """`value` to the nearest multiple of `step` (itself when step is 0)."""
    if not step or not math.isfinite(step):
        return value
    return round(value / step) * step


def _stretch(comparisons: int, alpha: float) -> float:
    """How much wider the interval at 1 - alpha/comparisons is than the one
    at 1 - alpha, for a normal distribution: the board's t-th comparison is
    held to a stricter test, so that many tries do not add up to a step."""
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / (2 * comparisons)) / normal.inv_cdf(1 - alpha / 2)


def _resampled(run: ComparableRun, ids: list[str], metric: str, resamples: int, seed: int) -> np.ndarray:
    stats = run.aligned_to(ids)[metric]
    return values_from_sums(metric, resampled_sums({metric: stats}, resamples, seed)[metric])


def own_margin(run: ComparableRun, metric: str = LADDER_METRIC, resamples: int = DEFAULT_RESAMPLES,
               seed: int = DEFAULT_SEED, alpha: float = ALPHA) -> float | None:
    """The half-width of the run's own bootstrap interval (the first run's
    rounding step: there is nothing to pair it with)."""
    interval = percentile_interval(_resampled(run, run.ids, metric, resamples, seed), alpha)
    return None if interval is None else (interval["ci_upper"] - interval["ci_lower"]) / 2


def paired_margin(leader: ComparableRun, run: ComparableRun, metric: str = LADDER_METRIC,
                  resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, alpha: float = ALPHA,
                  comparisons: int = 1) -> tuple[float, float, int] | None:
    """(difference run - leader, margin, entries whose statistics differ):
    the margin is the half-width of the paired bootstrap interval of the
    difference (the same entries drawn for both runs), widened by
    `_stretch(comparisons)`. None when the metric is undefined."""
    ids = leader.ids
    mine, theirs = run.aligned_to(ids)[metric], leader.stats[metric]
    value, best = corpus_value(metric, mine), corpus_value(metric, theirs)
    if value is None or best is None:
        return None
    differences = _resampled(run, ids, metric, resamples, seed) - _resampled(leader, ids, metric, resamples, seed)
    interval = percentile_interval(differences, alpha)
    if interval is None:
        return None
    changed = int(np.count_nonzero(np.any(mine != theirs, axis=1)))
    half = (interval["ci_upper"] - interval["ci_lower"]) / 2
    return value - best, half * _stretch(comparisons, alpha), changed


@dataclass
class _Board:
    """Where a Ladder stands: its leader, the value released, the
    comparisons made (each run after the first leader counts one)."""
    leader: ComparableRun | None = None
    released: float | None = None
    comparisons: int = 0


def _enter(board: _Board, run_id: str, run: ComparableRun, metric: str, resamples: int, seed: int, alpha: float,
           min_changed: int) -> Rung:
    """The Rung of `run` entering `board`, which it updates."""
    if board.leader is None:
        value = corpus_value(metric, run.stats[metric]) if metric in run.stats else None
        if value is None:
            return Rung(run_id, False, board.released, None)
        step = own_margin(run, metric, resamples, seed, alpha)
        board.leader, board.released = run, round_to(value, step or 0.0)
        return Rung(run_id, True, board.released, step)
    board.comparisons += 1
    compared = paired_margin(board.leader, run, metric, resamples, seed, alpha, board.comparisons) \
        if metric in run.stats else None
    if compared is None:
        return Rung(run_id, False, board.released, None)
    difference, margin, changed = compared
    if changed >= min_changed and difference > margin:
        value = corpus_value(metric, run.aligned_to(board.leader.ids)[metric])
        board.leader, board.released = run, max(board.released, round_to(value, margin))
        return Rung(run_id, True, board.released, margin, difference, changed)
    return Rung(run_id, False, board.released, margin, difference, changed)


def climb(runs: Sequence[ComparableRun], run_ids: Sequence[str], metric: str = LADDER_METRIC,
          resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, alpha: float = ALPHA,
          min_changed: int = MIN_CHANGED_ENTRIES) -> list[Rung]:
    """The Ladder over `runs` in publication order (`run_ids` names them):
    one Rung per run. The released value never goes down."""
    board = _Board()
    return [_enter(board, run_id, run, metric, resamples, seed, alpha, min_changed)
            for run_id, run in zip(run_ids, runs)]


def next_rung(runs: Sequence[ComparableRun], rungs: Sequence[Rung], run_id: str, run: ComparableRun,
              metric: str = LADDER_METRIC, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
              alpha: float = ALPHA, min_changed: int = MIN_CHANGED_ENTRIES) -> Rung:
    """The Rung `run` gets entering after `runs`, whose Rungs (`climb`'s)
    are `rungs`: the board's state is read off them, so one comparison is
    made, not one per run before it."""
    stepped = [index for index, rung in enumerate(rungs) if rung.stepped]
    board = _Board()
    if stepped:
        board.leader, board.released = runs[stepped[-1]], rungs[-1].released
        board.comparisons = len(rungs) - stepped[0] - 1
    return _enter(board, run_id, run, metric, resamples, seed, alpha, min_changed)
