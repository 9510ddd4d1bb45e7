"""What a report shows, read from run cards: plain rows and numbers for the
templates and the figures. Nothing here formats HTML."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from champollion.core.tiers import is_secret
from gateway.card.adequacy import gated_statistics, inadequate_entries
from gateway.card.breakdowns import breakdown
from gateway.card.compare import ComparableRun, CompareRefused, compare_run_cards
from gateway.card.composite import composite_input
from gateway.card.corpus import corpus_values
from gateway.card.metrics import METRICS, PERCENT_METRICS, WEIGHTS
from gateway.card.pairs import MIN_RUNS, compare_all

# Per-entry texts and facts the run card does not carry (entry id -> fields:
# source, reference, prediction, domain, latency_s), from the run's own files.
EntryInputs = Mapping[str, Mapping[str, object]]

# Scores rows, in reading order: the composite first, then the metric table's order.
SCORE_ROWS = ("composite", "quality_tier", *METRICS)
WORST_ENTRIES = 20
# Texts an entry may carry itself (run cards from this gateway carry none).
TEXT_FIELDS = ("source", "reference", "prediction", "domain")


@dataclass
class Run:
    """One run card and what the report derives from it."""
    card: dict
    inputs: EntryInputs = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.card.get("run_id") or ""

    @property
    def label(self) -> str:
        """Model and short run id: several runs of one model stay apart."""
        model = self.card.get("model_slug") or "unnamed model"
        return f"{model} ({self.run_id[:8]})" if self.run_id else model

    @property
    def scores(self) -> dict:
        return self.card.get("scores") or {}

    @property
    def private_references(self) -> bool:
        return is_secret(self.card)

    def texts(self, entry: dict) -> dict:
        """An entry's texts and facts: the run's files, else what the entry
        itself carries (cards made elsewhere may keep their texts)."""
        own = {key: entry[key] for key in TEXT_FIELDS if isinstance(entry.get(key), str)}
        return {**own, **self.inputs.get(entry["id"], {})}


def warnings_by_text(runs: list[Run]) -> list[tuple[str, list[str]]]:
    """Each distinct warning once, in first-seen order, with the labels of
    the runs whose cards give it (several runs of one corpus share most)."""
    found: dict[str, list[str]] = {}
    for run in runs:
        for warning in dict.fromkeys(run.card.get("warnings") or []):
            found.setdefault(warning, []).append(run.label)
    return list(found.items())


def null_reason(card: dict, metric_id: str) -> str | None:
    """The card's warning explaining why `metric_id` is null: the first one
    naming the metric as a word (the composite's coverage line names what
    is missing, not why), else one saying its family failed or is absent."""
    warnings = [w for w in card.get("warnings") or [] if not w.startswith("composite (")]
    named = re.compile(rf"(?<![\w.]){re.escape(metric_id)}(?!\w)")
    for warning in warnings:
        if named.search(warning):
            return warning
    family = METRICS[metric_id].family if metric_id in METRICS else None
    for warning in warnings:
        if family and f"family '{family}'" in warning:
            return warning
    return next((warning for warning in warnings if WITHHELD_MARK in warning and "every score" in warning), None)


@dataclass
class Cell:
    value: object
    ci: tuple[float, float] | None = None
    reason: str | None = None  # why the value is null, when the card says


@dataclass
class ScoreRow:
    metric: str
    percent: bool
    cells: list[Cell]
    signatures: list[tuple[str, str]]  # (run label, signature), distinct signatures only


def score_rows(runs: list[Run]) -> list[ScoreRow]:
    """Every score key any card has, value and CI per run, with signatures."""
    rows = []
    for metric in SCORE_ROWS:
        if not any(metric in run.scores for run in runs):
            continue
        cells = []
        for run in runs:
            value = run.scores.get(metric)
            interval = (run.scores.get("confidence_intervals") or {}).get(metric)
            ci = (interval["ci_lower"], interval["ci_upper"]) if interval else None
            cells.append(Cell(value, ci, null_reason(run.card, metric) if value is None else None))
        signatures, seen = [], set()
        for run in runs:
            signature = (run.card.get("signatures") or {}).get(metric)
            if signature and signature not in seen:
                seen.add(signature)
                signatures.append((run.label, signature))
        rows.append(ScoreRow(metric, metric in PERCENT_METRICS, cells, signatures))
    return rows


@dataclass
class CompositePart:
    metric: str
    value: float
    normalised: float  # on the composite's 0-1, higher-is-better scale
    weight: float  # effective (re-normalised) weight
    contribution: float  # weight x normalised


def composite_parts(run: Run) -> list[CompositePart]:
    """The composite as the sum of its parts: each metric that entered it,
    its effective weight and its normalised value (gateway/card/composite.py),
    the value as the composite read it (composite_input_values)."""
    weights = (run.card.get("composite_coverage") or {}).get("weights") or {}
    values = composite_input_values(run, list(weights))
    parts = []
    for metric, weight in sorted(weights.items(), key=lambda item: -item[1]):
        value = values.get(metric)
        if value is None or metric not in METRICS:
            continue
        normalised = float(composite_input(metric, value))
        parts.append(CompositePart(metric, value, normalised, weight, weight * normalised))
    return parts


def entry_stats(entries: list[dict]) -> dict[str, np.ndarray]:
    """Per-entry statistics as (entries x statistics) arrays, for the
    metrics every entry has."""
    if not entries:
        return {}
    shared = set.intersection(*(set(entry.get("stats") or {}) for entry in entries))
    return {m: np.asarray([entry["stats"][m] for entry in entries], dtype=float) for m in sorted(shared)}


def composite_input_values(run: Run, metric_ids: list[str]) -> dict:
    """The card's scores, with those of `metric_ids` as its composite read
    them: over the adequacy-gated per-entry statistics where some entry is
    inadequate (the card's own metric values are ungated), else as they are
    (a card without entries keeps its values: nothing to gate)."""
    entries = run.card.get("entries") or []
    inadequate = inadequate_entries(entries)
    if not inadequate.any():
        return run.scores
    gated = gated_statistics(entry_stats(entries), inadequate, metric_ids)
    return {**run.scores, **corpus_values({m: gated[m] for m in metric_ids if m in gated})}


# The gateway's reason for values withheld from a non-maintainer's card of a
# secret-tier corpus (gateway/card/breakdowns.py withheld_reason).
WITHHELD_MARK = " withheld: on a "


def withheld_groups(run: Run, key: str) -> tuple[list[str], str | None]:
    """The groups of breakdown `key` whose values the card leaves null
    (a group of too few entries of a secret-tier corpus), and the card's
    warning saying why (None when it gives none)."""
    found = run.scores.get(key) or {}
    names = [name for name, group in found.items()
             if isinstance(group, dict) and all(group.get(value) is None
                                                for value in ("chrf_plus_plus", "exact_match_rate", "composite"))]
    reason = next((warning for warning in run.card.get("warnings") or []
                   if WITHHELD_MARK in warning and key in warning), None)
    return names, reason


def groups(run: Run, key: str) -> tuple[dict, str | None]:
    """A breakdown (`by_difficulty`, `by_provenance`, `by_domain`) and a note
    on where it came from; by_domain, which run cards do not carry, is
    computed with the gateway's own breakdown from the entries' statistics
    when the run's inputs give each entry's domain."""
    found = run.scores.get(key)
    if found:
        return found, None
    if key != "by_domain":
        return {}, None
    entries = run.card.get("entries") or []
    domains = [run.texts(entry).get("domain") for entry in entries]
    if not entries:
        return {}, "the run card has no by_domain breakdown and no per-entry results to compute it from"
    if not any(domains):
        return {}, "the run card has no by_domain breakdown (give the run's corpus to compute it)"
    profile = (run.card.get("composite_coverage") or {}).get("profile") or "A"
    stats = entry_stats(entries)
    # The composite as the gateway's breakdowns compute it: inadequate entries at their worst.
    gated = gated_statistics(stats, inadequate_entries(entries), WEIGHTS[profile])
    computed = breakdown(domains, stats, profile, composite_stats=gated)
    return computed, "computed from the card's per-entry statistics and the corpus's domains"


def latencies(run: Run) -> list[float]:
    """Per-entry latencies in seconds, from the run's inputs (cards keep only
    their average, median and 95th percentile)."""
    found = []
    for entry in run.card.get("entries") or []:
        latency = run.inputs.get(entry["id"], {}).get("latency_s")
        if isinstance(latency, (int, float)):
            found.append(float(latency))
    return found


def cost_per_entry(run: Run) -> float | None:
    return (run.card.get("totals") or {}).get("cost_per_entry_usd")


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (cost, quality) no other point dominates (as
    cheap or cheaper and as good or better, one strictly), cheapest first."""
    front = []
    for i, (cost, quality) in enumerate(points):
        dominated = any(
            other_cost <= cost and other_quality >= quality and (other_cost < cost or other_quality > quality)
            for j, (other_cost, other_quality) in enumerate(points) if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


@dataclass
class Comparison:
    baseline: Run
    system: Run
    result: dict | None
    refused: str | None = None


def _bootstrap_settings(run: Run) -> tuple[int, int]:
    """The resamples and seed of a card's bootstrap: the report's paired tests'."""
    bootstrap = run.card.get("bootstrap") or {}
    return bootstrap.get("resamples") or 1000, bootstrap.get("seed") or 12345


def comparisons(runs: list[Run]) -> list[Comparison]:
    """Each run after the first against the first (paired bootstrap,
    gateway/card/compare.py), with the first card's resamples and seed."""
    if len(runs) < 2:
        return []
    baseline = runs[0]
    resamples, seed = _bootstrap_settings(baseline)
    found = []
    for system in runs[1:]:
        try:
            result = compare_run_cards(baseline.card, system.card, resamples, seed)
        except CompareRefused as refused:
            found.append(Comparison(baseline, system, None, str(refused)))
            continue
        found.append(Comparison(baseline, system, result))
    return found


@dataclass
class AllPairs:
    """Every pair of the report's runs of one corpus version: `result` is
    gateway/card/pairs.py's compare_all (None: `note` says why); `note`
    also names the runs left out."""
    runs: list[Run]
    result: dict | None
    note: str | None = None


def all_pairs(runs: list[Run]) -> AllPairs | None:
    """Every pair of the runs with per-entry results of the first corpus
    version two such runs are on (paired bootstrap with the first card's
    resamples and seed, Holm-corrected); None for a report of one run."""
    if len(runs) < MIN_RUNS:
        return None
    by_version: dict[str, list[Run]] = {}
    for run in runs:
        if run.card.get("entries"):
            by_version.setdefault((run.card.get("dataset") or {}).get("version"), []).append(run)
    chosen = next((group for group in by_version.values() if len(group) >= MIN_RUNS), [])
    left_out = [run.label for run in runs if run not in chosen]
    note = (f"not in the comparison: {', '.join(left_out)} (another corpus version, or a card without per-entry "
            f"results)") if left_out else None
    if not chosen:
        return AllPairs([], None, "no two runs with per-entry results are on one corpus version")
    resamples, seed = _bootstrap_settings(runs[0])
    try:
        result = compare_all([ComparableRun.from_card(run.card) for run in chosen], resamples, seed,
                             names=[run.label for run in chosen])
    except CompareRefused as refused:
        return AllPairs(chosen, None, str(refused))
    return AllPairs(chosen, result, note)


@dataclass
class WorstEntry:
    id: str
    difficulty: object
    domain: object
    source: str | None
    reference: str | None
    reference_note: str | None
    prediction: str | None
    scores: dict
    error: str | None


# Per-entry metrics shown beside each worst entry: a choice of what to show
# (tests/test_metric_table.py holds each to the metric table).
ENTRY_METRICS = ("composite", "chrf_plus_plus", "semantic_score", "ter", "fst_acceptance_rate", "compliance_index")


def worst_entries(run: Run, count: int = WORST_ENTRIES) -> list[WorstEntry]:
    """The `count` entries with the lowest composite (unscored ones first)."""
    entries = run.card.get("entries") or []

    def composite(entry: dict) -> float:
        value = (entry.get("scores") or {}).get("composite")
        return -1.0 if value is None else value

    worst = []
    for entry in sorted(entries, key=composite)[:count]:
        given = run.texts(entry)  # cards carry no texts: the run's files do
        note = None
        reference = given.get("reference")
        if run.private_references:
            reference, note = None, "withheld (private corpus)"
        worst.append(WorstEntry(
            id=entry["id"], difficulty=entry.get("difficulty"), domain=given.get("domain"),
            source=given.get("source"), reference=reference, reference_note=note,
            prediction=given.get("prediction"), scores=entry.get("scores") or {}, error=entry.get("error"),
        ))
    return worst


# Per-entry values the segment table can show and sort by: the composite,
# then the metric table's order (those some entry has a number for).
SEGMENT_METRICS = ("composite", *METRICS)


def _number(value) -> float | None:
    """A finite number, else None (JSON has no NaN)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def segment_table(runs: list[Run]) -> dict:
    """Every entry of every card, the runs side by side: the data the page's
    script shows, sorts and filters (as JSON; texts stay text there).

    rows: {id, tier, domain, source, reference, outputs: one per run,
    [prediction, error, values] or None where the run lacks the entry},
    values in `metrics`' order. Entries are in the first card's order, then
    those only later cards have."""
    by_run = [{entry["id"]: entry for entry in run.card.get("entries") or []} for run in runs]
    order = list(dict.fromkeys(id_ for entries in by_run for id_ in entries))
    metrics = [m for m in SEGMENT_METRICS
               if any(_number((entry.get("scores") or {}).get(m)) is not None
                      for entries in by_run for entry in entries.values())]
    private = any(run.private_references for run in runs)
    rows = []
    for id_ in order:
        row = {"id": id_, "tier": None, "domain": None, "source": None, "reference": None, "outputs": []}
        for run, entries in zip(runs, by_run):
            entry = entries.get(id_)
            if entry is None:
                row["outputs"].append(None)
                continue
            texts = run.texts(entry)
            for key, value in (("tier", entry.get("difficulty")), ("domain", texts.get("domain")),
                               ("source", texts.get("source")), ("reference", texts.get("reference"))):
                if row[key] is None and value is not None:  # the corpus is shared: the first run that has it
                    row[key] = value
            scores = entry.get("scores") or {}
            row["outputs"].append([texts.get("prediction"), entry.get("error"),
                                   [_number(scores.get(m)) for m in metrics]])
        if private:
            row["reference"] = None
        rows.append(row)
    return {
        "systems": [run.label for run in runs],
        "metrics": [{"id": m, "lower_is_better": m in METRICS and METRICS[m].lower_is_better} for m in metrics],
        "reference_note": "withheld (private corpus)" if private else None,
        "rows": rows,
    }
