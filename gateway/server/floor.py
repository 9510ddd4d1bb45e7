"""Floor runs (docs/store-and-corpora.md, "Floor runs"): for every corpus
version the gateway scores the degenerate systems of
champollion/core/degenerate.py (FLOOR_KINDS: constant, other_reference,
source_copy, half_reference, empty) itself, through the same intake and
evaluation as any run (a registered corpus's through the registered-corpus
path, a client-sent corpus's as a run sending that corpus), and stores them
as floor runs of the version (`runs.floor_kind`, model slug floor:<kind>).

When: after a corpus is registered or gets a new version, and after a run is
answered on a version that has no floor yet (a client-sent corpus's floor is
made from the entries that run sent, kept while it was scored). Builds run in
the background, one at a time; each stores only the kinds the version lacks
(the store's unique index idx_floor refuses a second run of a kind, and each
floor run's id is derived from the dataset, version and kind), so a floor is
made once per version whatever the order of the triggers. A floor run is
stored without a token, is never admitted against a budget nor checked for
probing, and its prompt-less meta leaves the contamination check nothing to
find. On a holdout or gold corpus its entries are stored without the
outputs (which would be references' text): only corpus-level values matter.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field
from typing import AsyncIterator

import structlog

from champollion.core.degenerate import FLOOR_KINDS, floor_outputs
from champollion.core.roles import MAINTAINER
from champollion.core.run_card import entry_as_dict
from champollion.core.tiers import SECRET_TIERS
from champollion.eval.v1 import gateway_pb2
from gateway.card.floor import baseline_tier, floor_slug
from gateway.server.evaluation import ScoredRun, evaluate
from gateway.server.intake import RunIntake
from gateway.server.registered import registered_run
from gateway.server.spill import RunSpill
from gateway.server.stored_runs import one_line
from gateway.store import StoreError

log = structlog.get_logger()
# The gateway's run scorer (gateway/server/runs.py `Runs`, which imports this
# module): what a build uses of it is `store`, `config`, `cards` and
# `clients_for(language)`.
Servicer = object

FLOOR_WARNING = ("floor run: the degenerate system {kind} (champollion/core/degenerate.py), scored by the gateway "
                 "itself on this corpus version; it shows what ignoring the input scores, and never takes a rank")


async def _no_more_parts():
    return
    yield


def floor_run_id(dataset_id: str, version: str, kind: str) -> str:
    """A floor run's id: the same for the same dataset, version and kind."""
    return hashlib.sha256(f"floor\0{dataset_id}\0{version}\0{kind}".encode("utf-8")).hexdigest()[:32]


@dataclass
class FloorCorpus:
    """What a floor is built from: a registered version (`registered`, the
    store's corpus_info; entries read from the store) or the entries a
    client sent (`entries`, as the gateway validated them)."""
    dataset_id: str
    version: str
    source_lang: str = ""
    target_lang: str = ""
    entries: list[gateway_pb2.CorpusEntry] = field(default_factory=list)
    registered: dict | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.dataset_id, self.version


class EntryKeeper:
    """Keeps a copy of every entry of a client-sent run as its parts go by,
    for the version's floor: wrap the later parts with `parts`."""

    def __init__(self, first_part: gateway_pb2.EvaluateRequest):
        self.entries: list[gateway_pb2.CorpusEntry] = []
        self._keep(first_part)

    def _keep(self, part) -> None:
        for entry in part.corpus.entries:
            kept = gateway_pb2.CorpusEntry()
            kept.CopyFrom(entry)  # so that the part (and its predictions) is not kept alive
            self.entries.append(kept)

    async def parts(self, later_parts: AsyncIterator) -> AsyncIterator:
        async for part in later_parts:
            self._keep(part)
            yield part


def apply_tier_rule(card: dict, floor_runs: list[dict]) -> bool:
    """gateway/card/floor.py's tier rule on a scored card: its tier becomes
    baseline, with a warning naming the floor kind, when its composite
    interval reaches the highest floor run's. True when it did."""
    found = baseline_tier(card["scores"], floor_runs)
    if found is None:
        return False
    card["scores"]["quality_tier"], warning = found
    card["warnings"].append(warning)
    return True


class Floors:
    """The gateway's floor builds: scheduled, run one at a time, cancelled
    when the gateway closes."""

    def __init__(self, servicer: "Servicer"):
        self._servicer = servicer
        self._tasks: dict[tuple[str, str], asyncio.Task] = {}
        self._one_at_a_time = asyncio.Lock()

    def schedule(self, corpus: FloorCorpus) -> None:
        """Builds the version's floor in the background unless it is being
        built already (the build itself skips the kinds already stored)."""
        if corpus.key in self._tasks:
            return
        task = asyncio.ensure_future(self._build_logged(corpus))
        self._tasks[corpus.key] = task
        task.add_done_callback(lambda _: self._tasks.pop(corpus.key, None))

    async def settled(self) -> None:
        """Waits for every build scheduled so far (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def _build_logged(self, corpus: FloorCorpus) -> None:
        started = time.perf_counter()
        try:
            async with self._one_at_a_time:
                stored = await build_floor(self._servicer, corpus)
        except asyncio.CancelledError:
            raise
        except StoreError as error:
            log.warning("floor_failed", family="gateway", dataset_id=corpus.dataset_id, version=corpus.version[:12],
                        error=one_line(error))
            return
        except Exception:  # a bug: logged, the gateway keeps serving
            log.exception("floor_failed", family="gateway", dataset_id=corpus.dataset_id,
                          version=corpus.version[:12])
            return
        if stored:
            log.info("floor_stored", family="gateway", dataset_id=corpus.dataset_id, version=corpus.version[:12],
                     kinds=stored, duration_s=round(time.perf_counter() - started, 4))


async def _texts(servicer: "Servicer", corpus: FloorCorpus) -> tuple[list[str], list[str], list[str]]:
    """The version's entry ids, sources and (primary) references, in corpus order."""
    if corpus.registered is None:
        entries = [(entry.id, entry.source, entry.reference) for entry in corpus.entries]
    else:
        info = corpus.registered
        batches = await servicer.store.call(lambda store: [entry for batch in store.corpus_entries(
            info["id"], info["version"]) for entry in batch])
        entries = [(entry["id"], entry["source"], entry.get("reference", "")) for entry in batches]
    return [e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]


def _predictions(ids: list[str], outputs: list[str]) -> list[gateway_pb2.Prediction]:
    return [gateway_pb2.Prediction(id=entry_id, prediction=output) for entry_id, output in zip(ids, outputs)]


async def _score_kind(servicer: "Servicer", corpus: FloorCorpus, kind: str, ids: list[str],
                      outputs: list[str], spill: RunSpill) -> tuple[ScoredRun, str | None]:
    """One floor run scored as any run is; returns it and its corpus tier."""
    meta = gateway_pb2.RunMeta(model_slug=floor_slug(kind), condition="floor")
    predictions = _predictions(ids, outputs)
    registered = None
    if corpus.registered is not None:
        info = corpus.registered
        first = gateway_pb2.EvaluateRequest(corpus_ref=gateway_pb2.CorpusRef(id=info["id"], version=info["version"]),
                                            predictions=predictions, meta=meta)
        registered = await registered_run(first, _no_more_parts(), servicer.store, MAINTAINER, servicer.cards)
        first, later = registered.header, registered.parts()
    else:
        first = gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(
            id=corpus.dataset_id, source_lang=corpus.source_lang, target_lang=corpus.target_lang,
            entries=corpus.entries), predictions=predictions, meta=meta)
        later = _no_more_parts()
    intake = RunIntake(first, servicer.cards, spill, servicer.config.max_text_chars)
    clients, unrouted = servicer.clients_for(intake.run.target.card.code)
    scored = await evaluate(intake, later, servicer.config, clients, unrouted, spill,
                            expected_entries=registered.corpus["entries"] if registered else 0)
    if registered is not None:
        registered.label(scored.card)
    return scored, registered.tier if registered else None


async def build_floor(servicer: "Servicer", corpus: FloorCorpus) -> list[str]:
    """Scores and stores the floor kinds the version lacks; returns those stored."""
    store = servicer.store
    have = await store.call(lambda run_store: run_store.floor_kinds(corpus.dataset_id, corpus.version))
    missing = [kind for kind in FLOOR_KINDS if kind not in have]
    if not missing:
        return []
    ids, sources, references = await _texts(servicer, corpus)
    if not ids:
        return []
    stored = []
    for kind in missing:
        with RunSpill() as spill:
            scored, tier = await _score_kind(servicer, corpus, kind, ids, floor_outputs(kind, sources, references),
                                             spill)
            card = scored.card
            if card["dataset"]["version"] != corpus.version:  # cannot happen: the same entries
                raise RuntimeError(f"floor run of {corpus.dataset_id!r} scored on version "
                                   f"{card['dataset']['version'][:12]}, not {corpus.version[:12]}")
            card["run_id"] = floor_run_id(corpus.dataset_id, corpus.version, kind)
            card["warnings"].append(FLOOR_WARNING.format(kind=kind))
            keep_outputs = tier not in SECRET_TIERS

            def save(run_store, card=card, scored=scored, kind=kind, keep_outputs=keep_outputs):
                if kind in run_store.floor_kinds(corpus.dataset_id, corpus.version):
                    return False  # another gateway stored it meanwhile
                predictions = scored.predictions()
                entries = ([{**entry_as_dict(entry), "prediction": next(predictions, None) if keep_outputs else None}
                            for entry in batch] for batch in scored.entry_results())
                run_store.save_run(card, entries, None, None, floor_kind=kind)
                return True

            if await store.call(save):
                stored.append(kind)
    return stored


def registered_floor(info: dict) -> FloorCorpus:
    """The floor of a registered version (the store's corpus_info)."""
    return FloorCorpus(info["id"], info["version"], info["source_lang"], info["target_lang"], registered=info)


def client_floor(card: dict, header: gateway_pb2.EvaluateRequest, keeper: EntryKeeper) -> FloorCorpus:
    """The floor of a client-sent corpus: the entries its run sent."""
    return FloorCorpus(card["dataset"]["id"], card["dataset"]["version"], header.corpus.source_lang,
                       header.corpus.target_lang, entries=keeper.entries)
