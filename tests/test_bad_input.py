"""Bad input: a precise INVALID_ARGUMENT from the RPC (field and entry id), a
one-line error with file and line from the CLI (exit 2), and a server that
keeps serving afterwards."""
import json
import math

import grpc
import pytest
from google.protobuf import struct_pb2

from tests.conftest import evaluate, make_request

ENTRIES = [{"id": "a", "reference": "Hola"}, {"id": "b", "reference": "Adiós"}]


def rejected(gateway, request) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        gateway.Evaluate(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details()


@pytest.mark.parametrize(
    "request_args, expected",
    [
        ({"entries": ENTRIES + [{"id": "a", "reference": "Otra"}]}, "corpus.entries[2].id (id 'a'): duplicate entry id"),
        ({"entries": [{"id": "", "reference": "Hola"}]}, "corpus.entries[0].id: is required"),
        ({"entries": [{"id": "a", "reference": "  "}]}, "corpus.entries[0].reference (id 'a'): must be a non-empty string"),
        ({"entries": ENTRIES, "predictions": [{"id": "zz", "prediction": "x"}]},
         "predictions[0].id (id 'zz'): no corpus entry has this id"),
        ({"entries": ENTRIES, "predictions": [{"id": "a", "prediction": "x"}, {"id": "a", "prediction": "y"}]},
         "predictions[1].id (id 'a'): duplicate prediction"),
        ({"entries": ENTRIES, "target_lang": "xx"}, "corpus.target_lang: unknown language tag 'xx': 'xx' is not a language code; nearest valid tags: "),
        ({"entries": ENTRIES, "predictions": [{"id": "b", "prediction": "x", "latency_s": math.nan}]},
         "predictions[0].latency_s (id 'b'): must be a finite number"),
        ({"entries": ENTRIES, "predictions": [{"id": "a", "prediction": "x", "latency_s": -1.0}]},
         "predictions[0].latency_s (id 'a'): must not be negative"),
        ({"entries": ENTRIES, "meta": {"time_start": "2026-11-20T10:00:00Z", "time_end": "2026-11-20T09:00:00Z"}},
         "meta.time_end: is before meta.time_start"),
        # An empty gold word, refused on every route (the CLI's test: test_cli_morphology_word_must_not_be_empty).
        ({"entries": [ENTRIES[0], {**ENTRIES[1], "morphology": [{"word": "adiós", "features": ["+Interj"]},
                                                                {"word": " ", "features": ["+N"]}]}]},
         "corpus.entries[1].morphology[1].word (id 'b'): must be a non-empty string"),
    ],
)
def test_rpc_names_field_and_entry(gateway, request_args, expected):
    assert expected in rejected(gateway, make_request(**request_args))


def test_negative_token_count_is_rejected(gateway):
    request = make_request(ENTRIES, [{"id": "a", "prediction": "Hola"}])
    request.predictions[0].usage.completion_tokens = -3
    assert "predictions[0].usage.completion_tokens (id 'a'): must not be negative" in rejected(gateway, request)


def test_server_keeps_serving_after_bad_input(gateway):
    rejected(gateway, make_request(ENTRIES, target_lang="xx"))
    card = evaluate(gateway, make_request(ENTRIES))
    assert card["scores"]["exact_match_rate"] == 1.0


def test_missing_prediction_counts_as_error_and_scores_as_empty(gateway):
    card = evaluate(gateway, make_request(ENTRIES, [{"id": "a", "prediction": "Hola"}]))
    scores = card["scores"]
    assert (scores["total"], scores["evaluated"], scores["errors"]) == (2, 1, 1)
    assert scores["exact_match_rate"] == 0.5
    missing = next(e for e in card["entries"] if e["id"] == "b")
    assert missing["error"] == "no prediction" and missing["scores"]["chrf_plus_plus"] == 0.0


def test_entries_with_a_prediction_and_an_error_score_as_failed_with_one_warning(gateway, run_card_validator):
    """The error wins, and the card names the entries (the first five, then a count)."""
    entries = [{"id": f"e{index}", "reference": "Hola"} for index in range(8)]
    predictions = [{"id": "e0", "prediction": "Hola"}, {"id": "e1", "error": "timeout"}]
    predictions += [{"id": f"e{index}", "prediction": "Hola", "error": "refused"} for index in range(2, 8)]
    card = evaluate(gateway, make_request(entries, predictions))
    run_card_validator.validate(card)
    assert (card["scores"]["evaluated"], card["scores"]["errors"]) == (1, 7)
    assert card["scores"]["exact_match_rate"] == 1 / 8
    assert [e["error"] for e in card["entries"] if e["id"] in ("e1", "e2")] == ["timeout", "refused"]
    about = [w for w in card["warnings"] if "a prediction and an error" in w]
    assert about == [("6 entries sent both a prediction and an error and were scored as failed, their predictions "
                      "ignored: ids 'e2', 'e3', 'e4', 'e5', 'e6' and 1 more")]


def test_one_entry_with_a_prediction_and_an_error_is_named_and_others_get_no_such_warning(gateway, run_card_validator):
    card = evaluate(gateway, make_request(ENTRIES, [{"id": "a", "prediction": "Hola"},
                                                    {"id": "b", "prediction": "Adiós", "error": "cut short"}]))
    run_card_validator.validate(card)
    assert [w for w in card["warnings"] if "a prediction and an error" in w] == [
        "1 entry sent both a prediction and an error and was scored as failed, its prediction ignored: id 'b'"]
    card = evaluate(gateway, make_request(ENTRIES, [{"id": "a", "prediction": "Hola"}, {"id": "b", "error": "x"}]))
    assert not [w for w in card["warnings"] if "a prediction and an error" in w]


def write_run(tmp_path, corpus=None, prediction_lines=None):
    corpus_path = tmp_path / "corpus.json"
    predictions_path = tmp_path / "predictions.jsonl"
    corpus_path.write_text(
        json.dumps(corpus or {"id": "t", "source_lang": "eng", "target_lang": "spa",
                              "entries": [{"id": "a", "source": "Hello", "reference": "Hola"},
                                          {"id": "b", "source": "Bye", "reference": "Adiós"}]}),
        encoding="utf-8",
    )
    lines = prediction_lines if prediction_lines is not None else ['{"id": "a", "prediction": "Hola"}']
    predictions_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(corpus_path), str(predictions_path)


def invalid_input_line(result) -> str:
    """What the CLI says about invalid input: exit 2, nothing on stdout, one line on stderr."""
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("champollion: error: ")
    return result.stderr


@pytest.mark.parametrize(
    "lines, expected",
    [
        (['{"id": "a", "prediction": "Hola"}', '{"id": "b", "prediction": '], "predictions.jsonl:2: malformed JSON"),
        (['{"id": "a", "prediction": 42}'], "predictions.jsonl:1: id 'a': prediction: must be a string"),
        (['{"id": "a", "prediction": "Hola"}', '', '{"id": "q", "prediction": "x"}'],
         "predictions.jsonl:3: predictions[1].id (id 'q'): no corpus entry has this id"),
        (['{"id": "a", "prediction": "Hola", "latency_s": NaN}'],
         "predictions.jsonl:1: predictions[0].latency_s (id 'a'): must be a finite number"),
        (['{"id": "a", "prediction": "Hola", "usage": {"prompt_tokens": -5}}'],
         "predictions.jsonl:1: predictions[0].usage.prompt_tokens (id 'a'): must not be negative"),
        (['{"id": "a", "prediction": "Hola"}', '{"id": "a", "prediction": "Hola"}'],
         "predictions.jsonl:2: predictions[1].id (id 'a'): duplicate prediction"),
        # Sent in corpus order (with their entries); the line is still the file's.
        (['{"id": "b", "prediction": "Adiós"}', '{"id": "a", "prediction": "Hola", "latency_s": -1}'],
         "predictions.jsonl:2: predictions[0].latency_s (id 'a'): must not be negative"),
    ],
)
def test_cli_prints_one_line_naming_file_line_and_field(cli, stack, tmp_path, lines, expected):
    assert expected in invalid_input_line(cli("evaluate", *write_run(tmp_path, prediction_lines=lines),
                                              "--gateway", stack.gateway_address))


def test_each_system_is_put_in_corpus_order_once_and_its_lines_follow(cli, stack, tmp_path):
    """Two systems, each file out of corpus order: every file is sorted once
    (by the client, issue 35: the CLI sorted it too before), and the second
    system's bad line is still named by its line in its own file."""
    import sys

    from apps.inputs import in_corpus_order

    sorted_files = []

    def watch(frame, event, arg):  # every call of the function, however it was imported
        if event == "call" and frame.f_code is in_corpus_order.__code__:
            sorted_files.append(frame.f_locals["predictions"].path.name)

    corpus, first = write_run(tmp_path, prediction_lines=['{"id": "b", "prediction": "Adiós"}',
                                                          '{"id": "a", "prediction": "Hola"}'])
    second = tmp_path / "second.jsonl"
    second.write_text('{"id": "b", "prediction": "Adiós"}\n{"id": "a", "prediction": "Hola", "latency_s": -1}\n',
                      encoding="utf-8")
    sys.setprofile(watch)
    try:
        result = cli("evaluate", corpus, first, second, "--gateway", stack.gateway_address)
    finally:
        sys.setprofile(None)
    assert "second.jsonl:2: predictions[0].latency_s (id 'a'): must not be negative" in invalid_input_line(result)
    assert sorted_files == ["predictions.jsonl", "second.jsonl"]
