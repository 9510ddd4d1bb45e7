"""Semantic family: a tiny real COMET checkpoint (built offline by
tests/tiny_comet.py) loaded through the service, model resolution from the
language cards, the packaged sentence-embedding model, micro-batching."""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import grpc
import pytest

from champollion.core.cards import default_registry
from champollion.eval.v1 import gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from services.contract import BatchContext, EntryInput
from services.semantic.batching import DirectBatcher, MicroBatcher, sorted_chunks
from services.semantic.comet_runner import CometRunner
from champollion.core.encoder.embeddings import EMBEDDING_LANGUAGES, SentenceEmbedder
from services.semantic.metrics import CometPool, SemanticScorer
from services.semantic.models import (
    DEFAULT_COMET_MODEL,
    CometModelDirectory,
    ModelNotFound,
    resolve_comet_model,
)
from services.semantic.factory import create_scorer
from services.semantic.similarity import semantic_scores
from services.servicer import FamilyServicer
from tests.conftest import evaluate, make_request
from tests.tiny_comet import MODEL_ID, QE_MODEL_ID, build_tiny_comet

CARDS = default_registry()

ENTRIES = [
    {"id": "cat", "source": "The cat sleeps on the sofa.", "reference": "El gato duerme en el sofá."},
    {"id": "rain", "source": "It will rain tomorrow in the north.", "reference": "Mañana lloverá en el norte."},
    {"id": "book", "source": "My neighbour reads a long book every evening.",
     "reference": "Mi vecino lee un libro largo cada tarde."},
    {"id": "market", "source": "We walked to the market.", "reference": "Caminamos al mercado."},
]
PREDICTIONS = [
    {"id": "cat", "prediction": "El gato duerme en el sofá."},
    {"id": "rain", "prediction": "Las acciones de la empresa subieron ayer."},  # unrelated
    {"id": "book", "prediction": "Mi vecino lee un libro largo todas las tardes."},
    {"id": "market", "prediction": "Fuimos caminando al mercado."},
]


@pytest.fixture(scope="session")
def tiny_models() -> Path:
    return build_tiny_comet()


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder()


@pytest.fixture(scope="module")
def semantic_stack(tiny_models, embedder):
    """Surface + the semantic family with the tiny models as its model directory."""
    scorer = SemanticScorer(comet=CometPool(CometModelDirectory([tiny_models]), max_batch_size=3), embedder=embedder)
    with EmbeddedStack(families=("surface",), servicers={"semantic": FamilyServicer(scorer)}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            yield gateway_pb2_grpc.GatewayStub(channel), scorer


def _context(source="eng", target="spa", comet_model=None) -> BatchContext:
    return BatchContext(source=CARDS.get(source), target=CARDS.get(target), comet_model=comet_model)


def _inputs(entries=ENTRIES, predictions=PREDICTIONS) -> list[EntryInput]:
    by_id = {p["id"]: p["prediction"] for p in predictions}
    return [EntryInput(id=e["id"], source=e["source"], reference=e["reference"], prediction=by_id[e["id"]])
            for e in entries]


def _comet_predict(checkpoint: Path, samples: list[dict], batch_size: int) -> list[float]:
    """The library's own path: load_from_checkpoint + predict (with its Trainer)."""
    from comet import load_from_checkpoint

    model = load_from_checkpoint(str(checkpoint), local_files_only=True)
    return model.predict(samples, batch_size=batch_size, gpus=0, progress_bar=False).scores


# --- COMET through the service ---------------------------------------------------------------

def test_tiny_comet_scores_through_the_service_match_the_model(semantic_stack, tiny_models, run_card_validator):
    gateway, scorer = semantic_stack
    card = evaluate(gateway, make_request(ENTRIES, PREDICTIONS, meta={"comet_model": MODEL_ID}))
    run_card_validator.validate(card)
    samples = [{"src": e["source"], "mt": p["prediction"], "ref": e["reference"]} for e, p in zip(ENTRIES, PREDICTIONS)]
    expected = _comet_predict(tiny_models / MODEL_ID / "checkpoints" / "model.ckpt", samples, batch_size=3)
    per_entry = {e["id"]: e["scores"]["comet_score"] for e in card["entries"]}
    assert [per_entry[e["id"]] for e in ENTRIES] == pytest.approx(expected, abs=1e-5)
    assert len(set(round(s, 6) for s in expected)) > 1, "the tiny model should not score every segment alike"
    scores = card["scores"]
    assert scores["comet_score"] == pytest.approx(sum(expected) / len(expected), abs=1e-5)
    assert scores["comet_model"] == MODEL_ID
    interval = scores["confidence_intervals"]["comet_score"]
    assert min(expected) - 1e-9 <= interval["ci_lower"] <= scores["comet_score"] <= interval["ci_upper"] <= max(expected) + 1e-9
    signature = card["signatures"]["comet_score"]
    assert signature.startswith(f"model:{MODEL_ID}|rev:sha256:")
    assert "|comet:2.2.7|device:cpu|precision:fp32|refs:1" in signature
    # Overriding to another model than the card's: flagged, never silently "validated".
    assert any("low-resource" in w and MODEL_ID in w for w in card["warnings"])


def test_the_model_is_loaded_once_and_kept_warm(semantic_stack):
    gateway, scorer = semantic_stack
    evaluate(gateway, make_request(ENTRIES[:2], PREDICTIONS[:2], meta={"comet_model": MODEL_ID}))
    engine = scorer.comet.loaded()[MODEL_ID]
    evaluate(gateway, make_request(ENTRIES[2:], PREDICTIONS[2:], meta={"comet_model": MODEL_ID}))
    assert scorer.comet.loaded()[MODEL_ID] is engine
    assert [c.name for c in scorer.components() if c.kind == "model"].count(MODEL_ID) == 1


def test_failed_entries_score_zero(semantic_stack):
    gateway, _ = semantic_stack
    predictions = [PREDICTIONS[0], {"id": "rain", "error": "timeout"}]
    card = evaluate(gateway, make_request(ENTRIES[:2], predictions, meta={"comet_model": MODEL_ID}))
    per_entry = {e["id"]: e["scores"] for e in card["entries"]}
    assert per_entry["rain"]["comet_score"] == 0.0 and per_entry["rain"]["semantic_score"] == 0.0
    assert per_entry["cat"]["comet_score"] > 0.0 and per_entry["cat"]["semantic_score"] > 0.5
    assert card["scores"]["comet_score"] == pytest.approx(per_entry["cat"]["comet_score"] / 2)


def test_unknown_model_gives_null_and_a_warning_naming_it(semantic_stack):
    gateway, _ = semantic_stack
    card = evaluate(gateway, make_request(ENTRIES, PREDICTIONS, meta={"comet_model": "nobody/no-such-comet"}))
    scores = card["scores"]
    assert scores["comet_score"] is None and scores["comet_model"] is None
    assert "comet_score" not in scores["confidence_intervals"]
    assert any("no COMET model available" in w and "nobody/no-such-comet" in w for w in card["warnings"])
    assert scores["chrf_plus_plus"] is not None and scores["semantic_score"] is not None


def test_a_comet_failure_nulls_comet_only(tiny_models, embedder):
    pool = CometPool(CometModelDirectory([tiny_models]))
    scorer = SemanticScorer(comet=pool, embedder=embedder)

    def out_of_memory(batch):
        raise RuntimeError("CUDA out of memory")

    pool.engine(MODEL_ID).batcher.run_batch = out_of_memory
    output = scorer.score(_inputs(), _context(comet_model=MODEL_ID))
    assert all("comet_score" not in e.values and "semantic_score" in e.values for e in output.entries)
    assert "comet_model" not in output.labels and "comet_score" not in output.signatures
    assert any("failed on a batch" in w and "CUDA out of memory" in w for w in output.warnings)


def test_spanish_without_override_asks_for_the_default_model(semantic_stack):
    """The model directory holds only the tiny models: the default model of the
    Spanish card is missing, which is a warning, not a failure."""
    gateway, _ = semantic_stack
    card = evaluate(gateway, make_request(ENTRIES, PREDICTIONS))
    assert card["scores"]["comet_score"] is None
    assert any(f"no COMET model {DEFAULT_COMET_MODEL}" in w for w in card["warnings"]), card["warnings"]


def _hub_cache_with(tiny_models: Path, root: Path, model_id: str, snapshot: str) -> Path:
    """`root` as a Hugging Face cache holding the tiny model under `model_id`."""
    org, name = model_id.split("/")
    repo = root / f"models--{org}--{name}"
    target = repo / "snapshots" / snapshot
    shutil.copytree(tiny_models / MODEL_ID, target)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot)
    return root


def test_yoruba_resolves_to_africomet_through_the_service(tiny_models, tmp_path, embedder):
    snapshot = "3b4c1235a8e7e191e7a53b782caead8b973c30e7"
    hub = _hub_cache_with(tiny_models, tmp_path / "hub", "masakhane/africomet-mtl", snapshot)
    scorer = SemanticScorer(comet=CometPool(CometModelDirectory([hub])), embedder=embedder)
    entries = [{"id": "a", "source": "The cat sleeps.", "reference": "Ológbò náà ń sùn."}]
    with EmbeddedStack(families=(), servicers={"semantic": FamilyServicer(scorer)}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel), make_request(entries, target_lang="yor"))
    scores = card["scores"]
    assert scores["comet_model"] == "masakhane/africomet-mtl"
    assert isinstance(scores["comet_score"], float)
    assert card["signatures"]["comet_score"].startswith(f"model:masakhane/africomet-mtl|rev:{snapshot}|")
    assert not any("low-resource" in w for w in card["warnings"])  # the card declares Yoruba validated
    # USE v3 has no Yoruba: semantic_score is null, with the reason.
    assert scores["semantic_score"] is None
    assert any("does not support target language yor" in w for w in card["warnings"])


# --- model resolution and the model directory ------------------------------------------------

def test_resolution_reads_the_cards_and_honours_an_override():
    yoruba = resolve_comet_model(CARDS.get("yor"))
    assert (yoruba.model_id, yoruba.origin, yoruba.validated) == ("masakhane/africomet-mtl", "card", True)
    for code in ("hau", "swa"):
        assert resolve_comet_model(CARDS.get(code)).model_id == "masakhane/africomet-mtl"
    spanish = resolve_comet_model(CARDS.get("spa"))
    assert (spanish.model_id, spanish.origin, spanish.validated) == (DEFAULT_COMET_MODEL, "default", False)
    assert resolve_comet_model(CARDS.get("deu")).validated is True
    assert resolve_comet_model(CARDS.get("crk")).validated is False
    override = resolve_comet_model(CARDS.get("spa"), "Unbabel/XCOMET-XL")
    assert (override.model_id, override.origin, override.validated) == ("Unbabel/XCOMET-XL", "override", False)
    assert resolve_comet_model(CARDS.get("yor"), "masakhane/africomet-mtl").validated is True
    assert resolve_comet_model(CARDS.get("spa"), "  ").model_id == DEFAULT_COMET_MODEL


def test_override_arrives_as_a_batch_option(tiny_models, embedder):
    scorer = SemanticScorer(comet=CometPool(CometModelDirectory([tiny_models])), embedder=embedder)
    output = scorer.score(_inputs()[:1], _context(comet_model=MODEL_ID))
    assert output.labels == {"comet_model": MODEL_ID}
    assert set(output.entries[0].values) == {"comet_score", "semantic_score"}
    assert output.entries[0].stats["comet_score"] == [output.entries[0].values["comet_score"], 1.0]


def test_model_directory_layouts(tiny_models, tmp_path):
    plain = CometModelDirectory([tiny_models]).locate(MODEL_ID)
    assert plain.layout == "plain" and plain.snapshot is None and plain.checkpoint.is_file()
    hub = _hub_cache_with(tiny_models, tmp_path / "cache" / "hub", "Unbabel/wmt22-comet-da", "abc123")
    # A HF_HOME-style root (with hub/ inside) is accepted as well as the hub cache itself.
    for root in (tmp_path / "cache", hub):
        found = CometModelDirectory([root]).locate("Unbabel/wmt22-comet-da")
        assert (found.layout, found.snapshot) == ("hf-cache", "abc123")
        assert found.checkpoint == hub / "models--Unbabel--wmt22-comet-da" / "snapshots" / "abc123" / "checkpoints" / "model.ckpt"
    with pytest.raises(ModelNotFound, match="Unbabel/wmt23-cometkiwi-da-xl"):
        CometModelDirectory([hub]).locate("Unbabel/wmt23-cometkiwi-da-xl")
    with pytest.raises(ModelNotFound, match="not of the form"):
        CometModelDirectory([tiny_models]).locate("../champollion/tiny-comet")


def test_deployment_environment_variables(tiny_models, monkeypatch):
    monkeypatch.setenv("CHAMPOLLION_COMET_DIR", str(tiny_models))
    monkeypatch.setenv("CHAMPOLLION_COMET_PRELOAD", MODEL_ID)
    assert CometModelDirectory().locate(MODEL_ID).checkpoint == tiny_models / MODEL_ID / "checkpoints" / "model.ckpt"
    scorer = create_scorer(device="cpu", max_batch_size=8)
    assert scorer.comet.directory.roots[0] == tiny_models
    assert scorer.comet.max_batch_size == 8
    assert list(scorer.comet.loaded()) == [MODEL_ID]  # loaded at start, not by a request
    monkeypatch.setenv("CHAMPOLLION_COMET_DEVICE", "tpu")
    with pytest.raises(ValueError, match="device"):
        create_scorer()


def test_misconfigured_device_fails_at_start():
    with pytest.raises(ValueError, match="device"):
        CometPool(CometModelDirectory([]), device="tpu")
    with pytest.raises(ValueError, match="fp16"):
        CometPool(CometModelDirectory([]), device="cpu", fp16=True)


def test_reference_free_model_is_never_sent_a_reference(tiny_models):
    directory = CometModelDirectory([tiny_models])
    qe = CometRunner(directory.locate(QE_MODEL_ID))
    full = CometRunner(directory.locate(MODEL_ID))
    assert qe.info.input_segments == ("src", "mt") and not qe.info.uses_reference
    assert full.info.input_segments == ("src", "mt", "ref")
    assert qe.sample("s", "m", "r") == {"src": "s", "mt": "m"}
    assert qe.info.signature().endswith("|refs:0")
    one, other = "El gato duerme en el sofá.", "Mañana lloverá en el norte."
    source, prediction = "The cat sleeps on the sofa.", "El gato duerme."
    assert qe.predict([qe.sample(source, prediction, one)]) == qe.predict([qe.sample(source, prediction, other)])
    assert full.predict([full.sample(source, prediction, one)]) != full.predict([full.sample(source, prediction, other)])


def test_plain_loop_equals_predict_on_a_larger_set(tiny_models):
    """Sorted batches without Lightning's Trainer give the library's scores."""
    checkpoint = tiny_models / MODEL_ID / "checkpoints" / "model.ckpt"
    runner = CometRunner(CometModelDirectory([tiny_models]).locate(MODEL_ID))
    samples = [{"src": e["source"] * (i % 3 + 1), "mt": p["prediction"], "ref": e["reference"]}
               for i in range(5) for e, p in zip(ENTRIES, PREDICTIONS)]
    assert runner.predict(samples, batch_size=4) == pytest.approx(_comet_predict(checkpoint, samples, 4), abs=1e-5)


# --- micro-batching --------------------------------------------------------------------------

def _concurrently(count: int, call) -> list:
    results: list = [None] * count
    barrier = threading.Barrier(count)

    def run(index):
        barrier.wait()
        results[index] = call(index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_sorted_chunks_cap_items_and_padded_length():
    lengths = [50, 10, 12, 11, 48, 100]
    assert sorted_chunks(lengths, 4, None) == [[0, 1, 2, 3], [4, 5]]
    assert sorted_chunks(lengths, 4, lambda n: n) == [[1, 3, 2, 4], [0, 5]]
    # At most 100 padded units: 10, 11, 12 (3 x 12) fit, 48 would make 4 x 48.
    assert sorted_chunks(lengths, 4, lambda n: n, max_cost=100) == [[1, 3, 2], [4, 0], [5]]


def test_micro_batcher_groups_concurrent_calls_and_returns_each_its_own():
    seen_batches = []

    def run_batch(items):
        seen_batches.append(list(items))
        time.sleep(0.01)
        return [item * 10 for item in items]

    batcher = MicroBatcher(run_batch, max_batch_size=16, max_wait_s=0.05)
    try:
        results = _concurrently(8, lambda i: batcher.submit([i * 100 + k for k in range(3)]))
    finally:
        batcher.close()
    assert results == [[(i * 100 + k) * 10 for k in range(3)] for i in range(8)]
    assert batcher.counters.calls == 8
    assert batcher.counters.batches < 8
    assert max(len(batch) for batch in seen_batches) <= 16
    direct = DirectBatcher(run_batch, max_batch_size=16)
    _concurrently(8, lambda i: direct.submit([i, i + 1, i + 2]))
    assert direct.counters.batches == 8


def test_micro_batcher_hands_errors_to_the_callers_and_keeps_working():
    def run_batch(items):
        if "bad" in items:
            raise RuntimeError("device fell over")
        return [item.upper() for item in items]

    def length(item):
        if item == "unmeasurable":
            raise ValueError("no length")
        return len(item)

    batcher = MicroBatcher(run_batch, max_batch_size=4, max_wait_s=0.001, length=length)
    try:
        with pytest.raises(RuntimeError, match="device fell over"):
            batcher.submit(["ok", "bad"])
        with pytest.raises(ValueError, match="no length"):
            batcher.submit(["unmeasurable"])
        assert batcher.submit(["still", "up"]) == ["STILL", "UP"]
    finally:
        batcher.close()


def test_concurrent_requests_share_comet_batches(tiny_models, embedder):
    pool = CometPool(CometModelDirectory([tiny_models]), max_batch_size=32, max_wait_s=0.05)
    scorer = SemanticScorer(comet=pool, embedder=embedder)
    inputs, context = _inputs(), _context(comet_model=MODEL_ID)
    sequential = [e.values["comet_score"] for e in scorer.score(inputs, context).entries]
    runner = pool.loaded()[MODEL_ID].runner
    before_batches, before_calls = runner.batches_run, pool.loaded()[MODEL_ID].batcher.counters.calls
    outputs = _concurrently(8, lambda i: scorer.score(inputs, context))
    calls = pool.loaded()[MODEL_ID].batcher.counters.calls - before_calls
    assert calls == 8
    assert runner.batches_run - before_batches < calls
    for output in outputs:
        assert [e.values["comet_score"] for e in output.entries] == pytest.approx(sequential, abs=1e-5)


# --- the universal semantic_score ------------------------------------------------------------

@pytest.mark.parametrize("source, reference, paraphrase, unrelated", [
    ("The cat sleeps on the sofa.", "El gato duerme en el sofá.", "El gato está durmiendo en el sofá.",
     "Las acciones de la empresa subieron ayer."),
    ("The cat sleeps on the sofa.", "고양이가 소파에서 잔다.", "고양이는 소파 위에서 자고 있다.", "회사의 주가가 어제 올랐다."),
    ("My neighbour reads a long book every evening.", "Mein Nachbar liest jeden Abend ein langes Buch.",
     "Jeden Abend liest mein Nachbar ein dickes Buch.", "Die Aktien des Unternehmens stiegen gestern."),
])
def test_a_paraphrase_scores_above_an_unrelated_sentence(embedder, source, reference, paraphrase, unrelated):
    exact, close, far = semantic_scores(embedder, [reference, paraphrase, unrelated], [reference] * 3, [source] * 3)
    assert exact == pytest.approx(1.0, abs=1e-5)
    assert far < close < exact and close - far > 0.1


def test_the_source_copied_scores_below_a_translation(embedder):
    """The source both sides share no longer carries the score (docs/scoring.md, §2.3)."""
    source = "My neighbour reads a long book every evening."
    reference = "Mein Nachbar liest jeden Abend ein langes Buch."
    translation, copied = semantic_scores(embedder, ["Jeden Abend liest mein Nachbar ein dickes Buch.", source],
                                          [reference] * 2, [source] * 2)
    assert copied < translation - 0.05


def test_semantic_score_is_the_source_side_cosine_times_the_reference_side_cosine(embedder):
    prediction, reference, source = "Mi vecino lee un libro.", "Mi vecino lee un libro largo.", "My neighbour reads a book."
    with_source = embedder.encode([f"{source} {prediction}", f"{source} {reference}"])
    alone = embedder.encode([prediction, reference])
    assert semantic_scores(embedder, [prediction], [reference], [source]) == pytest.approx(
        [(with_source[0] @ with_source[1]) * (alone[0] @ alone[1])])
    assert semantic_scores(embedder, [prediction], [reference], None) == pytest.approx([alone[0] @ alone[1]])
    # An empty output is never rewarded, though the source alone resembles source + reference.
    assert semantic_scores(embedder, ["   "], [reference], [source]) == [0.0]


def test_semantic_score_corpus_value_is_the_mean_of_entries(semantic_stack):
    gateway, _ = semantic_stack
    card = evaluate(gateway, make_request(ENTRIES, PREDICTIONS, meta={"comet_model": MODEL_ID}))
    per_entry = {e["id"]: e["scores"]["semantic_score"] for e in card["entries"]}
    assert per_entry["cat"] > per_entry["book"] > per_entry["rain"]
    assert card["scores"]["semantic_score"] == pytest.approx(sum(per_entry.values()) / len(per_entry))
    signature = card["signatures"]["semantic_score"]
    assert signature.startswith("model:universal-sentence-encoder-multilingual-3|")
    assert "|combine:clip(cos(emb(src+' '+mt),emb(src+' '+ref)),0,1)*clip(cos(emb(mt),emb(ref)),0,1)|" in signature


def test_embeddings_are_cached_by_exact_text():
    embedder = SentenceEmbedder(cache_size=2)
    first = embedder.encode(["El gato duerme.", "Mañana lloverá."])
    asked = []
    compute = embedder.embed
    embedder.embed = lambda texts: asked.append(list(texts)) or compute(texts)
    again = embedder.encode(["Mañana lloverá.", "Hoy hace sol.", "Hoy hace sol."])
    assert asked == [["Hoy hace sol."]]  # the known text is not encoded again, the new one once
    assert (again[0] == first[1]).all() and (again[1] == again[2]).all()
    assert len(embedder._cache) == 2


def test_unsupported_source_language_compares_with_the_reference_only(embedder):
    scorer = SemanticScorer(comet=CometPool(CometModelDirectory([])), embedder=embedder)
    output = scorer.score(_inputs()[:1], _context(source="crk", target="spa"))
    assert output.entries[0].values["semantic_score"] == pytest.approx(1.0, abs=1e-5)  # prediction == reference
    assert any("source language crk" in w for w in output.warnings)
    signature = output.signatures["semantic_score"]
    assert "|combine:clip(cos(emb(mt),emb(ref)),0,1)|src:not-covered|" in signature and "src+" not in signature


def test_cards_claim_embedding_support_only_for_the_model_languages():
    for card in CARDS.cards():
        if card.model_support.embedding:
            codes = {card.code, *card.aliases}
            assert codes & set(EMBEDDING_LANGUAGES), f"{card.code} declares embedding support USE v3 lacks"
