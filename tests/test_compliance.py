"""Compliance family (SPEC §2.5): placeholder integrity, quote and casing
rules, raw vs post-processed outputs and repair effectiveness; unit tests of
the scorer and one run through the real gRPC stack."""
import grpc
import numpy as np
import pytest

from champollion import __version__
from champollion.core.cards import CardRegistry, default_registry
from champollion.eval.v1 import gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from gateway.card.corpus import corpus_value
from services.compliance.metrics import ComplianceScorer
from services.compliance.placeholders import scan_placeholders
from services.compliance.rules import quote_characters
from services.registry import create_servicer
from services.contract import BatchContext, EntryInput
from tests.conftest import evaluate, make_request

CARDS = default_registry()
# A Spanish card stricter than the bundled one: only guillemets.
STRICT_SPANISH = """\
code: spa
name: Spanish (guillemets only)
scripts: [Latn]
casing: cased
quotes: ["«", "»"]
surface: {bleu_tokenizer: 13a}
"""


@pytest.fixture
def strict_spanish(tmp_path):
    (tmp_path / "spa.yaml").write_text(STRICT_SPANISH, encoding="utf-8")
    return CardRegistry(tmp_path).get("spa")


def score(entries, target="spa"):
    """Scores a batch into `target`: a bundled card's code or a LanguageCard."""
    target_card = CARDS.get(target) if isinstance(target, str) else target
    context = BatchContext(source=CARDS.get("eng"), target=target_card)
    return ComplianceScorer().score(entries, context)


def score_one(source, prediction, target="spa", raw=None):
    entry = EntryInput(id="e", source=source, reference="", prediction=prediction, raw_prediction=raw)
    return score([entry], target).entries[0]


def stacked(output, metric_id):
    return np.array([entry.stats[metric_id] for entry in output.entries])


def test_dropped_name_placeholder_costs_the_whole_integrity_weight():
    result = score_one("Welcome back, {name}!", "¡Bienvenido de nuevo!")
    assert result.values["compliance_components"] == {"variable_integrity": 0.0, "quotes": 1.0, "casing": 1.0}
    assert result.values["compliance_index"] == pytest.approx(0.4)
    assert result.values["compliance_violations"] == ["missing_placeholder: {name}"]
    assert result.stats["compliance_index"] == pytest.approx([0.4, 1.0])


def test_kept_placeholders_score_perfectly():
    result = score_one("Welcome back, {name}!", "¡Bienvenido de nuevo, {name}!")
    assert result.values["compliance_index"] == pytest.approx(1.0)
    assert result.values["compliance_violations"] == []


def test_icu_plural_translated_branches_are_not_invented_placeholders():
    source = "{count, plural, one {# file was deleted from {folder}} other {# files were deleted from {folder}}}"
    spanish = ("{count, plural, one {Se eliminó # archivo de {folder}} "
               "other {Se eliminaron # archivos de {folder}}}")
    assert scan_placeholders(source).tokens == {"{count, plural}": 1, "{folder}": 1}
    result = score_one(source, spanish)
    assert result.values["compliance_components"]["variable_integrity"] == 1.0
    assert result.values["compliance_violations"] == []
    # Korean has one plural category: fewer branches, same placeholders, and
    # the ICU keywords (plural, other) are not Latin leakage.
    korean = score_one(source, "{count, plural, other {{folder}에서 파일 #개가 삭제되었습니다}}", target="kor")
    assert korean.values["compliance_index"] == pytest.approx(1.0)


def test_icu_argument_renamed_in_translation_is_caught():
    result = score_one("{count, plural, one {# file} other {# files}}",
                       "{cuenta, plural, one {# archivo} other {# archivos}}")
    assert result.values["compliance_components"]["variable_integrity"] == 0.0
    assert result.values["compliance_violations"] == [
        "invented_placeholder: {cuenta, plural}", "missing_placeholder: {count, plural}",
    ]


def test_printf_and_python_placeholders_kept_and_dropped():
    source = "%(count)d files uploaded by %s"
    kept = score_one(source, "%(count)d archivos subidos por %s")
    assert kept.values["compliance_index"] == pytest.approx(1.0)
    dropped = score_one(source, "%(count)d archivos subidos")
    # One of two kept: |{%(count)d}| / |{%(count)d, %s}|.
    assert dropped.values["compliance_components"]["variable_integrity"] == pytest.approx(0.5)
    assert dropped.values["compliance_violations"] == ["missing_placeholder: %s"]


def test_percent_signs_in_prose_are_not_placeholders():
    assert scan_placeholders("50% de descuento, 100%% seguro").tokens == {}
    assert scan_placeholders("%1$s wrote {{ user }}").tokens == {"%1$s": 1, "{{user}}": 1}


def test_repeated_placeholder_is_a_multiset():
    result = score_one("{name} and {name}", "{name} y él")
    assert result.values["compliance_components"]["variable_integrity"] == pytest.approx(0.5)


def test_english_word_leaking_into_korean_breaks_casing():
    result = score_one("Download the file", "파일을 download 하세요", target="kor")
    components = result.values["compliance_components"]
    assert components["casing"] == pytest.approx(2 / 3)
    assert result.values["compliance_index"] == pytest.approx(0.6 + 0.2 + 0.2 * 2 / 3)
    assert result.values["compliance_violations"] == ["latin_leakage: download"]


def test_latin_glued_to_hangul_is_a_word_of_its_own_but_placeholders_are_not_words():
    result = score_one("Open {app} in Chrome", "{app}을 Chrome에서 여세요", target="kor")
    # Words: 을, Chrome, 에서, 여세요; {app} is syntax, not a leaked word.
    assert result.values["compliance_components"]["casing"] == pytest.approx(3 / 4)
    assert result.values["compliance_components"]["variable_integrity"] == 1.0


def test_cased_target_ignores_latin_words():
    assert score_one("Download", "Descargar").values["compliance_components"]["casing"] == 1.0


def test_quote_not_in_the_card_lowers_quote_compliance(strict_spanish):
    entry = EntryInput(id="e", source='Press "Save" or "Cancel"', reference="",
                       prediction='Pulse «Guardar» o "Cancelar"')
    result = score([entry], strict_spanish).entries[0]
    assert result.values["compliance_components"]["quotes"] == pytest.approx(0.5)
    assert result.values["compliance_index"] == pytest.approx(0.9)
    assert result.values["compliance_violations"] == ['disallowed_quote: "', 'disallowed_quote: "']
    # The bundled Spanish card allows ASCII quotes.
    assert score([entry]).entries[0].values["compliance_components"]["quotes"] == 1.0


def test_word_internal_apostrophes_are_not_quotes(strict_spanish):
    assert quote_characters("Versez l'eau, don't, l’eau") == []
    assert quote_characters("'hola'") == ["'", "'"]
    entry = EntryInput(id="e", source="Pour the water", reference="", prediction="Versez l'eau dans «la tasse»")
    assert score([entry], strict_spanish).entries[0].values["compliance_components"]["quotes"] == 1.0


def test_failed_entry_scores_zero_and_has_no_raw_value():
    entry = EntryInput(id="e", source="Hello", reference="Hola", prediction="", raw_prediction="Hola", failed=True)
    result = score([entry]).entries[0]
    assert result.values["compliance_index"] == 0.0
    assert result.values["compliance_index_raw"] is None
    assert result.stats == {
        "compliance_index": [0.0, 1.0], "compliance_index_raw": [0.0, 0.0], "repair_effectiveness": [0.0, 0.0],
    }


def test_repair_effectiveness_over_a_run(strict_spanish):
    entries = [
        # 1 raw violation (dropped {name}), repaired.
        EntryInput(id="e1", source="Hello {name}", reference="", raw_prediction="Hola", prediction="Hola {name}"),
        # 2 raw violations (ASCII quotes), left as they were.
        EntryInput(id="e2", source='Press "Save"', reference="", raw_prediction='Pulse "Guardar"',
                   prediction='Pulse "Guardar"'),
        # 1 raw violation (invented {user}), repaired.
        EntryInput(id="e3", source="Hello", reference="", raw_prediction="Hola {user}", prediction="Hola"),
        # No raw output sent.
        EntryInput(id="e4", source="Goodbye", reference="", prediction="Adiós"),
    ]
    output = score(entries, strict_spanish)
    assert [e.stats["repair_effectiveness"] for e in output.entries] == [[1, 1], [0, 2], [1, 1], [0, 0]]
    assert corpus_value("repair_effectiveness", stacked(output, "repair_effectiveness")) == pytest.approx(0.5)
    # Raw mean over the three entries that sent one: 0.4, 0.8, 0.4.
    assert corpus_value("compliance_index_raw", stacked(output, "compliance_index_raw")) == pytest.approx(1.6 / 3)
    assert corpus_value("compliance_index", stacked(output, "compliance_index")) == pytest.approx((1 + 0.8 + 1 + 1) / 4)
    assert output.entries[3].values["compliance_index_raw"] is None


def test_repair_effectiveness_is_null_without_raw_violations():
    entries = [EntryInput(id="e1", source="Hello {name}", reference="", raw_prediction="Hola {name}",
                          prediction="Hola {name}"),
               EntryInput(id="e2", source="Bye", reference="", prediction="Adiós")]
    output = score(entries)
    assert corpus_value("repair_effectiveness", stacked(output, "repair_effectiveness")) is None
    assert corpus_value("compliance_index_raw", stacked(output, "compliance_index_raw")) == pytest.approx(1.0)


def test_scorer_describes_itself_and_signs_its_weights():
    scorer = ComplianceScorer()
    assert (scorer.name, scorer.version) == ("compliance", __version__)
    assert scorer.metrics == ("compliance_index", "compliance_index_raw", "repair_effectiveness")
    assert scorer.languages() == [] and scorer.components() == []
    signature = score([EntryInput(id="e", source="a", reference="", prediction="b")]).signatures["compliance_index"]
    assert "weights:0.6/0.2/0.2" in signature and f"version:{__version__}" in signature


def test_compliance_end_to_end_through_the_gateway():
    entries = [
        {"id": "e1", "source": "Welcome back, {name}!", "reference": "¡Bienvenido de nuevo, {name}!"},
        {"id": "e2", "source": 'Click "Save" to keep your changes',
         "reference": "Haga clic en «Guardar» para conservar los cambios"},
        {"id": "e3", "source": "%(count)d files uploaded", "reference": "%(count)d archivos subidos"},
        {"id": "e4", "source": "File saved.", "reference": "Archivo guardado."},
        {"id": "e5", "source": "Sign out", "reference": "Cerrar sesión"},
    ]
    predictions = [
        # Raw drops {name} (1 violation); post-processing restores it.
        {"id": "e1", "raw_prediction": "¡Bienvenido de nuevo!", "prediction": "¡Bienvenido de nuevo, {name}!"},
        # Raw uses CJK corner brackets, not Spanish quotes (2 violations); repaired.
        {"id": "e2", "raw_prediction": "Haga clic en 「Guardar」 para conservar los cambios",
         "prediction": "Haga clic en «Guardar» para conservar los cambios"},
        # Raw invents {user} (1 violation); post-processing keeps it.
        {"id": "e3", "raw_prediction": "%(count)d archivos subidos por {user}",
         "prediction": "%(count)d archivos subidos por {user}"},
        {"id": "e4", "prediction": "Archivo guardado."},
        {"id": "e5", "error": "timeout"},
    ]
    with EmbeddedStack(families=("surface",), servicers={"compliance": create_servicer("compliance")}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            card = evaluate(gateway_pb2_grpc.GatewayStub(channel),
                            make_request(entries, predictions, target_lang="spa"))
    scores = card["scores"]
    # Post: 1, 1, 0.7 (one of two placeholders shared), 1, 0 (failed).
    assert scores["compliance_index"] == pytest.approx((1 + 1 + 0.7 + 1 + 0) / 5)
    # Raw: 0.4, 0.8, 0.7 over the three entries that sent one.
    assert scores["compliance_index_raw"] == pytest.approx((0.4 + 0.8 + 0.7) / 3)
    # 3 of 4 raw violations repaired.
    assert scores["repair_effectiveness"] == pytest.approx(0.75)
    assert not any("family 'compliance'" in warning for warning in card["warnings"])
    assert card["signatures"]["compliance_index"].startswith("weights:0.6/0.2/0.2")
    third = card["entries"][2]["scores"]
    assert third["compliance_violations"] == ["invented_placeholder: {user}"]
    assert third["compliance_components"] == {"variable_integrity": 0.5, "quotes": 1.0, "casing": 1.0}


def test_invented_placeholders_are_located_for_review_the_later_copies_first():
    # "{ user }" is {user} normalised: found where it is written; of two {n} for one, the second is invented.
    output = "{n} de {n} archivos de { user } (%s)"
    result = score_one("{n} files (%s)", output)
    spans = result.values["invented_placeholder_spans"]
    assert [output[start:end] for start, end in spans] == ["{n}", "{ user }"]
    assert spans == [[7, 10], [23, 31]]
    assert score_one("{n} files", "{n} archivos").values["invented_placeholder_spans"] == []
    assert scan_placeholders("a %s b").located == [("%s", 2, 4)]
