"""Which run-card keys each family owns. The gateway is the only component
that knows the run card's layout (SPEC §8)."""

FAMILY_SCORE_KEYS: dict[str, tuple[str, ...]] = {
    "surface": (
        "exact_match_rate", "exact_matches", "equivalent_match_rate", "equivalent_matches",
        "chrf_plus_plus", "bleu", "ter", "length_ratio",
    ),
    "structural": (
        "fst_acceptance_rate", "fst_accepted", "morphological_accuracy", "orthographic_accuracy",
    ),
    "semantic": ("semantic_score", "comet_score", "comet_model"),
    "behavioral": (
        "code_switching_rate", "hallucination_rate", "terminology_adherence",
        "consistency_score", "number_mismatch_rate",
    ),
    "compliance": ("compliance_index", "compliance_index_raw", "repair_effectiveness"),
}

FAMILIES = tuple(FAMILY_SCORE_KEYS)

# Count keys derived from a rate's summed numerator.
COUNT_OF_RATE = {
    "exact_matches": "exact_match_rate",
    "equivalent_matches": "equivalent_match_rate",
    "fst_accepted": "fst_acceptance_rate",
}
