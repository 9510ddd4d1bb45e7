"""The numbered migrations stand alone: upgraded from an empty database (SQLite
and a real PostgreSQL server) they give exactly the tables of
gateway/store/tables.py, and no migration imports the live package, so a later
edit of tables.py can neither change what an old migration creates nor drift
from the migrated schema unnoticed."""
from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from gateway.store import tables
from gateway.store.location import open_engine, parse_store_url
from gateway.store.migrate import MIGRATIONS, VERSION_TABLE, upgrade_to_head

REPO = Path(__file__).resolve().parent.parent
# The project's own top-level packages (gateway, champollion, services, ...):
# nothing a migration may import.
LIVE_PACKAGES = frozenset(p.name for p in REPO.iterdir() if (p / "__init__.py").is_file())


def schema_differences(connection: sa.Connection, metadata: sa.MetaData) -> list:
    """Alembic's autogenerate diff between the database and `metadata`, with
    types and server defaults compared; the version table is Alembic's own,
    not one of the store's tables."""
    context = MigrationContext.configure(connection, opts={
        "compare_type": True, "compare_server_default": True, "version_table": VERSION_TABLE})
    return compare_metadata(context, metadata)


def migrated(store_url: str) -> sa.Engine:
    engine = open_engine(parse_store_url(store_url))
    with engine.begin() as connection:
        upgrade_to_head(connection)
    return engine


def copy_of(metadata: sa.MetaData) -> sa.MetaData:
    """The tables (columns, indexes, constraints) in a new MetaData, to alter
    without touching the live one."""
    copied = sa.MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(copied)
    return copied


def test_an_empty_database_migrated_to_head_is_exactly_tables_py(store_url):
    engine = migrated(store_url)
    try:
        with engine.connect() as connection:
            assert schema_differences(connection, tables.metadata) == []
    finally:
        engine.dispose()


def test_the_comparison_sees_a_type_an_index_and_a_foreign_key_that_drift(store_url):
    # The empty diff above means something only if the comparison would see
    # a drift of each kind the migrations declare.
    drifted = copy_of(tables.metadata)
    runs = drifted.tables["runs"]
    runs.c.composite_score.type = sa.Text()
    runs.indexes.remove(next(i for i in runs.indexes if i.name == "idx_model"))
    entries = drifted.tables["corpus_entries"]
    entries.constraints.remove(next(c for c in entries.constraints if c.name == "fk_corpus_entries_corpus"))
    engine = migrated(store_url)
    try:
        with engine.connect() as connection:
            found = schema_differences(connection, drifted)
    finally:
        engine.dispose()
    flat = [change for diff in found for change in (diff if isinstance(diff, list) else [diff])]
    kinds = sorted(change[0] for change in flat)
    assert kinds == ["modify_type", "remove_fk", "remove_index"], found
    assert next(c for c in flat if c[0] == "modify_type")[2:4] == ("runs", "composite_score")


def test_postgresql_tells_json_from_jsonb(postgres_cluster):
    # The documents are jsonb on PostgreSQL: a migration that declared plain
    # JSON there (its own JSON_DOCUMENT without the variant) would be caught.
    drifted = copy_of(tables.metadata)
    drifted.tables["runs"].c.run_card.type = sa.JSON()
    engine = migrated(postgres_cluster.create_database(f"jsonb_{uuid.uuid4().hex[:8]}"))
    try:
        with engine.connect() as connection:
            found = schema_differences(connection, drifted)
    finally:
        engine.dispose()
    assert [(d[0][0], d[0][2], d[0][3]) for d in found] == [("modify_type", "runs", "run_card")], found


def migration_files() -> list[Path]:
    return sorted((MIGRATIONS / "versions").glob("*.py")) + [MIGRATIONS / "env.py"]


def live_imports(path: Path) -> list[str]:
    """What the file imports from the project itself: absolute imports of its
    packages, relative imports (the migrations folder sits inside
    gateway.store), and importlib / __import__ calls, which could reach it
    by a computed name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names
                      if alias.name.split(".")[0] in LIVE_PACKAGES | {"importlib"}]
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] in LIVE_PACKAGES:
                found.append("." * node.level + (node.module or ""))
            elif node.module == "importlib":
                found.append("importlib")
        elif isinstance(node, ast.Name) and node.id in {"__import__", "importlib"}:
            found.append(node.id)
    return found


def test_no_migration_imports_the_live_package():
    files = migration_files()
    assert {"0001_runs.py", "0002_corpora.py", "env.py"} <= {p.name for p in files}
    assert {"gateway", "champollion", "services"} <= LIVE_PACKAGES
    assert {path.name: live_imports(path) for path in files if live_imports(path)} == {}


@pytest.mark.parametrize("source, expected", [
    ("from gateway.store.tables import JSON_DOCUMENT", ["gateway.store.tables"]),
    ("import gateway.store.columns as columns", ["gateway.store.columns"]),
    ("from ..tables import runs", ["..tables"]),
    ("from champollion import cli", ["champollion"]),
    ("import importlib\nimportlib.import_module('services.x')", ["importlib", "importlib"]),
    ("import sqlalchemy as sa\nfrom alembic import op\nfrom sqlalchemy.dialects.postgresql import JSONB", []),
])
def test_the_import_check_catches_live_imports(tmp_path, source, expected):
    path = tmp_path / "0099_example.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert live_imports(path) == expected
