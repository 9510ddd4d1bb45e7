"""Per-entry texts and facts a run card leaves out (sources, references,
predictions, domains, latencies), joined from the run's own input files so
that a report can show what the worst entries say."""
from __future__ import annotations

from pathlib import Path

from champollion.eval.v1 import gateway_pb2
from champollion.apps.inputs import PredictionFile, load_corpus, load_predictions


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
    None); bad files raise champollion.apps.inputs.InputError."""
    return entry_inputs(
        load_corpus(corpus) if corpus is not None else None,
        load_predictions(predictions) if predictions is not None else None,
    )
