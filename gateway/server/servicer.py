"""gRPC glue for the gateway: Evaluate, EvaluateStream, EvaluateUpload,
Compare, ComparePairs, Describe, the stored runs' ListRuns, GetRun, Leaderboard, the
registered corpora's RegisterCorpus, ListCorpora, SetCorpusTier, GetSources,
CheckCorpus, the review of held runs (ListHeldRuns, ReviewRun), and review
campaigns (CreateCampaign, ListCampaigns, CampaignResults with its export,
AddCampaignReviewers, ExtendCampaign, CampaignAudit). Glue only:
a run is scored by gateway/server/runs.py, comparisons are
gateway/server/comparisons.py's, stored runs are read through
gateway/server/readings.py (who may see or do what: access.py), and every
refusal those raise is answered by the one table of
gateway/server/statuses.py."""
from __future__ import annotations

import asyncio
from typing import Callable, TypeVar

import grpc
import structlog

from champollion import __version__
from champollion.core.addresses import is_loopback
from champollion.core.cards import CardRegistry, default_registry
from champollion.core.run_card import dict_to_message, run_card_to_proto
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc, run_card_pb2
from gateway.card.metrics import FAMILIES
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.exports import check_format, export_campaign
from gateway.review.growth import add_reviewers, audit_of, extend_items
from gateway.server import corpora
from gateway.server.access import answer_view, is_maintainer
from gateway.server.admission import Admission, DeferredTurn, UploadLimits
from gateway.server.callers import current_caller
from gateway.server.comparisons import add_pairs_part, compare, compare_pairs
from gateway.server.config import GatewayConfig
from gateway.server.evaluation import ScoredRun
from gateway.server.fanout import FamilyClient
from gateway.server.floor import FloorCorpus, Floors, registered_floor
from gateway.server.readings import campaigns_for, held_runs_for, leaderboard_for, run_for, runs_for
from gateway.server.refusals import Exhausted, InvalidRequest, Unavailable
from gateway.server.runs import Runs
from gateway.server.spill import RunSpill
from gateway.server.statuses import answers_refusals
from gateway.server.stored_runs import GatewayStore, as_struct
from gateway.server.submissions import review_held_run
from gateway.store import RunStore
from gateway.store.version_keys import use_key_file

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


@answers_refusals
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
        self.runs = Runs(config, self.cards, self.store, self.clients_for)
        # Floor runs (gateway/server/floor.py), built in the background.
        self.floors = Floors(self.runs)

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
        async with self.admission.turn():
            floors: list[FloorCorpus] = []
            with RunSpill() as spill:
                scored = await self.runs.score(request, _no_more_parts(), spill, floors=floors)
                view = answer_view(scored.card)
                card = await asyncio.to_thread(run_card_to_proto, view.card)
                if view.entries:
                    async for chunk in self._entry_chunks(scored):
                        card.entries.extend(chunk)
        self._schedule_floors(floors)  # the answer is ready: the floor goes on without the caller
        return gateway_pb2.EvaluateResponse(run_card=card)

    async def EvaluateStream(self, request, context):
        async with self.admission.turn():
            async for message in self._stream(request, _no_more_parts()):
                yield message

    async def EvaluateUpload(self, request_iterator, context):
        # A gateway already full refuses before any part is read (a refused
        # upload costs nothing), as does a token with max_open_uploads open;
        # otherwise the run takes its turn when scoring starts (admission.py).
        if self.admission.busy():
            log.warning("run_refused", family="gateway", reason="busy", admitted=self.admission.admitted)
            raise Exhausted(self.admission.refusal())
        async with self.uploads.open(current_caller().name), self.admission.deferred() as turn:
            parts = self.uploads.watch(request_iterator, context)
            try:
                first_part = await parts.__anext__()
            except StopAsyncIteration:
                raise InvalidRequest("the upload carried no part") from None
            async for message in self._stream(first_part, parts, turn):
                yield message

    async def _stream(self, first_part, later_parts, turn: DeferredTurn | None = None):
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
            task = asyncio.ensure_future(self.runs.score(first_part, later_parts, spill, on_progress, floors, turn))
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
        # The logic is gateway/server/comparisons.py's; with run ids (or a
        # store, to name a secret version by its public id) through the store.
        caller = current_caller()
        return await self._through_store(context, [request.baseline_run_id, request.system_run_id],
                                         lambda store: compare(store, caller, request))

    async def CompareUpload(self, request_iterator, context):
        # Comparing needs both cards' statistics at once: the parts are
        # merged, under the upload limits (admission.py).
        request = gateway_pb2.CompareRequest()
        async with self.uploads.open(current_caller().name):
            async for part in self.uploads.watch(request_iterator, context):
                request.MergeFrom(part)
        return await self.Compare(request, context)

    async def ComparePairs(self, request, context):
        # The logic is gateway/server/comparisons.py's; with run ids (or a
        # store, to name a secret version by its public id) through the store.
        caller = current_caller()
        return await self._through_store(context, [run.run_id for run in request.runs],
                                         lambda store: compare_pairs(store, caller, request))

    async def ComparePairsUpload(self, request_iterator, context):
        # As CompareUpload: every card's statistics at once, under the upload limits.
        request = None
        async with self.uploads.open(current_caller().name):
            async for part in self.uploads.watch(request_iterator, context):
                request = add_pairs_part(request, part)
        if request is None:
            raise InvalidRequest("the upload carried no part")
        return await self.ComparePairs(request, context)

    async def _through_store(self, context, run_ids: list[str], use: Callable[[RunStore | None], Result]) -> Result:
        """`use(store)` off the event loop: through the store when there is
        one or a run id needs it (none: UNAVAILABLE), else `use(None)`."""
        if self.store is not None or any(run_ids):
            return await self._stored(context, use)
        return await asyncio.to_thread(use, None)

    async def _stored(self, context, use: Callable[[RunStore], Result]) -> Result:
        """`use(store)`, off the event loop; refusals.Unavailable without a
        store. What `use` raises (the store's errors, the rules' refusals)
        is answered by statuses.py's table."""
        if self.store is None:
            raise Unavailable("this gateway has no run store (start it with --store URL)")
        return await self.store.call(use)

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
        caller = current_caller()
        held = await self._stored(context, lambda store: held_runs_for(store, caller, dataset_id))
        return gateway_pb2.ListRunsResponse(runs=[as_struct(run) for run in held])

    async def ReviewRun(self, request, context):
        caller = current_caller()
        run = await self._stored(context, lambda store: review_held_run(store, caller, request.run_id,
                                                                        request.decision, request.note))
        return gateway_pb2.ReviewRunResponse(run=as_struct(run))

    # Community review campaigns (maintainers, by RPC_ROLES): gateway/review.

    async def CreateCampaign(self, request, context):
        campaign_request = CampaignRequest.given(
            name=request.name, run_ids=list(request.run_ids), reviewers=list(request.reviewers),
            items=request.items or None, overlap=request.overlap or None,
            seed=request.seed if request.HasField("seed") else None,
            reference_review=request.reference_review, created_by=current_caller().name,
            protocol=request.protocol or None, prefill=request.prefill or None,
            prefill_share=request.prefill_share if request.HasField("prefill_share") else None)
        campaign = await self._stored(context, lambda store: create_campaign(store, campaign_request))
        log.info("campaign_created", family="gateway", campaign_id=campaign["campaign_id"],
                 token=campaign_request.created_by)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def ListCampaigns(self, request, context):
        caller = current_caller()
        campaigns = await self._stored(context, lambda store: campaigns_for(store, caller))
        return gateway_pb2.ListCampaignsResponse(campaigns=[as_struct(campaign) for campaign in campaigns])

    async def CampaignResults(self, request, context):
        if request.export_format:
            check_format(request.export_format)
        campaign = await self._stored(context, lambda store: results_of(store, request.campaign_id))
        exported = ""
        if request.export_format:
            exported = await self._stored(context, lambda store: export_campaign(store, campaign,
                                                                                 request.export_format))
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign), export=exported)

    # Campaigns that grow (maintainers): gateway/review/growth.py.

    async def AddCampaignReviewers(self, request, context):
        who = current_caller().name
        campaign = await self._stored(context, lambda store: add_reviewers(store, request.campaign_id,
                                                                          list(request.reviewers), who))
        log.info("campaign_reviewers_added", family="gateway", campaign_id=request.campaign_id, token=who)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def ExtendCampaign(self, request, context):
        who = current_caller().name
        campaign = await self._stored(context, lambda store: extend_items(store, request.campaign_id,
                                                                         request.items, who))
        log.info("campaign_extended", family="gateway", campaign_id=request.campaign_id, token=who)
        return gateway_pb2.CampaignResponse(campaign=as_struct(campaign))

    async def CampaignAudit(self, request, context):
        changes = await self._stored(context, lambda store: audit_of(store, request.campaign_id))
        return gateway_pb2.CampaignAuditResponse(changes=[as_struct(change) for change in changes])

    # Registered corpora: the logic is gateway/server/corpora.py's.

    async def RegisterCorpus(self, request_iterator, context):
        message = await corpora.register_corpus(request_iterator, context, self.cards, self._stored)
        if self.runs.floor_wanted:
            # The version's floor, in the background (the kinds it lacks; none when registered before).
            info = await self._stored(context, lambda store: corpora.version_info(store, message.id, message.version,
                                                                                  maintainer=True))
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
