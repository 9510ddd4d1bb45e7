"""The report's plotly figures, built from model.py's rows. Labels are
HTML-escaped: plotly renders a subset of HTML in its text, and model names
and entry texts come from whoever submitted the run."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from apps.report.model import (
    AllPairs,
    Run,
    composite_parts,
    cost_per_entry,
    groups,
    latencies,
    pareto_front,
    withheld_groups,
)
from gateway.card.metrics import CI_METRICS, LABELS, PERCENT_METRICS
from gateway.card.pairs import SeenPair, headline_metrics, ranked

# Metrics with bootstrap intervals, by scale (the metric table's): one bar chart each.
CI_CHARTS = (
    ("scores-percent", "Scores on a 0-100 scale, 95% bootstrap CI",
     tuple(key for key in CI_METRICS if key in PERCENT_METRICS)),
    ("scores-rate", "Scores on a 0-1 scale, 95% bootstrap CI",
     ("composite", *(key for key in CI_METRICS if key not in PERCENT_METRICS))),
)
# Every figure's layout template (its 7 KB of JSON is on the page once: render.py).
TEMPLATE = "plotly_white"
CONFIG = {"displayModeBar": False, "responsive": True}
LAYOUT = {"template": TEMPLATE, "margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "height": 380,
          "font": {"family": "system-ui, sans-serif", "size": 12}}


@dataclass
class Figure:
    """A drawn figure, or (figure None) one left out, `note` saying why."""
    id: str
    title: str
    figure: go.Figure | None
    note: str | None = None

    @property
    def drawn(self) -> bool:
        return self.figure is not None

    @property
    def traces(self) -> int:
        return len(self.figure.data) if self.figure is not None else 0

    def spec(self) -> dict:
        """What Plotly.newPlot draws (data, layout, config), without the
        layout's template: the page carries it once for all its figures
        (render.py), where it would take 7 KB in each."""
        spec = json.loads(pio.to_json(self.figure, validate=False))
        spec["layout"].pop("template", None)
        return {"data": spec["data"], "layout": spec["layout"], "config": CONFIG}

    def html(self, escaped_json) -> str:
        """The figure's div and its spec as JSON, which the page's chart
        script draws once plotly.js is loaded; `escaped_json` writes JSON
        that no text can end its script element with (render.script_json)."""
        if self.figure is None:
            return ""
        return (f'<div id="figure-{self.id}" class="plotly-figure"></div>'
                f'<script type="application/json" class="figure-spec" data-div="figure-{self.id}">'
                f"{escaped_json(self.spec())}</script>")


def text(value) -> str:
    return html.escape(str(value))


def _figure(id_: str, title: str, figure: go.Figure, note: str | None = None, **layout) -> Figure:
    figure.update_layout(**{**LAYOUT, "title": text(title), **layout})
    # Bars are read by their length: a value axis that does not start at zero misleads.
    if any(trace.type in ("bar", "histogram") and trace.orientation != "h" for trace in figure.data):
        figure.update_yaxes(rangemode="tozero")
    return Figure(id_, title, figure, note)


def _left_out(id_: str, title: str, why: str) -> Figure:
    return Figure(id_, title, None, why)


def _any_of(names: list[str]) -> str:
    return " or ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def ci_bar_charts(runs: list[Run]) -> list[Figure]:
    """Grouped bars (one trace per run) with CI whiskers where the card has them."""
    found = []
    for id_, title, metrics in CI_CHARTS:
        shown = [m for m in metrics if any(run.scores.get(m) is not None for run in runs)]
        if not shown:
            found.append(_left_out(id_, title, f"no run card has a value for {_any_of(list(metrics))}"))
            continue
        figure = go.Figure()
        for run in runs:
            values, plus, minus = [], [], []
            intervals = run.scores.get("confidence_intervals") or {}
            for metric in shown:
                value, interval = run.scores.get(metric), intervals.get(metric)
                values.append(value)
                plus.append(interval["ci_upper"] - value if interval and value is not None else None)
                minus.append(value - interval["ci_lower"] if interval and value is not None else None)
            figure.add_bar(name=text(run.label), x=shown, y=values,
                           error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True})
        # Rates and scores of 0-1 on their whole scale, so that runs and metrics compare by eye.
        scale = {"range": [0, 1]} if all(m not in PERCENT_METRICS for m in shown) else {}
        found.append(_figure(id_, title, figure, barmode="group", yaxis=scale))
    return found


def composite_breakdown(runs: list[Run]) -> Figure:
    """Stacked horizontal bars: each run's composite as the sum of effective
    weight x normalised value, one trace per metric."""
    parts_by_run = [(run, {part.metric: part for part in composite_parts(run)}) for run in runs]
    metrics = list(dict.fromkeys(metric for _, parts in parts_by_run for metric in parts))
    title = "Composite = Σ effective weight × normalised value"
    if not metrics:
        return _left_out("composite-breakdown", title, "no run card has a composite with its weights")
    figure = go.Figure()
    labels = [text(run.label) for run in runs]
    for metric in metrics:
        contributions, hover = [], []
        for _, parts in parts_by_run:
            part = parts.get(metric)
            contributions.append(part.contribution if part else None)
            hover.append(f"{metric}: weight {part.weight:.3f} × normalised {part.normalised:.3f} = "
                         f"{part.contribution:.4f}" if part else f"{metric}: not in this composite")
        figure.add_bar(name=metric, y=labels, x=contributions, orientation="h", hovertext=hover,
                       hoverinfo="text")
    return _figure("composite-breakdown", title, figure,
                   barmode="stack", xaxis={"title": "composite (0-1)", "range": [0, 1]},
                   legend={"traceorder": "normal"}, yaxis={"autorange": "reversed"},
                   height=max(340, 160 + 60 * len(runs)))


def group_charts(runs: list[Run]) -> list[Figure]:
    """Per-group bars: chrF++ by difficulty tier (with the per-tier CI), and
    the composite by provenance and by domain."""
    found = []
    figure = go.Figure()
    withheld_notes = set()
    for run in runs:
        by_tier, _ = groups(run, "by_difficulty")
        names, reason = withheld_groups(run, "by_difficulty")
        if names:
            withheld_notes.add(f"no bar for tier {', '.join(names)}: {reason or 'the run card gives no value'}")
        tier_ci = run.scores.get("confidence_intervals_by_tier") or {}
        if not by_tier:
            continue
        tiers = list(by_tier)
        values = [by_tier[t].get("chrf_plus_plus") for t in tiers]
        plus, minus = [], []
        for tier, value in zip(tiers, values):
            interval = (tier_ci.get(tier) or {}).get("chrf_plus_plus")
            plus.append(interval["ci_upper"] - value if interval and value is not None else None)
            minus.append(value - interval["ci_lower"] if interval and value is not None else None)
        figure.add_bar(name=text(run.label), x=[f"tier {t}" for t in tiers], y=values,
                       error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True})
    title = f"{LABELS['chrf_plus_plus']} by difficulty tier, 95% CI within each tier"
    if figure.data:
        found.append(_figure("by-difficulty", title, figure, "; ".join(sorted(withheld_notes)) or None,
                             barmode="group"))
    else:
        found.append(_left_out("by-difficulty", title, "no run card has a by_difficulty breakdown"))
    for key, title in (("by_provenance", "Composite by provenance"), ("by_domain", "Composite by domain")):
        figure, notes = go.Figure(), set()
        for run in runs:
            found_groups, note = groups(run, key)
            if note:
                notes.add(note)
            names, reason = withheld_groups(run, key)
            if names:
                notes.add(f"no bar for {len(names)} group(s): {reason or 'the run card gives no value'}")
            if found_groups:
                names = list(found_groups)
                figure.add_bar(name=text(run.label), x=[text(name) for name in names],
                               y=[found_groups[name].get("composite") for name in names])
        if figure.data:
            found.append(_figure(key.replace("_", "-"), title, figure, "; ".join(sorted(notes)) or None,
                                 barmode="group", yaxis={"range": [0, 1]}))
        else:
            found.append(_left_out(key.replace("_", "-"), title,
                                   "; ".join(sorted(notes)) or f"no run card has a {key} breakdown"))
    return found


def latency_chart(runs: list[Run]) -> Figure:
    """A histogram of per-entry latencies where the inputs give them, else
    the card's average, median and 95th percentile; left out when neither is
    there (plain-text runs have no timings)."""
    figure = go.Figure()
    for run in runs:
        seconds = latencies(run)
        if seconds:
            figure.add_histogram(name=text(run.label), x=seconds, opacity=0.7)
    if figure.data:
        return _figure("latency", "Latency per entry (s)", figure, barmode="overlay",
                       xaxis={"title": "seconds"}, yaxis={"title": "entries"})
    keys = ("avg_latency_seconds", "median_latency_seconds", "p95_latency_seconds")
    for run in runs:
        summary = [run.scores.get(key) for key in keys]
        if any(value is not None for value in summary):
            figure.add_bar(name=text(run.label), x=["average", "median", "95th percentile"], y=summary)
    if not figure.data:
        return _left_out("latency", "Latency (s)", "no latencies: the run cards have no latency summary and no "
                                                   "predictions file with latency_s was given")
    return _figure("latency", "Latency (s)", figure,
                   "per-entry latencies are not in the run card: its summary is shown", barmode="group")


def cost_speed_chart(runs: list[Run]) -> Figure:
    """Cost per entry, tokens per second and entries per minute, per run: a
    panel for each of them some card has."""
    panels = (("cost per entry (USD)", cost_per_entry),
              ("tokens per second", lambda run: run.scores.get("tokens_per_second")),
              ("entries per minute", lambda run: run.scores.get("entries_per_minute")))
    values = [(title, [read(run) for run in runs]) for title, read in panels]
    shown = [(title, column) for title, column in values if any(value is not None for value in column)]
    missing = [title for title, column in values if all(value is None for value in column)]
    if not shown:
        return _left_out("cost-speed", "Cost and speed", f"no run card has a {_any_of(missing)}")
    figure = make_subplots(rows=1, cols=len(shown), subplot_titles=[title for title, _ in shown])
    labels = [text(run.label) for run in runs]
    for number, (title, column) in enumerate(shown, start=1):
        figure.add_bar(name=title, x=labels, y=column, showlegend=False, row=1, col=number)
    note = f"not drawn, no run card has it: {', '.join(missing)}" if missing else None
    return _figure("cost-speed", "Cost and speed", figure, note)


def quality_cost_scatter(runs: list[Run]) -> Figure | None:
    """Composite against cost per entry, one trace per run and the Pareto
    front (no run both cheaper and better) as a line."""
    placed = [(run, cost_per_entry(run), run.scores.get("composite")) for run in runs]
    placed = [(run, cost, quality) for run, cost, quality in placed if cost is not None and quality is not None]
    title = "Quality against cost (Pareto front: ★)"
    if len(runs) < 2:
        return None  # a comparison of runs: nothing to say of one
    if not placed:
        return _left_out("quality-cost", title, "no run has both a cost per entry and a composite")
    figure = go.Figure()
    front = pareto_front([(cost, quality) for _, cost, quality in placed])
    for index, (run, cost, quality) in enumerate(placed):
        figure.add_scatter(name=text(run.label), x=[cost], y=[quality], mode="markers",
                           marker={"size": 14, "symbol": "star" if index in front else "circle"})
    figure.add_scatter(name="Pareto front", x=[placed[i][1] for i in front], y=[placed[i][2] for i in front],
                       mode="lines", line={"dash": "dash", "color": "#444"})
    left_out = len(runs) - len(placed)
    note = f"{left_out} run(s) without a cost or composite are not placed" if left_out else None
    return _figure("quality-cost", title, figure, note,
                   xaxis={"title": "cost per entry (USD)"}, yaxis={"title": "composite"})


# Corrected p-values: shades of blue below alpha (darker: smaller), grey above.
P_VALUE_SCALE = [[0.0, "#08306b"], [0.01, "#2171b5"], [0.05, "#9ecae1"], [0.0501, "#e5e5e5"], [1.0, "#fafafa"]]


def pairs_heatmaps(section: AllPairs | None) -> list[Figure]:
    """Per headline metric (the composite, chrF++), the matrix of every
    pair's corrected p-value, the runs best first, `*` on the significant
    ones; hovering a cell gives the difference, both p-values and the
    win/tie/loss shares."""
    if section is None or section.result is None:
        return []
    result = section.result
    names, correction = result["names"], result["test"]["correction"]
    figures = []
    for metric_id in headline_metrics(result):
        runs = ranked(result["metrics"][metric_id])
        z = [[None if run == other else runs.seen[run, other].p_corrected for other in runs.order]
             for run in runs.order]
        cells = [["" if run == other else runs.seen[run, other].marked for other in runs.order] for run in runs.order]
        hover = [[text(names[run]) if run == other else _pair_hover(metric_id, names, runs.seen[run, other], run, other,
                                                                   correction) for other in runs.order]
                 for run in runs.order]
        clusters = result["metrics"][metric_id]["clusters"]
        labels = [text(f"{names[run]} (cluster {clusters[run]})") for run in runs.order]
        figure = go.Figure(go.Heatmap(z=z, x=labels, y=labels, text=cells, texttemplate="%{text}",
                                      hovertext=hover, hoverinfo="text", zmin=0, zmax=1,
                                      colorscale=P_VALUE_SCALE, colorbar={"title": {"text": "corrected p"}}))
        title = f"All pairs, {metric_id}: {correction}-corrected p-values, best first (* significant)"
        figures.append(_figure(f"pairs-{metric_id}", title, figure, yaxis={"autorange": "reversed"},
                               height=max(340, 160 + 45 * len(runs.order))))
    return figures


def _pair_hover(metric_id: str, names: list[str], pair: SeenPair, run: int, other: int, correction: str) -> str:
    """What hovering the cell of `run` against `other` says."""
    shares = "" if pair.ties is None else (f"<br>entries: {pair.wins:.0%} {text(names[run])} better, "
                                           f"{pair.ties:.0%} ties, {pair.losses:.0%} worse")
    return (f"{text(names[run])} − {text(names[other])} on {metric_id}: {pair.difference:+.4g}<br>"
            f"p {pair.p_value:.4g}, {correction} {pair.p_corrected:.4g}"
            f"{' (significant)' if pair.significant else ''}{shares}")


def across_run_figures(runs: list[Run]) -> list[Figure]:
    """Every figure of a report or leaderboard page, in reading order."""
    figures = [*ci_bar_charts(runs), composite_breakdown(runs)]
    scatter = quality_cost_scatter(runs)
    if scatter is not None:
        figures.append(scatter)
    figures += group_charts(runs)
    figures += [latency_chart(runs), cost_speed_chart(runs)]
    return figures
