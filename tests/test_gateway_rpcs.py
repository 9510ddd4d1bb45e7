"""The gateway's streaming answer (EvaluateStream): progress while the
families score, then the run card without its entries, then the entries a
batch at a time; the card is the unary Evaluate's."""
from champollion.core.run_card import message_to_dict, run_card_from_proto
from tests.conftest import evaluate, make_request

FAMILIES_IN_STACK = 5  # the session stack serves every implemented family
ENTRIES = [{"id": f"s{i:03d}", "reference": f"la frase número {i} del corpus de prueba"} for i in range(150)]
PREDICTIONS = [{"id": e["id"], "prediction": e["reference"] if i % 3 else "otra cosa"} for i, e in enumerate(ENTRIES)]


def phase_of(message) -> str:
    if message.HasField("run_card"):
        return "card"
    return "entries" if message.entries else "progress"


def test_evaluate_stream_sends_progress_then_the_card_then_its_entries(gateway):
    request = make_request(ENTRIES, PREDICTIONS, batch_size=30)  # 5 batches per family
    messages = list(gateway.EvaluateStream(request, timeout=120))
    phases = [phase_of(message) for message in messages]

    # Three phases, in order, one card.
    card_at = phases.index("card")
    assert set(phases[:card_at]) == {"progress"}
    assert phases.count("card") == 1
    assert set(phases[card_at + 1:]) == {"entries"}

    progress = messages[:card_at]
    done = [message.batches_done for message in progress]
    assert done == sorted(done), "progress never goes back"
    assert all(message.batches_done <= message.batches_total for message in progress)
    final = progress[-1]
    assert final.upload_complete
    assert final.batches_done == final.batches_total == 5 * FAMILIES_IN_STACK

    card_message = messages[card_at].run_card
    assert not card_message.entries, "the card comes without its entries"
    entry_messages = messages[card_at + 1:]
    # A batch of the run per message, in corpus order, all of them.
    assert [len(message.entries) for message in entry_messages] == [30] * 5
    streamed_entries = [entry for message in entry_messages for entry in message.entries]
    assert [entry.id for entry in streamed_entries] == [entry["id"] for entry in ENTRIES]

    # The same card as the unary call's, but for the run's own id and the
    # store's count of submissions of this configuration: one more by then.
    streamed = run_card_from_proto(card_message)
    streamed["entries"] = [message_to_dict(entry) for entry in streamed_entries]
    unary = evaluate(gateway, request)
    assert streamed.pop("run_id") != unary.pop("run_id")
    submissions = streamed["integrity"].pop("submissions_with_fingerprint")
    assert unary["integrity"].pop("submissions_with_fingerprint") == submissions + 1
    assert streamed == unary
    assert streamed["scores"]["total"] == 150 and streamed["scores"]["exact_match_rate"] == 100 / 150
