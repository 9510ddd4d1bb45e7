"""Behavioral family: code-switching, hallucination, terminology adherence,
consistency and number fidelity (SPEC §2.4 and the number-mismatch addition)."""
