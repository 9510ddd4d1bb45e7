"""A throw-away PostgreSQL cluster for the tests: Debian's initdb and pg_ctl
on a temporary data directory and a free port, its unix socket in the same
directory, run as the `postgres` OS user when the tests run as root
(PostgreSQL refuses to run as root). No mocks: a real server."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

POSTGRES_ROOT = Path("/usr/lib/postgresql")


def postgres_bin() -> Path:
    """The newest installed server's bin folder."""
    versions = sorted((p for p in POSTGRES_ROOT.glob("*/bin") if (p / "initdb").exists()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not versions:
        raise RuntimeError(f"PostgreSQL is not installed under {POSTGRES_ROOT}: `make test` installs "
                           "Debian's postgresql package (apt-get install postgresql)")
    return versions[-1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    base: Path
    port: int
    bin: Path
    user: str | None

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, user=self.user, cwd=self.base)

    def create_database(self, name: str) -> str:
        self._run(str(self.bin / "psql"), "-h", str(self.base), "-p", str(self.port), "-U", "postgres",
                  "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def start_cluster() -> Cluster:
    """initdb + pg_ctl start; trust authentication on loopback only."""
    user = "postgres" if os.geteuid() == 0 else None
    # Under /tmp rather than pytest's tmp_path, whose 0700 parents the postgres user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="champollion-pg-"))
    if user:
        shutil.chown(base, user, user)
    cluster = Cluster(base=base, port=free_port(), bin=postgres_bin(), user=user)
    try:
        cluster._run(str(cluster.bin / "initdb"), "-D", str(cluster.data), "-U", "postgres", "-A", "trust",
                     "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
        options = f"-p {cluster.port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        cluster._run(str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), "-o", options,
                     "-l", str(base / "server.log"), "-w", "start")
    except subprocess.CalledProcessError as error:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {error.stderr.decode(errors='replace').strip()}") from None
    return cluster
