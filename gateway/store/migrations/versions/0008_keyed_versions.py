"""Keyed public version ids (issue 33, finding 3): a secret-tier corpus
version is shown to non-maintainers under `corpora.public_version`, an
HMAC of its corpus id and content hash under a server-side key kept outside
the store, with `corpora.version_key_id` naming the key that derived it
(unique index `idx_corpora_public_version`; null ids never collide).

Both columns start null: this migration has no key (it never sees one).
The store fills them for every version the first time a process with a key
registers a corpus or changes a tier, or on `champollion db version-key
new|rotate --store URL`; until then a process with a key derives them as it
reads (gateway/store/corpora.py).

Revision ID: 0008
Revises: 0007

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import Column, Text

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("corpora", Column("public_version", Text, nullable=True))
    op.add_column("corpora", Column("version_key_id", Text, nullable=True))
    op.create_index("idx_corpora_public_version", "corpora", ["public_version"], unique=True)


def downgrade() -> None:
    op.drop_index("idx_corpora_public_version", table_name="corpora")
    op.drop_column("corpora", "version_key_id")
    op.drop_column("corpora", "public_version")
