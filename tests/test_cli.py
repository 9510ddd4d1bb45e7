"""The `champollion` command. Most tests call it in this process
(`apps.cli.main`, the `cli` fixture) against the session's embedded
stack; two run it as a user does, as a separate process: `evaluate` with its
own embedded stack, and `serve`."""
import json
import socket
import subprocess
import sys

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2

from champollion.eval.v1 import gateway_pb2_grpc
from apps.launch.local_cluster import health_status
from apps.client.upload import collect_run_card, request_parts
from tests.conftest import EXAMPLE, make_request, run_cli

# Spec §5.1: the first threshold the composite reaches names the tier.
SPEC_TIER_THRESHOLDS = ((0.85, "fluent"), (0.70, "deployable"), (0.50, "functional"), (0.30, "emerging"),
                        (0.00, "baseline"))


def tier_for(composite: float) -> str:
    return next(tier for threshold, tier in SPEC_TIER_THRESHOLDS if composite >= threshold)


def example_args():
    return [EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl",
            "--meta", EXAMPLE / "meta.json", "--glossary", EXAMPLE / "glossary.json"]


@pytest.fixture(scope="module")
def example_card(stack, tmp_path_factory):
    """The example's run card, written by `evaluate --out` once for the module."""
    path = tmp_path_factory.mktemp("cards") / "example.json"
    assert run_cli("evaluate", *example_args(), "--out", path, "--gateway", stack.gateway_address) == 0
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_evaluate_embedded_prints_a_valid_run_card(run_card_validator):
    """As a user runs it: its own process, its own embedded stack."""
    result = subprocess.run(
        [sys.executable, "-m", "apps.cli", "evaluate", *map(str, example_args()), "--json", "--entries"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    card = json.loads(result.stdout)
    run_card_validator.validate(card)
    assert card["model_slug"] == "example-llm-mini"
    assert card["scores"]["composite"] is not None
    assert card["scores"]["quality_tier"] == tier_for(card["scores"]["composite"])


def test_evaluate_writes_out_file(cli, stack, tmp_path):
    out = tmp_path / "card.json"
    result = cli("evaluate", *example_args(), "--out", out, "--batch-size", "5", "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    card = json.loads(out.read_text(encoding="utf-8"))
    # The whole card in the file, the summary on stdout, naming the run and the file.
    assert len(card["entries"]) == 36
    assert f"run {card['run_id']} stored in " in result.stdout and f"run card written to {out}" in result.stdout
    assert card["scores"]["total"] == 36
    assert card["scores"]["quality_tier"] == tier_for(card["scores"]["composite"])


def test_describe_lists_families_and_languages(cli, stack):
    result = cli("describe", "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    description = json.loads(result.stdout)
    families = {f["family"]: f for f in description["families"]}
    assert families["surface"]["reachable"] is True
    assert "chrf_plus_plus" in families["surface"]["description"]["metrics"]
    assert all(family["reachable"] for family in families.values()), families
    assert set(families) == {"surface", "structural", "semantic", "behavioral", "compliance"}
    languages = {l["code"]: l for l in description["languages"]}
    assert languages["kor"]["bleu_tokenizer"] == "ko-mecab"
    assert languages["crk"]["profile"] == "A"


def test_serve_a_gateway_then_evaluate_through_its_address(cli, stack, example_card, tmp_path):
    """`champollion serve --family gateway --config` as its own process, in
    front of the session stack's families: it logs its address, then one
    `ready` event, gives the example the scores the in-process gateway
    gives, and exits 0 on SIGTERM."""
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"families": stack.family_addresses}), encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, "-m", "apps.cli", "serve", "--family", "gateway", "--config", str(config),
         "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        # stderr's JSON lines: a `serving` event with the address once the
        # server has started, then `ready`; readline returns "" if the
        # process dies first.
        events = []
        while not events or events[-1]["event"] != "ready":
            line = server.stderr.readline()
            assert line, f"serve exited with {server.wait(timeout=10)}"
            events.append(json.loads(line))
        assert [event["event"] for event in events] == ["serving", "ready"]
        address = events[0]["address"]
        assert events[0]["family"] == "gateway" and events[-1]["gateway"] == address
        assert health_status(address, timeout=10) == health_pb2.HealthCheckResponse.SERVING
        out = tmp_path / "card.json"
        result = cli("evaluate", *example_args(), "--gateway", address, "--out", out)
        assert result.exit_code == 0, result.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()
    assert server.returncode == 0
    card = json.loads(out.read_text(encoding="utf-8"))
    assert card["scores"] == json.loads(example_card.read_text(encoding="utf-8"))["scores"]


def test_unreachable_gateway_is_a_clear_failure(cli):
    result = cli("evaluate", *example_args(), "--gateway", f"127.0.0.1:{free_port()}")
    assert result.exit_code == 1
    assert "UNAVAILABLE" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("champollion: error: ")


def test_serving_an_unknown_family_says_so(cli):
    result = cli("serve", "--family", "lexical")
    assert result.exit_code == 2
    assert "unknown family: lexical" in result.stderr


def test_compare_two_run_cards(cli, stack, example_card, tmp_path):
    reseeded = tmp_path / "b.json"
    result = cli("evaluate", *example_args(), "--out", reseeded, "--seed", "7", "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    result = cli("compare", example_card, reseeded, "--resamples", "200", "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    comparison = json.loads(result.stdout)
    chrf = comparison["metrics"]["chrf_plus_plus"]
    assert chrf["difference"] == 0 and chrf["significant"] is False
    assert comparison["bootstrap"]["resamples"] == 200


def test_several_systems_are_compared_by_their_stored_ids(cli, stack, tmp_path, monkeypatch):
    """evaluate with two systems on a gateway with a store: the comparison
    names the stored runs by id (the gateway reads their statistics back),
    the cards are not sent again (issue 35)."""
    from apps.client import Client

    sides = []
    compare = Client.compare

    def recorded(self, baseline, system, **options):
        sides.extend([baseline, system])
        return compare(self, baseline, system, **options)

    monkeypatch.setattr(Client, "compare", recorded)
    other = tmp_path / "other.jsonl"
    other.write_bytes((EXAMPLE / "predictions.jsonl").read_bytes())
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", other, "--resamples", "100",
                 "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert sides == [runs[0]["run_id"], runs[1]["run_id"]]
    assert [line.split(" stored in ")[0].split("run ")[-1] for line in result.stderr.splitlines()[-2:]] == sides


def test_compare_refuses_different_corpus_versions(cli, stack, example_card, tmp_path):
    card = json.loads(example_card.read_text(encoding="utf-8"))
    card["dataset"]["version"] = "0" * 64
    other = tmp_path / "other.json"
    other.write_text(json.dumps(card), encoding="utf-8")
    result = cli("compare", example_card, other, "--gateway", stack.gateway_address)
    assert result.exit_code == 2
    assert "different corpus versions" in result.stderr


def test_compare_rejects_a_file_that_is_not_a_run_card(cli, stack, tmp_path):
    bogus = tmp_path / "x.json"
    bogus.write_text('{"hello": 1}', encoding="utf-8")
    result = cli("compare", bogus, bogus, "--gateway", stack.gateway_address)
    assert result.exit_code == 2 and "not a Champollion run card" in result.stderr


def test_a_run_larger_than_one_message_goes_through_the_upload(stack):
    """With a 256 KiB message limit on the client, the unary call is refused
    and the same run uploaded in parts is scored; the run card comes back in
    parts too, each under the limit."""
    limit = 256 * 1024
    entries = [{"id": f"e{i}", "reference": f"una frase de prueba bastante larga número {i} " * 3}
               for i in range(1000)]
    request = make_request(entries)
    assert request.ByteSize() > limit
    options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(stack.gateway_address, options=options) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Evaluate(request, timeout=60)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        updates = list(stub.EvaluateUpload(request_parts(request, entries_per_part=200), timeout=300))
    card = collect_run_card(updates)
    assert card["scores"]["total"] == 1000 and card["scores"]["exact_match_rate"] == 1.0
    # The card, then its entries a batch at a time.
    entry_messages = [update for update in updates if update.entries]
    assert len(entry_messages) == -(-1000 // 64)  # the stack's batch size
    assert [entry["id"] for entry in card["entries"]] == [entry["id"] for entry in entries]
    assert max(update.ByteSize() for update in updates) < limit


def test_evaluate_plain_text_files(cli, stack, tmp_path):
    """sacreBLEU-style inputs: one segment a line, several references."""
    src, ref, ref2, hyp = (tmp_path / name for name in ("src.txt", "ref.txt", "ref2.txt", "hyp.txt"))
    src.write_text("Save changes\nOpen the file\n", encoding="utf-8")
    ref.write_text("Guardar cambios\nAbrir el archivo\n", encoding="utf-8")
    ref2.write_text("Guarde los cambios\nAbra el archivo\n", encoding="utf-8")
    hyp.write_text("Guardar cambios\nAbre el archivo\n", encoding="utf-8")
    result = cli("evaluate", "--src", src, "--ref", ref, "--ref", ref2, "--hyp", hyp, "--source-lang", "eng",
                 "--target-lang", "spa", "--gateway", stack.gateway_address, "--json", "--entries")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    assert card["scores"]["total"] == 2
    assert [entry["id"] for entry in card["entries"]] == ["line-1", "line-2"]


def test_evaluate_plain_text_with_a_line_missing_is_one_line_exit_2(cli, stack, tmp_path):
    src, ref, hyp = (tmp_path / name for name in ("src.txt", "ref.txt", "hyp.txt"))
    src.write_text("one\ntwo\n", encoding="utf-8")
    ref.write_text("uno\ndos\n", encoding="utf-8")
    hyp.write_text("uno\n", encoding="utf-8")
    result = cli("evaluate", "--src", src, "--ref", ref, "--hyp", hyp, "--source-lang", "eng", "--target-lang", "spa",
                 "--gateway", stack.gateway_address)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(hyp) in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--src", "s.txt", "--hyp", "h.txt", "--source-lang", "eng", "--target-lang", "spa"], "--ref"),
    (["c.json", "p.jsonl", "--src", "s.txt", "--ref", "r.txt", "--hyp", "h.txt"],
     "c.json, p.jsonl: a file given where no file is expected"),
    (["--corpus-id", "c", "--src", "s.txt", "--ref", "r.txt", "--hyp", "h.txt"], "--corpus-id with --src/--ref/--hyp"),
    (["--src", "s.txt", "--ref", "r.txt", "--hyp", "h.txt"], "--source-lang and --target-lang"),
    (["c.json"], "evaluate needs CORPUS PREDICTIONS"),
    (["c.json", "p.jsonl", "--workers", "2", "--gateway", "127.0.0.1:1"], "--workers"),
])
def test_evaluate_refuses_mixed_inputs_by_flag(cli, args, message):
    result = cli("evaluate", *args)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [
    ["-s", "src.en", "-r", "ref.de", "b.json", "-i", "sys1.de"],  # --ref takes one file
    ["-i", "sys1.de", "-s", "src.en", "b.json", "-r", "ref.de"],  # so does --src
])
def test_a_stray_file_beside_plain_text_names_itself_not_flags_never_given(cli, args):
    """A file no flag took is named, with how the flags take their files;
    the message does not blame CORPUS PREDICTIONS or --corpus-id, which the
    command line never gave."""
    result = cli("evaluate", *args, "--source-lang", "en", "--target-lang", "de")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("champollion: error: b.json: a file given where no file is expected")
    assert "-r/--ref takes one" in result.stderr
    assert "CORPUS" not in result.stderr and "--corpus-id" not in result.stderr


def test_compare_by_approximate_randomisation(cli, stack, example_card):
    result = cli("compare", example_card, example_card, "--method", "ar", "--resamples", "100",
                 "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    comparison = json.loads(result.stdout)
    assert comparison["test"]["method"] == "ar"
    assert comparison["metrics"]["chrf_plus_plus"]["difference"] == 0


def test_report_of_a_card_file_and_a_stored_run(cli, stack, example_card, tmp_path):
    run_id = json.loads(example_card.read_text(encoding="utf-8"))["run_id"]  # stored by the stack's gateway
    out = tmp_path / "report.html"
    result = cli("report", example_card, run_id, "-o", out, "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "example-llm-mini" in page
    missing = cli("report", "no-such-run", "-o", out, "--gateway", stack.gateway_address)
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1


def test_leaderboard_as_an_html_page(cli, stack, example_card, tmp_path):
    dataset = json.loads(example_card.read_text(encoding="utf-8"))["dataset"]["id"]
    out = tmp_path / "board.html"
    result = cli("leaderboard", "--dataset", dataset, "--html", "-o", out, "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    assert "example-llm-mini" in out.read_text(encoding="utf-8")
    assert cli("leaderboard", "--dataset", dataset, "--html", "--gateway", stack.gateway_address).exit_code == 2


def test_serve_passes_workers_to_the_family(monkeypatch):
    """`serve --family surface --workers 2` starts the family with a pool of
    two worker processes (the real start_family, wrapped to see its options)."""
    import asyncio
    import os
    import signal

    from apps import cli as cli_module
    from apps.cli import serve as serve_module

    real_family, given = serve_module.start_family, {}

    async def start_family(*args, **options):
        started = await real_family(*args, **options)
        # Set once started: _serve then installs its SIGTERM handler before it next waits.
        given.update(options)
        return started

    monkeypatch.setattr(serve_module, "start_family", start_family)
    args = cli_module.build_parser().parse_args(["serve", "--family", "surface", "--port", str(free_port()),
                                                 "--workers", "2"])

    async def serve_then_stop():
        task = asyncio.create_task(serve_module._serve(args))
        while not given and not task.done():
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, timeout=60)

    asyncio.run(serve_then_stop())
    assert given["workers"] == 2
