"""How the numbers of run cards and boards are written for people: one
format per metric (the metric table's `decimals`) and per board column, so
that no column shows `0.01` beside `0.003333`. The CLI's summaries and
tables, the report's leaderboard page and the web front's board all write
their numbers through here."""
from __future__ import annotations

import math

from champollion.core.columns import SPEC_COLUMNS
from gateway.card.metrics import LABELS, METRICS

# The composite is no row of the metric table; it is a 0-1 score as the rates.
COMPOSITE_DECIMALS = 4

# Board columns that are no metric of the table. Costs span orders of
# magnitude from one model to the next: scientific notation with 4
# significant digits keeps them comparable in one column; speeds, times and
# cost_adjusted (composite per log2 of the cost) read as fixed decimals.
OTHER_COLUMNS = {
    "composite_score": f".{COMPOSITE_DECIMALS}f",
    "total_cost_usd": ".3e",
    "cost_per_entry_usd": ".3e",
    "cost_per_source_char": ".3e",
    "cost_adjusted": ".2f",
    "avg_latency_seconds": ".2f",
    "tokens_per_second": ".1f",
    "entries_per_minute": ".1f",
    "elapsed_seconds": ".1f",
}

# Headers of board columns and card values that are no metric of the table
# (a metric's header is its `label` there).
OTHER_LABELS = {
    "composite_score": "composite",
    "quality_tier": "tier",
    "model_slug": "model",
    "cost_per_entry_usd": "cost/entry",
    "tokens_per_second": "tokens/s",
    "avg_latency_seconds": "latency (s)",
    "run_id": "run",
}

# Each §9.1 column that holds a run-card score: the score's metric.
_COLUMN_METRICS = {column.name: column.path[1] for column in SPEC_COLUMNS
                   if len(column.path) == 2 and column.path[0] == "scores" and column.path[1] in METRICS}


def column_label(column: str) -> str:
    """A board column's or a score's header: the metric table's label for
    a metric (under its own key or its §9.1 column's), else the name."""
    return LABELS.get(_COLUMN_METRICS.get(column, column)) or OTHER_LABELS.get(column, column)


def metric_format(metric_id: str) -> str:
    """The format spec of a metric's values (the composite's too; any other
    name: four decimals, as the rates)."""
    row = METRICS.get(metric_id)
    return f".{row.decimals if row is not None else COMPOSITE_DECIMALS}f"


def column_format(column: str) -> str | None:
    """The format spec of a board column's values; None for a column of text."""
    if column in OTHER_COLUMNS:
        return OTHER_COLUMNS[column]
    if column in _COLUMN_METRICS:
        return metric_format(_COLUMN_METRICS[column])
    return metric_format(column) if column in METRICS else None  # a board sorted by a metric's own name


def _written(value, spec: str | None, missing: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    if spec is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format(value, spec)


def metric_text(metric_id: str, value, missing: str = "-") -> str:
    """A metric's value as people read it (`missing` for none)."""
    return _written(value, metric_format(metric_id), missing)


def column_text(column: str, value, missing: str = "-") -> str:
    """A board cell as people read it: the column's one format (text as it is)."""
    return _written(value, column_format(column), missing)
