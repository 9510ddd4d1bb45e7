"""Stored runs through the gateway and the CLI (issue 13's "Done when"): every
run card stored, ListRuns / GetRun / Leaderboard / Compare by run id, and
their bad inputs.

The CLI runs in-process against the session's families. Its runs go to a
gateway of this module's own (no families, the session's reached by address)
over a store of its own, so that the leaderboard holds exactly the runs made
here, whatever other tests stored in the session's store."""
from __future__ import annotations

import json

import grpc
import pytest

from apps.cli import build_parser
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from apps.launch.local_cluster import LocalCluster
from champollion.core.run_card import entry_as_dict, message_to_dict
from gateway.server.config import load_config
from tests.conftest import EXAMPLE, evaluate, make_request, run_cli

DATASET = "champollion-example-eng-spa"
# Spec §9.1's denormalised columns, as the issue lists them.
SPEC_COLUMNS = (
    "composite_score", "quality_tier", "chrf_plus_plus", "exact_match_rate", "fst_acceptance_rate",
    "corpus_bleu", "comet_score", "total_cost_usd", "cost_per_entry_usd", "cost_per_source_char",
    "avg_latency_seconds", "model_slug", "condition", "dataset_id", "language_pair", "fingerprint_hash",
    "equivalent_match_rate", "semantic_score", "ter", "length_ratio", "code_switching_rate",
    "hallucination_rate", "terminology_adherence", "tokens_per_second", "entries_per_minute", "elapsed_seconds",
)
# Refused at once: nothing listens on port 1.
UNREACHABLE = "postgresql://champollion:s3cret-pw@127.0.0.1:1/runs"


def cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()  # what the session's in-process services logged before: not the command's
    code = run_cli(*args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys, *args):
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def error_line(capsys, expected_code: int, *args) -> str:
    code, out, err = cli(capsys, *args)
    assert code == expected_code, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("champollion: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'runs.sqlite'}"


@pytest.fixture(scope="module")
def store_gateway(stack, store_url) -> str:
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store_url) as gateway:
        yield gateway.gateway_address


@pytest.fixture(scope="module")
def runs(store_gateway, tmp_path_factory, run_card_validator) -> dict[str, dict]:
    """The example evaluated as model A, as model B (worse translations at a
    tenth of the cost), then as model A again with the same configuration."""
    folder = tmp_path_factory.mktemp("runs")
    meta = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
    (folder / "meta-b.json").write_text(json.dumps({**meta, "model_slug": "cheap-llm"}), encoding="utf-8")
    cheap = []
    for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        prediction = json.loads(line)
        words = (prediction.get("prediction") or "").split()
        prediction["prediction"] = " ".join(words[:-1]).lower()  # a word short, case lost
        if prediction.get("cost_usd") is not None:
            prediction["cost_usd"] /= 10
        cheap.append(json.dumps(prediction, ensure_ascii=False))
    (folder / "predictions-b.jsonl").write_text("\n".join(cheap) + "\n", encoding="utf-8")

    made = {}
    for name, predictions, meta_path in (
        ("a1", EXAMPLE / "predictions.jsonl", EXAMPLE / "meta.json"),
        ("b", folder / "predictions-b.jsonl", folder / "meta-b.json"),
        ("a2", EXAMPLE / "predictions.jsonl", EXAMPLE / "meta.json"),
    ):
        out = folder / f"{name}.json"
        code = run_cli("evaluate", str(EXAMPLE / "corpus.json"), str(predictions), "--meta", str(meta_path),
                     "--gateway", store_gateway, "--out", str(out))
        assert code == 0
        card = json.loads(out.read_text(encoding="utf-8"))
        run_card_validator.validate(card)
        made[name] = card | {"path": str(out)}
    return made


def test_every_run_card_says_how_many_stored_runs_share_its_fingerprint(runs):
    counts = {name: card["integrity"]["submissions_with_fingerprint"] for name, card in runs.items()}
    assert counts == {"a1": 1, "b": 1, "a2": 2}
    assert runs["a1"]["fingerprint"]["hash"] == runs["a2"]["fingerprint"]["hash"] != runs["b"]["fingerprint"]["hash"]
    assert not any("not stored" in warning for card in runs.values() for warning in card["warnings"])
    assert all(card["integrity"]["disqualified"] is False for card in runs.values())


def test_leaderboard_one_row_per_fingerprint_ranked_by_composite(capsys, runs, store_gateway):
    rows = cli_json(capsys, "leaderboard", "--dataset", DATASET, "--json", "--gateway", store_gateway)
    assert [row["run_id"] for row in rows] == [runs["a1"]["run_id"], runs["b"]["run_id"]]
    assert runs["a1"]["scores"]["composite"] > runs["b"]["scores"]["composite"]
    assert [row["rank"] for row in rows] == [1, 2]
    for row in rows:
        missing = [column for column in (*SPEC_COLUMNS, "cost_adjusted") if column not in row]
        assert not missing, missing
        card = runs["a1"] if row["run_id"] == runs["a1"]["run_id"] else runs["b"]
        assert row["composite_score"] == pytest.approx(card["scores"]["composite"])
        assert row["chrf_plus_plus"] == pytest.approx(card["scores"]["chrf_plus_plus"])
        assert row["corpus_bleu"] == pytest.approx(card["scores"]["bleu"])
        assert row["cost_adjusted"] == pytest.approx(card["scores"]["cost_adjusted"])
        assert row["model_slug"] == card["model_slug"]
        assert row["fingerprint_hash"] == card["fingerprint"]["hash"]
        assert row["comparable"] is True
    a_row, b_row = rows
    assert (a_row["cherry_pick_suspect"], a_row["submissions_with_fingerprint"]) == (True, 2)
    assert (b_row["cherry_pick_suspect"], b_row["submissions_with_fingerprint"]) == (False, 1)


def test_leaderboard_all_submissions_and_other_orders(capsys, runs, store_gateway):
    board = ("leaderboard", "--dataset", DATASET, "--json", "--gateway", store_gateway)
    every = cli_json(capsys, *board, "--all-submissions")
    assert sorted(row["run_id"] for row in every) == sorted(card["run_id"] for card in runs.values())

    # B is worse but ten times cheaper: first by cost_adjusted, last by composite.
    by_cost = cli_json(capsys, *board, "--sort", "cost_adjusted")
    expected = sorted((runs["a1"], runs["b"]), key=lambda card: card["scores"]["cost_adjusted"], reverse=True)
    assert [row["run_id"] for row in by_cost] == [card["run_id"] for card in expected]
    assert by_cost[0]["run_id"] == runs["b"]["run_id"]
    ascending = cli_json(capsys, *board, "--sort", "cost_adjusted", "--asc")
    assert [row["run_id"] for row in ascending] == [card["run_id"] for card in reversed(expected)]
    # A page of the board: its top rows, ranked as on the whole board.
    assert cli_json(capsys, *board, "--all-submissions", "--limit", "2") == every[:2]
    assert cli_json(capsys, *board, "--all-submissions", "--limit", "0") == every


def test_leaderboard_table_says_when_it_shows_a_page(capsys, runs, store_gateway):
    code, out, err = cli(capsys, "leaderboard", "--dataset", DATASET, "--gateway", store_gateway, "--limit", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-1] == "(the first 1 rows; --limit 0 for all)" and len(lines) == 6
    # Under the table, what its rank ranges and intervals are (issue 34).
    assert lines[-2].startswith("Rank: the ranks that paired bootstrap tests") and lines[3].split()[1] == \
        "example-llm-mini"
    code, out, err = cli(capsys, "leaderboard", "--dataset", DATASET, "--gateway", store_gateway, "--limit", "-1")
    assert code == 2 and out == "" and err.strip().splitlines() == [
        "champollion: error: --limit: must be 0 (every row) or a positive number"]


def test_leaderboard_table(capsys, runs, store_gateway):
    code, out, err = cli(capsys, "leaderboard", "--dataset", DATASET, "--gateway", store_gateway)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{DATASET}, corpus version {runs['a1']['dataset']['version'][:12]}")
    assert lines[1].split() == ["rank", "model", "composite", "chrF++", "BLEU", "TER", "cost/entry", "cost_adjusted",
                                "flags"]
    # B is significantly worse (issue 34): ranks 1 and 2, two clusters, a blank line between them.
    first, gap, second = lines[3:6]
    composite = runs["a1"]["scores"]["composite"]
    assert first.split()[:3] == ["1", "example-llm-mini", f"{composite:.4g}"]
    assert first.split()[3].startswith("[") and first.endswith("cherry-pick suspect (2 submissions)")
    assert gap == "" and second.split()[:2] == ["2", "cheap-llm"] and "cherry-pick" not in second


def test_compare_run_ids_equals_comparing_the_card_files(capsys, runs, store_gateway, store_url):
    by_id = cli_json(capsys, "compare", runs["a1"]["run_id"], runs["b"]["run_id"], "--gateway", store_gateway,
                     "--json")
    by_file = cli_json(capsys, "compare", runs["a1"]["path"], runs["b"]["path"], "--gateway", store_gateway, "--json")
    assert by_id == by_file
    assert by_id["metrics"]["chrf_plus_plus"]["difference"] < 0  # B is the worse system
    # One of each, and through the embedded gateway over the store.
    mixed = cli_json(capsys, "compare", runs["a1"]["path"], runs["b"]["run_id"], "--store", store_url, "--json")
    assert mixed == by_file


def test_show_gives_back_the_card_evaluate_printed(capsys, runs, store_gateway):
    for card in runs.values():
        shown = cli_json(capsys, "show", card["run_id"], "--gateway", store_gateway, "--json", "--entries")
        printed = {key: value for key, value in card.items() if key != "path"}
        assert shown == printed


def test_runs_lists_newest_first_with_filters(capsys, runs, store_gateway):
    listed = cli_json(capsys, "runs", "--json", "--gateway", store_gateway)
    assert [run["run_id"] for run in listed] == [runs[name]["run_id"] for name in ("a2", "b", "a1")]
    assert listed[0]["dataset_id"] == DATASET and listed[0]["model_slug"] == "example-llm-mini"
    cheap = cli_json(capsys, "runs", "--json", "--model", "cheap-llm", "--gateway", store_gateway)
    assert [run["run_id"] for run in cheap] == [runs["b"]["run_id"]]
    assert cli_json(capsys, "runs", "--json", "--dataset", "no-such-corpus", "--gateway", store_gateway) == []
    code, out, _ = cli(capsys, "runs", "--gateway", store_gateway)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["run_id", "created_at", "dataset"]
    assert runs["b"]["run_id"] in out


def test_reading_commands_open_the_store_through_an_embedded_gateway(capsys, runs, store_url):
    listed = cli_json(capsys, "runs", "--json", "--store", store_url)
    assert len(listed) == 3
    rows = cli_json(capsys, "leaderboard", "--dataset", DATASET, "--json", "--store", store_url)
    assert len(rows) == 2


def test_the_session_gateway_stores_in_the_default_store(capsys, gateway):
    """CHAMPOLLION_STORE (set for the session by conftest) is the default of
    the gateway and of the reading commands."""
    card = evaluate(gateway, make_request([{"id": "s1", "reference": "Guardar cambios"}]))
    assert card["integrity"]["submissions_with_fingerprint"] >= 1
    listed = cli_json(capsys, "runs", "--json", "--dataset", "test")
    assert card["run_id"] in [run["run_id"] for run in listed]


def test_entries_are_stored_as_the_run_card_json_has_them(gateway):
    """The store's fast entry conversion against the card's generic one, on
    entries with nested values (word lists), an error and no difficulty."""
    request = make_request(
        [{"id": "x1", "reference": "Guardar los cambios", "difficulty": 3},
         {"id": "x2", "reference": "Hola de nuevo"},
         {"id": "x3", "reference": "Tienes 3 mensajes"}],
        [{"id": "x1", "prediction": "Guardar the changes xyzzy"}, {"id": "x2", "error": "timeout"},
         {"id": "x3", "prediction": "Tienes 30 mensajes mensajes mensajes mensajes"}],
    )
    entries = gateway.Evaluate(request, timeout=120).run_card.entries
    assert any(isinstance(value, list) for entry in entries for value in message_to_dict(entry)["scores"].values())
    for entry in entries:
        fast, generic = entry_as_dict(entry), message_to_dict(entry)
        assert fast == generic
        # In the same order too: the client writes cards with it (apps/client/upload.py).
        assert json.dumps(fast) == json.dumps(generic)


def test_bad_inputs_one_line_and_the_gateway_keeps_serving(capsys, runs, store_gateway):
    board = ("leaderboard", "--dataset", DATASET, "--gateway", store_gateway)
    line = error_line(capsys, 2, *board, "--sort", "blue")
    assert "'blue'" in line and "composite_score" in line and "cost_adjusted" in line
    assert "'no-such-run'" in error_line(capsys, 2, "show", "no-such-run", "--gateway", store_gateway)
    assert "'no-such-run'" in error_line(capsys, 2, "compare", runs["a1"]["run_id"], "no-such-run",
                                         "--gateway", store_gateway)
    assert "corrupt store URL" in error_line(capsys, 2, "runs", "--store", "not a url")
    assert "corrupt store URL" in error_line(capsys, 2, "db", "upgrade", "--store", "::")
    assert "--store" in error_line(capsys, 2, "runs", "--store", "sqlite:///x.sqlite", "--gateway", store_gateway)

    with grpc.insecure_channel(store_gateway) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Leaderboard(gateway_pb2.LeaderboardRequest(dataset_id=DATASET, sort="model_slug"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as refused:
            stub.Leaderboard(gateway_pb2.LeaderboardRequest(), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "dataset_id" in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.GetRun(gateway_pb2.GetRunRequest(run_id="no-such-run"), timeout=30))
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as refused:
            stub.Compare(gateway_pb2.CompareRequest(baseline_run_id="no-such-run", system_run_id="x"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert len(stub.ListRuns(gateway_pb2.ListRunsRequest(), timeout=30).runs) == 3


def test_unreachable_store_still_returns_the_card_with_a_warning(capsys, stack, run_card_validator, tmp_path):
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=UNREACHABLE) as down:
        out = tmp_path / "card.json"
        code = run_cli("evaluate", str(EXAMPLE / "corpus.json"), str(EXAMPLE / "predictions.jsonl"),
                     "--gateway", down.gateway_address, "--out", str(out))
        assert code == 0
        assert "not stored" in capsys.readouterr().out  # the summary says so
        card = json.loads(out.read_text(encoding="utf-8"))
        run_card_validator.validate(card)
        assert card["integrity"]["submissions_with_fingerprint"] is None
        warnings = [warning for warning in card["warnings"] if warning.startswith("run card not stored: ")]
        assert len(warnings) == 1 and "127.0.0.1" in warnings[0] and "s3cret" not in warnings[0]

        line = error_line(capsys, 1, "runs", "--gateway", down.gateway_address)
        assert "UNAVAILABLE" in line and "s3cret" not in line
        with grpc.insecure_channel(down.gateway_address) as channel:  # still serving
            stub = gateway_pb2_grpc.GatewayStub(channel)
            assert stub.Describe(family_pb2.DescribeRequest(), timeout=30).families
            with pytest.raises(grpc.RpcError) as refused:
                stub.Leaderboard(gateway_pb2.LeaderboardRequest(dataset_id=DATASET), timeout=30)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # Without --gateway: the embedded gateway over that store.
    assert "UNAVAILABLE" in error_line(capsys, 1, "runs", "--store", UNREACHABLE)


def test_a_gateway_without_a_store_says_so(stack):
    with EmbeddedStack(families=(), remote_families=stack.family_addresses) as bare:
        with grpc.insecure_channel(bare.gateway_address) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.ListRuns(gateway_pb2.ListRunsRequest(), timeout=30)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "--store" in refused.value.details()
            card = evaluate(stub, make_request([{"id": "n1", "reference": "Hola"}]))
            assert card["integrity"] == {"disqualified": False, "reasons": [], "contaminated_entries": [],
                                         "contaminated_entry_count": 0, "submissions_with_fingerprint": None,
                                         "reference_ngram_overlap": None, "review": None, "review_reasons": [],
                                         "verdict_withheld": False}
            assert not any("not stored" in warning for warning in card["warnings"])


def test_db_upgrade_creates_a_migrated_store(capsys, tmp_path):
    path = tmp_path / "deep" / "runs.sqlite"
    code, out, err = cli(capsys, "db", "upgrade", "--store", f"sqlite:///{path}")
    assert code == 0, err
    assert path.is_file()
    assert cli_json(capsys, "runs", "--json", "--store", f"sqlite:///{path}") == []


def test_store_options_choose_the_gateway_store(monkeypatch, tmp_path):
    from apps.cli.common import store_url as _store_url

    monkeypatch.setenv("CHAMPOLLION_STORE", "sqlite:///from-env.sqlite")
    parse = build_parser().parse_args
    assert _store_url(parse(["serve"])) == "sqlite:///from-env.sqlite"
    assert _store_url(parse(["serve"]), configured="sqlite:///from-config.sqlite") == "sqlite:///from-config.sqlite"
    assert _store_url(parse(["serve", "--store", "sqlite:///flag.sqlite"]),
                      configured="sqlite:///from-config.sqlite") == "sqlite:///flag.sqlite"
    assert _store_url(parse(["serve", "--no-store"])) is None
    assert _store_url(parse(["evaluate", "c.json", "p.jsonl", "--no-store"])) is None


def test_up_gives_its_gateway_a_sqlite_store_in_the_log_folder(tmp_path):
    cluster = LocalCluster(families=(), log_dir=tmp_path)
    config = load_config(cluster.write_gateway_config(tmp_path / "gateway.yaml"))
    assert config.store == f"sqlite:///{tmp_path / 'runs.sqlite'}"
    chosen = LocalCluster(families=(), log_dir=tmp_path, gateway={"store": UNREACHABLE})
    assert load_config(chosen.write_gateway_config(tmp_path / "other.yaml")).store == UNREACHABLE
