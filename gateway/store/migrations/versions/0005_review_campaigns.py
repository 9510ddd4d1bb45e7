"""Community review (issue 28; scoring spec §1.6, §5; seed 001 §4.3): each
stored entry keeps the system's output (`run_entries.prediction`, so that
people can rate it later), and five tables hold review campaigns, each
reviewer's queue of tasks, the ratings, and the reviewers' flags on
references.

Revision ID: 0005
Revises: 0004

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import JSON, REAL, Boolean, Column, DateTime, ForeignKeyConstraint, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    # Nullable: entries stored before this migration have no output on record.
    op.add_column("run_entries", Column("prediction", Text, nullable=True))
    op.create_table(
        "review_campaigns",
        Column("campaign_id", Text, primary_key=True),
        Column("name", Text, nullable=False),
        Column("corpus_id", Text, nullable=False),
        Column("corpus_version", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("created_by", Text, nullable=True),
        Column("state", Text, nullable=False),
        Column("settings", JSON_DOCUMENT, nullable=False),
    )
    op.create_table(
        "review_tasks",
        Column("campaign_id", Text, primary_key=True),
        Column("reviewer", Text, primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("entry_id", Text, nullable=False),
        Column("kind", Text, nullable=False),
        Column("systems", JSON_DOCUMENT, nullable=False),
        Column("degraded", Text, nullable=True),
        Column("degraded_text", Text, nullable=True),
        Column("done_at", DateTime(timezone=True), nullable=True),
        ForeignKeyConstraint(["campaign_id"], ["review_campaigns.campaign_id"], ondelete="CASCADE",
                             name="fk_review_tasks_campaign"),
    )
    op.create_table(
        "review_ratings",
        Column("campaign_id", Text, primary_key=True),
        Column("reviewer", Text, primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("system", Text, primary_key=True),
        Column("score", REAL, nullable=False),
        Column("usable", Boolean, nullable=True),
        Column("spans", JSON_DOCUMENT, nullable=False),
        Column("rated_at", DateTime(timezone=True), nullable=False),
        ForeignKeyConstraint(["campaign_id", "reviewer", "position"],
                             ["review_tasks.campaign_id", "review_tasks.reviewer", "review_tasks.position"],
                             ondelete="CASCADE", name="fk_review_ratings_task"),
    )
    op.create_table(
        "reference_flags",
        Column("corpus_id", Text, primary_key=True),
        Column("corpus_version", Text, primary_key=True),
        Column("entry_id", Text, primary_key=True),
        Column("reviewer", Text, primary_key=True),
        Column("flag", Text, nullable=False),
        Column("note", Text, nullable=False),
        Column("campaign_id", Text, nullable=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("reference_flags")
    op.drop_table("review_ratings")
    op.drop_table("review_tasks")
    op.drop_table("review_campaigns")
    op.drop_column("run_entries", "prediction")
