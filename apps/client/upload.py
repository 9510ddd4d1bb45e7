"""The client's side of the streaming RPCs: a run sent to EvaluateUpload in
parts, two run cards sent to CompareUpload and several to
ComparePairsUpload in parts, and a run card put back together from an
EvaluateStream / EvaluateUpload answer."""
from __future__ import annotations

import math

from champollion.eval.v1 import gateway_pb2
from champollion.core.tiers import is_secret
from champollion.core.run_card import entry_as_dict, run_card_from_proto


def request_parts(request: gateway_pb2.EvaluateRequest, entries_per_part: int = 2000):
    """The request as EvaluateUpload parts: the header (everything but the
    entries and predictions), then the entries in slices, each with the
    predictions of its entries (a prediction whose id no entry has goes with
    the last), so that no entry waits at the gateway for its prediction.
    Predictions keep their relative order within a part. A request without
    entries (one naming a registered corpus) sends its predictions in
    slices of the same size."""
    header = gateway_pb2.EvaluateRequest()
    header.CopyFrom(request)
    del header.corpus.entries[:]
    del header.predictions[:]
    yield header
    entries = request.corpus.entries
    if not entries:
        for start in range(0, len(request.predictions), entries_per_part):
            yield gateway_pb2.EvaluateRequest(predictions=request.predictions[start:start + entries_per_part])
        return
    part_count = max(1, math.ceil(len(entries) / entries_per_part))
    position = {entry.id: index for index, entry in enumerate(entries)}
    grouped: list[list[gateway_pb2.Prediction]] = [[] for _ in range(part_count)]
    for prediction in request.predictions:
        part = position.get(prediction.id, len(entries)) // entries_per_part
        grouped[min(part, part_count - 1)].append(prediction)
    for number, predictions in enumerate(grouped):
        part = gateway_pb2.EvaluateRequest()
        part.corpus.entries.extend(entries[number * entries_per_part:(number + 1) * entries_per_part])
        part.predictions.extend(predictions)
        yield part


def compare_parts(request: gateway_pb2.CompareRequest, entries_per_part: int = 5000):
    """The request as CompareUpload parts: the settings and both cards
    without their entries, then each card's entries in slices."""
    header = gateway_pb2.CompareRequest()
    header.CopyFrom(request)
    del header.baseline.entries[:]
    del header.system.entries[:]
    yield header
    for side in ("baseline", "system"):
        entries = getattr(request, side).entries
        for start in range(0, len(entries), entries_per_part):
            part = gateway_pb2.CompareRequest()
            getattr(part, side).entries.extend(entries[start:start + entries_per_part])
            yield part


def pairs_parts(request: gateway_pb2.ComparePairsRequest, entries_per_part: int = 5000):
    """The request as ComparePairsUpload parts: the request with its cards
    without their entries, then each card's entries in slices, each part
    naming the card's position."""
    header = gateway_pb2.ComparePairsRequest()
    header.CopyFrom(request)
    for run in header.runs:
        del run.card.entries[:]
    yield gateway_pb2.ComparePairsPart(request=header)
    for position, run in enumerate(request.runs):
        entries = run.card.entries
        for start in range(0, len(entries), entries_per_part):
            yield gateway_pb2.ComparePairsPart(run=position, entries=entries[start:start + entries_per_part])


def collect_run_card(updates, on_progress=None, on_entries=None) -> dict:
    """The run card from an EvaluateStream / EvaluateUpload answer: progress
    messages (passed to `on_progress`), the card, then its entries in parts.
    With `on_entries`, each part's entries go to on_entries(card, entries)
    as they come (the card without its entries, which stay []), so that a
    run of any size is written out without being held."""
    card, count, entries = None, 0, []
    for update in updates:
        if update.HasField("run_card"):
            card = run_card_from_proto(update.run_card)
        elif update.entries:
            if card is None:
                raise ValueError("the gateway sent run card entries before the run card")
            part = [entry_as_dict(entry) for entry in update.entries]
            count += len(part)
            if on_entries is None:
                entries.extend(part)
            else:
                on_entries(card, part)
        elif on_progress is not None:
            on_progress(update)
    if card is None:
        raise ValueError("the gateway closed the stream without a run card")
    # A secret registered corpus's card may come at corpus level, without entries.
    withheld = not count and is_secret(card)
    if count != card["scores"]["total"] and not withheld:
        raise ValueError(f"the gateway sent {count} of the run card's {card['scores']['total']} entries")
    card["entries"] = entries
    return card


def corpus_parts(corpus: gateway_pb2.Corpus, tier: str, new_version: bool = False, entries_per_part: int = 2000,
                 accept_check_failures: str = ""):
    """A corpus as RegisterCorpus parts: the header (id, languages, tier,
    new_version, accept_check_failures) with the first slice of entries,
    then the other slices."""
    entries = corpus.entries
    for start in range(0, max(len(entries), 1), entries_per_part):
        part = gateway_pb2.RegisterCorpusRequest()
        if start == 0:
            part.corpus.id, part.corpus.source_lang, part.corpus.target_lang = \
                corpus.id, corpus.source_lang, corpus.target_lang
            part.tier, part.new_version = tier, new_version
            part.accept_check_failures = accept_check_failures
        part.corpus.entries.extend(entries[start:start + entries_per_part])
        yield part
