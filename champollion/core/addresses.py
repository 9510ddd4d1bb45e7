"""Whether a gRPC address stays on this machine: what the CLI asks before
sending a token in plaintext, `serve` before binding an open gateway, and
the gateway when it says where its families listen."""
from __future__ import annotations

import ipaddress


def host_of(address: str) -> str:
    """The host of "host:port", "[v6]:port", "dns:///host:port" or a bare host."""
    target = address.split("///", 1)[-1] if "///" in address else address
    if target.startswith("["):
        return target[1:target.find("]")] if "]" in target else target[1:]
    if target.count(":") == 1:
        return target.rpartition(":")[0]
    return target  # a bare host, or a bare IPv6 address


def is_loopback(address: str) -> bool:
    """Whether `address` (a host, or host:port) is this machine's loopback:
    localhost, 127.0.0.0/8 or ::1; a unix socket counts. A host name other
    than localhost may resolve to anything: not loopback."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host = host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
