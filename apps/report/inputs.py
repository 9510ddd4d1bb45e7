"""Per-entry texts and facts a run card leaves out (sources, references,
predictions, domains, latencies), joined from the run's own input files so
that a report can show what each entry says."""
from __future__ import annotations

from pathlib import Path

from champollion.eval.v1 import gateway_pb2
from apps.inputs import InputError, PredictionFile, load_corpus, load_predictions
from apps.inputs.plain_text import STDIN, STDIN_NAME, entry_id, read_segments


def entry_inputs(corpus: gateway_pb2.Corpus | None, predictions: PredictionFile | None) -> dict[str, dict]:
    """entry id -> {source, reference, domain, prediction, latency_s}, each
    field present only where the inputs give it."""
    found: dict[str, dict] = {}
    for entry in corpus.entries if corpus is not None else ():
        fields = found.setdefault(entry.id, {})
        fields["source"] = entry.source
        if entry.reference:
            fields["reference"] = entry.reference
        if entry.domain:
            fields["domain"] = entry.domain
    for prediction in predictions.predictions if predictions is not None else ():
        fields = found.setdefault(prediction.id, {})
        if prediction.HasField("prediction"):
            fields["prediction"] = prediction.prediction
        if prediction.HasField("latency_s"):
            fields["latency_s"] = prediction.latency_s
    return found


def entry_inputs_from_files(corpus: Path | None, predictions: Path | None) -> dict[str, dict]:
    """entry_inputs from a corpus file and a predictions file (either may be
    None); bad files raise apps.inputs.InputError."""
    return entry_inputs(
        load_corpus(corpus) if corpus is not None else None,
        load_predictions(predictions) if predictions is not None else None,
    )


def plain_text_inputs(src: str | None, refs: list[str], hyps: list[str]) -> list[dict[str, dict]]:
    """entry_inputs from sacreBLEU-style plain text, as `evaluate --src --ref
    --hyp` reads it (line N is entry `line-N`): one per hypothesis file (one
    with the corpus alone when none is given). Every file must have the same
    number of lines; the first reference file gives the shown reference. `-`
    (standard input) may name one file."""
    names = [name for name in (src, *refs, *hyps) if name is not None]
    if names.count(STDIN) > 1:
        raise InputError("`-` (standard input) given for more than one file; at most one can be read from it")
    read = {name: read_segments(name) for name in dict.fromkeys(names)}
    lines = {len(segments) for segments in read.values()}
    if len(lines) > 1:
        counts = ", ".join(f"{STDIN_NAME if name == STDIN else name}: {len(segments)}"
                           for name, segments in read.items())
        raise InputError(f"the plain-text files have different numbers of lines ({counts}): "
                         "every file needs one line per segment")
    corpus: dict[str, dict] = {}
    for index in range(lines.pop() if lines else 0):
        fields = corpus.setdefault(entry_id(index + 1), {})
        if src is not None:
            fields["source"] = read[src][index]
        if refs:
            fields["reference"] = read[refs[0]][index]
    found = []
    for hyp in hyps or [None]:
        inputs = {id_: dict(fields) for id_, fields in corpus.items()}
        if hyp is not None:
            for index, text in enumerate(read[hyp]):
                inputs.setdefault(entry_id(index + 1), {})["prediction"] = text
        found.append(inputs)
    return found


def unmatched_entries(card: dict, inputs: dict[str, dict]) -> str | None:
    """Why `inputs` are not this card's files, or None: every entry id of
    the card must be in them (a card of another corpus, or plain text with
    a different number of lines, would show empty texts)."""
    entries = [entry["id"] for entry in card.get("entries") or []]
    missing = [id_ for id_ in entries if id_ not in inputs]
    if not entries or not missing:
        return None
    return (f"{len(missing)} of its {len(entries)} entries (e.g. {missing[0]!r}) are not in the given files, "
            f"which have {len(inputs)} entries")
