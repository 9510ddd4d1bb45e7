"""Run cards written to their files as they arrive (`evaluate -o`): the
card's run-level members when the card comes, then its entries a part at a
time, then the members after them. The command so holds one part of a
run's entries at most, whatever the run's size, where the whole card as
dicts and then as JSON text took about 9 KiB an entry (900 MiB for 100,000).
A file is json_text's, byte for byte; it is written under a temporary name
beside its own and renamed once whole, so a run that fails leaves the file
as it was."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from apps.cli.common import (
    EXIT_FAILURE,
    EXIT_INVALID_INPUT,
    ITEM_SEPARATOR,
    LIST_CLOSING,
    LIST_OPENING,
    MEMBER_SEPARATOR,
    CliError,
    json_key,
    json_line,
    json_member,
)

ENTRIES = "entries"


class CardFile:
    """One run card's file, opened (under its temporary name) at once, so
    that a path that cannot be written is refused before anything is scored."""

    def __init__(self, path: Path, flag: str = "-o/--out"):
        self.path = path
        self._flag = flag
        self._part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            self._file = self._part.open("w", encoding="utf-8")
        except OSError as error:
            raise CliError(f"{flag}: cannot write {path}: {error.strerror}", EXIT_INVALID_INPUT) from None
        self.entries = 0
        self._opened = False
        self.done = False

    def _write(self, text: str | None) -> None:
        """Writes `text`, or with None closes the file (its last bytes written then)."""
        try:
            self._file.write(text) if text is not None else self._file.close()
        except OSError as error:  # a full disk, a quota
            raise CliError(f"{self._flag}: cannot write {self.path}: {error.strerror}", EXIT_FAILURE) from None

    def _open_entries(self, card: dict) -> None:
        if not self._opened:
            before = list(card)[:list(card).index(ENTRIES)]
            self._write("{\n" + "".join(json_member(key, card[key]) + MEMBER_SEPARATOR for key in before)
                        + json_key(ENTRIES))
            self._opened = True

    def add(self, card: dict, entries: list[dict]) -> None:
        """A part of the entries of `card` (the card without them)."""
        self._open_entries(card)
        lines = []
        for entry in entries:
            lines.append((ITEM_SEPARATOR if self.entries else LIST_OPENING) + json_line(entry))
            self.entries += 1
        self._write("".join(lines))

    def finish(self, card: dict) -> None:
        """The members after the entries; the file takes its name."""
        self._open_entries(card)
        after = list(card)[list(card).index(ENTRIES) + 1:]
        self._write((LIST_CLOSING if self.entries else "[]")
                    + "".join(MEMBER_SEPARATOR + json_member(key, card[key]) for key in after) + "\n}\n")
        self._write(None)
        os.replace(self._part, self.path)
        self.done = True

    def discard(self) -> None:
        """A run that failed: its part-written file goes."""
        if not self.done:
            with suppress(OSError):  # what it could not write is going anyway
                self._file.close()
            self._part.unlink(missing_ok=True)

    def read(self) -> dict:
        """The whole card, entries included (to compare it, or print it)."""
        return json.loads(self.path.read_text(encoding="utf-8"))

    def copy_to_stdout(self) -> None:
        """The file as write_json(card, None) prints the card, without loading it."""
        sys.stdout.flush()
        with self.path.open(encoding="utf-8") as source:
            shutil.copyfileobj(source, sys.stdout)


@contextmanager
def card_files(outs: list[str | None], read_again: bool) -> Iterator[list[CardFile | None]]:
    """Each system's CardFile: its -o file, else, when the command reads
    its entries again (`read_again`: comparisons of runs not stored,
    --entries), one in a temporary folder, else none (the entries go once
    counted). Whatever was not finished is removed on the way out."""
    folder = tempfile.TemporaryDirectory(prefix="champollion-cards-") if read_again and None in outs else None
    files: list[CardFile | None] = []
    try:
        for index, out in enumerate(outs):
            if out is not None:
                files.append(CardFile(Path(out)))
            elif folder is not None:
                files.append(CardFile(Path(folder.name) / f"run-{index}.json", "temporary run card"))
            else:
                files.append(None)
        yield files
    finally:
        for found in files:
            if found is not None:
                found.discard()
        if folder is not None:
            folder.cleanup()
