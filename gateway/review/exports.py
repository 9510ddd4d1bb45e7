"""A campaign's ratings exported in WMT's ESA format (issue 36), for
`champollion review export CAMPAIGN --format wmt-esa` and whoever reads WMT's
human judgments; `meta-eval --human FILE --format wmt-esa` reads it back
(apps/meta_eval/human_judgments.py).

The format (docs/community-review.md "Export in WMT's ESA format"): JSON
lines, one rating a line, with the fields of the ESA dump WMT24 published
beside its Appraise CSV (langs, line_id, src, tgt, doc_id, system,
annotator, esa_score, esa_spans, times) and a few of Appraise's (item_type)
and ours:

- `langs` "source-target" (the corpus's languages), `line_id` the entry's
  0-based place in the registered corpus version, `segment_id` its id,
  `doc_id` its document (provenance `source_doc`; null when none);
- `system` the run id, `model` its model slug, `annotator` the reviewer;
- `item_type` Appraise's: TGT (a rated item), CHK (an item shown again: a
  repeat, or an intact output beside a degraded one), BAD (a degraded
  output); only TGT lines are judgments of the systems;
- `src`, `tgt` the source and the output as shown (BAD: the degraded text);
- `esa_score` 0..100; `esa_spans` [{start_i, end_i, severity}] in characters
  of `tgt` (an omission, [MISSING], has start_i and end_i "missing", as WMT24
  writes it; an mqm campaign's spans add `category`);
- `times` [opened, rated] (ISO 8601; opened null when not recorded);
- `usable` the reviewer's verdict (null: not answered), `excluded` true when
  the campaign's quality control left the annotator out of its results.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from champollion.core.review_protocols import EXPORT_FORMATS
from gateway.review import protocol
from gateway.review.errors import CampaignRefused
from gateway.store.reviews import document_id

if TYPE_CHECKING:  # a type only: the caller passes its store
    from gateway.store import RunStore

# Appraise's item types.
TGT, CHK, BAD = "TGT", "CHK", "BAD"
# What WMT24's ESA data writes for both ends of an omission span.
MISSING = "missing"


def item_type(kind: str, degraded: bool) -> str:
    """A rating's Appraise item type from its task's kind."""
    if degraded:
        return BAD
    return TGT if kind == protocol.RATE else CHK


def esa_spans(spans: list[dict]) -> list[dict]:
    """Review spans ({start, end, severity, missing?, category?}) as WMT's ESA spans."""
    found = []
    for span in spans:
        missing = bool(span.get("missing"))
        row = {"start_i": MISSING if missing else span["start"], "end_i": MISSING if missing else span["end"],
               "severity": span["severity"]}
        if span.get("category"):
            row["category"] = span["category"]
        found.append(row)
    return found


def check_format(file_format: str) -> None:
    """Refuses an export format this module does not write (before anything is read)."""
    if file_format not in EXPORT_FORMATS:
        raise CampaignRefused(f"export_format: one of {', '.join(EXPORT_FORMATS)}, got {file_format[:40]!r}")


def export_campaign(store: "RunStore", campaign: dict, file_format: str) -> str:
    """The campaign's ratings in `file_format` (EXPORT_FORMATS); `campaign` as results_of reads it (its
    results say who was excluded). Empty when nobody has rated yet."""
    check_format(file_format)
    results = campaign.get("results")
    if results is None:
        return ""
    rows = store.campaign_export_rows(campaign["campaign_id"])
    entries = {entry["id"]: (position, entry)
               for position, entry in enumerate(entry for batch in store.corpus_entries(
                   campaign["corpus_id"], campaign["corpus_version"]) for entry in batch)}
    outputs = {system: store.run_predictions(system) for system in campaign["systems"]}
    excluded = set(results["excluded_reviewers"])
    langs = f"{campaign['source_lang']}-{campaign['target_lang']}"
    lines = []
    for row in rows:
        if row["kind"] not in (protocol.RATE, protocol.REPEAT, protocol.CONTROL):
            continue  # a tutorial or attention item: no judgment of a system
        position, entry = entries[row["entry_id"]]
        shown = row["degraded_text"] if row["degraded"] else outputs[row["system"]].get(row["entry_id"])
        lines.append(json.dumps({
            "langs": langs, "line_id": position, "segment_id": row["entry_id"], "doc_id": document_id(entry),
            "system": row["system"], "model": campaign["models"].get(row["system"]), "annotator": row["reviewer"],
            "item_type": item_type(row["kind"], row["degraded"]), "src": entry.get("source", ""), "tgt": shown or "",
            "esa_score": row["score"], "esa_spans": esa_spans(row["spans"]),
            "times": [row["started_at"], row["rated_at"]], "usable": row["usable"],
            "excluded": row["reviewer"] in excluded,
        }, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)
