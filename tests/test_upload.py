"""Runs in parts (EvaluateUpload) and run cards in parts: the same run card as
one Evaluate call however the run is cut, validation across parts, and the
fan-out's hold on the upload that keeps the gateway's memory bounded."""
import asyncio
import random
import time

import grpc
import pytest

from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from apps.client.upload import collect_run_card, compare_parts, request_parts
from gateway.card.identity import corpus_version
from champollion.core.run_card import message_to_dict, run_card_to_proto
from gateway.server.fanout import FanOut
from gateway.server.spill import RunSpill
from gateway.server.spill import default_directory as default_spill_directory
from tests.conftest import evaluate, make_request

ENTRIES = [
    {"id": f"e{i:02d}", "source": f"Sentence number {i}.", "reference": f"La frase número {i} del corpus.",
     **({"difficulty": 1 + i % 5} if i % 3 else {}),
     **({"acceptable_variants": [f"Frase número {i} del corpus."]} if i == 7 else {})}
    for i in range(40)
]


def predictions() -> list[dict]:
    """Varied predictions with usage and latency; e05 failed, e11 missing."""
    found = []
    for i, entry in enumerate(ENTRIES):
        if entry["id"] == "e11":
            continue
        prediction = {"id": entry["id"], "latency_s": 0.1 * i,
                      "usage": gateway_pb2.Usage(prompt_tokens=10 + i, completion_tokens=5)}
        if entry["id"] == "e05":
            prediction["error"] = "timeout"
        else:
            prediction["prediction"] = entry["reference"] if i % 2 else f"Una frase {i} del corpus."
        found.append(prediction)
    return found


def parts_of(request: gateway_pb2.EvaluateRequest, entry_cuts: list[int], prediction_part=None,
             prediction_order: list[int] | None = None) -> list[gateway_pb2.EvaluateRequest]:
    """The header, then one part per cut: entries [cut_k, cut_k+1). Each
    prediction (taken in `prediction_order`) goes in part
    `prediction_part(id, k)` for an entry in part k, by default part k."""
    header = gateway_pb2.EvaluateRequest()
    header.CopyFrom(request)
    del header.corpus.entries[:]
    del header.predictions[:]
    parts = [gateway_pb2.EvaluateRequest() for _ in entry_cuts[1:]]
    part_of_entry = {}
    for number, (start, end) in enumerate(zip(entry_cuts, entry_cuts[1:])):
        parts[number].corpus.entries.extend(request.corpus.entries[start:end])
        part_of_entry.update((entry.id, number) for entry in request.corpus.entries[start:end])
    for index in prediction_order or range(len(request.predictions)):
        prediction = request.predictions[index]
        number = part_of_entry.get(prediction.id, len(parts) - 1)
        parts[prediction_part(prediction.id, number) if prediction_part else number].predictions.append(prediction)
    return [header, *parts]


def upload(gateway, parts) -> list[gateway_pb2.EvaluateProgress]:
    return list(gateway.EvaluateUpload(iter(parts), timeout=120))


def refused(gateway, parts) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        upload(gateway, parts)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details()


def without_run_id(card: dict) -> dict:
    """The card without what differs between two runs of one configuration:
    the run id, and how many stored runs share its fingerprint."""
    kept = {key: value for key, value in card.items() if key != "run_id"}
    kept["integrity"] = {**card["integrity"], "submissions_with_fingerprint": None}
    return kept


def test_spill_corpus_version_is_the_identity_one():
    pairs = [("b", "Zwei"), ("a", "Eins"), ("ä", "Drei \"quoted\""), ("Z", "ᓀᐦᐃᔭᐍᐏᐣ"), ("a1", "𝔘nicode")]
    with RunSpill() as spill:
        for seq, (entry_id, reference) in enumerate(pairs):
            spill.add_entry(seq, entry_id, reference, None, None)
        assert spill.corpus_version() == corpus_version(pairs)
        assert [row[0] for row in spill.entries()] == [pair[0] for pair in pairs]


@pytest.mark.parametrize("seed", [1, 2])
def test_any_cut_of_the_upload_gives_the_one_message_run_card(gateway, run_card_validator, seed):
    """Parts of uneven size, predictions shuffled and some sent parts before
    their entry: the run card equals Evaluate's, entries in corpus order."""
    request = make_request(ENTRIES, predictions(), batch_size=8)
    request.meta.elapsed_seconds = 12.0
    request.meta.pricing.prompt_per_1m = 1.0
    request.meta.pricing.completion_per_1m = 2.0
    expected = without_run_id(evaluate(gateway, request))

    rng = random.Random(seed)
    order = list(range(len(request.predictions)))
    rng.shuffle(order)
    entry_cuts = [0, *sorted(rng.sample(range(1, len(ENTRIES)), 4)), len(ENTRIES)]
    parts = parts_of(request, entry_cuts, lambda _, number: rng.randint(0, number), order)
    updates = upload(gateway, parts)
    card = collect_run_card(updates)
    run_card_validator.validate(card)
    assert without_run_id(card) == expected
    assert [entry["id"] for entry in card["entries"]] == [entry["id"] for entry in ENTRIES]
    assert card["scores"]["errors"] == 2
    progress = [update for update in updates if not update.HasField("run_card") and not update.entries]
    assert progress[-1].upload_complete and progress[-1].batches_done == progress[-1].batches_total > 0


def test_request_parts_send_each_prediction_with_its_entry():
    request = make_request(ENTRIES)
    reordered = [*reversed(request.predictions), gateway_pb2.Prediction(id="nowhere", prediction="x")]
    del request.predictions[:]
    request.predictions.extend(reordered)
    header, *parts = request_parts(request, entries_per_part=15)
    assert not header.corpus.entries and not header.predictions and header.corpus.target_lang == "spa"
    assert [len(part.corpus.entries) for part in parts] == [15, 15, 10]
    for part in parts:
        assert {p.id for p in part.predictions} - {"nowhere"} == {e.id for e in part.corpus.entries}
    assert parts[-1].predictions[-1].id == "nowhere"


def test_a_prediction_after_its_entrys_part_is_refused(gateway):
    """Its entry has been scored as having none by then."""
    late = parts_of(make_request(ENTRIES), [0, 20, 40], lambda entry_id, number: 1 if entry_id == "e07" else number)
    assert refused(gateway, late) == (
        "predictions[19].id (id 'e07'): came after its entry's part; send a prediction in its entry's part "
        "or an earlier one"
    )


def test_a_header_field_in_a_later_part_is_refused(gateway):
    parts = parts_of(make_request(ENTRIES), [0, 20, 40])
    parts[2].glossary.add(source="sentence", target="frase")
    assert refused(gateway, parts) == (
        "glossary: set in upload part 3 (counting from 1); only the first part carries the run's header")


def test_errors_in_later_parts_name_the_index_across_parts(gateway):
    request = make_request(ENTRIES)
    request.corpus.entries[25].reference = " "
    details = refused(gateway, parts_of(request, [0, 20, 40]))
    assert details == "corpus.entries[25].reference (id 'e25'): must be a non-empty string"

    request = make_request(ENTRIES)
    request.corpus.entries[30].id = "e03"
    details = refused(gateway, parts_of(request, [0, 20, 40]))
    assert details == "corpus.entries[30].id (id 'e03'): duplicate entry id"

    parts = parts_of(make_request(ENTRIES), [0, 20, 40])
    parts[2].predictions.add(id="e04", prediction="otra vez")
    assert refused(gateway, parts) == "predictions[40].id (id 'e04'): duplicate prediction for this id"

    # The gateway still serves.
    assert collect_run_card(upload(gateway, parts_of(make_request(ENTRIES), [0, 40])))


def test_an_upload_without_parts_or_entries_is_refused(gateway):
    assert refused(gateway, []) == "the upload carried no part"
    header_only = parts_of(make_request(ENTRIES), [0, 40])[:1]
    assert refused(gateway, header_only) == "corpus.entries: the corpus has no entries"


class InFlight:
    now = most = 0


class SlowClient:
    """A family client answering after a pause; counts the calls in flight
    to all clients sharing `in_flight`."""

    def __init__(self, name: str, in_flight: InFlight, fail_on: int | None = None):
        self.name = name
        self.fail_on = fail_on
        self.shared = in_flight
        self.calls = 0

    async def score_batch(self, request):
        self.calls += 1
        self.shared.now += 1
        self.shared.most = max(self.shared.most, self.shared.now)
        try:
            await asyncio.sleep(0.01)
            if self.fail_on is not None and request.run_id == str(self.fail_on):
                raise RuntimeError("analyzer crashed")
            response = family_pb2.ScoreBatchResponse()
            for entry in request.entries:
                response.entries.add(id=entry.id)
            return response
        finally:
            self.shared.now -= 1


def run_fan_out(clients, batches: int, max_in_flight: int):
    stored = []

    async def main():
        fan_out = FanOut({c.name: c for c in clients}, max_in_flight, lambda *answer: stored.append(answer[:2]))
        for index in range(batches):
            batch = family_pb2.ScoreBatchRequest(run_id=str(index))
            batch.entries.add(id=f"b{index}")
            await fan_out.submit(index, batch)
        await fan_out.finish()
        return fan_out

    return asyncio.run(main()), stored


def test_the_fan_out_holds_the_upload_to_max_in_flight_calls():
    in_flight = InFlight()
    clients = [SlowClient("surface", in_flight), SlowClient("behavioral", in_flight)]
    fan_out, stored = run_fan_out(clients, batches=30, max_in_flight=3)
    assert in_flight.most == 3
    assert sorted(stored) == sorted((c.name, i) for c in clients for i in range(30))
    assert (fan_out.answered, fan_out.scheduled, fan_out.failures) == (60, 60, {})


def test_a_failed_family_gets_no_further_batches():
    in_flight = InFlight()
    clients = [SlowClient("surface", in_flight, fail_on=2), SlowClient("behavioral", in_flight)]
    fan_out, stored = run_fan_out(clients, batches=20, max_in_flight=2)
    assert fan_out.failures == {"surface": "RuntimeError: analyzer crashed"}
    assert clients[0].calls < 20 and clients[1].calls == 20
    assert ("behavioral", 19) in stored


def test_run_cards_larger_than_one_message_are_compared_in_parts(stack, gateway):
    """With a 64 KiB limit on what the client sends, Compare is refused and
    CompareUpload answers exactly what Compare answers without the limit."""
    entries = [{"id": f"c{i}", "source": f"Line {i}.", "reference": f"La línea número {i} del texto."}
               for i in range(300)]
    worse = [{"id": e["id"], "prediction": e["reference"] if i % 3 else "Otra cosa."} for i, e in enumerate(entries)]
    baseline = evaluate(gateway, make_request(entries, worse))
    system = evaluate(gateway, make_request(entries))
    request = gateway_pb2.CompareRequest(
        baseline=run_card_to_proto(baseline), system=run_card_to_proto(system), resamples=200)
    assert request.ByteSize() > 64 * 1024
    expected = message_to_dict(gateway.Compare(request, timeout=60))

    options = [("grpc.max_send_message_length", 64 * 1024)]
    with grpc.insecure_channel(stack.gateway_address, options=options) as channel:
        limited = gateway_pb2_grpc.GatewayStub(channel)
        with pytest.raises(grpc.RpcError) as refused_call:
            limited.Compare(request, timeout=60)
        assert refused_call.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        answer = limited.CompareUpload(compare_parts(request, entries_per_part=20), timeout=60)
    assert message_to_dict(answer) == expected
    assert expected["metrics"]["chrf_plus_plus"]["significant"] is True


def test_a_client_leaving_mid_upload_leaves_no_spill_and_a_serving_gateway(stack, gateway):
    def spills():
        return set(default_spill_directory().glob("run-*.sqlite"))

    before = spills()
    parts = parts_of(make_request(ENTRIES, batch_size=4), [0, 10, 20, 30, 40])

    during = set()

    def leaving():
        yield from parts[:3]
        deadline = time.monotonic() + 30  # until the run in flight has its spill (batches being scored)
        while not spills() - before and time.monotonic() < deadline:
            time.sleep(0.02)
        during.update(spills() - before)
        raise RuntimeError("client gone")

    with pytest.raises(grpc.RpcError) as gone:
        list(gateway.EvaluateUpload(leaving(), timeout=60))
    assert gone.value.code() == grpc.StatusCode.UNKNOWN  # the client side cancelled
    assert during, "the run had a spill while in flight"
    deadline = time.monotonic() + 10
    while spills() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert spills() - before == set()
    assert collect_run_card(upload(gateway, parts))["scores"]["total"] == 40


def test_an_answer_that_cannot_be_stored_fails_the_run_not_a_family():
    def full_disk(*_):
        raise OSError("database or disk is full")

    async def main():
        in_flight = InFlight()
        fan_out = FanOut({"surface": SlowClient("surface", in_flight)}, 2, full_disk)
        batch = family_pb2.ScoreBatchRequest(run_id="0")
        batch.entries.add(id="b0")
        await fan_out.submit(0, batch)
        await fan_out.finish()

    with pytest.raises(OSError, match="disk is full"):
        asyncio.run(main())
