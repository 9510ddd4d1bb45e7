"""A background stack's process (apps/launch/background.py
starts it and documents the folder):

    python -m apps.launch.background_server FOLDER  < request.json

The request (key, settings, identity, idle_seconds) comes on stdin. It
starts the embedded stack on Unix sockets in FOLDER, writes stack.json,
says `ready` on stdout (or `error: ...` and exits 1), and serves until it
has had no call for idle_seconds and no command holds it, or until SIGTERM
or SIGINT. Then it retires: the folder is renamed first (under the stack's
lock, so a command either holds the stack or finds none), so that a new
stack can start there at once, and removed once the servers have stopped."""
from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import grpc

from apps.launch.background import INFO_FILE, READY, key_lock
from apps.launch.embedded import start_stack, stop_stack
from champollion.core import logs

# How often a stack idle long enough, but held by a command, looks again.
RETRY_SECONDS = 5.0


class CallActivity(grpc.aio.ServerInterceptor):
    """Counts the calls in flight on a server and when the last one ended:
    how long it has been idle. `clock` (seconds) is replaceable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.in_flight = 0
        self._since = clock()

    def idle_for(self) -> float:
        """Seconds since the last call ended; 0 while one is in flight."""
        return 0.0 if self.in_flight else self._clock() - self._since

    def begin(self) -> None:
        self.in_flight += 1

    def end(self) -> None:
        self.in_flight -= 1
        self._since = self._clock()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        kind = f"{'stream' if handler.request_streaming else 'unary'}_{'stream' if handler.response_streaming else 'unary'}"
        behavior = getattr(handler, kind)

        if handler.response_streaming:
            async def counted(request, context):
                self.begin()
                try:
                    async for response in behavior(request, context):
                        yield response
                finally:
                    self.end()
        else:
            async def counted(request, context):
                self.begin()
                try:
                    return await behavior(request, context)
                finally:
                    self.end()
        return handler._replace(**{kind: counted})


def _write_info(folder: Path, info: dict) -> None:
    """stack.json, whole or not at all (written aside, then renamed)."""
    aside = folder / f".{INFO_FILE}"
    aside.write_text(json.dumps(info, indent=2), encoding="utf-8")
    os.replace(aside, folder / INFO_FILE)


def _say(line: bytes) -> None:
    """One line to the starting command, then stdout goes nowhere (that
    command stops reading; a worker's print must not fail on a closed pipe)."""
    with suppress(OSError):  # the command is gone (killed while it waited): the stack serves the next
        os.write(1, line)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _retire(folder: Path, key: str, forced: bool = False) -> bool:
    """Renames the stack's folder away, so that no command finds the stack
    from here on and a new one may start there; unless a command holds the
    stack (then False), or `forced` (told to stop: their calls are cancelled)."""
    if forced:
        _rename_away(folder, key)
        return True
    with key_lock(folder.parent, key, fcntl.LOCK_EX | fcntl.LOCK_NB) as taken:
        if taken:
            _rename_away(folder, key)
        return taken


def _rename_away(folder: Path, key: str) -> None:
    with suppress(FileNotFoundError):  # gone already (retired as a signal came, or removed by hand)
        os.replace(folder, _retired(folder, key))


def _retired(folder: Path, key: str) -> Path:
    """Where a retiring stack's folder goes (its sockets, until its servers stop)."""
    return folder.parent / f".retired-{key}-{os.getpid()}"


async def _until_idle(activity: CallActivity, idle: float, stop: asyncio.Event, retire: Callable[[], bool]) -> None:
    """Returns once `stop` is set, or once the gateway has had no call for
    `idle` seconds and `retire()` succeeds (looking again every
    RETRY_SECONDS while a command holds the stack)."""
    while True:
        left = idle - activity.idle_for()
        if left <= 0 and retire():
            return
        try:
            await asyncio.wait_for(stop.wait(), timeout=left if left > 0 else RETRY_SECONDS)
            return
        except asyncio.TimeoutError:
            continue


async def _serve(folder: Path, request: dict) -> None:
    settings, key = request["settings"], request["key"]
    activity = CallActivity()
    try:
        families = settings["families"]
        workers = {} if settings["workers"] is None else {"workers": settings["workers"]}
        stack = await start_stack(families=tuple(families) if families is not None else None, store=settings["store"],
                                  socket_dir=folder, gateway_interceptors=[activity], **workers)
    except Exception as error:  # noqa: BLE001 - the command that started it says why, in one line
        _say(f"error: {error}".replace("\n", " ").encode("utf-8") + b"\n")
        raise SystemExit(1) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        _write_info(folder, {**request, "pid": os.getpid(), "started": time.time(), "gateway": stack.gateway_address,
                             "families": sorted(stack.family_addresses)})
        _say(READY)
        await _until_idle(activity, float(request["idle_seconds"]), stop, lambda: _retire(folder, key))
        if stop.is_set():
            _retire(folder, key, forced=True)
    finally:
        await stop_stack(stack)
        shutil.rmtree(_retired(folder, key), ignore_errors=True)


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    request = json.loads(sys.stdin.read())
    os.umask(0o077)  # its sockets and files: the owner's alone
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal that started the command may close
    logs.configure("WARNING")  # stderr is the folder's stack.log
    asyncio.run(_serve(folder, request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
