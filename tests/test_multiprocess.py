"""The distributed topology on real processes (apps.launch.local_cluster): every
family in its own process, two structural replicas behind one
`ipv4:host:port,host:port` target, a gateway process in front; all on
loopback, ports chosen by the OS.

- both structural replicas receive batches (gRPC round_robin);
- SIGKILL to one replica while a run is in flight: the run card is complete
  and equal, corpus and per-entry values, to an undisturbed run's;
- supervisord restarts a killed family within seconds, and the next run has
  its metrics;
- a family with no live replica gives nulls and a warning naming it;
- Describe reaches every family;
- a 100,000-entry run uploaded in parts completes across two replicas;
- a DNS name resolving to several addresses (what a Kubernetes headless
  Service gives the gateway, `dns:///surface.champollion.svc.cluster.local:50061`)
  is resolved by gRPC's own resolver and spread over by round_robin;
- `champollion up`'s launcher prints the addresses, says when supervisord
  restarted a process, and leaves no process behind on SIGTERM.

Each replica's stderr goes to a file; its `score_batch` JSON lines carry the
run id, so batches are counted per replica and per run.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import grpc
import pytest
import sacrebleu
import yaml

from champollion.eval.v1 import family_pb2, gateway_pb2_grpc
from apps.launch.local_cluster import (
    REPO,
    LocalCluster,
    ServiceProcess,
    await_serving,
    free_ports,
    health_status,
    supervise,
)
from apps.client.upload import request_parts
from gateway.card.metrics import FAMILY_SCORE_KEYS
from champollion.core.run_card import run_card_from_proto
from tests.conftest import EXAMPLE, make_request

FAMILIES = ("surface", "structural", "behavioral", "compliance")
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024),
                   ("grpc.max_send_message_length", 256 * 1024 * 1024)]
STRUCTURAL_KEYS = ("fst_acceptance_rate", "fst_accepted")  # spa has no orthography rules


def example_run(size: int) -> tuple[list[dict], list[dict]]:
    """`size` English→Spanish entries: the bundled example's entries over and
    over (ids `es-001#k`), every other round predicted by the example's
    predictions and otherwise by the reference, so scores vary."""
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))["entries"]
    lines = (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predicted = {record["id"]: record for record in map(json.loads, lines)}
    entries, predictions = [], []
    for index in range(size):
        entry = corpus[index % len(corpus)]
        round_ = index // len(corpus)
        entry_id = f"{entry['id']}#{round_}"
        entries.append({"id": entry_id, "source": entry["source"], "reference": entry["reference"],
                        "acceptable_variants": entry.get("acceptable_variants", [])})
        text = predicted[entry["id"]].get("prediction", "") if round_ % 2 == 0 else entry["reference"]
        predictions.append({"id": entry_id, "prediction": text})
    return entries, predictions


def evaluate(address: str, request, timeout: float = 120) -> dict:
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        return run_card_from_proto(gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=timeout).run_card)


def batches_of_run(process: ServiceProcess, run_id: str) -> int:
    return sum(1 for event in process.events("score_batch") if event.get("run_id") == run_id)


def entry_values(card: dict) -> dict:
    return {entry["id"]: (entry["scores"], entry["stats"]) for entry in card["entries"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # No floor runs: their batches, scored in the background after a run,
    # would mix with the batches these tests count per replica.
    with LocalCluster(families=FAMILIES, replicas={"structural": 2}, gateway={"floor_runs": False},
                      log_dir=tmp_path_factory.mktemp("cluster"), startup_timeout=60) as running:
        yield running


def test_both_structural_replicas_receive_batches(cluster):
    config = yaml.safe_load(cluster.config_path.read_text(encoding="utf-8"))
    first, second = cluster.replicas("structural")
    assert config["families"]["structural"] == f"ipv4:127.0.0.1:{first.port},127.0.0.1:{second.port}"

    entries, predictions = example_run(400)
    card = evaluate(cluster.gateway_address, make_request(entries, predictions, batch_size=10))
    assert card["scores"]["fst_acceptance_rate"] is not None
    counts = [batches_of_run(replica, card["run_id"]) for replica in (first, second)]
    assert all(count > 0 for count in counts), counts
    assert sum(counts) == 40
    # Every other family answered every batch in its single process.
    for family in ("surface", "behavioral", "compliance"):
        assert batches_of_run(cluster.replicas(family)[0], card["run_id"]) == 40


def test_killing_a_replica_mid_run_gives_the_undisturbed_run_card(cluster):
    entries, predictions = example_run(3000)
    request = make_request(entries, predictions, batch_size=8)  # 375 batches per family
    undisturbed = evaluate(cluster.gateway_address, request)

    victim, survivor = cluster.replicas("structural")
    served_before = len(victim.events("score_batch"))
    finished = threading.Event()
    killed_in_flight: list[bool] = []

    def kill_when_busy():
        # Wait until the victim has served 20 batches of this run, then SIGKILL.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not finished.is_set():
            if len(victim.events("score_batch")) - served_before >= 20:
                cluster.kill(victim)
                killed_in_flight.append(not finished.is_set())
                return
            finished.wait(0.02)  # returns at once when the run ends

    killer = threading.Thread(target=kill_when_busy, name="killer")
    killed_pid = victim.pid
    killer.start()
    try:
        disturbed = evaluate(cluster.gateway_address, request)
    finally:
        finished.set()
        killer.join(timeout=60)
    try:
        assert killed_in_flight == [True], "the replica was not killed while the run was in flight"
        assert victim.pid != killed_pid

        # Complete: no family failed, every entry present and scored.
        assert not [w for w in disturbed["warnings"] if "failed" in w], disturbed["warnings"]
        assert disturbed["warnings"] == undisturbed["warnings"]
        assert disturbed["scores"] == undisturbed["scores"]
        assert disturbed["composite_coverage"] == undisturbed["composite_coverage"]
        assert entry_values(disturbed) == entry_values(undisturbed)
        for key in STRUCTURAL_KEYS:
            assert disturbed["scores"][key] is not None

        # Both replicas worked on this run; the survivor took over the rest
        # (a batch the victim scored but never delivered is scored again).
        victim_batches = batches_of_run(victim, disturbed["run_id"])
        survivor_batches = batches_of_run(survivor, disturbed["run_id"])
        assert victim_batches >= 20
        assert survivor_batches < 375
        assert victim_batches + survivor_batches >= 375
    finally:
        cluster.restart(victim)  # supervisord brings it back


def test_a_killed_family_is_restarted_and_the_next_run_has_its_metrics(cluster):
    """SIGKILL to the only behavioral process, at the pid supervisord reports:
    supervisord starts it again (a new pid, SERVING within seconds, its death
    in supervisord's log), and the next run's card has the behavioral values
    a run before the kill had."""
    request = make_request(*example_run(100), batch_size=10)
    before_kill = evaluate(cluster.gateway_address, request)
    expected = {key: before_kill["scores"][key] for key in FAMILY_SCORE_KEYS["behavioral"]}
    assert sum(value is not None for value in expected.values()) >= 3, expected

    family = cluster.replicas("behavioral")[0]
    before = family.pid
    started = time.monotonic()
    assert cluster.kill(family) == before
    cluster.restart(family)  # waits, starting nothing: supervisord does
    seconds = time.monotonic() - started
    print(f"behavioral back in {seconds:.1f} s")
    assert family.pid not in (None, before)
    assert health_status(family.address) == 1  # SERVING
    assert seconds < 15
    supervisord_log = (cluster.log_dir / "supervisord.log").read_text(encoding="utf-8")
    assert "exited: behavioral (terminated by SIGKILL" in supervisord_log
    assert f"spawned: 'behavioral' with pid {family.pid}" in supervisord_log

    card = evaluate(cluster.gateway_address, request)
    assert not [w for w in card["warnings"] if "failed" in w], card["warnings"]
    assert {key: card["scores"][key] for key in expected} == expected
    assert batches_of_run(family, card["run_id"]) == 10


def test_a_family_with_no_live_replica_is_null_with_a_warning(cluster):
    # Stopped through supervisord, which keeps them down (a killed one it restarts).
    for replica in cluster.replicas("structural"):
        cluster.stop_process(replica)
    entries, predictions = example_run(100)
    try:
        card = evaluate(cluster.gateway_address, make_request(entries, predictions, batch_size=10))
    finally:
        for replica in cluster.replicas("structural"):
            cluster.restart(replica)
    for key in STRUCTURAL_KEYS:
        assert card["scores"][key] is None
    assert any(w.startswith("family 'structural' failed (UNAVAILABLE") for w in card["warnings"]), card["warnings"]
    # The other families are unaffected.
    assert card["scores"]["chrf_plus_plus"] is not None
    assert card["scores"]["compliance_index"] is not None
    assert not any("'surface'" in w or "'compliance'" in w or "'behavioral'" in w for w in card["warnings"])


# Short English→Spanish pairs (source, reference, prediction), repeated to make
# a large run; every n-gram order matches somewhere, so BLEU needs no smoothing.
LARGE_RUN_TEXTS = [
    ("Save changes", "Guardar los cambios ahora", "Guardar los cambios ahora"),
    ("Delete the file", "Eliminar el archivo de la lista", "Borrar el archivo de la lista"),
    ("Open settings", "Abrir la configuración del sistema", "Abrir los ajustes"),
    ("Sign in", "Iniciar sesión en la cuenta", "Iniciar sesión en tu cuenta"),
    ("Try again later", "Vuelva a intentarlo más tarde", "Inténtelo de nuevo más tarde"),
    ("Print the page", "Imprimir la página actual", "Imprimir la página"),
    ("Close the window", "Cerrar la ventana", "Cerrar la ventana"),
    ("Send a message", "Enviar un mensaje nuevo", "Mandar un mensaje nuevo"),
]
LARGE_RUN_SIZE = 100_000


def test_a_100000_entry_upload_completes_across_replicas(tmp_path):
    """A run larger than the tests' other runs by far, uploaded in parts as
    the CLI sends it, through a gateway process and two surface replicas:
    both replicas score batches, every entry comes back, in corpus order and
    a batch per message, and the corpus values equal sacreBLEU's on the
    distinct texts (repeating a set of texts scales its statistics, not its
    scores)."""
    entries, predictions = [], []
    for index in range(LARGE_RUN_SIZE):
        source, reference, prediction = LARGE_RUN_TEXTS[index % len(LARGE_RUN_TEXTS)]
        entries.append({"id": f"large-{index}", "source": source, "reference": reference})
        predictions.append({"id": f"large-{index}", "prediction": prediction})
    request = make_request(entries, predictions, batch_size=1000)
    with LocalCluster(families=("surface",), replicas={"surface": 2}, log_dir=tmp_path,
                      startup_timeout=60) as cluster:
        with grpc.insecure_channel(cluster.gateway_address, options=CHANNEL_OPTIONS) as channel:
            updates = gateway_pb2_grpc.GatewayStub(channel).EvaluateUpload(request_parts(request), timeout=1200)
            card, entry_messages, returned = None, 0, 0
            for update in updates:
                if update.HasField("run_card"):
                    card = update.run_card
                elif update.entries:
                    assert [e.id for e in update.entries] == [e["id"] for e in entries[returned:returned + 1000]]
                    returned += len(update.entries)
                    entry_messages += 1
        counts = [batches_of_run(replica, card.run_id) for replica in cluster.replicas("surface")]
    assert returned == card.scores.total == LARGE_RUN_SIZE and entry_messages == 100
    assert sum(counts) == 100 and all(counts), counts

    hypotheses = [prediction for _, _, prediction in LARGE_RUN_TEXTS]
    references = [[reference for _, reference, _ in LARGE_RUN_TEXTS]]
    assert card.scores.chrf_plus_plus == pytest.approx(
        sacrebleu.corpus_chrf(hypotheses, references, word_order=2).score, rel=1e-9)
    assert card.scores.bleu == pytest.approx(sacrebleu.corpus_bleu(hypotheses, references).score, rel=1e-9)
    assert card.scores.ter == pytest.approx(sacrebleu.corpus_ter(hypotheses, references).score, rel=1e-9)
    assert card.scores.exact_match_rate == pytest.approx(2 / 8)


class TinyDns:
    """A UDP DNS server on loopback answering A queries for one name with
    several IPv4 addresses, as cluster DNS answers for a headless Service
    (one A record per ready pod); other types get an empty answer and other
    names NXDOMAIN."""

    def __init__(self, name: str, addresses: list[str]):
        self.name = name.lower()
        self.addresses = addresses
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.queries: list[tuple[str, int]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self.socket.close()

    def _serve(self):
        while True:
            try:
                query, peer = self.socket.recvfrom(512)
                self.socket.sendto(self._answer(query), peer)
            except OSError:
                return
            except (IndexError, struct.error, UnicodeDecodeError):
                continue

    def _answer(self, query: bytes) -> bytes:
        ident, flags = struct.unpack("!HH", query[:4])
        labels, at = [], 12
        while query[at]:
            length = query[at]
            labels.append(query[at + 1:at + 1 + length].decode("ascii"))
            at += 1 + length
        qtype = struct.unpack("!H", query[at + 1:at + 3])[0]
        question = query[12:at + 5]
        name = ".".join(labels).lower()
        self.queries.append((name, qtype))
        records = self.addresses if name == self.name and qtype == 1 else []
        rcode = 0 if name == self.name else 3
        header = struct.pack("!HHHHHH", ident, 0x8180 | (flags & 0x0100) | rcode, 1, len(records), 0, 0)
        answers = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(a) for a in records)
        return header + question + answers


def _port_free_on(hosts: list[str]) -> int:
    for _ in range(20):
        probe = socket.socket()
        probe.bind((hosts[0], 0))
        port = probe.getsockname()[1]
        others = []
        try:
            for host in hosts[1:]:
                other = socket.socket()
                others.append(other)
                other.bind((host, port))
            return port
        except OSError:
            continue
        finally:
            probe.close()
            for other in others:
                other.close()
    raise RuntimeError("no port free on every loopback address")


def test_a_dns_name_with_several_addresses_is_balanced_round_robin(tmp_path):
    """Two surface replicas on 127.0.0.1:P and 127.0.0.2:P, one DNS name for
    both; the gateway process's config names the family by that name."""
    name = "surface.champollion.svc.cluster.local"
    hosts = ["127.0.0.1", "127.0.0.2"]
    port = _port_free_on(hosts)
    replicas = [ServiceProcess(f"surface-{i}", "surface", host, tmp_path / f"surface-{i}.log", port=port)
                for i, host in enumerate(hosts, start=1)]
    with TinyDns(name, hosts) as dns:
        # `dns://RESOLVER/name:port` is gRPC's DNS scheme with an explicit
        # resolver; in a cluster the same target is `dns:///name:port`.
        config = tmp_path / "gateway.yaml"
        config.write_text(yaml.safe_dump({"families": {"surface": f"dns://127.0.0.1:{dns.port}/{name}:{port}"}}))
        gateway = ServiceProcess("gateway", "gateway", "127.0.0.1", tmp_path / "gateway.log", ["--config", str(config)],
                                 port=free_ports("127.0.0.1", 1)[0])
        supervisor = supervise([*replicas, gateway], tmp_path)
        try:
            for process in [*replicas, gateway]:
                await_serving(process, timeout=60)
            entries, predictions = example_run(200)
            card = evaluate(gateway.address, make_request(entries, predictions, batch_size=10))
        finally:
            supervisor.shutdown()
        assert (name, 1) in dns.queries
    assert card["scores"]["chrf_plus_plus"] is not None
    counts = [batches_of_run(replica, card["run_id"]) for replica in replicas]
    assert all(count > 0 for count in counts) and sum(counts) == 20, counts


def _supervisorctl(config: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c", config, *args],
                          capture_output=True, text=True, timeout=30).stdout


def _running_pids() -> set[int]:
    listing = subprocess.run(["ps", "-e", "-o", "pid="], capture_output=True, text=True, check=True).stdout
    return {int(pid) for pid in listing.split()}


def _await_line(path, text: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(encoding="utf-8"):
            return
        assert process.poll() is None, path.read_text(encoding="utf-8")
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {path.read_text(encoding='utf-8')}")


def test_the_launcher_restarts_a_killed_replica_and_leaves_nothing_on_sigterm(tmp_path):
    """`python -m apps.launch.local_cluster` (what `champollion up` runs):
    the addresses on stdout; SIGKILL to a replica (its pid from `supervisorctl
    pid`) gets a line on stderr and a new process, and the next run has its
    metrics; on SIGTERM every process, supervisord's included, is gone."""
    stderr = tmp_path / "launcher.err"
    with open(stderr, "w", encoding="utf-8") as errors:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "apps.launch.local_cluster", "--family", "surface", "--replicas",
             "surface=2", "--port", "0", "--log-dir", str(tmp_path / "logs")],
            cwd=REPO, stdout=subprocess.PIPE, stderr=errors, text=True,
        )
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = launcher.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("}"):
                break
        addresses = json.loads("".join(lines))
        assert len(addresses["families"]["surface"]) == 2
        config = addresses["supervisor"]
        with grpc.insecure_channel(addresses["gateway"]) as channel:
            description = gateway_pb2_grpc.GatewayStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
        assert any(s.family == "surface" and s.reachable for s in description.families)

        victim = int(_supervisorctl(config, "pid", "surface-1"))
        supervisord = int((tmp_path / "logs" / "supervisord.pid").read_text())
        pids = {supervisord, *map(int, _supervisorctl(config, "pid", "all").split())}
        assert victim in pids and len(pids) == 4  # supervisord, two replicas, the gateway
        os.kill(victim, signal.SIGKILL)
        _await_line(stderr, "surface-1 restarted by supervisord", launcher)
        successor = int(_supervisorctl(config, "pid", "surface-1"))
        assert successor != victim
        pids.add(successor)
        deadline = time.monotonic() + 60
        while health_status(addresses["families"]["surface"][0]) != 1:  # SERVING
            assert time.monotonic() < deadline, "surface-1 did not come back"
            time.sleep(0.05)
        entries, predictions = example_run(40)
        card = evaluate(addresses["gateway"], make_request(entries, predictions, batch_size=10))
        assert card["scores"]["chrf_plus_plus"] is not None
        assert not [w for w in card["warnings"] if "failed" in w], card["warnings"]

        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 0
        # Nothing answers any more, gateway or replicas, and no process is left.
        for address in [addresses["gateway"], *addresses["families"]["surface"]]:
            assert health_status(address, timeout=1) is None, address
        assert not pids & _running_pids()
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(timeout=10)
