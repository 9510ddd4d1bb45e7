"""Alembic's entry point: runs the migrations on the connection that
gateway/store/migrate.py hands over (no alembic.ini, no URL here)."""
from alembic import context

context.configure(
    connection=context.config.attributes["connection"],
    version_table=context.config.attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
