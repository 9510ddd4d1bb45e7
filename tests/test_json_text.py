"""The JSON the commands write (apps/cli/common.py json_text): the
same data back when read, indented as json.dumps(indent=2) writes it,
except that a top-level list of objects (a run card's entries) has one
object a line."""
from __future__ import annotations

import json

import pytest

from apps.cli.common import json_text
from tests.conftest import EXAMPLE


def _entry_lines(text: str) -> list[str]:
    """The lines between `"entries": [` and its closing bracket."""
    lines = text.splitlines()
    start = lines.index('  "entries": [') + 1
    end = next(index for index in range(start, len(lines)) if lines[index].removesuffix(",") == "  ]")
    return lines[start:end]


def _entries_read_from(lines: list[str]) -> list[dict]:
    """The objects of those lines, each checked to be on a line of its own."""
    assert all(line.startswith("    {") for line in lines), lines
    return [json.loads(line.removesuffix(",")) for line in lines]


@pytest.mark.parametrize("data", [
    {},
    [],
    [{"id": "e1"}, {"id": "e2"}],
    {"scores": {"chrf": 51.25, "bleu": None, "by_tag": {"news": {"n": 3}}}, "flags": [True, False]},
    {"warnings": [], "entries": []},
    {"languages": ["eng", "spa"], "counts": [1, 2.5, None], "rows": [[1, 2], []]},
    {"mixed": [{"id": "e1"}, "not an object", 3]},
    {"entries": [{"id": "e1", "tags": ["a", "b"], "stats": {"matches": [1, 0]}}, {"id": "e2", "tags": []}]},
    {"entries": [{"text": "línea uno\nlínea dos \"citada\"", "crk": "ᓀᐦᐃᔭᐍᐏᐣ"}], "note": "naïve 🙂"},
], ids=["empty-dict", "empty-list", "top-level-list", "nested", "empty-lists", "non-objects", "mixed-list",
        "nested-entries", "non-ascii"])
def test_json_text_reads_back_as_the_data_it_was_given(data):
    assert json.loads(json_text(data)) == data


def test_text_is_written_as_is_not_escaped():
    text = json_text({"entries": [{"prediction": "niña"}], "note": "ᓀᐦᐃᔭᐍᐏᐣ"})
    assert "niña" in text and "ᓀᐦᐃᔭᐍᐏᐣ" in text and "\\u" not in text


@pytest.mark.parametrize("data", [
    {},
    {"run_id": "r1", "scores": {"chrf": 51.25, "tier": "good"}, "warnings": ["slow"], "empty": [],
     "ci": {"chrf": [50.1, 52.4]}},
    {"mixed": [{"id": "e1"}, "not an object"], "rows": [[{"deep": 1}], []], "note": "niña"},
    {"nested": {"entries": [{"id": "e1"}, {"id": "e2"}]}},
    [{"id": "e1"}, {"id": "e2"}],
], ids=["empty", "card-less-entries", "mixed-lists", "nested-list-of-objects", "top-level-list"])
def test_data_without_a_top_level_list_of_objects_is_indented_as_json_dumps_indents(data):
    assert json_text(data) == json.dumps(data, ensure_ascii=False, indent=2)


def test_a_cards_entries_are_one_a_line_and_its_other_keys_indented_by_two():
    entries = [{"id": f"e{i}", "prediction": f"frase {i}\nsegunda línea", "scores": {"chrf": i * 1.5}}
               for i in range(5)]
    card = {"run_id": "r1", "scores": {"chrf": 51.25}, "entries": entries, "warnings": ["a warning"]}
    text = json_text(card)
    lines = text.splitlines()

    assert _entries_read_from(_entry_lines(text)) == entries
    assert [line.endswith(",") for line in _entry_lines(text)] == [True] * 4 + [False]
    top_level = [line for line in lines if line.startswith('  "')]
    assert [line.split(":")[0].strip() for line in top_level] == ['"run_id"', '"scores"', '"entries"', '"warnings"']
    assert '    "chrf": 51.25' in lines and '    "a warning"' in lines


def test_evaluate_prints_a_card_with_its_entries_one_a_line(cli, stack):
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--gateway", stack.gateway_address, "--json", "--entries")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    assert len(card["entries"]) == len(json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))["entries"])
    assert _entries_read_from(_entry_lines(result.stdout)) == card["entries"]


def test_keys_that_are_not_text_become_text_as_json_dumps_makes_them():
    data = {1: "a", None: [{"x": 1}], False: 2.5}
    assert json_text(data) == json.dumps(data, ensure_ascii=False, indent=2)
    assert json.loads(json_text(data)) == {"1": "a", "null": [{"x": 1}], "false": 2.5}
