"""What every input reader shares: the error type, UTF-8 decoding whose
errors say where in the file they are, and predictions with their lines."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from champollion.eval.v1 import gateway_pb2


class InputError(ValueError):
    """A file that cannot be read as the expected format; the message names
    the file, the line or entry, and the field."""


def check_text(text: str, where: str, path: str) -> None:
    """Refuses a lone surrogate (a \\ud800 escape in JSON): not Unicode text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(f"{where}: {path}: a lone surrogate {text[error.start]!r} at character {error.start} "
                         f"(not Unicode text)") from None


def decode_utf8(data: bytes, where: str, offset: int = 0) -> str:
    """UTF-8 (a leading byte-order mark dropped); an error names the byte
    offset in the file, `offset` being where `data` starts."""
    try:
        return data.decode("utf-8-sig" if offset == 0 else "utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: not UTF-8 text: byte offset {offset + error.start} "
                         f"({error.reason})") from None


def decode_utf8_lines(data: bytes, where: str) -> str:
    """The whole of `data` as UTF-8 text; an error names the line (1-based)
    and the byte offset of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(f"{where}:{line}: not UTF-8 text: byte offset {error.start} ({error.reason})") from None


@dataclass
class PredictionFile:
    path: Path
    predictions: list[gateway_pb2.Prediction] = field(default_factory=list)
    # Line number (1-based) of each prediction, by position.
    lines: list[int] = field(default_factory=list)
