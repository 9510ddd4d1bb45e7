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


@pytest.mark.parametrize(
    "corpus, expected",
    [
        ({"id": "t", "source_lang": "eng", "target_lang": "klingon", "entries": [{"id": "a", "source": "x", "reference": "y"}]},
         "corpus.json: corpus.target_lang: unknown language tag 'klingon': not a language tag; nearest valid tags: "
         "tlh (Klingon)"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa",
          "entries": [{"id": "a", "source": "x", "reference": "y"}, {"id": "a", "source": "x", "reference": "z"}]},
         "corpus.json: corpus.entries[1].id (id 'a'): duplicate entry id"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa", "entries": [{"source": "x", "reference": "y"}]},
         "corpus.json: entries[0]: id: is required"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa", "entries": [{"id": "a", "source": "x", "reference": 3}]},
         "corpus.json: entries[0] (id 'a'): reference: must be a string"),
    ],
)
def test_cli_corpus_errors(cli, stack, tmp_path, corpus, expected):
    assert expected in invalid_input_line(cli("evaluate", *write_run(tmp_path, corpus=corpus),
                                              "--gateway", stack.gateway_address))


@pytest.mark.parametrize(
    "corpus, expected",
    [
        # str() used to make these the ids "[1, 2]" and "7".
        ({"id": [1, 2], "source_lang": "eng", "target_lang": "spa",
          "entries": [{"id": "a", "source": "x", "reference": "y"}]}, "corpus.json: id: must be a string, got list"),
        ({"id": 7, "source_lang": "eng", "target_lang": "spa",
          "entries": [{"id": "a", "source": "x", "reference": "y"}]}, "corpus.json: id: must be a string, got int"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa", "entries": [{"id": 7, "source": "x", "reference": "y"}]},
         "corpus.json: entries[0]: id: must be a string, got int"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa",
          "entries": [{"id": "a", "source": "x", "reference": "y", "morphology": {"word": "y"}}]},
         "corpus.json: entries[0] (id 'a'): morphology: must be a list, got dict"),
        ({"id": "t", "source_lang": "eng", "target_lang": "spa",
          "entries": [{"id": "a", "source": "x", "reference": "y", "terms": "x=y"}]},
         "corpus.json: entries[0] (id 'a'): terms: must be a list, got str"),
    ],
)
def test_cli_fields_of_the_wrong_json_type(cli, stack, tmp_path, corpus, expected):
    assert invalid_input_line(cli("evaluate", *write_run(tmp_path, corpus=corpus), "--gateway",
                                  stack.gateway_address)) == f"champollion: error: {tmp_path}/{expected}\n"


def test_cli_morphology_word_must_not_be_empty(cli, stack, tmp_path):
    """The gateway's rule (the RPC's test: test_rpc_names_field_and_entry), located in the corpus file."""
    corpus = {"id": "t", "source_lang": "eng", "target_lang": "spa",
              "entries": [{"id": "a", "source": "Hello", "reference": "Hola", "morphology": [{"word": ""}]}]}
    assert "corpus.json: corpus.entries[0].morphology[0].word (id 'a'): must be a non-empty string" \
        in invalid_input_line(cli("evaluate", *write_run(tmp_path, corpus=corpus), "--gateway", stack.gateway_address))
    corpus["entries"][0]["morphology"] = [{"features": ["+N"]}]  # no word at all: refused as the file is read
    assert "corpus.json: entries[0] (id 'a'): morphology[0]: word: is required" \
        in invalid_input_line(cli("evaluate", *write_run(tmp_path, corpus=corpus), "--gateway", stack.gateway_address))


def test_cli_bare_entry_list_needs_languages(cli, stack, tmp_path):
    corpus_path, predictions_path = write_run(tmp_path, corpus=[{"id": "a", "source": "Hello", "reference": "Hola"}])
    result = cli("evaluate", corpus_path, predictions_path, "--gateway", stack.gateway_address)
    assert result.exit_code == 2 and "--source-lang" in result.stderr
    result = cli("evaluate", corpus_path, predictions_path, "--source-lang", "eng", "--target-lang", "es",
                 "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["scores"]["exact_match_rate"] == 1.0


# --- issue 15: every bad input is exit 2 / INVALID_ARGUMENT, never a traceback ---

def write_corpus_bytes(tmp_path, data: bytes) -> tuple[str, str]:
    corpus_path, predictions_path = write_run(tmp_path)
    (tmp_path / "corpus.json").write_bytes(data)
    return corpus_path, predictions_path


def one_entry_corpus(**entry) -> dict:
    return {"id": "t", "source_lang": "eng", "target_lang": "spa",
            "entries": [{"id": "a", "source": "Hello", "reference": "Hola", **entry}]}


@pytest.mark.parametrize(
    "corpus, expected",
    [
        (one_entry_corpus(difficulty=2**70),
         "corpus.json: entries[0].difficulty: 1180591620717411303424 is outside the range of a 64-bit integer"),
        (one_entry_corpus(difficulty=2**40), "corpus.json: entries[0] (id 'a'): difficulty: 1099511627776 "
                                             "is outside the range -2147483648 to 2147483647"),
        ({**one_entry_corpus(), "source_lang": 42}, "corpus.json: source_lang: must be a string, got int"),
        (one_entry_corpus(source="\ud800x"), "corpus.json: entries[0].source: a lone surrogate"),
        (one_entry_corpus(provenance={"pages": 2**64}),
         "corpus.json: entries[0].provenance.pages: 18446744073709551616 is outside the range of a 64-bit integer"),
    ],
)
def test_cli_values_json_allows_but_a_run_cannot_carry(cli, stack, tmp_path, corpus, expected):
    assert expected in invalid_input_line(cli("evaluate", *write_run(tmp_path, corpus=corpus),
                                              "--gateway", stack.gateway_address))


def test_cli_usage_outside_int64(cli, stack, tmp_path):
    line = '{"id": "a", "prediction": "Hola", "usage": {"prompt_tokens": %d}}' % 2**70
    assert "predictions.jsonl:1: usage.prompt_tokens: 1180591620717411303424 is outside the range of a 64-bit" \
        in invalid_input_line(cli("evaluate", *write_run(tmp_path, prediction_lines=[line]),
                                  "--gateway", stack.gateway_address))


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--seed", str(2**70)], "--seed: must be a whole number from 0 to 9223372036854775807"),
        (["--seed", "-1"], "--seed: must be a whole number from 0"),
        (["--resamples", "1000000"], "--resamples: must be a whole number from 0 to 100000"),
        (["--batch-size", str(2**40)], "--batch-size: must be a whole number from 0 to 2147483647"),
    ],
)
def test_cli_run_options_are_named_by_their_flags(cli, stack, tmp_path, flags, expected):
    assert expected in invalid_input_line(cli("evaluate", *write_run(tmp_path), *flags,
                                              "--gateway", stack.gateway_address))


def test_cli_invalid_utf8_names_the_byte_offset(cli, stack, tmp_path):
    corpus_path, predictions_path = write_run(tmp_path)
    data = b'{"id": "a", "prediction": "Hola"}\n{"id": "b", "prediction": "Adi\xf3s"}\n'
    (tmp_path / "predictions.jsonl").write_bytes(data)
    assert f"predictions.jsonl:2: not UTF-8 text: byte offset {data.index(0xf3)}" in invalid_input_line(
        cli("evaluate", corpus_path, predictions_path, "--gateway", stack.gateway_address))
    write_corpus_bytes(tmp_path, b'{"id": "t", "entries": [\xff]}')
    assert "corpus.json: not UTF-8 text: byte offset 24" in invalid_input_line(
        cli("evaluate", corpus_path, predictions_path, "--gateway", stack.gateway_address))


def test_cli_lone_surrogate_in_a_prediction(cli, stack, tmp_path):
    assert "predictions.jsonl:1: prediction: a lone surrogate '\\udc00'" in invalid_input_line(cli(
        "evaluate", *write_run(tmp_path, prediction_lines=['{"id": "a", "prediction": "Hola \\udc00"}']),
        "--gateway", stack.gateway_address))


@pytest.mark.parametrize("depth", [65, 100_000])
def test_cli_deep_json_is_refused(cli, stack, tmp_path, depth):
    corpus_path, predictions_path = write_run(tmp_path)
    (tmp_path / "predictions.jsonl").write_text('{"id": "a", "prediction": "Hola", "x": ' + "[" * depth
                                                 + "]" * depth + "}\n", encoding="utf-8")
    assert "predictions.jsonl:1: " in invalid_input_line(
        cli("evaluate", corpus_path, predictions_path, "--gateway", stack.gateway_address))


def test_cli_accepts_a_utf8_byte_order_mark(cli, stack, tmp_path):
    corpus_path, predictions_path = write_run(tmp_path)
    for path in (tmp_path / "corpus.json", tmp_path / "predictions.jsonl"):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = cli("evaluate", corpus_path, predictions_path, "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["scores"]["total"] == 2


def test_rpc_undecodable_request_is_invalid_argument(stack):
    with grpc.insecure_channel(stack.gateway_address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary("/champollion.eval.v1.Gateway/Evaluate")(b"\x0a\xff\xff", timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid protobuf message" in caught.value.details()


def test_rpc_struct_nested_150_deep_is_invalid_argument(gateway):
    request = make_request(ENTRIES, [{"id": "a", "prediction": "Hola"}])
    value = struct_pb2.Value(number_value=1)
    for _ in range(150):
        outer = struct_pb2.Value()
        outer.struct_value.fields["x"].CopyFrom(value)
        value = outer
    request.predictions[0].provider_usage.fields["x"].CopyFrom(value)
    assert "nested more than 100 levels deep" in rejected(gateway, request)


def test_rpc_token_sums_past_int64_are_refused_before_scoring(gateway):
    request = make_request(ENTRIES, [{"id": "a", "prediction": "Hola"}, {"id": "b", "prediction": "Adiós"}])
    for prediction in request.predictions:
        prediction.usage.prompt_tokens = 2**63 - 10
    assert ("predictions[1].usage.prompt_tokens (id 'b'): the run's total would pass 9223372036854775807"
            in rejected(gateway, request))


def test_rpc_negative_seed_is_invalid_argument(gateway):
    request = make_request(ENTRIES)
    request.options.seed = -1
    assert "options.seed: must not be negative, got -1" in rejected(gateway, request)


def test_rpc_huge_language_code_and_id_are_echoed_cut(gateway):
    details = rejected(gateway, make_request(ENTRIES, target_lang="x" * 2**20))
    assert details.startswith("corpus.target_lang: a language code of 1048576 characters (at most 32)")
    assert len(details) < 200
    details = rejected(gateway, make_request([{"id": "i" * 2**19, "reference": "Hola"}]))
    assert details.startswith("corpus.entries[0].id (id 'iiii") and "an id of 524288 characters (at most 256)" in details
    assert len(details) < 200
