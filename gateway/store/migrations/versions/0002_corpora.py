"""Registered corpora (seed 001 §5, §8.1): tables `corpora`, `corpus_entries`
and `corpus_tiers`, and the secrecy tier of a run's corpus on `runs`.

Revision ID: 0002
Revises: 0001

Frozen as 0001 is: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import JSON, Column, DateTime, ForeignKeyConstraint, Integer, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# A JSON document: jsonb on PostgreSQL, JSON text on SQLite (as 0001's).
JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


def _of_corpus_version(name: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["corpus_id", "version"], ["corpora.corpus_id", "corpora.version"],
                                ondelete="CASCADE", name=name)


def upgrade() -> None:
    op.create_table(
        "corpora",
        Column("corpus_id", Text, primary_key=True),
        Column("version", Text, primary_key=True),
        Column("number", Integer, nullable=False),
        Column("source_lang", Text, nullable=False),
        Column("target_lang", Text, nullable=False),
        Column("entries", Integer, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        UniqueConstraint("corpus_id", "number", name="uq_corpora_number"),
    )
    op.create_table(
        "corpus_entries",
        Column("corpus_id", Text, primary_key=True),
        Column("version", Text, primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("entry_id", Text, nullable=False),
        Column("fingerprint", Text, nullable=False),
        Column("entry", JSON_DOCUMENT, nullable=False),
        _of_corpus_version("fk_corpus_entries_corpus"),
    )
    op.create_table(
        "corpus_tiers",
        Column("corpus_id", Text, primary_key=True),
        Column("version", Text, primary_key=True),
        Column("step", Integer, primary_key=True),
        Column("tier", Text, nullable=False),
        Column("since", DateTime(timezone=True), nullable=False),
        _of_corpus_version("fk_corpus_tiers_corpus"),
    )
    op.create_index("idx_corpus_entry_id", "corpus_entries", ["corpus_id", "version", "entry_id"], unique=True)
    op.create_index("idx_corpus_entry_fingerprint", "corpus_entries", ["fingerprint"])
    # SQLite adds a nullable column in place; existing runs keep NULL (scored
    # against a corpus sent with the run, so never official).
    op.add_column("runs", Column("corpus_tier", Text, nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "corpus_tier")
    op.drop_table("corpus_tiers")
    op.drop_table("corpus_entries")
    op.drop_table("corpora")
