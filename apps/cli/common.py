"""What every `champollion` command shares: its error type and exit codes,
the run store a command's gateway uses, the Client a command talks to a
gateway through (--gateway's, or an embedded one's), and JSON output.

Importing it is cheap (the Client, gRPC, are loaded by the functions that
use them): the entry point and the parser import it."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


EXIT_INVALID_INPUT = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED = 143  # 128 + SIGTERM
TOKEN_VARIABLE = "CHAMPOLLION_TOKEN"


class CliError(Exception):
    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class Interruption:
    """Ctrl-C (SIGINT) or SIGTERM, noted when it comes. Both end a command
    the same way, by KeyboardInterrupt, so that every clean-up made for
    Ctrl-C (the embedded stack stopped, its run's spill removed) serves
    both. Raised from the signal handler, it comes in whatever code runs at
    that moment, and code that swallows every exception (gRPC's channel
    finalizer, any __del__) can lose it: the note is checked again at each
    progress update, where a call fails, and once the command is done.

    While a gateway call may be in flight (`cancelling`), the signal cancels
    it instead, and the main thread raises once the call has ended: raised
    inside gRPC's waits, KeyboardInterrupt could leave gRPC's state half
    updated, and closing the channel then waited for ever."""

    def __init__(self):
        self._noted = threading.Event()
        self.signum: int | None = None
        self._cancel: Callable[[], None] | None = None

    def note(self, signum: int) -> None:
        self.signum = signum
        self._noted.set()

    @contextmanager
    def cancelling(self, cancel: Callable[[], None]) -> Iterator[None]:
        """Inside, a first signal calls `cancel` (closing the client's
        channel: its calls end CANCELLED) rather than raising."""
        self._cancel = cancel
        try:
            yield
        finally:
            self._cancel = None

    def cancel_call(self) -> bool:
        """Cancels the call in flight, once, from a thread of its own (the
        main thread, interrupted, may hold gRPC's locks); False when there
        is none to cancel: the caller raises."""
        cancel, self._cancel = self._cancel, None
        if cancel is None:
            return False
        threading.Thread(target=cancel, name="champollion-interrupt", daemon=True).start()
        return True

    def clear(self) -> None:
        self._noted.clear()
        self.signum = None

    def is_set(self) -> bool:
        return self._noted.is_set()

    def ending(self) -> tuple[str, int]:
        """The word the command's one line ends with, and its exit status."""
        if self.signum == signal.SIGTERM:
            return "terminated", EXIT_TERMINATED
        return "interrupted", EXIT_INTERRUPTED


INTERRUPTED = Interruption()


def raise_if_interrupted() -> None:
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt


def store_url(args, configured: str | None = None) -> str | None:
    """The run store of a gateway this command starts: none with --no-store,
    else --store, else the gateway config's, else the default
    ($CHAMPOLLION_STORE, or runs.sqlite in the XDG data folder). A corrupt
    URL is a bad argument."""
    if getattr(args, "no_store", False):
        return None
    # The store (SQLAlchemy, Alembic) is the embedded gateway's: imported
    # only by a command that starts one.
    from gateway.store import StoreError, default_store_url
    from gateway.store.location import parse_store_url
    url = args.store or configured or default_store_url()
    try:
        parse_store_url(url)
    except StoreError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    return url


def embedded_store_url(args) -> str | None:
    """The store of the embedded gateway; none with --gateway, whose gateway
    stores in its own."""
    if args.gateway:
        if args.store or getattr(args, "no_store", False):
            raise CliError(f"--store and --no-store choose the embedded gateway's store; the gateway at "
                           f"{args.gateway} uses its own", EXIT_INVALID_INPUT)
        return None
    return store_url(args)


def _remote_client(args):
    """A Client of --gateway with the token (--token, else --token-file,
    else $CHAMPOLLION_TOKEN) and TLS (--tls-ca, --tls) given; a token goes in
    plaintext only to loopback unless --insecure-token."""
    from apps.client import Client, InvalidSettings
    from apps.client.channel import ChannelError, check_token, read_token_file

    token, source = (args.token, "--token") if args.token else (os.environ.get(TOKEN_VARIABLE), TOKEN_VARIABLE)
    try:
        if not args.token and getattr(args, "token_file", None):
            token, source = read_token_file(args.token_file), "--token-file"
        token = check_token(token, source) if token else None
        return Client(args.gateway, token, tls=args.tls_ca or (True if args.tls else None),
                      insecure_token=getattr(args, "insecure_token", False))
    except (ChannelError, InvalidSettings) as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None


@contextmanager
def gateway_client(args, background: str | None = None, **stack_options) -> Iterator:
    """A Client of --gateway, or else of a stack on this machine with
    `stack_options` (store, families, workers: open, plaintext, loopback or
    the owner's Unix socket): with `background` "start", the background
    stack of these options, started if none runs; "reuse", one that runs
    (of any families, over the same store); else, and with --no-daemon or
    $CHAMPOLLION_DAEMON=0, an embedded stack started here and stopped
    afterwards (apps/launch/background.py). A ClientError
    raised inside becomes the command's error."""
    from apps.client import Client, ClientError

    try:
        if args.gateway:
            with _remote_client(args) as client, INTERRUPTED.cancelling(client.close):
                yield client
        else:
            with _local_stack(args, background, stack_options) as address, Client(address) as client, \
                    INTERRUPTED.cancelling(client.close):
                yield client
    except ClientError as error:
        raise_if_interrupted()  # a call cancelled by Ctrl-C or SIGTERM
        raise cli_error(error) from None


@contextmanager
def _local_stack(args, background: str | None, options: dict) -> Iterator[str]:
    """The address of the stack gateway_client uses without --gateway."""
    if background and not getattr(args, "no_daemon", False):
        from apps.launch import background as stacks

        if stacks.enabled():
            settings = background_settings(options.get("store"), options.get("families"), options.get("workers"))
            try:
                with stacks.in_use(settings, start=background == "start", any_families=background == "reuse") \
                        as (stack, started):
                    if stack is not None:
                        if started:
                            note(f"started a background stack (pid {stack.pid}) for the next runs: it stops after "
                                 f"{stack.info['idle_seconds']:g} s without one (`champollion serve --stop` stops "
                                 f"it now; --no-daemon scores without it)")
                        yield stack.address
                        return
            except stacks.BackgroundUnavailable as error:
                if background == "start":
                    note(f"no background stack ({error}): scoring in this process")
    from apps.launch.embedded import EmbeddedStack  # the server, only when one is embedded

    with EmbeddedStack(**options) as stack:
        yield stack.gateway_address


def background_settings(store: str | None, families: tuple[str, ...] | None = None, workers: int | None = None):
    """What a background stack is asked for (store_url's store, a relative
    SQLite path made absolute: the stack is reached from any folder)."""
    from apps.launch.background import StackSettings
    from gateway.store.location import absolute_store_url

    return StackSettings(absolute_store_url(store) if store else None, families, workers)


def note(text: str) -> None:
    """A line for a person at a terminal (stderr); scripts and logs do without it."""
    if sys.stderr.isatty():
        print(f"champollion: {text}", file=sys.stderr)


def reading_client(args, store: bool = True):
    """gateway_client for commands that read stored runs or compare cards:
    a gateway without families (nothing is scored), over the store unless
    `store` is false: a background stack's that runs over it, else an
    embedded one."""
    return gateway_client(args, background="reuse", families=(), store=embedded_store_url(args) if store else None)


def cli_error(error) -> CliError:
    """A client error as one line: bad arguments (an unknown run id or sort
    column, cards that cannot be compared) exit 2; a gateway that could not
    answer, or refused access, exits 1 (the input may be fine)."""
    from apps.client import GatewayUnavailable, InvalidSettings, RequestRefused, UntrustedCertificate

    if isinstance(error, (InvalidSettings, RequestRefused)):
        return CliError(str(error), EXIT_INVALID_INPUT)
    if isinstance(error, UntrustedCertificate):
        return CliError(f"{error} (give --tls-ca with the CA certificate that signed it)", EXIT_FAILURE)
    message = str(error)
    if isinstance(error, GatewayUnavailable) and "socket closed" in error.details.lower():
        message += " (if the gateway serves TLS, give --tls-ca or --tls)"
    return CliError(message, EXIT_FAILURE)


def json_text(data, one_a_line: tuple[str, ...] = ("entries",)) -> str:
    """Indented JSON, except that the lists of objects under the keys
    `one_a_line` (a card's entries) are written an object a line: as
    readable, and Python's C encoder, which does not indent, writes a
    10,000-entry card in a tenth of the time (0.3 against 3.1 s)."""
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        return json.dumps(data, ensure_ascii=False, indent=2)
    lines = []
    for key, value in data.items():
        if key in one_a_line and isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            items = ITEM_SEPARATOR.join(json_line(item) for item in value)
            lines.append(f"{json_key(key)}{LIST_OPENING}{items}{LIST_CLOSING}")
        else:
            lines.append(json_member(key, value))
    return "{\n" + MEMBER_SEPARATOR.join(lines) + "\n}" if lines else "{}"


# json_text's layout, in parts, for what writes a card as it arrives (card_file.py).
MEMBER_SEPARATOR = ",\n"
LIST_OPENING, ITEM_SEPARATOR, LIST_CLOSING = "[\n    ", ",\n    ", "\n  ]"


def json_key(key: str) -> str:
    return f"  {json.dumps(key, ensure_ascii=False)}: "


def json_member(key: str, value) -> str:
    """One member of a top-level object, indented as json_text writes it."""
    return json_key(key) + json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n  ")


def json_line(item) -> str:
    """An object of a list written one a line."""
    return json.dumps(item, ensure_ascii=False)


def card_file_or_run_id(text: str) -> Path | str:
    """A run card file, or else a stored run's id (or its first 6+
    characters). A text that looks like a path (a folder, a suffix such as
    .json) and names no file is an error here, not an unknown run id."""
    path = Path(text)
    if path.is_file():
        return path
    if path.is_dir():
        raise CliError(f"{text}: a folder, not a run card file", EXIT_INVALID_INPUT)
    if os.sep in text or "/" in text or path.suffix:
        raise CliError(f"{text}: no such file", EXIT_INVALID_INPUT)
    return text


def write_json(data, out: str | None) -> None:
    text = json_text(data)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
