"""Language cards load against their schema into typed cards, carry what the
services need, and refuse mistakes naming the file and the field; the
analyzer builds and Debian packages come from them."""
import dataclasses

import pytest

from champollion.core.cards import (
    AnalyzerFile,
    ApertiumSource,
    CardRegistry,
    CometSupport,
    CompoundRule,
    InvalidCard,
    UnknownLanguage,
    default_registry,
)
from champollion.core.scripts import ScriptSettings
from services.structural.analyzer_builds import apt_packages, builds

REQUIRED_LANGUAGES = {"eng", "spa", "deu", "kor", "jpn", "zho", "crk", "iku"}
MINIMAL = "code: abc\nname: Test\nscripts: [Latn]\ncasing: cased\nsurface: {bleu_tokenizer: 13a}\n"


def registry_of(tmp_path, text: str, code: str = "abc") -> CardRegistry:
    (tmp_path / f"{code}.yaml").write_text(text, encoding="utf-8")
    return CardRegistry(tmp_path)


def test_required_languages_are_carded():
    registry = default_registry()
    assert REQUIRED_LANGUAGES <= {card.code for card in registry.cards()}


def test_tokenizers_follow_the_script():
    registry = default_registry()
    assert registry.get("kor").surface.bleu_tokenizer == "ko-mecab"
    assert registry.get("jpn").surface.bleu_tokenizer == "ja-mecab"
    assert registry.get("zho").surface.bleu_tokenizer == "zh"
    assert registry.get("deu").surface.bleu_tokenizer == "13a"
    assert registry.get("zho").surface.ter_asian_support is True


def test_aliases_and_profiles():
    registry = default_registry()
    assert registry.get("es").code == "spa"
    assert registry.get("crk").profile == "A"
    assert registry.get("eng").profile == "A"  # Apertium analyzer
    assert registry.get("kor").profile == "B"
    with pytest.raises(UnknownLanguage):
        registry.get("xx")


def test_typed_access_to_every_section():
    registry = default_registry()
    crk, nob, hau, iku = (registry.get(code) for code in ("crk", "nob", "hau", "iku"))
    assert crk.words.keep_hyphenated is True
    assert crk.orthography.rules == ()
    assert crk.orthography.scripts == (
        ScriptSettings("Latn-SRO", rules=("sro-circumflex-long-vowels", "sro-inventory")),
        ScriptSettings("Cans", rules=("cans-inventory", "cans-lookalikes"), transliterate="cans-to-sro"),
    )
    assert iku.orthography.scripts == (ScriptSettings("Cans", rules=("cans-inventory", "cans-lookalikes")),)
    assert crk.eval_metrics == ("crk_linter", "crk_semantic")
    assert crk.fst.tag_format == "giellalt"
    giellalt, fragment = crk.fst.analyzers
    assert giellalt == AnalyzerFile(file="crk-strict-analyzer-for-dictionary.hfstol")
    assert fragment.test_fragment is True and fragment.sha256 is None
    assert fragment.script == "eval_standards/crk/analyzer/build.sh"
    (bokmal,) = nob.fst.analyzers
    assert bokmal.apertium == ApertiumSource(package="apertium-nno-nob", automorf="nob-nno.automorf.bin")
    assert len(bokmal.sha256) == 64 and bokmal.test_fragment is False
    assert nob.fst.compounds == CompoundRule("<compound-only-L>", "<compound-R>", max_parts=3)
    assert nob.lexicon.spacy == "nb"
    assert hau.model_support.comet == CometSupport(model="masakhane/africomet-mtl", validated=True)
    assert hau.model_support.embedding is False
    assert registry.get("eng").model_support.comet == CometSupport(model=None, validated=True)
    assert iku.casing == "caseless" and iku.quotes == ('"', "“", "”", "«", "»")
    # Cards are values: nothing can change one after it is loaded.
    with pytest.raises(dataclasses.FrozenInstanceError):
        nob.fst = None


def test_absent_sections_take_their_defaults(tmp_path):
    card = registry_of(tmp_path, MINIMAL).get("abc")
    assert card.quotes is None  # no restriction, unlike an empty list
    assert card.fst.analyzers == () and card.profile == "B"
    assert card.words.keep_hyphenated is False and card.lexicon.spacy is None
    assert card.model_support.comet == CometSupport() and card.eval_metrics == ()


@pytest.mark.parametrize("text, message", [
    ("code: abc\nname: Test\nscripts: [Latn]\ncasing: cased\n", r"abc\.yaml: surface: required"),
    (MINIMAL.replace("13a}", "13a, ter_asian: true}"), r"abc\.yaml: surface\.ter_asian: unknown key"),
    (MINIMAL + "fst:\n  analyzer: [abc.hfstol]\n",
     r"abc\.yaml: fst\.analyzer\[0\]: 'abc\.hfstol' is not of type 'object'"),
    (MINIMAL + "fst:\n  analyzer:\n    - {file: abc.hfstol, sha256: beef}\n",
     r"abc\.yaml: fst\.analyzer\[0\]\.sha256: 'beef' does not match"),
    (MINIMAL + "fst:\n  analyzer:\n    - {file: abc.hfstol, apertium: {package: apertium-abc}}\n",
     r"abc\.yaml: fst\.analyzer\[0\]\.apertium\.automorf: required"),
    (MINIMAL + "fst:\n  analyzer:\n    - {file: a.hfstol, script: a.sh,\n"
               "       apertium: {package: apertium-a, automorf: a.automorf.bin}}\n",
     r"abc\.yaml: fst\.analyzer\[0\]: only one of apertium, script"),
    (MINIMAL + "metricModelSupport: {comet: {validated: 'yes'}}\n",
     r"abc\.yaml: metricModelSupport\.comet\.validated: 'yes' is not of type 'boolean'"),
    (MINIMAL.replace("casing: cased", "casing: upper"), r"abc\.yaml: casing: 'upper' is not one of"),
    (MINIMAL + "evalMetric: [x]\n", r"abc\.yaml: evalMetric: unknown key"),
    # Per-script orthography: a script of the card, a registered transliterator that reads it.
    (MINIMAL + "orthography:\n  scripts:\n    Cans: {rules: [cans-inventory]}\n",
     r"abc\.yaml: orthography\.scripts\.Cans: not one of the card's scripts \(Latn\)"),
    (MINIMAL + "orthography:\n  scripts:\n    Latn: {transliterate: latn-to-xyz}\n",
     r"abc\.yaml: orthography\.scripts\.Latn\.transliterate: unknown transliterator 'latn-to-xyz'; known: cans-to-sro"),
    (MINIMAL + "orthography:\n  scripts:\n    Latn: {transliterate: cans-to-sro}\n",
     r"abc\.yaml: orthography\.scripts\.Latn\.transliterate: cans-to-sro reads Cans, not Latn"),
    (MINIMAL.replace("[Latn]", "[Latn, Latn-X]") + "orthography:\n  scripts:\n    Latn: {}\n    Latn-X: {}\n",
     r"abc\.yaml: orthography\.scripts\.Latn-X: a second entry for Unicode script Latn"),
    (MINIMAL + "orthography:\n  scripts:\n    Latn: {rule: [sro-inventory]}\n",
     r"abc\.yaml: orthography\.scripts\.Latn\.rule: unknown key"),
])
def test_a_malformed_card_names_file_and_field(tmp_path, text, message):
    with pytest.raises(InvalidCard, match=message):
        registry_of(tmp_path, text)


def test_card_file_name_must_match_code(tmp_path):
    with pytest.raises(InvalidCard, match=r"abd\.yaml: code: file name must be"):
        registry_of(tmp_path, MINIMAL, code="abd")


def test_every_bundled_apertium_analyzer_is_built_from_its_card():
    registry = default_registry()
    planned = {build.file: build for build in builds(registry)}
    assert set(planned) == {"nob.hfstol", "spa.hfstol", "eng.hfstol", "eus.hfstol", "crk-fragment.hfstol"}
    assert planned["eus.hfstol"].source == "/usr/share/apertium/apertium-eu-es/eu-es.automorf.bin"
    assert planned["crk-fragment.hfstol"].kind == "script"
    assert apt_packages(registry) == ["hfst", "lttoolbox", "lttoolbox-dev",
                                      "apertium-eng-spa", "apertium-eu-es", "apertium-nno-nob"]


def test_a_new_apertium_language_is_one_card(tmp_path):
    registry = registry_of(tmp_path, MINIMAL + (
        "fst:\n  analyzer:\n    - file: abc.hfstol\n"
        "      apertium: {package: apertium-abc-def, automorf: abc-def.automorf.bin}\n"
    ))
    (build,) = builds(registry)
    assert (build.kind, build.file, build.package) == ("apertium", "abc.hfstol", "apertium-abc-def")
    assert build.source == "/usr/share/apertium/apertium-abc-def/abc-def.automorf.bin"
    assert apt_packages(registry) == ["hfst", "lttoolbox", "lttoolbox-dev", "apertium-abc-def"]
