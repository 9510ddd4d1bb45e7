"""`champollion web`: the web front (apps/web) under uvicorn,
over a run store, until SIGINT or SIGTERM."""
from __future__ import annotations

import os
from pathlib import Path

from apps.cli.common import EXIT_INVALID_INPUT, CliError
from apps.cli.common import store_url as _store_url
from champollion.core.addresses import is_loopback

SECRET_ENV = "CHAMPOLLION_WEB_SECRET"
MIN_SECRET_CHARS = 32


def _secret(args) -> str | None:
    """The key that signs session cookies: --secret-file, else
    $CHAMPOLLION_WEB_SECRET, else None (a random key: sessions end when the
    front restarts, and replicas do not share them)."""
    if args.secret_file:
        try:
            secret = Path(args.secret_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise CliError(f"--secret-file: cannot read {args.secret_file}: {error}", EXIT_INVALID_INPUT) from None
    else:
        secret = os.environ.get(SECRET_ENV, "").strip()
        if not secret:
            return None
    if len(secret) < MIN_SECRET_CHARS:
        raise CliError(f"--secret-file / ${SECRET_ENV}: at least {MIN_SECRET_CHARS} characters "
                       f"(`champollion token new` prints a suitable random one)", EXIT_INVALID_INPUT)
    return secret


def cmd_web(args) -> int:
    if not args.auth and not args.insecure_open and not is_loopback(args.host):
        raise CliError(f"refusing to serve an open web front on {args.host}: without --auth every visitor is a "
                       f"maintainer; give --auth TOKENS.yaml, or --insecure-open if something else guards it",
                       EXIT_INVALID_INPUT)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together: the certificate and its private key", EXIT_INVALID_INPUT)
    if args.max_body_bytes < 1024:
        raise CliError(f"--max-body-bytes: at least 1024 (a sign-in form), got {args.max_body_bytes}",
                       EXIT_INVALID_INPUT)
    import uvicorn

    from apps.web.app import WebSettings, create_app
    from gateway.server.config import ConfigError
    from gateway.store import StoreError

    settings = WebSettings(store_url=_store_url(args), tokens_file=args.auth, secret=_secret(args),
                           secure_cookie=bool(args.tls_cert) or args.secure_cookie,
                           max_body_bytes=args.max_body_bytes)
    try:
        app = create_app(settings)
    except ConfigError as error:
        raise CliError(f"--auth {error}", EXIT_INVALID_INPUT) from None
    except StoreError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False,
                ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key, proxy_headers=False)
    return 0
