"""Limits on what one request may carry, shared by the gateway, the family
services and the client's own checks (so each refuses the same input with the
same words), how an error message quotes a value it refuses, and the checks
of a text and of an entry's references that the gateway and the families
both run (InvalidField names what they refuse)."""
from __future__ import annotations

MAX_RESAMPLES = 100_000
# Limits on one input's size (README "Limits"), so that the work an entry
# costs every family, and the memory a run holds, stay bounded.
# A source, reference, variant, prediction: GatewayConfig.max_text_chars, a family's `serve --max-text-chars`.
DEFAULT_MAX_TEXT_CHARS = 20_000
MAX_TOKEN_CHARS = 1_000  # a run of characters without whitespace, in any text
MAX_ID_CHARS = 256
MAX_LANGUAGE_CHARS = 32
# References per entry, the primary included: sacreBLEU-style multi-reference
# test sets have a handful; every one costs each family's BLEU, chrF++ and TER.
MAX_REFERENCES = 32
# Error messages echo a value sent at most this long: a 1 MB id must not
# make a 1 MB message (which gRPC would refuse to send).
ECHO_CHARS = 80


def shown(value) -> str:
    """`value` as an error message quotes it: its repr, cut to ECHO_CHARS."""
    text = repr(value)
    return text if len(text) <= ECHO_CHARS else f"{text[:ECHO_CHARS - 3]}..."


class InvalidField(ValueError):
    """One field of a request refused. `field` is a path such as
    ``predictions[6].latency_s``; `entry_id` the id concerned, if any."""

    def __init__(self, field: str, message: str, entry_id: str | None = None):
        self.field = field
        self.entry_id = entry_id
        self.message = message
        where = f"{field} (id {shown(entry_id)})" if entry_id else field
        super().__init__(f"{where}: {message}")


def check_text(text: str, field: str, entry_id: str | None, max_chars: int) -> None:
    """A text every family reads: at most `max_chars` characters, and no
    token (characters between whitespace) over MAX_TOKEN_CHARS."""
    if len(text) > max_chars:
        raise InvalidField(field, f"a text of {len(text)} characters (at most {max_chars})", entry_id)
    if len(text) <= MAX_TOKEN_CHARS:
        return  # no token of it can be longer: most texts, checked by the gateway and every family
    longest = max(map(len, text.split()), default=0)
    if longest > MAX_TOKEN_CHARS:
        raise InvalidField(field, f"a token of {longest} characters without whitespace (at most "
                                  f"{MAX_TOKEN_CHARS})", entry_id)


def check_reference_count(extra_references: int, field: str, entry_id: str | None) -> None:
    """An entry's references, the primary one and `extra_references` more:
    at most MAX_REFERENCES. `field` names the further references."""
    count = 1 + extra_references
    if count > MAX_REFERENCES:
        raise InvalidField(field, f"{count} references (at most {MAX_REFERENCES} per entry, the primary included)",
                           entry_id)
