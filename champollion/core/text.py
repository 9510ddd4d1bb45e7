"""Text normalisation shared by every family that compares strings."""
import re
import unicodedata

_WHITESPACE_RUN = re.compile(r"\s+")


def normalise_for_match(text: str) -> str:
    """NFC, surrounding whitespace stripped, internal runs collapsed (SPEC §2.1).

    Case is kept: exact and equivalent matches are case-sensitive."""
    return _WHITESPACE_RUN.sub(" ", unicodedata.normalize("NFC", text)).strip()



class _FoldTable(dict):
    """str.translate's table for fold_for_comparison, filled as characters
    are met: punctuation (P*) and symbols (S*) become a space; control,
    format (zero-width joiners and spaces), private-use and unassigned
    characters (C*, other than whitespace) are dropped; the rest is kept."""

    def __missing__(self, code: int):
        char = chr(code)
        kind = unicodedata.category(char)[0]
        if kind in "PS":
            value = " "
        elif kind == "C" and not char.isspace():
            value = None  # dropped
        else:
            value = code
        self[code] = value
        return value


_FOLD_TABLE = _FoldTable()


def fold_for_comparison(text: str) -> str:
    """`text` reduced to what a trivial disguise cannot change: NFKC
    (compatibility forms: full-width letters, ligatures), case folded,
    punctuation and symbols made spaces, invisible characters dropped,
    whitespace runs collapsed to one space. Used where a match must survive
    edits that keep the words (the contamination check, near-duplicate
    predictions), never for scoring."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_FOLD_TABLE)
    return _WHITESPACE_RUN.sub(" ", folded).strip()
