"""End to end on WMT21 en-de: the real `champollion evaluate` command against
the `sacrebleu` command on the same text, and the surface family alone
through the gateway against sacreBLEU's statistics in one pass.

  (a) `champollion evaluate CORPUS PREDICTIONS` (a subprocess, embedded stack,
      every family this machine has) on N entries written to temporary files;
      with --threads-too also with CHAMPOLLION_WORKERS=0 (scoring in threads)
  (b) `sacrebleu REF -i HYP -m bleu chrf ter --chrf-word-order 2` on the same
      hypotheses and references (one line each)
  (c) the surface family alone through an embedded gateway (real gRPC) vs
      one-pass sacreBLEU statistics (bench/surface_overhead.py) on the same pairs

Each line gives the wall time, entries per second and peak memory: the
summed RSS of the command's process tree (sampled every 50 ms from /proc),
for (c) this process's peak RSS. Usage:

  python bench/end_to_end.py [--entries N] [--workers N] [--threads-too]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.surface_overhead import build_request, direct_one_pass  # noqa: E402
from bench.wmt21 import segments  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def tree_rss(root: int) -> int:
    """Bytes resident in `root` and all its descendants now."""
    tree, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError):
            pass
        todo.extend(tree.get(pid, ()))
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# CPU seconds (user + system) of each measured command's whole tree, by command.
CPU_SECONDS: dict[str, float] = {}


def run_measured(command: list[str], env: dict | None = None) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds, peak process-tree RSS (bytes), and the finished process;
    CPU_SECONDS records its CPU time (workers are reaped by their command,
    so theirs counts)."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak, done = 0, threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    CPU_SECONDS[" ".join(command)] = _children_cpu() - cpu_before
    return seconds, peak, subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def write_inputs(folder: Path, entries: list[dict], predictions: list[dict]) -> dict[str, Path]:
    paths = {name: folder / name for name in ("corpus.json", "predictions.jsonl", "ref.txt", "hyp.txt")}
    corpus = {"id": "wmt21-ende-bench", "source_lang": "eng", "target_lang": "deu", "entries": entries}
    paths["corpus.json"].write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    paths["predictions.jsonl"].write_text(
        "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions), encoding="utf-8")
    # sacreBLEU reads one segment a line: no entry has a newline inside.
    paths["ref.txt"].write_text("".join(e["reference"] + "\n" for e in entries), encoding="utf-8")
    paths["hyp.txt"].write_text("".join(p["prediction"] + "\n" for p in predictions), encoding="utf-8")
    return paths


def champollion_evaluate(paths: dict[str, Path], out: Path, workers: int | None) -> tuple[float, int, dict]:
    # The embedded stack, as measured: a background stack (where the command
    # has them) would score outside the command's process tree.
    env = {**os.environ, "CHAMPOLLION_DAEMON": "0"}
    if workers is not None:
        env["CHAMPOLLION_WORKERS"] = str(workers)
    command = [str(REPO / ".venv" / "bin" / "champollion"), "evaluate", str(paths["corpus.json"]),
               str(paths["predictions.jsonl"]), "--no-store", "--out", str(out)]
    seconds, peak, finished = run_measured(command, env)
    if finished.returncode != 0:
        raise SystemExit(f"champollion evaluate failed ({finished.returncode}): {finished.stderr[-2000:]}")
    return seconds, peak, json.loads(out.read_text(encoding="utf-8"))


def sacrebleu_cli(paths: dict[str, Path]) -> tuple[float, int, list[dict]]:
    command = [str(REPO / ".venv" / "bin" / "sacrebleu"), str(paths["ref.txt"]), "-i", str(paths["hyp.txt"]),
               "-m", "bleu", "chrf", "ter", "--chrf-word-order", "2"]
    seconds, peak, finished = run_measured(command)
    if finished.returncode != 0:
        raise SystemExit(f"sacrebleu failed ({finished.returncode}): {finished.stderr[-2000:]}")
    return seconds, peak, json.loads(finished.stdout)


def surface_through_gateway(entries, predictions, batch_size: int) -> tuple[float, dict]:
    import grpc

    from champollion.eval.v1 import gateway_pb2_grpc
    from apps.launch.embedded import EmbeddedStack
    from champollion.core.run_card import run_card_from_proto

    request = build_request(entries, predictions, batch_size)
    with EmbeddedStack(families=("surface",), store=None, workers=0) as stack, \
            grpc.insecure_channel(stack.gateway_address, options=UNLIMITED) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        started = time.perf_counter()
        card = run_card_from_proto(stub.Evaluate(request, timeout=1800).run_card)
        return time.perf_counter() - started, card


def _line(label: str, seconds: float, entries: int, peak_bytes: int | None, cpu: float | None = None) -> str:
    memory = f"{peak_bytes / 2**20:8.0f} MiB" if peak_bytes is not None else " " * 12
    used = f"  cpu {cpu:7.1f} s" if cpu is not None else ""
    return f"{label:50s} {seconds:8.2f} s  {entries / seconds:6.0f} entries/s  peak {memory}{used}"


def _last_cpu() -> float:
    return list(CPU_SECONDS.values())[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--workers", type=int, help="worker processes for (a) (default: one per core)")
    parser.add_argument("--threads-too", action="store_true", help="(a) once more, scoring in threads")
    parser.add_argument("--batch-size", type=int, default=256, help="entries per family call in (c)")
    args = parser.parse_args()
    from champollion.core import logs
    logs.configure("WARNING")

    entries, predictions = segments(args.entries)
    count = len(entries)
    print(f"{count} entries (WMT21 en-de systems vs ref.A), {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    def report(line: str) -> None:  # as it comes: a run takes minutes
        print(line, flush=True)
    with tempfile.TemporaryDirectory(prefix="champollion-e2e-") as folder:
        paths = write_inputs(Path(folder), entries, predictions)
        a_s, a_peak, card = champollion_evaluate(paths, Path(folder) / "card.json", args.workers)
        label = f"(a) champollion evaluate, {'default' if args.workers is None else args.workers} workers"
        report(_line(label, a_s, count, a_peak, _last_cpu()))
        if args.threads_too:
            t_s, t_peak, threads_card = champollion_evaluate(paths, Path(folder) / "card-threads.json", 0)
            report(_line("(a') champollion evaluate, scoring in threads", t_s, count, t_peak, _last_cpu()))
            assert threads_card["scores"] == card["scores"], "workers and threads must give the same scores"
        b_s, b_peak, sacrebleu_scores = sacrebleu_cli(paths)
        report(_line("(b) sacrebleu CLI: BLEU, chrF++, TER", b_s, count, b_peak, _last_cpu()))

    hypotheses = [p["prediction"] for p in predictions]
    references = [e["reference"] for e in entries]
    one_pass_started = time.perf_counter()
    _, one_pass_corpus = direct_one_pass(hypotheses, references)
    one_pass_s = time.perf_counter() - one_pass_started
    c_s, surface_card = surface_through_gateway(entries, predictions, args.batch_size)
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report(_line("(c) surface family through the gateway", c_s, count, None))
    report(_line("(c) sacreBLEU statistics, one pass, in process", one_pass_s, count, None))

    # The same numbers, or the timings mean nothing.
    by_name = {score["name"].split("+")[0].split("2")[0]: score["score"] for score in sacrebleu_scores}
    for key, name in (("bleu", "BLEU"), ("chrf_plus_plus", "chrF"), ("ter", "TER")):
        assert abs(surface_card["scores"][key] - one_pass_corpus[key]) <= 1e-6, key
        assert abs(card["scores"][key] - by_name[name]) <= 0.051, (key, card["scores"][key], by_name[name])

    print(f"(c) this process's peak RSS (one-pass statistics, then gateway + surface in threads): "
          f"{own_peak / 2**20:.0f} MiB")
    print(f"ratio (a)/(b), every family vs sacreBLEU's three metrics: {a_s / b_s:.2f}")
    print(f"ratio (c), surface through the gateway / one pass:       {c_s / one_pass_s:.2f}")
    print(f"composite {card['scores']['composite']}; families failed or slow in (a):")
    for warning in card["warnings"]:
        if warning.startswith("family '"):
            print(f"  {warning[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
