"""Detached outputs: a prediction that has left its source, the hallucination
the specification finds "through multilingual embedding overlap" (SPEC §2.4).

The cross-lingual similarity of source and prediction (cosine of the
semantic family's sentence encoder) is set against what the entry's own
reference reaches with the same source: the output is detached when

    cos(source, prediction) < DETACHED_SHARE x cos(source, reference)

The reference calibrates the bar per entry, so per language pair and per
sentence (a short headline or a name list reaches less than a long
sentence); families see one batch, never the corpus, so the bar cannot come
from the corpus's distribution. A reference with no positive similarity to
its source sets no bar.

Measured on WMT21 English->German against reference C: the human
translations A and D fall below 0.6 x their reference's similarity on 0.1%
of segments, the 8 MT systems with MQM judgments on 0-0.1%, another
segment's translation (a detached output) on 99.7%.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DETACHED_SHARE = 0.5
RULE = f"cos(src,mt)<{DETACHED_SHARE}*cos(src,ref)"


@dataclass(frozen=True)
class Detachment:
    similarity: float            # cos(source, prediction)
    reference_similarity: float  # cos(source, reference)

    @property
    def detached(self) -> bool:
        return self.reference_similarity > 0 and self.similarity < DETACHED_SHARE * self.reference_similarity

    def explanation(self) -> str:
        return (f"similarity to the source {self.similarity:.2f}, below {DETACHED_SHARE} x the "
                f"reference's {self.reference_similarity:.2f}")


def detachments(embedder, sources: list[str], predictions: list[str], references: list[str]) -> list[Detachment]:
    """One Detachment per entry; `embedder.encode` gives unit vectors."""
    if not sources:
        return []
    count = len(sources)
    vectors = embedder.encode([*sources, *predictions, *references])
    source, prediction, reference = vectors[:count], vectors[count:2 * count], vectors[2 * count:]
    to_prediction = np.einsum("ij,ij->i", source, prediction)
    to_reference = np.einsum("ij,ij->i", source, reference)
    return [Detachment(float(p), float(r)) for p, r in zip(to_prediction, to_reference)]
