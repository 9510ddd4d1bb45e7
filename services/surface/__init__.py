"""Surface family: exact/equivalent match, chrF++, BLEU, TER, length ratio (SPEC §2.1)."""
