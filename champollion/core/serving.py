"""Starting a gRPC server the way every Champollion server starts: the given
servicers plus standard health checking and reflection, so grpcurl and
Kubernetes gRPC probes work against any of them; over TLS when given a
certificate and key, then with a plaintext port answering health checks
only, for probes that speak no TLS (Kubernetes' gRPC probes)."""
from __future__ import annotations

import asyncio
import inspect
import ssl
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

log = structlog.get_logger()

# Batches of a few hundred long entries exceed gRPC's 4 MiB default.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# The gateway pings each family this often and gives up on one silent as long
# (gateway.server.fanout.CHANNEL_OPTIONS).
KEEPALIVE_SECONDS = 2
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Accept the gateway's keepalive pings (also between calls and during a
    # long batch, when no data flows), not only the 5-minute default.
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_SECONDS * 1000 // 2),
    # Close connections after a while (gracefully, letting batches finish) so
    # that clients re-resolve DNS and spread work onto replicas added since.
    ("grpc.max_connection_age_ms", 300_000),
    ("grpc.max_connection_age_grace_ms", 300_000),
]


class _Undecodable:
    """What a request that does not parse deserializes to, so that the
    handler answers INVALID_ARGUMENT: gRPC itself would answer UNKNOWN."""

    def __init__(self, error: Exception):
        self.error = error


def _lenient(deserialize):
    def read(data: bytes):
        try:
            return deserialize(data)
        except Exception as error:  # protobuf's DecodeError, a nesting past its limit
            return _Undecodable(error)
    return read


async def _refuse_undecodable(request, context, method: str) -> None:
    if isinstance(request, _Undecodable):
        # protobuf refuses messages nested more than 100 levels deep (a Struct in a Struct...).
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                            f"{method}: the request is not a valid protobuf message of this RPC's type, or is "
                            f"nested more than 100 levels deep ({type(request.error).__name__})")


@contextmanager
def _logged(method: str, context):
    try:
        yield
    except grpc.aio.AbortError:  # the handler chose its status
        raise
    except Exception:
        if context.cancelled() or context.done():
            # The client left (Ctrl-C, a deadline): writing to the finished
            # call fails, which is no fault of the server's.
            log.debug("rpc_abandoned", method=method, exc_info=True)
        else:
            log.exception("rpc_failed", method=method)
        raise


class CallBoundary(grpc.aio.ServerInterceptor):
    """Around every handler of the server: a request (or a part of a
    streamed one) that does not decode is answered INVALID_ARGUMENT, and an
    exception the handler did not turn into a status (gRPC answers UNKNOWN)
    is logged with its traceback."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = handler_call_details.method
        field = f"{'stream' if handler.request_streaming else 'unary'}_{'stream' if handler.response_streaming else 'unary'}"
        behavior = getattr(handler, field)

        async def check(request, context):
            """The request, or for a streamed one each part as it comes, checked."""
            if not handler.request_streaming:
                await _refuse_undecodable(request, context, method)
                return request

            async def parts():
                async for part in request:
                    await _refuse_undecodable(part, context, method)
                    yield part
            return parts()

        # gRPC runs a plain function in a thread: the wrapper keeps the kind.
        if inspect.isasyncgenfunction(behavior):
            async def checked(request, context):
                with _logged(method, context):
                    async for response in behavior(await check(request, context), context):
                        yield response
        else:
            async def checked(request, context):
                with _logged(method, context):
                    return await behavior(await check(request, context), context)
        return handler._replace(request_deserializer=_lenient(handler.request_deserializer), **{field: checked})


class TlsError(ValueError):
    """A certificate or key a server cannot use; the message names the file."""


@dataclass(frozen=True)
class ServerTls:
    """A server's certificate (PEM, the chain: its own first) and private key
    (PEM), as `serve --tls-cert/--tls-key` name them."""
    cert: Path
    key: Path

    def credentials(self) -> grpc.ServerCredentials:
        """Checked first (gRPC would only say it cannot bind): both files
        readable, PEM, and the key the certificate's."""
        cert, key = _read(self.cert), _read(self.key)
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.cert, self.key)
        except ssl.SSLError as error:
            raise TlsError(f"{self.cert}, {self.key}: not a PEM certificate and its private key "
                           f"({error.reason or error})") from None
        return grpc.ssl_server_credentials([(key, cert)])


def ignore_grpc_poller_wakeups(loop: asyncio.AbstractEventLoop) -> None:
    """Keeps `loop` from printing grpc.aio's spurious BlockingIOError: with
    event loops in several threads of one process (the embedded stack's and
    a caller's), each loop is woken for a completion-queue event that only one
    of them reads, and the others' reads fail harmlessly (grpc issue #25364).
    Every other exception goes to the default handler."""
    def handle(running: asyncio.AbstractEventLoop, context: dict) -> None:
        spurious = isinstance(context.get("exception"), BlockingIOError) and "PollerCompletionQueue" in repr(
            context.get("handle"))
        if not spurious:
            running.default_exception_handler(context)

    loop.set_exception_handler(handle)


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise TlsError(f"cannot read {path}: {error.strerror}") from None


async def start_server(
    register: Callable[[grpc.aio.Server], None],
    service_names: Iterable[str],
    address: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: ServerTls | None = None,
    health_address: str | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Starts an aio server on `address` (port 0 picks a free one) and returns
    it with the bound port. `service_names` are the full names registered by
    `register`; each is reported SERVING to health checks. `interceptors` see
    every call (the gateway's access control); with `tls` the port speaks
    only TLS. `health_address` adds a plaintext port with health checks
    only, closed when the server stops."""
    credentials = tls.credentials() if tls else None
    server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[CallBoundary(), *interceptors])
    register(server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = list(service_names)
    reflection.enable_server_reflection(
        [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server,
    )
    port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind gRPC server to {address}")
    await server.start()
    for name in ("", *names):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    if health_address:
        await _serve_health_only(health, health_address, server)
    return server, port


# The tasks closing health-only servers, kept so that they are not collected.
_HEALTH_CLOSERS: set[asyncio.Task] = set()


async def _serve_health_only(health: HealthServicer, address: str, main: grpc.aio.Server) -> None:
    """`health` (the main server's, so both report the same) on a plaintext
    port of its own at `address`, until `main` stops."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot bind the health-check port to {address}")
    await server.start()

    async def close_with_main() -> None:
        await main.wait_for_termination()
        await server.stop(None)

    task = asyncio.ensure_future(close_with_main())
    _HEALTH_CLOSERS.add(task)
    task.add_done_callback(_HEALTH_CLOSERS.discard)
