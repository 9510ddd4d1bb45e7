"""`champollion serve`: the embedded stack, or the families and gateway named
with --family, until SIGINT or SIGTERM; SIGHUP reads the tokens file again.
It logs (stderr, JSON lines) a `serving` event per server with its address,
then one `ready` event once every server answers."""
from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import structlog

from apps.cli.common import EXIT_INVALID_INPUT, CliError
from apps.cli.common import store_url as _store_url
from apps.launch.embedded import start_family, start_gateway, start_stack, stop_stack
from champollion.core import logs
from champollion.core.addresses import is_loopback
from champollion.core.cards import UnknownLanguage, default_registry
from champollion.core.serving import ServerTls, TlsError
from gateway.server.config import ConfigError, GatewayConfig, load_config
from gateway.server.tokens import TokenFile
from services.registry import IMPLEMENTED

log = structlog.get_logger()


def _server_access(args) -> tuple[TokenFile | None, TokenFile | None, ServerTls | None]:
    """`serve`'s tokens files (the gateway's, the families') and TLS
    certificate, checked before anything starts. A gateway without --auth is
    open to anyone who reaches it, so it binds loopback only unless
    --insecure-open says otherwise."""
    serves_gateway = not args.family or "gateway" in args.family
    serves_families = any(name != "gateway" for name in args.family)
    if args.auth and not serves_gateway:
        raise CliError("--auth applies to the gateway (serve it alone or with --family gateway); a family "
                       "deployed apart asks for the gateway's token with --family-auth", EXIT_INVALID_INPUT)
    if args.family_auth and not serves_families:
        raise CliError("--family-auth applies to the families named with --family (the embedded stack's "
                       "listen on loopback)", EXIT_INVALID_INPUT)
    if serves_gateway and not args.auth and not args.insecure_open and not is_loopback(args.host):
        raise CliError(f"refusing to serve an open gateway on {args.host}: without --auth anyone who reaches it may "
                       f"evaluate, read every stored run and register corpora; give --auth TOKENS.yaml, or "
                       f"--insecure-open if something else (a network policy, an authenticating proxy) guards it",
                       EXIT_INVALID_INPUT)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together: the certificate and its private key", EXIT_INVALID_INPUT)
    if args.workers is not None and args.workers < 0:
        raise CliError(f"--workers: must be 0 or more, got {args.workers}", EXIT_INVALID_INPUT)
    if args.max_text_chars is not None and args.max_text_chars < 1:
        raise CliError(f"--max-text-chars: must be a whole number of at least 1, got {args.max_text_chars}",
                       EXIT_INVALID_INPUT)
    if args.health_port is not None and not args.family:
        raise CliError("--health-port applies to the services named with --family", EXIT_INVALID_INPUT)
    tls = ServerTls(Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None
    try:
        if tls is not None:
            tls.credentials()
    except TlsError as error:
        raise CliError(f"--tls-cert/--tls-key: {error}", EXIT_INVALID_INPUT) from None
    return _tokens(args.auth, "--auth"), _tokens(args.family_auth, "--family-auth"), tls


def _tokens(path: str | None, flag: str) -> TokenFile | None:
    """The tokens file `flag` names (None without one); a bad one stops
    `serve` with one line naming the flag, the file, the entry and the field."""
    if not path:
        return None
    try:
        return TokenFile.load(path)
    except ConfigError as error:
        raise CliError(f"{flag} {error}", EXIT_INVALID_INPUT) from None


def _served_languages(tags: list[str] | None) -> list[str] | None:
    """--languages as the card codes a family serves (`de-DE`, `ger` -> `deu`)."""
    if not tags:
        return None
    try:
        return sorted({default_registry().resolve(tag).card.code for tag in tags})
    except UnknownLanguage as error:
        raise CliError(f"--languages: {error}", EXIT_INVALID_INPUT) from None


async def _serve(args) -> None:
    tokens, family_tokens, tls = _server_access(args)  # checked before anything starts
    servers, stack = [], None
    host = args.host
    # What the command line says about families goes to every family served
    # (each factory takes what it uses: structural languages, semantic device...).
    languages = _served_languages(args.languages)
    options = {key: value for key, value in (("languages", languages), ("device", args.device),
                                             ("comet_dir", args.comet_dir)) if value}
    # Worker processes per family: passed only when asked (the default is the stack's).
    workers = {} if args.workers is None else {"workers": args.workers}
    # The longest text, likewise; the families' and the gateway's alike.
    limit = {} if args.max_text_chars is None else {"max_text_chars": args.max_text_chars}
    if not args.family:
        config = load_config(args.config) if args.config else None
        stack = await start_stack(host=host, gateway_port=args.port, store=_store_url(args), family_options=options,
                                  tokens=tokens, tls=tls, **workers, **limit)
        if config is not None:
            raise CliError("--config applies to `serve --family gateway`", EXIT_INVALID_INPUT)
        servers = stack.servers
        for name, address in stack.family_addresses.items():
            log.info("serving", family=name, address=address, listens="loopback only: reached through the gateway")
        log.info("serving", family="gateway", address=stack.gateway_address)
        log.info("ready", gateway=stack.gateway_address, families=stack.family_addresses)
    else:
        addresses = {}
        for offset, name in enumerate(args.family):
            address = f"{host}:{args.port + offset if args.port else 0}"  # 0: each a free port
            health = f"{host}:{args.health_port + offset}" if args.health_port is not None else None
            if name == "gateway":
                config = load_config(args.config) if args.config else GatewayConfig()
                config.store = _store_url(args, config.store)
                config.max_text_chars = args.max_text_chars or config.max_text_chars
                server, port, _ = await start_gateway(config, address, tokens, tls, health)
            else:
                # Deployed apart, a family served with --family-auth asks for the gateway's (maintainer) token.
                server, port = await start_family(name, address, tls=tls, health_address=health,
                                                  tokens=family_tokens, **options, **workers, **limit)
            servers.append(server)
            addresses[name] = f"{host}:{port}"
            log.info("serving", family=name, address=addresses[name])
        log.info("ready", **({"gateway": addresses["gateway"]} if "gateway" in addresses else {}),
                 families={name: address for name, address in addresses.items() if name != "gateway"})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    token_files = [found for found in (tokens, family_tokens) if found is not None]
    if token_files:
        # Revoking a token: delete its line (or give it an `expires`), then SIGHUP.
        loop.add_signal_handler(signal.SIGHUP, _reload_tokens, token_files)
    await stop.wait()
    for server in servers:
        # Long enough for a batch in flight to finish on a scale-down or rollout
        # (the Kubernetes manifests allow 30 s to shut down).
        await server.stop(grace=25.0)
    if stack is not None:
        await stop_stack(stack)  # the gateway's store and the stack's worker processes


def _reload_tokens(token_files: list[TokenFile]) -> None:
    """The tokens files read again; a file that cannot be used keeps its
    tokens in force, and says why."""
    for tokens in token_files:
        try:
            count = tokens.reload()
        except ConfigError as error:
            log.warning("tokens_not_reloaded", error=str(error))
            continue
        log.info("tokens_reloaded", path=str(tokens.path), tokens=count)


def cmd_serve(args) -> int:
    if args.idle_timeout is not None:
        raise CliError("--idle-timeout: goes with --background", EXIT_INVALID_INPUT)
    unknown = [name for name in args.family if name != "gateway" and name not in IMPLEMENTED]
    if unknown:
        known = ", ".join(["gateway", *IMPLEMENTED])
        raise CliError(f"unknown family: {', '.join(unknown)}; available: {known}", EXIT_INVALID_INPUT)
    logs.configure(args.log_level)
    try:
        asyncio.run(_serve(args))
    except ConfigError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    return 0
