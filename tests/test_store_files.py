"""A SQLite store's files are its owner's alone (issue 33 finding 7): another
local user read gold references with sqlite3 from a store created 0644. The
file, its -wal and -shm and the folders made for it are created 0600/0700
whatever the umask, and `champollion db` warns about an existing store
that others may read."""
from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from gateway.store import RunStore
from gateway.store.location import exposed_files, parse_store_url
from tests.conftest import run_cli


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def permissive_umask():
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _store_with_a_write(url: str) -> None:
    store = RunStore.open(url)
    try:
        store.ping()
        store.list_corpora()
    finally:
        store.close()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o777])
def test_a_new_store_is_owner_only_whatever_the_umask(tmp_path, umask):
    folder = tmp_path / "shared" / "champollion"
    path = folder / "runs.sqlite"
    previous = os.umask(umask)
    try:
        store = RunStore.open(f"sqlite:///{path}")
        try:
            # A reader holding the database open keeps the WAL and SHM files there.
            reader = sqlite3.connect(path)
            reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
            wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
            assert wal.exists() and shm.exists()
            assert (_mode(path), _mode(wal), _mode(shm)) == (0o600, 0o600, 0o600)
            reader.close()
        finally:
            store.close()
    finally:
        os.umask(previous)
    assert _mode(folder) == 0o700 and _mode(folder.parent) == 0o700
    assert exposed_files(parse_store_url(f"sqlite:///{path}")) == []


def test_an_existing_folder_is_left_as_it_is(tmp_path, permissive_umask):
    tmp_path.chmod(0o755)
    path = tmp_path / "runs.sqlite"
    _store_with_a_write(f"sqlite:///{path}")
    assert _mode(tmp_path) == 0o755 and _mode(path) == 0o600


def test_db_warns_about_a_store_others_may_read(tmp_path, capsys, permissive_umask):
    folder = tmp_path / "store"
    path = folder / "runs.sqlite"
    url = f"sqlite:///{path}"
    _store_with_a_write(url)
    assert run_cli("db", "upgrade", "--store", url) == 0
    assert "warning" not in capsys.readouterr().err

    # A store made before (or copied with cp): readable by everyone.
    path.chmod(0o644)
    folder.chmod(0o755)
    assert run_cli("db", "upgrade", "--store", url) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        f"champollion: warning: store file {path} has mode 0644: other users than its owner may open it "
        f"(chmod 600 {path})",
        f"champollion: warning: store folder {folder} has mode 0755: other users than its owner may list it "
        f"(chmod 700 {folder})",
    ]


def test_memory_and_postgresql_stores_have_no_files():
    assert exposed_files(parse_store_url("sqlite://")) == []
    assert exposed_files(parse_store_url("postgresql://user:secret@db.example/champollion")) == []


def test_a_short_password_is_hidden_without_mangling_the_message():
    """`db upgrade` against an unreachable PostgreSQL with password `p` used to
    print `***ort 59432 failed`: every "p" of the message was masked."""
    from sqlalchemy import exc
    from sqlalchemy.engine import make_url

    from gateway.store.errors import StoreError
    from gateway.store.location import database_errors

    url = make_url("postgresql+psycopg://user:p@127.0.0.1:59432/db")
    refused = exc.DBAPIError("SELECT 1", {}, Exception(
        'connection to server at "127.0.0.1", port 59432 failed: password p was refused for user "user"'))
    with pytest.raises(StoreError) as raised:
        with database_errors(url):
            raise refused
    message = str(raised.value)
    assert "port 59432 failed: password *** was refused" in message
    assert " p " not in message and "***ort" not in message
