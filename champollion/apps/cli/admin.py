"""Commands that talk to no gateway: `token new` and `db upgrade`."""
from __future__ import annotations

import sys

from champollion.apps.cli.common import EXIT_FAILURE, EXIT_INVALID_INPUT, CliError, store_url
from gateway.server.config import ConfigError
from gateway.server.tokens import new_token, token_expiry, token_line
from gateway.store import RunStore, StoreError
from gateway.store.location import parse_store_url, redact


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


def cmd_db_upgrade(args) -> int:
    url = store_url(args)
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
