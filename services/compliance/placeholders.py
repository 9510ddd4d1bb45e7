"""Finding the placeholders of a UI string: the parts a translation must carry
over untouched.

Recognised: ``{name}`` (also ``{}``, ``{0}``, ``{name:fmt}``), ``{{var}}``,
printf ``%s`` / ``%d`` / ``%1$s``, Python ``%(name)s`` and ICU MessageFormat
arguments ``{count, plural, one {# file} other {# files}}``. An ICU argument is
one placeholder, ``{count, plural}``; the texts of its branches are translatable
and are scanned again for the placeholders nested in them.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

RECOGNISED_SYNTAXES = ("brace", "icu", "printf")

DOUBLE_BRACE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
# What may stand between single braces: a field name with an optional format
# spec. Anything else ("{see note}") is prose that happens to use braces.
BRACE_FIELD = re.compile(r"\s*([\w.\[\]-]*)\s*([:!][^{}]*)?")
ICU_HEAD = re.compile(r"\s*([^\s,{}]+)\s*,\s*(\w+)\s*(?:,|$)")
PYTHON_NAMED = re.compile(r"%\(\w+\)[-+#0 ]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]")
# No space flag: "50% de descuento" is prose, not "% d".
PRINTF = re.compile(r"%(?:\d+\$)?[-+#0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp@]")


@dataclass
class PlaceholderScan:
    """Placeholders of one text, as a multiset of normalised tokens, and the
    text with placeholder syntax blanked out (translatable text kept in place)."""
    tokens: Counter = field(default_factory=Counter)
    masked: str = ""
    # (token, start, end) of each placeholder, in text order: where an invented one stands.
    located: list[tuple[str, int, int]] = field(default_factory=list)


def _closing_brace(text: str, opening: int, end: int) -> int | None:
    depth = 0
    for index in range(opening, end):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _icu_branches(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(inner start, inner end) of each top-level ``{...}`` between start and end."""
    branches, index = [], start
    while index < end:
        if text[index] == "{":
            closing = _closing_brace(text, index, end)
            if closing is None:
                break
            branches.append((index + 1, closing))
            index = closing + 1
        else:
            index += 1
    return branches


def _scan(text: str, start: int, end: int, tokens: Counter, syntax: list[tuple[int, int]],
          located: list[tuple[str, int, int]]) -> None:
    def found(token: str, token_start: int, token_end: int) -> None:
        tokens[token] += 1
        located.append((token, token_start, token_end))

    index = start
    while index < end:
        char = text[index]
        if char == "{":
            double = DOUBLE_BRACE.match(text, index, end)
            if double:
                found("{{" + " ".join(double.group(1).split()) + "}}", *double.span())
                syntax.append(double.span())
                index = double.end()
                continue
            closing = _closing_brace(text, index, end)
            if closing is not None:
                inner = text[index + 1:closing]
                simple = BRACE_FIELD.fullmatch(inner)
                if simple:
                    found("{" + simple.group(1) + (simple.group(2) or "").strip() + "}", index, closing + 1)
                    syntax.append((index, closing + 1))
                    index = closing + 1
                    continue
                icu = ICU_HEAD.match(inner)
                if icu:
                    found("{" + icu.group(1) + ", " + icu.group(2) + "}", index, closing + 1)
                    _scan_icu_branches(text, index + 1 + icu.end(), closing, tokens, syntax, located)
                    syntax.append((index, index + 1 + icu.end()))
                    index = closing + 1
                    continue
        elif char == "%":
            if text.startswith("%%", index):  # an escaped percent sign
                index += 2
                continue
            match = PYTHON_NAMED.match(text, index, end) or PRINTF.match(text, index, end)
            if match:
                found(match.group(), *match.span())
                syntax.append(match.span())
                index = match.end()
                continue
        index += 1


def _scan_icu_branches(text: str, start: int, closing: int, tokens: Counter, syntax: list, located: list) -> None:
    """Branch texts stay translatable; branch keywords (one, other, =0) and
    braces are syntax. A placeholder nested in several branches counts once:
    adding a plural category (few, many) must not look like an invention."""
    nested: Counter = Counter()
    previous_end = start
    for inner_start, inner_end in _icu_branches(text, start, closing):
        syntax.append((previous_end, inner_start))
        _scan(text, inner_start, inner_end, nested, syntax, located)
        previous_end = inner_end
    syntax.append((previous_end, closing + 1))
    tokens.update(set(nested))


def scan_placeholders(text: str) -> PlaceholderScan:
    tokens: Counter = Counter()
    syntax: list[tuple[int, int]] = []
    located: list[tuple[str, int, int]] = []
    _scan(text, 0, len(text), tokens, syntax, located)
    chars = list(text)
    for span_start, span_end in syntax:
        chars[span_start:span_end] = " " * (span_end - span_start)
    return PlaceholderScan(tokens=tokens, masked="".join(chars), located=located)


@dataclass
class IntegrityResult:
    score: float
    missing: Counter
    invented: Counter


def variable_integrity(source: Counter, output: Counter) -> IntegrityResult:
    """|source ∩ output| / |source ∪ output| over placeholder multisets; 1.0
    when neither has any. One dropped placeholder out of one scores 0."""
    union = sum((source | output).values())
    score = 1.0 if union == 0 else sum((source & output).values()) / union
    return IntegrityResult(score=score, missing=source - output, invented=output - source)
