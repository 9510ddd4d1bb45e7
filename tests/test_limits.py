"""Bounded cost per input (issue 15): texts, tokens, ids and language codes
past their limits are refused at once with INVALID_ARGUMENT naming the field
and entry; a text at the limit is scored. A family called straight, not
through the gateway, holds a batch to the same per-text limits (issue 23)."""
from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from apps.launch.embedded import start_family
from champollion.core.limits import DEFAULT_MAX_TEXT_CHARS, MAX_REFERENCES, MAX_TOKEN_CHARS, shown
from champollion.eval.v1 import family_pb2, family_pb2_grpc
from services.registry import IMPLEMENTED
from tests.conftest import evaluate, make_request

ENTRIES = [{"id": "a", "reference": "Hola"}]


def refused(gateway, request) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        gateway.Evaluate(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details()


def words(chars: int) -> str:
    return ("guardar los cambios " * (chars // 20 + 1))[:chars]


def test_a_5_mb_prediction_is_refused_in_under_a_second(gateway):
    request = make_request(ENTRIES, [{"id": "a", "prediction": words(5_000_000)}])
    started = time.perf_counter()
    details = refused(gateway, request)
    assert time.perf_counter() - started < 1
    assert details == f"predictions[0].prediction (id 'a'): a text of 5000000 characters (at most {DEFAULT_MAX_TEXT_CHARS})"


@pytest.mark.parametrize("field", ["source", "reference"])
def test_corpus_texts_over_the_limit(gateway, field):
    entry = {"id": "a", "reference": "Hola", field: words(DEFAULT_MAX_TEXT_CHARS + 1)}
    assert f"corpus.entries[0].{field} (id 'a'): a text of 20001 characters" in refused(gateway, make_request([entry]))


def test_variants_and_raw_predictions_over_the_limit(gateway):
    request = make_request([{"id": "a", "reference": "Hola", "acceptable_variants": ["Hola", words(20_001)]}])
    assert "corpus.entries[0].acceptable_variants[1] (id 'a'): a text of 20001" in refused(gateway, request)
    request = make_request(ENTRIES, [{"id": "a", "prediction": "Hola", "raw_prediction": words(20_001)}])
    assert "predictions[0].raw_prediction (id 'a'): a text of 20001" in refused(gateway, request)


def test_a_token_over_the_limit(gateway):
    request = make_request(ENTRIES, [{"id": "a", "prediction": "Hola " + "x" * (MAX_TOKEN_CHARS + 1)}])
    assert (f"predictions[0].prediction (id 'a'): a token of {MAX_TOKEN_CHARS + 1} characters without whitespace"
            in refused(gateway, request))


def test_a_prediction_at_the_limit_is_scored(gateway, run_card_validator):
    started = time.perf_counter()
    card = evaluate(gateway, make_request(ENTRIES, [{"id": "a", "prediction": words(DEFAULT_MAX_TEXT_CHARS)}]))
    assert time.perf_counter() - started < 30  # measured 2.6 s against `serve` (README "Limits")
    assert card["scores"]["evaluated"] == 1 and card["scores"]["chrf_plus_plus"] is not None
    run_card_validator.validate(card)


def test_echoed_values_are_cut():
    assert shown("x" * 10) == repr("x" * 10)
    assert len(shown("x" * 10**6)) == 80 and shown("x" * 10**6).endswith("...")


# --- a family's own limits (issue 23): any client may call a family ---------------


def score_batch(address: str, *entries: family_pb2.BatchEntry) -> family_pb2.ScoreBatchResponse:
    with grpc.insecure_channel(address) as channel:
        request = family_pb2.ScoreBatchRequest(run_id="straight", source_lang="eng", target_lang="spa", entries=entries)
        return family_pb2_grpc.FamilyStub(channel).ScoreBatch(request, timeout=60)


def family_refused(address: str, *entries: family_pb2.BatchEntry) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        score_batch(address, *entries)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details()


FINE = family_pb2.BatchEntry(id="a", source="Save the changes", reference="Guardar los cambios",
                             prediction="Guardar los cambios")


@pytest.mark.parametrize("family", IMPLEMENTED)
def test_a_family_refuses_a_5_mb_text_sent_straight_to_it_and_stays_up(stack, family):
    """Measured before: a 5 MB text cost the semantic family 7.5 s and 3.5 GB."""
    address = stack.family_addresses[family]
    huge = family_pb2.BatchEntry(id="b", source="Save", reference="Guardar", prediction=words(5_000_000))
    started = time.perf_counter()
    details = family_refused(address, FINE, huge)
    assert time.perf_counter() - started < 1
    assert details == f"entries[1].prediction (id 'b'): a text of 5000000 characters (at most {DEFAULT_MAX_TEXT_CHARS})"
    answer = score_batch(address, FINE)
    assert [entry.id for entry in answer.entries] == ["a"]


@pytest.mark.parametrize("change, expected", [
    ({"source": words(DEFAULT_MAX_TEXT_CHARS + 1)}, "entries[0].source (id 'a'): a text of 20001 characters"),
    ({"raw_prediction": words(DEFAULT_MAX_TEXT_CHARS + 1)}, "entries[0].raw_prediction (id 'a'): a text of 20001"),
    ({"acceptable_variants": ["Hola", "x" * (MAX_TOKEN_CHARS + 1)]},
     f"entries[0].acceptable_variants[1] (id 'a'): a token of {MAX_TOKEN_CHARS + 1} characters without whitespace"),
    ({"extra_references": ["Hola", words(DEFAULT_MAX_TEXT_CHARS + 1)]},
     "entries[0].extra_references[1] (id 'a'): a text of 20001"),
    ({"extra_references": ["Hola"] * MAX_REFERENCES},
     f"entries[0].extra_references (id 'a'): {MAX_REFERENCES + 1} references (at most {MAX_REFERENCES} per entry"),
])
def test_a_family_checks_every_text_as_the_gateway_does(stack, change, expected):
    entry = family_pb2.BatchEntry()
    entry.CopyFrom(FINE)
    for name, value in change.items():
        if isinstance(value, list):
            getattr(entry, name).extend(value)
        else:
            setattr(entry, name, value)
    assert expected in family_refused(stack.family_addresses["surface"], entry)


def test_a_family_takes_its_limit_from_its_servicer():
    """`serve --max-text-chars` reaches the servicer so (tests/test_serve_options.py)."""

    async def check():
        server, port = await start_family("surface", "127.0.0.1:0", max_text_chars=20)
        try:
            address = f"127.0.0.1:{port}"
            at_limit = family_pb2.BatchEntry(id="a", source="Save", reference="Guardar", prediction="x" * 20)
            over = family_pb2.BatchEntry(id="b", source="Save", reference="Guardar", prediction="x" * 21)
            assert len((await asyncio.to_thread(score_batch, address, at_limit)).entries) == 1
            details = await asyncio.to_thread(family_refused, address, over)
            assert details == "entries[0].prediction (id 'b'): a text of 21 characters (at most 20)"
        finally:
            await server.stop(None)

    asyncio.run(check())


def test_a_token_as_long_as_the_limit_passes_and_one_character_more_does_not():
    """check_text reads the tokens only of texts longer than a token may be."""
    from champollion.core.limits import InvalidField, check_text

    check_text("x" * MAX_TOKEN_CHARS, "source", "a", DEFAULT_MAX_TEXT_CHARS)
    check_text(" ".join(["x" * MAX_TOKEN_CHARS] * 3), "source", "a", DEFAULT_MAX_TEXT_CHARS)
    for text in ("x" * (MAX_TOKEN_CHARS + 1), "a " + "x" * (MAX_TOKEN_CHARS + 1) + " b"):
        with pytest.raises(InvalidField, match=f"a token of {MAX_TOKEN_CHARS + 1} characters"):
            check_text(text, "source", "a", DEFAULT_MAX_TEXT_CHARS)
