"""Structural family with real analyzers built by `make fst` from Debian's
Apertium data (Norwegian Bokmål, Spanish, English, Basque)."""
import shutil

import grpc
import pytest

from champollion.core.analyzers import DEFAULT_FST_DIR, AnalyzerRegistry, parse_analysis
from champollion.core.cards import DEFAULT_CARDS_DIR as CARDS_DIR
from champollion.core.cards import CardRegistry, default_registry
from champollion.eval.v1 import gateway_pb2_grpc, structural_pb2, structural_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from champollion.core.words import normal_form_with_offsets, words_of
from services.contract import BatchContext, EntryInput
from services.servicer import FamilyServicer
from services.structural.metrics import StructuralScorer
from services.structural.morphology import matched_gold
from services.structural.orthography import rules_for, violations
from tests.conftest import evaluate, make_request


@pytest.fixture(scope="module")
def analyzers():
    missing = [code for code in ("nob", "spa", "eng", "eus") if not (DEFAULT_FST_DIR / f"{code}.hfstol").is_file()]
    assert not missing, f"analyzers {missing} are not built: run `make fst` (make test does)"
    registry = AnalyzerRegistry()
    cards = default_registry()
    return {code: registry.for_card(cards.get(code)) for code in ("nob", "spa", "eng", "eus")}


def test_words_strip_punctuation_and_skip_numbers_urls_placeholders():
    text = "¿Dónde está {name}? Ver https://x.org/a, 20% en 2008 — «hola», %s y %(count)d. ê-nipâyân"
    assert words_of(text) == ["Dónde", "está", "Ver", "en", "hola", "y", "ê", "nipâyân"]
    assert words_of(text, keep_hyphenated=True)[-1] == "ê-nipâyân"
    assert words_of("l'eau -- don't") == ["l'eau", "don't"]


def test_a_word_keeps_its_vowel_signs_and_virama():
    """Devanagari's vowel signs (Mc) and virama (Mn) are no \\w: a word is
    one word with them, not split at each; a mark outside U+0300-036F too."""
    assert words_of("नमस्ते दुनिया, ok") == ["नमस्ते", "दुनिया", "ok"]
    assert words_of("ভাষা ไทยภาษา") == ["ভাষা", "ไทยภาษา"]


def test_the_normal_form_keeps_where_each_character_came_from():
    # e + U+0302 is ê (2 raw characters); the three Hangul jamo of 한 compose (letter with letter); U+2011 is "-".
    text = "e\u0302 \u1112\u1161\u11ab a\u2011b"
    assert normal_form_with_offsets(text) == (
        "ê 한 a-b", [(0, 2), (2, 3), (3, 6), (6, 7), (7, 8), (8, 9), (9, 10)])


@pytest.mark.parametrize(
    "code, accepted, rejected",
    [
        ("nob", ["huset", "Jeg", "løper", "bøkene", "fotballbøkene", "kaffekoppen"], ["xqzt", "huusset", "xqztbok"]),
        ("spa", ["casas", "corrió", "Madrid", "El", "sesión"], ["sesion", "xqzt", "casass"]),
        ("eng", ["houses", "running", "The", "went"], ["hourses", "xqzt"]),
        ("eus", ["etxeetan", "Bilbon"], ["etxeetann", "xqzt"]),
    ],
)
def test_real_words_accepted_and_garbage_rejected(analyzers, code, accepted, rejected):
    analyzer = analyzers[code]
    assert [w for w in accepted if not analyzer.accepts(w)] == []
    assert [w for w in rejected if analyzer.accepts(w)] == []


def test_corpus_rate_is_accepted_over_analysed_words(gateway, analyzers):
    entries = [
        {"id": "a", "reference": "Jeg leser boka i dag."},
        {"id": "b", "reference": "Huset er stort."},
        {"id": "c", "reference": "Barna leker ute."},
    ]
    predictions = [
        {"id": "a", "prediction": "Jeg leser boka i dag."},          # 5 words, all real
        {"id": "b", "prediction": "Huusset er xqzt, 42 ganger."},    # 4 words (42 skipped), 2 real
        {"id": "c", "prediction": "Barna leker ute i fotballbanen."},  # 5 words, compound included
    ]
    card = evaluate(gateway, make_request(entries, predictions, target_lang="nob"))
    scores = card["scores"]
    assert scores["fst_accepted"] == 12
    assert scores["fst_acceptance_rate"] == pytest.approx(12 / 14)
    per_entry = {e["id"]: e["scores"] for e in card["entries"]}
    assert per_entry["b"]["fst_rejected"] == ["Huusset", "xqzt"]
    assert per_entry["b"]["fst_acceptance_rate"] == 0.5
    signature = card["signatures"]["fst_acceptance_rate"]
    assert signature.startswith("analyzer:nob.hfstol|sha256:" + analyzers["nob"].sha256)
    assert card["composite_coverage"]["profile"] == "A"
    assert "fst_acceptance_rate" in card["scores"]["confidence_intervals"]


def test_missing_analyzer_gives_null_and_a_warning(tmp_path):
    scorer = StructuralScorer(registry=AnalyzerRegistry([tmp_path]))
    with EmbeddedStack(families=("surface",), servicers={"structural": FamilyServicer(scorer)}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel),
                            make_request([{"id": "a", "reference": "Casas"}], target_lang="spa"))
    assert card["scores"]["fst_acceptance_rate"] is None
    assert card["scores"]["chrf_plus_plus"] == pytest.approx(100.0)
    assert any("no analyzer for spa" in w and "spa.hfstol" in w for w in card["warnings"])
    assert "fst_acceptance_rate" in card["composite_coverage"]["missing"]


@pytest.mark.parametrize("code", ["nob", "spa", "eng", "eus"])
def test_the_built_analyzers_are_the_ones_the_cards_expect(analyzers, code):
    """`make fst` gives the same bytes on every rebuild, so each card records
    its analyzer's SHA-256; a failure here means Debian's data changed and the
    card (and what its runs are compared against) needs a look."""
    assert analyzers[code].sha256 == default_registry().get(code).fst.analyzers[0].sha256
    assert analyzers[code].caveats == ()


def test_an_analyzer_whose_hash_differs_from_the_card_is_used_with_a_warning(tmp_path, analyzers):
    cards_dir, fst_dir = tmp_path / "cards", tmp_path / "fst"
    cards_dir.mkdir()
    fst_dir.mkdir()
    for code in ("eng", "spa"):
        shutil.copy(CARDS_DIR / f"{code}.yaml", cards_dir)
    expected = default_registry().get("spa").fst.analyzers[0].sha256
    wrong = "ab" * 32
    card_file = cards_dir / "spa.yaml"
    card_file.write_text(card_file.read_text(encoding="utf-8").replace(expected, wrong), encoding="utf-8")
    shutil.copy(DEFAULT_FST_DIR / "spa.hfstol", fst_dir)
    cards = CardRegistry(cards_dir)
    entries = [EntryInput(id="a", source="The houses", reference="Las casas", prediction="Las casas")]
    output = StructuralScorer(registry=AnalyzerRegistry([fst_dir])).score(
        entries, BatchContext(source=cards.get("eng"), target=cards.get("spa")))
    (warning,) = output.warnings
    assert warning.startswith(f"{fst_dir / 'spa.hfstol'} has SHA-256 {expected}, not the {wrong} the spa card expects")
    assert "fst_acceptance_rate and morphological_accuracy are not representative" in warning
    # Still scored, and the signature names the file actually used.
    assert output.entries[0].values["fst_acceptance_rate"] == 1.0
    assert f"sha256:{expected}" in output.signatures["fst_acceptance_rate"]


def test_routing_by_language_to_two_structural_services(analyzers):
    """Two structural services, each loading other languages; the gateway
    routes by target language, and a language no route covers is null."""
    nob_only = FamilyServicer(StructuralScorer(languages=["nob"]))
    spa_only = FamilyServicer(StructuralScorer(languages=["spa"]))
    with EmbeddedStack(families=(), servicers={"structural": nob_only}) as north, \
            EmbeddedStack(families=(), servicers={"structural": spa_only}) as south:
        routes = {"structural": {"routes": {"nob": north.family_addresses["structural"],
                                            "spa": south.family_addresses["structural"]}}}
        with EmbeddedStack(families=("surface",), remote_families=routes) as front:
            with grpc.insecure_channel(front.gateway_address) as channel:
                stub = gateway_pb2_grpc.GatewayStub(channel)
                nob = evaluate(stub, make_request([{"id": "a", "reference": "Huset er stort"}], target_lang="nob"))
                spa = evaluate(stub, make_request([{"id": "a", "reference": "La casa es grande"}], target_lang="spa"))
                eus = evaluate(stub, make_request([{"id": "a", "reference": "Etxea handia da"}], target_lang="eus"))
    assert nob["scores"]["fst_acceptance_rate"] == 1.0
    assert nob["signatures"]["fst_acceptance_rate"].startswith("analyzer:nob.hfstol")
    assert spa["signatures"]["fst_acceptance_rate"].startswith("analyzer:spa.hfstol")
    assert nob_only.scorer.registry.loaded().keys() == {"nob"}
    assert spa_only.scorer.registry.loaded().keys() == {"spa"}
    assert eus["scores"]["fst_acceptance_rate"] is None
    assert any("no structural service is configured for target language 'eus'" in w for w in eus["warnings"])
    assert eus["composite_coverage"]["profile"] == "A"
    assert "fst_acceptance_rate" in eus["composite_coverage"]["missing"]


def test_a_service_refuses_a_language_it_does_not_serve(analyzers):
    servicer = FamilyServicer(StructuralScorer(languages=["nob"]))
    with EmbeddedStack(families=(), remote_families=None, servicers={"structural": servicer}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel),
                            make_request([{"id": "a", "reference": "La casa"}], target_lang="spa"))
    assert any("FAILED_PRECONDITION" in w and "does not serve" in w for w in card["warnings"])


def test_analyze_rpc_returns_lemmas_and_tags(stack, analyzers):
    with grpc.insecure_channel(stack.family_addresses["structural"]) as channel:
        stub = structural_pb2_grpc.StructuralStub(channel)
        response = stub.Analyze(structural_pb2.AnalyzeRequest(language="spa", words=["casas", "xqzt"]), timeout=30)
        assert response.analyzer == "spa.hfstol" and len(response.analyzer_sha256) == 64
        casas = response.words[0].analyses
        assert any(a.lemma == "casa" and list(a.tags) == ["n", "f", "pl"] for a in casas)
        assert list(response.words[1].analyses) == []
        with pytest.raises(grpc.RpcError) as caught:
            stub.Analyze(structural_pb2.AnalyzeRequest(language="xx", words=["a"]), timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_parse_analysis_formats():
    giella = parse_analysis("PV/e+nipâw+V+AI+Cnj+1Sg", "giellalt")
    assert giella.lemma == "nipâw" and giella.tags == ("PV/e", "V", "AI", "Cnj", "1Sg")
    apertium = parse_analysis("correr<vblex><ifi><p3><sg>", "apertium")
    assert apertium.lemma == "correr" and apertium.tags == ("vblex", "ifi", "p3", "sg")


def test_morphological_accuracy_with_gold_features(analyzers):
    spa = analyzers["spa"]

    def parsed(words):
        return [[parse_analysis(a, "apertium") for a in spa.analyses(w)] for w in words]

    gold = [("casas", ("<n>", "<pl>")), ("corrió", ("<p3>", "<sg>"))]
    lemmas = [{p.lemma for p in analyses} for analyses in parsed(["casas", "corrió"])]
    assert matched_gold(gold, parsed(["las", "casas", "corrió"]), lemmas) == 2
    assert matched_gold(gold, parsed(["la", "casa", "corrieron"]), lemmas) == 0
    # The right features on another lexeme do not count.
    assert matched_gold(gold, parsed(["perros", "comió"]), lemmas) == 0


def test_orthographic_rules_flag_macrons_doubles_and_foreign_letters():
    sro = rules_for(["sro-circumflex-long-vowels", "sro-inventory"])
    assert violations("ê-nipâyân", sro) == []
    assert any("macron ā" in v for v in violations("nipāw", sro))
    assert any("doubled vowel aa" in v for v in violations("nipaaw", sro))
    assert any("'e'" in v for v in violations("nipew", sro))
    assert any("'r'" in v for v in violations("river", sro))
    assert violations("ᓀᐦᐃᔭᐍᐏᐣ", sro) == []  # Cree in syllabics is not SRO's concern
    syllabics = rules_for(["cans-inventory", "cans-lookalikes"])
    assert violations("ᐃᓄᒃᑎᑐᑦ", syllabics) == []
    assert any("look-alike" in v for v in violations("Δᓄᒃᑎᑐᑦ", syllabics))
    assert any("non-syllabic letter 'a'" in v for v in violations("ᐃᓄaᑎᑐᑦ", syllabics))
    with pytest.raises(KeyError, match="unknown orthographic rule"):
        rules_for(["no-such-rule"])
