"""Provider usage objects (OpenAI, Anthropic, Gemini, the flat form) read into
the spec's token fields (SPEC §6.1), through the gateway and through the
CLI's JSONL reader; unknown shapes warned about; bad counts refused."""
import json

import grpc
import pytest

from champollion.eval.v1 import gateway_pb2
from champollion.core.usage import UsageValueError, read_usage
from tests.conftest import evaluate, make_request, run_cli

ENTRY = {"id": "a", "source": "Save changes", "reference": "Guardar cambios"}
PRICING = {"prompt_per_1m": 2.0, "completion_per_1m": 8.0, "cached_per_1m": 0.5}

OPENAI = {
    "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0,
                                  "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
}
OPENAI_RESPONSES = {
    "input_tokens": 300, "input_tokens_details": {"cached_tokens": 128},
    "output_tokens": 90, "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 390,
}
ANTHROPIC = {
    "input_tokens": 50, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000, "output_tokens": 120,
    "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 0}, "service_tier": "standard",
}
GEMINI_FIELDS = {
    "promptTokenCount": 900, "candidatesTokenCount": 80, "thoughtsTokenCount": 400,
    "cachedContentTokenCount": 512, "totalTokenCount": 1380,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 900}],
}
FLAT = {"prompt_tokens": 112, "completion_tokens": 19, "reasoning_tokens": 3, "cached_tokens": 64}

# Shape -> (usage object, expected prompt, completion, reasoning, cached),
# worked out by hand from each provider's documented meaning.
SHAPES = {
    "openai": (OPENAI, (1200, 300, 192, 1024)),
    "openai-responses": (OPENAI_RESPONSES, (300, 90, 64, 128)),
    # prompt = input + cache read + cache creation; no separate thinking count.
    "anthropic": (ANTHROPIC, (1250, 120, None, 1000)),
    # completion = candidates + thoughts.
    "gemini-wrapped": ({"usageMetadata": GEMINI_FIELDS}, (900, 480, 400, 512)),
    "gemini-top-level": (GEMINI_FIELDS, (900, 480, 400, 512)),
    "flat": (FLAT, (112, 19, 3, 64)),
}
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def expected_totals(*counts: tuple) -> dict:
    """Sums of the expected counts (None where no entry gave one)."""
    totals = {}
    for position, key in enumerate(TOKEN_KEYS):
        given = [c[position] for c in counts if c[position] is not None]
        totals[key] = sum(given) if given else None
    return totals


def priced(prompt, completion, reasoning, cached) -> float:
    """Cached tokens at cached_per_1m, the rest of the prompt at
    prompt_per_1m; reasoning is inside completion."""
    return ((prompt - cached) * PRICING["prompt_per_1m"] + cached * PRICING["cached_per_1m"]
            + completion * PRICING["completion_per_1m"]) / 1e6


def provider_request(entries: list[dict], usages: list[dict], pricing: dict | None = PRICING):
    """A request whose predictions carry the usage objects as providers send them."""
    predictions = [{"id": e["id"], "prediction": e["reference"]} for e in entries]
    request = make_request(entries, predictions, meta={"pricing": gateway_pb2.Pricing(**pricing)} if pricing else None)
    for prediction, usage in zip(request.predictions, usages):
        prediction.provider_usage.update(usage)
    return request


def rejected(gateway, request) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        gateway.Evaluate(request, timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details()


# --- the mapping on its own -------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_reads_into_the_spec_fields(shape):
    usage, expected = SHAPES[shape]
    reading = read_usage(usage)
    assert reading.counts == {k: v for k, v in zip(TOKEN_KEYS, expected) if v is not None}
    assert reading.unrecognised == ()


def test_unknown_keys_of_a_known_shape_are_reported_not_dropped():
    reading = read_usage({"usageMetadata": {**GEMINI_FIELDS, "toolUsePromptTokenCount": 30}, "modelVersion": "x"})
    assert reading.counts["prompt_tokens"] == 900
    assert reading.unrecognised == ("modelVersion", "usageMetadata.toolUsePromptTokenCount")


def test_an_unknown_shape_has_no_counts():
    reading = read_usage({"tokens_in": 5, "tokens_out": 3})
    assert reading.counts is None and reading.unrecognised == ("tokens_in", "tokens_out")


@pytest.mark.parametrize(
    "usage, key, message",
    [
        ({"input_tokens": -3, "output_tokens": 2}, "input_tokens", "must not be negative, got -3"),
        ({"prompt_tokens": 1.5}, "prompt_tokens", "must be an integer, got 1.5"),
        ({"usageMetadata": {"promptTokenCount": "many"}}, "usageMetadata.promptTokenCount", "must be an integer, got string"),
        ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": True}},
         "prompt_tokens_details.cached_tokens", "must be an integer, got boolean"),
        ({"prompt_tokens": 9, "prompt_tokens_details": 4}, "prompt_tokens_details", "must be an object, got int"),
        ({"cached_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}, "cached_tokens",
         "is 3 but prompt_tokens_details.cached_tokens is 4"),
    ],
)
def test_bad_counts_name_their_key(usage, key, message):
    with pytest.raises(UsageValueError) as caught:
        read_usage(usage)
    assert caught.value.key == key and message in caught.value.message


# --- through the gateway ----------------------------------------------------

@pytest.mark.parametrize("shape", ["openai", "anthropic", "gemini-wrapped", "gemini-top-level"])
def test_gateway_totals_and_cost_for_each_provider(gateway, run_card_validator, shape):
    usage, expected = SHAPES[shape]
    card = evaluate(gateway, provider_request([ENTRY], [usage]))
    run_card_validator.validate(card)
    totals = card["totals"]
    assert {key: totals[key] for key in TOKEN_KEYS} == expected_totals(expected)
    assert totals["total_tokens"] == expected[0] + expected[1]
    assert totals["total_cost_usd"] == pytest.approx(priced(*expected))
    assert not any("usage" in warning for warning in card["warnings"])


def test_gateway_mixed_shapes_in_one_run(gateway):
    entries = [{**ENTRY, "id": f"e{i}"} for i in range(4)]
    shapes = ["openai", "anthropic", "gemini-wrapped"]
    request = provider_request(entries, [SHAPES[shape][0] for shape in shapes])
    # The fourth entry sends the flat form in the proto's own Usage.
    request.predictions[3].usage.CopyFrom(gateway_pb2.Usage(**FLAT))
    card = evaluate(gateway, request)
    counts = [SHAPES[shape][1] for shape in shapes + ["flat"]]
    assert {key: card["totals"][key] for key in TOKEN_KEYS} == expected_totals(*counts)
    assert card["totals"]["total_cost_usd"] == pytest.approx(sum(priced(*c[:2], c[2] or 0, c[3]) for c in counts))


def test_gateway_warns_about_an_unknown_shape_and_uncounted_keys(gateway):
    entries = [{**ENTRY, "id": f"e{i}"} for i in range(3)]
    usages = [{"tokens_in": 5, "tokens_out": 3}, {"usageMetadata": {**GEMINI_FIELDS, "toolUsePromptTokenCount": 30}}, FLAT]
    card = evaluate(gateway, provider_request(entries, usages, pricing=None))
    warnings = [w for w in card["warnings"] if w.startswith("usage of")]
    assert warnings == [
        "usage of 2 entries had an unrecognised shape: keys tokens_in, tokens_out, "
        "usageMetadata.toolUsePromptTokenCount were not counted in the token totals"
    ]
    # The unknown object counts nothing: totals cover the two others, and say so.
    assert card["totals"]["prompt_tokens"] == 900 + 112
    assert any("token usage reported for 2 of 3 entries" in w for w in card["warnings"])


@pytest.mark.parametrize(
    "usage, expected",
    [
        ({"input_tokens": -3, "output_tokens": 2}, "predictions[0].usage.input_tokens (id 'a'): must not be negative"),
        ({"usageMetadata": {"promptTokenCount": "many"}},
         "predictions[0].usage.usageMetadata.promptTokenCount (id 'a'): must be an integer, got string"),
        ({"prompt_tokens": 10, "completion_tokens_details": {"reasoning_tokens": 2.5}},
         "predictions[0].usage.completion_tokens_details.reasoning_tokens (id 'a'): must be an integer"),
    ],
)
def test_gateway_refuses_bad_counts_naming_field_and_entry(gateway, usage, expected):
    assert expected in rejected(gateway, provider_request([ENTRY], [usage]))


def test_gateway_refuses_usage_and_provider_usage_together(gateway):
    request = provider_request([ENTRY], [OPENAI])
    request.predictions[0].usage.prompt_tokens = 5
    assert "predictions[0].provider_usage (id 'a'): send usage or provider_usage, not both" in rejected(gateway, request)


# --- through the CLI's JSONL reader ----------------------------------------

def cli_evaluate(stack, tmp_path, usages: list[dict]) -> tuple[int, dict | None]:
    """`champollion evaluate` in-process against the session's gateway, one
    entry per usage object; returns the exit status and the run card."""
    entries = [{**ENTRY, "id": f"e{i}"} for i in range(len(usages))]
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"id": "t", "source_lang": "eng", "target_lang": "spa", "entries": entries}))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(
        json.dumps({"id": e["id"], "prediction": e["reference"], "usage": u}) + "\n" for e, u in zip(entries, usages)
    ))
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"pricing": PRICING}))
    out = tmp_path / "card.json"
    status = run_cli("evaluate", corpus, predictions, "--meta", meta, "--gateway", stack.gateway_address,
                     "--out", out)
    return status, json.loads(out.read_text()) if status == 0 else None


def test_cli_reads_every_shape(stack, tmp_path):
    status, card = cli_evaluate(stack, tmp_path, [usage for usage, _ in SHAPES.values()])
    assert status == 0
    counts = [expected for _, expected in SHAPES.values()]
    assert {key: card["totals"][key] for key in TOKEN_KEYS} == expected_totals(*counts)
    assert card["totals"]["total_cost_usd"] == pytest.approx(sum(priced(*c[:2], c[2] or 0, c[3]) for c in counts))
    assert not any("usage" in warning for warning in card["warnings"])


@pytest.mark.parametrize(
    "usage, expected",
    [
        # A provider's object: refused by the gateway, located by the CLI.
        ({"input_tokens": -3, "output_tokens": 2},
         "predictions.jsonl:1: predictions[0].usage.input_tokens (id 'e0'): must not be negative, got -3"),
        # The flat form keeps the reader's own messages.
        ({"prompt_tokens": "12"}, "predictions.jsonl:1: id 'e0': usage: prompt_tokens: must be an integer, got str"),
    ],
)
def test_cli_bad_counts_exit_2_with_one_line(stack, tmp_path, capsys, usage, expected):
    status, _ = cli_evaluate(stack, tmp_path, [usage])
    message = capsys.readouterr().err.strip()
    assert status == 2
    assert "\n" not in message and message.startswith("champollion: error: ")
    assert expected in message
