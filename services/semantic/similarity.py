"""The universal ``semantic_score`` (SPEC §2.3, decision revised in turn 4):
the specification's source-side cosine times a reference-side cosine,

    entry value = clip(cos(embed(src + " " + mt), embed(src + " " + ref)), 0, 1)
                x clip(cos(embed(mt), embed(ref)), 0, 1)

and the second factor alone where the encoder does not cover the source
language; corpus = mean of entries. Why the product: the source-side cosine
alone is dominated by the source text both sides share, so the source
copied scored 0.93 on WMT21 en-de and 0.935 on examples/eng-spa (real
systems 0.95-0.96) and one constant sentence 0.56-0.63. The reference-side
factor must agree too: the copied source then scores 0.72 (WMT21, real
systems 0.83-0.85), 0.66 (TED en-de MQM, real 0.76-0.77), 0.76 (eng-spa,
real 0.89), a constant sentence 0.04-0.07; WMT21's MT-only system Kendall
against MQM stays +0.714 (reference C, 8 systems) and TED's +0.410, as with
the source-side cosine alone (bench/degenerate.py, docs/scoring.md). A
LYSS-sem plugin's value, where a language has one, replaces it in the
gateway.
"""
from __future__ import annotations

import numpy as np

WITH_SOURCE = "clip(cos(emb(src+' '+mt),emb(src+' '+ref)),0,1)*clip(cos(emb(mt),emb(ref)),0,1)"
WITHOUT_SOURCE = "clip(cos(emb(mt),emb(ref)),0,1)"


def combination(use_source: bool) -> str:
    """What the signature says was computed."""
    return f"combine:{WITH_SOURCE}" if use_source else f"combine:{WITHOUT_SOURCE}|src:not-covered"


def _cosines(vectors: np.ndarray, count: int) -> np.ndarray:
    """Clipped cosines of rows i and count + i of unit `vectors`."""
    return np.clip(np.einsum("ij,ij->i", vectors[:count], vectors[count:2 * count]), 0.0, 1.0)


def semantic_scores(embedder, predictions: list[str], references: list[str],
                    sources: list[str] | None) -> list[float]:
    """Entry values; `sources` None where the encoder does not cover the
    source language. An empty prediction scores 0: with the source prepended
    it would otherwise look much like the reference. All texts are encoded
    in one call."""
    if not predictions:
        return []
    count = len(predictions)
    texts = [*predictions, *references]
    if sources is not None:
        texts += [f"{source} {prediction}" if prediction.strip() else "" for source, prediction
                  in zip(sources, predictions)]
        texts += [f"{source} {reference}" for source, reference in zip(sources, references)]
    vectors = embedder.encode(texts)
    values = _cosines(vectors, count)
    if sources is not None:
        values = values * _cosines(vectors[2 * count:], count)
    return [0.0 if not prediction.strip() else float(value) for prediction, value in zip(predictions, values)]
