"""`champollion serve --background | --status | --stop`: this user's
background stacks (apps/launch/background.py), started ahead
of the runs that will use them, listed, stopped."""
from __future__ import annotations

import time

from apps.cli.common import EXIT_FAILURE, EXIT_INVALID_INPUT, CliError, background_settings, store_url
from apps.launch import background as stacks

# serve's flags that choose what a foreground `serve` serves and how: a
# background stack is every family on the owner's socket, open to the owner alone.
_SERVING_FLAGS = (("family", "--family"), ("config", "--config"), ("languages", "--languages"),
                  ("device", "--device"), ("comet_dir", "--comet-dir"), ("max_text_chars", "--max-text-chars"),
                  ("auth", "--auth"), ("family_auth", "--family-auth"), ("insecure_open", "--insecure-open"),
                  ("tls_cert", "--tls-cert"), ("tls_key", "--tls-key"), ("health_port", "--health-port"))


def _check_flags(args, action: str, defaults: dict) -> None:
    given = [flag for name, flag in _SERVING_FLAGS if getattr(args, name)]
    given += [f"--{name}" for name, default in defaults.items() if getattr(args, name) != default]
    if action != "--background":
        given += [flag for name, flag in (("store", "--store"), ("no_store", "--no-store"), ("workers", "--workers"),
                                          ("idle_timeout", "--idle-timeout")) if getattr(args, name) not in (None, False)]
    if given:
        raise CliError(f"{given[0]}: not with {action} (a background stack serves every family on this user's "
                       f"Unix socket)", EXIT_INVALID_INPUT)


def cmd_stacks(args, defaults: dict) -> int:
    """`defaults`: serve's --host and --port as the parser sets them (given otherwise: refused)."""
    action = "--background" if args.background else "--status" if args.status else "--stop"
    _check_flags(args, action, defaults)
    if args.status:
        found = stacks.running()
        print("\n".join(_described(stack) for stack in found) if found else "no background stack runs")
        return 0
    if args.stop:
        found = stacks.running()
        stopped = sum(stacks.stop(stack) for stack in found)
        print(f"stopped {stopped} background stack{'s' if stopped != 1 else ''}")
        return 0 if stopped == len(found) else EXIT_FAILURE
    if args.idle_timeout is not None and not 0 < args.idle_timeout < float("inf"):
        raise CliError(f"--idle-timeout: must be a positive number of seconds, got {args.idle_timeout:g}",
                       EXIT_INVALID_INPUT)
    if args.workers is not None and args.workers < 0:
        raise CliError(f"--workers: must be 0 or more, got {args.workers}", EXIT_INVALID_INPUT)
    settings = background_settings(store_url(args), workers=args.workers)
    try:
        with stacks.in_use(settings, start=True, idle=args.idle_timeout) as (stack, started):
            print(f"{'started' if started else 'already running'}: {_described(stack)}")
    except stacks.BackgroundUnavailable as error:
        raise CliError(str(error), EXIT_FAILURE) from None
    return 0


def _described(stack: stacks.BackgroundStack) -> str:
    """One line: the process, what it serves, over which store, how long it waits, where."""
    from gateway.store.location import parse_store_url, redact  # the embedded gateway's side: a password hidden

    settings = stack.info.get("settings", {})
    store = settings.get("store")
    families = settings.get("families")
    workers = settings.get("workers")
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stack.info.get("started", 0)))
    return " · ".join([
        f"pid {stack.pid}",
        "every family" if families is None else ("no family" if not families else ", ".join(families)),
        f"store {redact(parse_store_url(store))}" if store else "no store",
        *([f"{workers} workers"] if workers is not None else []),
        f"stops after {stack.info.get('idle_seconds', 0):g} s without a run",
        f"started {started}",
        stack.address,
    ])
