"""Suggested spans from the families' stored findings (gateway/review/prefill.py)."""
from __future__ import annotations

import unicodedata

from champollion.core.words import words_of
from gateway.review.prefill import suggestions_for, word_spans


def test_a_word_is_found_only_as_a_whole_word():
    assert word_spans("nipiy nipiya nipiy.", "nipiy") == [(0, 5), (13, 18)]
    assert word_spans("anything", "") == []
    # "the " is 4 characters, "supercomputers" 14 and a space: only the last "compute" (19-26) is whole.
    assert word_spans("the supercomputers compute", "compute") == [(19, 26)]
    # A mark on the last letter (y + U+0330 TILDE BELOW, no precomposed form) lengthens the word too.
    assert word_spans("nipiy\u0330 nipiy", "nipiy") == [(7, 12)]


def test_a_decomposed_word_is_found_and_its_span_covers_the_raw_characters():
    decomposed = unicodedata.normalize("NFD", "kîwê")  # k i U+0302 w e U+0302: 6 characters for 4
    assert len(decomposed) == 6
    output = f"ekwa {decomposed}. {decomposed}w"
    assert words_of(output)[1] == "kîwê"  # what the families list
    assert word_spans(output, "kîwê") == [(5, 11)]  # "ekwa " is 5; kîwêw (13-20) is a longer word
    assert output[5:11] == decomposed


def test_a_word_with_a_unicode_hyphen_is_found_as_listed():
    output = "a see\u2010through wall"  # U+2010 HYPHEN
    assert words_of(output, keep_hyphenated=True)[1] == "see-through"
    assert word_spans(output, "see-through") == [(2, 13)]
    assert output[2:13] == "see\u2010through"


def test_a_letter_of_another_script_does_not_lengthen_a_word():
    # 我 and 的 are 0 and 1: computer stands at 2-10 between Han letters, which are word characters (\w).
    assert word_spans("我的computer坏了", "computer") == [(2, 10)]
    assert word_spans("我的computers坏了", "computer") == []  # a Latin s still does


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
