"""What the store raises: one-line messages a CLI can print and a servicer
can turn into a gRPC status."""
from __future__ import annotations


class StoreError(Exception):
    """The store cannot be used: a corrupt URL, an unreachable database, a
    database newer than this code. The message never shows a password."""


class UnknownRun(LookupError):
    """No stored run has this id."""

    def __init__(self, run_id: str):
        super().__init__(f"no stored run with id {run_id!r}")
        self.run_id = run_id

    def __str__(self) -> str:  # LookupError would quote the whole message
        return self.args[0]


class InvalidQuery(ValueError):
    """A query the store cannot answer, e.g. an unknown sort column."""
