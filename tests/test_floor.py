"""Floor runs (docs/store-and-corpora.md, "Floor runs"): the gateway scores
the degenerate systems of every corpus version itself and stores them once
per version (a client-sent corpus and a registered one); boards show them
apart (CLI table, JSON, web); the tier rule makes a run close to the floor
baseline; the corpus check reports the headroom above the floor."""
from __future__ import annotations

import json

import grpc
import pytest
from starlette.testclient import TestClient

from apps.client import Client
from apps.inputs import build_request, load_corpus, load_meta, load_predictions
from apps.launch.embedded import EmbeddedStack
from apps.web.app import WebSettings, create_app
from champollion.core.degenerate import FLOOR_KINDS
from champollion.core.run_card import run_card_from_proto
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.card.floor import HEADROOM_SHARE, baseline_tier, headroom
from gateway.store import RunStore, StoreError
from tests.conftest import EXAMPLE, run_cli
from tests.test_store import DATASET, make_card, save
from tests.web_fixtures import write_tokens

REGISTERED_ID = "floor-registered-spa"


# --- the tier rule and the headroom (gateway/card/floor.py, pure) ------------------

def floor_run(kind, composite, low=None, high=None):
    return {"floor_kind": kind, "composite": composite,
            "interval": None if low is None else {"ci_lower": low, "ci_upper": high}}


def scores(composite, low=None, high=None):
    return {"composite": composite,
            "confidence_intervals": {} if low is None else {"composite": {"ci_lower": low, "ci_upper": high}}}


def test_a_run_whose_interval_reaches_the_highest_floor_is_baseline_and_a_clearly_better_one_is_not():
    floors = [floor_run("empty", 0.0, 0.0, 0.0), floor_run("half_reference", 0.11, 0.03, 0.21),
              floor_run("constant", 0.05)]
    tier, warning = baseline_tier(scores(0.3, 0.2, 0.4), floors)
    assert tier == "baseline" and "floor:half_reference" in warning and "ignoring the input" in warning
    # At the bound counts; above it does not; no interval: the composite itself.
    assert baseline_tier(scores(0.3, 0.21, 0.4), floors) is not None
    assert baseline_tier(scores(0.3, 0.2101, 0.4), floors) is None
    assert baseline_tier(scores(0.2), floors) is not None and baseline_tier(scores(0.22), floors) is None
    # A floor without an interval is read at its composite.
    assert baseline_tier(scores(0.5, 0.05, 0.9), [floor_run("constant", 0.05)])[1].count("floor:constant") == 1
    assert baseline_tier(scores(0.5, 0.1, 0.9), []) is None and baseline_tier(scores(None), floors) is None


def test_headroom_names_a_metric_without_room_above_the_floor_uninformative():
    weights = {"chrf_plus_plus": 0.5, "hallucination_rate": 0.5}
    runs = [{"floor_kind": "empty", "weights": weights,
             "scores": {"chrf_plus_plus": 0.0, "hallucination_rate": 0.02, "composite": 0.0}},
            {"floor_kind": "half_reference", "weights": weights,
             "scores": {"chrf_plus_plus": 30.0, "hallucination_rate": 0.5, "composite": 0.2}},
            {"floor_kind": None, "weights": weights,
             "scores": {"chrf_plus_plus": 60.0, "hallucination_rate": 0.01, "composite": 0.7}},
            {"floor_kind": None, "weights": weights,
             "scores": {"chrf_plus_plus": 32.0, "hallucination_rate": 0.03, "composite": 0.4}}]
    found = headroom(runs)
    chrf = found["metrics"]["chrf_plus_plus"]
    assert (chrf["floor"], chrf["floor_kind"], chrf["lowest"], chrf["highest"]) == (30.0, "half_reference", 32.0, 60.0)
    assert chrf["headroom_lowest"] == 2.0 and chrf["headroom_highest"] == 30.0 and chrf["uninformative"] is False
    # Lower is better: the floor is the lowest rate; 0.01 below 0.02 is under 5% of the scale.
    hallucination = found["metrics"]["hallucination_rate"]
    assert hallucination["floor"] == 0.02 and hallucination["headroom_highest"] == pytest.approx(0.01)
    assert hallucination["uninformative"] is True and found["uninformative"] == ["hallucination_rate"]
    assert found["metrics"]["composite"]["headroom_highest"] == pytest.approx(0.5)
    assert found["threshold_share"] == HEADROOM_SHARE and (found["floor_runs"], found["systems"]) == (2, 2)


# --- the store --------------------------------------------------------------------

def test_floor_runs_are_stored_apart_listed_only_when_asked_and_never_twice(store_url):
    store = RunStore.open(store_url)
    try:
        system = save(store, make_card(model="model-a", composite=0.6))
        floor = make_card(model="floor:constant", composite=0.1, fingerprint="fp-model-a-v1")
        store.save_run(floor, [[]], floor_kind="constant")
        # Not counted with the system's fingerprint, never listed by default.
        again = make_card(model="model-a", composite=0.6)
        assert store.save_run(again, [[]]) == 2
        assert [run["run_id"] for run in store.list_runs()] == [again["run_id"], system["run_id"]]
        assert {run["floor_kind"] for run in store.list_runs(include_floor=True)} == {None, "constant"}
        board = store.leaderboard(DATASET)
        assert [(row["rank"], row["floor"], row["floor_kind"]) for row in board["rows"]] == \
            [(1, False, None), (None, True, "constant")]
        assert board["rows"][0]["submissions_with_fingerprint"] == 2
        assert store.floor_kinds(DATASET, "v1") == {"constant"}
        assert [run["floor_kind"] for run in store.floor_runs(DATASET, "v1")] == ["constant"]
        with pytest.raises(StoreError):
            store.save_run(make_card(model="floor:constant", composite=0.2), [[]], floor_kind="constant")
    finally:
        store.close()


# --- through a gateway that builds floors ---------------------------------------

@pytest.fixture(scope="module")
def floor_stack(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('floor') / 'runs.sqlite'}"
    embedded = EmbeddedStack(batch_size=64, store=url, workers=0, floor_runs=True)
    with embedded as running:
        yield embedded, running, url


def settle(floor_stack):
    embedded, running, _ = floor_stack
    embedded.run(running.gateway.floors.settled())


def example_request(meta: dict | None = None, halve: bool = False) -> gateway_pb2.EvaluateRequest:
    corpus = load_corpus(EXAMPLE / "corpus.json")
    predictions = load_predictions(EXAMPLE / "predictions.jsonl")
    if halve:  # a system that ignores the source: the first half of each reference
        for prediction in predictions.predictions:
            reference = next(e.reference for e in corpus.entries if e.id == prediction.id)
            words = reference.split()
            prediction.prediction = " ".join(words[:len(words) // 2]) if len(words) > 1 else ""
    request = build_request(corpus, predictions, load_meta(EXAMPLE / "meta.json"))
    if meta:
        for key, value in meta.items():
            setattr(request.meta, key, value)
    return request


def floor_rows(url: str, dataset: str, version: str) -> list[dict]:
    store = RunStore.open(url)
    try:
        return store.floor_runs(dataset, version)
    finally:
        store.close()


@pytest.fixture(scope="module")
def client_sent(floor_stack):
    """The example run, its floor, then a run close to the floor and the example again."""
    _, running, url = floor_stack
    with grpc.insecure_channel(running.gateway_address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        first = run_card_from_proto(stub.Evaluate(example_request(), timeout=120).run_card)
        settle(floor_stack)
        close = run_card_from_proto(stub.Evaluate(example_request({"model_slug": "halver"}, halve=True),
                                                  timeout=120).run_card)
        better = run_card_from_proto(stub.Evaluate(example_request({"model_slug": "example-again"}),
                                                   timeout=120).run_card)
        settle(floor_stack)
    return first, close, better


def test_a_client_sent_version_gets_its_floor_once(floor_stack, client_sent):
    first, _, _ = client_sent
    dataset = first["dataset"]
    floors = floor_rows(floor_stack[2], dataset["id"], dataset["version"])
    assert sorted(run["floor_kind"] for run in floors) == sorted(FLOOR_KINDS)  # two more runs made none
    # The first run, answered before its floor existed, keeps its tier.
    assert first["scores"]["quality_tier"] != "baseline" and not any("floor:" in w for w in first["warnings"])


def test_a_run_close_to_the_floor_is_baseline_and_a_better_one_keeps_its_tier(client_sent):
    first, close, better = client_sent
    assert close["scores"]["quality_tier"] == "baseline"
    assert [w for w in close["warnings"] if "indistinguishable from ignoring the input" in w and "floor:" in w]
    assert better["scores"]["quality_tier"] == first["scores"]["quality_tier"] != "baseline"
    assert not any("indistinguishable" in w for w in better["warnings"])


def test_a_floor_slug_from_a_client_is_refused(floor_stack):
    with grpc.insecure_channel(floor_stack[1].gateway_address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            gateway_pb2_grpc.GatewayStub(channel).Evaluate(example_request({"model_slug": "floor:empty"}), timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "meta.model_slug" in refused.value.details()


def test_boards_show_floor_rows_apart_in_the_cli_table_and_json(floor_stack, client_sent, capsys):
    dataset = client_sent[0]["dataset"]["id"]
    address = floor_stack[1].gateway_address
    capsys.readouterr()
    assert run_cli("leaderboard", "--dataset", dataset, "--gateway", address, "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    systems, floor = [r for r in rows if not r["floor"]], [r for r in rows if r["floor"]]
    assert rows == systems + floor and len(floor) == len(FLOOR_KINDS)
    assert all(r["rank"] is None and r["model_slug"].startswith("floor:") for r in floor)
    assert [r["rank"] for r in systems] == list(range(1, len(systems) + 1)) and all(r["floor"] is False for r in systems)
    assert run_cli("leaderboard", "--dataset", dataset, "--gateway", address) == 0
    table = capsys.readouterr().out
    heading = table.index("\nfloor: degenerate systems")
    assert all(table.index(r["model_slug"]) < heading for r in systems)
    assert all(table.index(f"floor:{kind}") > heading for kind in FLOOR_KINDS)
    assert run_cli("runs", "--gateway", address, "--json") == 0
    assert not [r for r in json.loads(capsys.readouterr().out) if r["floor_kind"]]
    assert run_cli("runs", "--gateway", address, "--model", "floor:empty", "--json") == 0
    assert [r["floor_kind"] for r in json.loads(capsys.readouterr().out)] == ["empty"]


def test_the_html_leaderboard_page_has_a_floor_section(floor_stack, client_sent, tmp_path, capsys):
    dataset = client_sent[0]["dataset"]["id"]
    page = tmp_path / "board.html"
    assert run_cli("leaderboard", "--dataset", dataset, "--gateway", floor_stack[1].gateway_address,
                   "--html", "-o", page) == 0
    html = page.read_text(encoding="utf-8")
    floor_section = html.index('<h2 id="floor">')
    assert html.index("example-llm-mini") < floor_section < html.index("floor:half_reference")


def test_the_web_board_shows_floor_rows_apart(floor_stack, client_sent, tmp_path):
    dataset = client_sent[0]["dataset"]["id"]
    tokens = tmp_path / "tokens.yaml"
    write_tokens(tokens)
    app = create_app(WebSettings(floor_stack[2], str(tokens), secret="s" * 40))
    with TestClient(app) as web:
        rows = web.get(f"/api/leaderboard/{dataset}").json()["rows"]
        page = web.get(f"/leaderboard/{dataset}").text
    assert [r["floor"] for r in rows].count(True) == len(FLOOR_KINDS)
    board, floor = page.split('id="floor-board"')
    assert "floor:" not in board.split('<table id="board">')[1] and all(f"floor:{k}" in floor for k in FLOOR_KINDS)


@pytest.fixture(scope="module")
def registered(floor_stack):
    """A registered (dev) corpus, its floor, a system run on it, and the same content registered again."""
    _, running, url = floor_stack
    corpus = {**json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8")), "id": REGISTERED_ID}
    with Client(running.gateway_address) as client:
        info = client.register_corpus(corpus, "dev")
        settle(floor_stack)
        predictions = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text().splitlines() if line]
        run = client.evaluate(gateway_pb2.CorpusRef(id=REGISTERED_ID), predictions, {"model_slug": "pilot-a"})
        client.register_corpus(corpus, "dev")
        settle(floor_stack)
        _, report = client.check_corpus(REGISTERED_ID)
    return info, run, report


def test_a_registered_version_gets_its_floor_once(floor_stack, registered):
    info, run, _ = registered
    floors = floor_rows(floor_stack[2], REGISTERED_ID, info["version"])
    assert sorted(f["floor_kind"] for f in floors) == sorted(FLOOR_KINDS)
    store = RunStore.open(floor_stack[2])
    try:
        card = store.get_run(floors[0]["run_id"])
    finally:
        store.close()
    assert card["dataset"]["tier"] == "dev" and card["model_slug"] == f"floor:{floors[0]['floor_kind']}"
    assert run["scores"]["quality_tier"] != "baseline"


def test_corpus_check_reports_the_floor_and_the_headroom(floor_stack, registered, capsys):
    _, run, report = registered
    floor = report["floor"]
    assert floor["floor_runs"] == len(FLOOR_KINDS) and floor["systems"] == 1
    composite = floor["metrics"]["composite"]
    assert composite["highest"] == composite["lowest"] == pytest.approx(run["scores"]["composite"])
    assert composite["headroom_highest"] == pytest.approx(run["scores"]["composite"] - composite["floor"])
    assert composite["uninformative"] is False and "chrf_plus_plus" in floor["metrics"]
    capsys.readouterr()
    assert run_cli("corpus", "check", REGISTERED_ID, "--gateway", floor_stack[1].gateway_address) == 0
    out = capsys.readouterr().out
    assert "floor: 5 floor runs, 1 stored systems" in out and "headroom (highest)" in out
