"""The store's tables as the latest migration leaves them (SQLAlchemy Core),
what every query is written against. The numbered migrations under
migrations/versions create and change the real tables: a change here needs
a new migration, never an edit of an old one."""
from __future__ import annotations

from sqlalchemy import (
    JSON,
    REAL,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB

from gateway.store.columns import REAL as REAL_KIND
from gateway.store.columns import SPEC_COLUMNS

# jsonb on PostgreSQL (§9.1), JSON text on SQLite.
JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")

# Index name -> columns. The first four are §9.1's; idx_board finds a
# board's runs and its majority coverage from the index alone; the others
# serve the latest-version look-up and list_runs' newest-first order.
INDEXES: dict[str, tuple[str, ...]] = {
    "idx_composite": ("composite_score",),
    "idx_leaderboard": ("dataset_id", "chrf_plus_plus"),
    "idx_model": ("model_slug",),
    "idx_fingerprint": ("fingerprint_hash",),
    "idx_board": ("dataset_id", "corpus_version", "submission", "disqualified", "profile", "composite_metrics"),
    "idx_dataset_version": ("dataset_id", "corpus_version", "created_at"),
    "idx_dataset_created": ("dataset_id", "created_at"),
    "idx_created": ("created_at",),
}


def spec_columns() -> list[Column]:
    """§9.1's denormalised columns (frozen by the spec, so migration 0001
    uses this too)."""
    return [Column(c.name, REAL if c.kind == REAL_KIND else Text) for c in SPEC_COLUMNS]


metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", Text, primary_key=True),
    *spec_columns(),
    Column("corpus_version", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Composite coverage (§4.1): runs rank together only when both match.
    Column("profile", Text),
    Column("composite_metrics", Text, nullable=False),  # sorted metric ids, comma-separated
    Column("cost_adjusted", REAL),
    Column("disqualified", Boolean, nullable=False),
    # Place among the stored runs of its fingerprint, 1 = first: the
    # leaderboard shows first submissions (seed 001 §8.2).
    Column("submission", Integer, nullable=False),
    # The card without its entries: they are rows of run_entries.
    Column("run_card", JSON_DOCUMENT, nullable=False),
)

run_entries = Table(
    "run_entries", metadata,
    Column("run_id", Text, ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),  # corpus order
    Column("entry_id", Text, nullable=False),
    Column("difficulty", Integer),
    Column("error", Text),
    Column("scores", JSON_DOCUMENT, nullable=False),
    Column("stats", JSON_DOCUMENT, nullable=False),  # what compare's bootstrap resamples
)

for _name, _columns in INDEXES.items():
    Index(_name, *(runs.c[c] for c in _columns))
