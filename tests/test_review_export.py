"""A campaign's ratings exported in WMT's ESA format (gateway/review/exports.py)
and read back by `meta-eval --human` (apps/meta_eval/human_judgments.py
formats wmt-esa and appraise): the same system ranking as the campaign."""
from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from apps.meta_eval.human_judgments import JudgmentError, read_judgments
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.exports import esa_spans, item_type
from champollion.eval.v1 import gateway_pb2
from tests.test_review_campaigns import QUALITY, RATERS, copied_store, rate_everything, scored  # noqa: F401


def test_the_export_read_back_by_meta_eval_ranks_the_systems_as_the_campaign(scored, tmp_path, cli):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = copied_store(url, scored)
    try:
        campaign = create_campaign(store, CampaignRequest("export", scored["runs"], list(RATERS), items=40,
                                                          overlap=3, seed=7))
        rate_everything(store, campaign, dict(zip(scored["runs"], QUALITY)))
        found = results_of(store, campaign["campaign_id"])
        ratings = store.campaign_ratings(campaign["campaign_id"])
        outputs = {run_id: store.run_predictions(run_id) for run_id in scored["runs"]}
    finally:
        store.close()
    exported = tmp_path / "campaign.esa.jsonl"
    written = cli("review", "export", campaign["campaign_id"], "--format", "wmt-esa", "-o", exported, "--store", url)
    assert written.exit_code == 0, written.stderr
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(ratings)
    kinds = {"rate": 0, "bad": 0}
    position = {entry["id"]: k for k, entry in enumerate(scored["corpus"]["entries"])}
    for line in lines:
        entry = scored["corpus"]["entries"][line["line_id"]]
        assert line["line_id"] == position[line["segment_id"]] and line["src"] == entry["source"]
        assert line["langs"] == "eng-spa" and line["annotator"] in RATERS and line["excluded"] is False
        assert 0 <= line["esa_score"] <= 100 and line["times"][1]
        if line["item_type"] == "BAD":
            kinds["bad"] += 1
            assert line["tgt"] != outputs[line["system"]][line["segment_id"]]
        else:
            assert line["tgt"] == outputs[line["system"]][line["segment_id"]]
            kinds["rate"] += line["item_type"] == "TGT"
    assert kinds["bad"] == sum(rating["degraded"] for rating in ratings)
    assert kinds["rate"] == sum(rating["kind"] == "rate" for rating in ratings)

    ranking = [row["system"] for row in found["results"]["systems"]]
    means = {row["system"]: row["mean"] for row in found["results"]["systems"]}
    read = cli("meta-eval", *scored["runs"], "--human", exported, "--store", url, "--resamples", "20",
               "--metric-draws", "0", "--json")  # the format told from the first line
    assert read.exit_code == 0, read.stderr
    report = json.loads(read.stdout)
    assert report["human"]["format"] == "wmt-esa"
    human = {system["name"]: system["human_score"] for system in report["systems"]}
    assert sorted(human, key=human.get, reverse=True) == ranking == scored["runs"]
    assert human == pytest.approx(means)

    # The same ratings as an Appraise CSV export (0-based line numbers, no header): the same judgments.
    appraise = tmp_path / "appraise.csv"
    appraise.write_text("".join(f"{line['annotator']},{line['system']},{line['line_id']},{line['item_type']},eng,spa,"
                                f"{line['esa_score']},doc-1,False\n" for line in lines), encoding="utf-8")
    from_esa, from_appraise = read_judgments(exported), read_judgments(appraise)
    assert from_appraise.format == "appraise"
    assert {system: {str(position[entry] + 1): score for entry, score in by_entry.items()}
            for system, by_entry in from_esa.scores.items()} == from_appraise.scores
    read = cli("meta-eval", *scored["runs"], "--human", appraise, "--store", url, "--resamples", "20",
               "--metric-draws", "0", "--json")
    assert read.exit_code == 0, read.stderr
    human = {system["name"]: system["human_score"] for system in json.loads(read.stdout)["systems"]}
    assert sorted(human, key=human.get, reverse=True) == ranking


def written(tmp_path: Path, name: str, lines: list) -> Path:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def test_wmt24_esa_lines_by_hand(tmp_path):
    # WMT24's dump: no segment_id or item_type, scores as text, 0-based line ids; an omission span "missing".
    path = written(tmp_path, "wmt24.jsonl", [
        {"langs": "en-cs", "line_id": 0, "system": "A", "annotator": "x", "esa_score": "80",
         "esa_spans": [{"start_i": "missing", "end_i": "missing", "severity": "major"}]},
        {"langs": "en-cs", "line_id": 0, "system": "A", "annotator": "y", "esa_score": 61},
        {"langs": "en-cs", "line_id": 4, "system": "B", "annotator": "x", "esa_score": 30.5},
        # Ours: a degraded output and an excluded annotator are no judgment of a system.
        {"segment_id": "e-9", "system": "B", "annotator": "x", "esa_score": 5, "item_type": "BAD"},
        {"segment_id": "e-9", "system": "B", "annotator": "z", "esa_score": 99, "excluded": True},
        {"segment_id": "e-9", "system": "B", "annotator": "x", "esa_score": 50, "item_type": "TGT"},
    ])
    judgments = read_judgments(path, "wmt-esa")
    assert judgments.scores == {"A": {"1": 70.5}, "B": {"5": 30.5, "e-9": 50.0}}


def test_appraise_exports_by_hand(tmp_path):
    csv_rows = written(tmp_path, "a.csv", [
        # Appraise quotes the spans' JSON, doubling its quotes.
        'u1,sysA,3,TGT,eng,deu,70,doc#1,False,"[{""start_i"": 0, ""end_i"": 4, ""severity"": ""minor""}]",1,2',
        "u2,sysA,3,TGT,eng,deu,90,doc#1,False,[],1,2",
        "u2,sysA,3,BAD,eng,deu,10,doc#1,False,[],1,2",
        "u1,sysB,seg-x,TGT,eng,deu,40",
    ])
    assert read_judgments(csv_rows).scores == {"sysA": {"4": 80.0}, "sysB": {"seg-x": 40.0}}
    json_rows = written(tmp_path, "a.jsonl", [
        {"annotator": "u1", "target_id": "sysA", "item_id": 0, "item_type": "TGT", "score": 55},
        {"annotator": "u1", "target_id": "sysA", "item_id": 0, "item_type": "CHK", "score": 15},
    ])
    judgments = read_judgments(json_rows)
    assert judgments.format == "appraise" and judgments.scores == {"sysA": {"1": 55.0}}


@pytest.mark.parametrize("lines, file_format, message", [
    ([{"line_id": 0, "system": "A", "esa_score": 1}, "{not json"], "wmt-esa", "bad.txt:2: not a JSON object"),
    ([{"system": "A", "esa_score": 1}], "wmt-esa", "bad.txt:1: needs segment_id or line_id"),
    ([{"line_id": 0, "system": "A", "esa_score": "high"}], "wmt-esa", "bad.txt:1: esa_score: not a number"),
    ([{"line_id": 0, "system": "", "esa_score": 3}], "wmt-esa", "bad.txt:1: the system is missing"),
    ([{"line_id": 0, "system": "A", "esa_score": 3, "item_type": "BAD"}], "wmt-esa", "no rating of a system"),
    (["u,s,1,TGT,eng"], "appraise", "bad.txt:1: an Appraise CSV row has at least 7 fields"),
    (["u,s,1,TGT,eng,deu,nan"], "appraise", "bad.txt:1: score: must be finite"),
])
def test_bad_rating_files_name_the_line(tmp_path, lines, file_format, message):
    with pytest.raises(JudgmentError, match=message):
        read_judgments(written(tmp_path, "bad.txt", lines), file_format)


def test_spans_and_item_types_as_wmt_writes_them():
    assert esa_spans([{"start": 2, "end": 5, "severity": "minor", "missing": False},
                      {"start": 9, "end": 9, "severity": "major", "missing": True, "category": "Accuracy/Omission"}]) \
        == [{"start_i": 2, "end_i": 5, "severity": "minor"},
            {"start_i": "missing", "end_i": "missing", "severity": "major", "category": "Accuracy/Omission"}]
    assert [item_type("rate", False), item_type("repeat", False), item_type("control", False),
            item_type("control", True)] == ["TGT", "CHK", "CHK", "BAD"]


def test_an_unknown_export_format_is_refused_naming_the_field(gateway):
    with pytest.raises(grpc.RpcError) as refused:
        gateway.CampaignResults(gateway_pb2.CampaignResultsRequest(campaign_id="000000000000", export_format="csv"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("export_format: one of wmt-esa")
