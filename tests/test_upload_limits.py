"""Uploads cannot hold the door (issue 33, finding 11): 70 EvaluateUpload
streams of one token that send the header and idle took every admission
slot and queue place, and another token's 1-entry Evaluate was refused for
as long as they stayed open. Now an upload takes its slot only when
scoring starts (its first batch ready), a token has at most
max_open_uploads open, and the gateway waits at most upload_idle_seconds
for a part and upload_deadline_seconds for all of them.

Each test runs a gateway of its own (tokens, the limits under test) in
front of a surface family of this module's, on loopback; every stream it
opens is closed before it ends."""
from __future__ import annotations

import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
import pytest
from google.protobuf import json_format

from apps.client import Client
from apps.client.upload import collect_run_card, request_parts
from apps.launch.embedded import EmbeddedStack
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.server.admission import Admission
from gateway.server.config import GatewayConfig
from gateway.server.spill import default_directory as default_spill_directory
from gateway.server.tokens import Token, TokenFile, new_token, token_hash
from gateway.store import RunStore
from tests.conftest import EXAMPLE, make_request
from tests.test_gaming import submissions_of

TOKENS = {name: new_token() for name in ("attacker", "victim")}
ENTRIES = [{"id": f"u{i:02d}", "source": f"Sentence number {i}.", "reference": f"La frase número {i}."}
           for i in range(12)]
ONE_ENTRY = [{"id": "a", "source": "Hello.", "reference": "Hola."}]
HOLDOUT = "upload-limits-eng-spa"
# How long a bounded wait in these tests may take, at most.
PATIENCE_S = 30.0


@pytest.fixture(scope="module")
def surface() -> dict:
    """A surface family for this module's gateways (quick to start, real scoring)."""
    with EmbeddedStack(families=("surface",), workers=0) as running:
        yield running.family_addresses


@contextmanager
def gateway_with(surface: dict, tokens: bool = True, **settings):
    """A gateway over `surface` with this module's tokens (or open), the
    default admission (16 runs scored, 48 queued) and `settings`."""
    token_file = TokenFile([Token(name, "submitter", token_hash(token)) for name, token in TOKENS.items()])
    with EmbeddedStack(families=(), remote_families=surface, tokens=token_file if tokens else None,
                       **settings) as running:
        with grpc.insecure_channel(running.gateway_address) as channel:
            yield running, gateway_pb2_grpc.GatewayStub(channel)


def as_token(name: str) -> tuple:
    return (("authorization", f"Bearer {TOKENS[name]}"),)


def header_of(request: gateway_pb2.EvaluateRequest) -> gateway_pb2.EvaluateRequest:
    header = gateway_pb2.EvaluateRequest()
    header.CopyFrom(request)
    del header.corpus.entries[:]
    del header.predictions[:]
    return header


def wait_until(condition, seconds: float = PATIENCE_S) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def spills() -> set:
    return set(default_spill_directory().glob("run-*.sqlite"))


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def ended_with(call) -> tuple[grpc.StatusCode, str, float]:
    """The status, details and seconds of a call that must fail."""
    started = time.perf_counter()
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code(), caught.value.details(), time.perf_counter() - started


def assert_nothing_left(running) -> None:
    """No slot, queue place or open upload is held once the calls ended."""
    wait_until(lambda: not running.gateway.uploads.open_uploads and running.gateway.admission.admitted == 0)


@pytest.mark.parametrize("max_open_uploads", [100, None], ids=["all-70-open", "default-limit"])
def test_70_idle_uploads_of_one_token_leave_another_tokens_evaluation_answered(surface, max_open_uploads):
    """The attack as it was run: 70 uploads of one token send the header and
    idle. With a limit above 70 all stay open, and hold no slot; with the
    default one (8) the rest are refused at once. Either way the other
    token's 1-entry Evaluate, and its upload, are answered in their normal
    time (before the change: RESOURCE_EXHAUSTED, 'the gateway is busy: 16
    runs are being scored and 48 are waiting')."""
    settings = {} if max_open_uploads is None else {"max_open_uploads": max_open_uploads}
    limit = max_open_uploads or GatewayConfig().max_open_uploads
    request = make_request(ONE_ENTRY)
    release = threading.Event()

    def idle_upload():
        yield header_of(request)
        release.wait(PATIENCE_S)

    with gateway_with(surface, **settings) as (running, stub), Client(running.gateway_address,
                                                                       TOKENS["victim"]) as victim:
        def evaluate():
            assert stub.Evaluate(request, metadata=as_token("victim"), timeout=PATIENCE_S).run_card.scores.total == 1

        def upload():
            assert victim.evaluate(ONE_ENTRY_CORPUS, ONE_ENTRY_PREDICTIONS)["scores"]["total"] == 1

        evaluate(), upload()  # warm
        normal = statistics.median(timed(evaluate) for _ in range(3))
        normal_upload = statistics.median(timed(upload) for _ in range(3))
        calls = [stub.EvaluateUpload(idle_upload(), metadata=as_token("attacker"), timeout=PATIENCE_S)
                 for _ in range(70)]
        try:
            uploads, admission = running.gateway.uploads, running.gateway.admission
            opened = min(70, limit)
            wait_until(lambda: uploads.open_uploads["attacker"] == opened
                       and sum(call.done() for call in calls) == 70 - opened)
            refused = [call for call in calls if call.done()]
            assert all(call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for call in refused)
            assert {call.details() for call in refused} <= {
                f"too many uploads open: token 'attacker' has {limit} uploads open (max_open_uploads {limit}); "
                f"retryable: send this run once one of them has ended"}
            assert admission.admitted == 0, "an idle upload holds no slot and no queue place"
            under_attack = timed(evaluate)
            upload_under_attack = timed(upload)
            assert under_attack < max(5 * normal, normal + 1.0), (normal, under_attack)
            assert upload_under_attack < max(5 * normal_upload, normal_upload + 1.0), \
                (normal_upload, upload_under_attack)
            assert uploads.open_uploads["attacker"] == opened  # still open all along
            print(f"\nmax_open_uploads {limit}: {opened} idle uploads open, {len(refused)} refused; the other "
                  f"token's Evaluate {under_attack * 1000:.1f} ms (normal {normal * 1000:.1f} ms), its upload "
                  f"{upload_under_attack * 1000:.1f} ms (normal {normal_upload * 1000:.1f} ms)")
        finally:
            release.set()
            for call in calls:
                call.cancel()
        assert_nothing_left(running)


ONE_ENTRY_CORPUS = {"id": "test", "source_lang": "eng", "target_lang": "spa", "entries": ONE_ENTRY}
ONE_ENTRY_PREDICTIONS = [{"id": "a", "prediction": "Hola."}]


def test_an_idle_upload_is_ended_after_the_idle_timeout(surface):
    """A stream that sends its header and some entries, then nothing: ended
    DEADLINE_EXCEEDED after upload_idle_seconds, naming it, its spill removed
    and nothing held; one that sends nothing at all is ended too."""
    request = make_request(ENTRIES)
    parts = [header_of(request), gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(
        entries=request.corpus.entries[:6]), predictions=request.predictions[:6])]
    release = threading.Event()
    before = spills()
    during = set()

    def stalled():
        yield from parts
        release.wait(PATIENCE_S)

    def silent():
        release.wait(PATIENCE_S)
        yield from ()

    with gateway_with(surface, upload_idle_seconds=0.5, upload_deadline_seconds=60) as (running, stub):
        try:
            call = stub.EvaluateUpload(stalled(), metadata=as_token("attacker"), timeout=PATIENCE_S)
            wait_until(lambda: spills() - before)
            during.update(spills() - before)
            code, details, seconds = ended_with(lambda: list(call))
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert details == ("upload idle: no part came for 0.5 s (upload_idle_seconds 0.5) while part 3 was "
                               "awaited; the run was dropped: send it again without pausing between parts")
            assert seconds < 5
            code, details, seconds = ended_with(
                lambda: list(stub.EvaluateUpload(silent(), metadata=as_token("attacker"), timeout=PATIENCE_S)))
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED and "while part 1 was awaited" in details
            assert 0.4 < seconds < 5
        finally:
            release.set()
        assert during, "the run had a spill while it was open"
        wait_until(lambda: not spills() - before)
        assert_nothing_left(running)
        # The gateway still serves, a run sent in parts at once included.
        with Client(running.gateway_address, TOKENS["attacker"]) as client:
            assert client.evaluate(ONE_ENTRY_CORPUS, ONE_ENTRY_PREDICTIONS)["scores"]["total"] == 1


def test_a_slow_but_steady_upload_is_ended_at_the_whole_upload_deadline(surface):
    """One entry a part, a part every 0.3 s (each within the idle timeout),
    batches of one entry so that scoring has started and the run holds a
    slot: ended after upload_deadline_seconds of waiting in all, naming it;
    its slot given back, its spill removed."""
    entries = [{"id": f"s{i:03d}", "source": f"Line {i}.", "reference": f"Línea {i}."} for i in range(100)]
    request = make_request(entries, batch_size=1)
    before = spills()
    sent = []

    def steady():
        yield header_of(request)
        for entry, prediction in zip(request.corpus.entries, request.predictions):
            time.sleep(0.3)
            sent.append(entry.id)
            yield gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(entries=[entry]), predictions=[prediction])

    with gateway_with(surface, upload_idle_seconds=1.0, upload_deadline_seconds=2.0) as (running, stub):
        admission, most, done = running.gateway.admission, [0], threading.Event()

        def watch():
            while not done.is_set():
                most[0] = max(most[0], admission.admitted)
                done.wait(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            code, details, seconds = ended_with(
                lambda: list(stub.EvaluateUpload(steady(), metadata=as_token("attacker"), timeout=PATIENCE_S)))
        finally:
            done.set()
            watcher.join()
        assert most[0] == 1, "scoring had started: the run held a slot"
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert details.startswith("upload too slow: its parts took more than 2 s in all to come "
                                  "(upload_deadline_seconds 2; ended while part ")
        assert details.endswith("was awaited); the run was dropped: send it again in one go")
        assert 1.8 < seconds < 6 and 4 <= len(sent) < 30, (seconds, len(sent))
        wait_until(lambda: not spills() - before)
        assert_nothing_left(running)


def test_waiting_for_a_slot_does_not_count_against_an_upload(surface):
    """The clock runs only while the gateway waits for the client: a run in
    parts whose first batch waits 2 s for the only slot (another run holds
    it, sending a part every 0.2 s) is scored, though upload_idle_seconds is
    0.5; it took its slot only once the other's was free."""
    holder = make_request(ENTRIES, batch_size=1)
    waiting = make_request([{**entry, "id": f"w{entry['id']}"} for entry in ENTRIES], batch_size=2)

    def steady():
        yield header_of(holder)
        for entry, prediction in zip(holder.corpus.entries, holder.predictions):
            time.sleep(0.2)
            yield gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(entries=[entry]), predictions=[prediction])

    with gateway_with(surface, upload_idle_seconds=0.5) as (running, stub), ThreadPoolExecutor(1) as pool:
        running.gateway.admission = admission = Admission(max_running=1, max_queued=1)
        held = pool.submit(lambda: collect_run_card(
            stub.EvaluateUpload(steady(), metadata=as_token("attacker"), timeout=PATIENCE_S)))
        wait_until(lambda: admission.admitted == 1)
        started = time.perf_counter()
        card = collect_run_card(stub.EvaluateUpload(request_parts(waiting, entries_per_part=3),
                                                    metadata=as_token("victim"), timeout=PATIENCE_S))
        seconds = time.perf_counter() - started
        assert card["scores"]["total"] == len(ENTRIES) and held.result(PATIENCE_S)["scores"]["total"] == len(ENTRIES)
        assert seconds > 1.0, "it waited for the slot"
        assert_nothing_left(running)


def test_the_per_token_limit_refuses_the_extra_upload(surface):
    """max_open_uploads 2: a third upload of the token is refused at once,
    before any part is read; another token's is not; once one of the first
    two ends, the token's next upload is scored."""
    request = make_request(ONE_ENTRY)
    release = threading.Event()

    def idle_upload():
        yield header_of(request)
        release.wait(PATIENCE_S)

    with gateway_with(surface, max_open_uploads=2) as (running, stub):
        uploads = running.gateway.uploads
        calls = [stub.EvaluateUpload(idle_upload(), metadata=as_token("attacker"), timeout=PATIENCE_S)
                 for _ in range(2)]
        try:
            wait_until(lambda: uploads.open_uploads["attacker"] == 2)
            code, details, seconds = ended_with(lambda: list(stub.EvaluateUpload(
                iter([request]), metadata=as_token("attacker"), timeout=PATIENCE_S)))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and seconds < 5
            assert details == ("too many uploads open: token 'attacker' has 2 uploads open (max_open_uploads 2); "
                               "retryable: send this run once one of them has ended")
            with Client(running.gateway_address, TOKENS["victim"]) as victim:
                assert victim.evaluate(ONE_ENTRY_CORPUS, ONE_ENTRY_PREDICTIONS)["scores"]["total"] == 1
            calls[0].cancel()
            wait_until(lambda: uploads.open_uploads["attacker"] == 1)
            with Client(running.gateway_address, TOKENS["attacker"]) as attacker:
                assert attacker.evaluate(ONE_ENTRY_CORPUS, ONE_ENTRY_PREDICTIONS)["scores"]["total"] == 1
        finally:
            release.set()
            for call in calls:
                call.cancel()
        assert_nothing_left(running)


def test_an_open_gateway_counts_its_callers_as_one(surface):
    """Without tokens there is no one to tell callers apart by: the limit is
    on all of them together, and the message says so."""
    request = make_request(ONE_ENTRY)
    release = threading.Event()

    def idle_upload():
        yield header_of(request)
        release.wait(PATIENCE_S)

    with gateway_with(surface, tokens=False, max_open_uploads=1) as (running, stub):
        call = stub.EvaluateUpload(idle_upload(), timeout=PATIENCE_S)
        try:
            wait_until(lambda: running.gateway.uploads.open_uploads[None] == 1)
            code, details, _ = ended_with(lambda: list(stub.EvaluateUpload(iter([request]), timeout=PATIENCE_S)))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert details.startswith("too many uploads open: this gateway's callers (it has no tokens, so all "
                                      "count as one) have 1 uploads open (max_open_uploads 1)")
        finally:
            release.set()
            call.cancel()
        assert_nothing_left(running)


def test_an_expired_upload_to_a_holdout_spends_no_budget(surface, tmp_path):
    """A holdout run's budget is counted once every prediction is in: an
    upload that stops halfway and is ended spends none, and the token's
    next, complete run is its first submission."""
    store_url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    predictions = [json.loads(line) for line in
                   (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    meta = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
    store = RunStore.open(store_url)
    try:
        store.register_corpus({**corpus, "id": HOLDOUT}, "holdout")
    finally:
        store.close()
    half = len(predictions) // 2
    messages = [json_format.ParseDict(prediction, gateway_pb2.Prediction()) for prediction in predictions]
    release = threading.Event()

    def half_upload():
        yield gateway_pb2.EvaluateRequest(corpus_ref=gateway_pb2.CorpusRef(id=HOLDOUT), predictions=messages[:half])
        release.wait(PATIENCE_S)

    with gateway_with(surface, store=store_url, upload_idle_seconds=0.5) as (running, stub):
        try:
            code, details, _ = ended_with(lambda: list(stub.EvaluateUpload(
                half_upload(), metadata=as_token("attacker"), timeout=PATIENCE_S)))
        finally:
            release.set()
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED and details.startswith("upload idle:")
        assert submissions_of(store_url, "attacker") == 0
        with Client(running.gateway_address, TOKENS["attacker"]) as attacker:
            card = attacker.evaluate(gateway_pb2.CorpusRef(id=HOLDOUT), predictions, meta)
        assert card["scores"]["total"] == len(corpus["entries"])
        assert submissions_of(store_url, "attacker") == 1
        assert_nothing_left(running)

