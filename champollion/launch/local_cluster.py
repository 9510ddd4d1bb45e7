"""The distributed topology on one machine: every family in its own process,
several replicas where asked (two structural replicas by default), and a
gateway process in front that reaches them by address, load-balancing with
gRPC's own round_robin over an `ipv4:host:port,host:port` target, exactly as
it does over a Kubernetes headless Service's DNS name.

Each process is `python -m champollion.cli serve --family NAME --port 0 --host H`:
the OS picks the port, and the process's first stderr line names it. Its
stderr (structlog JSON lines, one `score_batch` event per batch) goes to a
file in the cluster's log folder.

    with LocalCluster(families=("surface", "structural"), replicas={"structural": 2}) as cluster:
        channel = grpc.insecure_channel(cluster.gateway_address)
        ...
        cluster.kill(cluster.replicas("structural")[0])     # SIGKILL one replica

`python -m champollion.launch.local_cluster` (or `main()`) keeps a cluster up until
Ctrl-C and prints the addresses.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REPLICAS = {"structural": 2}


class ClusterError(RuntimeError):
    """A process did not start, exited early or never answered health checks."""


def implemented_families() -> tuple[str, ...]:
    """The families this build can serve (semantic only once it is registered)."""
    from services.registry import IMPLEMENTED

    return tuple(IMPLEMENTED)


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_ipv4(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv4Address)
    except ValueError:
        return False


def target_for(addresses: list[tuple[str, int]]) -> str:
    """The gRPC target for one family's replicas: `host:port` for one,
    `ipv4:h1:p1,h2:p2` for several (gRPC's static address list, which the
    round_robin policy spreads calls over)."""
    if len(addresses) == 1:
        return _format_address(*addresses[0])
    if not all(_is_ipv4(host) for host, _ in addresses):
        raise ValueError("several replicas need IPv4 literal hosts (an ipv4: target)")
    return "ipv4:" + ",".join(f"{host}:{port}" for host, port in addresses)


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
    """The child gets SIGTERM when the thread that started it exits, so a
    killed test run or launcher leaves no servers behind (Linux only)."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def health_status(address: str, timeout: float = 1.0) -> int | None:
    """The server's overall gRPC health status, or None when it does not answer."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return None
    return response.status


@dataclass
class ServiceProcess:
    """One server process: a family replica or the gateway."""

    name: str  # "structural-1", "gateway"
    family: str  # a family name, or "gateway"
    host: str
    log_path: Path
    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    popen: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return _format_address(self.host, self.port)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def command(self, python: str) -> list[str]:
        return [python, "-m", "champollion.cli", "serve", "--family", self.family,
                "--port", str(self.port), "--host", self.host, *self.extra_args]

    def events(self, event: str | None = None) -> list[dict]:
        """The JSON log lines this process wrote (all its lifetimes), or those
        of one `event` (e.g. "score_batch")."""
        found = []
        if not self.log_path.exists():
            return found
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and (event is None or record.get("event") == event):
                found.append(record)
        return found

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def peak_rss_kb(self) -> int | None:
        """VmHWM (peak resident set) from /proc while the process lives."""
        return _proc_status_kb(self.pid, "VmHWM") if self.alive() else None

    def rss_kb(self) -> int | None:
        return _proc_status_kb(self.pid, "VmRSS") if self.alive() else None


def _proc_status_kb(pid: int | None, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def start_process(
    process: ServiceProcess, python: str = sys.executable, env: dict[str, str] | None = None, append: bool = False
) -> None:
    """Starts `process`, its stdout and stderr written to its log file (a new
    file, or appended to it: a restarted process keeps its history)."""
    log = open(process.log_path, "ab" if append else "wb")
    try:
        process.popen = subprocess.Popen(
            process.command(python),
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"} if env is None else env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Ctrl-C in a terminal reaches only the launcher, which stops the
            # servers in order.
            start_new_session=True,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )
    finally:
        log.close()


def await_port(process: ServiceProcess, timeout: float = 60.0) -> None:
    """With port 0, reads the bound port from the process's first stderr line
    (`{"serving": FAMILY, "address": HOST:PORT}`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in process.events():
            if record.get("serving") == process.family and "address" in record:
                process.port = int(record["address"].rsplit(":", 1)[1])
        if process.port:
            return
        if not process.alive():
            raise ClusterError(f"{process.name} exited with status {process.popen.returncode}:\n{process.log_tail()}")
        time.sleep(0.05)
    raise ClusterError(f"{process.name} did not report its address within {timeout:.0f} s:\n{process.log_tail()}")


def await_serving(process: ServiceProcess, timeout: float = 60.0) -> None:
    """Waits until the process answers gRPC health with SERVING."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health_status(process.address) == health_pb2.HealthCheckResponse.SERVING:
            return
        if not process.alive():
            raise ClusterError(f"{process.name} exited with status {process.popen.returncode}:\n{process.log_tail()}")
        time.sleep(0.1)
    raise ClusterError(f"{process.name} at {process.address} is not SERVING after {timeout:.0f} s")


def stop_processes(processes: list[ServiceProcess], timeout: float = 10.0) -> None:
    """SIGTERM to all (the servers drain for up to 5 s), then SIGKILL to any
    still running after `timeout`."""
    for process in processes:
        if process.alive():
            process.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in processes:
        if process.popen is None:
            continue
        try:
            process.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait(timeout=timeout)


class LocalCluster:
    """Starts the topology on `__enter__` (or `start()`), stops it on exit.

    families: family names (default: every implemented family).
    replicas: replicas per family, an int for all or {family: n}; families not
        named get 1 (default: two structural replicas).
    languages: `--languages` for the structural processes (default: all).
    gateway: gateway config values beside `families` (batch_size,
        deadline_seconds, max_in_flight, store; the store defaults to
        runs.sqlite in the log folder).
    gateway_port: 0 lets the OS choose.
    log_dir: where logs and gateway.yaml go (default: a temporary folder,
        removed on stop).
    """

    def __init__(
        self,
        families: tuple[str, ...] | list[str] | None = None,
        replicas: int | dict[str, int] | None = None,
        host: str = "127.0.0.1",
        languages: list[str] | None = None,
        gateway: dict | None = None,
        gateway_port: int = 0,
        log_dir: str | Path | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
    ):
        self.families = tuple(families) if families is not None else implemented_families()
        if isinstance(replicas, int):
            counts = {name: replicas for name in self.families}
        else:
            counts = dict(DEFAULT_REPLICAS if replicas is None else replicas)
        self.replica_counts = {name: max(1, counts.get(name, 1)) for name in self.families}
        self.host = host
        self.languages = languages
        self.gateway_options = dict(gateway or {})
        self.gateway_port = gateway_port
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir else None
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.python = python
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.processes: list[ServiceProcess] = []
        self.gateway: ServiceProcess | None = None
        self.config_path: Path | None = None

    # -- queries -------------------------------------------------------------

    @property
    def gateway_address(self) -> str:
        if self.gateway is None:
            raise ClusterError("the cluster is not started")
        return self.gateway.address

    def replicas(self, family: str) -> list[ServiceProcess]:
        return [p for p in self.processes if p.family == family]

    def family_targets(self) -> dict[str, str]:
        """family -> the target written in the gateway config."""
        return {
            family: target_for([(p.host, p.port) for p in self.replicas(family)])
            for family in self.families
        }

    def addresses(self) -> dict:
        return {
            "gateway": self.gateway.address if self.gateway else None,
            "families": {family: [p.address for p in self.replicas(family)] for family in self.families},
            "config": str(self.config_path) if self.config_path else None,
            "logs": str(self.log_dir) if self.log_dir else None,
        }

    # -- life cycle ----------------------------------------------------------

    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> "LocalCluster":
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="champollion-cluster-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for family in self.families:
                count = self.replica_counts[family]
                for index in range(1, count + 1):
                    name = f"{family}-{index}" if count > 1 else family
                    extra = ["--languages", ",".join(self.languages)] if family == "structural" and self.languages else []
                    process = ServiceProcess(name, family, self.host, self.log_dir / f"{name}.log", extra)
                    self.processes.append(process)
                    self._spawn(process)
            # Every family starts at once; then each is waited for.
            for process in self.processes:
                self._await_port(process)
            for process in self.processes:
                self._await_health(process)
            self.config_path = self.write_gateway_config(self.log_dir / "gateway.yaml")
            self.gateway = ServiceProcess(
                "gateway", "gateway", self.host, self.log_dir / "gateway.log",
                ["--config", str(self.config_path)], port=self.gateway_port,
            )
            self._spawn(self.gateway)
            self._await_port(self.gateway)
            self._await_health(self.gateway)
        except BaseException:
            self.stop()
            raise
        return self

    def write_gateway_config(self, path: Path) -> Path:
        config = {"families": self.family_targets(), "store": f"sqlite:///{self.log_dir / 'runs.sqlite'}",
                  **self.gateway_options}
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def _spawn(self, process: ServiceProcess, append: bool = False) -> None:
        start_process(process, self.python, self.env, append)

    def _await_port(self, process: ServiceProcess) -> None:
        await_port(process, self.startup_timeout)

    def _await_health(self, process: ServiceProcess) -> None:
        await_serving(process, self.startup_timeout)

    def kill(self, process: ServiceProcess, signum: int = signal.SIGKILL) -> None:
        """Sends `signum` (SIGKILL: no goodbye to its clients) and reaps it."""
        if process.alive():
            process.popen.send_signal(signum)
            process.popen.wait(timeout=self.stop_timeout)

    def restart(self, process: ServiceProcess) -> None:
        """Starts a stopped process again on the same port (its log continues)."""
        if process.alive():
            raise ClusterError(f"{process.name} is still running")
        self._spawn(process, append=True)
        self._await_health(process)

    def _terminate(self, processes: list[ServiceProcess]) -> None:
        stop_processes(processes, self.stop_timeout)

    def stop(self) -> None:
        """The gateway first (no run is left half-sent), then every family."""
        if self.gateway is not None:
            self._terminate([self.gateway])
        self._terminate(self.processes)
        if self._own_log_dir and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None


# -- the launcher ---------------------------------------------------------------


def _replica_counts(text: str | None) -> dict[str, int]:
    """"2" or "structural=2,surface=3"."""
    if not text:
        return {}
    if text.isdigit():
        return {"*": int(text)}
    counts = {}
    for part in text.split(","):
        name, _, number = part.partition("=")
        counts[name.strip()] = int(number)
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `champollion up` / `python -m champollion.launch.local_cluster`."""
    parser.add_argument("--family", action="append", default=[], metavar="NAME",
                        help="families to start (repeatable; default: every implemented family)")
    parser.add_argument("--replicas", default=None,
                        help="replicas per family: N for all, or NAME=N,NAME=N (default: structural=2)")
    parser.add_argument("--port", type=int, default=50051, help="gateway port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="IPv4 address every process binds")
    parser.add_argument("--languages", help="comma-separated languages the structural replicas serve")
    parser.add_argument("--batch-size", type=int, help="gateway batch size")
    parser.add_argument("--log-dir", help="keep each process's log here (default: a temporary folder)")
    parser.add_argument("--store", metavar="URL", help="the gateway's run store (default: runs.sqlite in the log folder)")


def cluster_from_args(args: argparse.Namespace) -> LocalCluster:
    families = tuple(args.family) or None
    counts = _replica_counts(args.replicas)
    replicas: int | dict[str, int] | None
    replicas = counts["*"] if "*" in counts else ({**DEFAULT_REPLICAS, **counts} if counts else None)
    languages = [code.strip() for code in args.languages.split(",") if code.strip()] if args.languages else None
    gateway = {"batch_size": args.batch_size} if args.batch_size else {}
    if args.store:
        gateway["store"] = args.store
    return LocalCluster(families, replicas, host=args.host, languages=languages, gateway=gateway,
                        gateway_port=args.port, log_dir=args.log_dir)


def run(args: argparse.Namespace) -> int:
    """Starts the cluster, prints its addresses (JSON on stdout), keeps it up
    until Ctrl-C or SIGTERM, then stops every process."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    cluster = cluster_from_args(args)
    try:
        with cluster:
            print(json.dumps(cluster.addresses(), indent=2), flush=True)
            print(f"gateway at {cluster.gateway_address}; Ctrl-C stops the cluster", file=sys.stderr, flush=True)
            reported: set[str] = set()
            while True:
                for process in cluster.processes:
                    if not process.alive() and process.name not in reported:
                        reported.add(process.name)
                        print(f"{process.name} exited with status {process.popen.returncode}", file=sys.stderr, flush=True)
                if cluster.gateway is not None and not cluster.gateway.alive():
                    print("the gateway exited; stopping", file=sys.stderr)
                    return 1
                time.sleep(1.0)
    except KeyboardInterrupt:
        return 0
    except ClusterError as error:
        print(f"champollion: error: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="champollion up", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
