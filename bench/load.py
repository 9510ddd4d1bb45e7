"""Load: N concurrent Evaluate calls against `champollion serve` (every
family in the gateway's process) and against `champollion up`'s topology
(every family in its own process), as a busy platform would send them.

Each call is the same run: examples/eng-spa's 36 entries repeated `--copies`
times (default 6: 216 entries) with unique ids, sent as one unary Evaluate.
Printed per server: successes, RESOURCE_EXHAUSTED answers (the gateway's
admission refusing a run it cannot take now), every other status, p50/p95
latency of the successful calls and of the refusals, peak memory (summed
resident set of the server's process tree, sampled every 0.2 s from /proc),
and how many distinct cards the successful calls gave: 1 when every card is
the same, byte for byte, less what differs between two evaluations of one
run by design (champollion.core.run_card.reproducible_part: the run id, the
store's count of runs sharing its fingerprint, warnings about time).

Usage: python bench/load.py [--concurrency 200] [--copies 6] [--servers serve,up]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from apps.launch.local_cluster import REPO, LocalCluster  # noqa: E402
from champollion.core.serving import MAX_MESSAGE_BYTES  # noqa: E402
from champollion.core.run_card import reproducible_part, run_card_from_proto  # noqa: E402

EXAMPLE = REPO / "examples" / "eng-spa"
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]


def example_request(copies: int) -> gateway_pb2.EvaluateRequest:
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    predictions = {p["id"]: p for p in map(json.loads, (EXAMPLE / "predictions.jsonl").read_text().splitlines())}
    request = gateway_pb2.EvaluateRequest()
    request.corpus.id, request.corpus.source_lang = corpus["id"], corpus["source_lang"]
    request.corpus.target_lang = corpus["target_lang"]
    for copy in range(copies):
        for entry in corpus["entries"]:
            entry_id = f"{entry['id']}#{copy}"
            request.corpus.entries.add(id=entry_id, source=entry["source"], reference=entry["reference"],
                                       acceptable_variants=entry.get("acceptable_variants", []))
            request.predictions.add(id=entry_id, prediction=predictions[entry["id"]].get("prediction", ""))
    return request


def comparable(card: dict) -> str:
    return json.dumps(reproducible_part(card), sort_keys=True)


# -- memory of a process tree -----------------------------------------------------


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def tree_rss_kb(roots: list[int]) -> int:
    children, total, seen = _children(), 0, set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as handle:
                total += next((int(line.split()[1]) for line in handle if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


class PeakMemory:
    """The largest summed RSS of the trees under `roots` while it runs."""

    def __init__(self, roots: list[int]):
        self.roots, self.peak_kb = roots, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.roots))
            self._stop.wait(0.2)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


# -- the servers -------------------------------------------------------------------


@contextmanager
def serve(folder: Path) -> Iterator[tuple[str, list[int]]]:
    """`champollion serve` (gateway and every family in one process)."""
    log = folder / "serve.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "apps.cli", "serve", "--port", "0",
             "--store", f"sqlite:///{folder / 'serve-runs.sqlite'}"],
            cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield _await_gateway(process, log), [process.pid]
    finally:
        process.terminate()
        process.wait(timeout=60)


def _await_gateway(process: subprocess.Popen, log: Path, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{") and '"ready"' in line:  # serve's ready event names the gateway
                return json.loads(line)["gateway"]
        if process.poll() is not None:
            raise RuntimeError(f"serve exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError("serve printed no gateway address")


@contextmanager
def up(folder: Path) -> Iterator[tuple[str, list[int]]]:
    """`champollion up`'s topology (LocalCluster, what `up` runs)."""
    with LocalCluster(gateway_port=0, log_dir=folder / "up") as cluster:
        yield cluster.gateway_address, [p.pid for p in [*cluster.processes, cluster.gateway]]


SERVERS = {"serve": serve, "up": up}


# -- the load ----------------------------------------------------------------------


def call(stub, request) -> tuple[str, float, str | None]:
    started = time.monotonic()
    try:
        card = run_card_from_proto(stub.Evaluate(request, timeout=900).run_card)
    except grpc.RpcError as error:
        return error.code().name, time.monotonic() - started, None
    return "OK", time.monotonic() - started, comparable(card)


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    p50, p95 = np.percentile(values, [50, 95])
    return f"p50 {p50:.2f} s, p95 {p95:.2f} s"


def drive(name: str, concurrency: int, request) -> None:
    with tempfile.TemporaryDirectory(prefix=f"champollion-load-{name}-") as folder:
        with SERVERS[name](Path(folder)) as (address, pids):
            with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
                stub = gateway_pb2_grpc.GatewayStub(channel)
                grpc.channel_ready_future(channel).result(timeout=60)
                idle_kb = tree_rss_kb(pids)
                started = time.monotonic()
                with PeakMemory(pids) as memory, ThreadPoolExecutor(concurrency) as pool:
                    results = list(pool.map(lambda _: call(stub, request), range(concurrency)))
                wall = time.monotonic() - started
    statuses = Counter(status for status, _, _ in results)
    cards = {card for status, _, card in results if status == "OK"}
    print(f"{name}: {concurrency} concurrent Evaluate calls of {len(request.corpus.entries)} entries, "
          f"{wall:.1f} s in all")
    print(f"  successes {statuses.pop('OK', 0)}, RESOURCE_EXHAUSTED {statuses.pop('RESOURCE_EXHAUSTED', 0)}, "
          f"other statuses {dict(statuses) or 'none'}")
    print(f"  latency of successes: {percentiles([s for st, s, _ in results if st == 'OK'])}; "
          f"of refusals: {percentiles([s for st, s, _ in results if st == 'RESOURCE_EXHAUSTED'])}")
    print(f"  memory of the server's processes: {idle_kb / 1024:.0f} MiB idle, peak {memory.peak_kb / 1024:.0f} MiB")
    print(f"  distinct cards among the successes: {len(cards)} (identical: {len(cards) <= 1})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--copies", type=int, default=6, help="copies of the example's 36 entries per run")
    parser.add_argument("--servers", default="serve,up", help="serve, up, or both")
    args = parser.parse_args(argv)
    request = example_request(args.copies)
    for name in args.servers.split(","):
        drive(name.strip(), args.concurrency, request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
