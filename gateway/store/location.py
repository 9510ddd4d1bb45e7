"""Where the store lives: the default URL, URL validation and the engine.
Messages name the database by its URL with the password hidden.

A SQLite store holds gold references: its file is created 0600 and the
folders made for it 0700, whatever the umask (SQLite gives its -wal and
-shm files the database file's mode); `exposed_files` names what of an
existing store other local users may open (`champollion db` warns)."""
from __future__ import annotations

import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from gateway.store.errors import StoreError

URL_FORMS = "sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
# Seconds before an unreachable PostgreSQL is reported rather than waited on.
CONNECT_TIMEOUT = 5


def default_store_url() -> str:
    """$CHAMPOLLION_STORE, else runs.sqlite in the XDG data directory."""
    configured = os.environ.get("CHAMPOLLION_STORE")
    if configured:
        return configured
    data_home = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and to be ignored.
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return f"sqlite:///{base / 'champollion' / 'runs.sqlite'}"


def parse_store_url(text: str) -> URL:
    """The URL with its driver chosen (psycopg 3 for PostgreSQL)."""
    try:
        url = make_url(text)
    except (exc.ArgumentError, ValueError):
        # The text may hold a password, so it is not repeated.
        raise StoreError(f"corrupt store URL: expected {URL_FORMS}") from None
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "sqlite" and driver == "pysqlite":
        return url
    if backend == "postgresql" and driver in ("psycopg", "psycopg2"):  # psycopg2 is the implicit default
        if not url.host and not url.query.get("host"):
            raise StoreError(f"store URL {redact(url)} names no host: expected {URL_FORMS}")
        return url.set(drivername="postgresql+psycopg")
    raise StoreError(f"unsupported store URL {redact(url)}: expected {URL_FORMS}")


def absolute_store_url(text: str) -> str:
    """`text` with a relative SQLite path made absolute: a background stack
    (apps/launch/background.py), reached from any folder, must
    open the file the command means. Other URLs as they are."""
    url = parse_store_url(text)
    path = sqlite_path(url)
    if path is None or path.is_absolute():
        return text
    return url.set(database=str(path.resolve())).render_as_string(hide_password=False)


def redact(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _in_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


def open_engine(url: URL) -> Engine:
    """An engine for a parsed URL; a SQLite file and its folder are created
    owner-only."""
    if url.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    if _in_memory(url):
        # One connection shared, or every connection would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        path = sqlite_path(url)
        try:
            _private_folders(path.parent)
        except OSError as error:
            raise StoreError(f"cannot create the folder of store {redact(url)}: {error.strerror}") from None
        try:
            _private_file(path)
        except OSError as error:
            raise StoreError(f"cannot create store {redact(url)}: {error.strerror}") from None
        engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite store (None: PostgreSQL, or in memory)."""
    if url.get_backend_name() != "sqlite" or _in_memory(url):
        return None
    return Path(url.database).expanduser()


def _private_folders(folder: Path) -> None:
    """`folder` and any missing parent made 0700 (os.mkdir's mode is
    masked by the umask, so it is set again); existing folders untouched."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            continue  # made meanwhile by another process: left as it is
        os.chmod(made, 0o700)


def _private_file(path: Path) -> None:
    """An empty database file created 0600 (an empty file is an empty
    SQLite database), unless there is one."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(descriptor, 0o600)  # the umask may have taken the owner's bits too
    finally:
        os.close(descriptor)


def exposed_files(url: URL) -> list[str]:
    """One line for each of a SQLite store's file, -wal, -shm and folder
    that other users than its owner may use (any group or other permission
    bit); empty for PostgreSQL, in memory, or a store not there."""
    path = sqlite_path(url)
    if path is None:
        return []
    found = []
    for candidate, kind in ((path, "file"), (Path(f"{path}-wal"), "file"), (Path(f"{path}-shm"), "file"),
                            (path.parent, "folder")):
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
        except OSError:
            continue
        if kind == "folder" and mode & stat.S_ISVTX:
            continue  # a shared folder such as /tmp: its files' modes are what counts
        if mode & 0o077:
            private = "700" if kind == "folder" else "600"
            found.append(f"store {kind} {candidate} has mode {mode:04o}: other users than its owner may "
                         f"{'open' if kind == 'file' else 'list'} it (chmod {private} {candidate})")
    return found


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")  # run_entries rows go with their run
    # A gateway writing while a CLI reads: WAL lets readers proceed.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


@contextmanager
def database_errors(url: URL) -> Iterator[None]:
    """Turns the driver's errors into a one-line StoreError naming the store."""
    try:
        yield
    except exc.DBAPIError as error:
        reason = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else type(error.orig).__name__
        if url.password:
            # The password as a whole token only: a short one ("p") must not mangle the message ("***ort").
            reason = re.sub(rf"(?<![\w]){re.escape(str(url.password))}(?![\w])", "***", reason)
        raise StoreError(f"store {redact(url)}: {reason}") from None
