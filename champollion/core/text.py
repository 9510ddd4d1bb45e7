"""Text normalisation shared by every family that compares strings."""
import re
import unicodedata

_WHITESPACE_RUN = re.compile(r"\s+")


def normalise_for_match(text: str) -> str:
    """NFC, surrounding whitespace stripped, internal runs collapsed (SPEC §2.1).

    Case is kept: exact and equivalent matches are case-sensitive."""
    return _WHITESPACE_RUN.sub(" ", unicodedata.normalize("NFC", text)).strip()
