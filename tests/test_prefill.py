"""Suggested spans from the families' stored findings (gateway/review/prefill.py)."""
from __future__ import annotations

from gateway.review.prefill import suggestions_for, word_spans


def test_a_word_is_found_only_as_a_whole_word():
    assert word_spans("nipiy nipiya nipiy.", "nipiy") == [(0, 5), (13, 18)]
    assert word_spans("anything", "") == []


def test_each_rejected_word_becomes_a_span_named_by_its_detector():
    output = "kikway ekwa xyzzy"
    found = suggestions_for(output, "source", {"fst_rejected": ["xyzzy", "xyzzy"], "bleu": 3.0})
    assert [(s.detector, output[s.start:s.end], s.missing) for s in found] == [("fst_rejected", "xyzzy", False)]
    assert found[0].as_dict()["note"].endswith("'xyzzy'")
