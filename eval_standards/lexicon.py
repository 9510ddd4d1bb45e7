"""Bilingual lexicons (target lemma -> part of speech, English glosses,
synonym group) in a tab-separated format documented in README.md.

A language's bundled lexicon (`eval_standards/<code>/lexicon/<name>`) is
replaced by a file of the same name found in a directory on
`CHAMPOLLION_LEXICON_DIR` (':'-separated) — that is how a full dictionary
is plugged in.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class LexiconEntry:
    lemma: str
    pos: str
    glosses: tuple[str, ...]
    synonym_group: str | None


@dataclass
class Lexicon:
    path: Path
    entries: dict[str, LexiconEntry]

    def glosses(self, lemma: str) -> tuple[str, ...]:
        entry = self.entries.get(lemma)
        return entry.glosses if entry else ()

    def synonym_key(self, lemma: str) -> str:
        """The lemma's synonym group, or the lemma itself."""
        entry = self.entries.get(lemma)
        return f"group:{entry.synonym_group}" if entry and entry.synonym_group else lemma


def parse_lexicon(path: Path) -> Lexicon:
    entries = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "lemma":
                continue  # header
            if len(fields) < 3:
                raise ValueError(f"{path}:{number}: expected lemma, pos, glosses[, synonym_group]")
            lemma, pos, glosses = fields[:3]
            group = fields[3].strip() if len(fields) > 3 and fields[3].strip() else None
            entries[lemma] = LexiconEntry(lemma, pos, tuple(g.strip() for g in glosses.split(";") if g.strip()), group)
    return Lexicon(path, entries)


def find_lexicon(code: str, name: str) -> Path:
    for directory in os.environ.get("CHAMPOLLION_LEXICON_DIR", "").split(os.pathsep):
        if directory and (Path(directory) / name).is_file():
            return Path(directory) / name
    return HERE / code / "lexicon" / name
