"""What a leaderboard can tell apart (issue 34): each ranked row's 95%
interval of the ranking metric, its rank range and its significance
cluster, from the runs' stored per-entry statistics.

The runs are those of the board's ranked group: the rows with a rank that
are comparable, not disqualified and have a value of the sort column (the
store puts the others after them, so the group is the board's first rows).
Every pair of them is tested on the sort metric alone by the paired
bootstrap (gateway/card/pairs.py `compare_all`: the gateway's seed and 1,000
resamples, each pair's p-value read off the normal distribution with the
spread of its resampled differences, Holm's correction over the pairs,
significant below 0.05). A resampled p-value is never below 1/1,001, and
Holm multiplies the smallest by the number of pairs: from 11 runs (55
pairs) on, no pair could ever be significant; the normal reading has no
such floor, and the 50-run board it allows would need 24,500 resamples
(about 12 s) otherwise. A
row's best rank is 1 + the runs significantly ahead of it, its worst the
group's size less the runs significantly behind it; "ahead" follows the
board's order (descending: the higher value), so a board sorted against its
metric's own direction reads its ranges that way too. Other rows (not
comparable, disqualified, floor runs, no value) have null fields.

Pure: the caller gives the runs' statistics (readings.py reads and caches
them, and caches what this computes per board state)."""
from __future__ import annotations

from itertools import takewhile
from typing import Sequence

from gateway.card.compare import ComparableRun, CompareRefused
from gateway.card.metrics import COMPARED_METRICS
from gateway.card.multiplicity import HOLM
from gateway.card.pairs import COMPOSITE, MIN_RUNS, NORMAL, compare_all
from gateway.store.leaderboard import METRIC_COLUMNS

# The fields each row gets (null where they do not apply); computed from
# the references, so nulled wherever a score is withheld (access.py).
RANK_FIELDS = ("rank_range", "ci", "cluster")
# Every pair of the group is tested: beyond this many ranked runs a board
# carries no ranges (100 runs are 4,950 pairs, a few seconds).
MAX_RANKED_RUNS = 100
# A board column -> the metric compare_all tests for it.
RANKED_METRICS = {column: metric for metric, column in METRIC_COLUMNS.items()
                  if metric in (*COMPARED_METRICS, COMPOSITE)}
LADDER_NOTE = ("no intervals or rank ranges: the public board of a holdout or gold version releases only its "
               "Ladder's values")


def ranked_metric(column: str) -> str | None:
    """The metric a board sorted by `column` ranks runs by, when its
    runs carry per-entry statistics of it; None otherwise."""
    return RANKED_METRICS.get(column)


def ranked_group(rows: Sequence[dict], column: str) -> list[dict]:
    """The board's first rows that take part in the ranges."""
    return list(takewhile(lambda row: (row.get("rank") is not None and row.get("comparable") is True
                                       and not row.get("disqualified") and not row.get("floor")
                                       and row.get(column) is not None), rows))


def unranked_note(column: str, group: int) -> str | None:
    """Why a board sorted by `column` with `group` ranked runs has no
    ranges, before any statistics are read; None when it may have them."""
    if ranked_metric(column) is None:
        shown = ", ".join(RANKED_METRICS)
        return f"no intervals or rank ranges: {column} has no per-entry statistics to resample (those do: {shown})"
    if group < MIN_RUNS:
        return f"no intervals or rank ranges: fewer than {MIN_RUNS} comparable ranked runs"
    if group > MAX_RANKED_RUNS:
        return (f"no intervals or rank ranges: more than {MAX_RANKED_RUNS} comparable ranked runs (every pair is "
                "tested); narrow the board (--version, --official)")
    return None


def group_ranks(runs: Sequence[ComparableRun], names: Sequence[str], metric: str,
                descending: bool) -> tuple[list[dict] | None, str | None]:
    """(each run's {rank_range, ci, cluster} in the given order, a remark
    on them or None: no pair can be significant) or (None, why there are
    none: the runs cannot be compared on `metric`)."""
    try:
        result = compare_all(runs, metric_ids=[metric], correction=HOLM, names=names, descending=descending,
                             p_values=NORMAL)
    except CompareRefused as refused:
        return None, f"no intervals or rank ranges: {refused}"
    block = result["metrics"].get(metric)
    if block is None:
        return None, "no intervals or rank ranges: " + "; ".join(result["warnings"])
    return ([{"rank_range": [found["best"], found["worst"]], "ci": ci, "cluster": cluster}
             for found, ci, cluster in zip(block["rank_ranges"], block["ci"], block["clusters"])],
            "; ".join(result["warnings"]) or None)


def with_ranks(board: dict, by_run: dict[str, dict], note: str | None) -> dict:
    """`board` with RANK_FIELDS on every row (those of `by_run`, keyed by
    run id, else null) and `ranks_note`: why there are none, or a remark on
    them (or null)."""
    empty = dict.fromkeys(RANK_FIELDS)
    rows = [{**row, **by_run.get(row["run_id"], empty)} for row in board["rows"]]
    return {**board, "rows": rows, "ranks_note": note}
