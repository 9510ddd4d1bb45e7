"""Renders run cards into one self-contained HTML file (inline CSS,
plotly.js and the figures' data, no network at view time) through the
Jinja2 templates."""
from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Sequence
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import jinja2
import plotly.io as pio
from markupsafe import Markup

from apps.client import rank_text, ranks_explained, row_flags, split_floor
from apps.report.figures import TEMPLATE, Figure, across_run_figures, pairs_heatmaps
from apps.report.model import (
    ENTRY_METRICS,
    EntryInputs,
    Run,
    all_pairs,
    comparisons,
    composite_parts,
    groups,
    score_rows,
    segment_table,
    warnings_by_text,
    worst_entries,
)
from gateway.card.display import column_label, column_text, metric_text
from gateway.card.metrics import METRICS

# Leaderboard columns: (row key, header: the metric table's label for a
# metric); the rest of a row shows as flags.
BOARD_COLUMNS = tuple((key, column_label(key)) for key in (
    "rank", "model_slug", "composite_score", "quality_tier", "chrf_plus_plus", "corpus_bleu", "exact_match_rate",
    "fst_acceptance_rate", "semantic_score", "comet_score", "cost_per_entry_usd", "cost_adjusted",
    "tokens_per_second", "avg_latency_seconds", "condition", "run_id"))


# How a page shows a board's significance clusters (tr.cluster-0 / cluster-1).
SHADING = "the shading changes from one significance cluster to the next"


def number(value, digits: int = 4) -> str:
    """Numbers for reading: 4 significant digits (costs in scientific
    notation when small); None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.{digits}g}"
    return str(value)


def score_text(value, metric: str) -> str:
    """A run-card score as the CLI writes it, in its metric's one format
    (gateway/card/display.py); counts, labels and the rest as `number`."""
    if isinstance(value, float) and not math.isnan(value) and (metric in METRICS or metric == "composite"):
        return metric_text(metric, value)
    return number(value)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("apps.report", "templates"),
        autoescape=True,  # every template: predictions and model names are hostile input
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["number"] = number
    env.filters["score"] = score_text
    env.filters["label"] = column_label
    return env


# plotly.js's "cartesian" bundle (its bar, heatmap, histogram and scatter
# traces are all the figures draw): 1.5 MB against the full bundle's 4.8 MB,
# the same release as plotly.py's (tests/test_report.py holds them equal).
PLOTLY_BUNDLE = ("vendor", "plotly-cartesian.min.js")


@lru_cache(maxsize=1)
def plotly_packed() -> str:
    """plotly.js gzip-compressed (a third of its size) and base64-encoded,
    for the page's chart script to inflate (templates/charts.js): once per
    page, 0.66 MB in all. mtime 0: the same bytes every time."""
    source = files("apps.report").joinpath(*PLOTLY_BUNDLE).read_bytes()
    return base64.b64encode(gzip.compress(source, compresslevel=9, mtime=0)).decode("ascii")


@lru_cache(maxsize=1)
def plotly_template() -> Markup:
    """The figures' layout template, once per page (figures.Figure.spec)."""
    return script_json(pio.templates[TEMPLATE].to_plotly_json())


@lru_cache(maxsize=None)
def inline_script(name: str) -> Markup:
    """One of templates/'s scripts (segments.js, charts.js), inlined."""
    source = files("apps.report").joinpath("templates", name).read_text(encoding="utf-8")
    if "</script" in source.lower():
        raise RuntimeError(f"{name} contains a closing script tag; it cannot be inlined")
    return Markup(source)


def script_json(data) -> Markup:
    """JSON to inline in a <script type="application/json"> element: `<`,
    `>` and `&` as \\u escapes, so that no text (a prediction holding
    "</script>") can end the element; JSON.parse reads them back."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def _render(template: str, **context) -> str:
    return environment().get_template(template).render(
        plotly_packed=plotly_packed(), plotly_template=plotly_template(), charts_js=inline_script("charts.js"),
        **context)


def _write(path: Path, template: str, **context) -> None:
    path.write_text(_render(template, **context), encoding="utf-8")


def _figures(figures: list[Figure]) -> list[dict]:
    return [{"id": f.id, "title": f.title, "note": f.note, "drawn": f.drawn, "traces": f.traces,
             "html": Markup(f.html(script_json))} for f in figures]


def _runs(cards: Sequence[dict], inputs: Sequence[EntryInputs | None] | None) -> list[Run]:
    if inputs is not None and len(inputs) != len(cards):
        raise ValueError(f"inputs: {len(inputs)} given for {len(cards)} run cards")
    return [Run(card, (inputs[i] if inputs else None) or {}) for i, card in enumerate(cards)]


def _sections(runs: list[Run]) -> dict:
    """What report and leaderboard pages share."""
    return {
        "runs": runs,
        "score_rows": score_rows(runs),
        "composites": [(run, composite_parts(run)) for run in runs],
        "breakdowns": {key: [(run, *groups(run, key)) for run in runs]
                       for key in ("by_difficulty", "by_domain", "by_provenance")},
        "comparisons": comparisons(runs),
        "figures": _figures(across_run_figures(runs)),
    }


def render_report(cards: list[dict], inputs: Sequence[EntryInputs | None] | None = None) -> str:
    """One HTML report of one or several full run cards. `inputs`, one per
    card (or None), gives what the cards leave out: each entry's source,
    reference, prediction, domain and latency (report/inputs.py)."""
    if not cards:
        raise ValueError("cards: at least one run card is needed")
    runs = _runs(cards, inputs)
    title = ", ".join(run.label for run in runs)
    segments = segment_table(runs)
    pairs = all_pairs(runs)
    return _render("report.html.j2", title=f"Run report: {title}", **_sections(runs),
                   pairs=pairs, pair_figures=_figures(pairs_heatmaps(pairs)),
                   warnings=warnings_by_text(runs), worst=[(run, worst_entries(run)) for run in runs],
                   entry_metrics=ENTRY_METRICS, segments=script_json(segments), segment_rows=len(segments["rows"]),
                   segments_js=inline_script("segments.js"))


def write_report(cards: list[dict], path: Path, inputs: Sequence[EntryInputs | None] | None = None) -> None:
    """render_report's page written to `path`."""
    Path(path).write_text(render_report(cards, inputs), encoding="utf-8")


def board_rows(rows: list[dict], sort: str = "composite_score") -> list[dict]:
    """Leaderboard rows (as `leaderboard --json` prints them) as a page shows
    them: the BOARD_COLUMNS cells (key, value, text in the column's one
    format), the flags in words, the rank as shown (its range where it has
    one), the `sort` column's interval (and as text) and the significance
    cluster (for the rows' shading: `shade`, 0 or 1, alternates from one
    cluster to the next; None outside the clusters)."""
    def interval(found: dict | None) -> str | None:
        if not found:
            return None
        return f"[{column_text(sort, found['ci_lower'], '—')}, {column_text(sort, found['ci_upper'], '—')}]"

    return [{"cells": [(key, row.get(key), column_text(key, row.get(key), "—")) for key, _ in BOARD_COLUMNS],
             "flags": row_flags(row), "rank": rank_text(row), "rank_range": row.get("rank_range"),
             "ci": row.get("ci"), "ci_text": interval(row.get("ci")),
             "shade": None if row.get("cluster") is None else row["cluster"] % 2} for row in rows]


def write_leaderboard_page(rows: list[dict], cards: list[dict], path: Path, title: str,
                           sort: str = "composite_score", ranks_note: str | None = None) -> None:
    """A leaderboard page: the sortable table of `rows` (as `champollion
    leaderboard --json` prints them; ranked by `sort`, whose interval they
    carry; `ranks_note`: why they carry no rank range) and the across-run
    figures of `cards` (the rows' run cards, in any order: they are put in
    the rows' order)."""
    by_id = {card.get("run_id"): card for card in cards}
    # Floor rows (the gateway's degenerate systems) in a section of their own, never ranked nor plotted.
    systems, floor = split_floor(rows)
    ordered = [by_id[row["run_id"]] for row in systems if row.get("run_id") in by_id]
    runs = _runs(ordered, None)
    _write(Path(path), "leaderboard.html.j2", title=title, columns=BOARD_COLUMNS, board=board_rows(systems, sort),
           floor=board_rows(floor, sort), missing_cards=len(systems) - len(ordered), sort=sort, ranks_note=ranks_note,
           ranks_explained=ranks_explained(sort, SHADING),
           **_sections(runs))
