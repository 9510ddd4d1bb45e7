"""Several references per entry, end to end: validation, the family
requests, the corpus version and entry fingerprints, a run through the
gateway, and a registered holdout corpus whose extra references never leave
the gateway."""
from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from pathlib import Path

import grpc
import pytest

from champollion.core.cards import CardRegistry
from champollion.eval.v1 import family_pb2, gateway_pb2
from apps.inputs import PredictionFile, build_request
from apps.client.upload import corpus_parts
from gateway.card.identity import corpus_version, entry_fingerprint, version_reference
from champollion.core.run_card import run_card_from_proto
from gateway.server.corpora import entry_dict
from gateway.server.intake import RunIntake
from gateway.server.spill import RunSpill
from champollion.core.limits import MAX_REFERENCES
from gateway.server.validation import InvalidRun, check_entry
from gateway.store import RunStore, default_store_url
from services.conversions import entries_from_request
from tests.conftest import EXAMPLE, evaluate, make_request

CARDS = CardRegistry(Path(__file__).resolve().parent.parent / "language_cards")

# Each prediction is one of its entry's references, not always the primary:
# against all references every output is perfect; against the primary alone
# it is not.
ENTRIES = [
    {"id": "m1", "source": "Save changes", "reference": "Guardar cambios",
     "extra_references": ["Guarda los cambios", "Salvar cambios"]},
    {"id": "m2", "source": "The weather is nice today", "reference": "Hoy hace buen tiempo",
     "extra_references": ["El tiempo es agradable hoy"]},
    {"id": "m3", "source": "Close the door, please", "reference": "Cierra la puerta, por favor",
     "extra_references": ["Por favor, cierre la puerta"]},
    {"id": "m4", "source": "Where is the station?", "reference": "¿Dónde está la estación?"},
]
PREDICTIONS = [
    {"id": "m1", "prediction": "Salvar cambios"},
    {"id": "m2", "prediction": "El tiempo es agradable hoy"},
    {"id": "m3", "prediction": "Cierra la puerta, por favor"},
    {"id": "m4", "prediction": "¿Dónde está la estación?"},
]


def documented_version(pairs) -> str:
    """SPEC §9's corpus version, written out: SHA-256 of the canonical JSON of
    the [id, reference] pairs sorted by id."""
    canonical = json.dumps(sorted([list(pair) for pair in pairs]), ensure_ascii=False, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def entry_message(**fields) -> gateway_pb2.CorpusEntry:
    return gateway_pb2.CorpusEntry(**{"id": "e1", "source": "Hello", "reference": "Hola", **fields})


# --- validation ------------------------------------------------------------------

@pytest.mark.parametrize("extra, field, message", [
    (["Buenas", "  "], "corpus.entries[3].references[2]",
     "must be a non-empty string (the message's extra_references[1])"),
    (["x" * 60], "corpus.entries[3].references[1]", "a text of 60 characters (at most 50)"),
    (["Hola"] * MAX_REFERENCES, "corpus.entries[3].extra_references",
     f"{MAX_REFERENCES + 1} references (at most {MAX_REFERENCES} per entry, the primary included)"),
])
def test_each_reference_is_checked_as_the_primary_is(extra, field, message):
    with pytest.raises(InvalidRun) as raised:
        check_entry(entry_message(extra_references=extra), 3, max_text_chars=50)
    assert (raised.value.field, raised.value.entry_id, raised.value.message) == (field, "e1", message)
    check_entry(entry_message(extra_references=["Buenas", "Qué tal"]), 3, max_text_chars=50)


def test_the_gateway_refuses_an_empty_extra_reference(gateway):
    entries = [dict(ENTRIES[0], extra_references=["Guarda los cambios", ""]), *ENTRIES[1:]]
    with pytest.raises(grpc.RpcError) as raised:
        gateway.Evaluate(make_request(entries, PREDICTIONS), timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == ("corpus.entries[0].references[2] (id 'm1'): must be a non-empty string "
                                      "(the message's extra_references[1])")


# --- what the families are sent ------------------------------------------------

def test_family_batches_carry_every_reference_to_the_family_side():
    request = make_request(ENTRIES, PREDICTIONS)

    async def batches():
        async def no_more_parts():
            return
            yield

        with RunSpill() as spill:
            intake = RunIntake(request, CARDS, spill)
            found = [batch async for batch in intake.batches(no_more_parts(), "run", batch_size=3)]
            return found, spill.corpus_version()

    sent, spill_version = asyncio.run(batches())
    assert [len(batch.entries) for batch in sent] == [3, 1]
    entries = [entry for batch in sent for entry in batch.entries]
    assert [list(entry.extra_references) for entry in entries] == [e.get("extra_references", []) for e in ENTRIES]
    # The family's side reads them into EntryInput.references, primary first.
    inputs = entries_from_request(family_pb2.ScoreBatchRequest(entries=entries))
    assert [entry.references for entry in inputs] == \
        [(e["reference"], *e.get("extra_references", ())) for e in ENTRIES]
    # The run's corpus version (hashed from the spill) is the identity one.
    assert spill_version == corpus_version(
        (e["id"], version_reference(e["reference"], e.get("extra_references", ()))) for e in ENTRIES)


# --- corpus version and entry fingerprints ---------------------------------------

def test_a_single_reference_corpus_keeps_its_version_and_fingerprints():
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    pairs = [(e["id"], e["reference"]) for e in corpus["entries"]]
    assert corpus_version((i, version_reference(r)) for i, r in pairs) == documented_version(pairs)
    # The example's version as README's leaderboard shows it.
    assert documented_version(pairs).startswith("e5aeef2f4a37")
    assert entry_fingerprint("Hi  there", "Hola") == \
        hashlib.sha256(b"Hi there\nHola").hexdigest()[:16]


def test_the_version_covers_every_reference_in_order():
    single = [("a", "Hola"), ("b", "Adiós")]
    versions = {
        corpus_version(single),
        corpus_version([("a", version_reference("Hola", ["Buenas"])), ("b", "Adiós")]),
        corpus_version([("a", version_reference("Hola", ["Buenos días"])), ("b", "Adiós")]),
        corpus_version([("a", version_reference("Buenas", ["Hola"])), ("b", "Adiós")]),
    }
    assert len(versions) == 4
    fingerprints = {entry_fingerprint("Hi", "Hola"), entry_fingerprint("Hi", "Hola", ["Buenas"]),
                    entry_fingerprint("Hi", "Hola", ["Buenos días"])}
    assert len(fingerprints) == 3


# --- through the gateway ---------------------------------------------------------

def test_a_run_is_scored_against_every_reference(gateway, run_card_validator):
    card = evaluate(gateway, make_request(ENTRIES, PREDICTIONS))
    run_card_validator.validate(card)
    expected_version = documented_version(
        (e["id"], e["reference"] if "extra_references" not in e else
         json.dumps([e["reference"], *e["extra_references"]], ensure_ascii=False, separators=(",", ":")))
        for e in ENTRIES)
    assert card["dataset"]["version"] == expected_version
    scores = card["scores"]
    # Exact match is against the primary reference: m3 and m4.
    assert scores["exact_match_rate"] == pytest.approx(0.5)
    # Corpus BLEU, chrF++ and TER use every reference: each output is one.
    assert (scores["bleu"], scores["chrf_plus_plus"], scores["ter"]) == \
        (pytest.approx(100.0), pytest.approx(100.0), pytest.approx(0.0))


def test_a_registered_holdout_corpus_keeps_its_extra_references_in_the_gateway(gateway, run_card_validator):
    corpus = make_request(ENTRIES, PREDICTIONS).corpus
    corpus.id = f"multi-ref-{uuid.uuid4().hex[:8]}"  # the session's store is shared
    info = gateway.RegisterCorpus(corpus_parts(corpus, "holdout", accept_check_failures="test corpus"), timeout=60)
    client_sent = evaluate(gateway, make_request(ENTRIES, PREDICTIONS))
    assert info.version == client_sent["dataset"]["version"]

    extra = {text for entry in ENTRIES for text in entry.get("extra_references", ())}
    predicted = {p["prediction"] for p in PREDICTIONS}
    secret = extra - predicted  # what only the corpus holds

    predictions = PredictionFile(Path("predictions.jsonl"), [gateway_pb2.Prediction(**p) for p in PREDICTIONS])
    response = gateway.Evaluate(build_request(gateway_pb2.CorpusRef(id=corpus.id), predictions), timeout=120)
    card = run_card_from_proto(response.run_card)
    run_card_validator.validate(card)
    assert card["entries"] == [] and card["dataset"]["tier"] == "holdout"
    assert card["dataset"]["version"] == info.version
    assert card["scores"]["bleu"] == client_sent["scores"]["bleu"]
    parts = list(gateway.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus.id), timeout=60))
    wire = response.SerializeToString() + b"".join(part.SerializeToString() for part in parts)
    assert secret and [text for text in secret if text.encode("utf-8") in wire] == []
    assert [entry.source for part in parts for entry in part.entries] == [e["source"] for e in ENTRIES]

    # The store keeps them, and the fingerprints cover them.
    store = RunStore.open(default_store_url())
    try:
        stored = [entry for batch in store.corpus_entries(corpus.id, info.version) for entry in batch]
        fingerprints = store.entry_fingerprints(corpus.id, info.version)
    finally:
        store.close()
    assert stored == [entry_dict(entry) for entry in corpus.entries]
    assert fingerprints["m1"] == entry_fingerprint(ENTRIES[0]["source"], ENTRIES[0]["reference"],
                                                   ENTRIES[0]["extra_references"])
    assert fingerprints["m4"] == entry_fingerprint(ENTRIES[3]["source"], ENTRIES[3]["reference"])
