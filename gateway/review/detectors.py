"""Each detector judged by speakers (issue 36; scoring spec §1.6): how often
the families' suggested spans (gateway/review/prefill.py) are real errors,
the errors no detector suggested, and what showing suggestions does to the
reviewers' scores. docs/community-review.md, "Detectors judged by speakers".

The rules, as this module applies them:

- Confirmed. A suggestion the reviewer accepted or edited is an error; one
  rejected is not. A detector's confirmed share is confirmed / judged over
  the suggestions decided on. For fst_rejected its complement is the
  analyzer's false-rejection rate (§1.6's validation experiment).
- Intervals. Percentile bootstrap (gateway/card/bootstrap.py: sacreBLEU's
  resample stream, seeded) over outputs, not over suggestions: an output's
  suggestions are judged together, by the same reviewer, so they are
  resampled together (a clustered bootstrap). An output rated by several
  reviewers is one cluster when the outputs carry its `item`.
- Unsuggested errors. A span a reviewer marked that overlaps no suggestion
  of its output (a [MISSING] span: no [MISSING] suggestion). On items shown
  without suggestions, the suggestions the detectors would have made (the
  report's input carries them, not shown) decide; `unprompted` is the share
  of those that a reviewer marked unprompted (a span overlapping them).
- Prefill bias. Items are shown with or without suggestions at random (the
  campaign's `prefill_share`): mean score and mean span count of outputs
  with suggestions shown less those without, a bootstrap interval of each
  difference (each group resampled by its own clusters), and the two-sided
  Mann-Whitney U p-value of the scores (SciPy).
- The bar for citing a rate (the run card's community_review, docs/scoring.md
  validation status): the campaign meets its bar (gateway/review/results.py:
  reviewers per item, items, agreement), and the detector has MIN_JUDGED
  judged suggestions from MIN_JUDGED_OUTPUTS outputs or more.
"""
from __future__ import annotations

import math

import numpy as np

from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.bootstrap import ALPHA, MIN_ENTRIES, percentile_interval, resample_counts
from gateway.review.prefill import DETECTOR_NAMES, DETECTORS, suggestions_for
from gateway.review.protocol import ACCEPTED, DECISIONS, EDITED, PREFILL_LYSS, RATE

CONFIRMED = (ACCEPTED, EDITED)
# The detector whose complement is the analyzer's false-rejection rate (§1.6).
ANALYZER = "fst_rejected"
# The bar for citing a detector's confirmed share (module docstring).
MIN_JUDGED = 50
MIN_JUDGED_OUTPUTS = 20

METRIC_OF = {detector.name: detector.metric for detector in DETECTORS}


# --- resampling -----------------------------------------------------------------------------------------------------

def _clusters(outputs: list[dict]) -> list[list[int]]:
    """Output indices grouped by their `item` (each output alone without one), in first-seen order."""
    groups: dict = {}
    for index, output in enumerate(outputs):
        key = ("item", output["item"]) if output.get("item") is not None else ("index", index)
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def _resampled_ratios(numerators: np.ndarray, denominators: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """sum(numerators) / sum(denominators) in each resample of the clusters (the
    arrays' rows), one matrix product per chunk; NaN where a resample's denominator is 0."""
    columns = np.column_stack([numerators, denominators]).astype(float)
    sums = np.vstack([counts @ columns for counts in resample_counts(len(columns), resamples, seed)])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums[:, 1] > 0, sums[:, 0] / np.where(sums[:, 1] > 0, sums[:, 1], 1), np.nan)


def _interval(samples: np.ndarray) -> list | None:
    """Percentile bounds (gateway/card/bootstrap.py); None when any resample is undefined."""
    found = percentile_interval(samples)
    return None if found is None else [found["ci_lower"], found["ci_upper"]]


def _ratio_interval(numerators: np.ndarray, denominators: np.ndarray, resamples: int, seed: int) -> list | None:
    """The interval of sum(numerators) / sum(denominators); None with too few clusters."""
    if len(numerators) < MIN_ENTRIES or resamples < 1:
        return None
    return _interval(_resampled_ratios(numerators, denominators, resamples, seed))


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


# --- checks ---------------------------------------------------------------------------------------------------------

def _check(outputs: list[dict]) -> None:
    for index, output in enumerate(outputs):
        for number, decision in enumerate(output.get("decisions") or []):
            if decision.get("decision") not in DECISIONS:
                raise ValueError(f"outputs[{index}].decisions[{number}].decision: one of {', '.join(DECISIONS)}, "
                                 f"got {decision.get('decision')!r}")
            if not isinstance(decision.get("detector"), str):
                raise ValueError(f"outputs[{index}].decisions[{number}].detector: a detector's name")
        score = output.get("score")
        if score is not None and not (isinstance(score, (int, float)) and math.isfinite(score)):
            raise ValueError(f"outputs[{index}].score: a number or null, got {score!r}")


# --- confirmed shares -----------------------------------------------------------------------------------------------

def _detector_names(outputs: list[dict]) -> list[str]:
    seen = {d["detector"] for o in outputs for d in o.get("decisions") or []}
    seen |= {s["detector"] for o in outputs for s in o.get("suggestions") or []}
    return [name for name in DETECTOR_NAMES if name in seen] + sorted(seen - set(DETECTOR_NAMES))


def _overlaps(span: dict, suggestion: dict) -> bool:
    if span.get("missing") or suggestion.get("missing"):
        return bool(span.get("missing")) and bool(suggestion.get("missing"))
    return span["start"] < suggestion["end"] and suggestion["start"] < span["end"]


def _detector_row(name: str, outputs: list[dict], clusters: list[list[int]], resamples: int, seed: int) -> dict:
    counts = {decision: 0 for decision in DECISIONS}
    confirmed, judged = np.zeros(len(clusters)), np.zeros(len(clusters))
    shown = hidden = marked = 0
    for k, members in enumerate(clusters):
        for index in members:
            output = outputs[index]
            for decision in output.get("decisions") or []:
                if decision["detector"] == name:
                    counts[decision["decision"]] += 1
                    judged[k] += 1
                    confirmed[k] += decision["decision"] in CONFIRMED
            mine = [s for s in output.get("suggestions") or [] if s["detector"] == name]
            if output.get("prefilled"):
                shown += len(mine)
            else:
                hidden += len(mine)
                marked += sum(any(_overlaps(span, s) for span in output.get("spans") or []) for s in mine)
    used = judged > 0
    total_judged, total_confirmed = int(judged.sum()), int(confirmed.sum())
    share = _share(total_confirmed, total_judged)
    row = {
        "metric": METRIC_OF.get(name),
        "suggested": shown,
        "judged": total_judged,
        "judged_outputs": int(used.sum()),
        **counts,
        "confirmed": total_confirmed,
        "confirmed_share": share,
        "confirmed_ci": _ratio_interval(confirmed[used], judged[used], resamples, seed) if total_judged else None,
        "unprompted": {"suggestions": hidden, "marked": marked, "share": _share(marked, hidden)},
    }
    if name == ANALYZER:
        interval = row["confirmed_ci"]
        row["false_rejection_rate"] = None if share is None else 1.0 - share
        row["false_rejection_ci"] = None if interval is None else [1.0 - interval[1], 1.0 - interval[0]]
    return row


# --- unsuggested errors ---------------------------------------------------------------------------------------------

def _unsuggested(outputs: list[dict]) -> dict:
    tallies = {"overall": [0, 0], "prefilled": [0, 0], "not_prefilled": [0, 0]}
    for output in outputs:
        suggestions = output.get("suggestions") or []
        for span in output.get("spans") or []:
            alone = not any(_overlaps(span, s) for s in suggestions)
            for group in ("overall", "prefilled" if output.get("prefilled") else "not_prefilled"):
                tallies[group][0] += 1
                tallies[group][1] += alone
    return {group: {"spans": spans, "unsuggested": alone, "share": _share(alone, spans)}
            for group, (spans, alone) in tallies.items()}


# --- prefill bias ---------------------------------------------------------------------------------------------------

def _group_sums(outputs: list[dict], clusters: list[list[int]], value_of) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster: the sum of its outputs' values and how many have one."""
    sums, counts = np.zeros(len(clusters)), np.zeros(len(clusters))
    for k, members in enumerate(clusters):
        for index in members:
            value = value_of(outputs[index])
            if value is not None:
                sums[k] += value
                counts[k] += 1
    return sums, counts


def _difference(groups: dict, value_of, resamples: int, seed: int) -> dict:
    """Mean of each group, their difference (with - without) and its interval,
    each group resampled by its own clusters (a stream of its own)."""
    found, samples = {}, {}
    for offset, (name, (outputs, clusters)) in enumerate(groups.items()):
        sums, counts = _group_sums(outputs, clusters, value_of)
        found[name] = float(sums.sum() / counts.sum()) if counts.sum() else None
        enough = int((counts > 0).sum()) >= MIN_ENTRIES and resamples >= 1
        samples[name] = _resampled_ratios(sums[counts > 0], counts[counts > 0], resamples, seed + offset) \
            if enough else None
    difference = None if None in found.values() else found["with"] - found["without"]
    interval = None
    if difference is not None and all(s is not None for s in samples.values()):
        interval = _interval(samples["with"] - samples["without"])
    return {"with": found["with"], "without": found["without"], "difference": difference,
            "difference_ci": interval}


def _mann_whitney_p(first: list[float], second: list[float]) -> float | None:
    if not first or not second:
        return None
    from scipy.stats import mannwhitneyu  # loaded by the results that use it (see results.degraded_lower_p)

    p_value = float(mannwhitneyu(first, second, alternative="two-sided").pvalue)
    return None if math.isnan(p_value) else p_value


def _score(output: dict) -> float | None:
    return None if output.get("score") is None else float(output["score"])


def _span_count(output: dict) -> float:
    return float(len(output.get("spans") or []))


def _prefill_bias(outputs: list[dict], resamples: int, seed: int) -> dict:
    split = {"with": [o for o in outputs if o.get("prefilled")], "without": [o for o in outputs if not o.get("prefilled")]}
    groups = {name: (members, _clusters(members)) for name, members in split.items()}
    scores = {name: [s for s in map(_score, members) if s is not None] for name, members in split.items()}
    return {
        "outputs": {name: len(members) for name, members in split.items()},
        "score": _difference(groups, _score, resamples, seed),
        "spans": _difference(groups, _span_count, resamples, seed),
        "score_mann_whitney_p": _mann_whitney_p(scores["with"], scores["without"]),
    }


# --- the report -----------------------------------------------------------------------------------------------------

def detector_report(outputs: list[dict], language: str, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> dict:
    """Each detector's confirmed share with its interval, the unsuggested
    errors and the prefill bias, for one target language, as plain JSON
    (None, never NaN). Each output: {"prefilled": bool, "suggestions": [...],
    "decisions": [...], "spans": [...], "score": float | None, "item"?: its
    cluster (entry and system)}; on an output not prefilled, "suggestions" are
    those the detectors would have made. ValueError naming the field for an
    unknown decision or a score that is not a number."""
    if resamples < 0:
        raise ValueError(f"resamples: must be 0 or more, got {resamples}")
    _check(outputs)
    clusters = _clusters(outputs)
    return {
        "language": language,
        "outputs": len(outputs),
        "bootstrap": {"resamples": resamples, "seed": seed, "alpha": ALPHA, "clusters": len(clusters)},
        "detectors": {name: _detector_row(name, outputs, clusters, resamples, seed)
                      for name in _detector_names(outputs)},
        "unsuggested": _unsuggested(outputs),
        "prefill_bias": _prefill_bias(outputs, resamples, seed),
    }


# --- citing it ------------------------------------------------------------------------------------------------------

def _bounds(pair: list[float]) -> str:
    return f"{pair[0]:.2f}–{pair[1]:.2f}"


def citations(report: dict, campaign_meets_bar: bool, campaign_id: str) -> list[dict]:
    """The detectors' confirmed shares a run card and a metric's validation
    status may cite: none unless the campaign meets its bar; then each
    detector with MIN_JUDGED judged suggestions from MIN_JUDGED_OUTPUTS outputs."""
    if not campaign_meets_bar:
        return []
    cited = []
    for name, row in report["detectors"].items():
        if row["judged"] < MIN_JUDGED or row["judged_outputs"] < MIN_JUDGED_OUTPUTS or row["confirmed_ci"] is None:
            continue
        statement = (f"{row['metric'] or name} ({report['language']}): speakers confirmed "
                     f"{row['confirmed_share']:.2f} (95% CI {_bounds(row['confirmed_ci'])}) of {row['judged']} "
                     f"{name} suggestions in campaign {campaign_id}")
        citation = {"detector": name, "metric": row["metric"], "language": report["language"],
                    "campaign_id": campaign_id, "judged": row["judged"], "confirmed_share": row["confirmed_share"],
                    "confirmed_ci": row["confirmed_ci"]}
        if name == ANALYZER:
            citation["false_rejection_rate"] = row["false_rejection_rate"]
            citation["false_rejection_ci"] = row["false_rejection_ci"]
            statement += (f"; the analyzer's false-rejection rate (scoring spec §1.6) "
                          f"{row['false_rejection_rate']:.2f} (95% CI {_bounds(row['false_rejection_ci'])})")
        cited.append({**citation, "statement": statement})
    return cited


def meets_bar(results: dict) -> bool:
    """Whether a campaign's results clear its bar (gateway/review/results.py's meets_bar, every part)."""
    return all(results["meets_bar"].values())


# --- over a stored campaign -----------------------------------------------------------------------------------------

def campaign_detectors(store, campaign: dict, results: dict) -> dict | None:
    """A campaign's `detectors` block (None without `--prefill lyss`): the
    report over its rate tasks' ratings by the raters the results kept, with
    the rates it may cite (`cited`). Items shown without suggestions get the
    ones the detectors would have made, from their entries' stored values."""
    if campaign.get("prefill") != PREFILL_LYSS:
        return None
    excluded = set(results["excluded_reviewers"])
    outputs = []
    for row in store.rated_outputs(campaign["campaign_id"], RATE):
        if row["reviewer"] in excluded:
            continue
        shown = row["suggestions"]
        would_be = None if shown is not None else [
            suggestion.as_dict() for suggestion in suggestions_for(row["output"], row["source"], row["scores"])]
        outputs.append({"item": (row["entry_id"], row["system"]), "prefilled": shown is not None,
                        "suggestions": shown if shown is not None else would_be, "decisions": row["decisions"],
                        "spans": row["spans"], "score": row["score"]})
    report = detector_report(outputs, campaign["target_lang"], results["bootstrap"]["resamples"],
                             results["bootstrap"]["seed"])
    report["cited"] = citations(report, meets_bar(results), campaign["campaign_id"])
    return report
