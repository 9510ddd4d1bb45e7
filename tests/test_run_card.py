"""The run card of the bundled example: every key of spec §9, valid against
the schema, numbers that follow from the inputs; and a family that is down."""
import json

import grpc
import pytest

from champollion.eval.v1 import gateway_pb2_grpc
from apps.inputs import (
    build_request,
    load_corpus,
    load_glossary,
    load_meta,
    load_predictions,
)
from apps.launch.embedded import EmbeddedStack
from gateway.card.composite import WEIGHTS
from gateway.card.corpus import corpus_values
from champollion.core.run_card import run_card_from_proto, run_card_to_proto
from tests.conftest import EXAMPLE, composite_statistics, evaluate, load_schema, make_request


def example_request():
    return build_request(
        load_corpus(EXAMPLE / "corpus.json"),
        load_predictions(EXAMPLE / "predictions.jsonl"),
        load_meta(EXAMPLE / "meta.json"),
        load_glossary(EXAMPLE / "glossary.json"),
    )


@pytest.fixture(scope="module")
def example_card(gateway):
    return evaluate(gateway, example_request())


def test_example_card_validates_and_has_every_key(example_card, run_card_validator):
    run_card_validator.validate(example_card)
    schema = load_schema()
    assert set(schema["required"]) <= set(example_card)
    assert set(schema["properties"]["scores"]["required"]) <= set(example_card["scores"])
    assert set(schema["properties"]["totals"]["required"]) <= set(example_card["totals"])


def test_example_counts_and_surface_values(example_card):
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    lines = [json.loads(l) for l in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if l]
    failed = sum(1 for line in lines if "error" in line)
    scores = example_card["scores"]
    assert scores["total"] == len(corpus["entries"])
    assert scores["errors"] == failed and scores["evaluated"] == scores["total"] - failed
    references = {e["id"]: e["reference"] for e in corpus["entries"]}
    exact = sum(1 for line in lines if line.get("prediction") == references[line["id"]])
    assert scores["exact_matches"] == exact
    assert scores["exact_match_rate"] == pytest.approx(exact / scores["total"])
    assert example_card["totals"]["total_cost_usd"] == pytest.approx(sum(l.get("cost_usd", 0) for l in lines))
    assert example_card["elapsed_seconds"] == 72.0
    assert len(example_card["entries"]) == scores["total"]


def test_composite_uses_profile_a_for_spanish(example_card):
    """Spanish declares an analyzer (profile A); the example has no gold morphology."""
    scores = example_card["scores"]
    coverage = example_card["composite_coverage"]
    assert coverage["profile"] == "A"
    assert coverage["missing"] == ["morphological_accuracy"]
    present = {m: w for m, w in WEIGHTS["A"].items() if m != "morphological_accuracy"}
    # The entry the method failed on enters the composite at every input's worst (the adequacy gates).
    assert example_card["adequacy"]["gates"]["empty"] == 1
    scores = corpus_values(composite_statistics(example_card))
    by_hand = (
        0.25 * scores["fst_acceptance_rate"] + 0.15 * scores["chrf_plus_plus"] / 100
        + 0.15 * scores["semantic_score"]
        + 0.10 * scores["equivalent_match_rate"] + 0.05 * scores["exact_match_rate"]
        + 0.05 * (1 - scores["code_switching_rate"]) + 0.05 * scores["terminology_adherence"]
        + 0.05 * (1 - scores["hallucination_rate"])
    ) / 0.85
    assert sum(present.values()) == pytest.approx(0.85)
    assert example_card["scores"]["composite"] == pytest.approx(by_hand)
    assert coverage["weights"] == pytest.approx({m: w / 0.85 for m, w in present.items()})
    assert any("re-normalised" in w for w in example_card["warnings"])


def test_metrics_without_their_inputs_are_null_with_warnings(example_card):
    """No COMET model is installed, no gold morphology, no orthographic rules for Spanish."""
    scores = example_card["scores"]
    for key in ("comet_score", "comet_model", "morphological_accuracy", "orthographic_accuracy"):
        assert scores[key] is None
    assert any("semantic" in w and "COMET" in w for w in example_card["warnings"]), example_card["warnings"]
    assert scores["semantic_score"] is not None


def test_compliance_gates_on_the_example(example_card):
    """The example's es-006 loses {filename} in raw and post-processed output alike."""
    scores = example_card["scores"]
    assert 0 < scores["compliance_index"] < 1
    assert scores["compliance_index_raw"] is not None
    entry = next(e for e in example_card["entries"] if e["id"] == "es-006")
    assert entry["scores"]["compliance_components"]["variable_integrity"] == 0.0
    assert "missing_placeholder: {filename}" in entry["scores"]["compliance_violations"]
    assert not any("family 'compliance'" in w for w in example_card["warnings"])


def test_proto_round_trip_is_lossless(example_card):
    assert run_card_from_proto(run_card_to_proto(example_card)) == example_card


def test_breakdowns_partition_the_corpus(example_card):
    by_difficulty = example_card["scores"]["by_difficulty"]
    assert sum(group["n"] for group in by_difficulty.values()) == example_card["scores"]["total"]
    assert set(by_difficulty) <= {"1", "2", "3", "4", "5"}


def test_profile_a_language_renormalises_missing_structural_metrics():
    """Cree declares an analyzer, so its profile stays A with the structural
    service absent; the FST metrics are re-normalised away."""
    with EmbeddedStack(families=("surface",)) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel),
                            make_request([{"id": "c1", "reference": "nipâw awa nâpêw"}], target_lang="crk"))
    coverage = card["composite_coverage"]
    assert coverage["profile"] == "A"
    assert {"fst_acceptance_rate", "morphological_accuracy"} <= set(coverage["missing"])
    # Present: chrF++ 0.15 and exact match 0.05 (no variants: equivalence is null).
    assert coverage["weights"] == pytest.approx({"chrf_plus_plus": 0.75, "exact_match_rate": 0.25})
    assert card["scores"]["composite"] == pytest.approx(1.0)


def test_family_that_is_down_gives_nulls_and_a_warning(run_card_validator):
    """Surface configured at an address where nothing listens."""
    with EmbeddedStack(families=(), remote_families={"surface": "127.0.0.1:9"}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel), make_request([{"id": "a", "reference": "Hola"}]))
    run_card_validator.validate(card)
    assert card["scores"]["chrf_plus_plus"] is None and card["scores"]["exact_match_rate"] is None
    assert card["scores"]["composite"] is None and card["scores"]["quality_tier"] == "unscored"
    assert any("family 'surface' failed (UNAVAILABLE" in w for w in card["warnings"])
    assert card["scores"]["total"] == 1


def test_fast_struct_conversion_refuses_what_json_cannot_hold_as_protobufs_own_does():
    import math

    from google.protobuf import json_format, struct_pb2

    from champollion.core.run_card import struct_to_dict
    for bad in (math.nan, math.inf, -math.inf):
        struct = struct_pb2.Struct()
        struct.update({"ok": 1.0, "nested": {"bad": [bad]}})
        with pytest.raises(ValueError):
            json_format.MessageToDict(struct)
        with pytest.raises(ValueError, match="not a JSON number"):
            struct_to_dict(struct)
