"""Starting servers: the embedded stack (every implemented family plus the
gateway, in one process on loopback ports, talking real gRPC) and the
single-family / gateway-only processes of `champollion serve`.

Families score in worker processes (services/workers.py) when given two or
more workers: the stack's families share one pool of them, by default one
per core; 0 or 1 scores in the server's threads."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import structlog

from champollion.eval.v1 import family_pb2_grpc, gateway_pb2_grpc
from champollion.core.serving import ServerTls, ignore_grpc_poller_wakeups, start_server
from gateway.server.auth import AccessControl
from gateway.server.config import GatewayConfig
from gateway.server.servicer import FAMILY_SERVICE, GATEWAY_SERVICE, GatewayServicer
from gateway.server.spill import remove_stale as remove_stale_spills
from gateway.server.tokens import TokenFile
from services.registry import EXTRA_SERVICES, IMPLEMENTED, create_servicer, scorer_spec
from services.workers import WorkerPool, default_workers

log = structlog.get_logger()

# Where the embedded stack's families listen, whatever the gateway's host: a
# family answers anyone who reaches it, without a token or TLS, so only this
# machine may (the gateway in front of them is what callers reach).
FAMILY_HOST = "127.0.0.1"


async def start_family(
    name: str, address: str, servicer=None, languages: list[str] | None = None, tls: ServerTls | None = None,
    health_address: str | None = None, workers: int | None = None, pool: WorkerPool | None = None,
    tokens: TokenFile | None = None, max_text_chars: int | None = None, **options,
) -> tuple[grpc.aio.Server, int]:
    """One family's server (over TLS with `tls`, health checks also in
    plaintext on `health_address`; asking every call for a maintainer's
    token of `tokens`, the gateway's, when given: a family deployed apart);
    `languages` restricts what it serves
    (structural), `options` go to the family's factory (semantic: device,
    comet_dir, ...); it refuses texts longer than `max_text_chars` (None:
    the default, the gateway's). It scores in `pool`'s worker processes, or with
    `workers` >= 2 in a pool of its own, stopped when the server stops; a
    `servicer` given scores in its own threads."""
    own_pool = None
    if servicer is None:
        # The limit is the servicer's, passed only when given (it is no factory option).
        limit = {} if max_text_chars is None else {"max_text_chars": max_text_chars}
        servicer = create_servicer(name, languages, **limit, **options)
        spec = scorer_spec(name, languages, options)
        if pool is None and workers is not None and workers >= 2:
            pool = own_pool = WorkerPool(workers)
        if pool is not None:
            pool.warm([spec])  # the workers load this family's models before its first batch
            servicer.use_workers(pool, spec)
    service_names = [FAMILY_SERVICE]

    def register(server):
        family_pb2_grpc.add_FamilyServicer_to_server(servicer, server)
        if name in EXTRA_SERVICES:
            service_names.extend(EXTRA_SERVICES[name](server, servicer))

    server, port = await start_server(register, service_names, address, tls=tls, health_address=health_address,
                                      interceptors=[AccessControl(tokens)] if tokens is not None else [])
    if own_pool is not None:
        closer = asyncio.get_running_loop().create_task(_close_after(server, own_pool))
        _POOL_CLOSERS.add(closer)
        closer.add_done_callback(_POOL_CLOSERS.discard)
    return server, port


# Tasks that stop a single family's workers when its server stops, kept so that they are not collected.
_POOL_CLOSERS: set[asyncio.Task] = set()


async def _close_after(server: grpc.aio.Server, pool: WorkerPool) -> None:
    try:
        await server.wait_for_termination()
    finally:
        await pool.aclose(timeout=2.0)


async def start_gateway(
    config: GatewayConfig, address: str, tokens: TokenFile | None = None, tls: ServerTls | None = None,
    health_address: str | None = None, interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> tuple[grpc.aio.Server, int, GatewayServicer]:
    """The gateway's server: callers need one of `tokens` (None: open to
    all, as maintainers); over TLS with `tls`, as start_family; `interceptors`
    see every call after the access check. Spills left by a gateway that was
    killed mid-run are removed first."""
    stale = remove_stale_spills()
    if stale:
        log.info("stale_spills_removed", family="gateway", count=len(stale))
    servicer = GatewayServicer(config)
    if servicer.store is not None:
        await servicer.store.open()  # migrates an empty database before the first run
    server, port = await start_server(
        lambda server: gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server),
        [GATEWAY_SERVICE],
        address,
        interceptors=[AccessControl(tokens), *interceptors],
        tls=tls,
        health_address=health_address,
    )
    return server, port, servicer


@dataclass
class RunningStack:
    gateway_address: str
    family_addresses: dict[str, str]
    servers: list = field(default_factory=list)
    gateway: GatewayServicer | None = None
    family_servers: dict = field(default_factory=dict)
    worker_pools: list[WorkerPool] = field(default_factory=list)


async def start_stack(
    host: str = "127.0.0.1",
    gateway_port: int = 0,
    families: tuple[str, ...] | None = None,
    batch_size: int | None = None,
    remote_families: dict[str, str] | None = None,
    servicers: dict | None = None,
    store: str | None = None,
    family_options: dict | None = None,
    tokens: TokenFile | None = None,
    tls: ServerTls | None = None,
    workers: int | None = None,
    max_text_chars: int | None = None,
    floor_runs: bool = False,
    upload_idle_seconds: float | None = None,
    upload_deadline_seconds: float | None = None,
    max_open_uploads: int | None = None,
    socket_dir: Path | None = None,
    gateway_interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> RunningStack:
    """Every implemented family (or those named) on a free loopback port
    (FAMILY_HOST, whatever `host` says), then the gateway on `host`.
    `remote_families` adds families already running elsewhere;
    `servicers` replaces a family's servicer (tests inject failures so);
    `store` is the gateway's run store URL (None: nothing is stored);
    `family_options` go to every family's factory (`serve`'s languages,
    device, comet_dir: each family takes what it uses); `tokens` and `tls`
    are the gateway's (see start_gateway); `max_text_chars`, the longest
    text the gateway and the families take (None: the default); `upload_idle_seconds`,
    `upload_deadline_seconds` and `max_open_uploads`, the gateway's upload limits
    (GatewayConfig; None: the default). Families score in `workers`
    processes (default: one per core; 0 or 1: in threads), one pool shared
    by all families (a core a finished family leaves helps a busy one).
    With `socket_dir` every server listens on a Unix socket there instead
    (gateway.sock, <family>.sock: a background stack's, reached by its
    owner only); `gateway_interceptors` go to the gateway (start_gateway)."""
    servicers = servicers or {}
    names = families if families is not None else IMPLEMENTED
    workers = default_workers() if workers is None else workers
    pools = [WorkerPool(workers)] if workers >= 2 else []
    # One limit for the gateway and its families: a text the gateway lets
    # through is never refused by a family.
    limit = {} if max_text_chars is None else {"max_text_chars": max_text_chars}
    servers, addresses, by_family = [], {}, {}
    for name in (*names, *(n for n in servicers if n not in names)):
        pool = pools[0] if pools and name not in servicers else None
        listen = f"unix:{socket_dir / f'{name}.sock'}" if socket_dir else f"{FAMILY_HOST}:0"
        server, port = await start_family(name, listen, servicers.get(name), pool=pool, **limit,
                                          **(family_options or {}))
        servers.append(server)
        by_family[name] = server
        addresses[name] = listen if socket_dir else f"{FAMILY_HOST}:{port}"
    uploads = {name: value for name, value in (("upload_idle_seconds", upload_idle_seconds),
                                               ("upload_deadline_seconds", upload_deadline_seconds),
                                               ("max_open_uploads", max_open_uploads)) if value is not None}
    # Floor runs: off unless asked (a CLI's embedded gateway ends with its
    # command, before a floor built in the background could be stored).
    config = GatewayConfig(families={**addresses, **(remote_families or {})}, store=store, floor_runs=floor_runs,
                           **limit, **uploads)
    if batch_size:
        config.batch_size = batch_size
    listen = f"unix:{socket_dir / 'gateway.sock'}" if socket_dir else f"{host}:{gateway_port}"
    server, port, gateway = await start_gateway(config, listen, tokens, tls, interceptors=gateway_interceptors)
    servers.append(server)
    return RunningStack(listen if socket_dir else f"{host}:{port}", addresses, servers, gateway, by_family, pools)


async def stop_stack(stack: RunningStack) -> None:
    if stack.gateway is not None:
        await stack.gateway.close()
    for server in reversed(stack.servers):
        await server.stop(grace=1.0)
    for pool in stack.worker_pools:
        await pool.aclose(timeout=2.0)


class EmbeddedStack:
    """The stack in a background thread with its own event loop, for callers
    that are synchronous (the CLI, tests, benchmarks):

        with EmbeddedStack() as stack:
            channel = grpc.insecure_channel(stack.gateway_address)
    """

    def __init__(self, **options):
        self._options = options
        self._loop = asyncio.new_event_loop()
        ignore_grpc_poller_wakeups(self._loop)
        self._thread = threading.Thread(target=self._loop.run_forever, name="champollion-stack", daemon=True)
        self.stack: RunningStack | None = None

    def __enter__(self) -> RunningStack:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(start_stack(**self._options), self._loop)
        try:
            self.stack = future.result(timeout=60)
        except BaseException:  # Ctrl-C while starting too: nothing left running
            future.cancel()
            self.__exit__()
            raise
        return self.stack

    def run(self, coroutine, timeout: float = 300):
        """Runs `coroutine` on the stack's event loop and returns its result
        (tests wait for the gateway's background floor builds so)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=timeout)

    def stop_family(self, name: str) -> None:
        """Stops one family's server now (tests of failover use this)."""
        server = self.stack.family_servers[name]
        asyncio.run_coroutine_threadsafe(server.stop(None), self._loop).result(timeout=30)

    def __exit__(self, *exc_info) -> None:
        """Stops the servers, then ends every task still on the loop (a
        call's handler cut short by Ctrl-C) before the loop closes, so none
        is destroyed pending."""
        asyncio.run_coroutine_threadsafe(_shut_down(self.stack), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


async def _shut_down(stack: RunningStack | None) -> None:
    if stack is not None:
        await stop_stack(stack)
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()
