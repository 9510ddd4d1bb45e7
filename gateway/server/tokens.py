"""API tokens of `champollion serve --auth FILE`: the YAML file that names
them, and finding the token a caller presents.

    tokens:
      - {name: platform-ci, role: submitter, sha256: 9f86d0..., expires: 2027-06-30T00:00:00Z}
      - {name: alice, role: maintainer, sha256: 60303a...}

Only SHA-256 hashes are kept, so the file (a Kubernetes Secret, say) gives
away no token; `champollion token new` prints a fresh token with its line.
`expires` (optional; an ISO-8601 date or time, UTC unless it says
otherwise) ends a token's use. `serve` reads the file again on SIGHUP, so a
token is revoked by deleting its line and sending the signal.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from champollion.core.roles import ROLES
from gateway.server.config import ConfigError, read_yaml

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_ENTRY_FIELDS = ("name", "role", "sha256", "expires")
_REQUIRED_FIELDS = ("name", "role", "sha256")


@dataclass(frozen=True)
class Token:
    name: str
    role: str
    sha256: str
    # When the token stops being accepted (aware, UTC); None: never.
    expires: dt.datetime | None = None

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.expires is not None and (now or dt.datetime.now(dt.timezone.utc)) >= self.expires


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe: fits an HTTP header as is),
    never starting with "-": a command line would read `--token -x...` as a
    flag (one token in 64 did)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def token_line(name: str, role: str, token: str, expires: dt.datetime | None = None) -> str:
    """The tokens-file entry for `token`: one line of YAML."""
    entry = {"name": name, "role": role, "sha256": token_hash(token)}
    if expires is not None:
        entry["expires"] = expires.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return yaml.safe_dump([entry], default_flow_style=None, sort_keys=False, width=1000).strip()


class TokenFile:
    """The tokens a gateway accepts, and the file they were read from
    (`reload` reads it again: how a token is revoked without a restart)."""

    def __init__(self, tokens: list[Token], path: str | Path | None = None):
        self.tokens = tokens
        self.path = path

    def reload(self) -> int:
        """Reads the file again and uses its tokens from now on; a file that
        cannot be used raises ConfigError and the tokens stay as they were.
        Returns how many tokens the file has."""
        if self.path is None:
            raise ConfigError("these tokens were not read from a file")
        self.tokens = TokenFile.load(self.path).tokens  # one assignment: a call sees the old or the new list
        return len(self.tokens)

    def find(self, token: str) -> Token | None:
        """The configured token `token` is, or None. Hashes are compared in
        constant time, and all of them, so timing tells nothing about which
        (or how much of one) matched."""
        presented = token_hash(token)
        found = None
        for candidate in tuple(self.tokens):
            if hmac.compare_digest(presented, candidate.sha256):
                found = candidate
        return found

    @classmethod
    def load(cls, path: str | Path) -> "TokenFile":
        """The tokens file at `path`; a ConfigError names the file, then the
        entry and field that are wrong."""
        data = read_yaml(path)
        try:
            return cls(_parse(data), path)
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}") from None


def _parse(data) -> list[Token]:
    if not isinstance(data, dict) or set(data) != {"tokens"}:
        raise ConfigError("must be a mapping with one key, tokens: a list of {name, role, sha256}")
    entries = data["tokens"]
    if not isinstance(entries, list) or not entries:
        raise ConfigError("tokens: must be a non-empty list of {name, role, sha256[, expires]}")
    tokens, names, hashes = [], set(), set()
    for index, entry in enumerate(entries):
        where = f"tokens[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: must be a mapping with {', '.join(_ENTRY_FIELDS)}")
        unknown = sorted(map(str, set(entry) - set(_ENTRY_FIELDS)))
        if unknown:
            # A plain token pasted in by mistake would otherwise sit there unused.
            raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(_ENTRY_FIELDS)}")
        name, role, digest = (entry.get(key) for key in _REQUIRED_FIELDS)
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}.name: required, a non-empty string")
        if name in names:
            raise ConfigError(f"{where}.name: {name!r} is used by an earlier entry")
        if role not in ROLES:
            raise ConfigError(f"{where}.role: must be one of {', '.join(ROLES)}, got {role!r}")
        if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest.lower()):
            # The value is not echoed: it may be a token pasted in by mistake.
            raise ConfigError(f"{where}.sha256: must be the 64-hex-digit SHA-256 of the token "
                              f"(`champollion token new` prints it)")
        if digest.lower() in hashes:
            raise ConfigError(f"{where}.sha256: the same token as an earlier entry")
        names.add(name)
        hashes.add(digest.lower())
        try:
            expires = token_expiry(entry.get("expires"))
        except ConfigError as error:
            raise ConfigError(f"{where}.expires: {error}") from None
        tokens.append(Token(name, role, digest.lower(), expires))
    return tokens


def token_expiry(value) -> dt.datetime | None:
    """`expires` as an aware datetime: YAML reads an unquoted ISO-8601 date
    or time itself; a quoted one is parsed here. Without a zone it is UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ConfigError(f"must be an ISO-8601 date or time (2027-06-30 or 2027-06-30T12:00:00Z), "
                              f"got {value!r}") from None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise ConfigError(f"must be an ISO-8601 date or time, got {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
