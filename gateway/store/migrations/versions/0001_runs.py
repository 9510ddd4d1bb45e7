"""Tables `runs` (spec §9.1) and `run_entries`.

Revision ID: 0001
Revises:

Frozen: every column is written out here, nothing is imported from the live
package (gateway.store.tables, gateway.store.columns), so a later edit there
cannot change what this migration creates on a new database.
"""
from alembic import op
from sqlalchemy import JSON, REAL, Boolean, Column, DateTime, ForeignKey, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# A JSON document: jsonb on PostgreSQL (§9.1), JSON text on SQLite.
JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "runs",
        Column("run_id", Text, primary_key=True),
        # §9.1's denormalised columns, in the spec's order, all nullable.
        Column("composite_score", REAL),
        Column("quality_tier", Text),
        Column("chrf_plus_plus", REAL),
        Column("exact_match_rate", REAL),
        Column("fst_acceptance_rate", REAL),
        Column("corpus_bleu", REAL),
        Column("comet_score", REAL),
        Column("total_cost_usd", REAL),
        Column("cost_per_entry_usd", REAL),
        Column("cost_per_source_char", REAL),
        Column("avg_latency_seconds", REAL),
        Column("model_slug", Text),
        Column("condition", Text),
        Column("dataset_id", Text),
        Column("language_pair", Text),
        Column("fingerprint_hash", Text),
        Column("equivalent_match_rate", REAL),
        Column("semantic_score", REAL),
        Column("ter", REAL),
        Column("length_ratio", REAL),
        Column("code_switching_rate", REAL),
        Column("hallucination_rate", REAL),
        Column("terminology_adherence", REAL),
        Column("tokens_per_second", REAL),
        Column("entries_per_minute", REAL),
        Column("elapsed_seconds", REAL),
        Column("corpus_version", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("profile", Text),
        Column("composite_metrics", Text, nullable=False),
        Column("cost_adjusted", REAL),
        Column("disqualified", Boolean, nullable=False),
        Column("submission", Integer, nullable=False),
        Column("run_card", JSON_DOCUMENT, nullable=False),
    )
    op.create_table(
        "run_entries",
        # Unnamed, as first released: PostgreSQL names it run_entries_run_id_fkey.
        Column("run_id", Text, ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("entry_id", Text, nullable=False),
        Column("difficulty", Integer),
        Column("error", Text),
        Column("scores", JSON_DOCUMENT, nullable=False),
        Column("stats", JSON_DOCUMENT, nullable=False),
    )
    op.create_index("idx_composite", "runs", ["composite_score"])
    op.create_index("idx_leaderboard", "runs", ["dataset_id", "chrf_plus_plus"])
    op.create_index("idx_model", "runs", ["model_slug"])
    op.create_index("idx_fingerprint", "runs", ["fingerprint_hash"])
    op.create_index("idx_board", "runs",
                    ["dataset_id", "corpus_version", "submission", "disqualified", "profile", "composite_metrics"])
    op.create_index("idx_dataset_version", "runs", ["dataset_id", "corpus_version", "created_at"])
    op.create_index("idx_dataset_created", "runs", ["dataset_id", "created_at"])
    op.create_index("idx_created", "runs", ["created_at"])


def downgrade() -> None:
    op.drop_table("run_entries")
    op.drop_table("runs")
