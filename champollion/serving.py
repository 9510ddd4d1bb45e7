"""Starting a gRPC server the way every Champollion server starts: the given
servicers plus standard health checking and reflection, so grpcurl and
Kubernetes gRPC probes work against any of them."""
from __future__ import annotations

from typing import Callable, Iterable

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


async def start_server(
    register: Callable[[grpc.aio.Server], None],
    service_names: Iterable[str],
    address: str,
) -> tuple[grpc.aio.Server, int]:
    """Starts an aio server on `address` (port 0 picks a free one) and returns
    it with the bound port. `service_names` are the full names registered by
    `register`; each is reported SERVING to health checks."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    register(server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = list(service_names)
    reflection.enable_server_reflection(
        [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server,
    )
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind gRPC server to {address}")
    await server.start()
    for name in ("", *names):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port
