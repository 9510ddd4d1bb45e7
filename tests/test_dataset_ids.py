"""Dataset ids (issue 33 finding 9): a client corpus whose id differed from a
registered one by a Cyrillic letter, a trailing space or ZWSP, or case was
accepted and listed beside the real board under a name that reads the same;
an id with '/' was accepted but its board was a 404. A dataset id now takes
letters, digits, '.', '_' and '-' (gateway/server/validation.py), and a
client-sent id whose confusable skeleton or case-folded form is a
registered id's is refused (gateway/server/registered.py)."""
from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest

from champollion.core.skeleton import identifier_skeleton
from gateway.server.registered import refuse_registered_id
from gateway.server.validation import InvalidRun, check_dataset_id
from tests.conftest import evaluate, make_request
from tests.test_corpora import example_corpus, registered_parts

ENTRIES = [{"id": "e1", "source": "Save changes", "reference": "Guardar cambios"}]


def _request(corpus_id: str):
    request = make_request(ENTRIES)
    request.corpus.id = corpus_id
    return request


def _refusal(gateway, corpus_id: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        gateway.Evaluate(_request(corpus_id), timeout=60)
    return raised.value


@pytest.mark.parametrize("corpus_id", ["test", "wmt21-ende-refC", "champollion-example-eng-spa", "a.b_c-9", "X"])
def test_the_ids_in_use_stay_valid(corpus_id):
    check_dataset_id(corpus_id, "corpus.id")


@pytest.mark.parametrize("corpus_id, character", [
    ("wmt21-ende-rеfC", "U+0435 CYRILLIC SMALL LETTER IE"),
    ("wmt21-ende-refC ", "U+0020 SPACE"),
    (" wmt21-ende-refC", "U+0020 SPACE"),
    ("wmt21-ende-refC\u200b", "U+200B ZERO WIDTH SPACE"),
    ("wmt21\u3164ende", "U+3164 HANGUL FILLER"),
    ("wmt21/ende", "U+002F SOLIDUS"),
    ("../boards", "U+002E FULL STOP"),
    ("-rf", "U+002D HYPHEN-MINUS"),
    ("ｔｅｓｔ", "U+FF54 FULLWIDTH LATIN SMALL LETTER T"),
])
def test_an_id_outside_the_safe_characters_is_refused_naming_the_field(gateway, corpus_id, character):
    refused = _refusal(gateway, corpus_id)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details().startswith("corpus.id: ")
    assert character in refused.details()


def test_too_long_an_id_is_refused():
    with pytest.raises(InvalidRun) as raised:
        check_dataset_id("x" * 257, "corpus.id")
    assert raised.value.field == "corpus.id"


def test_look_alike_skeletons():
    real = "wmt21-ende-refC"
    for look_alike in ("WMT21-ENDE-REFC", "wmt2l-ende-refC", "wrnt21-ende-refC",
                       "wmt21-ende-rеfC", "wmt2I-ende-refC"):
        assert identifier_skeleton(look_alike) == identifier_skeleton(real), look_alike
    for other in ("wmt22-ende-refC", "wmt21-ende-refD", "wmt21.ende.refC"):
        assert identifier_skeleton(other) != identifier_skeleton(real), other


def test_a_look_alike_of_a_registered_id_is_refused(gateway, run_card_validator):
    corpus = example_corpus()
    suffix = uuid.uuid4().hex[:6].replace("1", "x").replace("0", "y")
    corpus["id"] = f"wmt21-ende-{suffix}"
    gateway.RegisterCorpus(registered_parts(corpus, "dev"), timeout=60)
    for look_alike in (corpus["id"].upper(), corpus["id"].replace("1", "l"), corpus["id"].replace("m", "rn")):
        refused = _refusal(gateway, look_alike)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, look_alike
        assert refused.details() == (
            f"corpus.id: {look_alike!r} looks like the id of registered corpus {corpus['id']!r} (the same letters "
            f"once look-alike characters and case are folded): give this corpus an id that reads differently")
    exact = _refusal(gateway, corpus["id"])
    assert "is the id of a registered (dev) corpus" in exact.details()
    card = evaluate(gateway, _request(f"wmt22-ende-{suffix}"))  # another id altogether
    run_card_validator.validate(card)
    assert card["dataset"]["id"] == f"wmt22-ende-{suffix}"


class _Store:
    """What refuse_registered_id asks of the gateway's store."""

    def __init__(self, corpora):
        self._corpora = corpora

    async def call(self, use):
        return use(self)

    def list_corpora(self):
        return self._corpora


@pytest.mark.parametrize("role, named", [("submitter", False), (None, False), ("maintainer", True)])
def test_a_gold_look_alike_is_named_only_to_maintainers(role, named):
    store = _Store([{"id": "secret-gold", "tier": "holdout"}, {"id": "secret-gold", "tier": "gold"},
                    {"id": "open-dev", "tier": "dev"}])
    with pytest.raises(InvalidRun) as raised:
        asyncio.run(refuse_registered_id(_request("SECRET-GOLD"), store, role))
    assert ("'secret-gold'" in str(raised.value)) is named
    with pytest.raises(InvalidRun) as raised:
        asyncio.run(refuse_registered_id(_request("Open-Dev"), store, role))
    assert "registered corpus 'open-dev'" in str(raised.value)
    asyncio.run(refuse_registered_id(_request("another"), store, role))
