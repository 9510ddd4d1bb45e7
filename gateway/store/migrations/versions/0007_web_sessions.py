"""Web sessions (issue 33, finding 8): the web front's signed-in sessions
kept in the store, so that signing out ends a session on every replica that
shares the store, and a token removed from the tokens file ends its sessions
for good (restoring the line revives none of them). One row per signed-in
session, keyed by the SHA-256 of its random id (the cookie carries the id,
signed); `ended_at` set: signed out, or its token left the file.

Revision ID: 0007
Revises: 0006

Frozen as 0001 and 0002 are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import Column, DateTime, Text

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        Column("session_sha256", Text, primary_key=True),
        Column("token_sha256", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("expires_at", DateTime(timezone=True), nullable=False),
        Column("ended_at", DateTime(timezone=True), nullable=True),
        Column("ended_why", Text, nullable=True),
    )
    op.create_index("idx_web_sessions_token", "web_sessions", ["token_sha256"])
    op.create_index("idx_web_sessions_expires", "web_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("idx_web_sessions_expires", table_name="web_sessions")
    op.drop_index("idx_web_sessions_token", table_name="web_sessions")
    op.drop_table("web_sessions")
