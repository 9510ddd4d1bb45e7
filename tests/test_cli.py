"""The `champollion` command as a user runs it."""
import json
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import EXAMPLE


def champollion(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "champollion.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def example_args():
    return [str(EXAMPLE / "corpus.json"), str(EXAMPLE / "predictions.jsonl"),
            "--meta", str(EXAMPLE / "meta.json"), "--glossary", str(EXAMPLE / "glossary.json")]


def test_evaluate_embedded_prints_a_valid_run_card(run_card_validator):
    result = champollion("evaluate", *example_args())
    assert result.returncode == 0, result.stderr
    card = json.loads(result.stdout)
    run_card_validator.validate(card)
    assert card["model_slug"] == "example-llm-mini"
    assert card["scores"]["quality_tier"] in {"fluent", "deployable", "functional", "emerging", "baseline"}


def test_evaluate_writes_out_file(tmp_path):
    out = tmp_path / "card.json"
    result = champollion("evaluate", *example_args(), "--out", str(out), "--batch-size", "5")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert json.loads(out.read_text(encoding="utf-8"))["scores"]["total"] == 36


def test_describe_embedded_lists_families_and_languages():
    result = champollion("describe")
    assert result.returncode == 0, result.stderr
    description = json.loads(result.stdout)
    families = {f["family"]: f for f in description["families"]}
    assert families["surface"]["reachable"] is True
    assert "chrf_plus_plus" in families["surface"]["description"]["metrics"]
    assert all(family["reachable"] for family in families.values()), families
    assert set(families) == {"surface", "structural", "semantic", "behavioral", "compliance"}
    languages = {l["code"]: l for l in description["languages"]}
    assert languages["kor"]["bleu_tokenizer"] == "ko-mecab"
    assert languages["crk"]["profile"] == "A"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_then_evaluate_through_the_gateway_address():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "champollion.cli", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            result = champollion("describe", "--gateway", address)
            if result.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert result.returncode == 0, result.stderr
        result = champollion("evaluate", *example_args(), "--gateway", address)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["scores"]["total"] == 36
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode == 0


def test_unreachable_gateway_is_a_clear_failure():
    result = champollion("evaluate", *example_args(), "--gateway", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr


def test_serving_an_unknown_family_says_so():
    result = champollion("serve", "--family", "lexical")
    assert result.returncode == 2
    assert "unknown family: lexical" in result.stderr


def test_compare_two_run_cards(tmp_path):
    baseline, system = tmp_path / "a.json", tmp_path / "b.json"
    assert champollion("evaluate", *example_args(), "--out", str(baseline)).returncode == 0
    assert champollion("evaluate", *example_args(), "--out", str(system), "--seed", "7").returncode == 0
    result = champollion("compare", str(baseline), str(system), "--resamples", "200")
    assert result.returncode == 0, result.stderr
    comparison = json.loads(result.stdout)
    chrf = comparison["metrics"]["chrf_plus_plus"]
    assert chrf["difference"] == 0 and chrf["significant"] is False
    assert comparison["bootstrap"]["resamples"] == 200


def test_compare_refuses_different_corpus_versions(tmp_path):
    baseline, system = tmp_path / "a.json", tmp_path / "b.json"
    assert champollion("evaluate", *example_args(), "--out", str(baseline)).returncode == 0
    card = json.loads(baseline.read_text(encoding="utf-8"))
    card["dataset"]["version"] = "0" * 64
    system.write_text(json.dumps(card), encoding="utf-8")
    result = champollion("compare", str(baseline), str(system))
    assert result.returncode == 2
    assert "different corpus versions" in result.stderr


def test_compare_rejects_a_file_that_is_not_a_run_card(tmp_path):
    bogus = tmp_path / "x.json"
    bogus.write_text('{"hello": 1}', encoding="utf-8")
    result = champollion("compare", str(bogus), str(bogus))
    assert result.returncode == 2 and "not a Champollion run card" in result.stderr


def test_a_run_larger_than_one_message_goes_through_the_upload(stack):
    """With a 1 MiB message limit on the client, the unary call is refused
    and the same run uploaded in parts is scored."""
    import grpc as grpc_module

    from champollion.eval.v1 import gateway_pb2_grpc
    from champollion.upload import collect_run_card, request_parts
    from tests.conftest import make_request

    entries = [{"id": f"e{i}", "reference": f"una frase de prueba bastante larga número {i} " * 3}
               for i in range(4000)]
    request = make_request(entries)
    assert request.ByteSize() > 1024 * 1024
    options = [("grpc.max_send_message_length", 1024 * 1024), ("grpc.max_receive_message_length", -1)]
    with grpc_module.insecure_channel(stack.gateway_address, options=options) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        with pytest.raises(grpc_module.RpcError) as refused:
            stub.Evaluate(request, timeout=60)
        assert refused.value.code() == grpc_module.StatusCode.RESOURCE_EXHAUSTED
        updates = list(stub.EvaluateUpload(request_parts(request, entries_per_part=500), timeout=300))
    card = collect_run_card(updates)
    assert card["scores"]["total"] == 4000 and card["scores"]["exact_match_rate"] == 1.0
    # The run card comes back in parts too: the card, then its entries a batch at a time.
    entry_messages = [update for update in updates if update.entries]
    assert len(entry_messages) == -(-4000 // 64)  # the stack's batch size
    assert [entry["id"] for entry in card["entries"]] == [entry["id"] for entry in entries]
    assert max(update.ByteSize() for update in updates) < 1024 * 1024
