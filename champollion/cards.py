"""Language cards: one YAML file per language under ``language_cards/``.

Everything language-specific (tokenizers, analyzers, scripts, quote rules,
model support) is read from a card, so adding a language is a data change.
The format is documented in ``language_cards/README.md``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CARDS_DIR = Path(__file__).resolve().parent.parent / "language_cards"
REQUIRED_KEYS = ("code", "name", "scripts", "casing", "surface")


class UnknownLanguage(KeyError):
    """No card declares this language code (or alias)."""


class InvalidCard(ValueError):
    """A card file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class LanguageCard:
    code: str
    name: str
    aliases: tuple[str, ...]
    scripts: tuple[str, ...]
    casing: str
    bleu_tokenizer: str
    ter_asian_support: bool
    fst_analyzers: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, compare=False, hash=False)

    @property
    def profile(self) -> str:
        """Composite profile (SPEC §4): A when the card declares an analyzer.

        Taken from the card, not from what is running, so that a run's profile
        does not change when the structural service is down."""
        return "A" if self.fst_analyzers else "B"


def _card_from_mapping(data: dict[str, Any], origin: str) -> LanguageCard:
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise InvalidCard(f"{origin}: missing key(s) {', '.join(missing)}")
    surface = data["surface"] or {}
    if "bleu_tokenizer" not in surface:
        raise InvalidCard(f"{origin}: surface.bleu_tokenizer is required")
    if data["casing"] not in ("cased", "caseless"):
        raise InvalidCard(f"{origin}: casing must be 'cased' or 'caseless'")
    fst = data.get("fst") or {}
    return LanguageCard(
        code=str(data["code"]),
        name=str(data["name"]),
        aliases=tuple(data.get("aliases") or ()),
        scripts=tuple(data["scripts"]),
        casing=data["casing"],
        bleu_tokenizer=str(surface["bleu_tokenizer"]),
        ter_asian_support=bool(surface.get("ter_asian_support", False)),
        fst_analyzers=tuple(fst.get("analyzer") or ()),
        raw=data,
    )


class CardRegistry:
    """All cards of one directory, looked up by ISO 639-3 code or alias."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)
        self._cards: dict[str, LanguageCard] = {}
        self._by_name: dict[str, LanguageCard] = {}
        for path in sorted(self.directory.glob("*.yaml")):
            with path.open(encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
            if not isinstance(data, dict):
                raise InvalidCard(f"{path}: a card must be a mapping")
            card = _card_from_mapping(data, str(path))
            if path.stem != card.code:
                raise InvalidCard(f"{path}: file name must be the card's code ({card.code})")
            self._cards[card.code] = card
            for name in (card.code, *card.aliases):
                self._by_name[name.lower()] = card

    def get(self, code: str) -> LanguageCard:
        try:
            return self._by_name[code.lower()]
        except KeyError:
            raise UnknownLanguage(code) from None

    def __contains__(self, code: str) -> bool:
        return code.lower() in self._by_name

    def cards(self) -> list[LanguageCard]:
        return list(self._cards.values())


@lru_cache(maxsize=None)
def _registry_for(directory: str) -> CardRegistry:
    return CardRegistry(directory)


def default_registry() -> CardRegistry:
    """The registry of ``CHAMPOLLION_CARDS_DIR`` or the bundled ``language_cards/``."""
    return _registry_for(os.environ.get("CHAMPOLLION_CARDS_DIR", str(DEFAULT_CARDS_DIR)))
