"""Meta-evaluation: how well each metric of a set of run cards agrees with
human judgments of the same systems (`champollion meta-eval`).

Per metric: system-level Pearson and Kendall tau-b, pairwise accuracy
(Kocmi et al. 2021: the share of system pairs the metric orders as the
humans do) and segment-level Kendall tau-b, "no grouping" (one tau over every
(system, segment) pair, as WMT's MQM tables flatten them), each with a
percentile bootstrap interval over segments.

Human scores come from the segments every system has a human score for: a
system's human score is the mean of its scores there. Its metric score is,
by default, over the whole test set ("all", WMT's convention: a metric's
system score is its score on the test set, however few segments the humans
judged), or over the judged segments alone ("judged"); either way it is
rebuilt from the cards' per-entry statistics by the metric's own reducer (`gateway.card.corpus`), so a resample's scores come
from the same code as the point estimate: a resample is a vector of counts
over segments, the point estimate the all-ones vector. Metrics whose lower
values are better (the metric table's `lower_is_better`) are negated first,
so +1 is perfect agreement for every metric.

The composite is rebuilt as the gateway computes it: from the adequacy-gated
statistics (`gateway.card.adequacy`), entries a card marks inadequate at every
composite input's worst, so it is the card's own composite.

With degenerate systems (`--floor`: systems that ignore their input,
`champollion.core.degenerate`), each metric is also asked whether it ranks
them below every judged system; they are not judged and enter no measure.

WMT's statistics since 2024 (soft pairwise accuracy, tie-calibrated
pairwise accuracy, their combination and the significance clusters of
metrics) are computed by `wmt.py` from the metrics' segment scores on the
judged segments (`wmt_measures` here).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from apps.meta_eval import wmt
from apps.meta_eval.human_judgments import Judgments
from gateway.card.adequacy import gated_statistics, inadequate_entries
from gateway.card.bootstrap import ALPHA, percentile_interval, resample_counts
from gateway.card.composite import weighted_composite
from gateway.card.corpus import values_from_sums
from gateway.card.metrics import METRICS

COMPOSITE = "composite"
MEASURES = ("system_pearson", "system_kendall", "pairwise_accuracy", "segment_kendall")
# WMT's (wmt.py): each a value and a significance cluster rank; acc_eq with its epsilon.
WMT_MEASURES = ("soft_pairwise_accuracy", "acc_eq", "acc23", "tau23", "wmt24")
SEGMENT_KENDALL_VARIANT = "no grouping: one tau-b over every (system, segment) pair"
# Which segments a metric's system score covers (module docstring).
METRIC_SEGMENTS = ("all", "judged")


class MetaEvalError(ValueError):
    """Cards and judgments that cannot be meta-evaluated together."""


@dataclass
class SystemRun:
    """What meta-evaluation reads from one run card."""
    name: str  # the judged system it is matched to
    card: str  # the file or run id it came from
    version: str
    ids: list[str]
    # Metric id -> (entries x statistics).
    stats: dict[str, np.ndarray]
    # Metric id (and "composite") -> per-entry values, NaN where an entry has none.
    entry_values: dict[str, np.ndarray]
    weights: dict[str, float]
    # The composite's inputs: `stats` of the weighted metrics, inadequate entries at their worst.
    composite_stats: dict[str, np.ndarray]

    @classmethod
    def from_card(cls, card: dict, name: str, source: str) -> "SystemRun":
        entries = card.get("entries") or []
        if not entries:
            raise MetaEvalError(f"{source}: the run card has no entries (a secret corpus's card at corpus level "
                                "cannot be meta-evaluated)")
        shared = set.intersection(*(set(entry.get("stats") or {}) for entry in entries)) & set(METRICS)
        stats = {m: np.asarray([entry["stats"][m] for entry in entries], dtype=float) for m in shared}
        entry_values = {m: np.asarray([_number((entry.get("scores") or {}).get(m)) for entry in entries])
                        for m in (*shared, COMPOSITE)}
        weights = dict(sorted((card.get("composite_coverage") or {}).get("weights", {}).items()))
        return cls(name, source, card["dataset"]["version"], [entry["id"] for entry in entries], stats,
                   entry_values, weights, composite_inputs(stats, inadequate_entries(entries), weights))

    def aligned_to(self, ids: list[str]) -> "SystemRun":
        position = {entry_id: index for index, entry_id in enumerate(self.ids)}
        if len(ids) != len(self.ids) or any(entry_id not in position for entry_id in ids):
            raise MetaEvalError(f"{self.card}: the run cards do not cover the same entries")
        return self.restricted_to([position[entry_id] for entry_id in ids])

    def restricted_to(self, rows) -> "SystemRun":
        """These entries only, in this order."""
        return SystemRun(self.name, self.card, self.version, [self.ids[row] for row in rows],
                         {m: matrix[rows] for m, matrix in self.stats.items()},
                         {m: values[rows] for m, values in self.entry_values.items()}, self.weights,
                         {m: matrix[rows] for m, matrix in self.composite_stats.items()})

    def system_scores(self, metric_id: str, counts: np.ndarray) -> np.ndarray:
        """The metric's value per row of `counts` (resamples x entries): how
        often each entry is drawn. NaN where the card has no statistics for it
        (a degenerate system's card may lack some)."""
        if metric_id == COMPOSITE:
            components = {m: values_from_sums(m, counts @ matrix) for m, matrix in self.composite_stats.items()}
            return weighted_composite(components, self.weights) if components else np.full(len(counts), np.nan)
        if metric_id not in self.stats:
            return np.full(len(counts), np.nan)
        return values_from_sums(metric_id, counts @ self.stats[metric_id])


def composite_inputs(stats: dict[str, np.ndarray], inadequate: np.ndarray,
                     weights: dict[str, float]) -> dict[str, np.ndarray]:
    """The weighted metrics' statistics as the gateway's composite reads them."""
    gated = gated_statistics(stats, inadequate, list(weights))
    return {m: gated[m] for m in weights if m in gated}


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan


def match_systems(cards: list[tuple[str, dict]], judgments: Judgments, names: dict[str, str]) -> list[SystemRun]:
    """Each (source, card) matched to a judged system: `names[source]` (from
    --system), else the card's run id when the judgments name systems by run
    id (`review results --tsv` does), else its model_slug. All of one corpus
    version."""
    unknown = set(names) - {source for source, _ in cards}
    if unknown:
        raise MetaEvalError(f"--system: {sorted(unknown)[0]!r} is none of the run cards given")
    runs = []
    for source, card in cards:
        by_run_id = card.get("run_id") if card.get("run_id") in judgments.scores else None
        name = names.get(source) or by_run_id or card.get("model_slug") or ""
        if name not in judgments.scores:
            judged = ", ".join(sorted(judgments.scores))
            raise MetaEvalError(f"{source}: system {name!r} has no judgments in {judgments.path} "
                                f"(judged: {judged}); match it with --system {source}=NAME")
        runs.append(SystemRun.from_card(card, name, source))
    if len(runs) < 2:
        raise MetaEvalError("meta-evaluation needs run cards of at least two systems")
    taken = {}
    for run in runs:
        if run.name in taken:
            raise MetaEvalError(f"{run.card} and {taken[run.name]} are both matched to system {run.name!r}")
        taken[run.name] = run.card
    versions = sorted({run.version for run in runs})
    if len(versions) > 1:
        raise MetaEvalError(f"the run cards are of different corpus versions ({', '.join(v[:12] for v in versions)}): "
                            "systems compare only on the same corpus version")
    return [run.aligned_to(runs[0].ids) for run in runs]


def match_floor(cards: list[tuple[str, dict]], names: dict[str, str], runs: list[SystemRun]) -> list[SystemRun]:
    """The degenerate systems (--floor): each (source, card) named by
    `names[source]` (from --system), else its model_slug, else the source;
    on the judged cards' corpus version, aligned to their entries."""
    judged = {run.card for run in runs}
    twice = [source for source, _ in cards if source in judged]
    if twice:
        raise MetaEvalError(f"--floor: {', '.join(twice)} given as a judged system's card too")
    floor = [SystemRun.from_card(card, names.get(source) or card.get("model_slug") or source, source)
             for source, card in cards]
    elsewhere = [run.card for run in floor if run.version != runs[0].version]
    if elsewhere:
        raise MetaEvalError(f"--floor: {', '.join(elsewhere)}: not of the judged cards' corpus version "
                            f"({runs[0].version[:12]}): degenerate systems compare only on the same corpus version")
    taken = {run.name: run.card for run in runs}
    for run in floor:
        if run.name in taken:
            raise MetaEvalError(f"{run.card} and {taken[run.name]} are both named {run.name!r}; "
                                f"name one with --system {run.card}=NAME")
        taken[run.name] = run.card
    return [run.aligned_to(runs[0].ids) for run in floor]


def segment_positions(judgments: Judgments, ids: list[str]) -> dict[str, int]:
    """Segment label -> 0-based entry position: the label is an entry id, or
    else a 1-based position."""
    labels = set().union(*(set(by_segment) for by_segment in judgments.scores.values()))
    if not judgments.by_position and labels <= set(ids):
        return {entry_id: index for index, entry_id in enumerate(ids) if entry_id in labels}
    positions = {}
    for label in labels:
        if not (label.isdigit() and 1 <= int(label) <= len(ids)):
            raise MetaEvalError(f"{judgments.path}: segment {label!r} is neither an entry id of the run cards "
                                f"nor a position 1..{len(ids)}")
        positions[label] = int(label) - 1
    return positions


def human_matrix(runs: list[SystemRun], judgments: Judgments, lower_is_better: bool) -> np.ndarray:
    """(systems x entries) human scores, higher better; NaN where not judged."""
    positions = segment_positions(judgments, runs[0].ids)
    matrix = np.full((len(runs), len(runs[0].ids)), np.nan)
    for row, run in enumerate(runs):
        for label, score in judgments.scores[run.name].items():
            if score is not None:
                matrix[row, positions[label]] = -score if lower_is_better else score
    return matrix


# --- agreement measures, each on (resamples x systems) arrays --------------------

def pairwise_accuracy(metric: np.ndarray, human: np.ndarray) -> np.ndarray:
    """Share of system pairs whose difference has the same sign under the
    metric as under the humans (a tie agrees only with a tie)."""
    first, second = np.triu_indices(metric.shape[1], k=1)
    agree = np.sign(metric[:, first] - metric[:, second]) == np.sign(human[:, first] - human[:, second])
    accuracy = agree.mean(axis=1)
    return np.where(np.isnan(metric).any(axis=1), np.nan, accuracy)


def _scipy_stats():
    """scipy.stats, imported when a correlation is computed: it takes a
    quarter of a second, which no other command should pay."""
    from scipy import stats
    return stats


def _per_row(statistic, metric: np.ndarray, human: np.ndarray) -> np.ndarray:
    values = np.full(metric.shape[0], np.nan)
    for row in range(metric.shape[0]):
        if not np.isnan(metric[row]).any():
            values[row] = statistic(metric[row], human[row]).statistic
    return values


def system_pearson(metric: np.ndarray, human: np.ndarray) -> np.ndarray:
    return _per_row(_scipy_stats().pearsonr, metric, human)


def system_kendall(metric: np.ndarray, human: np.ndarray) -> np.ndarray:
    kendalltau = _scipy_stats().kendalltau
    return _per_row(lambda x, y: kendalltau(x, y, variant="b"), metric, human)


def segment_kendall(values: np.ndarray, human: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Kendall tau-b over every (system, segment) pair with both values, each
    segment repeated as often as drawn; one value per row of `counts`."""
    kendalltau = _scipy_stats().kendalltau
    result = np.full(len(counts), np.nan)
    for row, drawn in enumerate(counts):
        segments = np.repeat(np.arange(len(drawn)), drawn.astype(int))
        x, y = values[:, segments].ravel(), human[:, segments].ravel()
        both = ~(np.isnan(x) | np.isnan(y))
        if both.sum() >= 2:
            result[row] = kendalltau(x[both], y[both], variant="b").statistic
    return result


# --- the report --------------------------------------------------------------------

def metric_ids(runs: list[SystemRun]) -> list[str]:
    """Metrics every card has statistics for, in the metric table's order, and
    the composite where every card has one."""
    shared = set.intersection(*(set(run.stats) for run in runs))
    ids = [m for m in METRICS if m in shared]
    if all(run.weights and set(run.weights) <= shared for run in runs):
        ids.append(COMPOSITE)
    return ids


def direction(metric_id: str) -> float:
    return -1.0 if metric_id != COMPOSITE and METRICS[metric_id].lower_is_better else 1.0


def _measures(runs: list[SystemRun], metric_id: str, human: np.ndarray,
              counts: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The systems' scores (rows x systems, higher better) and each measure
    (rows,) for every row of `counts`."""
    sign = direction(metric_id)
    scores = sign * np.column_stack([run.system_scores(metric_id, counts) for run in runs])
    # Means over the drawn segments that are judged (columns of NaN are not).
    judged = ~np.isnan(human[0])
    human_scores = (counts @ np.nan_to_num(human).T) / (counts @ judged)[:, None]
    with warnings.catch_warnings():
        # A constant metric (every system 0.0) has no correlation: NaN, reported as null.
        warnings.simplefilter("ignore")
        measures = {
            "system_pearson": system_pearson(scores, human_scores),
            "system_kendall": system_kendall(scores, human_scores),
            "pairwise_accuracy": pairwise_accuracy(scores, human_scores),
        }
        entry_values = np.vstack([run.entry_values[metric_id] for run in runs])
        if not np.isnan(entry_values).all():
            measures["segment_kendall"] = segment_kendall(sign * entry_values, human, counts)
    return scores, measures


def floor_ranking(real: np.ndarray, real_names: list[str], floor: np.ndarray, floor_names: list[str]) -> dict:
    """How a metric ranks the degenerate systems among the real ones, every
    score higher better: how many it puts below every real system, and, for
    each other one, the best real system it ranks at or above (a tie is not
    below). Systems without a value for the metric are not ranked:
    `degenerate` counts those with one."""
    scored = ~np.isnan(real)
    ranked, below, above = 0, 0, []
    for name, score in zip(floor_names, floor):
        if np.isnan(score):
            continue
        ranked += 1
        beaten = [i for i in np.flatnonzero(scored) if real[i] <= score]
        if not beaten:
            below += 1
            continue
        best = max(beaten, key=lambda i: real[i])  # the first such in the judged order on a tie
        above.append({"degenerate": name, "beats": real_names[best]})
    return {"degenerate": ranked, "below_every_real_system": below, "above_a_real_system": above}


def _value(number: float) -> float | None:
    return None if np.isnan(number) else float(number)


def _with_interval(values: np.ndarray) -> dict:
    """values[0] is the point estimate, the rest the resamples."""
    interval = percentile_interval(values[1:]) or {"ci_lower": None, "ci_upper": None}
    return {"value": _value(values[0]), **interval}


def meta_evaluate(runs: list[SystemRun], judgments: Judgments, lower_is_better: bool,
                  resamples: int, seed: int, metric_segments: str = "all",
                  floor: list[SystemRun] | None = None, metric_draws: int = wmt.METRIC_DRAWS) -> dict:
    """The report; `floor`: degenerate systems (match_floor) each metric is
    asked to rank below the real ones, None when not given; `metric_draws`:
    PERM-BOTH draws per pair of metrics (0: no significance clusters)."""
    if metric_segments not in METRIC_SEGMENTS:
        raise MetaEvalError(f"metric segments must be one of {', '.join(METRIC_SEGMENTS)}, not {metric_segments!r}")
    human_all = human_matrix(runs, judgments, lower_is_better)
    judged_by_all = ~np.isnan(human_all).any(axis=0)
    used = np.flatnonzero(judged_by_all)
    if used.size < 2:
        raise MetaEvalError(f"{judgments.path}: {used.size} segment(s) judged for every system: too few to use")
    if metric_segments == "judged":
        runs = [run.restricted_to(used) for run in runs]
        floor = None if floor is None else [run.restricted_to(used) for run in floor]
        human = human_all[:, used]
    else:  # a segment some system lacks a score for counts for no system's human score
        human = np.where(judged_by_all, human_all, np.nan)
    segment_count = human.shape[1]
    # Row 0 draws every segment once (the point estimate); the others are the
    # resamples. A resample without a judged segment has no human score: its
    # measures are NaN and the interval is then not computed.
    counts = np.vstack([np.ones((1, segment_count)), *resample_counts(segment_count, resamples, seed)])
    report_metrics, undefined = {}, []
    for metric_id in metric_ids(runs):
        scores, measures = _measures(runs, metric_id, human, counts)
        if np.isnan(scores[0]).all():  # e.g. morphological accuracy without gold analyses
            undefined.append(metric_id)
            continue
        report_metrics[metric_id] = {
            "negated": direction(metric_id) < 0,
            **{name: _with_interval(measures[name]) if name in measures else None for name in MEASURES},
            "system_scores": {run.name: _value(direction(metric_id) * scores[0, i]) for i, run in enumerate(runs)},
            "floor": None if floor is None else floor_ranking(
                scores[0], [run.name for run in runs],
                # The point estimate's row only: the floor has no interval.
                np.array([direction(metric_id) * run.system_scores(metric_id, counts[:1])[0] for run in floor]),
                [run.name for run in floor]),
        }
    measures, wmt_block = wmt_measures(runs, human, list(report_metrics), metric_draws, seed)
    for metric_id, entry in report_metrics.items():
        entry.update(measures[metric_id])
    return {
        "human": {"path": str(judgments.path), "format": judgments.format, "lower_is_better": lower_is_better},
        "corpus_version": runs[0].version,
        "segments": {"used": int(used.size), "total": int(human_all.shape[1]), "metric_segments": metric_segments},
        "systems": [{"name": run.name, "card": run.card, "human_score": float(np.nanmean(human[i]))}
                    for i, run in enumerate(runs)],
        "floor_systems": None if floor is None else [{"name": run.name, "card": run.card} for run in floor],
        "segment_kendall": SEGMENT_KENDALL_VARIANT,
        "bootstrap": {"method": "percentile over segments", "resamples": resamples, "alpha": ALPHA, "seed": seed},
        "metrics": report_metrics,
        # Metrics the cards carry statistics for but no system has a value of.
        "undefined_metrics": undefined,
        "wmt": wmt_block,
    }


def wmt_measures(runs: list[SystemRun], human: np.ndarray, metric_ids: list[str], draws: int,
                 seed: int) -> tuple[dict[str, dict], dict]:
    """WMT's measures per metric (WMT_MEASURES, None where the metric has no
    segment score on some judged segment of some system: mt-metrics-eval
    needs them complete) over the segments judged for every system, and
    what they were computed on."""
    judged = ~np.isnan(human).any(axis=0)
    human = human[:, judged]
    scores, incomplete = {}, {}
    for metric_id in metric_ids:
        values = direction(metric_id) * np.vstack([run.entry_values[metric_id][judged] for run in runs])
        missing = int(np.isnan(values).sum())
        if missing:
            incomplete[metric_id] = missing
        else:
            scores[metric_id] = values
    measures = {metric_id: dict.fromkeys(WMT_MEASURES) for metric_id in metric_ids}
    pairs = {metric_id: wmt.ItemPairs.of(human, values) for metric_id, values in scores.items()}
    epsilons = {metric_id: item_pairs.best_epsilon()[0] for metric_id, item_pairs in pairs.items()}
    block = {
        "segments": int(judged.sum()),
        "spa": {"permutations": wmt.SPA_PERMUTATIONS, "seed": wmt.SPA_SEED, "p_value": "share of permutations at "
                "least as far as observed, no +1"},
        "acc_eq": {"grouping": "item (source segment)", "all_tied": None, "pairs": None},
        "significance": {"test": "PERM-BOTH", "draws": draws, "block": wmt.BLOCK,
                         "early_stop": [wmt.EARLY_BELOW, wmt.EARLY_ABOVE], "level": wmt.SIGNIFICANCE, "seed": seed},
        "combination": {"tasks": dict(wmt.TASK_WEIGHTS)},
        # Metric -> judged (system, segment) cells without a segment score.
        "incomplete_metrics": incomplete,
    }
    if not scores or human.shape[1] < 2:
        return measures, block
    some = next(iter(pairs.values()))
    block["acc_eq"].update(all_tied=some.all_tied(), pairs=int(some.weight.size))
    tasks = {"soft_pairwise_accuracy": wmt.spa_task(human, scores, draws, seed),
             "acc_eq": wmt.acc_eq_task(pairs, epsilons, draws, seed)}
    combined = wmt.combined_task(tasks)
    for metric_id, item_pairs in pairs.items():
        spa, acc_eq = tasks["soft_pairwise_accuracy"], tasks["acc_eq"]
        measures[metric_id] = {
            "soft_pairwise_accuracy": {"value": spa.values[metric_id], "rank": spa.ranks[metric_id]},
            "acc_eq": {"value": acc_eq.values[metric_id], "epsilon": epsilons[metric_id],
                       "rank": acc_eq.ranks[metric_id]},
            "acc23": {"value": item_pairs.accuracy(0.0)},
            "tau23": {"value": item_pairs.tau23(0.0)},
            "wmt24": {"value": combined.values[metric_id], "rank": combined.ranks[metric_id]},
        }
    return measures, block


def table_rows(report: dict) -> list[list[str]]:
    """One row per metric: each measure as `value [lower, upper]`, then, with
    degenerate systems, how many it ranks below every real one (K/N)."""
    def cell(measure: dict | None) -> str:
        if measure is None or measure["value"] is None:
            return "-"
        if measure["ci_lower"] is None:
            return f"{measure['value']:+.3f}"
        return f"{measure['value']:+.3f} [{measure['ci_lower']:+.3f}, {measure['ci_upper']:+.3f}]"

    def floor_cell(floor: dict) -> list[str]:
        return [] if floor is None else [f"{floor['below_every_real_system']}/{floor['degenerate']}"]

    return [[f"{metric_id} (negated)" if entry["negated"] else metric_id, *(cell(entry[m]) for m in MEASURES),
             *wmt_cells(entry), *floor_cell(entry["floor"])]
            for metric_id, entry in report["metrics"].items()]


def wmt_cells(entry: dict) -> list[str]:
    """SPA, acc_eq, its epsilon, acc23, tau23 and the WMT24 combination;
    a value's significance cluster in parentheses."""
    def ranked(measure: dict | None) -> str:
        if measure is None:
            return "-"
        rank = measure.get("rank")
        return f"{measure['value']:.3f}" + ("" if rank is None else f" ({rank})")

    acc_eq = entry.get("acc_eq")
    return [ranked(entry.get("soft_pairwise_accuracy")), ranked(acc_eq),
            "-" if acc_eq is None else f"{acc_eq['epsilon']:.4g}",
            ranked(entry.get("acc23")), ranked(entry.get("tau23")), ranked(entry.get("wmt24"))]


TABLE_HEADERS = ["metric", "system Pearson", "system Kendall", "pairwise accuracy", "segment Kendall",
                 "SPA", "acc_eq", "ε", "acc23", "τ23", "WMT24"]


def table_headers(report: dict) -> list[str]:
    return TABLE_HEADERS + ([] if report["floor_systems"] is None else ["floor"])


def wmt_notes(report: dict) -> list[str]:
    """What the WMT columns were computed on, for the table's reader."""
    block = report["wmt"]
    significance = block["significance"]
    clusters = (f"(N): significance cluster, PERM-BOTH with {significance['draws']} draws per pair of metrics, "
                f"p <= {significance['level']}" if significance["draws"] else "no significance clusters (0 draws)")
    lines = [f"SPA, acc_eq, acc23, τ23 (ε 0), WMT24 (mean of SPA and acc_eq) over the {block['segments']} segments "
             f"judged for every system; {clusters}"]
    if block["acc_eq"]["all_tied"] is not None:
        lines.append(f"acc_eq: a metric that ties every pair scores {block['acc_eq']['all_tied']:.3f} (the humans "
                     "tie that share of pairs, averaged over segments)")
    if block["incomplete_metrics"]:
        lines.append("no segment score on every judged segment (none of WMT's measures): "
                     + ", ".join(block["incomplete_metrics"]))
    return lines


def floor_failures(report: dict) -> list[str]:
    """One line per metric that ranks some degenerate system at or above a
    real one, naming them."""
    lines = []
    for metric_id, entry in report["metrics"].items():
        above = (entry["floor"] or {}).get("above_a_real_system")
        if above:
            beaten = "; ".join(f"{pair['degenerate']} at or above {pair['beats']}" for pair in above)
            lines.append(f"{metric_id} ranks {beaten}")
    return lines
