"""Same input, same card, whatever the state of the sentence encoder's caches
(champollion/core/encoder/embeddings.py) and whatever else is scored beside it: a
text repeated over a cold run scored by two worker processes gets one
semantic_score; identical runs at once through one gateway give one card;
a run gives the same card on a cold encoder, on one whose token-row cache
another run filled, and on a warm one."""
from __future__ import annotations

import asyncio
import json
import random
from concurrent.futures import ThreadPoolExecutor

from champollion.core.cards import default_registry
from champollion.eval.v1 import family_pb2
from champollion.core.run_card import reproducible_part
from services.contract import BatchContext
from services.registry import scorer_spec
from champollion.core.encoder.embeddings import SentenceEmbedder, shared_embedder
from champollion.core.encoder.row_cache import RowCache
from services.workers import WorkerPool
from tests.conftest import EXAMPLE, evaluate, make_request


def example(copies: int, predicted: bool = True) -> tuple[list[dict], list[dict]]:
    """examples/eng-spa's 36 entries `copies` times over (ids `es-001#k`),
    with the example's predictions, or with the references."""
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))["entries"]
    lines = (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predictions = {record["id"]: record.get("prediction", "") for record in map(json.loads, lines)}
    entries, run = [], []
    for copy in range(copies):
        for entry in corpus:
            entry_id = f"{entry['id']}#{copy}"
            entries.append({"id": entry_id, "source": entry["source"], "reference": entry["reference"],
                            "difficulty": entry["difficulty"], "domain": entry["domain"]})
            run.append({"id": entry_id, "prediction": predictions[entry["id"]] if predicted else entry["reference"]})
    return entries, run


def made_cold(embedder: SentenceEmbedder) -> None:
    """Both of the encoder's caches emptied, as in a process just started."""
    embedder._cache.clear()
    embedder.rows = RowCache(embedder.rows.capacity)


def test_a_text_repeated_over_a_cold_run_in_two_workers_gets_one_semantic_score():
    """The example 30 times over, shuffled into batches of 5 to 40 entries,
    scored at once by two worker processes that start with nothing cached:
    every text meets other company in each batch, and in each worker."""
    entries, predictions = example(30)
    prediction_of = {p["id"]: p["prediction"] for p in predictions}
    rng = random.Random(23)
    rng.shuffle(entries)
    batches, start = [], 0
    while start < len(entries):
        size = rng.randint(5, 40)
        request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
        for entry in entries[start:start + size]:
            request.entries.add(id=entry["id"], source=entry["source"], reference=entry["reference"],
                                prediction=prediction_of[entry["id"]])
        batches.append(request.SerializeToString())
        start += size
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))
    spec = scorer_spec("semantic", None, {})

    async def score_all():
        pool = WorkerPool(2)
        try:
            # the batch's index as its affinity key: the two workers share the batches
            outputs = await asyncio.gather(*(pool.score(spec, batch, context, affinity=index)
                                             for index, batch in enumerate(batches)))
            return outputs, pool.pids()
        finally:
            await pool.aclose()

    outputs, pids = asyncio.run(score_all())
    assert len(pids) == 2, "both workers scored"
    by_entry = {result.id: result.values["semantic_score"] for output in outputs for result in output.entries}
    assert len(by_entry) == len(entries) == 30 * 36
    values_of_text: dict[tuple[str, str, str], set[float]] = {}
    for entry in entries:
        text = (entry["source"], prediction_of[entry["id"]], entry["reference"])
        values_of_text.setdefault(text, set()).add(by_entry[entry["id"]])
    several = {text[0][:30]: sorted(values) for text, values in values_of_text.items() if len(values) > 1}
    assert not several, several
    assert len(values_of_text) == 36


def test_identical_runs_at_once_through_one_gateway_give_one_card(stack, gateway):
    """Four identical runs sent together to one gateway with two runs of
    another system over the same corpus, from an encoder with nothing
    cached: their batches interleave in the one encoder that the semantic
    and behavioral families share, each computing texts and token windows
    that other runs' batches hold too."""
    request = make_request(*example(2), batch_size=8)
    other = make_request(*example(2, predicted=False), batch_size=12)
    made_cold(shared_embedder())
    with ThreadPoolExecutor(6) as pool:
        cards = list(pool.map(lambda run: evaluate(gateway, run), [request, other] * 2 + [request] * 2))
    identical = [card for index, card in enumerate(cards) if index not in (1, 3)]
    assert identical[0]["scores"]["semantic_score"] is not None
    assert identical[0]["scores"]["hallucination_rate"] is not None
    assert len({card["run_id"] for card in identical}) == 4
    assert len({json.dumps(reproducible_part(card), sort_keys=True) for card in identical}) == 1


def test_a_run_gives_one_card_on_a_cold_and_on_a_warm_encoder(stack, gateway):
    """Cold: nothing cached. Warm rows: the token-row cache filled by another
    system's run over the same corpus (its sources, "source reference"
    texts), the vectors not. Warm: both caches holding this run's texts."""
    entries, predictions = example(1)
    request = make_request(entries, predictions, batch_size=8)
    embedder = shared_embedder()
    made_cold(embedder)
    cold = evaluate(gateway, request)
    made_cold(embedder)
    evaluate(gateway, make_request(*example(1, predicted=False), batch_size=8))
    embedder._cache.clear()
    assert len(embedder.rows) > 0
    warm_rows = evaluate(gateway, request)
    warm = evaluate(gateway, request)
    assert cold["scores"]["semantic_score"] is not None
    assert json.dumps(reproducible_part(cold), sort_keys=True) == json.dumps(reproducible_part(warm_rows), sort_keys=True)
    assert json.dumps(reproducible_part(cold), sort_keys=True) == json.dumps(reproducible_part(warm), sort_keys=True)
