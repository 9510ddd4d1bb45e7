"""The gRPC servicer every family shares: request/response conversion,
language-card resolution, the per-text limits (as the gateway's), logging,
and running the scorer off the event loop."""
from __future__ import annotations

import asyncio
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import grpc
import structlog

from champollion.core.cards import CardRegistry, UnknownLanguage, default_registry
from champollion.core.field_errors import abort_invalid
from champollion.core.limits import DEFAULT_MAX_TEXT_CHARS, InvalidField, check_reference_count, check_text
from champollion.eval.v1 import family_pb2, family_pb2_grpc
from services.contract import BatchContext, FamilyScorer, splits_work
from services.conversions import entries_from_request, response_from_output, terms_from_messages
from services.workers import ScorerSpec, WorkerDied, WorkerPool, WorkerScoringError

log = structlog.get_logger()


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


def check_texts(request: family_pb2.ScoreBatchRequest, max_text_chars: int) -> None:
    """Every text of every entry within the limits the gateway holds a run
    to (champollion.core.limits): a family may be called by any client, and
    an unbounded text costs it gigabytes. Raises InvalidField."""
    for index, entry in enumerate(request.entries):
        path = f"entries[{index}]"
        named = [(name, getattr(entry, name)) for name in ("source", "reference", "prediction")]
        if entry.HasField("raw_prediction"):
            named.append(("raw_prediction", entry.raw_prediction))
        named += [(f"acceptable_variants[{n}]", text) for n, text in enumerate(entry.acceptable_variants)]
        check_reference_count(len(entry.extra_references), f"{path}.extra_references", entry.id)
        named += [(f"extra_references[{n}]", text) for n, text in enumerate(entry.extra_references)]
        for name, text in named:
            check_text(text, f"{path}.{name}", entry.id, max_text_chars)


class FamilyServicer(family_pb2_grpc.FamilyServicer):
    def __init__(self, scorer: FamilyScorer, cards: CardRegistry | None = None, scoring_threads: int | None = None,
                 max_text_chars: int = DEFAULT_MAX_TEXT_CHARS):
        self.scorer = scorer
        self.cards = cards or default_registry()
        # Longest text of a batch entry (`serve --max-text-chars`, as the gateway's max_text_chars).
        self.max_text_chars = max_text_chars
        # Threads that score batches; None shares asyncio's default pool. A
        # family that groups concurrent requests (semantic micro-batching)
        # needs more waiting callers than that pool allows on a small machine.
        self._executor = ThreadPoolExecutor(scoring_threads, f"{scorer.name}-score") if scoring_threads else None
        self.workers: WorkerPool | None = None
        self._spec: ScorerSpec | None = None

    def use_workers(self, pool: WorkerPool, spec: ScorerSpec) -> None:
        """Scores batches in `pool`'s processes, each building the scorer
        from `spec`; Describe, Analyze and the family's in-server part
        (a scorer that splits its work: services.contract.SplitScorer) keep
        using this process's scorer."""
        self.workers, self._spec = pool, spec

    async def _score(self, request, batch_context: BatchContext) -> family_pb2.ScoreBatchResponse:
        if self.workers is None:
            output = await self._in_thread(self.scorer.score, entries_from_request(request), batch_context)
            return await self._in_thread(response_from_output, self.scorer.name, output)
        affinity = affinity_key(request)
        reply = await self.workers.score(self._spec, request.SerializeToString(), batch_context, affinity)
        if not splits_work(self.scorer):
            return family_pb2.ScoreBatchResponse.FromString(reply)
        output = await self._in_thread(
            self.scorer.finish_in_server, entries_from_request(request), batch_context, reply)
        return await self._in_thread(response_from_output, self.scorer.name, output)

    async def _in_thread(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def _context_for(self, request) -> BatchContext:
        return BatchContext(
            source=self.cards.get(request.source_lang),
            target=self.cards.get(request.target_lang),
            glossary=terms_from_messages(request.glossary),
            metrics=frozenset(request.selection.metrics) if request.HasField("selection") else None,
            plugins=not request.disable_plugins,
            comet_model=request.comet_model if request.HasField("comet_model") else None,
        )

    async def ScoreBatch(self, request, context):
        started = time.perf_counter()
        try:
            batch_context = self._context_for(request)
        except UnknownLanguage as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"language: {error}")
        try:
            check_texts(request, self.max_text_chars)
        except InvalidField as error:
            await abort_invalid(context, error)
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
