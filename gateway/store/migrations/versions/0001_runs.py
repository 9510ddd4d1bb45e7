"""Tables `runs` (spec §9.1) and `run_entries`.

Revision ID: 0001
Revises:
"""
from alembic import op
from sqlalchemy import REAL, Boolean, Column, DateTime, ForeignKey, Integer, Text

# Both are fixed: §9.1's columns by the spec, JSON_DOCUMENT by its definition.
from gateway.store.tables import JSON_DOCUMENT, spec_columns

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        Column("run_id", Text, primary_key=True),
        *spec_columns(),
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
