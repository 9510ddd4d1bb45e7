"""Schema migrations: Alembic configured in code (no alembic.ini), the
numbered scripts under migrations/versions, upgraded to the latest."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, text

from gateway.store.errors import StoreError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Named for the project, so a shared PostgreSQL database can hold other apps' Alembic tables.
VERSION_TABLE = "champollion_migrations"
# Arbitrary constant: PostgreSQL advisory lock taken while migrating, so two
# gateways starting on one empty database do not both create the tables.
MIGRATION_LOCK = 0x43686D70


def alembic_config(connection: Connection, script_location: Path = MIGRATIONS) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    return config


def current_revisions(connection: Connection) -> tuple[str, ...]:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_heads()


def upgrade_to_head(connection: Connection, script_location: Path = MIGRATIONS) -> None:
    """Applies the migrations the database lacks, in one transaction (the
    caller's); refuses a database migrated by newer code."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    config = alembic_config(connection, script_location)
    script = ScriptDirectory.from_config(config)
    for revision in current_revisions(connection):
        try:
            script.get_revision(revision)
        except CommandError:
            raise StoreError(
                f"the store is at migration {revision}, which this Champollion does not know "
                f"(its latest is {script.get_current_head()}): use a newer Champollion"
            ) from None
    command.upgrade(config, "head")
