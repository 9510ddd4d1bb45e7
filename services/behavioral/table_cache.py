"""Tables built from installed data, kept in marshal files so that the next
process reads them instead of building them again.

Files live in the cache folder (champollion/core/cache_dir.py:
$CHAMPOLLION_CACHE_DIR, else $XDG_CACHE_HOME/champollion, else
~/.cache/champollion), in a folder named after what built them (the
spaCy and spacy-lookups-data versions, the Python version, whose marshal
format they are in, and TABLES_FORMAT): another version builds and keeps
its own. marshal
reads back data only, never code. A file that cannot be read is built
again; a cache directory that cannot be written is done without.
"""
from __future__ import annotations

import marshal
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Callable, TypeVar

from champollion.core.cache_dir import CACHE_ENV, cache_root

__all__ = ["CACHE_ENV", "TABLES_FORMAT", "cache_root", "cached", "table_folder"]

T = TypeVar("T")
# Part of the folder's name: raise it whenever the code building a table
# changes (services/behavioral/lexicons.py), so that no cache keeps the old.
TABLES_FORMAT = 1


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def table_folder() -> Path:
    python = f"py{sys.version_info[0]}.{sys.version_info[1]}-marshal{marshal.version}"
    return cache_root() / (f"tables{TABLES_FORMAT}-spacy{_version('spacy')}-lookups{_version('spacy-lookups-data')}"
                           f"-{python}")


def cached(name: str, build: Callable[[], T]) -> T:
    """The table `name` from its file, else build() kept there."""
    try:
        path = table_folder() / f"{name}.marshal"
    except RuntimeError:  # no home directory to find a cache under (a container's arbitrary user)
        return build()
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass
    table = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.")
    except OSError:  # not writable: done without
        return table
    try:
        # Written aside then renamed: a process reading meanwhile sees the whole file or none.
        with os.fdopen(descriptor, "wb") as handle:
            marshal.dump(table, handle)
            os.fchmod(handle.fileno(), 0o644)  # mkstemp's 0600 would keep other users of a shared cache out
        os.replace(aside, path)
    except (OSError, ValueError):  # a full disk, or a value marshal cannot write
        Path(aside).unlink(missing_ok=True)
    return table
