"""MQM scoring (issue 36; gateway/review/mqm.py) worked by hand, and MQM
error files read as meta-eval's `mqm-errors` judgments. The whole WMT21 TED
release is reproduced by bench/mqm_ted.py (the suite needs no shared data)."""
from __future__ import annotations

import json

import pytest

from apps.meta_eval.human_judgments import JudgmentError, read_judgments
from gateway.review.mqm import Annotation, UnknownSeverity, error_weight, segment_scores
from tests.test_meta_eval import ENTRIES, SYSTEMS, card_paths, damaged
from tests.test_meta_eval import cards, entries  # noqa: F401  (fixtures)

HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment"


@pytest.mark.parametrize("category, severity, weight", [
    ("Accuracy/Mistranslation", "Major", 5.0),
    ("Accuracy/Mistranslation", "Minor", 1.0),
    ("Fluency/Punctuation", "Minor", 0.1),
    ("Fluency/Punctuation", "Major", 5.0),  # only a minor punctuation error is discounted
    ("Non-translation", "Major", 25.0),
    ("Non-translation", "Minor", 25.0),  # whatever its severity
    ("Style/Awkward", "Neutral", 0.0),
    ("No-error", "No-error", 0.0),
])
def test_error_weights(category, severity, weight):
    assert error_weight(category, severity) == weight


def test_an_unknown_severity_is_refused():
    with pytest.raises(UnknownSeverity, match="'Critical'"):
        error_weight("Accuracy/Omission", "Critical")


def test_segment_score_sums_per_rater_then_averages_over_raters():
    rows = [
        # Segment 1 of sys: rater1 a major and a minor punctuation error (5.1), rater2 nothing (0): -2.55.
        Annotation("sys", "1", "rater1", "Accuracy/Mistranslation", "Major"),
        Annotation("sys", "1", "rater1", "Fluency/Punctuation", "Minor"),
        Annotation("sys", "1", "rater2", "No-error", "No-error"),
        # Segment 2: one rater, two minor errors: -2.
        Annotation("sys", "2", "rater3", "Style/Awkward", "Minor"),
        Annotation("sys", "2", "rater3", "Fluency/Grammar", "Minor"),
        # Another system's segment 1: a non-translation: -25.
        Annotation("other", "1", "rater1", "Non-translation", "Major"),
    ]
    scores = segment_scores(rows)
    assert scores == {("sys", "1"): pytest.approx(-2.55), ("sys", "2"): -2.0, ("other", "1"): -25.0}
    # A segment annotated with no error scores 0, written as the release writes it.
    assert f"{segment_scores([rows[2]])[('sys', '1')]:.6f}" == "-0.000000"


def write_errors(path, rows: list[tuple[str, str, str, str, str]]) -> None:
    """(system, seg_id, rater, category, severity) rows under the release's header."""
    lines = [HEADER] + [f"{system}\ttalk.1\t1\t{seg}\t{rater}\tsource\ttarget\t{category}\t{severity}\t"
                        for system, seg, rater, category, severity in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_an_mqm_error_file_is_read_as_segment_judgments(tmp_path):
    path = tmp_path / "errors.tsv"
    write_errors(path, [("a", "1", "r1", "Accuracy/Omission", "Major"), ("a", "1", "r2", "No-error", "No-error"),
                        ("b", "1", "r1", "Fluency/Spelling", "Minor")])
    judgments = read_judgments(path)  # told from the header
    assert judgments.format == "mqm-errors" and not judgments.by_position
    assert judgments.scores == {"a": {"1": -2.5}, "b": {"1": -1.0}}


@pytest.mark.parametrize("rows, header, expected", [
    ([("a", "1", "r1", "Accuracy/Omission", "Critical")], HEADER, "errors.tsv:2: severity 'Critical'"),
    ([("a", "", "r1", "Accuracy/Omission", "Major")], HEADER, "errors.tsv:2: system, seg_id and rater"),
    ([], "system\tseg_id\trater\tcategory", None),
])
def test_bad_mqm_error_files_name_file_and_line(tmp_path, rows, header, expected):
    path = tmp_path / "errors.tsv"
    write_errors(path, rows)
    if expected is None:  # a header without severity: not an MQM error file
        path.write_text(header + "\na\t1\tr1\tOther\n", encoding="utf-8")
        with pytest.raises(JudgmentError, match="missing: severity"):
            read_judgments(path, "mqm-errors")
        return
    with pytest.raises(JudgmentError, match=expected):
        read_judgments(path)


def test_meta_eval_reads_mqm_errors(cli, cards, tmp_path):  # noqa: F811
    """The meta-eval fixture's systems, each damaged entry annotated with a
    major omission by one rater and nothing by another: MQM agrees with the
    systems' order, as chrF++ does."""
    rows = []
    for rank, system in enumerate(SYSTEMS):
        for position in range(ENTRIES):
            segment = str(position + 1)
            if damaged(rank, position):
                rows.append((system, segment, "r1", "Accuracy/Omission", "Major"))
            else:
                rows.append((system, segment, "r1", "No-error", "No-error"))
            rows.append((system, segment, "r2", "No-error", "No-error"))
    path = tmp_path / "errors.tsv"
    write_errors(path, rows)
    result = cli("meta-eval", *card_paths(cards), "--human", path, "--resamples", "20", "--metric-draws", "0", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["human"]["format"] == "mqm-errors"
    assert [system["human_score"] for system in report["systems"]] == sorted(
        (system["human_score"] for system in report["systems"]), reverse=True)
    assert report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] == pytest.approx(1.0)
