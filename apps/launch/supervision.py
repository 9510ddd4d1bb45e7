"""supervisord runs the processes of `champollion up`: it starts them,
restarts one that dies (a process that dies again within `START_SECONDS` is
retried with supervisord's back-off: 1 s, 2 s, 3 s... then given up as FATAL)
and stops them all when it is shut down. Its log and config live in the
cluster's log folder:

    supervisord.conf   generated here, one [program:NAME] per process;
                       `supervisorctl -c supervisord.conf status` shows them
    supervisord.log    its own log: every start, exit and restart

supervisord runs in the foreground as a child of the launcher (and gets
SIGTERM if the launcher dies); the launcher asks it for states and pids over
its XML-RPC interface on a unix socket.
"""
from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path

from supervisor.xmlrpc import SupervisorTransport

# A process must live this long to count as started; one that dies sooner is
# retried with back-off, at most START_RETRIES times.
START_SECONDS = 5
START_RETRIES = 5
# A unix socket's path must fit in sockaddr_un (108 bytes on Linux).
_MAX_SOCKET_PATH = 100


class SupervisorError(RuntimeError):
    """supervisord did not start, or stopped answering."""


@dataclass(frozen=True)
class Program:
    """One process supervisord runs: lower `priority` starts first and stops last."""

    name: str
    command: list[str]
    log_path: Path
    priority: int = 100


def _value(text: str) -> str:
    """supervisord expands `%(name)s` in its config values: a literal % is %%."""
    return text.replace("%", "%%")


def render_config(programs: list[Program], folder: Path, socket_path: Path, cwd: Path,
                  stop_seconds: float) -> str:
    sections = [
        f"[unix_http_server]\nfile={_value(str(socket_path))}\nchmod=0700\n",
        "[supervisord]\nnodaemon=true\nsilent=true\n"
        f"logfile={_value(str(folder / 'supervisord.log'))}\nlogfile_maxbytes=0\n"
        f"pidfile={_value(str(folder / 'supervisord.pid'))}\nchildlogdir={_value(str(folder))}\n",
        "[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n",
        f"[supervisorctl]\nserverurl=unix://{_value(str(socket_path))}\n",
    ]
    for program in programs:
        sections.append(
            f"[program:{program.name}]\n"
            f"command={_value(shlex.join(program.command))}\n"
            f"directory={_value(str(cwd))}\n"
            f"priority={program.priority}\n"
            "autostart=true\nautorestart=true\n"
            f"startsecs={START_SECONDS}\nstartretries={START_RETRIES}\n"
            # SIGTERM lets a server drain; past stopwaitsecs it gets SIGKILL.
            f"stopsignal=TERM\nstopwaitsecs={max(1, round(stop_seconds))}\n"
            "stopasgroup=true\nkillasgroup=true\n"
            f"redirect_stderr=true\nstdout_logfile={_value(str(program.log_path))}\n"
            "stdout_logfile_maxbytes=0\nstdout_logfile_backups=0\n"
        )
    return "\n".join(sections)


def _load_prctl():
    """libc's prctl, bound here in the parent: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """supervisord gets SIGTERM when the thread that started it exits, so a
    killed test run or launcher leaves no servers behind: supervisord stops
    its programs on SIGTERM (Linux only)."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    """supervisord over `programs`, its files in `folder`."""

    def __init__(self, folder: Path, programs: list[Program], cwd: Path, env: dict[str, str] | None = None,
                 stop_seconds: float = 10.0, python: str = sys.executable):
        self.folder = Path(folder)
        self.programs = list(programs)
        self.cwd = cwd
        self.env = env
        self.stop_seconds = stop_seconds
        self.python = python
        self.config_path = self.folder / "supervisord.conf"
        self.socket_path = self.folder / "supervisor.sock"
        self._socket_folder: Path | None = None  # a short folder of our own when the log folder's path is too long
        self.popen: subprocess.Popen | None = None

    # -- life cycle ----------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            self._socket_folder = Path(tempfile.mkdtemp(prefix="champollion-"))
            self.socket_path = self._socket_folder / "supervisor.sock"
        self.config_path.write_text(
            render_config(self.programs, self.folder, self.socket_path, self.cwd, self.stop_seconds), encoding="utf-8")
        for program in self.programs:  # a fresh log per cluster; restarts append to it
            program.log_path.write_bytes(b"")
        with open(self.folder / "supervisord.out", "wb") as output:  # what it says before its log is open
            self.popen = subprocess.Popen(
                [self.python, "-m", "supervisor.supervisord", "--nodaemon", "--configuration", str(self.config_path)],
                cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                # Ctrl-C in a terminal reaches only the launcher, which shuts supervisord down.
                start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise SupervisorError(f"supervisord exited with status {self.popen.returncode}:\n{self.output_tail()}")
            try:
                if self._rpc().supervisor.getState()["statename"] == "RUNNING":
                    return
            except (OSError, xmlrpc.client.Fault):
                pass
            time.sleep(0.05)
        raise SupervisorError(f"supervisord did not answer within {timeout:.0f} s:\n{self.output_tail()}")

    def shutdown(self) -> None:
        """Stops every program (highest priority first, each given
        stop_seconds to drain), then supervisord itself."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.stop_seconds * len(self.programs) + 10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if self._socket_folder is not None:
            shutil.rmtree(self._socket_folder, ignore_errors=True)

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def output_tail(self, lines: int = 20) -> str:
        text = ""
        for name in ("supervisord.out", "supervisord.log"):
            path = self.folder / name
            if path.exists():
                text += path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- what supervisord knows ------------------------------------------------

    def _rpc(self):
        # A proxy per call: callers may be on several threads.
        transport = SupervisorTransport(None, None, f"unix://{self.socket_path}")
        return xmlrpc.client.ServerProxy("http://localhost", transport=transport)

    def info(self, name: str) -> dict:
        """supervisord's record of one program: statename, pid (0 when none), spawnerr..."""
        return self._rpc().supervisor.getProcessInfo(name)

    def states(self) -> dict[str, tuple[str, int]]:
        """program name -> (state name, pid)."""
        return {info["name"]: (info["statename"], info["pid"]) for info in self._rpc().supervisor.getAllProcessInfo()}

    def pid(self, name: str) -> int | None:
        try:
            pid = self.info(name)["pid"]
        except (OSError, xmlrpc.client.Fault):
            return None
        return pid or None

    def start_program(self, name: str) -> None:
        """Starts a stopped program without waiting for START_SECONDS."""
        self._rpc().supervisor.startProcess(name, False)

    def stop_program(self, name: str) -> None:
        """Stops a program (SIGTERM) and keeps it down until start_program."""
        self._rpc().supervisor.stopProcess(name, True)


class RestartWatch:
    """Turns successive `Supervisor.states()` into one line per restart,
    failed start or give-up, for `champollion up` to print."""

    def __init__(self, logs: dict[str, Path]):
        self.logs = logs
        self._pids: dict[str, int] = {}  # the last pid seen per program (a dead one reads 0 a moment)
        self._states: dict[str, str] = {}

    def notices(self, states: dict[str, tuple[str, int]]) -> list[str]:
        lines = []
        for name, (state, pid) in states.items():
            old_pid, old_state = self._pids.get(name), self._states.get(name, state)
            if pid and old_pid and pid != old_pid:
                lines.append(f"{name} restarted by supervisord (pid {old_pid} -> {pid})")
            if state != old_state and state == "BACKOFF":
                lines.append(f"{name} exited while starting; supervisord retries it after a back-off")
            if state != old_state and state == "FATAL":
                lines.append(f"{name} did not start after {START_RETRIES} retries; supervisord gave up "
                             f"(log: {self.logs.get(name, 'supervisord.log')})")
            if pid:
                self._pids[name] = pid
            self._states[name] = state
        return lines
