"""What the run card says of the languages' cards: one warning and the
`language_card` signature when a side is scored with a generic card
(champollion.core.generic_cards), and that card's own notes."""
from __future__ import annotations

from champollion.core.cards import Language

SIGNATURE_KEY = "language_card"


def language_card_notes(source: Language, target: Language) -> tuple[list[str], str | None]:
    """(warnings, the `language_card` signature or None when both sides
    have written cards)."""
    generic = [(side, language) for side, language in (("source", source), ("target", target))
               if language.card.generic is not None]
    if not generic:
        return [], None
    sides = ", ".join(f"{side} {language.tag}" for side, language in generic)
    files = " and ".join(dict.fromkeys(f"language_cards/{language.card.code}.yaml" for _, language in generic))
    warnings = [f"no language card for {sides}: scored with a generic card built from CLDR data (no analyzer, so "
                f"no structural metrics; word lists, sentence embeddings and COMET validation only where the "
                f"data has the language); add {files} (language_cards/README.md) to score it fully"]
    for _, language in generic:
        warnings.extend(note for note in language.card.notes if note not in warnings)
    origins = dict.fromkeys(language.card.generic for _, language in generic)
    signature = f"{'; '.join(origins)}: {sides}"
    return warnings, signature
