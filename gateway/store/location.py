"""Where the store lives: the default URL, URL validation and the engine.
Messages name the database by its URL with the password hidden."""
from __future__ import annotations

import os
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


def redact(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _in_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


def open_engine(url: URL) -> Engine:
    """An engine for a parsed URL; a SQLite file's folder is created."""
    if url.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    if _in_memory(url):
        # One connection shared, or every connection would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        try:
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the folder of store {redact(url)}: {error.strerror}") from None
        engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


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
            reason = reason.replace(str(url.password), "***")
        raise StoreError(f"store {redact(url)}: {reason}") from None
