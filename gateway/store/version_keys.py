"""The version key (docs/store-and-corpora.md, "Versions"): the server-side
secret under which a secret-tier corpus version's public id is derived
(gateway/card/identity.py keyed_version). It is never stored in the
database: a file of its own, 0600, one line of 64 hex digits, made by
`champollion db version-key new|rotate`.

Which key a process uses, first found:
1. the file named by `use_key_file` (gateway config `version_key_file`,
   `--version-key FILE`);
2. the file named by `$CHAMPOLLION_VERSION_KEY`;
3. for a SQLite store in a file, `<that file>.version-key` beside it (made,
   0600, the first time a corpus is registered or changes tier without a key);
4. else (PostgreSQL or an in-memory SQLite without a key configured) a random
   key of this process only, with a warning: the public ids it derives are
   stored and keep resolving, but a later process derives none for new
   versions that agree with them until a key is configured.

A key file is read again whenever it changes (inode, size, mtime), so `db
version-key rotate` takes effect in a running gateway at once."""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

import structlog

from gateway.store.errors import StoreError

log = structlog.get_logger()

ENVIRONMENT = "CHAMPOLLION_VERSION_KEY"
BESIDE_SUFFIX = ".version-key"
KEY_BYTES = 32
KEY_ID_CHARS = 16


class VersionKeyError(StoreError):
    """A version key file that cannot be read, written or parsed."""


@dataclass(frozen=True)
class VersionKey:
    key: bytes
    # Where it came from: a file's path, or "process" for the random fallback.
    source: str
    # False for the random key of this process only.
    persistent: bool

    @property
    def key_id(self) -> str:
        return key_id(self.key)


def key_id(key: bytes) -> str:
    """A short name of a key, kept with each public id it derived
    (corpora.version_key_id), so a rotated key's ids are told apart; it
    reveals nothing of the key."""
    return hmac.new(key, b"champollion version key id", hashlib.sha256).hexdigest()[:KEY_ID_CHARS]


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def parse_key(text: str, where: str) -> bytes:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) != 1:
        raise VersionKeyError(f"version key {where}: expected one line of {2 * KEY_BYTES} hex digits")
    try:
        key = bytes.fromhex(lines[0])
    except ValueError:
        raise VersionKeyError(f"version key {where}: not hex digits") from None
    if len(key) < KEY_BYTES:
        raise VersionKeyError(f"version key {where}: {len(key)} bytes, at least {KEY_BYTES} needed")
    return key


_read_cache: dict[str, tuple[tuple[int, int, int], bytes]] = {}


def read_key_file(path: str | Path) -> bytes:
    """The key in `path` (re-read when the file changed)."""
    path = Path(path)
    try:
        stat = path.stat()
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = _read_cache.get(str(path))
        if cached and cached[0] == stamp:
            return cached[1]
        key = parse_key(path.read_text(encoding="ascii"), str(path))
    except OSError as error:
        raise VersionKeyError(f"version key {path}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise VersionKeyError(f"version key {path}: not hex digits") from None
    _read_cache[str(path)] = (stamp, key)
    return key


def write_key_file(path: str | Path, key: bytes, replace: bool = False) -> None:
    """Writes `key` to `path`, owner-only (0600) whatever the umask; refuses
    an existing file unless `replace` (rotation), which swaps it atomically."""
    path = Path(path)
    if path.exists() and not replace:
        raise VersionKeyError(f"version key {path}: exists already (rotate it with `champollion db version-key "
                              f"rotate`)")
    if replace and not path.exists():
        raise VersionKeyError(f"version key {path}: no such file to rotate (make one with `champollion db "
                              f"version-key new`)")
    text = f"# champollion version key: keep it outside the store and its backups\n{key.hex()}\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".version-key-", dir=path.parent)
        try:
            os.fchmod(descriptor, 0o600)
            with os.fdopen(descriptor, "w", encoding="ascii") as file:
                file.write(text)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise VersionKeyError(f"version key {path}: cannot be written ({error.strerror or error})") from None


_configured: Path | None = None
_process_key: bytes | None = None


def use_key_file(path: str | Path | None) -> None:
    """The key file this process uses before any other (None: back to the
    environment and the store's side); checked at once."""
    global _configured
    if path is None:
        _configured = None
        return
    read_key_file(path)
    _configured = Path(path)


def beside_store(database: str | None) -> Path | None:
    """The key file beside a SQLite database file (None for in-memory)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database + BESIDE_SUFFIX)


def configured_path(url=None) -> Path | None:
    """The key file that applies to a store at `url` (a SQLAlchemy URL), if
    one is named or exists; the side file even when it does not exist yet."""
    if _configured is not None:
        return _configured
    named = os.environ.get(ENVIRONMENT, "").strip()
    if named:
        return Path(named)
    if url is not None and url.get_backend_name() == "sqlite":
        return beside_store(url.database)
    return None


def key_for(url=None, create: bool = False) -> VersionKey | None:
    """The key for the store at `url` (see the module's docstring).
    `create`: make the side file of a SQLite store, or take the process's
    random key, when there is none; else None when none is found."""
    global _process_key
    path = configured_path(url)
    if path is not None:
        named = _configured is not None or os.environ.get(ENVIRONMENT, "").strip()
        if path.exists() or named:
            return VersionKey(read_key_file(path), str(path), True)
        if create:
            try:
                write_key_file(path, new_key())
            except VersionKeyError:
                if not path.exists():  # another process may have just made it
                    raise
            log.info("version_key_created", family="gateway", path=str(path))
            return VersionKey(read_key_file(path), str(path), True)
        return None
    if _process_key is None:
        if not create:
            return None
        _process_key = new_key()
        log.warning("version_key_missing", family="gateway",
                    message=f"no version key configured (gateway config version_key_file, --version-key, "
                            f"${ENVIRONMENT}): secret-tier public ids are derived under a key of this process only")
    return VersionKey(_process_key, "process", False)
