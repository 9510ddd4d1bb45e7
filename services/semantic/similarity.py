"""The universal ``semantic_score`` (SPEC §2.3, decision revised): the
specification's formula, the cosine of the source followed by the prediction
against the source followed by the reference,

    entry value = clip(cos(embed(src + " " + mt), embed(src + " " + ref)), 0, 1)

and clip(cos(embed(mt), embed(ref)), 0, 1) where the encoder does not cover
the source language; corpus = mean of entries. On WMT21 English->German
(reference C, the 8 MT systems with MQM judgments) it ranks the systems at
Kendall +0.714 against MQM, where the earlier mean(cos(mt, ref), cos(mt, src))
ranked them at +0.357. A LYSS-sem plugin's value, where a language has one,
replaces it in the gateway.
"""
from __future__ import annotations

import numpy as np

WITH_SOURCE = "clip(cos(emb(src+' '+mt),emb(src+' '+ref)),0,1)"
WITHOUT_SOURCE = "clip(cos(emb(mt),emb(ref)),0,1)"


def combination(use_source: bool) -> str:
    """What the signature says was computed."""
    return f"combine:{WITH_SOURCE}" if use_source else f"combine:{WITHOUT_SOURCE}|src:not-covered"


def semantic_scores(embedder, predictions: list[str], references: list[str],
                    sources: list[str] | None) -> list[float]:
    """Entry values; `sources` None where the encoder does not cover the
    source language. An empty prediction scores 0: with the source prepended
    it would otherwise look much like the reference."""
    if not predictions:
        return []
    if sources is not None:
        predictions = [f"{source} {prediction}" if prediction.strip() else "" for source, prediction
                       in zip(sources, predictions)]
        references = [f"{source} {reference}" for source, reference in zip(sources, references)]
    count = len(predictions)
    vectors = embedder.encode([*predictions, *references])
    values = np.clip(np.einsum("ij,ij->i", vectors[:count], vectors[count:]), 0.0, 1.0)
    return [0.0 if not prediction.strip() else float(value) for prediction, value in zip(predictions, values)]
