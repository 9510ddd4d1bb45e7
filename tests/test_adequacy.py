"""Adequacy gates (docs/scoring.md, "Adequacy gates"): an output that is not a
translation of its source earns nothing in the composite, whatever its
fluency; the metrics themselves keep their values."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from champollion.core.degenerate import FLOOR_KINDS, SYSTEM_KINDS, floor_outputs, system_outputs
from gateway.card.adequacy import (
    GATES,
    assess,
    family_gates,
    gated_statistics,
    text_gates,
    worst_statistics,
)
from gateway.card.corpus import corpus_value
from tests.conftest import evaluate, make_request

ROOT = Path(__file__).resolve().parents[1]

# Six entries with different sources and references, English -> Spanish.
ENTRIES = [
    {"id": "cat", "source": "The cat sleeps on the sofa every afternoon.",
     "reference": "El gato duerme en el sofá todas las tardes."},
    {"id": "book", "source": "My neighbour reads a long book every evening.",
     "reference": "Mi vecino lee un libro largo todas las noches."},
    {"id": "rain", "source": "It rained all day in the mountains.",
     "reference": "Llovió todo el día en las montañas."},
    {"id": "shop", "source": "The shop on the corner closes at nine.",
     "reference": "La tienda de la esquina cierra a las nueve."},
    {"id": "train", "source": "The train to the city leaves early in the morning.",
     "reference": "El tren a la ciudad sale temprano por la mañana."},
    {"id": "garden", "source": "The children are playing in the garden.",
     "reference": "Los niños están jugando en el jardín."},
]


def predictions(**replaced: str) -> list[dict]:
    """The references as predictions, some replaced by id."""
    return [{"id": e["id"], "prediction": replaced.get(e["id"], e["reference"])} for e in ENTRIES]


def gates_of(card: dict) -> dict[str, set[str]]:
    return {e["id"]: set(e["scores"].get("adequacy_gates", {})) for e in card["entries"]
            if not e["scores"]["adequate"]}


# --- the text gates, alone -------------------------------------------------------------------

def test_no_output_fails_the_empty_gate():
    assert text_gates("A source.", "Una referencia.", "   ").failed == {"empty": "no output"}
    assert text_gates("A source.", "Una referencia.", None).failed == {"empty": "no output"}


def test_the_source_copied_fails_the_copy_gate_unless_the_reference_is_a_copy_too():
    source = "The train to the city leaves early."
    assert "copy" in text_gates(source, "El tren a la ciudad sale temprano.", source).failed
    assert "copy" in text_gates(source, "El tren a la ciudad sale temprano.", source.upper() + "!").failed
    # A product name stays untranslated: copying it is the translation.
    assert text_gates("Microsoft Teams", "Microsoft Teams", "Microsoft Teams").failed == {}
    assert text_gates(source, "El tren a la ciudad sale temprano.", "El tren a la ciudad sale temprano.").failed == {}


def test_length_gate_uses_the_specification_thresholds():
    reference = "El tren a la ciudad sale temprano por la mañana."  # 48 characters
    assert "truncated" in text_gates("s", reference, reference[:20]).failed["length"]
    assert "inflated" in text_gates("s", reference, reference * 3).failed["length"]
    assert text_gates("s", reference, reference[:25]).failed == {}
    # Below MIN_REFERENCE_CHARS the ratio says nothing: "Sí" for "Sí, claro".
    assert text_gates("Yes, sure", "Sí, claro", "Sí").failed == {}


def assess_texts(triples, stats=None):
    results = [text_gates(source, reference, output) for output, source, reference in triples]
    groups = {}
    for result in results:
        if result.output_key is not None:
            entry = groups.setdefault(result.output_key, [0, set(), set()])
            entry[0] += 1
            entry[1].add(result.source_key)
            entry[2].add(result.reference_key)
    repeated = {key: (n, len(sources)) for key, (n, sources, references) in groups.items()
                if len(sources) >= 3 and len(references) >= 3}
    return assess([(r.output_key, json.dumps(r.failed) if r.failed else None) for r in results], repeated, stats or {})


def test_one_output_for_three_different_sources_and_references_fails_the_repeated_gate():
    triples = [("Hola a todos, buenas tardes a todos.", e["source"], e["reference"]) for e in ENTRIES[:3]]
    found = assess_texts(triples)
    assert not found.adequate.any()
    assert found.counts()["repeated"] == 3
    # Two entries sharing an output is not "many".
    assert assess_texts(triples[:2]).adequate.all()
    # Sources that differ, references that agree: the corpus itself asks for one output.
    same = [("OK", source, "OK") for source in ("OK", "Okay", "Ok!")]
    assert assess_texts(same).adequate.all()


def test_family_gates_read_code_switching_and_hallucination_statistics():
    stats = {"code_switching_rate": np.array([[3.0, 5.0], [1.0, 5.0], [0.0, 0.0]]),
             "hallucination_rate": np.array([[4.0, 4.0], [1.0, 4.0], [0.0, 0.0]])}
    assert set(family_gates(stats, 0)) == {"source_language", "detached"}
    assert family_gates(stats, 1) == {}
    assert family_gates(stats, 2) == {}


# --- worst values -----------------------------------------------------------------------------

def test_worst_statistics_are_each_metrics_worst_value():
    rates = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert worst_statistics("fst_acceptance_rate", rates).tolist() == [[0.0, 4.0], [0.0, 1.0]]
    assert worst_statistics("code_switching_rate", rates).tolist() == [[4.0, 4.0], [1.0, 1.0]]
    # An entry no glossary term applies to stays outside terminology_adherence.
    assert worst_statistics("terminology_adherence", rates).tolist() == [[0.0, 4.0], [0.0, 0.0]]
    chrf = np.array([[5.0, 6.0, 4.0] * 8])
    worst = worst_statistics("chrf_plus_plus", chrf)
    assert worst[0, 2::3].tolist() == [0.0] * 8 and worst[0, 0::3].tolist() == [5.0] * 8
    assert corpus_value("chrf_plus_plus", worst) == pytest.approx(0.0, abs=1e-9)


def test_gating_changes_only_the_rows_of_inadequate_entries():
    stats = {"exact_match_rate": np.array([[1.0, 1.0], [1.0, 1.0]]), "bleu": np.ones((2, 13))}
    gated = gated_statistics(stats, np.array([False, True]), ["exact_match_rate"])
    assert gated["exact_match_rate"].tolist() == [[1.0, 1.0], [0.0, 1.0]]
    assert gated["bleu"] is stats["bleu"]
    assert stats["exact_match_rate"].tolist() == [[1.0, 1.0], [1.0, 1.0]]  # the metric's own statistics


# --- through the gateway: each gate alone -----------------------------------------------------

# Gate -> (entry, output, every gate it fails): a copied English source is in
# the source language by nature, so it fails that gate too.
GATE_CASES = {
    "empty": ("shop", "", {"empty"}),
    "copy": ("shop", "The shop on the corner closes at nine.", {"copy", "source_language"}),
    "length": ("train", "El tren a la ciudad", {"length"}),
    "source_language": ("garden", "Kids play within the yard outside.", {"source_language"}),
    "detached": ("cat", "Las acciones de la empresa subieron mucho ayer.", {"detached"}),
}


@pytest.mark.parametrize("gate", sorted(GATE_CASES))
def test_each_gate_refuses_its_entry_in_the_composite(gateway, run_card_validator, gate):
    entry_id, output, failed = GATE_CASES[gate]
    clean = evaluate(gateway, make_request(ENTRIES, predictions()))
    card = evaluate(gateway, make_request(ENTRIES, predictions(**{entry_id: output})))
    run_card_validator.validate(card)
    assert gates_of(clean) == {}
    assert gates_of(card) == {entry_id: failed}
    assert card["adequacy"]["gates"] == {g: int(g in failed) for g in GATES}
    assert card["scores"]["adequacy_rate"] == pytest.approx(5 / 6)
    entry = next(e for e in card["entries"] if e["id"] == entry_id)
    assert entry["scores"]["composite"] == 0.0
    assert entry["scores"]["adequacy_gates"][gate]
    assert card["signatures"]["adequacy"] == card["adequacy"]["signature"]
    assert "adequacy_rate" in card["scores"]["confidence_intervals"]


def test_repeated_outputs_fail_together(gateway):
    constant = "Los niños están jugando en el jardín."
    card = evaluate(gateway, make_request(ENTRIES, predictions(cat=constant, book=constant, rain=constant)))
    # The entry whose reference it is fails with the others: one output for every input says nothing.
    assert {entry: gates & {"repeated"} for entry, gates in gates_of(card).items()} == {
        "cat": {"repeated"}, "book": {"repeated"}, "rain": {"repeated"}, "garden": {"repeated"}}


def test_the_metrics_keep_their_values_only_the_composite_is_gated(gateway):
    """A fluent, unrelated output keeps its analyzer acceptance; the composite loses it."""
    card = evaluate(gateway, make_request(ENTRIES, predictions(cat=GATE_CASES["detached"][1])))
    entry = next(e for e in card["entries"] if e["id"] == "cat")
    assert entry["scores"]["fst_acceptance_rate"] == pytest.approx(1.0)
    assert entry["stats"]["fst_acceptance_rate"][0] == entry["stats"]["fst_acceptance_rate"][1]
    clean = evaluate(gateway, make_request(ENTRIES, predictions()))
    assert card["scores"]["fst_acceptance_rate"] == pytest.approx(clean["scores"]["fst_acceptance_rate"])
    assert card["scores"]["composite"] < clean["scores"]["composite"] - 0.1


# --- degenerate systems are baseline on every profile -----------------------------------------

def degenerate_cards(gateway, corpus_entries, real_outputs, source_lang, target_lang):
    sources = [e["source"] for e in corpus_entries]
    references = [e["reference"] for e in corpus_entries]
    systems = {kind: floor_outputs(kind, sources, references) for kind in FLOOR_KINDS}
    systems.update({kind: system_outputs(kind, real_outputs) for kind in SYSTEM_KINDS})
    for kind, outputs in systems.items():
        request = make_request(corpus_entries, [{"id": e["id"], "prediction": o} for e, o in zip(corpus_entries, outputs)],
                               source_lang=source_lang, target_lang=target_lang)
        yield kind, evaluate(gateway, request)


def example(name: str):
    folder = ROOT / "examples" / name
    corpus = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    by_id = {}
    for line in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            found = json.loads(line)
            by_id[found["id"]] = found.get("prediction") or ""
    entries = [{"id": e["id"], "source": e["source"], "reference": e["reference"]} for e in corpus["entries"]]
    return entries, [by_id.get(e["id"], "") for e in entries], corpus["source_lang"], corpus["target_lang"]


@pytest.mark.parametrize("name", ["eng-spa", "eng-crk"])
def test_every_degenerate_system_is_baseline_and_below_the_real_one(gateway, name):
    """eng-spa: profile A with the Spanish analyzer; eng-crk: Plains Cree with
    the project's analyzer fragment and its plugins, where the encoder does
    not reach (only the text gates and the plugin's semantic check see it)."""
    entries, outputs, source_lang, target_lang = example(name)
    real = evaluate(gateway, make_request(entries, [{"id": e["id"], "prediction": o} for e, o in zip(entries, outputs)],
                                          source_lang=source_lang, target_lang=target_lang))
    for kind, card in degenerate_cards(gateway, entries, outputs, source_lang, target_lang):
        assert card["scores"]["composite"] < real["scores"]["composite"], kind
        assert card["scores"]["quality_tier"] == "baseline", (kind, card["scores"]["composite"])


TARGETS = [("eng", "spa"), ("eng", "deu"), ("eng", "crk")]
_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzâêîô", min_size=1, max_size=9)
_SENTENCES = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(TARGETS), st.lists(st.tuples(_SENTENCES, _SENTENCES), min_size=3, max_size=12,
                                           unique_by=(lambda pair: pair[0], lambda pair: pair[1])),
       _SENTENCES | st.just(""))
def test_any_constant_output_is_baseline(gateway, languages, texts, constant):
    """For any corpus of three entries or more with different sources and
    references, the same output for every entry is baseline."""
    entries = [{"id": f"e{index}", "source": source, "reference": reference}
               for index, (source, reference) in enumerate(texts)]
    request = make_request(entries, [{"id": e["id"], "prediction": constant} for e in entries],
                           source_lang=languages[0], target_lang=languages[1])
    card = evaluate(gateway, request)
    assert card["scores"]["quality_tier"] == "baseline"
