"""The statistics WMT's metrics task has ranked metrics with since 2024
(issue 34), by the definitions of google-research/mt-metrics-eval
(`pce.py`, `stats.py`, `tau_optimization.py`, `tasks.py`, `data.py`),
written here from those definitions; docs/meta-eval.md says the rules in
full and where this differs.

- Soft pairwise accuracy (SPA, system level): for every pair of systems,
  the one-sided p-value that the first is better, from a paired
  permutation test over segments (each permutation flips the sign of every
  segment's difference or not; the same permutations for the humans and
  the metric); SPA = 1 - the mean |p_human - p_metric| over pairs.
  mt-metrics-eval's conventions: 1,000 permutations drawn by
  numpy's default_rng(4) (float32 draws rounded to 0/1), a system's score
  the sum of its segment scores, p = the share of permutations whose
  difference is at least the observed one, with no +1.
- acc_eq (segment level, WMT23-24): per source segment ("item" grouping),
  every pair of systems is concordant, discordant, or tied in the humans,
  the metric or both; a metric tie is |difference| <= epsilon. acc23 is
  (concordant + tied in both) / pairs, averaged over segments; acc_eq is
  acc23 at the epsilon, chosen among 0 and every pair's |difference|,
  that maximises it (the smallest such). acc23 and tau23 are also given at
  epsilon 0 (tau23 = (concordant + tied in both - the rest) / pairs).
- Significance between metrics (PERM-BOTH, Deutsch et al. 2021, as
  mt-metrics-eval runs it): for two metrics, z-scored segment scores are
  swapped cell by cell at random (SPA) or each pair's outcome is taken
  from one metric or the other at random (acc_eq, each metric at its own
  epsilon); the p-value that the better-ranked metric is better is the
  share of draws whose difference is at least the observed one. Draws come
  in blocks of 100 and stop early once the p-value is below 0.02 or above
  0.5. Metrics are ranked by value and grouped into clusters: a new
  cluster starts at the first metric that a metric of the current cluster
  beats at p <= 0.05.
- The WMT24 combination: the mean of SPA and acc_eq (both on 0-1, equal
  weights), with the significance of each difference from the sum of the
  two tasks' weighted draws.

Each reads the metric's per-entry values (segment scores), as
mt-metrics-eval does; a metric without them (BLEU) has none of these.
Pure: numpy and scipy."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from gateway.card.multiplicity import significance_clusters

# mt-metrics-eval's pce.compute_pairwise_p_values defaults.
SPA_PERMUTATIONS = 1000
SPA_SEED = 4
# PERM-BOTH as mt-metrics-eval's Task runs it: draws, early stopping, level.
METRIC_DRAWS = 1000
BLOCK = 100
EARLY_BELOW, EARLY_ABOVE = 0.02, 0.5
SIGNIFICANCE = 0.05
# Two accuracies this close are equal when the best epsilon is chosen
# (sums of pair weights differ by float rounding, not by pairs).
EQUAL_ACCURACY = 1e-12
# A permuted difference counts as "at least" the observed one within this
# share of the differences' scale: exact ties (every differing segment kept)
# must not depend on the order of a float sum.
RELATIVE_TIE = 1e-9
# Likewise for a metric comparison's draws, whose values are on 0-1.
DRAW_TIE = 1e-12

# The two tasks of the WMT24 combination and their weights.
TASKS = ("soft_pairwise_accuracy", "acc_eq")
TASK_WEIGHTS = {"soft_pairwise_accuracy": 0.5, "acc_eq": 0.5}


# --- soft pairwise accuracy -------------------------------------------------------------

def sign_flips(segments: int, permutations: int = SPA_PERMUTATIONS, seed: int = SPA_SEED) -> np.ndarray:
    """(permutations x segments) of +1 (kept) and -1 (swapped), drawn as
    mt-metrics-eval draws them: float32 uniforms rounded to 0 or 1."""
    draws = np.random.default_rng(seed).random(size=(permutations, segments), dtype=np.float32)
    return np.rint(draws).astype(float) * 2.0 - 1.0


def pairwise_p_values(scores: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """For each stack of (systems x segments) scores (shape (..., systems,
    segments)), the p-value that system i is better than system j for every
    pair i < j (in np.triu_indices order): the share of permutations whose
    difference of summed scores is at least the observed one."""
    stacked = scores.reshape(-1, *scores.shape[-2:])
    count, systems, segments = stacked.shape
    first, second = np.triu_indices(systems, k=1)
    partial = (flips @ stacked.reshape(count * systems, segments).T).reshape(len(flips), count, systems)
    null = partial[:, :, first] - partial[:, :, second]
    differences = stacked[:, first, :] - stacked[:, second, :]
    observed = differences.sum(axis=2)
    tolerance = RELATIVE_TIE * np.abs(differences).sum(axis=2)
    p_values = np.mean(null >= (observed - tolerance)[None], axis=0)
    return p_values.reshape(*scores.shape[:-2], len(first))


def soft_pairwise_accuracy(human_p: np.ndarray, metric_p: np.ndarray) -> np.ndarray:
    """1 - the mean |p_human - p_metric| over pairs (last axis)."""
    return 1.0 - np.mean(np.abs(human_p - metric_p), axis=-1)


# --- tie-calibrated pairwise accuracy -----------------------------------------------------

@dataclass
class ItemPairs:
    """Every pair of systems within every segment where both have a human
    and a metric score; `weight` = 1 / (segments with a pair x the
    segment's pairs), so that a sum over pairs is the mean over segments."""
    human_sign: np.ndarray
    metric_difference: np.ndarray
    weight: np.ndarray
    segments: int

    @classmethod
    def of(cls, human: np.ndarray, metric: np.ndarray) -> "ItemPairs":
        first, second = np.triu_indices(human.shape[0], k=1)
        defined = ~(np.isnan(human) | np.isnan(metric))
        present = defined[first] & defined[second]  # (pairs of systems x segments)
        per_segment = present.sum(axis=0)
        segments = int(np.count_nonzero(per_segment))
        weights = np.where(per_segment > 0, 1.0 / np.maximum(per_segment, 1) / max(segments, 1), 0.0)
        # Segment-major, so that a segment's pairs sit together.
        pick = present.T
        human_sign = np.sign(human[first] - human[second]).T[pick]
        metric_difference = (metric[first] - metric[second]).T[pick]
        weight = np.broadcast_to(weights[:, None], pick.shape)[pick]
        return cls(human_sign, metric_difference, weight, segments)

    def outcomes(self, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        """(acc23's 0/1, tau23's +1/-1) per pair at `epsilon`: right when
        concordant, or tied in both; tau23 counts every other case -1."""
        metric_tie = np.abs(self.metric_difference) <= epsilon
        human_tie = self.human_sign == 0
        right = np.where(metric_tie, human_tie, ~human_tie & (np.sign(self.metric_difference) == self.human_sign))
        return right.astype(float), np.where(right, 1.0, -1.0)

    def accuracy(self, epsilon: float) -> float:
        return float(self.weight @ self.outcomes(epsilon)[0])

    def tau23(self, epsilon: float) -> float:
        return float(self.weight @ self.outcomes(epsilon)[1])

    def all_tied(self) -> float:
        """acc23 of a metric that ties every pair: the share of pairs the
        humans tie, averaged over segments."""
        return float(self.weight @ (self.human_sign == 0))

    def best_epsilon(self) -> tuple[float, float]:
        """(epsilon, acc23 there): the smallest candidate epsilon (0 and
        every pair's |difference|) whose acc23 is the highest."""
        gaps = np.abs(self.metric_difference)
        if gaps.size == 0:
            return 0.0, float("nan")
        at_zero = self.outcomes(0.0)[0]
        tied = (self.human_sign == 0).astype(float)
        order = np.argsort(gaps, kind="stable")
        # Each pair with a positive gap turns from its outcome at 0 into a tie.
        gains = np.cumsum((self.weight * (tied - at_zero))[order])
        sorted_gaps = gaps[order]
        last_of_gap = np.r_[sorted_gaps[1:] != sorted_gaps[:-1], True]
        candidates = np.r_[0.0, sorted_gaps[last_of_gap]]
        base = float(self.weight @ at_zero)
        accuracies = np.r_[base, base + gains[last_of_gap]]
        best = np.flatnonzero(accuracies >= accuracies.max() - EQUAL_ACCURACY)[0]
        return float(candidates[best]), float(accuracies[best])


# --- significance between metrics (PERM-BOTH) ---------------------------------------------

def _zscore(values: np.ndarray) -> np.ndarray:
    """Standard scores over every cell (population deviation), as
    mt-metrics-eval standardises with scipy.stats.zscore before swapping;
    a constant metric's are all 0 where scipy's would be NaN, with a
    warning on a terminal."""
    deviation = values.std()
    return (values - values.mean()) / deviation if deviation > 0 else np.zeros_like(values)


@dataclass
class TaskResult:
    """One task's values per metric, their clusters, and every compared
    pair's draws (metric -> its hybrid's value per draw)."""
    values: dict[str, float]
    ranks: dict[str, int | None] = field(default_factory=dict)
    p_values: dict[tuple[str, str], float] = field(default_factory=dict)
    draws: dict[tuple[str, str], dict[str, np.ndarray]] = field(default_factory=dict)


def _ranked(values: dict[str, float]) -> list[str]:
    """Best first; equal values by name (mt-metrics-eval's order)."""
    return sorted(values, key=lambda name: (-values[name], name))


def _permutation_p(draw_block, observed: float, draws: int, rng: np.random.Generator):
    """Draws in blocks until `draws` or an early stop. `draw_block(rng, n)`
    gives (better side's values, other side's values) for n draws. Returns
    (p-value, {0: better side's values, 1: other's})."""
    better, other, done, at_least = [], [], 0, 0
    while done < draws:
        size = min(BLOCK, draws - done)
        high, low = draw_block(rng, size)
        better.append(high)
        other.append(low)
        at_least += int(np.count_nonzero(high - low >= observed - DRAW_TIE))
        done += size
        p_value = at_least / done
        if p_value < EARLY_BELOW or p_value > EARLY_ABOVE:
            break
    return at_least / done, (np.concatenate(better), np.concatenate(other))


def _compare_metrics(values: dict[str, float], draw_pair, draws: int, seed: int) -> TaskResult:
    """PERM-BOTH over every pair of metrics, ranked by value, and the
    clusters; `draw_pair(better, other)` gives a draw_block function."""
    result = TaskResult(values)
    order = _ranked(values)
    if draws <= 0:
        result.ranks = {name: None for name in order}
        return result
    better = np.zeros((len(order), len(order)), dtype=bool)
    for (i, high), (j, low) in combinations(enumerate(order), 2):
        rng = np.random.default_rng([seed, i, j])
        p_value, (high_draws, low_draws) = _permutation_p(draw_pair(high, low), values[high] - values[low], draws, rng)
        result.p_values[(high, low)] = p_value
        result.draws[(high, low)] = {high: high_draws, low: low_draws}
        better[i, j] = p_value <= SIGNIFICANCE
    clusters = significance_clusters(list(range(len(order))), better)
    result.ranks = {name: clusters[position] for position, name in enumerate(order)}
    return result


def spa_task(human: np.ndarray, metrics: dict[str, np.ndarray], draws: int, seed: int,
             flips_seed: int = SPA_SEED, permutations: int = SPA_PERMUTATIONS) -> TaskResult:
    """SPA of each metric ((systems x segments) scores, segments judged and
    scored for every system) and PERM-BOTH between them: each draw swaps
    the two metrics' z-scored scores cell by cell with probability 1/2."""
    flips = sign_flips(human.shape[1], permutations, flips_seed)
    human_p = pairwise_p_values(human, flips)
    values = {name: float(soft_pairwise_accuracy(human_p, pairwise_p_values(scores, flips)))
              for name, scores in metrics.items()}
    standard = {name: _zscore(scores) for name, scores in metrics.items()}

    def draw_pair(high: str, low: str):
        def block(rng: np.random.Generator, size: int):
            keep = rng.integers(0, 2, size=(size, *human.shape)).astype(bool)
            low_side = np.where(keep, standard[low], standard[high])
            high_side = np.where(keep, standard[high], standard[low])
            return (soft_pairwise_accuracy(human_p, pairwise_p_values(high_side, flips)),
                    soft_pairwise_accuracy(human_p, pairwise_p_values(low_side, flips)))
        return block
    return _compare_metrics(values, draw_pair, draws, seed)


def acc_eq_task(pairs: dict[str, ItemPairs], epsilons: dict[str, float], draws: int, seed: int) -> TaskResult:
    """acc_eq of each metric at its own epsilon and PERM-BOTH between them:
    each draw takes every pair's outcome from one metric or the other with
    probability 1/2 (mt-metrics-eval's "pairs" permutation)."""
    right = {name: item_pairs.outcomes(epsilons[name])[0] for name, item_pairs in pairs.items()}
    values = {name: float(pairs[name].weight @ right[name]) for name in pairs}

    def draw_pair(high: str, low: str):
        weight = pairs[high].weight
        total = float(weight @ (right[high] + right[low]))
        swing = weight * (right[high] - right[low])
        base_low = float(weight @ right[low])

        def block(rng: np.random.Generator, size: int):
            keep = rng.integers(0, 2, size=(size, weight.size)).astype(float)
            high_side = keep @ swing + base_low
            return high_side, total - high_side
        return block
    return _compare_metrics(values, draw_pair, draws, seed)


def combined_task(results: dict[str, TaskResult]) -> TaskResult:
    """The WMT24 combination: each metric's weighted mean of the tasks'
    values (every task here is on 0-1), and the significance of each
    difference from the sum of the tasks' weighted draws (a task whose
    draws stopped early repeats them up to the longest)."""
    names = set.intersection(*(set(result.values) for result in results.values()))
    values = {name: sum(TASK_WEIGHTS[task] * result.values[name] for task, result in results.items())
              for name in names}
    combined = TaskResult(values)
    order = _ranked(values)
    if not all(result.draws for result in results.values()) and len(order) > 1:
        combined.ranks = {name: None for name in order}
        return combined
    better = np.zeros((len(order), len(order)), dtype=bool)
    for (i, high), (j, low) in combinations(enumerate(order), 2):
        differences = []
        for task, result in results.items():
            drawn = result.draws.get((high, low)) or result.draws[(low, high)]
            differences.append(TASK_WEIGHTS[task] * (drawn[high] - drawn[low]))
        longest = max(len(d) for d in differences)
        null = sum(np.resize(d, longest) for d in differences)
        p_value = float(np.mean(null >= values[high] - values[low] - DRAW_TIE))
        combined.p_values[(high, low)] = p_value
        better[i, j] = p_value <= SIGNIFICANCE
    clusters = significance_clusters(list(range(len(order))), better)
    combined.ranks = {name: clusters[position] for position, name in enumerate(order)}
    return combined
