"""The gRPC servicer every family shares: request/response conversion,
language-card resolution, logging, and running the scorer off the event loop."""
from __future__ import annotations

import asyncio
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import grpc
import structlog

from champollion.cards import CardRegistry, UnknownLanguage, default_registry
from champollion.eval.v1 import family_pb2, family_pb2_grpc
from services.contract import BatchContext, BatchOutput, EntryInput, FamilyScorer, Term
from services.workers import ScorerSpec, WorkerDied, WorkerPool, WorkerScoringError, finish_in_server

log = structlog.get_logger()


def _terms(messages) -> tuple[Term, ...]:
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
            terms=_terms(entry.terms) if entry.terms else (),
        )
        for entry in request.entries
    ]


def affinity_key(request: family_pb2.ScoreBatchRequest) -> int:
    """The key that sends a batch to a worker (services/worker_slots.py):
    the smallest hash of its sources. The families' calls for one batch
    share it, and so, most often, do the batches of other systems scored
    on the same stretch of a corpus (a min-hash: two batches sharing most
    of their sources most likely share their smallest hash), so that a
    source's token rows are computed in one worker. An entry without a
    source counts by its id."""
    return min((zlib.crc32((entry.source or entry.id).encode("utf-8", "surrogatepass")) for entry in request.entries),
               default=0)


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


class FamilyServicer(family_pb2_grpc.FamilyServicer):
    def __init__(self, scorer: FamilyScorer, cards: CardRegistry | None = None, scoring_threads: int | None = None):
        self.scorer = scorer
        self.cards = cards or default_registry()
        # Threads that score batches; None shares asyncio's default pool. A
        # family that groups concurrent requests (semantic micro-batching)
        # needs more waiting callers than that pool allows on a small machine.
        self._executor = ThreadPoolExecutor(scoring_threads, f"{scorer.name}-score") if scoring_threads else None
        self.workers: WorkerPool | None = None
        self._spec: ScorerSpec | None = None

    def use_workers(self, pool: WorkerPool, spec: ScorerSpec) -> None:
        """Scores batches in `pool`'s processes, each building the scorer
        from `spec`; Describe, Analyze and the family's in-server part
        (services.workers.IN_SERVER) keep using this process's scorer."""
        self.workers, self._spec = pool, spec

    async def _score(self, request, batch_context: BatchContext) -> family_pb2.ScoreBatchResponse:
        if self.workers is None:
            output = await self._in_thread(self.scorer.score, entries_from_request(request), batch_context)
            return await self._in_thread(response_from_output, self.scorer.name, output)
        affinity = affinity_key(request)
        reply = await self.workers.score(self._spec, request.SerializeToString(), batch_context, affinity)
        if not self._spec.server_part:
            return family_pb2.ScoreBatchResponse.FromString(reply)
        output = await self._in_thread(
            finish_in_server, self._spec, self.scorer, entries_from_request(request), batch_context, reply)
        return await self._in_thread(response_from_output, self.scorer.name, output)

    async def _in_thread(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def _context_for(self, request) -> BatchContext:
        return BatchContext(
            source=self.cards.get(request.source_lang),
            target=self.cards.get(request.target_lang),
            options=dict(request.options),
            glossary=_terms(request.glossary),
        )

    async def ScoreBatch(self, request, context):
        started = time.perf_counter()
        try:
            batch_context = self._context_for(request)
        except UnknownLanguage as error:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"unknown language code: {error.args[0]!r}"
            )
        served = self.scorer.languages()
        if served and batch_context.target.code not in served:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.scorer.name} service does not serve target language {batch_context.target.code}",
            )
        try:
            # Scoring is CPU-bound: keep the event loop free for health checks
            # and other batches while it runs (in a thread, or a worker process).
            response = await self._score(request, batch_context)
        except (WorkerDied, WorkerScoringError) as error:  # already logged; a dead worker was replaced
            log.error("score_batch_failed", run_id=request.run_id, family=self.scorer.name, error=str(error))
            await context.abort(grpc.StatusCode.INTERNAL, f"{self.scorer.name}: {error}")
        except Exception as error:  # the batch fails; the server stays up
            log.exception("score_batch_failed", run_id=request.run_id, family=self.scorer.name,
                          entries=len(request.entries))
            await context.abort(grpc.StatusCode.INTERNAL, f"{self.scorer.name}: {type(error).__name__}: {error}")
        log.info(
            "score_batch",
            run_id=request.run_id,
            family=self.scorer.name,
            entries=len(request.entries),
            duration_s=round(time.perf_counter() - started, 4),
        )
        return response

    async def Describe(self, request, context):
        return family_pb2.FamilyDescription(
            family=self.scorer.name,
            version=self.scorer.version,
            metrics=list(self.scorer.metrics),
            languages=self.scorer.languages(),
            components=[
                family_pb2.Component(kind=c.kind, name=c.name, version=c.version, detail=c.detail)
                for c in self.scorer.components()
            ],
        )
