"""gRPC glue for the gateway: Evaluate, EvaluateStream, Describe."""
from __future__ import annotations

import asyncio
import time

import grpc
import structlog

from champollion import __version__
from champollion.cards import CardRegistry, default_registry
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from gateway.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.compare import ComparableRun, CompareRefused, compare_runs
from gateway.config import GatewayConfig
from gateway.evaluation import evaluate
from gateway.fanout import FamilyClient
from gateway.layout import FAMILIES
from gateway.run_card import dict_to_message, run_card_to_proto
from gateway.validation import InvalidRun, validate_request

log = structlog.get_logger()


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, config: GatewayConfig, cards: CardRegistry | None = None):
        self.config = config
        self.cards = cards or default_registry()
        # (family, address) -> client; channels are created lazily, inside the
        # server's event loop, and reused by every run.
        self._clients: dict[tuple[str, str], FamilyClient] = {}

    def _client(self, family: str, address: str) -> FamilyClient:
        key = (family, address)
        if key not in self._clients:
            self._clients[key] = FamilyClient(family, address, self.config.deadline_seconds)
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
        for client in self._clients.values():
            await client.close()

    async def _validated(self, request, context):
        try:
            return validate_request(request, self.cards)
        except InvalidRun as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))

    async def _run(self, request, context, on_progress=None):
        run = await self._validated(request, context)
        started = time.perf_counter()
        clients, unrouted = self.clients_for(run.target.code)
        try:
            card = await evaluate(request, run, self.config, clients, unrouted, on_progress)
        except Exception as error:  # a bug, not bad input: say so, keep serving
            log.exception("evaluate_failed", family="gateway", entries=len(request.corpus.entries))
            await context.abort(grpc.StatusCode.INTERNAL, f"evaluation failed: {type(error).__name__}: {error}")
        log.info(
            "evaluate",
            run_id=card["run_id"],
            family="gateway",
            entries=len(request.corpus.entries),
            duration_s=round(time.perf_counter() - started, 4),
        )
        return await asyncio.to_thread(run_card_to_proto, card)

    async def Evaluate(self, request, context):
        return gateway_pb2.EvaluateResponse(run_card=await self._run(request, context))

    async def EvaluateUpload(self, request_iterator, context):
        request = gateway_pb2.EvaluateRequest()
        async for part in request_iterator:
            request.MergeFrom(part)
        async for update in self.EvaluateStream(request, context):
            yield update

    async def EvaluateStream(self, request, context):
        updates: asyncio.Queue = asyncio.Queue()

        def on_progress(done: int, total: int) -> None:
            updates.put_nowait(gateway_pb2.EvaluateProgress(batches_done=done, batches_total=total))

        task = asyncio.ensure_future(self._run(request, context, on_progress))
        while not task.done() or not updates.empty():
            getter = asyncio.ensure_future(updates.get())
            finished, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in finished:
                yield getter.result()
            else:
                getter.cancel()
        card = task.result()
        yield gateway_pb2.EvaluateProgress(run_card=card)

    async def Compare(self, request, context):
        seed = request.seed if request.HasField("seed") else DEFAULT_SEED
        resamples = request.resamples or DEFAULT_RESAMPLES
        try:
            baseline = ComparableRun.from_proto(request.baseline)
            system = ComparableRun.from_proto(request.system)
            result = await asyncio.to_thread(compare_runs, baseline, system, resamples, seed)
        except CompareRefused as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        return dict_to_message(result, gateway_pb2.CompareResponse())

    async def Describe(self, request, context):
        families = []
        for name in FAMILIES:
            addresses = self.config.addresses(name)
            if not addresses:
                families.append(gateway_pb2.FamilyStatus(family=name, error="not configured"))
            for address in addresses:
                status = gateway_pb2.FamilyStatus(family=name, address=address)
                try:
                    status.description.CopyFrom(await self._client(name, address).describe())
                    status.reachable = True
                except grpc.aio.AioRpcError as error:
                    status.error = f"{error.code().name}: {error.details()}"
                families.append(status)
        languages = [
            gateway_pb2.LanguageInfo(code=c.code, name=c.name, profile=c.profile, bleu_tokenizer=c.bleu_tokenizer)
            for c in self.cards.cards()
        ]
        return gateway_pb2.GatewayDescription(version=__version__, families=families, languages=languages)


GATEWAY_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].full_name
FAMILY_SERVICE = family_pb2.DESCRIPTOR.services_by_name["Family"].full_name
