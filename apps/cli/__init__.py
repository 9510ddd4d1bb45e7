"""The `champollion` command: evaluate, serve, compare, describe, the stored
runs (runs, show, leaderboard, report, db upgrade), registered corpora, the
corpus check and tokens. Every command that talks to a gateway does so through
apps.client.Client. Modules: common (errors, the Client a command
uses, stores), scoring (evaluate, compare, describe), output (what they print
for people), stored (runs, show, leaderboard, report, meta-eval), corpora,
corpus_check, admin (token, db), review, serve, parser;
the entry point is here. The modules of the server side (the embedded stack,
the store, the families) are imported only by a command that runs them."""
from __future__ import annotations

import os
import signal
import sys
import threading

from apps.cli.common import (
    INTERRUPTED,
    CliError,
    raise_if_interrupted,
)
from apps.cli.parser import build_parser

__all__ = ["CliError", "build_parser", "main"]


# What ends a client command: Ctrl-C, and SIGTERM (`kill`, a job scheduler,
# a container stopped), whose default would end the process on the spot,
# leaving the embedded run's spill on disk and its workers to find their
# pipe broken.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_interrupt(signum, frame) -> None:
    INTERRUPTED.note(signum)
    if not INTERRUPTED.cancel_call():
        raise KeyboardInterrupt


def _run(args) -> int:
    """The command; a client command's Ctrl-C or SIGTERM is noted even where
    its KeyboardInterrupt is lost (`serve` and `up` stop on them their own way)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    if args.command in ("serve", "up") or not in_main_thread:
        return args.handler(args)
    previous = {signum: signal.signal(signum, _on_interrupt) for signum in STOP_SIGNALS}
    INTERRUPTED.clear()
    try:
        code = args.handler(args)
        raise_if_interrupted()
        return code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stdout_gone() -> int:
    """The reader of stdout went away (`champollion ... | head -1`): nothing
    more can be said there, and that is no failure. Later writes, and the
    interpreter's own flush at exit, go nowhere instead of raising again."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return 0
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("serve", "up"):
        from champollion.core import logs  # structlog: not for --help

        # Service logs would clutter a command's output; only problems show.
        logs.configure("WARNING")
        # gRPC's own error lines too (a failed TLS handshake is reported as
        # one line of ours); GRPC_VERBOSITY=ERROR brings them back.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        code = _run(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except CliError as error:
        print(f"champollion: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the embedded stack has stopped on the way out
        word, code = INTERRUPTED.ending()
        print(f"champollion: {word}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
