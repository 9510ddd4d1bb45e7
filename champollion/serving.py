"""Starting a gRPC server the way every Champollion server starts: the given
servicers plus standard health checking and reflection, so grpcurl and
Kubernetes gRPC probes work against any of them; over TLS when given a
certificate and key, then with a plaintext port answering health checks
only, for probes that speak no TLS (Kubernetes' gRPC probes)."""
from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

# Batches of a few hundred long entries exceed gRPC's 4 MiB default.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Accept the gateway's keepalive pings (every 30 s, also between calls).
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
    # Close connections after a while (gracefully, letting batches finish) so
    # that clients re-resolve DNS and spread work onto replicas added since.
    ("grpc.max_connection_age_ms", 300_000),
    ("grpc.max_connection_age_grace_ms", 300_000),
]


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
    server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=list(interceptors))
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
