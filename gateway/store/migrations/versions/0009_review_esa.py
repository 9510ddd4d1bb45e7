"""Review at WMT's standard (issue 36): what an ESA, MQM or pre-filled
campaign keeps beyond a DA one.

- `review_tasks.suggestions`: the spans the metric families suggest for
  each shown output (run id -> list of suggestions, each naming its
  detector); null when the task is shown without suggestions.
- `review_tasks.expected`: the answer a tutorial or attention item checks
  (score and spans, with their tolerances); null for every other task.
- `review_ratings.started_at`: when the reviewer opened the item (its end
  is `rated_at`); null for ratings saved before.
- `review_ratings.decisions`: the reviewer's decision on each suggestion
  (accepted, edited, rejected), with the detector's name.
- `review_audit`: every change to a campaign after its creation (reviewers
  added, items extended, state changed): who, when, what.

Revision ID: 0009
Revises: 0008

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import JSON, Column, DateTime, ForeignKeyConstraint, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("review_tasks", Column("suggestions", JSON_DOCUMENT, nullable=True))
    op.add_column("review_tasks", Column("expected", JSON_DOCUMENT, nullable=True))
    op.add_column("review_ratings", Column("started_at", DateTime(timezone=True), nullable=True))
    op.add_column("review_ratings", Column("decisions", JSON_DOCUMENT, nullable=True))
    op.create_table(
        "review_audit",
        Column("audit_id", Integer, primary_key=True, autoincrement=True),
        Column("campaign_id", Text, nullable=False),
        Column("at", DateTime(timezone=True), nullable=False),
        Column("by", Text, nullable=True),
        Column("action", Text, nullable=False),
        Column("details", JSON_DOCUMENT, nullable=False),
        ForeignKeyConstraint(["campaign_id"], ["review_campaigns.campaign_id"], ondelete="CASCADE",
                             name="fk_review_audit_campaign"),
    )
    op.create_index("idx_review_audit_campaign", "review_audit", ["campaign_id", "at"])


def downgrade() -> None:
    op.drop_index("idx_review_audit_campaign", table_name="review_audit")
    op.drop_table("review_audit")
    op.drop_column("review_ratings", "decisions")
    op.drop_column("review_ratings", "started_at")
    op.drop_column("review_tasks", "expected")
    op.drop_column("review_tasks", "suggestions")
