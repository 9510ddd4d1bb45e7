"""Breakdowns by provenance (n, chrF++, exact match, composite per
source_doc) against values computed here from the texts and the spec's
weights, and the corpus-size warnings of seed 001 §6.3."""
from collections import Counter

import numpy as np
import pytest
from sacrebleu.metrics import CHRF

from gateway.card.breakdowns import size_warnings
from tests.conftest import composite_statistics, evaluate, make_request
from tests.test_composite import spec_composite
from tests.test_surface_corpus import synthetic_corpus

DOCS = ["doc-a"] * 14 + ["doc-b"] * 9 + [None] * 7  # 7 entries without provenance


@pytest.fixture(scope="module")
def run(gateway):
    entries, predictions = synthetic_corpus("spa", len(DOCS), seed=13)
    request = make_request(entries, predictions)
    for entry, doc in zip(request.corpus.entries, DOCS):
        if doc is not None:
            entry.provenance.update({"source_doc": doc, "translator": "t"})
    return entries, predictions, evaluate(gateway, request)


def group_by_hand(card, entries, predictions, rows):
    hypotheses = [predictions[i]["prediction"] for i in rows]
    references = [entries[i]["reference"] for i in rows]
    chrf = CHRF(word_order=2).corpus_score(hypotheses, [references]).score
    exact = sum(" ".join(h.split()) == " ".join(r.split()) for h, r in zip(hypotheses, references)) / len(rows)
    # The composite reads inadequate entries at their worst (the adequacy gates).
    gated = composite_statistics(card)
    values = {}
    for metric_id, matrix in gated.items():
        summed = matrix[rows].sum(axis=0)
        if metric_id == "chrf_plus_plus":
            values[metric_id] = CHRF(word_order=2)._compute_score_from_stats(list(summed)).score
        elif summed[1] > 0:
            values[metric_id] = summed[0] / summed[1]
    composite = spec_composite(values, card["composite_coverage"]["profile"])
    return {"n": len(rows), "chrf_plus_plus": chrf, "exact_match_rate": exact, "composite": composite}


def test_by_provenance_groups_by_source_doc(run):
    entries, predictions, card = run
    by_provenance = card["scores"]["by_provenance"]
    assert card["composite_coverage"]["profile"] == "A"
    # The composite checked below mixes sacreBLEU, micro-averaged and inverted metrics.
    assert {"chrf_plus_plus", "fst_acceptance_rate", "hallucination_rate"} <= set(card["composite_coverage"]["weights"])
    assert set(by_provenance) == {"doc-a", "doc-b"}
    for doc in ("doc-a", "doc-b"):
        rows = [i for i, d in enumerate(DOCS) if d == doc]
        expected = group_by_hand(card, entries, predictions, rows)
        assert by_provenance[doc] == pytest.approx(expected, abs=1e-9)
    # The groups differ, so a mix-up between them would show.
    assert by_provenance["doc-a"]["chrf_plus_plus"] != pytest.approx(by_provenance["doc-b"]["chrf_plus_plus"])


def test_the_card_warns_about_a_small_corpus_and_small_groups(gateway):
    entries, predictions = synthetic_corpus("spa", 40, seed=4)
    for index, entry in enumerate(entries):
        entry["domain"] = "legal" if index < 4 else "ui"
        entry["difficulty"] = 2 if index % 5 == 0 else 1
    warnings = evaluate(gateway, make_request(entries, predictions))["warnings"]
    assert "corpus has 40 entries, below the 50-entry minimum of a development set" in warnings
    assert any(w.startswith("corpus has 40 entries, below the 100-entry minimum of an evaluation set") for w in warnings)
    assert "fewer than 10 entries per domain: legal (4); their scores are unstable" in warnings
    assert "fewer than 10 entries per difficulty tier: 2 (8); their scores are unstable" in warnings


@pytest.mark.parametrize("total, development, evaluation", [
    (49, True, True), (50, False, True), (99, False, True), (100, False, False),
])
def test_size_thresholds(total, development, evaluation):
    warnings = size_warnings(total, Counter({"ui": total}), Counter({"1": total}))
    assert any("50-entry minimum" in w for w in warnings) == development
    assert any("100-entry minimum" in w for w in warnings) == evaluation
    assert len(warnings) == development + evaluation


def test_groups_of_ten_are_enough():
    warnings = size_warnings(100, Counter({"ui": 90, "legal": 10}), Counter({"1": 91, "3": 9}))
    assert warnings == ["fewer than 10 entries per difficulty tier: 3 (9); their scores are unstable"]
