"""A review campaign's results: the systems' scores with bootstrap intervals,
the raters' agreement and reliability, and whether the campaign clears the bar
for "community validated" (gateway/review/protocol.py).

The rules, as this module applies them:

- Which ratings count. The results read RATE ratings only; REPEAT and CONTROL
  ratings only judge the raters. A rater whose CONTROL ratings say it is
  unreliable (below) is left out of the results when `exclude_unreliable`.
- Reliability. Each degraded rating (a CONTROL task's degraded column) is
  paired with the same rater's RATE rating of the same entry and system. A
  reliable rater scores the intact output higher: one-sided Wilcoxon
  signed-rank test on original - degraded (WMT's test). A pair scored the same
  (a zero difference) is kept in the ranking, half its rank counted each way
  (zero_method="zsplit"), rather than dropped: the test is over all of the
  rater's pairs, and a tie is evidence neither way. SciPy computes the p-value
  by exact sign flipping up to 13 pairs (ties and zeros included), by the
  normal approximation above. Every pair tied: p = 1 (nothing shows the rater
  saw the damage). The rater is reliable when p < RELIABILITY_P, not judged
  (None) with fewer than MIN_CONTROL_PAIRS pairs. REPEAT ratings are paired
  the same way and their mean absolute difference reported, not used.
  WMT's own checks (gateway/review/quality.py: Mann-Whitney U of the same
  BAD and REF scores as two samples, repeat consistency) are reported beside
  this test under each rater's `wmt`, and decide nothing.
- MQM. An mqm campaign's results also score the systems from the error spans
  of the ratings used (mqm_results, gateway/review/mqm.py's weights).
- Scores. Raters use the slider differently (one is strict, one generous), so
  each rater's RATE ratings are also standardised: z = (score - the rater's
  mean) / the rater's population std (0 when the std is 0). For each item
  (entry id) and system, the raw scores and the z scores of its raters are
  averaged; a system's mean and z are the means of its items'. Systems are
  ranked by z, then raw mean, then the order they were given in.
- Usable. An item is usable for a system when more of its raters said yes
  than no (a tie is not usable; an item without verdicts is left out of the
  share). `usable_ratings_share` is the share of yes over all verdicts.
- Intervals. Percentile bootstrap (2.5%, 97.5%) over items: the items are
  resampled with replacement, the same resample for every system and every
  statistic, so that the systems' intervals are comparable. A system missing
  from some items is averaged over the items of the resample it has.
- Agreement. Krippendorff's alpha over units (entry id, system): interval on
  the raw scores, nominal on the usable verdicts (1/0), of the raters used.
  None when fewer than two raters, no unit rated twice, or every value alike
  (alpha is then undefined). The krippendorff package's memory grows as units
  x distinct scores squared (8 bytes each): slider scores (integers 0..100)
  keep that to about 80 kB a unit; scores with decimals would not.
- The bar. At least MIN_REVIEWERS_PER_ITEM raters on every item, at least
  MIN_ITEMS items, alpha at least MIN_ALPHA; a system is validated when the
  campaign clears the bar and its usable share is at least MIN_USABLE_SHARE.

The result is plain JSON: floats, ints, bools, None, lists and dicts; never
NaN (None instead).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from gateway.review.mqm import rating_annotations, segment_scores, weights_note
from gateway.review.protocol import (CONTROL, DA_MAX, DA_MIN, MIN_ALPHA, MIN_CONTROL_PAIRS, MIN_ITEMS,
                                     MIN_REVIEWERS_PER_ITEM, MIN_USABLE_SHARE, RATE, RELIABILITY_P, REPEAT,
                                     TASK_KINDS)
from gateway.review.quality import bad_ref_check, repeat_consistency

CONFIDENCE_ALPHA = 0.05  # two-sided: the 2.5th and 97.5th percentiles


@dataclass(frozen=True)
class Rating:
    reviewer: str
    entry_id: str
    system: str  # run id
    kind: str  # RATE / REPEAT / CONTROL
    score: float  # 0..100
    usable: bool | None  # None: not answered
    degraded: bool = False  # this rating is of a degraded output (CONTROL task, that column)
    # The error spans ({start, end, severity, missing, category?}): an mqm campaign's score is made of them.
    spans: tuple = ()


# --- checks ---------------------------------------------------------------------------------------------------------


def _as_number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _check(ratings: list[Rating], systems: list[str]) -> None:
    known = set(systems)
    if len(known) != len(systems):
        raise ValueError("systems: a run id listed more than once")
    seen = set()
    for rating in ratings:
        where = f"rating by {rating.reviewer!r} of entry {rating.entry_id!r}, system {rating.system!r}"
        if rating.system not in known:
            raise ValueError(f"{where}: unknown system (the campaign's: {', '.join(systems)})")
        if rating.kind not in TASK_KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(TASK_KINDS)}, got {rating.kind!r}")
        if not DA_MIN <= _as_number(rating.score) <= DA_MAX:  # NaN fails too
            raise ValueError(f"{where}: score must be between {DA_MIN} and {DA_MAX}, got {rating.score!r}")
        if rating.degraded and rating.kind != CONTROL:
            raise ValueError(f"{where}: only a {CONTROL} rating can be of a degraded output, this one is {rating.kind}")
        key = (rating.reviewer, rating.entry_id, rating.system, rating.kind, rating.degraded)
        if key in seen:
            raise ValueError(f"{where}: rated twice as {rating.kind}{' (degraded)' if rating.degraded else ''}")
        seen.add(key)


# --- raters ---------------------------------------------------------------------------------------------------------


def _pairs(ratings: list[Rating], reviewer: str, kind: str, degraded: bool) -> list[tuple[float, float]]:
    """(RATE score, other score) for the reviewer's ratings of `kind` paired with its RATE rating of the same
    entry and system."""
    rated = {(r.entry_id, r.system): r.score for r in ratings if r.reviewer == reviewer and r.kind == RATE}
    return [(rated[(r.entry_id, r.system)], r.score) for r in ratings
            if r.reviewer == reviewer and r.kind == kind and r.degraded == degraded
            and (r.entry_id, r.system) in rated]


def degraded_lower_p(differences: list[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value that original - degraded is above 0 (zeros: the module docstring)."""
    if all(difference == 0 for difference in differences):
        return 1.0
    # scipy.stats and krippendorff (0.45 s) are imported by the results that use them: the gateway,
    # which every command's embedded stack starts, imports this module.
    from scipy.stats import wilcoxon

    p_value = float(wilcoxon(differences, alternative="greater", zero_method="zsplit").pvalue)
    return 1.0 if math.isnan(p_value) else p_value


def _rater(ratings: list[Rating], reviewer: str, exclude_unreliable: bool) -> dict:
    repeats = _pairs(ratings, reviewer, REPEAT, degraded=False)
    controls = _pairs(ratings, reviewer, CONTROL, degraded=True)
    differences = [float(original - degraded) for original, degraded in controls]
    p_value = degraded_lower_p(differences) if differences else None
    reliable = None if len(controls) < MIN_CONTROL_PAIRS else p_value < RELIABILITY_P
    return {
        "reviewer": reviewer,
        "ratings": sum(1 for r in ratings if r.reviewer == reviewer and r.kind == RATE),
        "repeat_pairs": len(repeats),
        "repeat_mean_abs_diff": repeat_consistency(repeats)["mean_abs_diff"],
        "control_pairs": len(controls),
        "degraded_lower_share": float(np.mean([d > 0 for d in differences])) if differences else None,
        "p_value": p_value,
        "reliable": reliable,
        "excluded": exclude_unreliable and reliable is False,
    }


def _z_scores(rated: list[Rating]) -> list[float]:
    """Each RATE rating's z within its rater's RATE ratings (population std; a constant rater: 0)."""
    by_rater: dict[str, list[float]] = defaultdict(list)
    for rating in rated:
        by_rater[rating.reviewer].append(float(rating.score))
    moments = {reviewer: (float(np.mean(scores)), float(np.std(scores))) for reviewer, scores in by_rater.items()}
    z_scores = []
    for rating in rated:
        mean, std = moments[rating.reviewer]
        z_scores.append((rating.score - mean) / std if std > 0 else 0.0)
    return z_scores


# --- items x systems ------------------------------------------------------------------------------------------------


@dataclass
class _Table:
    """Item-level values, items x systems, NaN where a system has no rating (no verdict) on an item."""
    items: list[str]
    raw: np.ndarray
    z: np.ndarray
    usable: np.ndarray  # 1: most raters said usable; 0: not (tie included); NaN: no verdicts
    ratings: np.ndarray  # ratings per cell
    verdicts_yes: np.ndarray
    verdicts: np.ndarray


def _table(rated: list[Rating], systems: list[str]) -> _Table:
    items = sorted({r.entry_id for r in rated})
    row = {entry_id: i for i, entry_id in enumerate(items)}
    column = {system: j for j, system in enumerate(systems)}
    shape = (len(items), len(systems))
    raw_sum, z_sum, count = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    yes, no = np.zeros(shape), np.zeros(shape)
    for rating, z in zip(rated, _z_scores(rated)):
        cell = row[rating.entry_id], column[rating.system]
        raw_sum[cell] += rating.score
        z_sum[cell] += z
        count[cell] += 1
        if rating.usable is not None:
            (yes if rating.usable else no)[cell] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(count > 0, raw_sum / count, np.nan)
        z = np.where(count > 0, z_sum / count, np.nan)
    usable = np.where(yes + no > 0, (yes > no).astype(float), np.nan)
    return _Table(items, raw, z, usable, count, yes, yes + no)


def _resample_weights(items: int, resamples: int, seed: int) -> np.ndarray:
    """resamples x items: how many times each item is drawn in each bootstrap resample."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, items, size=(resamples, items))
    flat = (draws + items * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * items).reshape(resamples, items).astype(float)


def _column_means(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Weighted means of each column over its non-NaN rows, one row of means per row of weights."""
    present = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ np.where(present, values, 0.0)) / (weights @ present.astype(float))


def _interval(samples: np.ndarray) -> list[float] | None:
    kept = samples[~np.isnan(samples)]
    if kept.size == 0:
        return None
    low, high = np.percentile(kept, [100 * CONFIDENCE_ALPHA / 2, 100 * (1 - CONFIDENCE_ALPHA / 2)])
    return [float(low), float(high)]


def _mean_or_none(values: np.ndarray) -> float | None:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else None


def _system_rows(table: _Table, systems: list[str], resamples: int, seed: int) -> list[dict]:
    weights = _resample_weights(len(table.items), resamples, seed) if resamples and table.items else None
    boot = {name: _column_means(weights, values) if weights is not None else None
            for name, values in (("raw", table.raw), ("z", table.z), ("usable", table.usable))}
    rows = []
    for j, system in enumerate(systems):
        rated = bool(table.ratings[:, j].any())
        intervals = {name: _interval(samples[:, j]) if samples is not None and rated else None
                     for name, samples in boot.items()}
        verdicts = table.verdicts[:, j].sum()
        rows.append({
            "system": system,
            "items": int((table.ratings[:, j] > 0).sum()),
            "ratings": int(table.ratings[:, j].sum()),
            "mean": _mean_or_none(table.raw[:, j]),
            "mean_ci": intervals["raw"],
            "z": _mean_or_none(table.z[:, j]),
            "z_ci": intervals["z"],
            "usable_share": _mean_or_none(table.usable[:, j]),
            "usable_ci": intervals["usable"] if verdicts else None,
            "usable_ratings_share": float(table.verdicts_yes[:, j].sum() / verdicts) if verdicts else None,
        })
    # By z, then raw mean, then the given order; systems nobody rated last.
    order = sorted(range(len(rows)), key=lambda j: (rows[j]["z"] is None, -(rows[j]["z"] or 0.0),
                                                    -(rows[j]["mean"] or 0.0), j))
    ranked = [rows[j] for j in order]
    for rank, row in enumerate(ranked, start=1):
        row["rank"] = rank
    return ranked


# --- agreement ------------------------------------------------------------------------------------------------------


def _alpha(rated: list[Rating], value_of, level: str) -> float | None:
    """Krippendorff's alpha, raters x units (entry id, system), over the ratings that have a value."""
    valued = [(r, value_of(r)) for r in rated if value_of(r) is not None]
    raters = sorted({r.reviewer for r, _ in valued})
    units = sorted({(r.entry_id, r.system) for r, _ in valued})
    if len(raters) < 2:
        return None
    row = {reviewer: i for i, reviewer in enumerate(raters)}
    column = {unit: j for j, unit in enumerate(units)}
    data = np.full((len(raters), len(units)), np.nan)
    for rating, value in valued:
        data[row[rating.reviewer], column[(rating.entry_id, rating.system)]] = value
    # A unit rated once adds nothing to the coincidences alpha is made of; the package's work grows with
    # units x distinct values squared, so it gets only the units rated twice or more.
    data = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    if data.shape[1] == 0 or np.unique(data[~np.isnan(data)]).size < 2:
        return None  # no unit rated twice, or one value only: alpha is undefined
    import krippendorff  # see degraded_lower_p

    with np.errstate(invalid="ignore", divide="ignore"):  # a degenerate case's 0/0: NaN, turned to None below
        value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    return value if math.isfinite(value) else None


def _score(rating: Rating) -> float:
    return float(rating.score)


def _verdict(rating: Rating) -> float | None:
    return None if rating.usable is None else float(rating.usable)


# --- the campaign ---------------------------------------------------------------------------------------------------


def _reviewers_per_item(rated: list[Rating]) -> dict:
    raters_of: dict[str, set[str]] = defaultdict(set)
    for rating in rated:
        raters_of[rating.entry_id].add(rating.reviewer)
    counts = [len(raters) for raters in raters_of.values()]
    return {"min": min(counts) if counts else 0, "mean": float(np.mean(counts)) if counts else 0.0}


def _judgments(table: _Table, systems: list[str]) -> dict[str, dict[str, float]]:
    return {system: {entry_id: float(table.raw[i, j]) for i, entry_id in enumerate(table.items)
                     if table.ratings[i, j] > 0}
            for j, system in enumerate(systems)}


def campaign_results(ratings: list[Rating], systems: list[str], seed: int = 12345, resamples: int = 1000,
                     exclude_unreliable: bool = True, protocol: str = "da") -> dict:
    """The campaign's results as plain JSON (the module docstring gives the rules): `systems` (ranked), `alpha`,
    `raters` (by name; `ratings` counts a rater's RATE ratings), `items`, `reviewers_per_item`,
    `excluded_reviewers`, `bootstrap`, `meets_bar` and `judgments` (system -> entry id -> mean raw score).
    ValueError for a rating of an unknown system, a score outside 0..100, an unknown kind, a degraded rating
    that is not a CONTROL one, or the same rating twice. Each rater also carries WMT's checks (`wmt`:
    gateway/review/quality.py); an mqm campaign (`protocol` "mqm") also gets `mqm` (mqm_results)."""
    _check(ratings, systems)
    if resamples < 0:
        raise ValueError(f"resamples: must be 0 or more, got {resamples}")
    raters = [_rater(ratings, reviewer, exclude_unreliable) for reviewer in sorted({r.reviewer for r in ratings})]
    excluded = [rater["reviewer"] for rater in raters if rater["excluded"]]
    rated = [r for r in ratings if r.kind == RATE and r.reviewer not in excluded]
    table = _table(rated, systems)
    per_item = _reviewers_per_item(rated)
    alpha = {"da": _alpha(rated, _score, "interval"), "usable": _alpha(rated, _verdict, "nominal")}
    for rater in raters:
        rater["wmt"] = wmt_quality(ratings, rater["reviewer"])
    results = {
        "systems": _system_rows(table, systems, resamples, seed),
        "alpha": alpha,
        "raters": raters,
        "items": len(table.items),
        "reviewers_per_item": per_item,
        "excluded_reviewers": excluded,
        "bootstrap": {"resamples": resamples, "seed": seed, "alpha": CONFIDENCE_ALPHA},
        "meets_bar": {
            "reviewers_per_item": per_item["min"] >= MIN_REVIEWERS_PER_ITEM,
            "items": len(table.items) >= MIN_ITEMS,
            "agreement": alpha["da"] is not None and alpha["da"] >= MIN_ALPHA,
        },
        "judgments": _judgments(table, systems),
    }
    if protocol == "mqm":
        results["mqm"] = mqm_results(rated, systems)
    return results


# --- WMT's annotator checks and MQM scores (issue 36) ----------------------------------------------------------------


def wmt_quality(ratings: list[Rating], reviewer: str) -> dict:
    """The rater's WMT checks (gateway/review/quality.py): Mann-Whitney U of its BAD (degraded) scores against
    their REF (intact) ones, and the consistency of its repeats; beside `p_value`, our Wilcoxon test."""
    return {"bad_ref": bad_ref_check(_pairs(ratings, reviewer, CONTROL, degraded=True)),
            "repeats": repeat_consistency(_pairs(ratings, reviewer, REPEAT, degraded=False))}


def mqm_results(rated: list[Rating], systems: list[str]) -> dict:
    """An mqm campaign's scores from the error spans of the ratings used (gateway/review/mqm.py): each item's
    score is minus its raters' mean summed penalty, a system's the mean of its items' (0 is best); systems
    ranked by it, then the given order; a system nobody rated last, without a score."""
    annotations = [row for rating in rated
                   for row in rating_annotations(rating.system, rating.entry_id, rating.reviewer, rating.spans)]
    by_system: dict[str, list[float]] = defaultdict(list)
    for (system, _), score in segment_scores(annotations).items():
        by_system[system].append(score)
    rows = [{"system": system, "items": len(by_system[system]),
             "score": float(np.mean(by_system[system])) if by_system[system] else None} for system in systems]
    order = sorted(range(len(rows)), key=lambda j: (rows[j]["score"] is None, -(rows[j]["score"] or 0.0), j))
    ranked = [rows[j] for j in order]
    for rank, row in enumerate(ranked, start=1):
        row["rank"] = rank
    return {"systems": ranked, "weights": weights_note()}


def system_validated(results: dict, system: str) -> tuple[bool, list[str]]:
    """Whether this campaign's results validate `system`'s output as usable: every meets_bar true and its
    usable_share >= MIN_USABLE_SHARE; the list says why not (one short reason each, naming the numbers and the bar)."""
    bar = results["meets_bar"]
    reasons = []
    if not bar["reviewers_per_item"]:
        per_item = results["reviewers_per_item"]
        reasons.append(f"reviewers per item: as few as {per_item['min']} (mean {per_item['mean']:.1f}), "
                       f"the bar is {MIN_REVIEWERS_PER_ITEM}")
    if not bar["items"]:
        reasons.append(f"items: {results['items']} rated, the bar is {MIN_ITEMS}")
    if not bar["agreement"]:
        alpha = results["alpha"]["da"]
        measured = "could not be computed" if alpha is None else f"{alpha:.3f}"
        reasons.append(f"agreement: Krippendorff's alpha {measured}, the bar is {MIN_ALPHA}")
    row = next((row for row in results["systems"] if row["system"] == system), None)
    if row is None:
        reasons.append(f"usable: {system} was not part of this campaign")
    elif row["usable_share"] is None:
        reasons.append(f"usable: no verdicts on {system}'s outputs")
    elif row["usable_share"] < MIN_USABLE_SHARE:
        reasons.append(f"usable: {row['usable_share']:.1%} of items judged usable, the bar is {MIN_USABLE_SHARE:.0%}")
    return not reasons, reasons


def judgments_tsv(results: dict) -> str:
    """meta-eval's `system<TAB>segment<TAB>score` format (one line per system and entry, systems in `systems` order,
    entries sorted), score = results['judgments'] value formatted with repr-precision (e.g. f'{x:.6g}' is NOT enough;
    use repr(float))."""
    lines = []
    for row in results["systems"]:
        system = row["system"]
        for entry_id, score in sorted(results["judgments"].get(system, {}).items()):
            for field, name in ((system, "system"), (entry_id, "entry id")):
                if any(char in field for char in "\t\r\n") or field != field.strip():
                    raise ValueError(f"{name} {field!r}: a tab, a line break or edge spaces would break the TSV")
            lines.append(f"{system}\t{entry_id}\t{float(score)!r}")
    return "".join(line + "\n" for line in lines)
