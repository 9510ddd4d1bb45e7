"""Limits on what one request may carry, shared by the gateway, the family
services and the client's own checks (so each refuses the same input with the
same words), and how an error message quotes a value it refuses."""
from __future__ import annotations

MAX_RESAMPLES = 100_000
# Limits on one input's size (README "Limits"), so that the work an entry
# costs every family, and the memory a run holds, stay bounded.
DEFAULT_MAX_TEXT_CHARS = 20_000  # a source, reference, variant, prediction (GatewayConfig.max_text_chars)
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
