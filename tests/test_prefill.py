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


def _found(output: str, scores: dict) -> list[tuple]:
    return [(s.detector, output[s.start:s.end], s.severity, s.missing) for s in suggestions_for(output, "", scores)]


def test_every_detector_locates_its_findings_in_text_order():
    output = "Tienes {usuario} 45 mensajes de Lisa hello hola hola hola hola nipîy"
    scores = {
        "fst_rejected": ["nipîy"],
        "orthographic_violations": ["nipîy: sro-circumflex-long-vowels", "nipîy: sro-inventory"],
        "code_switched_words": ["hello"],
        "number_mismatches": {"unmatched": [[17, 19]], "missing": ["4.5"]},
        "compliance_violations": ["invented_placeholder: {usuario}", "missing_placeholder: {name}",
                                  "disallowed_quote: \""],
        "invented_placeholder_spans": [[7.0, 16.0]],  # as a Struct carries them
        "hallucination_spans": {"oscillation": [[53, 62]], "number_not_in_source": [[17, 19]]},
    }
    end = len(output)
    assert _found(output, scores) == [
        ("placeholder_invented", "{usuario}", "major", False),
        ("number_mismatch", "45", "major", False),
        ("code_switched", "hello", "minor", False),
        ("hallucination_loop", "hola hola", "major", False),
        ("fst_rejected", "nipîy", "minor", False),
        ("orthography", "nipîy", "minor", False),
        ("number_mismatch", "", "major", True),
        ("placeholder_missing", "", "major", True),
    ]
    missing = [s for s in suggestions_for(output, "", scores) if s.missing]
    assert all(s.start == s.end == end for s in missing)
    assert {s.note for s in missing} == {"the source's number 4.5 is not in the output",
                                         "the source's placeholder {name} is missing"}
    ortho = next(s for s in suggestions_for(output, "", scores) if s.detector == "orthography")
    assert ortho.note.endswith("sro-circumflex-long-vowels; sro-inventory")


def test_stored_spans_that_do_not_fit_the_output_and_odd_values_are_left_out():
    output = "hola hola"
    scores = {"invented_placeholder_spans": [[0, 40], [5, 5], ["a", 2], [0, 4, 1], [0.5, 3], [True, 3]],
              "hallucination_spans": [[0, 4]],  # not a dict: nothing
              "number_mismatches": None, "code_switched_words": "hola", "fst_rejected": [3, None],
              "orthographic_violations": ["no separator"]}
    assert suggestions_for(output, "", scores) == []
    assert suggestions_for(output, "", {}) == []


def test_the_detector_table_names_each_detector_once_with_a_severity_and_a_metric():
    from gateway.card.metrics import METRICS
    from gateway.review.prefill import DETECTOR_NAMES, DETECTORS

    assert len(set(DETECTOR_NAMES)) == len(DETECTORS) == 7
    assert {d.severity for d in DETECTORS} <= {"minor", "major"}
    assert all(d.metric in METRICS for d in DETECTORS)
