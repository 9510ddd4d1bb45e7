"""Server-side scoring against a registered corpus (issue 14, item 2): the
client names the corpus and sends predictions only; on a holdout or gold
corpus the answer is corpus-level and nothing in it, or in the logs, carries
a reference.

The example corpus is registered straight into the store of this module's
own gateways (no families of their own: the session's are reached by
address), one open (every caller a maintainer) and one with tokens."""
from __future__ import annotations

import asyncio
import json
import re

import grpc
import pytest
import structlog

from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from apps.inputs import build_request, load_corpus, load_glossary, load_meta, load_predictions
from apps.launch.embedded import EmbeddedStack
from apps.client.upload import collect_run_card, request_parts
from gateway.card.breakdowns import fewer_than_k_withheld
from gateway.card.redaction import corpus_level, ladder_only
from champollion.core.run_card import run_card_from_proto
from gateway.server.access import answer_view, stored_view
from gateway.server.registered import UNKNOWN_IDS_SHOWN, registered_run
from gateway.server.stored_runs import GatewayStore
from gateway.server.tokens import Token, TokenFile, token_hash
from gateway.store import RunStore
from tests.conftest import EXAMPLE, REPO, run_cli

HOLDOUT = "champollion-example-eng-spa"
DEV = "example-eng-spa-dev"
GOLD = "example-eng-spa-gold"
CORPUS = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
TOKENS = {"submitter": "submitter-token-for-tests", "maintainer": "maintainer-token-for-tests"}


def _words(text: str) -> list[str]:
    return text.lower().split()


def reference_needles(corpus: dict) -> set[str]:
    """Every reference and acceptable variant whole, and each of their word
    4-grams (lowercased, whitespace-tokenised)."""
    needles = set()
    for entry in corpus["entries"]:
        for text in (entry["reference"], *entry.get("acceptable_variants", [])):
            words = _words(text)
            needles.add(" ".join(words))
            needles.update(" ".join(words[i:i + 4]) for i in range(len(words) - 3))
    return needles


NEEDLES = reference_needles(CORPUS)


def _strings(value):
    """Every string inside a JSON-like value (JSON escapes quotes; this does not)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    else:
        yield repr(value)


def found_references(texts) -> set[str]:
    """The needles that occur in any of `texts` (bytes are read as UTF-8),
    whitespace runs read as one space."""
    found = set()
    for text in texts:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        flat = " ".join(_words(text))
        found.update(needle for needle in NEEDLES if needle in flat)
    return found


def _changed(text: str) -> str:
    """Every other word (the first included) wrapped in "zz": no two words in
    a row (the shortest reference has two) stay as they were, even read as a
    substring."""
    words = text.split()
    return " ".join(f"zz{word}zz" if i % 2 == 0 else word for i, word in enumerate(words))


@pytest.fixture(scope="module")
def predictions_file(tmp_path_factory):
    """The example's predictions with every other word changed, so that a
    reference found in an answer came from the corpus, not from echoing a
    prediction (checked here)."""
    lines = []
    for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        prediction = json.loads(line)
        for key in ("prediction", "raw_prediction"):
            if prediction.get(key):
                prediction[key] = _changed(prediction[key])
        lines.append(prediction)
    assert not found_references(json.dumps(p, ensure_ascii=False) for p in lines)
    assert not found_references(text for p in lines for text in _strings(p))
    path = tmp_path_factory.mktemp("holdout") / "predictions.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'runs.sqlite'}"
    store = RunStore.open(url)
    try:
        store.register_corpus(CORPUS, "holdout")
        store.register_corpus({**CORPUS, "id": DEV}, "dev")
        store.register_corpus({**CORPUS, "id": GOLD}, "gold")
    finally:
        store.close()
    return url


@pytest.fixture(scope="module")
def run_store(store_url):
    store = RunStore.open(store_url)
    yield store
    store.close()


@pytest.fixture(scope="module")
def open_gateway(stack, store_url) -> str:
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store_url) as running:
        yield running.gateway_address


@pytest.fixture(scope="module")
def stub(open_gateway):
    with grpc.insecure_channel(open_gateway) as channel:
        yield gateway_pb2_grpc.GatewayStub(channel)


@pytest.fixture(scope="module")
def guarded_stub(stack, store_url):
    """A gateway with a submitter's and a maintainer's token."""
    tokens = TokenFile([Token(role, role, token_hash(token)) for role, token in TOKENS.items()])
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store_url,
                       tokens=tokens) as running:
        with grpc.insecure_channel(running.gateway_address) as channel:
            yield gateway_pb2_grpc.GatewayStub(channel)


def as_role(role: str):
    return (("authorization", f"Bearer {TOKENS[role]}"),)


def registered_request(predictions_path, corpus_id: str = HOLDOUT, version: str = "") -> gateway_pb2.EvaluateRequest:
    return build_request(gateway_pb2.CorpusRef(id=corpus_id, version=version), load_predictions(predictions_path),
                         load_meta(EXAMPLE / "meta.json"), load_glossary(EXAMPLE / "glossary.json"))


CLIENT_SENT = "example-eng-spa-client-sent"


@pytest.fixture(scope="module")
def client_sent(open_gateway, predictions_file, tmp_path_factory) -> dict:
    """The same corpus and predictions evaluated as today: the corpus sent,
    under an id of its own (a registered corpus's id is not the client's to
    reuse)."""
    folder = tmp_path_factory.mktemp("client")
    corpus = folder / "corpus.json"
    corpus.write_text(json.dumps({**CORPUS, "id": CLIENT_SENT}, ensure_ascii=False), encoding="utf-8")
    out = folder / "card.json"
    assert run_cli("evaluate", corpus, predictions_file, "--meta", EXAMPLE / "meta.json",
                   "--glossary", EXAMPLE / "glossary.json", "--gateway", open_gateway, "--out", out) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def assert_same_scores(card: dict, expected: dict) -> None:
    """Every corpus-level number: scores (composite, CIs, breakdowns
    included), totals, the corpus version and the fingerprint. A secret
    tier's answer has no provenance breakdown (its keys are the corpus's
    private document names)."""
    scores = card["scores"]
    if card["dataset"].get("tier") in ("holdout", "gold") and not card["entries"]:
        assert scores["by_provenance"] == {} and expected["scores"]["by_provenance"]
        scores = {**scores, "by_provenance": expected["scores"]["by_provenance"]}
    assert scores == expected["scores"]
    assert card["totals"] == expected["totals"]
    assert card["composite_coverage"] == expected["composite_coverage"]
    assert card["signatures"] == expected["signatures"]
    assert card["dataset"]["version"] == expected["dataset"]["version"]
    assert card["fingerprint"] == expected["fingerprint"]


def assert_corpus_level(card: dict, tier: str = "holdout") -> None:
    assert card["entries"] == []
    assert card["dataset"]["tier"] == tier and card["dataset"]["number"] == 1
    assert card["warnings"][0].startswith(f"per-entry results withheld: the corpus is {tier}")
    # The semantic family's own message is counted, not quoted.
    assert not any(warning.startswith("semantic: no COMET") for warning in card["warnings"])
    assert "semantic: 1 message withheld" in " ".join(card["warnings"])


def test_cli_evaluates_by_corpus_id_with_the_same_scores(cli, open_gateway, predictions_file, client_sent,
                                                          run_card_validator):
    result = cli("evaluate", "--corpus-id", HOLDOUT, predictions_file, "--meta", EXAMPLE / "meta.json",
                 "--glossary", EXAMPLE / "glossary.json", "--gateway", open_gateway, "--json", "--entries")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    run_card_validator.validate(card)
    assert_same_scores(card, client_sent)
    assert card["scores"]["composite"] is not None and card["scores"]["confidence_intervals"]["composite"]
    assert card["scores"]["total"] == len(CORPUS["entries"]) and len(client_sent["entries"]) == len(CORPUS["entries"])
    assert_corpus_level(card)
    assert client_sent["dataset"]["tier"] is None
    # Nothing the command printed carries a reference (stdout, and stderr
    # with whatever the gateway and families logged at the CLI's level).
    assert not found_references([result.stdout, result.stderr, *_strings(card)])


def _scanned_run(call) -> tuple[dict, list[bytes], list[dict]]:
    """`call()` (an RPC giving a list of response messages) with every log
    event captured: the run card, the responses' bytes, the events."""
    with structlog.testing.capture_logs() as events:
        responses = call()
    return responses, [response.SerializeToString() for response in responses], events


@pytest.mark.parametrize("rpc", ["Evaluate", "EvaluateStream", "EvaluateUpload"])
def test_answers_and_logs_carry_no_reference(rpc, stub, predictions_file, client_sent, run_store, run_card_validator):
    request = registered_request(predictions_file)
    calls = {
        "Evaluate": lambda: [stub.Evaluate(request, timeout=120)],
        "EvaluateStream": lambda: list(stub.EvaluateStream(request, timeout=120)),
        "EvaluateUpload": lambda: list(stub.EvaluateUpload(request_parts(request, entries_per_part=10), timeout=120)),
    }
    responses, payloads, events = _scanned_run(calls[rpc])
    if rpc == "Evaluate":
        card = run_card_from_proto(responses[0].run_card)
    else:
        card = collect_run_card(responses)
        assert not any(response.entries for response in responses)
    run_card_validator.validate(card)
    assert_same_scores(card, client_sent)
    assert_corpus_level(card)

    # The capture saw the run: the gateway's and every family's events.
    run_events = [event for event in events if event.get("run_id") == card["run_id"]]
    assert {"evaluate", "run_stored", "score_batch"} <= {event["event"] for event in run_events}
    assert {event["family"] for event in run_events if event["event"] == "score_batch"} >= {"surface", "semantic"}
    assert not found_references(payloads)
    assert not found_references(text for event in events for text in _strings(event))

    # The stored card keeps everything, entries included.
    stored = run_store.get_run(card["run_id"])
    assert len(stored["entries"]) == len(CORPUS["entries"])
    assert [entry["id"] for entry in stored["entries"]] == [entry["id"] for entry in CORPUS["entries"]]
    assert stored["dataset"]["tier"] == "holdout"
    assert any(warning.startswith("semantic: no COMET") for warning in stored["warnings"])


def test_the_scan_finds_references_where_they_are(predictions_file):
    """The scanner is not blind: the parts of a client-sent run carry the
    corpus, and it finds every reference in them."""
    corpus = load_corpus(EXAMPLE / "corpus.json")
    request = build_request(corpus, load_predictions(predictions_file))
    assert found_references(part.SerializeToString() for part in request_parts(request)) == NEEDLES


def _stored_count(run_store) -> int:
    return len(run_store.list_runs())


def test_predictions_outside_the_version_are_refused_before_scoring(cli, stub, open_gateway, predictions_file,
                                                                     run_store, tmp_path):
    lines = predictions_file.read_text(encoding="utf-8").splitlines()
    extra = [json.dumps({"id": f"es-9{i:02d}", "prediction": "algo"}) for i in range(UNKNOWN_IDS_SHOWN + 2)]
    edited = tmp_path / "predictions.jsonl"
    edited.write_text("\n".join([*lines[:3], *extra, *lines[3:]]) + "\n", encoding="utf-8")
    before = _stored_count(run_store)

    with pytest.raises(grpc.RpcError) as refused:
        stub.Evaluate(registered_request(edited), timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details()
    assert details.startswith("predictions[3].id (id 'es-900'): no entry of registered corpus")
    assert "7 prediction ids outside it: 'es-900', 'es-901', 'es-902', 'es-903', 'es-904' and 2 more" in details

    result = cli("evaluate", "--corpus-id", HOLDOUT, edited, "--gateway", open_gateway)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"champollion: error: {edited}:4: {details}"]
    assert _stored_count(run_store) == before


@pytest.mark.parametrize("corpus_id, version", [("no-such-corpus", ""), (HOLDOUT, "7"), (HOLDOUT, "deadbeef00")])
def test_an_unknown_corpus_or_version_is_not_found(corpus_id, version, stub, cli, open_gateway, predictions_file):
    with pytest.raises(grpc.RpcError) as refused:
        stub.Evaluate(registered_request(predictions_file, corpus_id, version), timeout=60)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert refused.value.details().startswith(f"corpus_ref: no registered corpus {corpus_id!r}")
    args = ["--corpus-version", version] if version else []
    result = cli("evaluate", "--corpus-id", corpus_id, *args, predictions_file, "--gateway", open_gateway)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"champollion: error: {refused.value.details()}"]


def test_a_malformed_version_is_invalid(stub, predictions_file):
    with pytest.raises(grpc.RpcError) as refused:
        stub.Evaluate(registered_request(predictions_file, HOLDOUT, "abc"), timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("corpus_ref.version: 'abc' is neither a version number nor")


def test_a_registered_corpus_is_named_in_the_header_only(stub, predictions_file):
    with_entries = registered_request(predictions_file)
    with_entries.corpus.entries.add(id="x", source="a", reference="b")
    later_ref = list(request_parts(registered_request(predictions_file)))
    later_ref[1].corpus_ref.id = HOLDOUT
    other_language = registered_request(predictions_file)
    other_language.corpus.target_lang = "fra"
    for call, field in ((lambda: stub.Evaluate(with_entries, timeout=60), "corpus.entries: must be empty"),
                        (lambda: list(stub.EvaluateUpload(iter(later_ref), timeout=60)),
                         "corpus_ref: set in upload part 2"),
                        (lambda: stub.Evaluate(other_language, timeout=60), "corpus.target_lang: 'fra'")):
        with pytest.raises(grpc.RpcError) as refused:
            call()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details().startswith(field), refused.value.details()


def test_a_dev_corpus_answers_with_its_entries(stub, predictions_file, client_sent):
    card = run_card_from_proto(stub.Evaluate(registered_request(predictions_file, DEV), timeout=120).run_card)
    assert card["dataset"] == {**client_sent["dataset"], "id": DEV, "tier": "dev", "number": 1}
    assert [entry["id"] for entry in card["entries"]] == [entry["id"] for entry in client_sent["entries"]]
    assert [entry["scores"] for entry in card["entries"]] == [entry["scores"] for entry in client_sent["entries"]]
    assert card["warnings"] == client_sent["warnings"]


def test_roles_gold_for_maintainers_and_stored_cards_by_role(guarded_stub, predictions_file):
    with pytest.raises(grpc.RpcError) as refused:
        guarded_stub.Evaluate(registered_request(predictions_file, GOLD), metadata=as_role("submitter"), timeout=60)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert GOLD in refused.value.details()

    gold = guarded_stub.Evaluate(registered_request(predictions_file, GOLD), metadata=as_role("maintainer"),
                                 timeout=120).run_card
    assert gold.dataset.tier == "gold" and not gold.entries  # the answer is corpus level for everyone

    holdout = guarded_stub.Evaluate(registered_request(predictions_file), metadata=as_role("submitter"),
                                    timeout=120).run_card
    assert not holdout.entries

    def read(run_id, role):
        return collect_run_card(guarded_stub.GetRun(gateway_pb2.GetRunRequest(run_id=run_id),
                                                    metadata=as_role(role), timeout=60))

    as_submitter, as_maintainer = read(holdout.run_id, "submitter"), read(holdout.run_id, "maintainer")
    assert as_submitter["entries"] == [] and as_submitter["warnings"][0].startswith("per-entry results withheld")
    assert len(as_maintainer["entries"]) == len(CORPUS["entries"])
    # No score of its own: what the Ladder releases (issue 33: exact answers let a submitter climb the
    # holdout), the run's size and its speed; the maintainers read everything.
    assert as_submitter["scores"]["composite"] is None and as_submitter["scores"]["quality_tier"] == "unscored"
    assert as_submitter["scores"]["chrf_plus_plus"] is None and as_maintainer["scores"]["chrf_plus_plus"] > 0
    assert as_submitter["scores"]["confidence_intervals"] == {} and as_submitter["adequacy"] is None
    assert as_submitter["scores"]["total"] == as_maintainer["scores"]["total"] == len(CORPUS["entries"])
    assert as_submitter["ladder"]["metric"] == "chrf_plus_plus" and as_maintainer["ladder"] is not None
    assert "5" in as_maintainer["scores"]["confidence_intervals_by_tier"]
    assert as_maintainer["scores"]["by_provenance"]
    # Gold is fully private (seed 001 §5.2): its runs are not read by submitters at all.
    with pytest.raises(grpc.RpcError) as unreadable:
        read(gold.run_id, "submitter")
    assert unreadable.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert len(read(gold.run_id, "maintainer")["entries"]) == len(CORPUS["entries"])


def test_corpus_level_form_of_a_card():
    card = {
        "dataset": {"id": "c", "language_pair": "eng-spa", "version": "0" * 64, "tier": "holdout", "number": 2},
        "scores": {"composite": 0.5, "by_provenance": {"private-doc": {"n": 1}}},
        "warnings": [
            "structural: plugin x failed: KeyError: 'una palabra'; y keeps its universal value",
            "structural: analyzer spa.hfstol is a test fragment",
            "family 'behavioral' failed (INTERNAL: behavioral: ValueError: 'texto (privado)'): "
            "code_switching_rate, hallucination_rate are null",
            "corpus has 3 entries, below the 50-entry minimum of a development set",
            "integrity.reference_ngram_overlap: 12.5% of the references' word 8-grams appear in meta.prompt",
        ],
        "integrity": {"disqualified": True, "reasons": ["reference of entry e1 appears verbatim in meta.prompt"],
                      "contaminated_entries": ["e1"], "contaminated_entry_count": 1,
                      "reference_ngram_overlap": 0.125, "submissions_with_fingerprint": 3},
        "entries": [{"id": "e1", "scores": {"fst_rejected": ["palabra"]}}],
    }
    redacted = corpus_level(card)
    assert redacted["entries"] == [] and card["entries"]  # a copy
    assert redacted["warnings"][1:] == [
        "family 'behavioral' failed (reason withheld): code_switching_rate, hallucination_rate are null",
        "corpus has 3 entries, below the 50-entry minimum of a development set",
        "structural: 2 messages withheld (a family's messages may quote corpus text; the stored run card keeps them)",
    ]
    assert not re.search("palabra|texto|private-doc", json.dumps(redacted))
    assert redacted["scores"] == {"composite": 0.5, "by_provenance": {}}
    # The verdict, which entries, and how much n-gram overlap would each
    # answer a submitter's guesses about the references: the maintainers' (issue 26).
    assert redacted["integrity"] == {"disqualified": False, "verdict_withheld": True,
                                     "submissions_with_fingerprint": 3}
    assert not re.search(r"\be1\b|0\.125|12\.5%", json.dumps(redacted))
    assert answer_view(card).entries is False and stored_view(card, "maintainer").card is card
    # Anyone else reads what the Ladder releases in place of the scores (issue 33).
    assert stored_view(card, "submitter").card == ladder_only(fewer_than_k_withheld(redacted, "holdout"))
    assert stored_view(card, "submitter").card["scores"]["composite"] is None
    public = {**card, "dataset": {**card["dataset"], "tier": "dev"}}
    assert answer_view(public).card is public and stored_view(public, "submitter").entries


def test_the_gateway_sends_the_stored_entries_as_a_client_would(tmp_path):
    """Gold morphology, terms, variants and provenance come from the store as
    the client's reader makes them from the file; each prediction goes with
    its entry."""
    crk = REPO / "examples" / "eng-crk"
    corpus = json.loads((crk / "corpus.json").read_text(encoding="utf-8"))
    corpus["entries"][0]["terms"] = [{"source": "dog", "target": "atim", "alternatives": ["atimwak"]}]
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore.open(url)
    store.register_corpus(corpus, "holdout")
    store.close()
    predictions = load_predictions(crk / "predictions.jsonl")
    request = build_request(gateway_pb2.CorpusRef(id=corpus["id"]), predictions)

    async def no_more_parts():
        return
        yield

    async def built():
        gateway_store = GatewayStore(url)
        try:
            run = await registered_run(request, no_more_parts(), gateway_store, "maintainer")
            return run.header, [part async for part in run.parts()]
        finally:
            gateway_store.close()

    header, parts = asyncio.run(built())
    sent = load_corpus(path)
    assert (header.corpus.id, header.corpus.source_lang, header.corpus.target_lang) == (
        sent.id, sent.source_lang, sent.target_lang)
    assert not header.corpus.entries and not header.predictions and not header.HasField("corpus_ref")
    stored = [entry for part in parts for entry in part.corpus.entries]
    assert stored == list(sent.entries)
    assert any(entry.morphology for entry in stored) and stored[0].terms
    for part in parts:
        ids = {entry.id for entry in part.corpus.entries}
        assert all(prediction.id in ids for prediction in part.predictions)
    assert sorted(p.id for part in parts for p in part.predictions) == sorted(p.id for p in predictions.predictions)


@pytest.mark.parametrize("args, message", [
    (["--corpus-id", HOLDOUT, EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl"],
     "CORPUS with --corpus-id: the registered corpus's entries and languages are used"),
    (["--corpus-id", HOLDOUT, "--target-lang", "spa", EXAMPLE / "predictions.jsonl"],
     "--target-lang with --corpus-id: the registered corpus's entries and languages are used"),
    ([EXAMPLE / "predictions.jsonl"], "evaluate needs CORPUS PREDICTIONS, or --corpus-id ID PREDICTIONS"),
    (["--corpus-version", "1", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl"],
     "--corpus-version needs --corpus-id"),
])
def test_cli_arguments_for_a_registered_corpus(cli, args, message):
    result = cli("evaluate", *args, "--no-store")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"champollion: error: {message}"]
