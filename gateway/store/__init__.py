"""The run store (spec §11): run cards in SQLite (embedded default) or
PostgreSQL, §9.1's columns, numbered migrations, the leaderboard."""
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
from gateway.store.store import RunStore

__all__ = ["SORT_COLUMNS", "BudgetSpent", "CheckGateRefused", "CorpusConflict", "InvalidQuery", "NotHeld", "RunStore",
           "StoreError", "UnknownCampaign", "UnknownCorpus", "UnknownRun", "UnknownTask", "default_store_url"]
