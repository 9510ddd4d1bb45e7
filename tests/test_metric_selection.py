"""A family computes only the metrics a request asks for (ScoreBatchRequest
.selection), none when asked for none; the gateway sends the run's
selection, plugins switch and COMET model as the request's typed fields."""
from __future__ import annotations

import pytest

from apps.client import Client
from apps.launch.embedded import EmbeddedStack
from champollion.core.analyzers import AnalyzerRegistry
from champollion.core.cards import default_registry
from champollion.core.encoder.embeddings import EmbeddingUnavailable
from champollion.eval.v1 import family_pb2
from services.behavioral.metrics import BehavioralScorer
from services.compliance.metrics import ComplianceScorer
from services.contract import BatchContext, EntryInput, Term
from services.semantic.metrics import CometPool, SemanticScorer
from services.semantic.models import CometModelDirectory
from services.servicer import FamilyServicer
from services.structural.metrics import StructuralScorer
from services.surface.metrics import SurfaceScorer

CARDS = default_registry()
ENTRIES = [
    EntryInput(id="a", source="The cat {name} sleeps.", reference="El gato {name} duerme.",
               prediction="El gato {name} duerme.", raw_prediction="El gato duerme."),
    EntryInput(id="b", source="I have 3 dogs.", reference="Tengo 3 perros.", prediction="Tengo tres perros."),
]


class NoModel:
    """An encoder a family must not touch when no metric needs it."""
    version = "none"

    def __getattr__(self, name):
        raise AssertionError(f"the encoder was used ({name}) though no metric asked for it")


class Unavailable(NoModel):
    """An encoder that cannot load: the family scores without it, as it does in production."""

    def encode(self, texts):
        raise EmbeddingUnavailable("no encoder in this test")


def scorers(embedder=NoModel()):
    return [SurfaceScorer(), StructuralScorer(), ComplianceScorer(), BehavioralScorer(embedder=embedder),
            SemanticScorer(comet=CometPool(CometModelDirectory([])), embedder=embedder)]


def context(metrics, target="spa", **typed) -> BatchContext:
    return BatchContext(source=CARDS.get("eng"), target=CARDS.get(target), metrics=metrics, **typed)


@pytest.mark.parametrize("scorer", scorers(), ids=lambda scorer: scorer.name)
def test_a_family_asked_for_no_metric_computes_none(scorer):
    output = scorer.score(ENTRIES, context(frozenset(), glossary=(Term("cat", "gato"),)))
    assert [entry.id for entry in output.entries] == ["a", "b"]
    assert all(entry.values == {} and entry.stats == {} for entry in output.entries)
    assert output.signatures == {} and output.labels == {}


@pytest.mark.parametrize("scorer", scorers(Unavailable())[:4], ids=lambda scorer: scorer.name)
def test_a_family_asked_for_one_metric_gives_that_one_as_in_a_full_run(scorer):
    chosen = scorer.metrics[-1]
    everything = scorer.score(ENTRIES, context(None, glossary=(Term("cat", "gato"),)))
    one = scorer.score(ENTRIES, context(frozenset({chosen, "bleu_of_another_family"}),
                                        glossary=(Term("cat", "gato"),)))
    for full, only in zip(everything.entries, one.entries):
        assert set(only.stats) <= {chosen} and only.stats.get(chosen) == full.stats.get(chosen)
        assert only.values.get(chosen) == full.values.get(chosen)
        assert not set(only.values) & (set(scorer.metrics) - {chosen})
    assert set(one.signatures) <= {chosen} and one.signatures.get(chosen) == everything.signatures.get(chosen)


def test_surface_asked_for_bleu_computes_no_other_statistic():
    output = SurfaceScorer().score(ENTRIES, context(frozenset({"bleu"})))
    # sacreBLEU's BLEU statistics: hypothesis and reference lengths, then the
    # 1- to 4-gram matches and totals; 13a splits "El gato { name } duerme ."
    # into 7 tokens, all matching.
    assert output.entries[0].stats == {"bleu": [7, 7, 7, 6, 5, 4, 7, 6, 5, 4]}
    assert output.entries[0].values == {}  # BLEU has no entry value
    assert list(output.signatures) == ["bleu"]


def test_structural_runs_only_the_plugins_of_the_metrics_asked_for():
    cree = [EntryInput(id="x", source="The dog sleeps.", reference="Atim nipâw.", prediction="Atim nipâw.")]
    scorer = StructuralScorer(registry=AnalyzerRegistry())
    output = scorer.score(cree, context(frozenset({"semantic_score"}), target="crk"))
    assert set(output.entries[0].stats) == {"semantic_score"}
    assert output.entries[0].values["semantic_verdict"] and "lint_verdict" not in output.entries[0].values
    assert list(output.signatures) == ["semantic_score"]
    off = scorer.score(cree, context(frozenset({"semantic_score"}), target="crk", plugins=False))
    assert off.entries[0].stats == {} and off.signatures == {}


def test_the_family_servicer_reads_the_typed_fields():
    servicer = FamilyServicer(SurfaceScorer())
    request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
    unset = servicer._context_for(request)
    assert unset.metrics is None and unset.plugins and unset.comet_model is None
    request.selection.SetInParent()
    request.disable_plugins = True
    request.comet_model = "Unbabel/wmt22-comet-da"
    typed = servicer._context_for(request)
    assert typed.metrics == frozenset() and not typed.plugins and typed.comet_model == "Unbabel/wmt22-comet-da"


class Recorder(SurfaceScorer):
    """The surface family, keeping the context of every batch it scores."""

    def __init__(self):
        self.contexts: list[BatchContext] = []

    def score(self, entries, context):
        self.contexts.append(context)
        return super().score(entries, context)


def test_the_gateway_sends_the_runs_selection_plugins_and_comet_model_typed():
    recorder = Recorder()
    corpus = [{"id": "a", "source": "Hello to all my friends", "reference": "Hola a todos mis amigos"}]
    predictions = [{"id": "a", "prediction": "Hola a todos mis amigos"}]
    with EmbeddedStack(families=(), servicers={"surface": FamilyServicer(recorder)}) as stack:
        with Client(stack.gateway_address) as client:
            card = client.evaluate(corpus, predictions, source_lang="eng", target_lang="spa", metrics=["bleu"],
                                   disable_plugins=True, comet_model="some/model")
            client.evaluate(corpus, predictions, source_lang="eng", target_lang="spa", families=["surface"])
    first, second = recorder.contexts
    # Metrics only: the counts (exact_matches) and labels come with their metrics.
    assert first.metrics == frozenset({"bleu"}) and not first.plugins and first.comet_model == "some/model"
    assert second.metrics == frozenset(SurfaceScorer.metrics) and second.plugins and second.comet_model is None
    assert card["scores"]["bleu"] == pytest.approx(100.0) and card["scores"]["chrf_plus_plus"] is None
    assert "bleu" in card["signatures"] and "chrf_plus_plus" not in card["signatures"]
