"""Big runs: the real `champollion evaluate` (a subprocess, embedded stack,
every family, run card written with -o, nothing stored) at 10,000, 20,000
and 100,000 entries, its wall time and the peak memory of each of its
processes, to show that time grows linearly and memory stays flat.

Entries are WMT21 en-de segments (every system's output against reference
A), the systems coming round again under new ids past 20,040
(bench/wmt21.py `segments(..., repeat=True)`). Each process of the
command's tree (the CLI, which holds the client, the embedded gateway and
the family servers; its worker processes) is polled every 0.1 s for its
VmHWM (peak resident set, from /proc/PID/status) until it exits.

Targets (issue 37): the 100,000-entry run within 10.5x the 10,000-entry
one, and no process above 2 GiB at 100,000; exit 1 when one is missed.

  python bench/scale.py [--sizes 10000,20000,100000] [--workers N]
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.end_to_end import _children, _children_cpu, write_inputs  # noqa: E402
from bench.wmt21 import segments  # noqa: E402

MAX_RATIO = 10.5  # 100,000 entries against 10,000
MAX_PEAK_BYTES = 2 * 2**30
POLL_S = 0.1


def _status_kb(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "cli (client, gateway, family servers)"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    if "resource_tracker" in command:
        return "resource tracker"
    return "worker" if "spawn_main" in command else command[:60]


class PeakWatch:
    """Each process of a tree's highest VmHWM seen, polled until the root
    exits (a worker's last reading is at most POLL_S old when it ends)."""

    def __init__(self, root: int):
        self.root = root
        self.peaks: dict[int, tuple[str, int]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._done.is_set():
            tree, todo = _children(), [self.root]
            while todo:
                pid = todo.pop()
                todo.extend(tree.get(pid, ()))
                peak = _status_kb(pid, "VmHWM")
                if peak is not None:
                    role = self.peaks[pid][0] if pid in self.peaks else _role(pid, self.root)
                    self.peaks[pid] = (role, max(peak, self.peaks.get(pid, ("", 0))[1]))
            self._done.wait(POLL_S)

    def stop(self) -> list[tuple[str, int, int]]:
        """(role, pid, peak bytes) of every process seen, the largest first."""
        self._done.set()
        self._thread.join()
        return sorted(((role, pid, kb * 1024) for pid, (role, kb) in self.peaks.items()),
                      key=lambda found: -found[2])


def card_entries(path: Path) -> tuple[dict, int]:
    """The card's run-level part and its number of entries, read a line at
    a time (the CLI writes the entries one a line): the bench's own memory
    stays small whatever the card's size."""
    head, entries, inside = [], 0, False
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if inside:
                if line.startswith("  ]"):
                    inside = False
                    head.append("  []" + line[3:])
                else:
                    entries += 1
                continue
            if line.startswith('  "entries": [') and not line.rstrip().endswith("[]"):
                inside = True
                head.append('  "entries":')
                continue
            head.append(line)
    return json.loads("".join(head)), entries


def run(size: int, folder: Path, workers: int | None) -> dict:
    entries, predictions = segments(size, repeat=True)
    paths = write_inputs(folder, entries, predictions)
    del entries, predictions
    out = folder / "card.json"
    # The command's own embedded stack: a background stack (where the command
    # has them) would hold the workers outside the command's process tree.
    env = {**os.environ, "CHAMPOLLION_DAEMON": "0"}
    if workers is not None:
        env["CHAMPOLLION_WORKERS"] = str(workers)
    command = [str(REPO / ".venv" / "bin" / "champollion"), "evaluate", str(paths["corpus.json"]),
               str(paths["predictions.jsonl"]), "--no-store", "--out", str(out)]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    watch = PeakWatch(process.pid)
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    peaks = watch.stop()
    if process.returncode != 0:
        raise SystemExit(f"champollion evaluate failed ({process.returncode}) at {size}: {stderr[-2000:]}")
    card, written = card_entries(out)
    if written != size or card["scores"]["total"] != size:
        raise SystemExit(f"{size} entries sent, the card has {card['scores']['total']} and its file {written}")
    failed = [w for w in card["warnings"] if w.startswith("family '") and "failed" in w]
    return {"size": size, "seconds": seconds, "cpu": _children_cpu() - cpu_before, "peaks": peaks,
            "card_bytes": out.stat().st_size, "failed": failed, "composite": card["scores"]["composite"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,20000,100000", help="entries per run, comma-separated")
    parser.add_argument("--workers", type=int, help="worker processes (default: one per core)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    results = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="champollion-scale-") as folder:
            found = results[size] = run(size, Path(folder), args.workers)
        print(f"{size:>7,} entries: {found['seconds']:7.1f} s  {size / found['seconds']:5.0f} entries/s  "
              f"cpu {found['cpu']:7.1f} s  card {found['card_bytes'] / 2**20:6.0f} MiB  "
              f"composite {found['composite']}", flush=True)
        for role, pid, peak in found["peaks"]:
            if peak >= 2**20:
                print(f"    {role:40s} pid {pid:>7}  peak RSS {peak / 2**20:7.0f} MiB", flush=True)
        for warning in found["failed"]:
            print(f"    {warning[:200]}", flush=True)

    missed = []
    if 10_000 in results and 100_000 in results:
        ratio = results[100_000]["seconds"] / results[10_000]["seconds"]
        print(f"time 100,000 / 10,000 entries: {ratio:.2f} (target <= {MAX_RATIO})")
        if ratio > MAX_RATIO:
            missed.append(f"time ratio {ratio:.2f} > {MAX_RATIO}")
    largest = max(sizes)
    role, pid, peak = results[largest]["peaks"][0]
    print(f"largest process at {largest:,} entries: {role}, {peak / 2**20:.0f} MiB (target <= 2,048 MiB)")
    if peak > MAX_PEAK_BYTES:
        missed.append(f"{role} peaked at {peak / 2**20:.0f} MiB")
    if any(found["failed"] for found in results.values()):
        missed.append("a family failed")
    for reason in missed:
        print(f"MISSED: {reason}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
