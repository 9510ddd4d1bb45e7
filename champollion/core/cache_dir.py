"""The folder where Champollion keeps what it can make again: word-list
tables (services/behavioral/table_cache.py) and, where $XDG_RUNTIME_DIR is
not set, the sockets of background stacks (apps/launch/background.py).

$CHAMPOLLION_CACHE_DIR, else $XDG_CACHE_HOME/champollion, else
~/.cache/champollion."""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CHAMPOLLION_CACHE_DIR"


def cache_root() -> Path:
    """The folder (it may not exist yet); RuntimeError without a home directory to find it under."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "champollion"
