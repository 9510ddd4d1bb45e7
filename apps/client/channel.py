"""Channels to a gateway, opened the way every client command opens them:
the bearer token (if any) on every call, TLS when given the CA that signed
the gateway's certificate, and messages up to the servers' limit.

    with open_channel("gw.example:443", token="...", tls_ca=Path("ca.pem")) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import grpc

from champollion.core.addresses import is_loopback
from champollion.core.serving import MAX_MESSAGE_BYTES

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
# What gRPC reports (in an UNAVAILABLE call's details) when the TLS
# handshake fails, e.g. on a certificate signed by a CA the client lacks.
_HANDSHAKE_FAILURES = ("ssl", "handshake", "certificate")


class ChannelError(ValueError):
    """A token or CA the client cannot use; the message names which."""


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: tuple | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call. An interceptor
    rather than call credentials, which gRPC sends over TLS only: a token
    works on a loopback gateway without TLS too."""

    def __init__(self, token: str):
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details) -> _CallDetails:
        return _CallDetails(details.method, details.timeout, (*(details.metadata or ()), self._header),
                            details.credentials, details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_token(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_token(client_call_details), request_iterator)


def check_token(token: str, source: str) -> str:
    """`token` if it can travel in a header; ChannelError naming `source`
    (--token, CHAMPOLLION_TOKEN) if not. Its value is never echoed."""
    if not token or not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise ChannelError(f"{source}: a token is one word of printable ASCII (as `champollion token new` "
                           f"prints it), without spaces or line breaks")
    return token


def read_ca(path: Path) -> bytes:
    """The PEM certificates in `path`; ChannelError naming the file if unreadable."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ChannelError(f"--tls-ca: cannot read {path}: {error.strerror}") from None


def check_token_transport(address: str, tls: bool, insecure_token: bool = False) -> None:
    """A token goes in plaintext only to a loopback address (or where the
    caller says the network is trusted): anyone on the path could read it
    and use it. ChannelError otherwise, before anything is sent."""
    if not tls and not insecure_token and not is_loopback(address):
        raise ChannelError(f"refusing to send an API token in plaintext to {address}, which is not a loopback "
                           f"address: reach it over TLS (--tls-ca CA.pem or --tls), or give --insecure-token if "
                           f"the network itself is trusted")


def read_token_file(path: Path) -> str:
    """The token in file `path` (its first line, surrounding whitespace
    dropped): a token that never appears on a command line, so not in `ps`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ChannelError(f"--token-file: cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def open_channel(address: str, token: str | None = None, tls_ca: Path | None = None,
                 tls: bool = False, insecure_token: bool = False) -> grpc.Channel:
    """A channel to the gateway at `address`, sending `token` (checked with
    check_token by the caller) on every call: over TLS trusting the CA
    certificates in file `tls_ca`, or with `tls` trusting gRPC's default
    roots (public CAs, or $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH); else plaintext,
    where a token goes only to a loopback address unless `insecure_token`."""
    if token:
        check_token_transport(address, tls_ca is not None or tls, insecure_token)
    if tls_ca is not None or tls:
        credentials = grpc.ssl_channel_credentials(root_certificates=read_ca(tls_ca) if tls_ca else None)
        channel = grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
    else:
        channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    return grpc.intercept_channel(channel, BearerToken(token)) if token else channel


def is_untrusted_certificate(error: grpc.RpcError) -> bool:
    """Whether `error` is a failed TLS handshake: the server's certificate
    not signed by a trusted CA (or not for the name dialled)."""
    details = (error.details() or "").lower()
    return error.code() == grpc.StatusCode.UNAVAILABLE and any(word in details for word in _HANDSHAKE_FAILURES)
