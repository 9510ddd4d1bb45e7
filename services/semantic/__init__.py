"""Semantic family: the universal semantic_score (sentence embeddings) and
COMET (SPEC §2.3), deployable on its own, on GPU nodes."""
