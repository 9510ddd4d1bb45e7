"""Semantic metrics of one batch: the universal ``semantic_score`` (sentence
embeddings) and ``comet_score`` (a local COMET model), each entry with a
[value, 1] statistic so that the gateway's corpus value is the mean of entries.

Neither metric ever fails a batch for want of a model: a missing COMET model
or an unsupported language leaves the metric out (null in the run card) with
a warning that says why.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import structlog

from champollion import __version__
from champollion.core.cards import LanguageCard
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
)
from services.semantic.batching import DirectBatcher, MicroBatcher, make_batcher
from services.semantic.comet_runner import (
    DEVICES,
    CometRunner,
    CometUnavailable,
    comet_version,
)
from champollion.core.encoder.embeddings import (
    EMBEDDING_MODEL,
    EmbeddingUnavailable,
    SentenceEmbedder,
    shared_embedder,
)
from services.semantic.models import (
    CometModelDirectory,
    ModelNotFound,
    resolve_comet_model,
)
from services.semantic.similarity import combination, semantic_scores

log = structlog.get_logger()

# Padded characters per segment a batch may hold on average: batches carry at
# most max_batch_size segments and max_batch_size x this many padded characters
# (segments x longest segment), so a batch of unusually long segments is
# smaller and device memory stays bounded.
CHARS_PER_SEGMENT = 1024


def _embedding_supported(card: LanguageCard) -> bool:
    return card.model_support.embedding


def _record_mean_metric(output: BatchOutput, metric: str, scored: list[EntryInput], values: list[float]) -> None:
    """Each entry's value of a metric whose corpus value is the mean of the
    entries' (statistics [value, 1]); 0 for a failed entry, which was not
    scored: failing is never rewarded."""
    by_id = dict(zip((entry.id for entry in scored), values))
    for result in output.entries:
        value = by_id.get(result.id, 0.0)
        result.values[metric] = value
        result.stats[metric] = [value, 1.0]


@dataclass
class CometEngine:
    runner: CometRunner
    batcher: MicroBatcher | DirectBatcher

    def score(self, samples: list[dict[str, str]]) -> list[float]:
        return self.batcher.submit(samples)


class CometPool:
    """COMET models by id, each loaded once (on first use or at preload) and
    kept warm with its own batcher. At most `max_models` stay loaded: a
    request for one more is refused with a reason rather than evicting a model
    another request may be using."""

    def __init__(self, directory: CometModelDirectory | None = None, device: str = "cpu", fp16: bool = False,
                 max_batch_size: int = 16, max_wait_s: float = 0.005, micro_batching: bool = True,
                 max_models: int = 3, max_batch_chars: int | None = None):
        # A misconfigured device fails the service at start, not every batch.
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        if fp16 and device != "cuda":
            raise ValueError("fp16 needs device 'cuda'")
        self.directory = directory or CometModelDirectory()
        self.device, self.fp16 = device, fp16
        self.max_batch_size, self.max_wait_s, self.micro_batching = max_batch_size, max_wait_s, micro_batching
        # Padded characters per batch (segments x longest segment); 0 = no cap.
        self.max_batch_chars = max_batch_size * CHARS_PER_SEGMENT if max_batch_chars is None else max_batch_chars
        self.max_models = max_models
        self._engines: dict[str, CometEngine] = {}
        self._failures: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def loaded(self) -> dict[str, CometEngine]:
        return dict(self._engines)

    def engine(self, model_id: str) -> CometEngine:
        """The warm engine of `model_id`; raises ModelNotFound or CometUnavailable."""
        engine = self._engines.get(model_id)
        if engine is not None:
            return engine
        location = self.directory.locate(model_id)
        # One load at a time: concurrent first requests wait for it, not load twice.
        with self._lock:
            if model_id in self._engines:
                return self._engines[model_id]
            failure = self._failures.get((model_id, str(location.checkpoint)))
            if failure is not None:
                raise CometUnavailable(failure)
            if len(self._engines) >= self.max_models:
                raise CometUnavailable(f"this service keeps at most {self.max_models} COMET models loaded "
                                       f"({', '.join(sorted(self._engines))})")
            try:
                runner = CometRunner(location, self.device, self.fp16, self.directory)
            except CometUnavailable as error:
                self._failures[(model_id, str(location.checkpoint))] = str(error)
                raise
            batcher = make_batcher(runner.predict_batch, self.max_batch_size, self.max_wait_s, runner.length,
                                   self.micro_batching, name=f"comet:{model_id}",
                                   max_batch_cost=self.max_batch_chars or None)
            engine = CometEngine(runner, batcher)
            self._engines[model_id] = engine
            log.info("comet_model_loaded", family="semantic", model=model_id, signature=runner.info.signature())
            return engine

    def close(self) -> None:
        for engine in self._engines.values():
            engine.batcher.close()


class SemanticScorer:
    name = "semantic"
    version = __version__
    metrics = ("semantic_score", "comet_score")

    def __init__(self, languages: list[str] | None = None, comet: CometPool | None = None,
                 embedder: SentenceEmbedder | None = None, preload: tuple[str, ...] = ()):
        self._languages = sorted(languages or [])
        self.comet = comet or CometPool()
        self.embedder = embedder or shared_embedder()
        for model_id in preload:
            try:
                self.comet.engine(model_id)
            except (ModelNotFound, CometUnavailable) as error:
                log.warning("comet_preload_failed", family="semantic", model=model_id, reason=str(error))

    def languages(self) -> list[str]:
        return self._languages

    def components(self) -> list[ComponentInfo]:
        found = [
            ComponentInfo(kind="library", name="unbabel-comet", version=comet_version() or "not installed"),
            ComponentInfo(kind="model", name=EMBEDDING_MODEL, version=self.embedder.version,
                          detail=self.embedder.signature()),
        ]
        for model_id, engine in sorted(self.comet.loaded().items()):
            found.append(ComponentInfo(kind="model", name=model_id, version=engine.runner.info.revision,
                                       detail=engine.runner.info.signature()))
        return found

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        return self.finish_in_server(entries, context, self.score_in_worker(entries, context))

    # The two parts of a batch (services.contract.SplitScorer): the sentence
    # embeddings in a worker process, COMET in the server, which keeps the models.
    def score_in_worker(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        output = BatchOutput(entries=[EntryOutput(id=entry.id, values={}, stats={}) for entry in entries])
        if context.wants("semantic_score"):
            self._semantic_score(entries, context, output)
        return output

    def finish_in_server(self, entries: list[EntryInput], context: BatchContext, output: BatchOutput) -> BatchOutput:
        if context.wants("comet_score"):
            self._comet_score(entries, context, output)
        return output

    def _semantic_score(self, entries: list[EntryInput], context: BatchContext, output: BatchOutput) -> None:
        target, source = context.target, context.source
        if not _embedding_supported(target):
            output.warnings.append(f"the sentence-embedding model ({EMBEDDING_MODEL}) does not support target "
                                   f"language {target.code} (language card metricModelSupport.embedding); "
                                   "semantic_score is null")
            return
        use_source = _embedding_supported(source)
        if not use_source:
            output.warnings.append(f"the sentence-embedding model does not support source language {source.code}: "
                                   "semantic_score compares the prediction with the reference only, without "
                                   "the source")
        scored = [entry for entry in entries if not entry.failed]
        try:
            values = semantic_scores(self.embedder, [e.prediction for e in scored], [e.reference for e in scored],
                                     [e.source for e in scored] if use_source else None)
        except EmbeddingUnavailable as error:
            output.warnings.append(f"{error}; semantic_score is null")
            return
        _record_mean_metric(output, "semantic_score", scored, values)
        output.signatures["semantic_score"] = f"{self.embedder.signature()}|{combination(use_source)}|version:{__version__}"

    def _comet_score(self, entries: list[EntryInput], context: BatchContext, output: BatchOutput) -> None:
        choice = resolve_comet_model(context.target, context.comet_model)
        try:
            engine = self.comet.engine(choice.model_id)
        except ModelNotFound as error:
            output.warnings.append(f"no COMET model available: {error}; comet_score is null")
            return
        except CometUnavailable as error:
            output.warnings.append(f"no COMET model available: COMET model {choice.model_id} "
                                   f"cannot be used ({error}); comet_score is null")
            return
        runner = engine.runner
        if not choice.validated:
            output.warnings.append(
                f"low-resource: target language {context.target.code} is not among the validated languages of "
                f"COMET model {choice.model_id} (language card metricModelSupport.comet); comet_score is indicative only")
        scored = [entry for entry in entries if not entry.failed]
        try:
            scores = engine.score([runner.sample(e.source, e.prediction, e.reference) for e in scored])
        except Exception as error:  # e.g. device out of memory: this batch's comet_score only
            log.exception("comet_batch_failed", family="semantic", model=choice.model_id, entries=len(scored))
            output.warnings.append(f"COMET model {choice.model_id} failed on a batch ({type(error).__name__}: "
                                   f"{error}); comet_score is null")
            return
        _record_mean_metric(output, "comet_score", scored, scores)
        output.labels["comet_model"] = choice.model_id
        output.signatures["comet_score"] = f"{runner.info.signature()}|version:{__version__}"
