"""Degenerate systems: outputs made without translating, to measure what a
metric gives a system that ignores its input (the floor; docs/scoring.md,
"The floor"). Every kind is deterministic: the same corpus gives the same
outputs.

From the corpus alone (FLOOR_KINDS, what the gateway scores for every
corpus version):
  constant          one sentence of the target language for every entry: the
                    reference whose length is the corpus's median
  other_reference   each entry answered with the next entry's reference
  source_copy       the source, untranslated
  half_reference    the first half of each reference's words
  empty             no output
From a real system's outputs as well (SYSTEM_KINDS, for meta-evaluation):
  shifted_outputs   each entry answered with the next entry's output
  half_outputs      the first half of each output's words
"""
from __future__ import annotations

from typing import Sequence

FLOOR_KINDS = ("constant", "other_reference", "source_copy", "half_reference", "empty")
SYSTEM_KINDS = ("shifted_outputs", "half_outputs")


def _first_half(text: str) -> str:
    words = text.split()
    return " ".join(words[:len(words) // 2]) if len(words) > 1 else ""


def _shifted(texts: Sequence[str]) -> list[str]:
    return [texts[(index + 1) % len(texts)] for index in range(len(texts))]


def constant_sentence(references: Sequence[str]) -> str:
    """The reference of median length (the first such in corpus order)."""
    by_length = sorted(range(len(references)), key=lambda index: (len(references[index]), index))
    return references[by_length[(len(by_length) - 1) // 2]]


def floor_outputs(kind: str, sources: Sequence[str], references: Sequence[str]) -> list[str]:
    """The outputs of the degenerate system `kind` (one of FLOOR_KINDS)."""
    if kind == "constant":
        return [constant_sentence(references)] * len(references) if references else []
    if kind == "other_reference":
        return _shifted(references)
    if kind == "source_copy":
        return list(sources)
    if kind == "half_reference":
        return [_first_half(reference) for reference in references]
    if kind == "empty":
        return [""] * len(references)
    raise ValueError(f"unknown floor kind {kind!r}; kinds: {', '.join(FLOOR_KINDS)}")


def system_outputs(kind: str, outputs: Sequence[str]) -> list[str]:
    """The outputs of the degenerate system `kind` (one of SYSTEM_KINDS)
    made from a real system's `outputs`."""
    if kind == "shifted_outputs":
        return _shifted(outputs)
    if kind == "half_outputs":
        return [_first_half(output) for output in outputs]
    raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(SYSTEM_KINDS)}")
