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
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB

from champollion.core.columns import REAL as REAL_KIND
from champollion.core.columns import SPEC_COLUMNS

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
    "idx_submitter": ("submitted_by", "corpus_version"),
}


def spec_columns() -> list[Column]:
    """§9.1's denormalised columns (frozen by the spec; migration 0001
    writes them out itself)."""
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
    # Secrecy tier of the registered corpus the run was scored against, when
    # it was (migration 0002): only holdout and gold runs are official.
    Column("corpus_tier", Text),
    # The name of the token that submitted the run (migration 0004); null on
    # a gateway without --auth and for runs stored before.
    Column("submitted_by", Text),
    # A secret-tier run held for a maintainer's review (gateway/server/
    # submissions.py): "held" keeps it off the leaderboard until "cleared"
    # or "disqualified"; null when there was nothing to review.
    Column("review", Text),
    # A floor run (migration 0006): the degenerate system the gateway scored
    # itself on this corpus version (champollion/core/degenerate.py
    # FLOOR_KINDS); null for every other run.
    Column("floor_kind", Text),
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
    # The system's output (migration 0005), for community review; None for
    # entries stored before, and for an entry that failed without one.
    Column("prediction", Text),
)

for _name, _columns in INDEXES.items():
    Index(_name, *(runs.c[c] for c in _columns))
# One floor run of each kind per dataset and corpus version (null kinds never collide).
Index("idx_floor", runs.c.dataset_id, runs.c.corpus_version, runs.c.floor_kind, unique=True)

# Registered corpora (migration 0002, seed 001 §5, §8.1): every version kept
# under its content hash and its number per corpus id.
corpora = Table(
    "corpora", metadata,
    Column("corpus_id", Text, primary_key=True),
    Column("version", Text, primary_key=True),  # gateway/card/identity.py corpus_version
    Column("number", Integer, nullable=False),  # 1, 2, ... per corpus id, in registration order
    Column("source_lang", Text, nullable=False),
    Column("target_lang", Text, nullable=False),
    Column("entries", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # The corpus check when the version entered its tier (migration 0003):
    # gateway/corpus_check summary_of, no entry text. Null: never checked.
    Column("check_summary", JSON_DOCUMENT),
    # The version's public id (migration 0008): identity.keyed_version under
    # the version key (gateway/store/version_keys.py, never in the database),
    # and that key's id; null until a process with a key derived it.
    Column("public_version", Text),
    Column("version_key_id", Text),
    UniqueConstraint("corpus_id", "number", name="uq_corpora_number"),
)
Index("idx_corpora_public_version", corpora.c.public_version, unique=True)

corpus_entries = Table(
    "corpus_entries", metadata,
    Column("corpus_id", Text, primary_key=True),
    Column("version", Text, primary_key=True),
    Column("position", Integer, primary_key=True),  # registration order
    Column("entry_id", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),  # identity.entry_fingerprint
    # The whole entry: references, variants, morphology, terms. Never sent to a submitter.
    Column("entry", JSON_DOCUMENT, nullable=False),
    ForeignKeyConstraint(["corpus_id", "version"], ["corpora.corpus_id", "corpora.version"], ondelete="CASCADE",
                         name="fk_corpus_entries_corpus"),
)

# One row per tier a corpus version has had (rotation, seed 001 §5.3); the
# highest step is its tier now.
corpus_tiers = Table(
    "corpus_tiers", metadata,
    Column("corpus_id", Text, primary_key=True),
    Column("version", Text, primary_key=True),
    Column("step", Integer, primary_key=True),  # 0 at registration, then 1, 2, ...
    Column("tier", Text, nullable=False),
    Column("since", DateTime(timezone=True), nullable=False),
    # Set when a maintainer accepted the corpus check's gate failures to
    # enter this tier (migration 0003): why, which failures, whose token.
    Column("accepted_reason", Text),
    Column("accepted_failures", JSON_DOCUMENT),
    Column("accepted_by", Text),
    ForeignKeyConstraint(["corpus_id", "version"], ["corpora.corpus_id", "corpora.version"], ondelete="CASCADE",
                         name="fk_corpus_tiers_corpus"),
)

# Index name -> (table, columns) of the corpus tables: an entry by id within
# a version (unique), an entry found by its fingerprint in any corpus.
CORPUS_INDEXES: dict[str, tuple[Table, tuple[str, ...], bool]] = {
    "idx_corpus_entry_id": (corpus_entries, ("corpus_id", "version", "entry_id"), True),
    "idx_corpus_entry_fingerprint": (corpus_entries, ("fingerprint",), False),
}
for _name, (_table, _columns, _unique) in CORPUS_INDEXES.items():
    Index(_name, *(_table.c[c] for c in _columns), unique=_unique)

# Every submission to a secret-tier corpus (migration 0004): counted against
# its token's budget before the run is scored (gateway/store/submissions.py).
submissions = Table(
    "submissions", metadata,
    Column("submission_id", Text, primary_key=True),
    Column("token", Text, nullable=False),  # the token's name
    Column("corpus_id", Text, nullable=False),
    Column("corpus_version", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("entries", Integer, nullable=False),
    # A fixed-width hash of each entry's prediction, in corpus order
    # (submissions.HASH_CHARS hex digits each): near-duplicates are found by them.
    Column("prediction_hashes", Text, nullable=False),
    # The run of the same token and version whose predictions differ from
    # these in few entries (probing), and in how many.
    Column("near_duplicate_of", Text),
    Column("changed_entries", Integer),
    Column("run_id", Text),  # set once the run is stored
)
Index("idx_submissions_token", submissions.c.token, submissions.c.corpus_version, submissions.c.created_at)

# Community review (migration 0005; gateway/store/reviews.py): a campaign
# over stored runs of one registered corpus version, each reviewer's queue of
# tasks, a rating per task and system, and reviewers' flags on references.
review_campaigns = Table(
    "review_campaigns", metadata,
    Column("campaign_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("corpus_id", Text, nullable=False),
    Column("corpus_version", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("created_by", Text),  # the maintainer token's name
    Column("state", Text, nullable=False),  # open, closed
    # systems (run ids), reviewers, items, overlap, seed, reference_review, shares
    Column("settings", JSON_DOCUMENT, nullable=False),
)

review_tasks = Table(
    "review_tasks", metadata,
    Column("campaign_id", Text, primary_key=True),
    Column("reviewer", Text, primary_key=True),  # a token's name
    Column("position", Integer, primary_key=True),  # place in the reviewer's queue
    Column("entry_id", Text, nullable=False),
    Column("kind", Text, nullable=False),  # gateway/review/protocol.py TASK_KINDS
    Column("systems", JSON_DOCUMENT, nullable=False),  # run ids in the order shown
    Column("degraded", Text),  # a control task: the run whose output is shown degraded
    Column("degraded_text", Text),  # ... and what is shown instead
    Column("done_at", DateTime(timezone=True)),
    # Migration 0009: run id -> the families' suggested spans for that output
    # (null: shown without suggestions); a tutorial or attention item's
    # expected answer with its tolerances (null for every other task).
    Column("suggestions", JSON_DOCUMENT),
    Column("expected", JSON_DOCUMENT),
    ForeignKeyConstraint(["campaign_id"], ["review_campaigns.campaign_id"], ondelete="CASCADE",
                         name="fk_review_tasks_campaign"),
)

review_ratings = Table(
    "review_ratings", metadata,
    Column("campaign_id", Text, primary_key=True),
    Column("reviewer", Text, primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("system", Text, primary_key=True),  # run id
    Column("score", REAL, nullable=False),  # direct assessment, 0-100
    Column("usable", Boolean),  # usable as a draft with human review? None: not answered
    Column("spans", JSON_DOCUMENT, nullable=False),  # ESA error spans: [{start, end, severity}]
    Column("rated_at", DateTime(timezone=True), nullable=False),
    # Migration 0009: when the item was opened (null before), and the
    # decision on each suggested span, with its detector's name.
    Column("started_at", DateTime(timezone=True)),
    Column("decisions", JSON_DOCUMENT),
    ForeignKeyConstraint(["campaign_id", "reviewer", "position"],
                         ["review_tasks.campaign_id", "review_tasks.reviewer", "review_tasks.position"],
                         ondelete="CASCADE", name="fk_review_ratings_task"),
)

# Every change to a campaign after its creation (migration 0009): reviewers
# added, items extended, state changed; who, when, what.
review_audit = Table(
    "review_audit", metadata,
    Column("audit_id", Integer, primary_key=True, autoincrement=True),
    Column("campaign_id", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("by", Text),  # the token's name
    Column("action", Text, nullable=False),
    Column("details", JSON_DOCUMENT, nullable=False),
    ForeignKeyConstraint(["campaign_id"], ["review_campaigns.campaign_id"], ondelete="CASCADE",
                         name="fk_review_audit_campaign"),
)
Index("idx_review_audit_campaign", review_audit.c.campaign_id, review_audit.c.at)

reference_flags = Table(
    "reference_flags", metadata,
    Column("corpus_id", Text, primary_key=True),
    Column("corpus_version", Text, primary_key=True),
    Column("entry_id", Text, primary_key=True),
    Column("reviewer", Text, primary_key=True),  # one flag per reviewer and entry; flagged again: replaced
    Column("flag", Text, nullable=False),  # gateway/review/protocol.py REFERENCE_FLAGS
    Column("note", Text, nullable=False),
    Column("campaign_id", Text),  # the campaign it was flagged in
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# The web front's signed-in sessions (migration 0007; gateway/store/
# web_sessions.py): keyed by the SHA-256 of the session's random id, ended
# (signed out, or its token left the tokens file) for every replica at once.
web_sessions = Table(
    "web_sessions", metadata,
    Column("session_sha256", Text, primary_key=True),
    Column("token_sha256", Text, nullable=False),  # the signed-in token's hash, as in the tokens file
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True)),  # null: in force until expires_at
    Column("ended_why", Text),  # "signed out", "token removed from the tokens file", ...
)
Index("idx_web_sessions_token", web_sessions.c.token_sha256)
Index("idx_web_sessions_expires", web_sessions.c.expires_at)
