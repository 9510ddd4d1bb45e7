"""The run store (spec §11): run cards in SQLite (embedded default) or
PostgreSQL, §9.1's columns, numbered migrations, the leaderboard.

RunStore is imported when first asked for (its SQLAlchemy tables and
Alembic take a quarter of a second): a command that only names its store
(`champollion evaluate` on a background stack) does without."""
from champollion.core.columns import SORT_COLUMNS
from gateway.store.errors import (
    BudgetSpent,
    CheckGateRefused,
    CorpusConflict,
    InvalidQuery,
    NotHeld,
    StoreError,
    UnknownCampaign,
    UnknownCorpus,
    UnknownRun,
    UnknownTask,
)
from gateway.store.location import default_store_url

__all__ = ["SORT_COLUMNS", "BudgetSpent", "CheckGateRefused", "CorpusConflict", "InvalidQuery", "NotHeld", "RunStore",
           "StoreError", "UnknownCampaign", "UnknownCorpus", "UnknownRun", "UnknownTask", "default_store_url"]


def __getattr__(name: str):
    if name == "RunStore":
        from gateway.store.store import RunStore

        return RunStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
