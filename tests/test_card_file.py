"""A run card written to its file as it arrives (apps/cli/card_file.py)
and the client handing the entries on as they come (collect_run_card's
`on_entries`): the file is json_text's byte for byte, the command holds one
message of entries at a time and never the whole card, a run that fails
leaves no file behind, and several systems are still compared from their
cards when no store keeps them."""
from __future__ import annotations

import json
import tempfile

import pytest

from apps.cli import card_file, scoring
from apps.cli.card_file import CardFile, card_files
from apps.cli.common import CliError, json_text
from apps.client.upload import collect_run_card
from apps.launch.embedded import EmbeddedStack
from champollion.eval.v1 import gateway_pb2, run_card_pb2
from champollion.core.run_card import run_card_to_proto
from tests.conftest import EXAMPLE


def _card(entries: list[dict]) -> dict:
    """A card's layout in miniature: members before and after its entries."""
    return {"scores": {"chrf": 51.25, "total": len(entries)}, "model_slug": "niña", "warnings": ["a warning"],
            "entries": entries, "run_id": "r1", "bootstrap": {"seed": 12345}}


def _entries(count: int) -> list[dict]:
    return [{"id": f"e{i}", "scores": {"chrf": i * 1.5, "note": "línea\n\"dos\""}, "stats": {"chrf": [1, 2]}}
            for i in range(count)]


@pytest.mark.parametrize("count, parts", [(7, [3, 0, 4]), (1, [1]), (0, [])], ids=["three-parts", "one", "none"])
def test_a_card_written_as_it_arrives_is_json_texts_byte_for_byte(tmp_path, count, parts):
    entries = _entries(count)
    card = _card(entries)
    header = {**card, "entries": []}  # what the client has once the card came: no entries yet
    target = CardFile(tmp_path / "card.json")
    start = 0
    for size in parts:
        target.add(header, entries[start:start + size])
        start += size
    assert not (tmp_path / "card.json").exists()  # under its temporary name until whole
    target.finish(header)
    assert (tmp_path / "card.json").read_text(encoding="utf-8") == json_text(card) + "\n"
    assert target.read() == card and target.entries == count
    assert [path.name for path in tmp_path.iterdir()] == ["card.json"]


def test_a_run_that_fails_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "card.json"
    path.write_text("an older card\n", encoding="utf-8")
    with pytest.raises(RuntimeError), card_files([str(path), None], read_again=True) as targets:
        assert targets[1] is not None  # a temporary one, to compare the runs later
        temporary = targets[1].path.parent
        targets[0].add(_card([]), _entries(2))
        raise RuntimeError("the gateway went away")
    assert path.read_text(encoding="utf-8") == "an older card\n"
    assert [item.name for item in tmp_path.iterdir()] == ["card.json"]
    assert not temporary.exists()


def test_no_file_is_kept_for_entries_no_one_reads_again(tmp_path):
    with card_files([None, str(tmp_path / "b.json")], read_again=False) as targets:
        assert targets[0] is None and targets[1].path == tmp_path / "b.json"


def test_an_output_that_cannot_be_written_is_refused_by_its_flag_before_scoring(cli, tmp_path):
    out = tmp_path / "missing-folder" / "card.json"
    # --gateway names no server: the refusal comes before anything is sent
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "-o", out,
                 "--gateway", "127.0.0.1:1")
    assert result.exit_code == 2
    assert result.stderr == f"champollion: error: -o/--out: cannot write {out}: No such file or directory\n"


def _stream(total: int, parts: list[int], consumed: list[int]):
    """An EvaluateUpload answer: progress, a card of `total` entries
    without them, then entries in parts; `consumed` counts the messages
    read so far."""
    yield from _counted([gateway_pb2.EvaluateProgress(entries_done=1),
                         gateway_pb2.EvaluateProgress(run_card=run_card_to_proto({"scores": {"total": total}}))], consumed)
    sent = 0
    for size in parts:
        entries = [run_card_pb2.EntryResult(id=f"e{sent + index}") for index in range(size)]
        sent += size
        yield from _counted([gateway_pb2.EvaluateProgress(entries=entries)], consumed)


def _counted(messages, consumed: list[int]):
    for message in messages:
        consumed[0] += 1
        yield message


def test_the_client_hands_each_message_of_entries_on_before_reading_the_next():
    consumed, seen = [0], []

    def on_entries(header: dict, entries: list[dict]) -> None:
        # the message just read is the last one read: nothing was read ahead and kept
        seen.append((consumed[0], [entry["id"] for entry in entries], header["entries"]))

    returned = collect_run_card(_stream(5, [2, 3], consumed), on_entries=on_entries)
    assert seen == [(3, ["e0", "e1"], []), (4, ["e2", "e3", "e4"], [])]
    assert returned["entries"] == [] and returned["scores"]["total"] == 5
    with pytest.raises(ValueError, match="sent 4 of the run card's 5 entries"):
        collect_run_card(_stream(5, [4], [0]), on_entries=on_entries)
    # without a taker, the card comes back whole, as before
    assert [entry["id"] for entry in collect_run_card(_stream(3, [1, 2], [0]))["entries"]] == ["e0", "e1", "e2"]


def test_evaluate_out_holds_one_message_of_entries_at_a_time(cli, stack, tmp_path, monkeypatch):
    """The command's own run through a real gateway: each message's entries
    go to the file, the card it keeps has none, and the file reads back whole."""
    parts: list[int] = []
    kept: list[dict] = []
    add, scored = CardFile.add, scoring._scored

    def counted_add(self, card, entries):
        parts.append(len(entries))
        add(self, card, entries)

    def kept_scored(*args):
        kept.append(scored(*args))
        return kept[-1]

    monkeypatch.setattr(card_file.CardFile, "add", counted_add)
    monkeypatch.setattr(scoring, "_scored", kept_scored)
    out = tmp_path / "card.json"
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--batch-size", "5", "-o", out, "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    written = json.loads(text)
    assert text == json_text(written) + "\n"
    assert len(written["entries"]) == written["scores"]["total"] == 36
    assert parts == [5] * 7 + [1]  # a message of the gateway's batch at a time, never the card whole
    assert kept[0]["entries"] == [] and kept[0]["run_id"] == written["run_id"]


@pytest.fixture(scope="module")
def unstored_gateway():
    """A gateway with no store (as `evaluate --no-store` starts): its cards
    are compared from themselves, not from stored runs."""
    with EmbeddedStack(families=("surface",), store=None, workers=0) as running:
        yield running.gateway_address


def test_systems_not_stored_are_compared_from_their_card_files(cli, unstored_gateway, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the temporary card files go
    lower = tmp_path / "lower.jsonl"
    lower.write_text("".join(json.dumps({**json.loads(line), "prediction": (json.loads(line).get("prediction") or "")
                                         .lower()}) + "\n"
                             for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()),
                     encoding="utf-8")
    args = ["evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", lower, "--name", "mixed", "lower",
            "-m", "chrf", "--gateway", unstored_gateway]
    result = cli(*args, "--json", "--entries")
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert [len(run["entries"]) for run in answer["runs"]] == [36, 36]
    comparison = answer["comparisons"][0]
    assert (comparison["baseline"], comparison["system"]) == ("mixed", "lower")
    assert "not stored" in result.stderr
    # the summary's comparison too, and nothing left behind either way
    summary = cli(*args)
    assert summary.exit_code == 0, summary.stderr
    assert "Baseline: mixed" in summary.stdout
    assert [path.name for path in tmp_path.iterdir()] == ["lower.jsonl"]


def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
    target = CardFile(tmp_path / "card.json", "temporary run card")
    target._file.close()
    target._file = open("/dev/full", "w", encoding="utf-8", buffering=1)  # every line written: ENOSPC
    with pytest.raises(CliError) as refused:
        target.add(_card([]), _entries(1))
    assert str(refused.value) == f"temporary run card: cannot write {tmp_path / 'card.json'}: No space left on device"
    assert refused.value.exit_code == 1
    target.discard()
    assert list(tmp_path.iterdir()) == []
