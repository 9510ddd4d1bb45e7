"""Languages named by any common tag, and scored with a generic card when
they have no written one (champollion/core/language_tags.py, generic_cards.py,
cards.py; README "Languages"): the tags people write reach one canonical
form, languages without a card are scored as sacreBLEU's CLI scores them, and
a bad tag is refused naming the flag or field."""
from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from champollion.core import generic_cards
from champollion.core.cards import DEFAULT_CARDS_DIR, CardRegistry, InvalidCard, UnknownLanguage, default_registry
from champollion.core.language_tags import parse_tag
from champollion.core.sacrebleu_adapter import cli_bleu_tokenizer
from apps.client import Client
from tests.test_bad_input import invalid_input_line

CARDS = default_registry()
SACREBLEU = Path(sys.executable).with_name("sacrebleu")

# Three sentences in each language, written for these tests: sentence i of
# each list translates sentence i of the others.
SENTENCES = {
    "en": ["The cat sleeps on the warm windowsill.", "We will meet at the station tomorrow morning.",
           "This book was written by a famous author."],
    "cs": ["Kočka spí na teplém parapetu.", "Zítra ráno se sejdeme na nádraží.", "Tuto knihu napsal slavný autor."],
    "de": ["Die Katze schläft auf der warmen Fensterbank.", "Wir treffen uns morgen früh am Bahnhof.",
           "Dieses Buch wurde von einem berühmten Autor geschrieben."],
    "fr": ["Le chat dort sur le rebord chaud de la fenêtre.", "Nous nous retrouverons à la gare demain matin.",
           "Ce livre a été écrit par un auteur célèbre."],
    "ha": ["Kyanwa tana barci a kan taga mai dumi.", "Za mu hadu a tasha gobe da safe.",
           "Wani shahararren marubuci ne ya rubuta wannan littafi."],
    "is": ["Kötturinn sefur í hlýju gluggakistunni.", "Við hittumst á lestarstöðinni í fyrramálið.",
           "Þessi bók var skrifuð af frægum höfundi."],
    "ja": ["猫は暖かい窓辺で眠っています。", "明日の朝、駅で会いましょう。", "この本は有名な作家によって書かれました。"],
    "ru": ["Кошка спит на тёплом подоконнике.", "Мы встретимся на вокзале завтра утром.",
           "Эта книга была написана известным автором."],
    "uk": ["Кішка спить на теплому підвіконні.", "Ми зустрінемося на вокзалі завтра вранці.",
           "Цю книгу написав відомий автор."],
    "zh": ["猫在温暖的窗台上睡觉。", "我们明天早上在车站见面。", "这本书是一位著名作家写的。"],
}
# The same languages as BCP-47 tags with a region (and a script).
BCP47 = {"en": "en-US", "cs": "cs-CZ", "de": "de-DE", "fr": "fr-FR", "ha": "ha-NG", "is": "is-IS", "ja": "ja-JP",
         "ru": "ru-RU", "uk": "uk-UA", "zh": "zh-Hans-CN"}
# The sentence encoder (multilingual USE v3) declares these of them.
ENCODED = {"en", "de", "fr", "ja", "ru", "zh"}
WRITTEN = {"en", "de", "ha", "ja", "zh"}  # language_cards/ has them
TOKENIZER = {"ja": "ja-mecab", "zh": "zh"}  # sacreBLEU's pick; 13a for the others


def hypotheses(references: list[str]) -> list[str]:
    """One exact, one with three characters dropped, one with its halves swapped."""
    first, second, third = references
    middle = len(second) // 2
    return [first, second[:middle] + second[middle + 3:], third[len(third) // 2:] + " " + third[:len(third) // 2]]


def write_run(directory: Path, source: str, target: str) -> dict[str, Path]:
    files = {"src": directory / f"src.{source}", "ref": directory / f"ref.{target}", "hyp": directory / f"hyp.{target}"}
    for name, lines in (("src", SENTENCES[source]), ("ref", SENTENCES[target]),
                        ("hyp", hypotheses(SENTENCES[target]))):
        files[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return files


def sacrebleu_cli(files: dict[str, Path], pair: str) -> dict[str, dict]:
    """sacreBLEU's own command line on the files: BLEU, chrF++ and TER by name."""
    output = subprocess.run([str(SACREBLEU), str(files["ref"]), "-i", str(files["hyp"]), "-l", pair,
                             "-m", "bleu", "chrf", "ter", "--chrf-word-order", "2", "-w", "6"],
                            check=True, capture_output=True, text=True).stdout
    return {result["name"]: result for result in json.loads(output)}


def evaluate_files(cli, gateway_address: str, files: dict[str, Path], source_tag: str, target_tag: str,
                   out: Path) -> dict:
    result = cli("evaluate", "--src", files["src"], "--ref", files["ref"], "--hyp", files["hyp"],
                 "--source-lang", source_tag, "--target-lang", target_tag, "--gateway", gateway_address,
                 "--out", out)
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text(encoding="utf-8"))


def without_run_id(card: dict) -> dict:
    """The card but its run id, how many stored runs share its fingerprint
    (the store counts each of a test's runs) and a warning that a family was
    slow (the session's first behavioral batch loads its word lists)."""
    kept = {key: value for key, value in card.items() if key != "run_id"}
    kept["warnings"] = [warning for warning in card["warnings"] if " was slow: " not in warning]
    kept["integrity"] = {key: value for key, value in card["integrity"].items()
                         if key != "submissions_with_fingerprint"}
    return kept


# -- tags ---------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["fr", "fra", "fre", "fr-FR", "fra_Latn", "FR", "fr_FR", "fra-Latn-FR"])
def test_every_spelling_of_french_is_one_language(typed):
    language = CARDS.resolve(typed)
    assert language.tag == "fra_Latn" and language.script == "Latn"
    assert language.card is CARDS.get("fr")  # the same generic card, built once


@pytest.mark.parametrize("typed, tag, kind", [
    ("zh-Hant", "zho_Hant", "written"), ("zh-TW", "zho_Hant", "written"), ("zho_Hant", "zho_Hant", "written"),
    ("zh-Hans", "zho_Hans", "written"), ("zh", "zho_Hans", "written"), ("zh-CN", "zho_Hans", "written"),
    ("cmn", "zho_Hans", "written"),  # an alias of the zho card
    ("sr-Latn", "srp_Latn", "generic"), ("sr-ME", "srp_Latn", "generic"), ("sr", "srp_Cyrl", "generic"),
    ("sr-Cyrl", "srp_Cyrl", "generic"),
    ("de-DE", "deu_Latn", "written"), ("ger", "deu_Latn", "written"), ("pt-BR", "por_Latn", "generic"),
    ("no", "nob_Latn", "written"), ("iu", "iku_Cans", "written"), ("swh_Latn", "swa_Latn", "written"),
    ("crk", "crk_Latn", "written"), ("crk-Cans", "crk_Cans", "written"),  # the card's first script unless given
    ("ko-KR", "kor_Hang", "written"), ("cs", "ces_Latn", "generic"), ("cze", "ces_Latn", "generic"),
])
def test_canonical_tags_name_the_language_and_its_script(typed, tag, kind):
    language = CARDS.resolve(typed)
    assert (language.tag, language.card.kind) == (tag, kind)


@pytest.mark.parametrize("typed", ["fr-CA", "zh-TW", "sr-ME", "iw", "tl", "cmn", "no", "crk-Cans", "th", "yue",
                                   "arb_Arab", "pt-BR", "uk"])
def test_a_canonical_tag_reads_back_as_itself(typed):
    """Families get the canonical tag and must build the same card from it."""
    language = CARDS.resolve(typed)
    again = CARDS.resolve(language.tag)
    assert (again.tag, again.card) == (language.tag, language.card)
    assert again.card == CardRegistry(DEFAULT_CARDS_DIR).get(language.tag)  # another process's registry


def test_scripts_of_one_language_are_different_generic_cards():
    latin, cyrillic = CARDS.get("sr-Latn"), CARDS.get("sr-Cyrl")
    assert (latin.scripts, cyrillic.scripts) == (("Latn",), ("Cyrl",))
    assert latin.code == cyrillic.code == "srp" and latin != cyrillic


@pytest.mark.parametrize("typed, message", [
    ("xx-Foo", r"unknown language tag 'xx-Foo': 'xx' is not a language code; nearest valid tags: xh \(Xhosa\)"),
    ("fr-Foo", r"'foo' is neither a script nor a region; nearest valid tags: fr$"),
    ("zh-Hanz", r"'Hanz' is not an ISO 15924 script code; nearest valid tags: zh-Hanb, zh-Hang, zh$"),
    ("French", r"not a language tag; nearest valid tags: fr \(French\)"),
    ("und", r"names no particular language"),
    ("kor-Latn", r"the kor card \(language_cards/kor.yaml\) declares script Hang, not Latn; use kor or kor_Hang"),
    ("qaa", r"no language card for qaa, and CLDR knows no script for it: give one \(qaa_Latn, \.\.\.\)"),
])
def test_a_tag_that_names_no_language_is_refused_with_the_nearest(typed, message):
    with pytest.raises(UnknownLanguage, match=message):
        CARDS.resolve(typed)


def test_card_codes_and_aliases_are_read_as_tags(tmp_path):
    minimal = "name: Test\nscripts: [Latn]\ncasing: cased\nsurface: {bleu_tokenizer: 13a}\n"
    (tmp_path / "fre.yaml").write_text("code: fre\n" + minimal, encoding="utf-8")
    with pytest.raises(InvalidCard, match=r"fre\.yaml: code: 'fre' reads as 'fra'.*name the card fra"):
        CardRegistry(tmp_path)
    (tmp_path / "fre.yaml").unlink()
    (tmp_path / "fra.yaml").write_text("code: fra\naliases: [xx-Foo]\n" + minimal, encoding="utf-8")
    with pytest.raises(InvalidCard, match=r"fra\.yaml: aliases\[0\]: 'xx-Foo': 'xx' is not a language code"):
        CardRegistry(tmp_path)
    (tmp_path / "fra.yaml").write_text("code: fra\naliases: [fr-CA]\n" + minimal, encoding="utf-8")
    assert CardRegistry(tmp_path).resolve("fre").card.kind == "written"


def test_gateway_routes_and_served_languages_take_any_tag():
    from apps.cli.serve import _served_languages
    from gateway.server.config import ConfigError, GatewayConfig
    config = GatewayConfig(families={"structural": {"routes": {"crk": "a:1", "nb": "b:2", "de-DE": "c:3"}}})
    addresses = [config.address_for("structural", code) for code in ("crk", "nob", "deu", "spa")]
    assert addresses == ["a:1", "b:2", "c:3", None]
    with pytest.raises(ConfigError, match=r"^families\.structural\.routes\.xx-Foo: unknown language tag 'xx-Foo'"):
        GatewayConfig(families={"structural": {"routes": {"xx-Foo": "a:1"}}})
    assert _served_languages(["es", "nb-NO", "crk_Cans"]) == ["crk", "nob", "spa"]


# -- generic cards ------------------------------------------------------------

def test_a_written_card_wins_and_the_generic_one_comes_from_data():
    assert CARDS.get("de").kind == "written" and CARDS.get("de").generic is None
    french = CARDS.get("fr")
    assert french.kind == "generic" and french.generic.startswith("generic (CLDR: langcodes ")
    assert (french.code, french.name, french.scripts, french.casing) == ("fra", "French", ("Latn",), "cased")
    assert french.profile == "B" and french.fst.analyzers == () and french.eval_metrics == ()
    assert french.surface == dataclasses.replace(french.surface, bleu_tokenizer="13a", ter_asian_support=False)
    assert french.model_support.embedding is True and french.model_support.comet.validated is False
    assert french.lexicon.spacy == "fr"
    czech, icelandic = CARDS.get("cs"), CARDS.get("is")
    assert czech.model_support.embedding is False and icelandic.lexicon.spacy == "is"
    # A script the encoder was not trained on gets no embedding support.
    assert CARDS.get("ru").model_support.embedding and not CARDS.get("ru-Latn").model_support.embedding
    assert CARDS.get("el").casing == "cased" and CARDS.get("ar").casing == "caseless"


def test_generic_cards_follow_sacrebleus_cli_and_spaceless_scripts_get_char(tmp_path):
    """Without the bundled zho, jpn and kor cards, Chinese, Japanese and
    Korean get the tokenizers sacreBLEU's CLI picks for them; Thai, Khmer,
    Burmese, Lao, Tibetan and Cantonese (in Han) get `char` and a note."""
    for path in DEFAULT_CARDS_DIR.glob("*.yaml"):
        if path.stem not in {"zho", "jpn", "kor"}:
            shutil.copy(path, tmp_path / path.name)
    registry = CardRegistry(tmp_path)
    assert [registry.get(tag).surface.bleu_tokenizer for tag in ("zh", "ja", "ko", "fr")] == \
        ["zh", "ja-mecab", "ko-mecab", "13a"]
    assert all(not registry.get(tag).surface.ter_asian_support for tag in ("zh", "ja", "ko"))
    for tag in ("th", "km", "my", "lo", "bo", "yue"):
        card = registry.get(tag)
        assert card.surface.bleu_tokenizer == "char", tag
        (note,) = card.notes
        assert "written without spaces between words" in note and "`char`" in note
    assert registry.get("zh").notes == () and registry.get("ko").casing == "caseless"


@pytest.mark.parametrize("language", ["zh", "ja", "ko", "fr", "cs", "th", ""])
def test_cli_tokenizer_is_the_one_sacrebleu_builds(language):
    """What `-l xx-<language>` makes sacreBLEU build (it passes the target as trg_lang)."""
    from sacrebleu.metrics.bleu import BLEU, _get_tokenizer
    assert type(BLEU(trg_lang=language).tokenizer) is _get_tokenizer(cli_bleu_tokenizer(language))


def test_quotes_come_from_cldr_through_icu_and_fall_back_without_it(monkeypatch):
    pytest.importorskip("icu")
    assert CARDS.get("cs").quotes == ("„", "“", "‚", "‘", '"', "'")
    assert CARDS.get("fr").quotes == ("«", "»", '"', "'")
    assert "ICU" in CARDS.get("cs").generic
    monkeypatch.setattr(generic_cards, "_icu", lambda: None)
    generic_cards.cldr_quotes.cache_clear()
    try:
        built = generic_cards.generic_card(parse_tag("cs"), "Latn", "ces_Latn")
    finally:
        generic_cards.cldr_quotes.cache_clear()
    assert built.mapping["quotes"] == list(generic_cards.GENERIC_QUOTES)
    assert "the generic set (PyICU is not installed)" in built.origin


def test_cased_scripts_are_the_bicameral_ones_icu_knows():
    icu = pytest.importorskip("icu")
    from langcodes.data_dicts import LIKELY_SUBTAGS
    likely = {value.split("-")[1] for value in LIKELY_SUBTAGS.values()}

    def bicameral(script: str) -> bool:
        letters = icu.UnicodeSet(f"[[:Script={script}:]&[:Lu:]]")
        return len(letters) > 0 and len(icu.UnicodeSet(f"[[:Script={script}:]&[:Ll:]]")) > 0

    found = {script for script in likely if bicameral(script)} - {"Geor"}  # Mtavruli: not ordinary case
    assert found <= generic_cards.CASED_SCRIPTS


# -- runs ---------------------------------------------------------------------

OTHERS = [code for code in SENTENCES if code != "en"]
PAIRS = [(code, "en") for code in OTHERS] + [("en", code) for code in OTHERS]


@pytest.mark.parametrize("source, target", PAIRS)
def test_plain_text_scores_equal_sacrebleus_cli_with_either_tag(cli, stack, tmp_path, run_card_validator,
                                                                source, target):
    files = write_run(tmp_path, source, target)
    reference = sacrebleu_cli(files, f"{source}-{target}")
    short = evaluate_files(cli, stack.gateway_address, files, source, target, tmp_path / "short.json")
    long = evaluate_files(cli, stack.gateway_address, files, BCP47[source], BCP47[target], tmp_path / "long.json")
    run_card_validator.validate(short)
    assert without_run_id(long) == without_run_id(short)
    scores, signatures = short["scores"], short["signatures"]
    for metric, name in (("bleu", "BLEU"), ("chrf_plus_plus", "chrF2++"), ("ter", "TER")):
        assert scores[metric] == pytest.approx(reference[name]["score"], abs=5e-6), metric
    assert signatures["bleu"] == reference["BLEU"]["signature"]
    assert f"|tok:{TOKENIZER.get(target, '13a')}" in signatures["bleu"]
    assert signatures["chrf_plus_plus"] == reference["chrF2++"]["signature"]
    # TER: the written Japanese and Chinese cards ask for asian_support, which
    # changes nothing without normalisation (same score) but the signature.
    expected_ter = reference["TER"]["signature"]
    if target in ("ja", "zh"):
        expected_ter = expected_ter.replace("asian:no", "asian:yes")
    assert signatures["ter"] == expected_ter
    tags = [CARDS.resolve(code).tag for code in (source, target)]
    assert short["dataset"]["language_pair"] == "-".join(tags)
    generic = [f"{side} {tag}" for side, code, tag in zip(("source", "target"), (source, target), tags)
               if code not in WRITTEN]
    if generic:
        assert signatures["language_card"].startswith("generic (CLDR: ")
        assert signatures["language_card"].endswith(": " + ", ".join(generic))
        (warning,) = [w for w in short["warnings"] if w.startswith("no language card for")]
        assert warning.startswith(f"no language card for {', '.join(generic)}: scored with a generic card")
        assert "add language_cards/" in warning
    else:
        assert "language_card" not in signatures
    if target in ENCODED:
        assert 0 <= scores["semantic_score"] <= 1
    else:
        assert scores["semantic_score"] is None
        assert any("does not support target language" in w and "semantic_score is null" in w
                   for w in short["warnings"])
    assert scores["fst_acceptance_rate"] is None or target == "en"


def test_french_cards_are_identical_whatever_the_tag(cli, stack, tmp_path, run_card_validator):
    files = write_run(tmp_path, "en", "fr")
    cards = [evaluate_files(cli, stack.gateway_address, files, "en", tag, tmp_path / f"{index}.json")
             for index, tag in enumerate(["fr", "fra", "fre", "fr-FR", "fra_Latn"])]
    for card in cards:
        run_card_validator.validate(card)
    first = without_run_id(cards[0])
    assert all(without_run_id(card) == first for card in cards[1:])
    assert first["dataset"]["language_pair"] == "eng_Latn-fra_Latn"


def test_scripts_are_told_apart_in_the_card(cli, stack, tmp_path):
    files = write_run(tmp_path, "en", "zh")
    hant = evaluate_files(cli, stack.gateway_address, files, "en", "zh-Hant", tmp_path / "hant.json")
    hans = evaluate_files(cli, stack.gateway_address, files, "en", "zh-Hans", tmp_path / "hans.json")
    assert hant["dataset"]["language_pair"] == "eng_Latn-zho_Hant"
    assert hans["dataset"]["language_pair"] == "eng_Latn-zho_Hans"


def test_an_unknown_tag_is_one_line_naming_the_flag(cli, tmp_path):
    files = write_run(tmp_path, "en", "fr")
    line = invalid_input_line(cli("evaluate", "--src", files["src"], "--ref", files["ref"], "--hyp", files["hyp"],
                                  "--source-lang", "en", "--target-lang", "xx-Foo"))
    assert line.startswith("champollion: error: --target-lang: unknown language tag 'xx-Foo': 'xx' is not a "
                           "language code; nearest valid tags: xh (Xhosa)")
    assert "`champollion describe --languages`" in line and str(files["src"]) not in line


def test_a_gateways_refusal_names_the_flag_that_gave_the_language(cli, stack, tmp_path):
    """A remote gateway judges tags by its own cards; its answer is the flag's."""
    files = write_run(tmp_path, "en", "fr")
    line = invalid_input_line(cli("evaluate", "--src", files["src"], "--ref", files["ref"], "--hyp", files["hyp"],
                                  "--source-lang", "kor-Latn", "--target-lang", "fr", "--gateway",
                                  stack.gateway_address))
    assert line.startswith("champollion: error: --source-lang: 'kor-Latn': the kor card")
    assert "describe --languages" in line


def test_describe_lists_written_cards_and_how_a_generic_one_is_built(cli, stack):
    result = cli("describe", "--languages", "--gateway", stack.gateway_address, "--json")
    assert result.exit_code == 0, result.stderr
    described = json.loads(result.stdout)
    codes = {language["code"]: language for language in described["languages"]}
    assert set(codes) == {card.code for card in CARDS.cards()}
    assert codes["zho"]["aliases"] == ["zh", "cmn"] and codes["zho"]["scripts"] == ["Hans", "Hant"]
    assert "generic card" in described["generic_card"] and "sacreBLEU's CLI" in described["generic_card"]
    # Without --json, a summary: a line per written card, then the generic card.
    table = cli("describe", "--languages", "--gateway", stack.gateway_address)
    assert table.exit_code == 0, table.stderr
    assert f"{len(codes)} written language cards" in table.stdout
    assert any(line.split()[:2] == ["zho", "Chinese"] and "Hans, Hant" in line for line in table.stdout.splitlines())
    assert "any other language: a language without a written card" in table.stdout


def test_registered_corpora_store_canonical_tags(stack):
    corpus = {"id": "tags-fr", "source_lang": "en-GB", "target_lang": "fre",
              "entries": [{"id": f"e{i}", "source": s, "reference": r}
                          for i, (s, r) in enumerate(zip(SENTENCES["en"], SENTENCES["fr"]))]}
    with Client(stack.gateway_address) as client:
        info = client.register_corpus(corpus, "dev")
        assert (info["source_lang"], info["target_lang"]) == ("eng_Latn", "fra_Latn")
        # The same corpus in other spellings is the same version.
        again = client.register_corpus({**corpus, "source_lang": "eng", "target_lang": "fra_Latn"}, "dev")
        assert again["created"] is False and again["version"] == info["version"]
