"""Background stacks: an embedded stack that outlives the command that
started it, so that the next command with the same settings finds the
families' models, word lists and caches loaded (a 200-line run then costs
what its scoring costs, not a second start), as build tools' daemons do.

`champollion evaluate` (without --gateway or --no-daemon) uses the stack of
its settings when one runs, else starts one and uses it; `serve --background`
starts one ahead; reading commands use one when it runs. A stack stops
itself after `idle_seconds` without a call ($CHAMPOLLION_DAEMON_IDLE,
default 15 minutes); `serve --stop` stops them all.

Each stack has a folder named by a digest of everything its results depend
on: its settings (store, families, workers) and its identity (the code's
files, the Python, the packages' folders, the environment variables that
reach the families). A command whose digest differs never reaches it: a
changed file, another store or other families start a stack of their own.
The folders are under $XDG_RUNTIME_DIR/champollion, else the cache folder's
stacks/ (champollion/core/cache_dir.py), owner-only (0700): the gateway's
and families' Unix sockets, `stack.json` (who serves there) and `stack.log`
(the stack's stderr). A folder whose socket no longer answers (a stack
killed) is stale: removed by the next command that looks.

This module is what a command needs to find, start and stop a stack; it
imports nothing of the server side. The stack's process is
apps/launch/background_server.py."""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from champollion.core.cache_dir import cache_root

DAEMON_ENV = "CHAMPOLLION_DAEMON"  # 0, no, off or false: every command runs its own embedded stack
IDLE_ENV = "CHAMPOLLION_DAEMON_IDLE"  # seconds a background stack waits for a call before it stops
DEFAULT_IDLE_SECONDS = 900.0
GATEWAY_SOCKET = "gateway.sock"
INFO_FILE = "stack.json"
LOG_FILE = "stack.log"
READY = b"ready\n"
# The longest wait for a stack to serve (an embedded stack waits as long for its servers).
START_SECONDS = 60.0
SERVER_MODULE = "apps.launch.background_server"
# The code a stack runs: a changed file in these packages is another stack.
PACKAGES = ("apps", "champollion", "gateway", "services", "eval_standards")
# Beside the packages: the language cards and the built analyzers (the defaults of
# champollion/core/cards.py and analyzers.py; their variables are in the environment's part).
DATA_FOLDERS = ("language_cards", "build/fst")
# The environment variables that reach the gateway or the families (CHAMPOLLION_*
# less the client's own, Hugging Face's, the folders defaults are found under).
_CLIENT_VARIABLES = ("CHAMPOLLION_TOKEN", DAEMON_ENV, IDLE_ENV)
_VARIABLE_PREFIXES = ("CHAMPOLLION_", "HF_", "TRANSFORMERS_")
_VARIABLES = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_DATA_HOME", "PYTHONPATH", "PYTHONHASHSEED")
# sun_path's size on Linux, less its final NUL.
_SOCKET_PATH_BYTES = 107


class BackgroundUnavailable(RuntimeError):
    """No background stack can be used here; the message says why (one line)."""


@dataclass(frozen=True)
class StackSettings:
    """What a command asks of the stack it scores on: the run store (an
    absolute URL, or None: nothing stored), the families (None: every
    implemented one) and the worker processes (None: the default)."""
    store: str | None
    families: tuple[str, ...] | None = None
    workers: int | None = None


@dataclass(frozen=True)
class BackgroundStack:
    """A stack found serving in `folder`; `info` is its stack.json."""
    folder: Path
    info: dict

    @property
    def address(self) -> str:
        return f"unix:{self.folder / GATEWAY_SOCKET}"

    @property
    def pid(self) -> int:
        return int(self.info["pid"])


def enabled() -> bool:
    """Whether commands may use background stacks ($CHAMPOLLION_DAEMON)."""
    return os.environ.get(DAEMON_ENV, "").strip().lower() not in ("0", "no", "off", "false")


def idle_seconds() -> float:
    """$CHAMPOLLION_DAEMON_IDLE, else DEFAULT_IDLE_SECONDS; ValueError naming the variable."""
    text = os.environ.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"${IDLE_ENV}: must be a positive number of seconds, got {text!r}")
    return seconds


# --- what a stack's results depend on -------------------------------------------------------


def code_stamp(folders: list[Path]) -> str:
    """A digest of every file's path, size and modification time under
    `folders` (byte-code caches left out): any edit, new or removed file
    changes it. About 2 ms for this code's 300 files."""
    digest = hashlib.sha256()
    for folder in folders:
        for directory, subfolders, files in os.walk(folder, followlinks=True):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            for name in sorted(files):
                path = os.path.join(directory, name)
                with suppress(OSError):  # gone meanwhile
                    status = os.stat(path)
                    digest.update(f"{path}\0{status.st_size}\0{status.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _code_folders() -> list[Path]:
    """The packages' folders, as this process imports them (no package is
    imported to find it), and the data folders beside them."""
    folders = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            folders += [Path(location) for location in spec.submodule_search_locations]
    root = Path(__file__).resolve().parents[2]
    return folders + [root / name for name in DATA_FOLDERS if (root / name).is_dir()]


def _absolute(value: str) -> str:
    """A relative path that names something here, made absolute: the stack
    runs from / and is reached from any folder."""
    return os.path.abspath(value) if value and not os.path.isabs(value) and os.path.exists(value) else value


def stack_environment() -> dict[str, str]:
    """The environment variables a stack's results depend on, relative paths made absolute."""
    return {name: _absolute(value) for name, value in sorted(os.environ.items())
            if (name.startswith(_VARIABLE_PREFIXES) or name in _VARIABLES) and name not in _CLIENT_VARIABLES}


def identity() -> dict:
    """Everything a stack's results depend on beside its settings."""
    try:
        cores = len(os.sched_getaffinity(0))  # the default worker count
    except AttributeError:
        cores = os.cpu_count() or 1
    packages = [path for path in map(Path, sys.path) if path.is_dir() and path.name in ("site-packages", "dist-packages")]
    return {
        "python": sys.executable,
        "python_version": sys.version,
        "code": code_stamp(_code_folders()),
        # An installed or upgraded package changes its folder's modification time.
        "packages": {str(path): path.stat().st_mtime_ns for path in packages},
        # Digests, not values: a variable may hold a key (stack.json keeps the identity).
        "environment": {name: hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
                        for name, value in stack_environment().items()},
        "cores": cores,
    }


def stack_key(settings: StackSettings, of: dict) -> str:
    """The folder name of the stack of `settings` and identity `of`."""
    text = json.dumps({"settings": asdict(settings), "identity": of}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


# --- where stacks live ------------------------------------------------------------------------


def stacks_folder() -> Path:
    """The folder of this user's stacks, made owner-only if missing;
    BackgroundUnavailable where it cannot be made or others may enter it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    try:
        folder = Path(runtime) / "champollion" if os.path.isabs(runtime) else cache_root() / "stacks"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = folder.stat()
    except (OSError, RuntimeError) as error:
        raise BackgroundUnavailable(f"no folder for background stacks ({error})") from None
    if status.st_uid != os.getuid() or stat.S_IMODE(status.st_mode) & 0o077:
        raise BackgroundUnavailable(f"{folder} is not this user's alone (mode {stat.S_IMODE(status.st_mode):o})")
    if len(os.fsencode(folder / ("x" * 20) / "structural.sock")) > _SOCKET_PATH_BYTES:
        raise BackgroundUnavailable(f"{folder}: too long a path for Unix sockets")
    return folder


def _answers(path: Path) -> bool:
    """Whether a server listens on the Unix socket `path` (a connection
    accepted; nothing is sent)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(os.fspath(path))
        except OSError:
            return False
    return True


def _read_info(folder: Path) -> dict | None:
    try:
        info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("pid"), int) else None


def _serving(folder: Path, key: str) -> BackgroundStack | None:
    """The stack of `key` serving in `folder`, or None."""
    info = _read_info(folder)
    if info is None or info.get("key") != key or not _answers(folder / GATEWAY_SOCKET):
        return None
    return BackgroundStack(folder, info)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie no longer does: a stack's parent
    may be gone, and whoever adopted it may not reap it at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: not ours
        return True
    with suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _lock_file(base: Path, key: str):
    """The lock of stack `key`: held shared by every command using the
    stack, exclusive by one that finds or starts it, or by the stack that
    retires. Lock files stay: removing one would let two holders lock two files."""
    return open(base / f"{key}.lock", "a")


@contextmanager
def key_lock(base: Path, key: str, mode: int) -> Iterator[bool]:
    """Stack `key`'s lock held in `mode` (fcntl's LOCK_SH, LOCK_EX; with
    LOCK_NB, False if another holds it)."""
    with _lock_file(base, key) as handle:
        try:
            fcntl.flock(handle, mode)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def running() -> list[BackgroundStack]:
    """This user's stacks that serve; stale folders (their stack killed)
    found on the way are removed, unless a command holds them (starting one)."""
    try:
        base = stacks_folder()
    except BackgroundUnavailable:
        return []
    found = []
    for folder in sorted(path for path in base.iterdir() if path.is_dir() and not path.name.startswith(".")):
        info = _read_info(folder)
        stack = _serving(folder, info.get("key")) if info else None
        if stack is not None:
            found.append(stack)
            continue
        with key_lock(base, folder.name, fcntl.LOCK_EX | fcntl.LOCK_NB) as taken:
            if taken:
                shutil.rmtree(folder, ignore_errors=True)
    return found


def _candidates(base: Path, settings: StackSettings, of: dict, any_families: bool) -> list[str]:
    """The keys of the stacks a command may use: its own, then with
    `any_families` every running stack of its identity over its store."""
    key = stack_key(settings, of)
    if not any_families:
        return [key]
    others = [stack.folder.name for stack in running()
              if stack.info.get("identity") == of and stack.info.get("settings", {}).get("store") == settings.store]
    return [key, *(name for name in others if name != key)]


@contextmanager
def in_use(settings: StackSettings, start: bool = False, any_families: bool = False,
           idle: float | None = None) -> Iterator[tuple[BackgroundStack | None, bool]]:
    """(the stack of `settings`, whether it was started now) while the
    command uses it, or (None, False) where none serves and `start` is
    false. `start`: start one (idle timeout `idle`, default idle_seconds())
    where none serves; `any_families`: a command that scores nothing may use
    any stack of this identity over its store. The stack cannot retire
    while the command holds it. Raises BackgroundUnavailable."""
    try:
        idle = idle_seconds() if idle is None else idle
    except ValueError as error:
        raise BackgroundUnavailable(str(error)) from None
    base = stacks_folder()
    of = identity()
    own = stack_key(settings, of)
    for key in _candidates(base, settings, of, any_families):
        with _lock_file(base, key) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # one command at a time finds or starts it
            stack, started = _serving(base / key, key), False
            if stack is None and key == own and start:
                shutil.rmtree(base / key, ignore_errors=True)  # stale: its stack is gone
                request = {"key": key, "settings": asdict(settings), "identity": of, "idle_seconds": idle}
                stack, started = _start(base / key, request), True
            if stack is None:
                continue
            fcntl.flock(handle, fcntl.LOCK_SH)  # others may use it at once; it may not retire
            yield stack, started
            return
    yield None, False


def _start(folder: Path, request: dict) -> BackgroundStack:
    """Starts the stack's process in a session of its own (a terminal's
    Ctrl-C is for the command, not for it), from /, with the code this
    process runs; waits until it serves. Ctrl-C meanwhile stops it."""
    folder.mkdir(mode=0o700)
    environment = {**os.environ, **stack_environment()}
    code_root = str(Path(__file__).resolve().parents[2])  # the folder the packages are in
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, (code_root, environment.get("PYTHONPATH"))))
    process = None
    # From the folder's birth: a Ctrl-C even inside Popen leaves no folder. A
    # process Popen started before such a Ctrl-C reads no request (its stdin
    # closes) and exits.
    try:
        with open(os.open(folder / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, cwd="/", env=environment, start_new_session=True)
        # The settings go through a pipe: a store URL may hold a password, and `ps` shows arguments.
        process.stdin.write(json.dumps(request).encode("utf-8"))
        process.stdin.close()
        line = _first_line(process, START_SECONDS)
        if line != READY:
            raise BackgroundUnavailable(_failure(folder, process, line))
    except BaseException:
        if process is not None:
            _end(process)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        if process is not None:
            process.stdout.close()
    info = _read_info(folder)
    if info is None:  # cannot be: the stack writes it before it says ready
        _end(process)
        raise BackgroundUnavailable(f"the background stack in {folder} wrote no {INFO_FILE}")
    return BackgroundStack(folder, info)


def _first_line(process: subprocess.Popen, timeout: float) -> bytes:
    """The first line the stack writes on stdout (b'' if it ends or stays silent)."""
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            return line
        chunk = os.read(process.stdout.fileno(), 256)
        if not chunk:
            return line
        line += chunk
    return line


def _failure(folder: Path, process: subprocess.Popen, line: bytes) -> str:
    if line.startswith(b"error: "):
        return line[len(b"error: "):].decode("utf-8", "replace").strip()
    if process.poll() is None:
        return f"the background stack did not serve within {START_SECONDS:.0f} s (its log: {folder / LOG_FILE})"
    return f"the background stack exited with status {process.returncode} before serving"


def _end(process: subprocess.Popen) -> None:
    """Stops a stack that did not start (its workers, in its session, with it)."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def stop(stack: BackgroundStack, timeout: float = 30.0) -> bool:
    """Stops `stack` (SIGTERM: a run in flight is cancelled; after `timeout`
    seconds SIGKILL to it and its workers) and waits for its process to
    end; False if its pid no longer runs a background stack (reused)."""
    if not _runs_stack(stack.pid):
        return False
    with suppress(ProcessLookupError):
        os.kill(stack.pid, signal.SIGTERM)
    if _wait_gone(stack.pid, timeout):
        return True
    with suppress(ProcessLookupError):
        os.killpg(stack.pid, signal.SIGKILL)  # a stack leads its session: its workers are in its group
    return _wait_gone(stack.pid, 10.0)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _runs_stack(pid: int) -> bool:
    """Whether process `pid` runs a background stack: its command line
    (Linux); elsewhere, the socket that answered is taken as proof."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return _alive(pid) and not Path("/proc/self").exists()
    except OSError:
        return False
    return SERVER_MODULE.encode() in command
