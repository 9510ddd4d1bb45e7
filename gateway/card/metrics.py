"""The metric table: every key of the run card's `scores` block that a family
provides, with everything the gateway needs to know about it. The gateway
is the only component that knows the run card's layout (SPEC §8); the
layout, reducers, composite weights and directions, confidence-interval and
comparison lists and plugin overrides are all read from this table.

`tests/test_metric_table.py` checks it against every family's declared
metrics, the proto `Scores` message and the run-card schema.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Iterable, Mapping

from champollion.core.families import FAMILY_NAMES
from champollion.core.limits import shown
from gateway.card.reducers import Reducer, majority_share, micro_average, sacrebleu_score


class Kind(Enum):
    STATISTIC = "metric with per-entry statistics"
    COUNT = "count of a rate: its summed numerator"
    LABEL = "text label a family reports for the run"


@dataclass(frozen=True)
class ScoreKey:
    key: str
    family: str
    kind: Kind
    # STATISTIC: summed statistics -> value (the corpus value and every resample).
    reducer: Reducer | None = None
    # COUNT: the rate whose summed numerator this key reports.
    count_of: str | None = None
    # Composite weight per profile (SPEC §4); absent: not in that profile.
    weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # The value's full scale: the composite divides by it (chrF++ 0-100);
    # the report groups and labels values by it.
    scale: float = 1.0
    # Enters the composite as 1 - value.
    lower_is_better: bool = False
    # Bootstrap interval over the run / within each difficulty tier (SPEC §7).
    interval: bool = False
    tier_interval: bool = False
    # Tested by `compare` (paired bootstrap).
    compared: bool = False
    # The family whose language plugin (eval standard) overrides the value.
    plugin_family: str | None = None
    # Listed by the shared run-card schema; False for this project's
    # additions the schema predates (SPEC §2.5: compliance, number fidelity).
    in_shared_schema: bool = True
    # LABEL: the metric whose run it describes (comet_model: comet_score).
    label_of: str | None = None
    # Short names a request may use for it (EvaluateOptions.metrics, the
    # CLI's --metrics), besides the key; matched case-insensitively.
    aliases: tuple[str, ...] = ()
    # Decimals every value of it is written with for people (gateway/card/
    # display.py: the CLI's summaries and tables, the boards): one format per
    # metric, so a column never shows 0.01 beside 0.003333.
    decimals: int = 4
    # Its name for people: column headers and summaries of the CLI, the
    # report, the web and the corpus check (the key when not given).
    label: str = ""

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", self.key)


def _weights(**by_profile: float) -> Mapping[str, float]:
    return MappingProxyType(by_profile)


def metric(key: str, family: str, reducer: Reducer = micro_average, **rules) -> ScoreKey:
    return ScoreKey(key, family, Kind.STATISTIC, reducer=reducer, **rules)


def count(key: str, family: str, of: str) -> ScoreKey:
    return ScoreKey(key, family, Kind.COUNT, count_of=of)


def run_label(key: str, family: str, of: str) -> ScoreKey:
    return ScoreKey(key, family, Kind.LABEL, label_of=of)


# In the order of the run card's `scores` block (SPEC §2). The reducer is a
# micro-averaged rate unless named.
TABLE: tuple[ScoreKey, ...] = (
    # §2.1 surface
    metric("exact_match_rate", "surface", weights=_weights(A=0.05, B=0.10),
           interval=True, tier_interval=True, compared=True, aliases=("exact", "em"), label="exact match"),
    count("exact_matches", "surface", of="exact_match_rate"),
    metric("equivalent_match_rate", "surface", weights=_weights(A=0.10, B=0.15),
           compared=True, plugin_family="structural", aliases=("equivalent",)),
    count("equivalent_matches", "surface", of="equivalent_match_rate"),
    metric("chrf_plus_plus", "surface", sacrebleu_score("chrf_plus_plus"), weights=_weights(A=0.15, B=0.25),
           scale=100.0, decimals=2, interval=True, tier_interval=True, compared=True,
           aliases=("chrf", "chrf++", "chrf2++"), label="chrF++"),
    metric("bleu", "surface", sacrebleu_score("bleu"), scale=100.0, decimals=2, interval=True, compared=True,
           label="BLEU"),
    # sacreBLEU's TER is a percentage of reference words (above 100 when the
    # edits outnumber them): its scale is that of chrF++ and BLEU.
    metric("ter", "surface", sacrebleu_score("ter"), scale=100.0, decimals=2, lower_is_better=True, compared=True,
           label="TER"),
    metric("length_ratio", "surface", aliases=("length",)),
    # §2.2 structural
    metric("fst_acceptance_rate", "structural", weights=_weights(A=0.25), interval=True, compared=True,
           aliases=("fst",), label="FST"),
    count("fst_accepted", "structural", of="fst_acceptance_rate"),
    metric("morphological_accuracy", "structural", weights=_weights(A=0.15), aliases=("morphology",)),
    metric("orthographic_accuracy", "structural", weights=_weights(B=0.05), aliases=("orthography",)),
    # §2.3 semantic
    metric("semantic_score", "semantic", weights=_weights(A=0.15, B=0.25), plugin_family="structural",
           label="semantic"),
    metric("comet_score", "semantic", interval=True, compared=True, aliases=("comet",), label="COMET"),
    run_label("comet_model", "semantic", of="comet_score"),
    # §2.4 behavioral
    metric("code_switching_rate", "behavioral", weights=_weights(A=0.05, B=0.10), lower_is_better=True,
           aliases=("code_switching",)),
    metric("hallucination_rate", "behavioral", weights=_weights(A=0.05, B=0.05), lower_is_better=True,
           aliases=("hallucination",)),
    metric("terminology_adherence", "behavioral", weights=_weights(A=0.05, B=0.05), aliases=("terminology",)),
    metric("consistency_score", "behavioral", majority_share, aliases=("consistency",)),
    metric("number_mismatch_rate", "behavioral", lower_is_better=True, in_shared_schema=False,
           aliases=("number_mismatch",)),
    # §2.5 compliance (quality gates, not in the composite)
    metric("compliance_index", "compliance", in_shared_schema=False),
    metric("compliance_index_raw", "compliance", in_shared_schema=False),
    metric("repair_effectiveness", "compliance", in_shared_schema=False),
)

# The `scores` keys the gateway computes itself from the families' statistics
# and the run's own facts, never read from a family: the composite and its
# tier (composite.py), costs and speeds (costs.py), intervals and breakdowns
# (bootstrap.py, breakdowns.py), entry counts and the adequacy gates.
RUN_LEVEL_KEYS: tuple[str, ...] = (
    "composite", "quality_tier", "cost_adjusted",
    "tokens_per_second", "entries_per_minute", "avg_latency_seconds", "median_latency_seconds",
    "p95_latency_seconds",
    "confidence_intervals", "confidence_intervals_by_tier", "by_difficulty", "by_provenance",
    "total", "evaluated", "errors", "adequacy_rate",
)

# --- derived views -------------------------------------------------------------

SCORE_KEYS: Mapping[str, ScoreKey] = MappingProxyType({row.key: row for row in TABLE})
# Metrics with per-entry statistics, by id.
METRICS: Mapping[str, ScoreKey] = MappingProxyType({row.key: row for row in TABLE if row.kind is Kind.STATISTIC})

# The family table's names (champollion/core/families.py); every metric's family is one of them.
FAMILIES: tuple[str, ...] = FAMILY_NAMES
assert {row.family for row in TABLE} <= set(FAMILIES), {row.family for row in TABLE} - set(FAMILIES)
FAMILY_SCORE_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {family: tuple(row.key for row in TABLE if row.family == family) for family in FAMILIES}
)
PROFILES: tuple[str, ...] = tuple(sorted({profile for row in TABLE for profile in row.weights}))
WEIGHTS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    profile: MappingProxyType({row.key: row.weights[profile] for row in TABLE if profile in row.weights})
    for profile in PROFILES
})
CI_METRICS: tuple[str, ...] = tuple(row.key for row in TABLE if row.interval)
# Metrics on a 0-100 scale (sacreBLEU's), the others being rates or scores on 0-1.
PERCENT_METRICS: tuple[str, ...] = tuple(key for key, row in METRICS.items() if row.scale == 100.0)
TIER_CI_METRICS: tuple[str, ...] = tuple(row.key for row in TABLE if row.tier_interval)
COMPARED_METRICS: tuple[str, ...] = tuple(row.key for row in TABLE if row.compared)
LABELS: Mapping[str, str] = MappingProxyType({row.key: row.label for row in TABLE})
PLUGIN_OVERRIDES: Mapping[str, str] = MappingProxyType(
    {row.key: row.plugin_family for row in TABLE if row.plugin_family}
)


def may_provide(family: str, metric_id: str) -> bool:
    """Whether `family` may send statistics for `metric_id`: its own metrics,
    and those its language plugins override."""
    row = METRICS.get(metric_id)
    return row is not None and family in (row.family, row.plugin_family)


# --- choosing what a run computes (EvaluateOptions.metrics, families) ---------

class UnknownSelection(ValueError):
    """A requested metric or family name that is not in the table; the
    message lists the valid ones, `option` says which list it was in
    ("metrics" or "families")."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


# Every name a request may give a metric: its key and its aliases, lower-cased.
METRIC_NAMES: Mapping[str, str] = MappingProxyType({
    name.lower(): row.key for row in TABLE if row.kind is Kind.STATISTIC for name in (row.key, *row.aliases)
})


def _listed(row: ScoreKey) -> str:
    return row.key + (f" ({', '.join(row.aliases)})" if row.aliases else "")


def select(metrics: Iterable[str] = (), families: Iterable[str] = ()) -> frozenset[str] | None:
    """The score keys a run computes: the `metrics` named (keys or aliases)
    and every metric of the `families` named, with the counts and labels
    that go with them; None (everything) when both are empty.
    UnknownSelection names a name that is neither, with the valid ones."""
    metrics, families = [name.strip() for name in metrics], [name.strip() for name in families]
    if not metrics and not families:
        return None
    chosen = set()
    for name in metrics:
        key = METRIC_NAMES.get(name.lower())
        if key is None:
            close = difflib.get_close_matches(name.lower(), METRIC_NAMES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            valid = "; ".join(_listed(row) for row in METRICS.values())
            raise UnknownSelection("metrics", f"unknown metric {shown(name)}{hint}; metrics: {valid}")
        chosen.add(key)
    for name in families:
        if name.lower() not in FAMILIES:
            raise UnknownSelection("families", f"unknown family {shown(name)}; families: {', '.join(FAMILIES)}")
        chosen.update(key for key, row in METRICS.items() if row.family == name.lower())
    chosen.update(row.key for row in TABLE if row.count_of in chosen or row.label_of in chosen)
    return frozenset(chosen)


def families_for(selection: frozenset[str] | None, plugins: bool = True) -> tuple[str, ...]:
    """The families a run with `selection` calls: those of its metrics, and
    (unless `plugins` are off) the family whose language plugin overrides
    one of them."""
    if selection is None:
        return FAMILIES
    wanted = {SCORE_KEYS[key].family for key in selection}
    if plugins:
        wanted.update(SCORE_KEYS[key].plugin_family for key in selection if SCORE_KEYS[key].plugin_family)
    return tuple(family for family in FAMILIES if family in wanted)
