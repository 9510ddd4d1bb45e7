"""Bounded cost per input (issue 15): texts, tokens, ids and language codes
past their limits are refused at once with INVALID_ARGUMENT naming the field
and entry; a text at the limit is scored."""
from __future__ import annotations

import time

import grpc
import pytest

from champollion.core.limits import DEFAULT_MAX_TEXT_CHARS, MAX_TOKEN_CHARS, shown
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
