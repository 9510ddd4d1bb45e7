"""LYSS eval standards: plugin discovery from cards, the Plains Cree linter
rules on minimal pairs, semantic verdicts, the Bokmål rule, and the Cree
example's run card with and without the plugins."""
import pytest

from champollion.core.analyzers import AnalyzerRegistry
from champollion.core.cards import default_registry
from apps.inputs import build_request, load_corpus, load_meta, load_predictions
from eval_standards.crk.linter import CrkLinterMetric
from eval_standards.crk.semantic import VERDICT_WEIGHTS, CrkSemanticMetric
from champollion.core.plugins import PluginTools, discover
from champollion.core.entries import EntryInput
from tests.conftest import REPO, evaluate

CARDS = default_registry()
EXAMPLE = REPO / "examples" / "eng-crk"


@pytest.fixture(scope="module")
def crk_tools():
    card = CARDS.get("crk")
    return PluginTools(card=card, analyzer=AnalyzerRegistry().for_card(card))


@pytest.fixture(scope="module")
def linter(crk_tools):
    return CrkLinterMetric(crk_tools)


@pytest.fixture(scope="module")
def semantic(crk_tools):
    return CrkSemanticMetric(crk_tools)


def entry(prediction, reference, source="", variants=()):
    return EntryInput(id="x", source=source, reference=reference, prediction=prediction,
                      acceptable_variants=tuple(variants), failed=not prediction)


def test_discovery_loads_plugins_only_for_cards_that_list_them(crk_tools):
    found = discover(CARDS.get("crk"), crk_tools.analyzer)
    assert [type(p).__name__ for p in found.plugins] == ["CrkLinterMetric", "CrkSemanticMetric"]
    assert found.problems == []
    assert discover(CARDS.get("spa"), None).plugins == []
    nob = discover(CARDS.get("nob"), AnalyzerRegistry().for_card(CARDS.get("nob")))
    assert [type(p).__name__ for p in nob.plugins] == ["NobLinterMetric"]


@pytest.mark.parametrize("rule, reference, equivalent, near_miss", [
    ("orthographic_variants", "Atim ê-nipât.", "atim ē-nipāt", "atim ê-nipâcik"),
    ("orthographic_variants", "Atim ê-nipât.", "Atim ê nipât.", "Atim nipât."),
    ("optional_particles", "Êkwa awâsisak mêtawêwak.", "Awâsisak mêtawêwak.", "Awâsisak nikamowak."),
    ("word_order", "Nâpêw nipâw.", "Nipâw nâpêw.", "Nipâw iskwêw."),
    ("lemma_synonyms", "Minôs nipâw.", "Pôsis nipâw.", "Atim nipâw."),
    ("progressive_aspect", "Atim ê-nipât.", "Atim nipâw.", "Atim ê-nipâyân."),
    ("inclusive_exclusive_we", "Ninipânân.", "Kinipânaw.", "Kinipânâwâw."),
])
def test_each_linter_rule_fires_on_a_minimal_pair_and_not_on_a_near_miss(linter, rule, reference, equivalent, near_miss):
    verdict = linter.score_entry(entry(equivalent, reference))
    assert verdict.verdict == "EQUIVALENT" and verdict.value == 1.0
    assert any(reason.startswith(rule) for reason in verdict.reasons), verdict.reasons
    assert linter.score_entry(entry(near_miss, reference)).verdict == "MISS"


def test_linter_exact_variant_and_no_output(linter):
    assert linter.score_entry(entry("Atim ê-nipât.", "Atim ê-nipât.")).verdict == "EXACT"
    assert linter.score_entry(entry("Ê-nipât atim.", "Atim ê-nipât.", variants=["Ê-nipât atim."])).verdict == "EXACT"
    verdict = linter.score_entry(entry("", "Atim ê-nipât."))
    assert (verdict.verdict, verdict.value) == ("NO_OUTPUT", 0.0)


@pytest.mark.parametrize("prediction, verdict", [
    ("Atim ê-nipât.", "EXACT_MATCH"),
    ("Nipâw atim.", "VALID"),                 # same meaning, other words than the reference
    ("Atim ê-nipat.", "GRAMMAR_ISSUES"),      # meaning there, invalid form
    ("Maskwa mîcisow.", "WRONG"),             # the bear eats: something else
    ("Atim.", "INCOMPLETE"),                  # right, but too little
    ("Atim mîcisow.", "PARTIAL"),             # the dog, but eating
    ("", "NO_OUTPUT"),
])
def test_semantic_verdicts(semantic, prediction, verdict):
    result = semantic.score_entry(entry(prediction, "Atim ê-nipât.", source="The dog is sleeping."))
    assert result.verdict == verdict, result.reasons
    assert result.value == VERDICT_WEIGHTS[verdict]


def test_bokmal_optional_feminine():
    nob = discover(CARDS.get("nob"), AnalyzerRegistry().for_card(CARDS.get("nob"))).plugins[0]
    assert nob.score_entry(entry("Jeg leser boken.", "Jeg leser boka.")).verdict == "EQUIVALENT"
    assert nob.score_entry(entry("Jeg leser bøkene.", "Jeg leser boka.")).verdict == "MISS"


def example_request(disable_plugins=False):
    request = build_request(load_corpus(EXAMPLE / "corpus.json"), load_predictions(EXAMPLE / "predictions.jsonl"),
                            load_meta(EXAMPLE / "meta.json"))
    request.options.disable_plugins = disable_plugins
    return request


def test_cree_example_scores_come_from_the_plugins_and_universal_without_them(gateway):
    with_plugins = evaluate(gateway, example_request())
    without = evaluate(gateway, example_request(disable_plugins=True))
    assert with_plugins["signatures"]["equivalent_match_rate"].startswith("standard:eval_standards.crk.CrkLinterMetric")
    assert with_plugins["signatures"]["semantic_score"].startswith("standard:eval_standards.crk.CrkSemanticMetric")
    verdicts = [e["scores"]["lint_verdict"] for e in with_plugins["entries"]]
    assert with_plugins["scores"]["equivalent_match_rate"] == pytest.approx(
        sum(v in ("EXACT", "EQUIVALENT") for v in verdicts) / len(verdicts))
    assert "EQUIVALENT" in verdicts
    # Universal: exact or listed variant only, and no semantic score for Cree.
    assert "equivalent_match_rate" not in without["signatures"]
    assert without["scores"]["equivalent_match_rate"] < with_plugins["scores"]["equivalent_match_rate"]
    assert without["scores"]["semantic_score"] is None
    assert with_plugins["scores"]["semantic_score"] is not None
