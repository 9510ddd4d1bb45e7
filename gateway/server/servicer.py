"""gRPC glue for the gateway: Evaluate, EvaluateStream, EvaluateUpload,
Compare, ComparePairs, Describe, the stored runs' ListRuns, GetRun, Leaderboard, the
registered corpora's RegisterCorpus, ListCorpora, SetCorpusTier, GetSources,
CheckCorpus, and the review of held runs (ListHeldRuns, ReviewRun). Who may
see or do what is asked of gateway/server/access.py."""
from __future__ import annotations

import asyncio
import time
from typing import Callable, TypeVar

import grpc
import structlog

from champollion import __version__
from champollion.core.cards import CardRegistry, default_registry
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc, run_card_pb2
from champollion.core.sampling import DEFAULT_SEED
from gateway.card.compare import ComparableRun, CompareRefused, compare_runs
from gateway.card.metrics import FAMILIES
from champollion.core.addresses import is_loopback
from champollion.core.tiers import SECRET_TIERS
from champollion.core.run_card import dict_to_message, run_card_to_proto
from gateway.review.campaigns import CampaignRefused, CampaignRequest, create_campaign, results_of
from gateway.review.exports import EXPORT_FORMATS, export_campaign
from gateway.review.growth import CampaignClosed, add_reviewers, extend_items
from gateway.store.reviews import CampaignChanged
from gateway.review.protocol import DEFAULT_ITEMS, DEFAULT_OVERLAP
from gateway.server import corpora
from gateway.server.access import (
    CompareSide,
    Refused,
    answer_view,
    budget_applies,
    check_compare,
    check_sampling,
    is_maintainer,
)
from gateway.server.admission import Admission, AdmissionRefused, DeferredTurn, UploadLimits
from gateway.server.comparisons import add_pairs_part, compare_pairs, paired_test_settings, stored_run
from gateway.server.auth import current_caller
from gateway.server.config import GatewayConfig
from gateway.server.evaluation import ScoredRun, evaluate
from gateway.server.fanout import FamilyClient
from gateway.server.floor import EntryKeeper, FloorCorpus, Floors, apply_tier_rule, client_floor, registered_floor
from gateway.card.floor import FLOOR_SLUG_PREFIX
from champollion.core.degenerate import FLOOR_KINDS
from gateway.server.intake import RunIntake
from gateway.store.version_keys import use_key_file
from gateway.card.ladder import LADDER_METRIC
from gateway.server.readings import ladder_release, leaderboard_for, run_for, runs_for, shown_compared_version
from gateway.server.registered import CorpusRefused, refuse_registered_id, registered_run
from gateway.server.spill import RunSpill
from gateway.server.stored_runs import GatewayStore, as_struct, one_line, record_run
from gateway.server.submissions import admit, hold_for_review
from champollion.core.limits import shown
from gateway.server.validation import InvalidRun
from gateway.store import (
    CheckGateRefused,
    CorpusConflict,
    InvalidQuery,
    NotHeld,
    RunStore,
    StoreError,
    UnknownCampaign,
    UnknownCorpus,
    UnknownRun,
)
from gateway.store.submissions import DECISIONS
from gateway.store.errors import NothingStored

log = structlog.get_logger()
Result = TypeVar("Result")
# A stored card's entries go back in messages of this many (as EvaluateStream's).
STORED_ENTRIES_PER_MESSAGE = 2000


def _entry_messages(entries: list[dict]) -> list[run_card_pb2.EntryResult]:
    return [dict_to_message(entry, run_card_pb2.EntryResult()) for entry in entries]


async def _no_more_parts():
    """The later parts of a run sent in one message: none."""
    return
    yield


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, config: GatewayConfig, cards: CardRegistry | None = None):
        self.config = config
        self.cards = cards or default_registry()
        # (family, address) -> client; channels are created lazily, inside the
        # server's event loop, and reused by every run.
        self._clients: dict[tuple[str, str], FamilyClient] = {}
        self._family_credentials = config.family_credentials()  # None: plaintext
        self._family_metadata = config.family_metadata()  # the gateway's token for families with --auth
        if config.version_key_file:
            # The key of secret-tier versions' public ids (gateway/store/version_keys.py), outside the store.
            use_key_file(config.version_key_file)
        self.store = GatewayStore(config.store) if config.store else None
        self.admission = Admission(config.max_concurrent_runs, config.max_queued_runs)
        # Uploads: idle and whole-upload limits, and how many a token may have open.
        self.uploads = UploadLimits(config.upload_idle_seconds, config.upload_deadline_seconds,
                                    config.max_open_uploads)
        # Budgets are counted one submission at a time (the store's advisory
        # lock covers several gateways on one PostgreSQL database).
        self._admitting = asyncio.Lock()
        # Floor runs (gateway/server/floor.py), built in the background.
        self.floors = Floors(self)

    def _client(self, family: str, address: str) -> FamilyClient:
        key = (family, address)
        if key not in self._clients:
            self._clients[key] = FamilyClient(family, address, self.config.deadline_seconds,
                                              self._family_credentials, self._family_metadata)
        return self._clients[key]

    def clients_for(self, language: str) -> tuple[dict[str, FamilyClient], dict[str, str]]:
        """The family clients that serve target `language`, and why each
        configured family without a route for it is left out."""
        clients, unrouted = {}, {}
        for family in FAMILIES:
            address = self.config.address_for(family, language)
            if address:
                clients[family] = self._client(family, address)
            elif family in self.config.families:
                unrouted[family] = f"no {family} service is configured for target language {language!r}"
        return clients, unrouted

    async def close(self) -> None:
        await self.floors.close()
        for client in self._clients.values():
            await client.close()
        if self.store is not None:
            self.store.close()

    async def _score(self, first_part, later_parts, context, spill: RunSpill, on_progress=None,
                     floors: list | None = None, turn: DeferredTurn | None = None) -> ScoredRun:
        """Validates and scores a run; aborts the call with INVALID_ARGUMENT
        naming the field and entry on bad input, INTERNAL on a bug. A
        non-maintainer's run on a secret tier is counted against its token's
        budget once its header and predictions are known good, before
        anything is scored. The floor its version lacks, if any, is put in
        `floors` for the caller to schedule once the run is answered. An
        upload's `turn` is taken when scoring starts: its first batch ready
        or, on a registered corpus, its predictions all in (before the
        budget is counted); a run sent whole holds its turn already."""
        started = time.perf_counter()
        caller = current_caller()
        registered = admitted = keeper = None
        try:
            if first_part.meta.model_slug.startswith(FLOOR_SLUG_PREFIX):
                raise InvalidRun("meta.model_slug", f"{first_part.meta.model_slug!r}: model slugs starting with "
                                                    f"{FLOOR_SLUG_PREFIX!r} name the gateway's own floor runs")
            # A run on a registered corpus: the stored entries with the client's predictions.
            registered = await registered_run(first_part, later_parts, self.store, caller.role, self.cards)
            if registered is not None:
                first_part, later_parts = registered.header, registered.parts()
            else:
                await refuse_registered_id(first_part, self.store, caller.role)
                if self._floor_wanted():
                    # The entries, kept for the version's floor (built from them once the run is answered).
                    keeper = EntryKeeper(first_part)
                    later_parts = keeper.parts(later_parts)
            intake = RunIntake(first_part, self.cards, spill, self.config.max_text_chars,
                               before_batches=turn.take if turn is not None else None)
            if registered is not None:
                options = first_part.options
                check_sampling(caller, registered.tier, options.seed if options.HasField("seed") else None,
                               options.bootstrap_resamples)
                if turn is not None:  # the upload is in: scoring starts
                    await turn.take()
                if budget_applies(caller, registered.tier):
                    async with self._admitting:
                        admitted = await admit(registered, caller, self.config)
            clients, unrouted = self.clients_for(intake.run.target.card.code)
            scored = await evaluate(intake, later_parts, self.config, clients, unrouted, spill, on_progress,
                                    expected_entries=registered.corpus["entries"] if registered else 0)
        except InvalidRun as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except (CorpusRefused, Refused, AdmissionRefused) as error:
            await context.abort(error.code, str(error))
        except Exception as error:  # a bug, not bad input: say so, keep serving
            log.exception("evaluate_failed", family="gateway")
            await context.abort(grpc.StatusCode.INTERNAL, f"evaluation failed: {type(error).__name__}: {error}")
        if registered is not None:
            registered.label(scored.card)
            if registered.tier in SECRET_TIERS:
                hold_for_review(scored.card, admitted, scored.card["scores"]["total"])
                if not is_maintainer(caller) and self.store is not None:
                    # What the caller's answer and reads of this run show in place of its scores.
                    scored.card["ladder"] = await self._ladder_release(scored, caller)
        floor_kinds = await self._floor_rule(scored.card)
        # Stored before the card is sent, so that it can say how many stored
        # runs share its fingerprint.
        await record_run(self.store, scored, caller.name, admitted.submission_id if admitted else None)
        if registered is not None:  # the answer names a secret version by its public id (issue 33)
            scored.card = registered.public_card(scored.card, caller.role)
        if floors is not None and self._floor_wanted() and floor_kinds is not None and len(floor_kinds) < len(FLOOR_KINDS):
            floors.append(registered_floor(registered.corpus) if registered is not None
                          else client_floor(scored.card, first_part, keeper) if keeper is not None else None)
        log.info(
            "evaluate",
            run_id=scored.card["run_id"],
            family="gateway",
            token=caller.name,
            entries=scored.card["scores"]["total"],
            duration_s=round(time.perf_counter() - started, 4),
            spill_bytes=spill.size_bytes(),
        )
        return scored

    async def _ladder_release(self, scored: ScoredRun, caller) -> dict | None:
        """The Ladder's release for a run on a secret tier (readings.ladder_release)."""
        card = scored.card
        matrix = scored.stats.get(LADDER_METRIC)
        if matrix is None:
            return None
        rows = [(entry_id, {LADDER_METRIC: statistics}) for entry_id, statistics in zip(scored.entry_ids(), matrix)]
        try:
            return await self.store.call(lambda store: ladder_release(
                store, caller, card["dataset"]["id"], card["dataset"]["version"], card["run_id"], rows))
        except StoreError:
            return None

    def _floor_wanted(self) -> bool:
        return self.config.floor_runs and self.store is not None

    async def _floor_rule(self, card: dict) -> set[str] | None:
        """The tier rule against the version's floor runs (gateway/card/floor.py);
        returns the floor kinds stored on the version (None: no store, or it failed)."""
        if self.store is None:
            return None
        dataset = card["dataset"]
        try:
            floor_runs = await self.store.call(lambda store: store.floor_runs(dataset["id"], dataset["version"]))
        except StoreError:
            return None
        if floor_runs:
            try:
                apply_tier_rule(card, floor_runs)
            except Exception:  # a bug: logged, the run is still answered
                log.exception("floor_rule_failed", family="gateway", run_id=card.get("run_id"))
        return {run["floor_kind"] for run in floor_runs}

    def _schedule_floors(self, floors: list) -> None:
        for corpus in floors:
            if corpus is not None:
                self.floors.schedule(corpus)

    @staticmethod
    async def _entry_chunks(scored: ScoredRun):
        """The run card's entries, a batch at a time, built off the event loop."""
        batches = scored.entry_results()
        while True:
            chunk = await asyncio.to_thread(next, batches, None)
            if chunk is None:
                return
            yield chunk

    async def Evaluate(self, request, context):
        async with self.admission.turn(context):
            floors: list[FloorCorpus] = []
            with RunSpill() as spill:
                scored = await self._score(request, _no_more_parts(), context, spill, floors=floors)
                view = answer_view(scored.card)
                card = await asyncio.to_thread(run_card_to_proto, view.card)
                if view.entries:
                    async for chunk in self._entry_chunks(scored):
                        card.entries.extend(chunk)
        self._schedule_floors(floors)  # the answer is ready: the floor goes on without the caller
        return gateway_pb2.EvaluateResponse(run_card=card)

    async def EvaluateStream(self, request, context):
        async with self.admission.turn(context):
            async for message in self._stream(request, _no_more_parts(), context):
                yield message

    async def EvaluateUpload(self, request_iterator, context):
        # A gateway already full refuses before any part is read (a refused
        # upload costs nothing), as does a token with max_open_uploads open;
        # otherwise the run takes its turn when scoring starts (admission.py).
        if self.admission.busy():
            log.warning("run_refused", family="gateway", reason="busy", admitted=self.admission.admitted)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.admission.refusal())
        try:
            async with self.uploads.open(current_caller().name), self.admission.deferred() as turn:
                parts = self.uploads.watch(request_iterator, context)
                try:
                    first_part = await parts.__anext__()
                except StopAsyncIteration:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the upload carried no part")
                async for message in self._stream(first_part, parts, context, turn):
                    yield message
        except AdmissionRefused as error:  # too many open, or the first part did not come
            await context.abort(error.code, str(error))

    async def _stream(self, first_part, later_parts, context, turn: DeferredTurn | None = None):
        """Progress while scoring (coalesced: the newest counts when the
        client is ready for them), then the run card, then its entries."""
        latest: list[gateway_pb2.EvaluateProgress] = []
        changed = asyncio.Event()

        def on_progress(done: int, total: int, upload_complete: bool, slow_families: list[str],
                        entries_done: int, entries_total: int) -> None:
            latest[:] = [gateway_pb2.EvaluateProgress(
                batches_done=done, batches_total=total, upload_complete=upload_complete,
                slow_families=slow_families, entries_done=entries_done, entries_total=entries_total)]
            changed.set()

        floors: list[FloorCorpus] = []
        with RunSpill() as spill:
            task = asyncio.ensure_future(self._score(first_part, later_parts, context, spill, on_progress, floors,
                                                     turn))
            try:
                while not task.done():
                    waiter = asyncio.ensure_future(changed.wait())
                    await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
                    waiter.cancel()
                    if changed.is_set():
                        changed.clear()
                        yield latest[0]
                scored = task.result()
            finally:
                task.cancel()  # the client went away: stop scoring
            if changed.is_set():
                yield latest[0]
            view = answer_view(scored.card)
            yield gateway_pb2.EvaluateProgress(run_card=await asyncio.to_thread(run_card_to_proto, view.card))
            if view.entries:
                async for chunk in self._entry_chunks(scored):
                    yield gateway_pb2.EvaluateProgress(entries=chunk)
        self._schedule_floors(floors)  # after the answer's last message

    async def Compare(self, request, context):
        try:
            settings = paired_test_settings(request)
        except Refused as error:
            await context.abort(error.code, str(error))
        # Who may compare what (a stored side read as GetRun reads it; on a
        # secret tier a submitter's own stored runs, the gateway's seed and
        # samples), checked before any statistics are read.
        sides = []
        for name in ("baseline", "system"):
            run_id = getattr(request, f"{name}_run_id")
            tier = submitted_by = None
            if run_id:
                tier, submitted_by = await self._stored(context, lambda store: store.run_access(run_id))
            sides.append(CompareSide(name, run_id, tier, submitted_by))
        try:
            check_compare(current_caller(), sides, settings.method, settings.seed, settings.resamples)
        except Refused as error:
            await context.abort(error.code, str(error))
        baseline = await self._comparable(request.baseline, request.baseline_run_id, context)
        system = await self._comparable(request.system, request.system_run_id, context)
        try:
            # Bootstrap resamples, or randomization trials.
            result = await asyncio.to_thread(compare_runs, baseline, system, settings.samples, settings.seed_used,
                                             settings.method)
        except CompareRefused as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        if self.store is not None:  # a secret version by its public id (issue 33)
            caller, version = current_caller(), result["dataset_version"]
            result["dataset_version"] = await self._stored(
                context, lambda store: shown_compared_version(store, caller, version))
        return dict_to_message(result, gateway_pb2.CompareResponse())

    async def CompareUpload(self, request_iterator, context):
        # Comparing needs both cards' statistics at once: the parts are
        # merged, under the upload limits (admission.py).
        request = gateway_pb2.CompareRequest()
        try:
            async with self.uploads.open(current_caller().name):
                async for part in self.uploads.watch(request_iterator, context):
                    request.MergeFrom(part)
        except AdmissionRefused as error:
            await context.abort(error.code, str(error))
        return await self.Compare(request, context)

    async def ComparePairs(self, request, context):
        # The logic is gateway/server/comparisons.py's; with run ids (or a
        # store, to name a secret version by its public id) through the store.
        caller = current_caller()

        def answer(store: RunStore | None) -> gateway_pb2.ComparePairsResponse:
            return compare_pairs(store, caller, request)

        if self.store is not None or any(run.run_id for run in request.runs):
            return await self._stored(context, answer)
        try:
            return await asyncio.to_thread(answer, None)
        except Refused as error:
            await context.abort(error.code, str(error))

    async def ComparePairsUpload(self, request_iterator, context):
        # As CompareUpload: every card's statistics at once, under the upload limits.
        request = None
        try:
            async with self.uploads.open(current_caller().name):
                async for part in self.uploads.watch(request_iterator, context):
                    request = add_pairs_part(request, part)
        except (AdmissionRefused, Refused) as error:
            await context.abort(error.code, str(error))
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the upload carried no part")
        return await self.ComparePairs(request, context)

    async def _comparable(self, card, run_id: str, context) -> ComparableRun:
        """A side of a comparison: the stored run `run_id`, else the card sent."""
        if not run_id:
            return ComparableRun.from_proto(card)
        return await self._stored(context, lambda store: stored_run(store, run_id))

    async def _stored(self, context, use: Callable[[RunStore], Result]) -> Result:
        """`use(store)`, off the event loop; aborts the call with UNAVAILABLE
        (no store, or it failed), NOT_FOUND (unknown run id),
        ALREADY_EXISTS (a corpus conflict), FAILED_PRECONDITION (the corpus
        check's gate) or INVALID_ARGUMENT (e.g. an unknown sort column)."""
        if self.store is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                "this gateway has no run store (start it with --store URL)")
        try:
            return await self.store.call(use)
        except (UnknownRun, UnknownCorpus, NothingStored, UnknownCampaign) as error:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(error))
        except CorpusConflict as error:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(error))
        except CheckGateRefused as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        except (InvalidQuery, CampaignRefused) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Refused as error:  # access.py's rules, applied in readings.py
            await context.abort(error.code, str(error))
        except StoreError as error:
            await context.abort(grpc.StatusCode.UNAVAILABLE, one_line(error))

    async def ListRuns(self, request, context):
        dataset_id = request.dataset_id if request.HasField("dataset_id") else None
        model_slug = request.model_slug if request.HasField("model_slug") else None
        caller = current_caller()
        runs = await self._stored(context, lambda store: runs_for(store, caller, dataset_id, model_slug))
        return gateway_pb2.ListRunsResponse(runs=[as_struct(run) for run in runs])

    async def GetRun(self, request, context):
        caller = current_caller()
        # A gold corpus's runs are read by maintainers only; a holdout run
        # is read whole by maintainers, at corpus level by anyone else.
        card = (await self._stored(context, lambda store: run_for(store, caller, request.run_id))).card
        entries = card.pop("entries")
        yield gateway_pb2.EvaluateProgress(run_card=await asyncio.to_thread(run_card_to_proto, card))
        for start in range(0, len(entries), STORED_ENTRIES_PER_MESSAGE):
            part = entries[start:start + STORED_ENTRIES_PER_MESSAGE]
            yield gateway_pb2.EvaluateProgress(entries=await asyncio.to_thread(_entry_messages, part))

    async def Leaderboard(self, request, context):
        if not request.dataset_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "dataset_id: required (the corpus id to rank runs of)")
        if request.limit < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "limit: must be 0 (every row) or positive")
        caller = current_caller()
        board = await self._stored(context, lambda store: leaderboard_for(
            store, caller, request.dataset_id,
            version=request.version if request.HasField("version") else None,
            sort=request.sort or "composite_score",
            descending=not request.ascending,
            all_submissions=request.all_submissions,
            include_disqualified=request.include_disqualified,
            official=request.official,
            limit=request.limit or None,
        ))
        return gateway_pb2.LeaderboardResponse(
            dataset_id=board["dataset_id"], corpus_version=board["corpus_version"] or "", sort=board["sort"],
            rows=[as_struct(row) for row in board["rows"]], ranks_note=board["ranks_note"] or "",
        )

    # Held runs (maintainers, by RPC_ROLES): gateway/server/submissions.py holds them.

    async def ListHeldRuns(self, request, context):
        dataset_id = request.dataset_id if request.HasField("dataset_id") else None
        held = await self._stored(context, lambda store: store.held_runs(dataset_id))
        return gateway_pb2.ListRunsResponse(runs=[as_struct(run) for run in held])

    async def ReviewRun(self, request, context):
        if request.decision not in DECISIONS:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"decision: must be one of {', '.join(DECISIONS)}, "
                                                                  f"got {shown(request.decision)}")
        reviewer = current_caller().name
        try:
            run = await self._stored(context, lambda store: store.review_run(request.run_id, request.decision,
                                                                             request.note, reviewer))
        except NotHeld as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        log.info("run_reviewed", family="gateway", run_id=request.run_id, decision=request.decision, token=reviewer)
        return gateway_pb2.ReviewRunResponse(run=as_struct(run))

    # Community review campaigns (maintainers, by RPC_ROLES): gateway/review.

    async def CreateCampaign(self, request, context):
        campaign_request = CampaignRequest(
            name=request.name, run_ids=list(request.run_ids), reviewers=list(request.reviewers),
            items=request.items or DEFAULT_ITEMS, overlap=request.overlap or DEFAULT_OVERLAP,
            seed=request.seed if request.HasField("seed") else DEFAULT_SEED,
            reference_review=request.reference_review, created_by=current_caller().name)
        campaign = await self._stored(context, lambda store: create_campaign(store, campaign_request))
        log.info("campaign_created", family="gateway", campaign_id=campaign["campaign_id"],
                 token=campaign_request.created_by)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def ListCampaigns(self, request, context):
        campaigns = await self._stored(context, lambda store: store.list_campaigns())
        return gateway_pb2.ListCampaignsResponse(campaigns=[as_struct(campaign) for campaign in campaigns])

    async def CampaignResults(self, request, context):
        if request.export_format and request.export_format not in EXPORT_FORMATS:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"export_format: one of {', '.join(EXPORT_FORMATS)}, "
                                                                  f"got {shown(request.export_format)}")
        campaign = await self._stored(context, lambda store: results_of(store, request.campaign_id))
        exported = ""
        if request.export_format:
            exported = await self._stored(context, lambda store: export_campaign(store, campaign,
                                                                                 request.export_format))
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign), export=exported)

    # Campaigns that grow (maintainers): gateway/review/growth.py.

    async def AddCampaignReviewers(self, request, context):
        who = current_caller().name
        campaign = await self._grown(context, lambda store: add_reviewers(store, request.campaign_id,
                                                                          list(request.reviewers), who))
        log.info("campaign_reviewers_added", family="gateway", campaign_id=request.campaign_id, token=who)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def ExtendCampaign(self, request, context):
        who = current_caller().name
        campaign = await self._grown(context, lambda store: extend_items(store, request.campaign_id,
                                                                         request.items, who))
        log.info("campaign_extended", family="gateway", campaign_id=request.campaign_id, token=who)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def _grown(self, context, use):
        try:
            return await self._stored(context, use)
        except CampaignClosed as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        except CampaignChanged as error:
            await context.abort(grpc.StatusCode.ABORTED, str(error))

    async def CampaignAudit(self, request, context):
        changes = await self._stored(context, lambda store: store.campaign_audit(request.campaign_id))
        return gateway_pb2.CampaignAuditResponse(changes=[as_struct(change) for change in changes])

    # Registered corpora: the logic is gateway/server/corpora.py's.

    async def RegisterCorpus(self, request_iterator, context):
        message = await corpora.register_corpus(request_iterator, context, self.cards, self._stored)
        if self._floor_wanted():
            # The version's floor, in the background (the kinds it lacks; none when registered before).
            info = await self._stored(context, lambda store: store.corpus_info(message.id, message.version))
            self.floors.schedule(registered_floor(info))
        return message

    async def ListCorpora(self, request, context):
        return await corpora.list_corpora(context, self._stored)

    async def SetCorpusTier(self, request, context):
        return await corpora.set_corpus_tier(request, context, self.cards, self._stored)

    async def CheckCorpus(self, request, context):
        return await corpora.check_registered_corpus(request, context, self.cards, self._stored)

    async def GetSources(self, request, context):
        async for part in corpora.get_sources(request, context, self._stored):
            yield part

    async def Describe(self, request, context):
        maintainer = is_maintainer(current_caller())
        families = []
        for name in FAMILIES:
            addresses = self.config.addresses(name)
            if not addresses:
                families.append(gateway_pb2.FamilyStatus(family=name, error="not configured"))
            for address in addresses:
                # Internal addresses are for maintainers (gRPC's details name them too).
                status = gateway_pb2.FamilyStatus(family=name, address=address if maintainer else "",
                                                  listens="loopback" if is_loopback(address) else "network")
                try:
                    status.description.CopyFrom(await self._client(name, address).describe())
                    status.reachable = True
                except grpc.aio.AioRpcError as error:
                    status.error = f"{error.code().name}: {error.details()}" if maintainer else error.code().name
                families.append(status)
        languages = [
            gateway_pb2.LanguageInfo(code=c.code, name=c.name, profile=c.profile,
                                     bleu_tokenizer=c.surface.bleu_tokenizer, aliases=list(c.aliases),
                                     scripts=list(c.scripts))
            for c in self.cards.cards()
        ]
        return gateway_pb2.GatewayDescription(version=__version__, families=families, languages=languages,
                                              generic_card=self.cards.generic_description())


GATEWAY_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].full_name
FAMILY_SERVICE = family_pb2.DESCRIPTOR.services_by_name["Family"].full_name
