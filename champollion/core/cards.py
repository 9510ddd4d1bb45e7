"""Language cards: one YAML file per language under ``language_cards/``.

Everything language-specific (tokenizers, analyzers, scripts, quote rules,
model support) is read from a card, so adding a language is a data change.
Each file is checked against ``language_cards/card.schema.json`` when loaded
and becomes a typed, frozen ``LanguageCard``. The format is documented in
``language_cards/README.md``.

A language is named by any tag ``champollion.core.language_tags`` reads;
``CardRegistry.resolve`` gives its card (the written one, else a generic
card: ``champollion.core.generic_cards``) and its canonical tag,
``<ISO 639-3 code>_<ISO 15924 script>`` (``fra_Latn``, ``zho_Hant``).
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from champollion.core.language_tags import (
    InvalidLanguageTag,
    LanguageTag,
    likely_script,
    parse_tag,
    script_implied_by_region,
)
from champollion.core.scripts import TRANSLITERATORS, ScriptSettings, base_script

DEFAULT_CARDS_DIR = Path(__file__).resolve().parents[2] / "language_cards"
# The schema travels with the bundled cards; it applies to any cards directory.
SCHEMA_PATH = DEFAULT_CARDS_DIR / "card.schema.json"


class UnknownLanguage(KeyError):
    """A language tag that names no language a card can be had for; the
    message (``str``) says why and suggests valid tags."""

    def __init__(self, tag: str, reason: str):
        super().__init__(tag)
        self.tag, self.reason = tag, reason

    def __str__(self) -> str:
        return self.reason


class InvalidCard(ValueError):
    """A card file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class SurfaceSettings:
    bleu_tokenizer: str
    ter_asian_support: bool = False


@dataclass(frozen=True)
class WordSettings:
    # Keep hyphenated forms (SRO `ê-nipâyân`) as one word.
    keep_hyphenated: bool = False


@dataclass(frozen=True)
class ApertiumSource:
    """An analyzer converted from a Debian Apertium package's compiled lexicon."""
    package: str
    automorf: str


@dataclass(frozen=True)
class AnalyzerFile:
    """One `fst.analyzer` entry: a file name looked up in the analyzer
    directories, what it is expected to be, and how `make fst` builds it
    (`apertium` or `script`; neither means it is installed by hand)."""
    file: str
    sha256: str | None = None
    test_fragment: bool = False
    apertium: ApertiumSource | None = None
    script: str | None = None


@dataclass(frozen=True)
class CompoundRule:
    """Run-time compounding the analyzer file lacks (Apertium's `lt-proc -e`):
    a word is accepted as left parts whose analyses end in `left_tag` followed
    by a final part whose analysis ends in `right_tag`."""
    left_tag: str
    right_tag: str
    max_parts: int = 3
    min_part_chars: int = 2


@dataclass(frozen=True)
class FstSettings:
    # In priority order: the first file found is used.
    analyzers: tuple[AnalyzerFile, ...] = ()
    # How analyses read: "giellalt" or "apertium" (champollion.core.analyzers.parse_analysis).
    tag_format: str = "giellalt"
    compounds: CompoundRule | None = None


@dataclass(frozen=True)
class OrthographySettings:
    # Rules for every word, whatever its script.
    rules: tuple[str, ...] = ()
    # Per script: rules for its words and how they reach the analyzer
    # (champollion.core.scripts). Empty: scripts are not told apart.
    scripts: tuple[ScriptSettings, ...] = ()


@dataclass(frozen=True)
class LexiconSettings:
    # spaCy language code of the word list (stop words + lemma lookups).
    spacy: str | None = None


@dataclass(frozen=True)
class CometSupport:
    # None: the default COMET model (services.semantic.models).
    model: str | None = None
    validated: bool = False


@dataclass(frozen=True)
class ModelSupport:
    comet: CometSupport = CometSupport()
    embedding: bool = False


@dataclass(frozen=True)
class LanguageCard:
    code: str
    name: str
    aliases: tuple[str, ...]
    scripts: tuple[str, ...]
    casing: str
    surface: SurfaceSettings
    words: WordSettings = WordSettings()
    fst: FstSettings = FstSettings()
    orthography: OrthographySettings = OrthographySettings()
    # None: the language allows any quote character.
    quotes: tuple[str, ...] | None = None
    loanwords: tuple[str, ...] = ()
    lexicon: LexiconSettings = LexiconSettings()
    eval_metrics: tuple[str, ...] = ()
    model_support: ModelSupport = ModelSupport()
    # What a corpus for this language must test (seed 001 §6.2; the corpus check).
    linguistic_challenges: tuple[str, ...] = ()
    contact_influences: tuple[str, ...] = ()
    registers: tuple[str, ...] = ()
    # None for a written card; for a generic one, how it was built
    # (`generic (CLDR ...)`) and what a run scored with it should warn of.
    generic: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "written" if self.generic is None else "generic"

    @property
    def profile(self) -> str:
        """Composite profile (SPEC §4): A when the card declares an analyzer.

        Taken from the card, not from what is running, so that a run's profile
        does not change when the structural service is down."""
        return "A" if self.fst.analyzers else "B"


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _field_name(path) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(card)"


def _describe(error: jsonschema.ValidationError) -> str:
    """`field: problem`, naming the missing or unknown key itself rather than
    the object that lacks or holds it."""
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        return "; ".join(f"{_field_name([*path, key])}: required" for key in missing)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        return "; ".join(f"{_field_name([*path, key])}: unknown key" for key in error.instance if key not in known)
    if error.validator == "not" and set(error.validator_value) == {"required"}:
        return f"{_field_name(path)}: only one of {', '.join(error.validator_value['required'])}"
    return f"{_field_name(path)}: {error.message}"


def validate(data: Any, origin: str) -> None:
    """Raises InvalidCard naming `origin` and every field the schema refuses."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise InvalidCard(f"{origin}: " + "; ".join(_describe(error) for error in errors))


def _analyzer_file(entry: dict[str, Any]) -> AnalyzerFile:
    apertium = entry.get("apertium")
    return AnalyzerFile(
        file=entry["file"],
        sha256=entry.get("sha256"),
        test_fragment=entry.get("test_fragment", False),
        apertium=ApertiumSource(**apertium) if apertium else None,
        script=entry.get("script"),
    )


def _script_settings(data: dict[str, Any], origin: str) -> tuple[ScriptSettings, ...]:
    """`orthography.scripts`, checked against the card's `scripts` and the
    registered transliterators (what the schema alone cannot check)."""
    declared = data["scripts"]
    problems, found = [], []
    for script, entry in ((data.get("orthography") or {}).get("scripts") or {}).items():
        field = f"orthography.scripts.{script}"
        if script not in declared:
            problems.append(f"{field}: not one of the card's scripts ({', '.join(declared)})")
        if [s for s in found if base_script(s.script) == base_script(script)]:
            problems.append(f"{field}: a second entry for Unicode script {base_script(script)}")
        name = (entry or {}).get("transliterate")
        if name is not None and name not in TRANSLITERATORS:
            problems.append(f"{field}.transliterate: unknown transliterator {name!r}; known: {', '.join(TRANSLITERATORS)}")
        elif name is not None and TRANSLITERATORS[name].source != base_script(script):
            problems.append(f"{field}.transliterate: {name} reads {TRANSLITERATORS[name].source}, not {base_script(script)}")
        found.append(ScriptSettings(script, tuple((entry or {}).get("rules") or ()), name))
    if problems:
        raise InvalidCard(f"{origin}: " + "; ".join(problems))
    return tuple(found)


def card_from_mapping(data: dict[str, Any], origin: str) -> LanguageCard:
    """A typed card from a parsed YAML mapping; InvalidCard if the schema refuses it."""
    validate(data, origin)
    fst = data.get("fst") or {}
    support = data.get("metricModelSupport") or {}
    quotes = data.get("quotes")
    return LanguageCard(
        code=data["code"],
        name=data["name"],
        aliases=tuple(data.get("aliases") or ()),
        scripts=tuple(data["scripts"]),
        casing=data["casing"],
        surface=SurfaceSettings(**data["surface"]),
        words=WordSettings(**(data.get("words") or {})),
        fst=FstSettings(
            analyzers=tuple(_analyzer_file(entry) for entry in fst.get("analyzer") or ()),
            tag_format=fst.get("tag_format", "giellalt"),
            compounds=CompoundRule(**fst["compounds"]) if fst.get("compounds") else None,
        ),
        orthography=OrthographySettings(rules=tuple((data.get("orthography") or {}).get("rules") or ()),
                                        scripts=_script_settings(data, origin)),
        quotes=tuple(quotes) if quotes is not None else None,
        loanwords=tuple(data.get("loanwords") or ()),
        lexicon=LexiconSettings(**(data.get("lexicon") or {})),
        eval_metrics=tuple(data.get("evalMetrics") or ()),
        model_support=ModelSupport(comet=CometSupport(**(support.get("comet") or {})),
                                   embedding=support.get("embedding", False)),
        linguistic_challenges=tuple(data.get("linguisticChallenges") or ()),
        contact_influences=tuple(data.get("contactInfluences") or ()),
        registers=tuple(data.get("registers") or ()),
    )


def canonical_tag(code: str, script: str) -> str:
    """The one form a run card records a language in: `fra_Latn`."""
    return f"{code}_{script}"


@dataclass(frozen=True)
class Language:
    """A language as a run names it: the card it is scored with, the script
    (given or implied) and the canonical tag, `<card code>_<script>`."""
    tag: str
    script: str
    card: LanguageCard


class CardRegistry:
    """All cards of one directory, looked up by any language tag; a language
    without a written card gets a generic one."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)
        self._cards: dict[str, LanguageCard] = {}
        # ISO 639-3 code (the code's own, and each alias's) -> card.
        self._by_code: dict[str, LanguageCard] = {}
        for path in sorted(self.directory.glob("*.yaml")):
            with path.open(encoding="utf-8") as handle:
                try:
                    data = yaml.safe_load(handle)
                except yaml.YAMLError as error:
                    raise InvalidCard(f"{path}: not YAML: {error}") from None
            card = card_from_mapping(data, str(path))
            if path.stem != card.code:
                raise InvalidCard(f"{path}: code: file name must be the card's code ({card.code})")
            self._cards[card.code] = card
            self._index(card, path)

    def _index(self, card: LanguageCard, path: Path) -> None:
        """Files the card under the ISO 639-3 code its code and each alias
        read as; refuses a code that is not the 639-3 form of itself, an
        alias that is no language tag, and a code two cards claim."""
        for field, name in (("code", card.code), *((f"aliases[{i}]", a) for i, a in enumerate(card.aliases))):
            try:
                code = parse_tag(name).alpha3
            except InvalidLanguageTag as error:
                raise InvalidCard(f"{path}: {field}: {error}") from None
            if field == "code" and code != card.code:
                raise InvalidCard(f"{path}: code: {card.code!r} reads as {code!r} (ISO 639-3, CLDR's aliases): "
                                  f"name the card {code}")
            other = self._by_code.get(code)
            if other is not None and other is not card:
                raise InvalidCard(f"{path}: {field}: {name!r} names {code}, which {other.code}.yaml claims too")
            self._by_code[code] = card

    def _known(self) -> tuple[str, ...]:
        return tuple(name for card in self._cards.values() for name in (card.code, *card.aliases))

    def resolve(self, text: str) -> Language:
        """The card and canonical tag of a language tag; raises UnknownLanguage.

        The script is the tag's own; else the one its region implies where
        that is not the language's usual one (`zh-TW`: Hant); else the
        card's first (a written card's) or CLDR's likely script (a generic
        card's). A written card refuses a script it does not declare."""
        return _resolved(self, text)

    def _resolve(self, text: str) -> Language:
        try:
            tag = parse_tag(text, self._known())
        except InvalidLanguageTag as error:
            raise UnknownLanguage(text, f"unknown language tag {error}") from None
        written = self._by_code.get(tag.alpha3)
        script = tag.script or script_implied_by_region(tag)
        if written is not None:
            declared = [base_script(entry) for entry in written.scripts]
            if script is not None and script not in declared:
                if tag.script is not None:
                    raise UnknownLanguage(text, f"{text!r}: the {written.code} card (language_cards/"
                                                f"{written.code}.yaml) declares script {', '.join(declared)}, not "
                                                f"{script}; use {written.code} or "
                                                f"{', '.join(canonical_tag(written.code, s) for s in declared)}")
                script = None  # a region's usual script the card does not write: the card's own
            script = script or declared[0]
            return Language(tag=canonical_tag(written.code, script), script=script, card=written)
        script = script or likely_script(tag.language)
        if script is None:
            raise UnknownLanguage(text, f"{text!r}: no language card for {tag.alpha3}, and CLDR knows no script "
                                        f"for it: give one ({tag.alpha3}_Latn, ...) or add language_cards/"
                                        f"{tag.alpha3}.yaml")
        return Language(tag=canonical_tag(tag.alpha3, script), script=script,
                        card=_generic(tag.alpha3, tag.language, script))

    def get(self, code: str) -> LanguageCard:
        """The card a language tag is scored with; raises UnknownLanguage."""
        return self.resolve(code).card

    def __contains__(self, code: str) -> bool:
        try:
            self.resolve(code)
        except UnknownLanguage:
            return False
        return True

    def cards(self) -> list[LanguageCard]:
        """The written cards."""
        return list(self._cards.values())

    @staticmethod
    def generic_description() -> str:
        """How a language without a written card is scored."""
        from champollion.core.generic_cards import describe_generic_cards
        return describe_generic_cards()


@lru_cache(maxsize=4096)
def _resolved(registry: CardRegistry, text: str) -> Language:
    return registry._resolve(text)


@lru_cache(maxsize=1024)
def _generic(code: str, language: str, script: str) -> LanguageCard:
    """The generic card of (`code`, `script`), built once: every tag naming
    them gets the same card object."""
    # Imported here: reading the written cards (e.g. `make fst`'s analyzer
    # list) needs neither sacreBLEU nor the sentence encoder.
    from champollion.core.generic_cards import generic_card
    tag = LanguageTag(typed=code, language=language, alpha3=code, script=script, region=None)
    built = generic_card(tag, script, canonical_tag(code, script))
    card = card_from_mapping(built.mapping, f"generic card of {canonical_tag(code, script)}")
    return dataclasses.replace(card, generic=built.origin, notes=built.notes)


@lru_cache(maxsize=None)
def _registry_for(directory: str) -> CardRegistry:
    return CardRegistry(directory)


def default_registry() -> CardRegistry:
    """The registry of ``CHAMPOLLION_CARDS_DIR`` or the bundled ``language_cards/``."""
    return _registry_for(os.environ.get("CHAMPOLLION_CARDS_DIR", str(DEFAULT_CARDS_DIR)))
