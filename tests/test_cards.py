"""Language cards load, carry what the services need, and reject mistakes."""
import pytest

from champollion.cards import (
    CardRegistry,
    InvalidCard,
    UnknownLanguage,
    default_registry,
)

REQUIRED_LANGUAGES = {"eng", "spa", "deu", "kor", "jpn", "zho", "crk", "iku"}


def test_required_languages_are_carded():
    registry = default_registry()
    assert REQUIRED_LANGUAGES <= {card.code for card in registry.cards()}


def test_tokenizers_follow_the_script():
    registry = default_registry()
    assert registry.get("kor").bleu_tokenizer == "ko-mecab"
    assert registry.get("jpn").bleu_tokenizer == "ja-mecab"
    assert registry.get("zho").bleu_tokenizer == "zh"
    assert registry.get("deu").bleu_tokenizer == "13a"
    assert registry.get("zho").ter_asian_support is True


def test_aliases_and_profiles():
    registry = default_registry()
    assert registry.get("es").code == "spa"
    assert registry.get("crk").profile == "A"
    assert registry.get("eng").profile == "A"  # Apertium analyzer
    assert registry.get("kor").profile == "B"
    with pytest.raises(UnknownLanguage):
        registry.get("xx")


def test_a_malformed_card_names_file_and_key(tmp_path):
    (tmp_path / "abc.yaml").write_text("code: abc\nname: Test\nscripts: [Latn]\ncasing: cased\n", encoding="utf-8")
    with pytest.raises(InvalidCard, match=r"abc.yaml: missing key\(s\) surface"):
        CardRegistry(tmp_path)


def test_card_file_name_must_match_code(tmp_path):
    (tmp_path / "abc.yaml").write_text(
        "code: abd\nname: Test\nscripts: [Latn]\ncasing: cased\nsurface: {bleu_tokenizer: 13a}\n", encoding="utf-8"
    )
    with pytest.raises(InvalidCard, match="file name must be"):
        CardRegistry(tmp_path)
