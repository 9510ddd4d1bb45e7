"""Commands that talk to no gateway: `token new`, `db upgrade` and `db version-key`."""
from __future__ import annotations

import sys

from apps.cli.common import EXIT_FAILURE, EXIT_INVALID_INPUT, CliError, store_url
from gateway.server.config import ConfigError
from gateway.server.tokens import new_token, token_expiry, token_line
from gateway.store import RunStore, StoreError
from gateway.store.location import exposed_files, parse_store_url, redact


def cmd_token_new(args) -> int:
    """A token for the caller to hand out (stdout, first line) and the line
    for the gateway's tokens file: nobody hashes by hand."""
    if not args.name.strip():
        raise CliError("--name: required, a non-empty name", EXIT_INVALID_INPUT)
    expires = None
    if args.expires:
        try:
            expires = token_expiry(args.expires)
        except ConfigError as error:
            raise CliError(f"--expires: {error}", EXIT_INVALID_INPUT) from None
    token = new_token()
    print(token)
    print("# the token above, for its user (shown once); the line below, under `tokens:` in the file of "
          "`serve --auth` (it keeps only the hash):", file=sys.stderr)
    print(f"  {token_line(args.name, args.role, token, expires)}")
    return 0


def warn_exposed_store(url: str | None) -> None:
    """One warning line on stderr for each file or folder of a SQLite store
    that other local users may read (the store holds gold references)."""
    if url is None:
        return
    try:
        lines = exposed_files(parse_store_url(url))
    except StoreError:
        return  # the command itself reports a bad URL
    for line in lines:
        print(f"champollion: warning: {line}", file=sys.stderr)


def cmd_db_upgrade(args) -> int:
    url = store_url(args)
    warn_exposed_store(url)
    try:
        store = RunStore.open(url)  # opening migrates; upgrade says so explicitly
        try:
            store.upgrade()
        finally:
            store.close()
    except StoreError as error:
        raise CliError(str(error), EXIT_FAILURE) from None
    print(f"store {redact(parse_store_url(url))} is at the latest schema", file=sys.stderr)
    return 0


def cmd_db_version_key(args) -> int:
    """`db version-key new|rotate`: writes the key file (0600) and, unless
    --no-store, stores every corpus version's public id under it; after a
    rotation old public ids stop resolving."""
    from pathlib import Path

    from gateway.store import version_keys

    url = store_url(args)
    warn_exposed_store(url)
    parsed = parse_store_url(url) if url else None
    path = Path(args.version_key) if args.version_key else version_keys.configured_path(parsed)
    if path is None:
        raise CliError("--version-key: required (no $CHAMPOLLION_VERSION_KEY, and the store is not a SQLite file "
                       "to keep the key beside)", EXIT_INVALID_INPUT)
    rotate = args.version_key_command == "rotate"
    try:
        version_keys.write_key_file(path, version_keys.new_key(), replace=rotate)
        key = version_keys.VersionKey(version_keys.read_key_file(path), str(path), True)
    except version_keys.VersionKeyError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    print(f"version key {path} {'rotated' if rotate else 'made'} (key id {key.key_id}); keep it outside the "
          f"store and give it to the gateway (config version_key_file or ${version_keys.ENVIRONMENT})",
          file=sys.stderr)
    if url is None:
        return 0
    from gateway.store.corpora import refresh_public_versions
    from gateway.store.location import database_errors, open_engine

    try:
        RunStore.open(url).close()  # migrated to the latest schema first
        engine = open_engine(parsed)
        try:
            with database_errors(parsed), engine.begin() as connection:
                changed = refresh_public_versions(connection, key)
        finally:
            engine.dispose()
    except StoreError as error:
        raise CliError(str(error), EXIT_FAILURE) from None
    print(f"store {redact(parsed)}: {changed} corpus version{'' if changed == 1 else 's'} given public ids under "
          f"this key{'; the previous ids no longer resolve' if rotate else ''}", file=sys.stderr)
    return 0
