"""apps.client.Client against the session's embedded stack: the
docs/client.md's example as written, plain-data runs, truthful progress, errors
that carry the gRPC status, and the CLI's progress bar."""
import io
import json
import re
import uuid

import grpc
import pytest

from apps.cli.scoring import ProgressBar
from apps.client import (
    Client,
    GatewayUnavailable,
    InvalidArgument,
    InvalidSettings,
    NotFound,
    Progress,
    RequestRefused,
)
from champollion.eval.v1 import gateway_pb2
from tests.conftest import EXAMPLE, REPO


def readme_example() -> str:
    """The first ```python block under "## Python client" (docs/client.md)."""
    readme = (REPO / "docs" / "client.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python client\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def example_run():
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    lines = (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return corpus, [json.loads(line) for line in lines if line.strip()]


def test_the_readme_example_runs_as_written(stack, monkeypatch, capsys):
    monkeypatch.setenv("CHAMPOLLION_GATEWAY", stack.gateway_address)
    monkeypatch.chdir(REPO)
    exec(compile(readme_example(), "docs/client.md", "exec"), {})  # noqa: S102 - the documented code is what is tested
    printed = capsys.readouterr().out
    corpus, _ = example_run()
    size = len(corpus["entries"])
    assert f"{size}/{size} entries" in printed
    assert "my-model" in printed


def test_a_run_as_plain_data_scores_as_the_cli_does(stack, cli, tmp_path):
    corpus, predictions = example_run()
    meta = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
    glossary = json.loads((EXAMPLE / "glossary.json").read_text(encoding="utf-8"))
    with Client(stack.gateway_address) as client:
        card = client.evaluate(corpus, predictions, meta, glossary)
    out = tmp_path / "card.json"
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--glossary", EXAMPLE / "glossary.json", "--gateway", stack.gateway_address, "--out", out)
    assert result.exit_code == 0, result.stderr
    from_cli = json.loads(out.read_text(encoding="utf-8"))
    assert card["scores"] == from_cli["scores"]
    assert [entry["id"] for entry in card["entries"]] == [entry["id"] for entry in corpus["entries"]]


def test_progress_counts_entries_scored_out_of_the_corpus_from_the_start(stack):
    entries = [{"id": f"e{i}", "source": f"sentence {i}", "reference": f"frase número {i}"} for i in range(50)]
    predictions = [{"id": entry["id"], "prediction": entry["reference"]} for entry in entries]
    updates: list[Progress] = []
    with Client(stack.gateway_address) as client:
        card = client.evaluate(entries, predictions, batch_size=7, progress=updates.append,
                               source_lang="eng", target_lang="spa")
    assert card["scores"]["total"] == 50
    assert updates, "no progress was reported"
    assert all(update.entries_total == 50 for update in updates)
    done = [update.entries_done for update in updates]
    assert done == sorted(done) and done[-1] == 50
    # Entries count once every family has answered their batch: batches of 7
    # and a last one of 1, so every count is a sum of whole batches.
    assert all(count % 7 in (0, 1) for count in done)
    assert updates[-1].batches_done == updates[-1].batches_total


def test_invalid_argument_keeps_the_gateways_message_and_status(stack):
    entries = [{"id": "a", "source": "one", "reference": "uno"}, {"id": "b", "source": "two", "reference": "dos"}]
    with Client(stack.gateway_address) as client, pytest.raises(InvalidArgument) as refused:
        client.evaluate(entries, [{"id": "a", "prediction": "x" * 20_001}], source_lang="eng", target_lang="spa")
    error = refused.value
    assert isinstance(error, RequestRefused)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert str(error) == error.details and "predictions[0]" in error.details and "'a'" in error.details


def test_data_of_the_wrong_shape_is_refused_before_sending(stack):
    with Client(stack.gateway_address) as client, pytest.raises(InvalidSettings) as refused:
        client.evaluate([{"id": "a", "source": "one"}], [], source_lang="eng", target_lang="spa")
    assert "entries[0]" in str(refused.value) and "reference" in str(refused.value)
    with pytest.raises(InvalidSettings, match="token"):
        Client(stack.gateway_address, token="two words")


def test_stored_runs_compare_show_and_rank(stack):
    corpus, predictions = example_run()
    with Client(stack.gateway_address) as client:
        first = client.evaluate(corpus, predictions, meta={"model_slug": "client-a"})
        second = client.evaluate(corpus, predictions, meta={"model_slug": "client-b"}, seed=7)
        shown = client.show(first["run_id"])
        assert shown["scores"] == first["scores"] and len(shown["entries"]) == len(corpus["entries"])
        by_id = client.compare(first["run_id"], second["run_id"], resamples=100)
        by_card = client.compare(first, second, resamples=100)
        assert by_id["metrics"] == by_card["metrics"]
        assert by_id["metrics"]["chrf_plus_plus"]["difference"] == 0
        rows = client.leaderboard(corpus["id"], all_submissions=True, limit=0)
        assert {"client-a", "client-b"} <= {row["model_slug"] for row in rows}
        assert [row["rank"] for row in rows] == list(range(1, len(rows) + 1))
        assert any(run["run_id"] == first["run_id"] for run in client.runs(dataset=corpus["id"]))
        assert {family["family"] for family in client.describe()["families"]} >= {"surface"}
        with pytest.raises(NotFound) as missing:
            client.show("no-such-run")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_an_unreachable_gateway_is_unavailable():
    with Client("127.0.0.1:1") as client, pytest.raises(GatewayUnavailable) as failed:
        client.describe()
    assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    assert str(failed.value).startswith("gateway at 127.0.0.1:1: UNAVAILABLE")


def test_progress_of_a_registered_corpus_counts_out_of_its_size_from_the_start(stack):
    """The client does not hold a registered corpus: the gateway tells its size."""
    corpus = {"id": f"progress-{uuid.uuid4().hex[:8]}", "source_lang": "eng", "target_lang": "spa",
              "entries": [{"id": f"e{i}", "source": f"sentence {i}", "reference": f"frase {i}"} for i in range(30)]}
    predictions = [{"id": entry["id"], "prediction": entry["reference"]} for entry in corpus["entries"]]
    updates: list[Progress] = []
    with Client(stack.gateway_address) as client:
        info = client.register_corpus(corpus, "dev")
        card = client.evaluate(gateway_pb2.CorpusRef(id=info["id"]), predictions, batch_size=4,
                               progress=updates.append)
    assert card["scores"]["total"] == 30
    assert updates and all(update.entries_total == 30 for update in updates)


def test_the_progress_bar_shows_entries_rate_and_time_left():
    shown = io.StringIO()
    bar = ProgressBar(120, file=shown, disable=False, delay=0)
    for done in (0, 40, 80):
        bar.update(Progress(entries_done=done, entries_total=120, batches_done=done // 40,
                            batches_total=3, upload_complete=True, slow_families=("structural",)))
    text = bar.text()
    bar.close()
    assert "0/120" in shown.getvalue()  # drawn on stderr with its total from the start
    assert "80/120" in text and "entry/s" in text and "slow: structural" in text
    assert re.search(r"<\d\d:\d\d", text)  # the time left
