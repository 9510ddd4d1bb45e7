"""Floor runs (docs/store-and-corpora.md, "Floor runs"): the degenerate
systems the gateway scores itself on every corpus version are stored as
runs with `runs.floor_kind` set (constant, other_reference, source_copy,
half_reference, empty; null for every other run), at most one of each kind
per dataset and corpus version (unique index `idx_floor`; null kinds never
collide).

Revision ID: 0006
Revises: 0005

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import Column, Text

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: runs stored before this migration are systems' runs.
    op.add_column("runs", Column("floor_kind", Text, nullable=True))
    op.create_index("idx_floor", "runs", ["dataset_id", "corpus_version", "floor_kind"], unique=True)


def downgrade() -> None:
    op.drop_index("idx_floor", table_name="runs")
    op.drop_column("runs", "floor_kind")
