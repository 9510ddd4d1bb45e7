"""`champollion.apps.report`: the run report and the leaderboard page, rendered
from run cards the session's families scored, opened in headless Chromium
(Debian's, driven by Playwright; no browser is ever downloaded) with every
network request refused."""
from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from champollion.apps.inputs import build_request, load_corpus, load_glossary, load_meta, load_predictions
from champollion.apps.launch.embedded import EmbeddedStack
from champollion.apps.report import entry_inputs, write_leaderboard_page, write_report
from champollion.apps.report.model import Run, composite_parts, null_reason, pareto_front
from tests.conftest import EXAMPLE, evaluate

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

DATASET = "champollion-example-eng-spa"
# Would run script, load an image and change the title if it were not escaped.
HOSTILE = '<img src="x" onerror="document.title=\'pwned\'"><script>window.__xss = 1</script>Guardar'
HOSTILE_MODEL = "<b>bold</b>-llm"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium on PATH: install Debian's `chromium` package (`make test` installs it); "
                    "this test never downloads a browser")
    return found


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"], headless=True)
        yield launched
        launched.close()


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
        assert self.errors == [], self.errors
        assert self.refused == [], f"requests beyond the file: {self.refused}"


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
    rows = [json_format.MessageToDict(row) for row in answer.rows]
    for row in rows:  # Struct numbers are doubles
        row["rank"] = int(row["rank"])
    return rows


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

    assert column("rank") == ["1", "2", "3"]
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
