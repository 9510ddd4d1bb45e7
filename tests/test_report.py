"""`apps.report`: the run report and the leaderboard page, rendered
from run cards the session's families scored, opened in headless Chromium
(Debian's, driven by Playwright; no browser is ever downloaded) with every
network request refused."""
from __future__ import annotations

import copy
import html
import json
import math
import os
import time
from pathlib import Path

import grpc
import pytest

from apps.client import plain_row, rank_text
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from apps.inputs import build_request, load_corpus, load_glossary, load_meta, load_predictions
from apps.launch.embedded import EmbeddedStack
from apps.inputs import InputError
from apps.report import entry_inputs, plain_text_inputs, write_leaderboard_page, write_report
from apps.report.figures import across_run_figures
from apps.report.model import (
    Run,
    composite_parts,
    null_reason,
    pareto_front,
    segment_table,
    warnings_by_text,
)
from apps.report.render import number, script_json
from gateway.card.compare import ComparableRun
from gateway.card.metrics import METRICS
from gateway.card.pairs import compare_all
from tests.conftest import EXAMPLE, evaluate, run_cli

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

DATASET = "champollion-example-eng-spa"
# Would run script, load an image and change the title if it were not escaped.
HOSTILE = '<img src="x" onerror="document.title=\'pwned\'"><script>window.__xss = 1</script>Guardar'
HOSTILE_MODEL = "<b>bold</b>-llm"


class Opened:
    """A page loaded from a file with every other request aborted and
    recorded, and every console error and page error recorded."""

    def __init__(self, browser, path: Path):
        self.errors: list[str] = []
        self.refused: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("requestfailed", lambda request: self.refused.append(request.url))
        page_url = path.resolve().as_uri()

        def route(route):
            if route.request.url == page_url:
                route.continue_()
            else:
                self.refused.append(route.request.url)
                route.abort()

        self.page.route("**/*", route)
        self.page.goto(page_url)
        self.page.wait_for_load_state("load")
        # plotly.js is inflated and the figures drawn after the load event (templates/charts.js).
        self.page.wait_for_function("() => document.documentElement.dataset.charts !== 'loading'")
        self.charts = self.page.evaluate("() => document.documentElement.dataset.charts")

    def figures(self) -> dict[str, dict]:
        """Each plotly figure: its trace count as drawn, the count the page
        expects, and how many SVG marks it drew."""
        return self.page.evaluate("""() => Object.fromEntries(
            Array.from(document.querySelectorAll('.figure')).map(block => {
                const plot = block.querySelector('.js-plotly-plot');
                return [block.dataset.figure, {
                    drawn: plot && plot.data ? plot.data.length : 0,
                    expected: Number(block.dataset.traces),
                    traces: plot ? plot.querySelectorAll('svg g.trace').length : 0,
                    marks: plot ? plot.querySelectorAll('svg g.trace path, svg g.trace text').length : 0,
                }];
            }))""")

    def assert_clean(self):
        assert self.charts in ("drawn", "none"), self.charts
        assert self.errors == [], self.errors
        assert self.refused == [], f"requests beyond the file: {self.refused}"

    def bar_axis_starts(self) -> dict[str, list[float]]:
        """Where each drawn figure's value axes start, for figures of vertical bars."""
        return self.page.evaluate("""() => Object.fromEntries(
            Array.from(document.querySelectorAll('.figure .js-plotly-plot'))
                .filter(plot => plot.data.some(t => (t.type === 'bar' || t.type === 'histogram') && t.orientation !== 'h'))
                .map(plot => [plot.id, Object.keys(plot._fullLayout).filter(k => /^yaxis\\d*$/.test(k))
                                           .map(k => plot._fullLayout[k].range[0])]))""")

    def segments(self) -> list[dict]:
        """The segment table's rows as drawn (the current page)."""
        return self.page.evaluate("""() => Array.from(document.querySelectorAll('#segment-table tbody tr')).map(tr => ({
            id: tr.dataset.id,
            tier: tr.querySelector('td.tier').textContent,
            domain: tr.querySelector('td.domain').textContent,
            source: tr.querySelector('td.source').textContent,
            reference: tr.querySelector('td.reference').textContent,
            predictions: Array.from(tr.querySelectorAll('td.prediction')).map(td => td.textContent),
            marked: Array.from(tr.querySelectorAll('td.prediction')).map(
                td => Array.from(td.querySelectorAll('mark')).map(mark => mark.textContent)),
            values: Array.from(tr.querySelectorAll('td.value')).map(td => td.textContent),
            deltas: Array.from(tr.querySelectorAll('td.delta')).map(td => [td.textContent, td.className]),
        }))""")

    def sort_by(self, key: str) -> None:
        self.page.locator(f"#segment-table button[data-sort='{key}']").click()

    def timed(self, script: str) -> float:
        """Milliseconds `script` takes in the page, with the layout it causes."""
        return self.page.evaluate("() => { const started = performance.now(); " + script
                                  + "; document.body.offsetHeight; return performance.now() - started; }")


@pytest.fixture(scope="module")
def board_gateway(stack, tmp_path_factory) -> str:
    """A gateway with a store of its own over the session's families, so the
    board holds exactly this module's runs."""
    store = tmp_path_factory.mktemp("report-store") / "runs.sqlite"
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=f"sqlite:///{store}") as running:
        yield running.gateway_address


def _variant(model: str, change, cost_factor: float) -> tuple[gateway_pb2.EvaluateRequest, dict]:
    """The example as `model`: each prediction text through `change`, its cost times `cost_factor`."""
    corpus = load_corpus(EXAMPLE / "corpus.json")
    predictions = load_predictions(EXAMPLE / "predictions.jsonl")
    for prediction in predictions.predictions:
        if prediction.HasField("prediction"):
            prediction.prediction = change(prediction.id, prediction.prediction)
        if prediction.HasField("cost_usd"):
            prediction.cost_usd *= cost_factor
    meta = load_meta(EXAMPLE / "meta.json")
    meta.model_slug = model
    request = build_request(corpus, predictions, meta, load_glossary(EXAMPLE / "glossary.json"))
    return request, entry_inputs(corpus, predictions)


@pytest.fixture(scope="module")
def runs(board_gateway) -> dict[str, tuple[dict, dict]]:
    """name -> (run card, entry inputs): the example as it is, lower-cased at
    a third of the cost, and with a hostile model name and prediction at
    twice the cost."""
    variants = {
        "mini": _variant("example-llm-mini", lambda _, text: text, 1.0),
        "cheap": _variant("cheap-llm", lambda _, text: text.lower(), 1 / 3),
        "hostile": _variant(HOSTILE_MODEL, lambda entry_id, text: HOSTILE if entry_id == "es-001" else text, 2.0),
    }
    made = {}
    with grpc.insecure_channel(board_gateway) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        for name, (request, inputs) in variants.items():
            made[name] = (evaluate(stub, request), inputs)
    return made


@pytest.fixture(scope="module")
def board(runs, board_gateway) -> list[dict]:
    """The leaderboard rows, as `champollion leaderboard --json` prints them."""
    with grpc.insecure_channel(board_gateway) as channel:
        answer = gateway_pb2_grpc.GatewayStub(channel).Leaderboard(
            gateway_pb2.LeaderboardRequest(dataset_id=DATASET), timeout=60)
    return [plain_row(row) for row in answer.rows]  # as the client reads them: whole numbers as integers


def test_report_of_one_run_draws_every_chart_and_escapes_hostile_text(runs, browser, tmp_path):
    card, inputs = runs["hostile"]
    path = tmp_path / "report.html"
    write_report([card], path, inputs=[inputs])
    html = path.read_text(encoding="utf-8")
    assert "<script>window.__xss" not in html and HOSTILE_MODEL not in html
    assert "http://" not in html.split("<script>", 1)[0]  # no stylesheet or font from the network

    opened = Opened(browser, path)
    page = opened.page
    page.screenshot(path=str(tmp_path / "report-top.png"))
    opened.assert_clean()
    assert page.evaluate("window.__xss") is None and page.title() != "pwned"
    assert page.locator("img").count() == 0

    figures = opened.figures()
    weighted = len(card["composite_coverage"]["weights"])
    assert {name: figure["drawn"] for name, figure in figures.items()} == {
        "scores-percent": 1, "scores-rate": 1, "composite-breakdown": weighted, "by-difficulty": 1,
        "by-provenance": 1, "by-domain": 1, "latency": 1, "cost-speed": 3,
    }
    for name, figure in figures.items():
        assert figure["drawn"] == figure["expected"], name
        assert figure["traces"] >= figure["drawn"] and figure["marks"] > 0, (name, figure)

    assert page.locator("#scores tbody tr").count() >= 15
    assert page.locator("table.composite").count() == 1
    assert page.locator("table.breakdown").count() == 3  # difficulty, domain (from the corpus), provenance
    worst = page.locator("table.worst tbody tr")
    assert worst.count() == 20
    # The hostile prediction is among the worst, shown as the text it is.
    hostile_row = page.locator("table.worst tbody tr", has=page.locator("th", has_text="es-001"))
    assert hostile_row.locator("td.prediction").inner_text().strip() == HOSTILE
    assert HOSTILE_MODEL in page.locator("h1").inner_text()
    # comet_score is null: a dash and the card's warning saying why.
    comet = page.locator("#scores tr", has=page.locator("th", has_text="comet_score")).locator("td").first
    assert comet.inner_text().startswith("—") and "no COMET model" in comet.inner_text()
    page.evaluate("document.querySelector('table.worst').scrollIntoView()")
    page.screenshot(path=str(tmp_path / "report-worst-entries.png"))
    page.close()


def test_leaderboard_page_sorts_and_plots_the_runs_against_each_other(runs, board, browser, tmp_path):
    assert [row["model_slug"] for row in board][:1] == ["example-llm-mini"] and len(board) == 3
    cards = [runs[name][0] for name in ("cheap", "hostile", "mini")]  # any order: put in the rows' order
    path = tmp_path / "board.html"
    write_leaderboard_page(board, cards, path, title=f"{DATASET} leaderboard")

    opened = Opened(browser, path)
    page = opened.page
    page.screenshot(path=str(tmp_path / "board-top.png"))
    opened.assert_clean()
    assert page.evaluate("window.__xss") is None

    figures = opened.figures()
    assert figures["scores-percent"]["drawn"] == 3 and figures["scores-rate"]["drawn"] == 3
    assert figures["quality-cost"]["drawn"] == 3 + 1  # a trace per run and the Pareto front
    for name, figure in figures.items():
        assert figure["drawn"] == figure["expected"] and figure["marks"] > 0, (name, figure)

    def column(key: str) -> list[str]:
        keys = page.eval_on_selector_all("#leaderboard thead th", "cells => cells.map(c => c.dataset.key)")
        index = keys.index(key)
        return [row.locator("td").nth(index).inner_text() for row in page.locator("#leaderboard tbody tr").all()]

    # Each rank as its range (issue 34), the composite with its interval, a shading per cluster.
    assert all(row["rank_range"] and row["ci"] for row in board)
    assert column("rank") == [rank_text(row) for row in board]
    assert column("composite_score") == [f"{number(row['composite_score'])} [{number(row['ci']['ci_lower'])}, "
                                         f"{number(row['ci']['ci_upper'])}]" for row in board]
    shading = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.className)")
    assert shading == [f"cluster-{row['cluster'] % 2}" for row in board]
    assert page.locator("#ranks-note").inner_text().startswith("Rank: the ranks that paired bootstrap tests")
    costs = {row["model_slug"]: row["cost_per_entry_usd"] for row in board}
    page.locator("#leaderboard th", has_text="cost/entry").click()  # ascending first
    models = column("model_slug")
    assert [costs[model] for model in models] == sorted(costs.values())
    assert models[0] == "cheap-llm" and models[-1] == HOSTILE_MODEL
    page.locator("#leaderboard th", has_text="cost/entry").click()
    assert column("model_slug") == list(reversed(models))

    # The paired comparisons against rank 1: two tables of metrics.
    assert page.locator("table.comparison").count() == 2
    assert page.locator("table.comparison tbody tr").count() >= 6
    page.locator("#figure-quality-cost").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "board-quality-cost.png"))
    page.close()


def test_report_of_several_runs_draws_every_pairs_heatmap(runs, browser, tmp_path):
    """Three runs of one corpus version: a heatmap of every pair's corrected
    p-value for the composite and for chrF++, the runs best first, escaped."""
    cards = [runs[name][0] for name in ("mini", "cheap", "hostile")]
    path = tmp_path / "pairs.html"
    write_report(cards, path)
    bootstrap = cards[0]["bootstrap"]
    labels = [Run(card).label for card in cards]
    expected = compare_all([ComparableRun.from_card(card) for card in cards], bootstrap["resamples"],
                           bootstrap["seed"], names=labels)

    opened = Opened(browser, path)
    page = opened.page
    opened.assert_clean()
    assert page.evaluate("window.__xss") is None
    figures = opened.figures()
    assert {name for name in figures if name.startswith("pairs-")} == {"pairs-composite", "pairs-chrf_plus_plus"}
    for metric_id in ("composite", "chrf_plus_plus"):
        block = expected["metrics"][metric_id]
        drawn = page.evaluate(f"""() => {{
            const plot = document.getElementById('figure-pairs-{metric_id}');
            return {{traces: plot.data.length, type: plot.data[0].type, z: plot.data[0].z, y: plot.data[0].y,
                     cells: Array.from(plot.querySelectorAll('g.hm text')).map(t => t.textContent)}}; }}""")
        assert (drawn["traces"], drawn["type"]) == (1, "heatmap") == (figures[f"pairs-{metric_id}"]["expected"],
                                                                     "heatmap")
        order = sorted(range(3), key=lambda i: -block["values"][i])
        assert drawn["y"] == [html.escape(f"{labels[i]} (cluster {block['clusters'][i]})") for i in order]
        verdict = {}
        for pair in block["pairs"]:
            verdict[pair["first"], pair["second"]] = verdict[pair["second"], pair["first"]] = pair
        assert drawn["z"] == [[None if row == column else pytest.approx(verdict[row, column]["p_corrected"])
                               for column in order] for row in order]
        # Six cells drawn with their text, the diagonal none; a star on the significant ones.
        assert sorted(drawn["cells"]) == sorted(f"{verdict[row, column]['p_corrected']:.3g}"
                                                f"{'*' if verdict[row, column]['significant'] else ''}"
                                                for row in order for column in order if row != column)
    assert page.locator("#pairs-clusters tbody tr").count() == 3
    page.locator("#figure-pairs-composite").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "report-pairs.png"))
    page.close()


def test_composite_parts_add_up_to_the_cards_composite(runs):
    card, _ = runs["mini"]
    parts = composite_parts(Run(card))
    assert {part.metric for part in parts} == set(card["composite_coverage"]["weights"])
    assert sum(part.weight for part in parts) == pytest.approx(1.0)
    assert sum(part.contribution for part in parts) == pytest.approx(card["scores"]["composite"], abs=1e-9)


def test_pareto_front_keeps_the_runs_nothing_beats():
    # (cost, quality): the second is dearer and worse than the first; the
    # third is dearest but best.
    assert pareto_front([(1.0, 0.8), (2.0, 0.7), (3.0, 0.9), (1.0, 0.8)]) == [0, 3, 2]
    assert pareto_front([(2.0, 0.5), (1.0, 0.6)]) == [1]


def test_null_reason_is_the_cards_own_warning():
    card = {"warnings": ["family 'structural' failed (UNAVAILABLE: down)", "semantic: comet_score is null"]}
    assert null_reason(card, "comet_score") == "semantic: comet_score is null"
    assert null_reason(card, "fst_acceptance_rate") == "family 'structural' failed (UNAVAILABLE: down)"
    assert null_reason(card, "bleu") is None
    # Not the composite's coverage line, not a metric inside another word, not the family's other metric.
    card = {"warnings": ["composite (profile A) re-normalised over 8 of 9 metrics; missing: ter",
                         "determinism checked", "semantic: no COMET model available; comet_score is null"]}
    assert null_reason(card, "ter") is None
    assert null_reason(card, "semantic_score") is None


def test_corpus_level_card_and_other_corpus_version_are_said_not_drawn(runs, tmp_path):
    """A holdout card (no entries) next to a run of another corpus version:
    no worst entries and no paired test, each with the reason."""
    card, _ = runs["mini"]
    holdout = copy.deepcopy(card)
    holdout["entries"] = []
    holdout["dataset"] = {**holdout["dataset"], "tier": "holdout", "version": "f" * 64}
    holdout["run_id"] = "0" * 32
    path = tmp_path / "holdout.html"
    write_report([card, holdout], path)
    html = path.read_text(encoding="utf-8")
    assert "corpus-level card of a private corpus" in html
    assert "not compared: different corpus versions" in html
    assert "— not compared: no two runs with per-entry results are on one corpus version" in html
    assert html.count('<table class="worst">') == 1
    assert "no per-entry results to compute it from" in html


def test_bad_arguments_are_refused(runs, tmp_path):
    card, inputs = runs["mini"]
    before = copy.deepcopy(card)
    with pytest.raises(ValueError, match="at least one run card"):
        write_report([], tmp_path / "empty.html")
    with pytest.raises(ValueError, match="inputs: 2 given for 1 run cards"):
        write_report([card], tmp_path / "x.html", inputs=[inputs, inputs])
    write_report([card], tmp_path / "ok.html", inputs=[inputs])
    assert card == before  # rendering leaves the card as it was


# --- the segment table, plain text, left-out charts -----------------------------------------------


def shown_number(text: str) -> float | None:
    return None if text.startswith("—") else float(text)


def assert_shown(text: str, value) -> None:
    """A value as the page shows it: 4 significant digits."""
    if value is None:
        assert text == "—"
    else:
        assert shown_number(text) == pytest.approx(value, rel=1e-3, abs=1e-12), (text, value)


@pytest.fixture(scope="module")
def plain_text_run(stack, tmp_path_factory) -> dict:
    """The example as sacreBLEU-style files and two systems scored from them
    by `champollion evaluate --src --ref --hyp`: the example's predictions,
    and the same lower-cased with a hostile first line."""
    folder = tmp_path_factory.mktemp("plain-text")
    corpus = load_corpus(EXAMPLE / "corpus.json")
    outputs = {p.id: p.prediction for p in load_predictions(EXAMPLE / "predictions.jsonl").predictions}
    lines = {
        "src": [entry.source for entry in corpus.entries],
        "ref": [entry.reference for entry in corpus.entries],
        "hyp1": [outputs.get(entry.id, "") for entry in corpus.entries],
    }
    lines["hyp2"] = [HOSTILE] + [text.lower() for text in lines["hyp1"][1:]]
    files = {}
    for name, texts in lines.items():
        files[name] = folder / f"newstest.{name}.txt"
        files[name].write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    cards = []
    for hyp in ("hyp1", "hyp2"):
        cards.append(folder / f"{hyp}.json")
        assert run_cli("evaluate", "--src", files["src"], "--ref", files["ref"], "--hyp", files[hyp],
                       "--source-lang", "eng", "--target-lang", "spa", "--out", cards[-1],
                       "--gateway", stack.gateway_address) == 0
    return {"files": files, "lines": lines, "cards": cards,
            "loaded": [json.loads(card.read_text(encoding="utf-8")) for card in cards]}


def test_report_takes_evaluates_short_flags_and_several_files_after_one_flag(cli, plain_text_run, tmp_path):
    """`-s -r -i`, as evaluate reads them, and one -i (or --predictions)
    for every card: the page of the long flags, each repeated."""
    files, cards = plain_text_run["files"], plain_text_run["cards"]
    long_form, short_form = tmp_path / "long.html", tmp_path / "short.html"
    assert cli("report", *cards, "--src", files["src"], "--ref", files["ref"], "--hyp", files["hyp1"],
               "--hyp", files["hyp2"], "-o", long_form).exit_code == 0
    result = cli("report", *cards, "-s", files["src"], "-r", files["ref"], "-i", files["hyp1"], files["hyp2"],
                 "-o", short_form)
    assert result.exit_code == 0, result.stderr
    assert short_form.read_text(encoding="utf-8") == long_form.read_text(encoding="utf-8")


def test_report_from_plain_text_files_shows_every_segment_side_by_side(cli, plain_text_run, browser, tmp_path):
    files, lines, (card1, card2) = plain_text_run["files"], plain_text_run["lines"], plain_text_run["loaded"]
    out = tmp_path / "plain.html"
    result = cli("report", *plain_text_run["cards"], "--src", files["src"], "--ref", files["ref"],
                 "--hyp", files["hyp1"], "--hyp", files["hyp2"], "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "<script>window.__xss" not in out.read_text(encoding="utf-8")

    opened = Opened(browser, out)
    page = opened.page
    opened.assert_clean()
    assert page.evaluate("window.__xss") is None and page.title() != "pwned" and page.locator("img").count() == 0
    count = len(lines["src"])
    assert page.locator("#seg-count").inner_text() == f"{count} segments"

    # Every segment, in the files' order, with both systems' predictions beside the source and reference.
    rows = opened.segments()
    assert [row["id"] for row in rows] == [f"line-{n}" for n in range(1, count + 1)]
    assert [row["source"] for row in rows] == lines["src"]
    assert [row["reference"] for row in rows] == lines["ref"]
    assert [row["predictions"] for row in rows] == [list(pair) for pair in zip(lines["hyp1"], lines["hyp2"])]
    first = {entry["id"]: entry["scores"] for entry in card1["entries"]}
    second = {entry["id"]: entry["scores"] for entry in card2["entries"]}
    for row in rows:  # the cards' per-entry composites, and their difference, coloured by direction
        assert_shown(row["values"][0], first[row["id"]].get("composite"))
        assert_shown(row["values"][1], second[row["id"]].get("composite"))
        delta, classes = row["deltas"][0]
        a, b = first[row["id"]].get("composite"), second[row["id"]].get("composite")
        if a is not None and b is not None:
            assert_shown(delta, b - a)
            assert ("better" in classes, "worse" in classes) == (b > a, b < a)
    # Words of the second system's output that the first's lacks are marked; identical outputs are not.
    for row, (one, two) in zip(rows, zip(lines["hyp1"], lines["hyp2"])):
        assert bool(row["marked"][1]) == (one != two and bool(two)), row["id"]
        assert row["marked"][0] == []
    assert "<script>" in "".join(rows[0]["marked"][1]) and rows[0]["predictions"][1] == HOSTILE

    # Sort by the second system's composite, both ways (nulls last either way), then by the difference.
    opened.sort_by("value1")
    values = [shown_number(row["values"][1]) for row in opened.segments()]
    present = [v for v in values if v is not None]
    assert present == sorted(present) and values == present + [None] * (len(values) - len(present))
    assert page.locator("#segment-table th[aria-sort='ascending']").count() == 1
    opened.sort_by("value1")
    values = [shown_number(row["values"][1]) for row in opened.segments()]
    present = [v for v in values if v is not None]
    assert present == sorted(present, reverse=True) and values[len(present):] == [None] * (len(values) - len(present))
    opened.sort_by("delta1")
    deltas = [shown_number(row["deltas"][0][0]) for row in opened.segments()]
    assert [d for d in deltas if d is not None] == sorted(d for d in deltas if d is not None)

    # Filter by text (any of the texts, any case), and to the rows whose outputs differ.
    page.fill("#seg-text", "AGUA")
    expected = {f"line-{n + 1}" for n, texts in enumerate(zip(*lines.values()))
                if any("agua" in text.lower() for text in texts)}
    assert expected and {row["id"] for row in opened.segments()} == expected
    assert page.locator("#seg-count").inner_text() == f"{len(expected)} of {count} segments match"
    page.fill("#seg-text", "")
    page.check("#seg-differ")
    differing = {f"line-{n + 1}" for n, (one, two) in enumerate(zip(lines["hyp1"], lines["hyp2"])) if one != two}
    assert {row["id"] for row in opened.segments()} == differing
    # Plain text has no tiers or domains: their filters are off.
    assert page.locator("#seg-tier").is_disabled() and page.locator("#seg-domain").is_disabled()

    # No timings or costs in plain text: those charts are left out, one line each saying why.
    figures = opened.figures()
    assert "latency" not in figures and "cost-speed" not in figures
    for name in ("latency", "cost-speed"):
        assert page.locator(f"p.left-out[data-figure='{name}']").count() == 1
    assert "no latencies" in page.locator("p.left-out[data-figure='latency']").inner_text()
    # Bars are measured from zero; the 0-1 chart spans 0-1.
    starts = opened.bar_axis_starts()
    assert starts and all(start == 0 for axes in starts.values() for start in axes), starts
    assert page.evaluate("document.getElementById('figure-scores-rate')._fullLayout.yaxis.range") == [0, 1]
    # Warnings both cards give, once each, naming no system but "all runs".
    shared = set(card1["warnings"]) & set(card2["warnings"])
    items = page.locator("#warnings li").all_inner_texts()
    assert len(items) == len(set(card1["warnings"]) | set(card2["warnings"]))
    for warning in shared:
        assert [item for item in items if item.startswith(warning)] == [f"{warning} — all runs"]
    page.locator("#segments").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "report-segments.png"))
    page.close()


def test_segment_table_filters_by_tier_and_domain_and_follows_the_metrics_direction(runs, browser, tmp_path):
    names = ("mini", "cheap", "hostile")  # as they are, lower-cased, and with a hostile es-001
    cards, inputs = zip(*(runs[name] for name in names))
    path = tmp_path / "three.html"
    write_report(list(cards), path, inputs=list(inputs))
    opened = Opened(browser, path)
    page = opened.page
    opened.assert_clean()
    tiers = {entry["id"]: entry["difficulty"] for entry in cards[0]["entries"]}
    domains = {id_: fields["domain"] for id_, fields in inputs[0].items()}
    assert len(opened.segments()) == len(tiers)

    page.select_option("#seg-tier", "4")
    assert {row["id"] for row in opened.segments()} == {id_ for id_, tier in tiers.items() if tier == 4}
    page.select_option("#seg-domain", "health")
    both = {id_ for id_, tier in tiers.items() if tier == 4 and domains[id_] == "health"}
    assert {row["id"] for row in opened.segments()} == both
    page.select_option("#seg-tier", "")
    assert {row["id"] for row in opened.segments()} == {id_ for id_, domain in domains.items() if domain == "health"}
    assert all(row["domain"] == "health" for row in opened.segments())
    page.select_option("#seg-domain", "")

    # Sortable by any metric; a difference is better or worse by the metric's direction (TER: lower is better).
    scores = [{entry["id"]: entry["scores"] for entry in card["entries"]} for card in cards]
    for metric in ("chrf_plus_plus", "ter"):
        page.select_option("#seg-metric", label=metric)
        assert page.locator("#segment-table thead").inner_text().count(metric) == 2 * len(cards) - 1
        opened.sort_by("id")  # so that the next click sorts ascending
        opened.sort_by("value1")
        rows = opened.segments()
        values = [shown_number(row["values"][1]) for row in rows]
        assert values == sorted(values)  # no nulls here
        worse = set()
        for row in rows:
            for run in (1, 2):
                assert_shown(row["values"][run], scores[run][row["id"]][metric])
                change = scores[run][row["id"]][metric] - scores[0][row["id"]][metric]
                better = change < 0 if METRICS[metric].lower_is_better else change > 0
                classes = row["deltas"][run - 1][1]
                assert ("better" in classes, "worse" in classes) == (better, change != 0 and not better)
                if "worse" in classes:
                    worse.add((run, row["id"]))
        assert (2, "es-001") in worse  # the hostile output is worse by either metric
    # The lower-cased outputs: exactly the words with capitals are marked.
    for row in opened.segments():
        one, two = row["predictions"][:2]
        assert row["marked"][1] == [word for word, old in zip(two.split(), one.split()) if word != old]
    page.close()


def _big_card(card: dict, inputs: dict, count: int) -> tuple[dict, dict]:
    """`card` with `count` entries: its scored entries over and over under new ids, with their texts."""
    entries, big, texts = card["entries"], copy.deepcopy(card), {}
    big["entries"] = []
    for n in range(count):
        entry = copy.deepcopy(entries[n % len(entries)])
        texts[f"{entry['id']}#{n}"] = {**inputs[entry["id"]], "source": f"{n}: {inputs[entry['id']]['source']}"}
        entry["id"] = f"{entry['id']}#{n}"
        big["entries"].append(entry)
    return big, texts


def test_segment_table_of_2000_entries_stays_quick(runs, browser, tmp_path):
    """2,000 entries of two runs: a page of rows is drawn, and sorting,
    filtering and paging each take well under a second in Chromium."""
    count = 2000
    (mini, mini_inputs), (cheap, cheap_inputs) = runs["mini"], runs["cheap"]
    cards, inputs = zip(_big_card(mini, mini_inputs, count), _big_card(cheap, cheap_inputs, count))
    path = tmp_path / "big.html"
    started = time.perf_counter()
    write_report(list(cards), path, inputs=list(inputs))
    written = time.perf_counter() - started
    opened = Opened(browser, path)
    page = opened.page
    opened.assert_clean()
    assert page.locator("#seg-count").inner_text() == f"{count} segments"
    assert page.locator("#segment-table tbody tr").count() == 50  # one page of DOM, not 2,000 rows
    timings = {
        "parse": page.evaluate("() => { const t = performance.now(); "
                               "JSON.parse(document.getElementById('segment-data').textContent); "
                               "return performance.now() - t; }"),
        "sort": opened.timed("document.querySelector(\"#segment-table button[data-sort='delta1']\").click()"),
        "filter": opened.timed("const box = document.getElementById('seg-text'); box.value = 'salud';"
                               "box.dispatchEvent(new Event('input'))"),
        "clear": opened.timed("const box = document.getElementById('seg-text'); box.value = '';"
                              "box.dispatchEvent(new Event('input'))"),
        "next page": opened.timed("document.getElementById('seg-next').click()"),
    }
    print(f"2,000 entries x 2 runs: written in {written:.2f} s; in the page (ms): {timings}")
    assert all(ms < 1000 for ms in timings.values()), timings
    deltas = [shown_number(row["deltas"][0][0]) for row in opened.segments()]
    assert page.locator("#seg-page").inner_text().startswith(f"rows 51–100 of {count}")
    assert [d for d in deltas if d is not None] == sorted(d for d in deltas if d is not None)
    page.close()


def test_three_runs_of_300_entries_embed_plotly_once_in_under_1_mib(runs, browser, tmp_path):
    """Issue 37: the report of 3 runs x 300 entries was 5.3 MB, nearly all of
    it plotly.js's full bundle. Now: its cartesian bundle, gzip-compressed,
    once per page, and the figures' layout template once; every figure is
    still drawn, offline."""
    cards, inputs = zip(*(_big_card(*runs[name], 300) for name in ("mini", "cheap", "hostile")))
    path = tmp_path / "report-3x300.html"
    write_report(list(cards), path, inputs=list(inputs))
    html = path.read_text(encoding="utf-8")
    size = path.stat().st_size
    print(f"3 runs x 300 entries: {size:,} bytes ({size / 2 ** 20:.2f} MiB)")
    assert size < 2 ** 20
    assert html.count('id="plotly-gz"') == 1 and html.count('id="plotly-template"') == 1
    assert html.count('class="figure-spec"') == html.count('class="plotly-figure"') > 0
    assert '"template"' not in html.split('id="plotly-template"', 1)[0]  # no figure carries its own
    opened = Opened(browser, path)
    opened.assert_clean()
    assert opened.charts == "drawn"
    figures = opened.figures()
    # Every figure drawn whole: its traces, and SVG marks (a heatmap's are its cells' texts, in g.hm).
    assert figures and [name for name, f in figures.items() if f["drawn"] != f["expected"]] == []
    assert [name for name, f in figures.items() if not f["marks"] and not name.startswith("pairs-")] == []
    assert {name for name in figures if name.startswith("pairs-")} == {"pairs-composite", "pairs-chrf_plus_plus"}
    assert opened.page.locator("#figure-pairs-composite g.hm text").count() == 6
    opened.page.close()


def test_the_bundled_plotly_is_the_release_plotly_py_writes_figures_for():
    from importlib.resources import files

    from plotly.offline import get_plotlyjs_version

    from apps.report.render import PLOTLY_BUNDLE

    header = files("apps.report").joinpath(*PLOTLY_BUNDLE).read_text(encoding="utf-8")[:200]
    assert f"plotly.js (cartesian - minified) v{get_plotlyjs_version()}\n" in header


def test_plain_text_inputs_read_as_evaluate_reads_them(tmp_path):
    src, ref, hyp1, hyp2 = (tmp_path / name for name in ("src", "ref", "hyp1", "hyp2"))
    src.write_text("one  \ntwo\n", encoding="utf-8")  # trailing whitespace stripped, as sacreBLEU does
    ref.write_text("uno\ndos\n", encoding="utf-8")
    hyp1.write_text("uno\n\n", encoding="utf-8")  # a blank line is an empty output
    hyp2.write_text("un\ndeux\n", encoding="utf-8")
    first, second = plain_text_inputs(str(src), [str(ref)], [str(hyp1), str(hyp2)])
    assert first == {"line-1": {"source": "one", "reference": "uno", "prediction": "uno"},
                     "line-2": {"source": "two", "reference": "dos", "prediction": ""}}
    assert second["line-2"] == {"source": "two", "reference": "dos", "prediction": "deux"}
    assert plain_text_inputs(str(src), [], []) == [{"line-1": {"source": "one"}, "line-2": {"source": "two"}}]
    hyp2.write_text("un\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"different numbers of lines \(.*src: 2, .*hyp2: 1\)"):
        plain_text_inputs(str(src), [str(ref)], [str(hyp1), str(hyp2)])
    with pytest.raises(InputError, match="standard input"):
        plain_text_inputs("-", [], ["-"])


def test_report_command_refuses_files_that_are_not_the_cards(cli, plain_text_run, example_card_path, tmp_path):
    files, cards = plain_text_run["files"], plain_text_run["cards"]
    out = tmp_path / "r.html"
    cases = {
        # Plain text given as JSON: the error says which flags read it.
        ("--corpus", files["src"]): "malformed JSON: Expecting value; for plain text, one segment a line, use --src/--ref/--hyp",
        ("--src", files["src"], "--predictions", files["hyp1"]): "--src/--ref/--hyp replace --corpus and --predictions",
        ("--hyp", files["hyp1"], "--hyp", files["hyp2"]): "--hyp: give one file per card (1), got 2",
    }
    for flags, message in cases.items():
        result = cli("report", cards[0], *flags, "-o", out)
        assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    # A card of the JSON corpus (ids es-001...) with plain text (line-1...), and a file one line short.
    result = cli("report", example_card_path, "--src", files["src"], "-o", out)
    assert result.exit_code == 2 and "36 of its 36 entries (e.g. 'es-001') are not in the given files" in result.stderr
    short = tmp_path / "short.txt"
    short.write_text("".join(line + "\n" for line in plain_text_run["lines"]["hyp1"][:-1]), encoding="utf-8")
    result = cli("report", cards[0], "--src", files["src"], "--hyp", short, "-o", out)
    assert result.exit_code == 2 and "different numbers of lines" in result.stderr
    assert not out.exists()


@pytest.fixture
def example_card_path(runs, tmp_path) -> Path:
    path = tmp_path / "example-card.json"
    path.write_text(json.dumps(runs["mini"][0]), encoding="utf-8")
    return path


def test_warnings_are_listed_once_with_the_runs_they_concern(runs):
    card, _ = runs["mini"]
    other = {**copy.deepcopy(card), "run_id": "1" * 32, "warnings": ["only here", *card["warnings"][:1]]}
    found = dict(warnings_by_text([Run(card), Run(other)]))
    labels = [Run(card).label, Run(other).label]
    assert list(found) == [*dict.fromkeys(card["warnings"]), "only here"]
    assert found[card["warnings"][0]] == labels and found["only here"] == labels[1:]
    assert all(found[warning] == labels[:1] for warning in card["warnings"][1:])


def test_segment_table_joins_the_runs_entries(runs):
    card, inputs = runs["mini"]
    first = card["entries"][0]["id"]
    later = copy.deepcopy(card)
    later["entries"] = later["entries"][1:] + [{"id": "extra", "scores": {"composite": math.nan}, "difficulty": 2,
                                               "source": "own source", "prediction": "own output"}]
    table = segment_table([Run(card, inputs), Run(later)])
    rows = {row["id"]: row for row in table["rows"]}
    assert [row["id"] for row in table["rows"]] == [entry["id"] for entry in card["entries"]] + ["extra"]
    assert rows[first]["outputs"][1] is None  # not in the second run
    assert rows[first]["source"] == inputs[first]["source"] and rows[first]["domain"] == inputs[first]["domain"]
    # An entry's own texts where no file gives them; NaN is no number.
    assert rows["extra"]["source"] == "own source" and rows["extra"]["outputs"][1][0] == "own output"
    composite = [metric["id"] for metric in table["metrics"]].index("composite")
    assert rows["extra"]["outputs"][1][2][composite] is None and rows["extra"]["tier"] == 2
    assert {metric["id"] for metric in table["metrics"]} <= {"composite", *METRICS}
    assert {m["id"]: m["lower_is_better"] for m in table["metrics"]}["ter"] is True
    # A private corpus's references are never put in the page.
    holdout = copy.deepcopy(card)
    holdout["dataset"]["tier"] = "holdout"
    table = segment_table([Run(holdout, inputs)])
    assert all(row["reference"] is None for row in table["rows"]) and table["reference_note"]


def test_inline_json_cannot_end_its_script_element():
    text = str(script_json({"prediction": "</script><script>alert(1)</script> & <!--"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"prediction": "</script><script>alert(1)</script> & <!--"}


def test_charts_without_data_are_left_out_with_the_reason(runs):
    card, _ = runs["mini"]
    bare = copy.deepcopy(card)
    bare["totals"]["cost_per_entry_usd"] = None
    for key in ("tokens_per_second", "avg_latency_seconds", "median_latency_seconds", "p95_latency_seconds",
                "by_provenance"):
        bare["scores"][key] = None
    figures = {figure.id: figure for figure in across_run_figures([Run(bare)])}
    assert not figures["latency"].drawn and "no latencies" in figures["latency"].note
    assert not figures["by-provenance"].drawn and figures["by-provenance"].note == "no run card has a by_provenance breakdown"
    # Only the panel with data: entries per minute.
    assert figures["cost-speed"].drawn and figures["cost-speed"].traces == 1
    assert figures["cost-speed"].note == "not drawn, no run card has it: cost per entry (USD), tokens per second"
    assert "quality-cost" not in figures  # one run: nothing to set it against
