"""Submissions tied to tokens (issue 26): who submitted each run
(`runs.submitted_by`, the token's name), a run held for a maintainer's review
(`runs.review`), and table `submissions`: every submission to a secret-tier
corpus, counted against its token's budget before it is scored, with a hash
of each entry's prediction to find near-duplicate probes.

Revision ID: 0004
Revises: 0002

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import Column, DateTime, Integer, Text

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: runs stored before this migration have no submitter on record
    # and were never held.
    op.add_column("runs", Column("submitted_by", Text, nullable=True))
    op.add_column("runs", Column("review", Text, nullable=True))
    op.create_index("idx_submitter", "runs", ["submitted_by", "corpus_version"])
    op.create_table(
        "submissions",
        Column("submission_id", Text, primary_key=True),
        Column("token", Text, nullable=False),
        Column("corpus_id", Text, nullable=False),
        Column("corpus_version", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("entries", Integer, nullable=False),
        Column("prediction_hashes", Text, nullable=False),
        Column("near_duplicate_of", Text, nullable=True),
        Column("changed_entries", Integer, nullable=True),
        Column("run_id", Text, nullable=True),
    )
    op.create_index("idx_submissions_token", "submissions", ["token", "corpus_version", "created_at"])


def downgrade() -> None:
    op.drop_index("idx_submissions_token", table_name="submissions")
    op.drop_table("submissions")
    op.drop_index("idx_submitter", table_name="runs")
    op.drop_column("runs", "review")
    op.drop_column("runs", "submitted_by")
