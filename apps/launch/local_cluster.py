"""The distributed topology on one machine: every family in its own process,
several replicas where asked (two structural replicas by default), and a
gateway process in front that reaches them by address, load-balancing with
gRPC's own round_robin over an `ipv4:host:port,host:port` target, exactly as
it does over a Kubernetes headless Service's DNS name.

Each process is `python -m apps.cli serve --family NAME --port P --host H`,
on a port chosen before it starts (so the gateway's config can name it), run
by supervisord (apps.launch.supervision), which restarts a process that
dies. Its stdout and stderr (structlog JSON lines, one `score_batch` event per
batch) go to NAME.log in the cluster's log folder.

    with LocalCluster(families=("surface", "structural"), replicas={"structural": 2}) as cluster:
        channel = grpc.insecure_channel(cluster.gateway_address)
        ...
        cluster.kill(cluster.replicas("structural")[0])     # SIGKILL one replica; supervisord restarts it

`python -m apps.launch.local_cluster` (or `main()`) keeps a cluster up until
Ctrl-C, prints the addresses and a line for each restart.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import xmlrpc.client
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from champollion.eval.v1 import family_pb2, gateway_pb2_grpc
from apps.launch.supervision import Program, RestartWatch, Supervisor, SupervisorError

REPO = Path(__file__).resolve().parents[2]
DEFAULT_REPLICAS = {"structural": 2}


class ClusterError(RuntimeError):
    """A process did not start, supervisord gave it up or it never answered health checks."""


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
    """One server process, a family replica or the gateway, as supervisord runs it."""

    name: str  # "structural-1", "gateway": the supervisord program name
    family: str  # a family name, or "gateway"
    host: str
    log_path: Path
    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    supervisor: Supervisor | None = None  # set once supervisord runs it

    @property
    def address(self) -> str:
        return _format_address(self.host, self.port)

    @property
    def pid(self) -> int | None:
        """The live process's pid as supervisord reports it (a new one after each restart)."""
        return self.supervisor.pid(self.name) if self.supervisor else None

    def state(self) -> str | None:
        """supervisord's state name (STARTING, RUNNING, BACKOFF, STOPPED, EXITED, FATAL...)."""
        if self.supervisor is None:
            return None
        try:
            return self.supervisor.info(self.name)["statename"]
        except (OSError, xmlrpc.client.Fault):
            return None

    def alive(self) -> bool:
        return self.pid is not None

    def program(self, python: str) -> Program:
        # The gateway starts after the families and stops before them.
        command = [python, "-m", "apps.cli", "serve", "--family", self.family,
                   "--port", str(self.port), "--host", self.host, *self.extra_args]
        return Program(self.name, command, self.log_path, priority=200 if self.family == "gateway" else 100)

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


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports free on `host` now (held open together while
    chosen, so none is chosen twice)."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]


def require_free_port(host: str, port: int) -> None:
    """A fixed port someone else listens on would only make supervisord retry in vain."""
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ClusterError(f"cannot use port {port} on {host}: {error.strerror}") from None


def supervise(processes: list[ServiceProcess], log_dir: Path, python: str = sys.executable,
              env: dict[str, str] | None = None, stop_timeout: float = 10.0) -> Supervisor:
    """Starts supervisord over `processes` (their ports already chosen) and
    returns it; each process then reads its pid and state from it."""
    supervisor = Supervisor(log_dir, [p.program(python) for p in processes], cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"} if env is None else env,
                            stop_seconds=stop_timeout, python=python)
    for process in processes:
        process.supervisor = supervisor
    try:
        supervisor.start()
    except SupervisorError as error:
        raise ClusterError(str(error)) from None
    return supervisor


def await_serving(process: ServiceProcess, timeout: float = 60.0) -> None:
    """Waits until the process answers gRPC health with SERVING (through
    supervisord's retries: one given up, FATAL, or stopped fails at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health_status(process.address) == health_pb2.HealthCheckResponse.SERVING:
            return
        state = process.state()
        if state in ("FATAL", "STOPPED"):
            raise ClusterError(f"{process.name} is {state} under supervisord:\n{process.log_tail()}")
        time.sleep(0.1)
    raise ClusterError(f"{process.name} at {process.address} is not SERVING after {timeout:.0f} s")


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
    log_dir: where logs, gateway.yaml and supervisord's files go (default: a
        temporary folder, removed on stop).
    stop_timeout: how long each process may drain after SIGTERM before
        supervisord sends SIGKILL.
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
        self.supervisor: Supervisor | None = None

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
            "supervisor": str(self.supervisor.config_path) if self.supervisor else None,
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
            if self.gateway_port:
                require_free_port(self.host, self.gateway_port)
            names = [(family, f"{family}-{index}" if count > 1 else family)
                     for family, count in self.replica_counts.items() for index in range(1, count + 1)]
            *ports, gateway_port = free_ports(self.host, len(names) + 1)
            for (family, name), port in zip(names, ports):
                extra = ["--languages", ",".join(self.languages)] if family == "structural" and self.languages else []
                self.processes.append(ServiceProcess(name, family, self.host, self.log_dir / f"{name}.log", extra, port))
            self.config_path = self.write_gateway_config(self.log_dir / "gateway.yaml")
            self.gateway = ServiceProcess(
                "gateway", "gateway", self.host, self.log_dir / "gateway.log",
                ["--config", str(self.config_path)], port=self.gateway_port or gateway_port,
            )
            self.supervisor = supervise([*self.processes, self.gateway], self.log_dir, self.python, self.env,
                                        self.stop_timeout)
            for process in [*self.processes, self.gateway]:
                await_serving(process, self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def write_gateway_config(self, path: Path) -> Path:
        config = {"families": self.family_targets(), "store": f"sqlite:///{self.log_dir / 'runs.sqlite'}",
                  **self.gateway_options}
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def kill(self, process: ServiceProcess, signum: int = signal.SIGKILL) -> int:
        """Sends `signum` to the process (SIGKILL: no goodbye to its clients)
        and, for a signal that ends it, waits until supervisord has seen it
        die; supervisord then starts it again (`restart` waits for that).
        Returns the pid signalled."""
        pid = process.pid
        if pid is None:
            raise ClusterError(f"{process.name} is not running")
        os.kill(pid, signum)
        if signum in (signal.SIGKILL, signal.SIGTERM):
            deadline = time.monotonic() + self.stop_timeout + 5
            while process.pid == pid:
                if time.monotonic() > deadline:
                    raise ClusterError(f"{process.name} (pid {pid}) did not end after signal {signum}")
                time.sleep(0.02)
        return pid

    def stop_process(self, process: ServiceProcess) -> None:
        """Stops the process through supervisord, which keeps it down until `restart`."""
        self.supervisor.stop_program(process.name)

    def restart(self, process: ServiceProcess) -> None:
        """Waits until the process serves again: restarted by supervisord after
        it died, or started again after `stop_process` (same port, its log
        continues); for a family, until the gateway reaches it again too."""
        if process.state() in ("STOPPED", "EXITED", "FATAL"):
            self.supervisor.start_program(process.name)
        await_serving(process, self.startup_timeout)
        if process is not self.gateway:
            self.await_reached(process.family)

    def await_reached(self, family: str) -> None:
        """Waits until the gateway's Describe reaches `family` (its channel
        redials a lost replica every second)."""
        deadline = time.monotonic() + self.startup_timeout
        with grpc.insecure_channel(self.gateway_address) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            while time.monotonic() < deadline:
                try:
                    statuses = stub.Describe(family_pb2.DescribeRequest(), timeout=10).families
                except grpc.RpcError:
                    statuses = []
                if any(status.family == family and status.reachable for status in statuses):
                    return
                time.sleep(0.1)
        raise ClusterError(f"the gateway does not reach {family} after {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        """supervisord stops the gateway first (no run is left half-sent),
        then every family, then exits."""
        if self.supervisor is not None:
            self.supervisor.shutdown()
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
    """The options of `champollion up` / `python -m apps.launch.local_cluster`."""
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
    # Each server drains for up to 25 s on SIGTERM; supervisord waits as long before SIGKILL.
    return LocalCluster(families, replicas, host=args.host, languages=languages, gateway=gateway,
                        gateway_port=args.port, log_dir=args.log_dir, stop_timeout=25)


def run(args: argparse.Namespace) -> int:
    """Starts the cluster, prints its addresses (JSON on stdout), keeps it up
    until Ctrl-C or SIGTERM, printing a line on stderr for each process
    supervisord restarts, then stops every process."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    cluster = cluster_from_args(args)
    try:
        with cluster:
            print(json.dumps(cluster.addresses(), indent=2), flush=True)
            print(f"gateway at {cluster.gateway_address}; Ctrl-C stops the cluster", file=sys.stderr, flush=True)
            watch = RestartWatch({p.name: p.log_path for p in [*cluster.processes, cluster.gateway]})
            while cluster.supervisor.running():
                try:
                    states = cluster.supervisor.states()
                except (OSError, xmlrpc.client.Fault):
                    states = {}  # shutting down: the loop ends with supervisord
                for line in watch.notices(states):
                    print(line, file=sys.stderr, flush=True)
                time.sleep(0.5)
            print("champollion: error: supervisord exited; the cluster is down", file=sys.stderr)
            return 1
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
