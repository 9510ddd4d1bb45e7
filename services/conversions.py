"""Between the family contract's protobuf messages and the plain dataclasses
scorers work on (services/contract.py): used by the servicer in its process
and by the worker processes alike."""
from __future__ import annotations

from champollion.eval.v1 import family_pb2
from services.contract import BatchOutput, EntryInput, Term


def terms_from_messages(messages) -> tuple[Term, ...]:
    return tuple(Term(term.source, term.target, tuple(term.alternatives)) for term in messages)


def entries_from_request(request: family_pb2.ScoreBatchRequest) -> list[EntryInput]:
    # Optional lists are read only where present: half the time of this
    # conversion, a good part of what a batch costs the structural family.
    return [
        EntryInput(
            id=entry.id,
            source=entry.source,
            reference=entry.reference,
            extra_references=tuple(entry.extra_references) if entry.extra_references else (),
            prediction=entry.prediction,
            acceptable_variants=tuple(entry.acceptable_variants) if entry.acceptable_variants else (),
            raw_prediction=entry.raw_prediction if entry.HasField("raw_prediction") else None,
            failed=entry.failed,
            morphology=tuple((gold.word, tuple(gold.features)) for gold in entry.morphology)
            if entry.morphology else (),
            terms=terms_from_messages(entry.terms) if entry.terms else (),
        )
        for entry in request.entries
    ]


def response_from_output(family: str, output: BatchOutput) -> family_pb2.ScoreBatchResponse:
    response = family_pb2.ScoreBatchResponse(
        family=family, signatures=output.signatures, warnings=output.warnings, labels=output.labels
    )
    for result in output.entries:
        entry = response.entries.add(id=result.id)
        entry.values.update(result.values)
        for metric_id, values in result.stats.items():
            entry.stats[metric_id].values.extend(values)
    return response
