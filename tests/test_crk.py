"""Plains Cree: the project's lexc fragment (compiled by `make fst`), the
SRO orthographic rules, gold morphology, and the bundled English→Cree run."""
import json
import shutil

import pytest

from champollion.core.analyzers import DEFAULT_FST_DIR, AnalyzerRegistry
from champollion.core.cards import default_registry
from apps.inputs import build_request, load_corpus, load_meta, load_predictions
from champollion.core.words import words_of
from services.contract import BatchContext, EntryInput
from services.structural.metrics import StructuralScorer
from tests.conftest import REPO, evaluate

EXAMPLE = REPO / "examples" / "eng-crk"
FRAGMENT = DEFAULT_FST_DIR / "crk-fragment.hfstol"


@pytest.fixture(scope="module")
def crk():
    assert FRAGMENT.is_file(), "the Cree fragment is not built: run `make fst` (make test does)"
    return AnalyzerRegistry().for_card(default_registry().get("crk"))


@pytest.fixture(scope="module")
def card(gateway, crk):
    request = build_request(
        load_corpus(EXAMPLE / "corpus.json"), load_predictions(EXAMPLE / "predictions.jsonl"),
        load_meta(EXAMPLE / "meta.json"),
    )
    return evaluate(gateway, request)


def test_fragment_accepts_every_word_of_the_example_references(crk):
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    texts = [e["reference"] for e in corpus["entries"]] + [v for e in corpus["entries"]
                                                           for v in e.get("acceptable_variants", [])]
    words = {w for text in texts for w in words_of(text, keep_hyphenated=True)}
    assert len(words) > 40
    assert sorted(w for w in words if not crk.accepts(w)) == []


@pytest.mark.parametrize("word, analysis", [
    ("atimwak", "atim+N+A+Pl"),
    ("ê-nipâyân", "PV/e+nipâw+V+AI+Cnj+1Sg"),
    ("nimêtawân", "mêtawêw+V+AI+Ind+1Sg"),
    ("wâskahikanihk", "wâskahikan+N+I+Loc"),
])
def test_fragment_analyses(crk, word, analysis):
    assert analysis in crk.analyses(word)


@pytest.mark.parametrize("misspelled", ["nipaw", "ê-nipat", "nipāw", "nipaaw", "ninipâw", "ê-nipâw", "atimak"])
def test_fragment_rejects_misspellings_and_impossible_forms(crk, misspelled):
    assert not crk.accepts(misspelled)


def test_example_run_card(card, run_card_validator):
    run_card_validator.validate(card)
    scores = card["scores"]
    assert card["composite_coverage"]["profile"] == "A"
    assert 0.5 < scores["fst_acceptance_rate"] < 1.0
    assert card["signatures"]["fst_acceptance_rate"].startswith("analyzer:crk-fragment.hfstol|sha256:")
    assert 0 < scores["orthographic_accuracy"] < 1
    assert scores["morphological_accuracy"] is not None
    entries = {e["id"]: e["scores"] for e in card["entries"]}
    macrons = [e for e in entries.values() if any("macron" in v for v in e.get("orthographic_violations", []))]
    assert macrons, "the macron predictions are flagged"
    assert all(e["fst_acceptance_rate"] < 1 for e in macrons)


def test_example_run_card_warns_that_the_test_fragment_scored_it(card):
    """Without GiellaLT's analyzer the card says the fragment was used, by the
    family whose rate it skews (and by behavioral, which leans on it too)."""
    (structural,) = [w for w in card["warnings"] if w.startswith("structural: ")]
    assert "crk-fragment.hfstol is the crk card's test fragment, not a full analyzer" in structural
    assert "fst_acceptance_rate" in structural and "not representative" in structural
    assert any(w.startswith("behavioral: crk-fragment.hfstol") for w in card["warnings"])


def test_morphological_accuracy_counts_gold_items(card):
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    gold = {e["id"]: len(e["morphology"]) for e in corpus["entries"] if e.get("morphology")}
    entries = {e["id"]: e for e in card["entries"]}
    matched = sum(entries[i]["scores"]["morphological_accuracy"] * n for i, n in gold.items())
    assert card["scores"]["morphological_accuracy"] == pytest.approx(matched / sum(gold.values()))
    for entry_id in gold:
        assert entries[entry_id]["stats"]["morphological_accuracy"][1] == gold[entry_id]


def test_giellalt_analyzer_is_preferred_when_installed(tmp_path, crk):
    """The card lists GiellaLT's analyzer first: dropped into an analyzer
    directory (here, the fragment under that name), it is the one used."""
    shutil.copy(FRAGMENT, tmp_path / "crk-strict-analyzer-for-dictionary.hfstol")
    registry = AnalyzerRegistry([tmp_path, DEFAULT_FST_DIR])
    assert registry.for_card(default_registry().get("crk")).name == "crk-strict-analyzer-for-dictionary.hfstol"
    assert AnalyzerRegistry([DEFAULT_FST_DIR]).for_card(default_registry().get("crk")).name == "crk-fragment.hfstol"


def test_an_analyzer_the_card_does_not_mark_as_a_fragment_brings_no_warning(tmp_path, crk):
    """The warning follows the card's entry, not the file's contents: the
    same bytes under GiellaLT's name (which the card lists without
    test_fragment or sha256) score without one."""
    shutil.copy(FRAGMENT, tmp_path / "crk-strict-analyzer-for-dictionary.hfstol")
    cards = default_registry()
    entries = [EntryInput(id="a", source="The dogs", reference="Atimwak", prediction="Atimwak")]
    context = BatchContext(source=cards.get("eng"), target=cards.get("crk"))
    giellalt = StructuralScorer(registry=AnalyzerRegistry([tmp_path])).score(entries, context)
    fragment = StructuralScorer(registry=AnalyzerRegistry([DEFAULT_FST_DIR])).score(entries, context)
    assert giellalt.warnings == []
    assert [w for w in fragment.warnings if "test fragment" in w]
    assert giellalt.entries[0].values["fst_acceptance_rate"] == fragment.entries[0].values["fst_acceptance_rate"] == 1.0
