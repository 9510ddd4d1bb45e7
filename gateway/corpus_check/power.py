"""Statistical power (seed 001 §6.3): the smallest difference the paired
bootstrap (`champollion compare`, 1,000 resamples, p < 0.05) detects with
80% power on a corpus of this size.

With pilot run cards (two systems or more scored on one pilot corpus, with
per-entry statistics) it is simulated: for a pair of pilot systems, many
corpora of the checked size are drawn from the pilot's entries (with
replacement); in each, the pair's paired bootstrap is run through compare's
own code (resampled sums, the metric table's reducers, the composite, the
test and its significance verdict) after the pair's true difference (over
the whole pilot) is taken out and a shift put in its place. The estimate is
the smallest shift found significant in 80% of the simulated corpora.
Shifting a corpus value rather than rewriting per-entry statistics keeps
the pair's real per-entry noise and correlation, which is what decides the
result. Without pilot cards, the framework's rule of thumb is reported."""
from __future__ import annotations

from itertools import combinations
from statistics import median

import numpy as np

from champollion.core.corpus_rules import POWER, POWER_METRIC, RULE, RULE_OF_THUMB, PowerSettings
from gateway.card.bootstrap import resampled_sums
from gateway.card.compare import ComparableRun, CompareRefused, paired_bootstrap_test
from gateway.card.composite import weighted_composite
from gateway.card.corpus import values_from_sums
from gateway.card.metrics import LABELS, METRICS
from gateway.corpus_check.results import RuleResult, with_label

COMPOSITE = "composite"
# Bisection stops when the bracket is this narrow, as a share of the metric's
# scale: 0.01 chrF++ point, 0.0001 of the composite.
PRECISION = 1e-4


class PilotRefused(ValueError):
    """Pilot run cards that cannot be used; the message names the card."""


def pilot_from_card(name: str, card: dict) -> tuple[str, ComparableRun]:
    """A run card file's dict as a pilot; PilotRefused when it is not a run card."""
    try:
        return name, ComparableRun.from_card(card)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise PilotRefused(f"{name}: not a run card with per-entry statistics ({type(error).__name__}: "
                           f"{error})") from None


def pilot_runs(pilots: list[tuple[str, ComparableRun]]) -> list[tuple[str, ComparableRun]]:
    """The pilots, checked: two or more, each with per-entry statistics, all
    of one corpus version (PilotRefused names the card at fault)."""
    if len(pilots) < 2:
        raise PilotRefused("pilot: give at least two run cards (systems) of one pilot corpus: the power of a "
                           "paired test depends on how two systems differ entry by entry")
    first_name, first = pilots[0]
    for name, run in pilots:
        if not run.ids or not run.stats:
            raise PilotRefused(f"{name}: no per-entry statistics (a holdout or gold card is corpus level): "
                               "use a card of a dev or local corpus")
        if run.version != first.version:
            raise PilotRefused(f"{name}: corpus version {run.version[:12]} is not {first_name}'s "
                               f"{first.version[:12]}: pilot cards must be of one corpus")
    return pilots


def _series(stats_a, stats_b, weights_a, weights_b, sums_a, sums_b, metrics) -> dict[str, np.ndarray]:
    """system - baseline per row of summed statistics, per metric estimated."""
    values_a = {m: values_from_sums(m, sums_a[m]) for m in stats_a}
    values_b = {m: values_from_sums(m, sums_b[m]) for m in stats_b}
    found = {}
    for metric in metrics:
        if metric == COMPOSITE:
            found[metric] = weighted_composite(values_b, weights_b) - weighted_composite(values_a, weights_a)
        else:
            found[metric] = values_b[metric] - values_a[metric]
    return found


def _rate(samples: list[np.ndarray], observed: list[float], shift: float) -> float:
    return float(np.mean([paired_bootstrap_test(sample + shift, difference + shift)["significant"]
                          for sample, difference in zip(samples, observed)]))


def _smallest_shift(samples: list[np.ndarray], observed: list[float], power: float, unit: float) -> float:
    """The smallest shift significant in `power` of the simulated corpora (bisection)."""
    spread = float(np.std(observed)) + float(np.mean([np.std(s) for s in samples])) or unit
    low, high = 0.0, spread
    while _rate(samples, observed, high) < power:
        low, high = high, high * 2
    while high - low > PRECISION * unit:
        middle = (low + high) / 2
        if _rate(samples, observed, middle) >= power:
            high = middle
        else:
            low = middle
    return high


def detectable_differences(baseline: ComparableRun, system: ComparableRun, size: int,
                           settings: PowerSettings = POWER) -> dict:
    """Per metric estimated (chrF++, the composite): the smallest shift of the
    pair's difference the paired bootstrap detects in `settings.power` of
    corpora of `size` entries drawn from the pilot; None where the pilot
    cards lack the metric."""
    try:
        stats_b = system.aligned_to(baseline.ids)
    except CompareRefused as error:
        raise PilotRefused(str(error)) from None
    wanted = [metric for metric, _ in settings.metrics]
    weighted = set(baseline.weights) | set(system.weights)
    shared = {m for m in baseline.stats if m in stats_b and m in METRICS}
    metrics = [m for m in wanted if m in shared or (m == COMPOSITE and weighted and weighted <= shared)]
    # Only what the estimated values need: each reducer runs once per resample.
    needed = sorted({m for m in metrics if m != COMPOSITE} | (weighted if COMPOSITE in metrics else set()))
    stats_a = {m: baseline.stats[m] for m in needed}
    stats_b = {m: stats_b[m] for m in needed}
    if not metrics:
        return {"detectable": {metric: None for metric in wanted}, "pilot_difference": {}}
    pilot_size = len(baseline.ids)
    whole = _series(stats_a, stats_b, baseline.weights, system.weights,
                    {m: s.sum(axis=0, keepdims=True) for m, s in stats_a.items()},
                    {m: s.sum(axis=0, keepdims=True) for m, s in stats_b.items()}, metrics)
    truth = {m: float(whole[m][0]) for m in metrics}
    rng = np.random.default_rng(settings.seed)
    samples = {m: [] for m in metrics}
    observed = {m: [] for m in metrics}
    for draw in range(settings.draws):
        rows = rng.integers(0, pilot_size, size)
        drawn_a = {m: s[rows] for m, s in stats_a.items()}
        drawn_b = {m: s[rows] for m, s in stats_b.items()}
        # Both sides in one resampling: the same entries drawn for each (paired).
        both = {**{("a", m): s for m, s in drawn_a.items()}, **{("b", m): s for m, s in drawn_b.items()}}
        sums = resampled_sums(both, settings.resamples, settings.seed + draw + 1)
        resampled = _series(drawn_a, drawn_b, baseline.weights, system.weights,
                            {m: sums[("a", m)] for m in drawn_a}, {m: sums[("b", m)] for m in drawn_b}, metrics)
        corpus = _series(drawn_a, drawn_b, baseline.weights, system.weights,
                         {m: s.sum(axis=0, keepdims=True) for m, s in drawn_a.items()},
                         {m: s.sum(axis=0, keepdims=True) for m, s in drawn_b.items()}, metrics)
        for metric in metrics:
            if np.isnan(resampled[metric]).any() or np.isnan(corpus[metric][0]):
                continue  # undefined in some resample: compare would not test it either
            samples[metric].append(resampled[metric] - truth[metric])
            observed[metric].append(float(corpus[metric][0]) - truth[metric])
    found = {}
    for metric in wanted:
        if metric not in metrics or len(samples[metric]) < settings.draws // 2:
            found[metric] = None
            continue
        unit = METRICS[metric].scale if metric in METRICS else 1.0
        found[metric] = _smallest_shift(samples[metric], observed[metric], settings.power, unit)
    return {"detectable": found, "pilot_difference": truth}


def _rule_of_thumb(size: int) -> tuple[float, bool, str]:
    """(chrF++ points, whether that is a lower bound, the words)."""
    band = [row for row in RULE_OF_THUMB if size >= row[0]][-1]
    return band[1], band is RULE_OF_THUMB[0], with_label(band[2])


def check_power(size: int, purpose: str, pilots: list[tuple[str, ComparableRun]] | None,
                settings: PowerSettings = POWER) -> tuple[dict, RuleResult]:
    target = RULE["power"].limit_for(purpose)
    label = LABELS[POWER_METRIC]
    if not pilots:
        points, lower_bound, words = _rule_of_thumb(size)
        section = {"method": "rule of thumb (seed 001 §6.3; no pilot run cards)", "entries": size,
                   POWER_METRIC: points, "lower_bound": lower_bound, "composite": None, "says": words}
        passed = points <= target and not lower_bound
        shown = f"{'more than ' if lower_bound else 'about '}{points:g}"
        return section, RuleResult("power", passed, f"{size} entries detect {shown} {label} points (rule of thumb; "
                                                    f"a {purpose} set should detect {target:g})")
    runs = pilot_runs(pilots)
    pairs = []
    for (name_a, run_a), (name_b, run_b) in combinations(runs, 2):
        estimate = detectable_differences(run_a, run_b, size, settings)
        pairs.append({"baseline": name_a, "system": name_b, **estimate})
    summary = {}
    for metric, _ in settings.metrics:
        values = [pair["detectable"][metric] for pair in pairs if pair["detectable"].get(metric) is not None]
        summary[metric] = median(values) if values else None
    section = {"method": (f"simulated from {len(runs)} pilot run cards ({len(runs[0][1].ids)} entries): "
                          f"{settings.draws} corpora of {size} entries, each a paired bootstrap of "
                          f"{settings.resamples} resamples; smallest shift significant (p < 0.05) in "
                          f"{settings.power:.0%} of them; median over {len(pairs)} system pairs"),
               "entries": size, **summary, "units": {metric: with_label(unit) for metric, unit in settings.metrics},
               "pairs": pairs}
    chrf = summary.get(POWER_METRIC)
    if chrf is None:
        return section, RuleResult("power", None, f"the pilot cards carry no {label} statistics")
    composite = summary.get(COMPOSITE)
    also = f", composite {composite:.3f}" if composite is not None else ""
    return section, RuleResult("power", chrf <= target,
                               f"{size} entries detect {chrf:.2f} {label} points{also} (simulated from pilot cards; "
                               f"a {purpose} set should detect {target:g})")
