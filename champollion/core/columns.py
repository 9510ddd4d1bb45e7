"""Spec §9.1: the run-card fields denormalised into columns of table `runs`,
under the spec's column names and types. This list is the spec's and is
frozen: migration 0001 creates exactly these columns; a column added later
comes with its own numbered migration and goes into tables.py."""
from __future__ import annotations

from dataclasses import dataclass

REAL = "real"
TEXT = "text"


@dataclass(frozen=True)
class SpecColumn:
    name: str
    # Where the value sits in the run card, key by key.
    path: tuple[str, ...]
    kind: str

    def value(self, card: dict):
        node = card
        for key in self.path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node


SPEC_COLUMNS: tuple[SpecColumn, ...] = (
    SpecColumn("composite_score", ("scores", "composite"), REAL),
    SpecColumn("quality_tier", ("scores", "quality_tier"), TEXT),
    SpecColumn("chrf_plus_plus", ("scores", "chrf_plus_plus"), REAL),
    SpecColumn("exact_match_rate", ("scores", "exact_match_rate"), REAL),
    SpecColumn("fst_acceptance_rate", ("scores", "fst_acceptance_rate"), REAL),
    SpecColumn("corpus_bleu", ("scores", "bleu"), REAL),
    SpecColumn("comet_score", ("scores", "comet_score"), REAL),
    SpecColumn("total_cost_usd", ("totals", "total_cost_usd"), REAL),
    SpecColumn("cost_per_entry_usd", ("totals", "cost_per_entry_usd"), REAL),
    SpecColumn("cost_per_source_char", ("totals", "cost_per_source_char"), REAL),
    SpecColumn("avg_latency_seconds", ("scores", "avg_latency_seconds"), REAL),
    SpecColumn("model_slug", ("model_slug",), TEXT),
    SpecColumn("condition", ("condition",), TEXT),
    SpecColumn("dataset_id", ("dataset", "id"), TEXT),
    SpecColumn("language_pair", ("dataset", "language_pair"), TEXT),
    SpecColumn("fingerprint_hash", ("fingerprint", "hash"), TEXT),
    SpecColumn("equivalent_match_rate", ("scores", "equivalent_match_rate"), REAL),
    SpecColumn("semantic_score", ("scores", "semantic_score"), REAL),
    SpecColumn("ter", ("scores", "ter"), REAL),
    SpecColumn("length_ratio", ("scores", "length_ratio"), REAL),
    SpecColumn("code_switching_rate", ("scores", "code_switching_rate"), REAL),
    SpecColumn("hallucination_rate", ("scores", "hallucination_rate"), REAL),
    SpecColumn("terminology_adherence", ("scores", "terminology_adherence"), REAL),
    SpecColumn("tokens_per_second", ("scores", "tokens_per_second"), REAL),
    SpecColumn("entries_per_minute", ("scores", "entries_per_minute"), REAL),
    SpecColumn("elapsed_seconds", ("elapsed_seconds",), REAL),
)

# §1.5: any numeric column ranks; §6.3: cost_adjusted is the secondary ranking.
SORT_COLUMNS: tuple[str, ...] = tuple(c.name for c in SPEC_COLUMNS if c.kind == REAL) + ("cost_adjusted",)
