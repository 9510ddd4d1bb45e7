"""A corpus as a table: a `.tsv` or `.csv` file whose header row names the
columns, one entry a row, mapped to the JSON corpus's fields.

Columns: `id`, `source`, `reference` (required); `reference_2`,
`reference_3`, ... (further references; an empty cell: none in that
column for the row); `acceptable_variants` and `phenomena` (a JSON list of
strings, or empty); `domain`; `difficulty` (an integer); `provenance` (the
source document). Any other column is refused, so a misspelt one is not
silently dropped. TSV cells are taken as they are (no quoting: a sentence may
begin with a quotation mark); CSV follows RFC 4180 quoting, so cells may
hold commas and line breaks. The dataset id is the file's name without its
suffix; the languages come from the caller (--source-lang, --target-lang)."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from champollion.eval.v1 import gateway_pb2
from apps.inputs.dataset_names import content_dataset_id
from apps.inputs.input_text import InputError, check_text, decode_utf8_lines

TABLE_SUFFIXES = (".tsv", ".csv")
REQUIRED_COLUMNS = ("id", "source", "reference")
TEXT_COLUMNS = ("domain", "provenance")
LIST_COLUMNS = ("acceptable_variants", "phenomena")
INTEGER_COLUMNS = ("difficulty",)
_EXTRA_REFERENCE = re.compile(r"reference_([2-9]|[1-9][0-9]+)")
_DIFFICULTY_RANGE = (-2**31, 2**31 - 1)  # the proto's int32


def _reader(text: str, suffix: str):
    if suffix == ".tsv":
        return csv.reader(_lines(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(_lines(text))


def _lines(text: str) -> list[str]:
    """Lines split at "\\n" only (str.splitlines would also split at U+2028
    and the like, inside a cell), each keeping its newline, as csv wants."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _header(row: list[str], where: str) -> list[str]:
    columns = [name.strip() for name in row]
    known = {*REQUIRED_COLUMNS, *TEXT_COLUMNS, *LIST_COLUMNS, *INTEGER_COLUMNS}
    for number, name in enumerate(columns, start=1):
        if name not in known and not _EXTRA_REFERENCE.fullmatch(name):
            raise InputError(f"{where}:1: column {number} {name!r}: unknown column; columns: "
                             f"{', '.join((*REQUIRED_COLUMNS, 'reference_2...', *TEXT_COLUMNS, *LIST_COLUMNS, *INTEGER_COLUMNS))}")
        if columns.count(name) > 1:
            raise InputError(f"{where}:1: column {number} {name!r}: named twice")
    for name in REQUIRED_COLUMNS:
        if name not in columns:
            raise InputError(f"{where}:1: no {name!r} column (the header row must name id, source and reference)")
    extra = sorted(int(_EXTRA_REFERENCE.fullmatch(name).group(1)) for name in columns
                   if _EXTRA_REFERENCE.fullmatch(name))
    if extra != list(range(2, 2 + len(extra))):
        raise InputError(f"{where}:1: reference columns must be numbered reference_2, reference_3, ... without "
                         f"gaps; found {', '.join(f'reference_{n}' for n in extra)}")
    return columns


def _string_list(cell: str, where: str) -> list[str]:
    if not cell.strip():
        return []
    try:
        value = json.loads(cell)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: must be a JSON list of strings, e.g. [\"a\", \"b\"] ({error.msg})") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{where}: must be a JSON list of strings, e.g. [\"a\", \"b\"]")
    for index, item in enumerate(value):
        check_text(item, where, f"[{index}]")
    return value


def _integer(cell: str, where: str) -> int | None:
    if not cell.strip():
        return None
    try:
        value = int(cell)
    except ValueError:
        raise InputError(f"{where}: must be an integer, got {cell[:80]!r}") from None
    if not _DIFFICULTY_RANGE[0] <= value <= _DIFFICULTY_RANGE[1]:
        raise InputError(f"{where}: {value} is outside the range of a 32-bit integer")
    return value


def _entry(cells: dict[str, str], where) -> gateway_pb2.CorpusEntry:
    """`where(column)`: the file, line and column of a cell, for errors."""
    extra_columns = sorted((name for name in cells if _EXTRA_REFERENCE.fullmatch(name)),
                           key=lambda name: int(name.split("_")[1]))
    entry = gateway_pb2.CorpusEntry(
        id=cells["id"], source=cells["source"], reference=cells["reference"],
        extra_references=[cells[name] for name in extra_columns if cells[name].strip()],
        domain=cells.get("domain", ""),
    )
    for name in LIST_COLUMNS:
        if name in cells:
            getattr(entry, name).extend(_string_list(cells[name], where(name)))
    if "difficulty" in cells:
        difficulty = _integer(cells["difficulty"], where("difficulty"))
        if difficulty is not None:
            entry.difficulty = difficulty
    if cells.get("provenance", "").strip():
        entry.provenance.update({"source_doc": cells["provenance"]})
    return entry


def load_table_corpus(path: Path, source_lang: str | None, target_lang: str | None) -> gateway_pb2.Corpus:
    """The corpus in a `.tsv` or `.csv` file; errors name the file, line
    and column."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    for name, value in (("source_lang", source_lang), ("target_lang", target_lang)):
        if not value:
            raise InputError(f"{path}: {name}: a {path.suffix} corpus does not name its languages; pass "
                             f"--{name.replace('_', '-')}")
    text = decode_utf8_lines(data, str(path))
    rows = _reader(text, path.suffix.lower())
    corpus = gateway_pb2.Corpus(source_lang=source_lang, target_lang=target_lang)
    columns = None
    try:
        for row in rows:
            line = rows.line_num
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            if columns is None:
                columns = _header(row, str(path))
                continue
            if len(row) != len(columns):
                raise InputError(f"{path}:{line}: {len(row)} cells, but the header row names {len(columns)} columns")
            cells = dict(zip(columns, row))

            def where(column: str, line=line, columns=columns) -> str:
                return f"{path}:{line}: column {columns.index(column) + 1} ({column})"

            for name in REQUIRED_COLUMNS:
                if not cells[name].strip():
                    raise InputError(f"{where(name)}: is empty")
            corpus.entries.append(_entry(cells, where))
    except csv.Error as error:
        raise InputError(f"{path}:{rows.line_num}: malformed {path.suffix[1:].upper()}: {error}") from None
    if columns is None:
        raise InputError(f"{path}: empty: no header row")
    corpus.id = content_dataset_id(path.stem, corpus)
    return corpus
