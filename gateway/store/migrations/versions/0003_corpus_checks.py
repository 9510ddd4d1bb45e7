"""The corpus check kept with each registered version (`corpora.check_summary`)
and the check failures a maintainer accepted when moving a version into a
tier (`corpus_tiers.accepted_reason`, `accepted_failures`, `accepted_by`).

Revision ID: 0003
Revises: 0002

Frozen as 0001 is: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import JSON, Column, Text
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# A JSON document: jsonb on PostgreSQL, JSON text on SQLite (as 0001's).
JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    # Nullable: versions registered before this migration were never checked.
    op.add_column("corpora", Column("check_summary", JSON_DOCUMENT, nullable=True))
    op.add_column("corpus_tiers", Column("accepted_reason", Text, nullable=True))
    op.add_column("corpus_tiers", Column("accepted_failures", JSON_DOCUMENT, nullable=True))
    op.add_column("corpus_tiers", Column("accepted_by", Text, nullable=True))


def downgrade() -> None:
    op.drop_column("corpus_tiers", "accepted_by")
    op.drop_column("corpus_tiers", "accepted_failures")
    op.drop_column("corpus_tiers", "accepted_reason")
    op.drop_column("corpora", "check_summary")
