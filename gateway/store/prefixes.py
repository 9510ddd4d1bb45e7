"""Names given by their start, as git takes commits: a stored run's id, a
corpus version (a SHA-256) are found by any unique prefix of MIN_PREFIX or
more characters. One rule for ListRuns' ids, GetRun, Compare, Leaderboard
versions and registered corpora (corpora.py)."""
from __future__ import annotations

import re

from sqlalchemy import Connection, select, true

from gateway.store.errors import InvalidQuery

MIN_PREFIX = 6
# Matches an ambiguity message names.
SHOWN = 5
_HEX = re.compile("[0-9a-fA-F]+")


class AmbiguousPrefix(InvalidQuery):
    """A prefix that starts several names: the message lists them."""

    def __init__(self, what: str, prefix: str, matches: list[str]):
        listed = ", ".join(matches[:SHOWN]) + (", ..." if len(matches) > SHOWN else "")
        super().__init__(f"{what} {prefix!r} is ambiguous: it starts {listed}; give more characters")
        self.matches = matches


def by_prefix(connection: Connection, column, text: str, what: str, where=true()) -> str | None:
    """The one value of `column` (among the rows `where` selects) that is
    `text` or starts with it (hex compared in lower case, as ids and hashes
    are written); None when none does or `text` is shorter than MIN_PREFIX
    and no value is it. AmbiguousPrefix when several do."""
    exact = connection.scalar(select(column).where(where, column == text).limit(1))
    if exact is not None or len(text) < MIN_PREFIX:
        return exact
    prefix = text.lower() if _HEX.fullmatch(text) else text
    matches = connection.scalars(select(column).distinct().where(where, column.startswith(prefix, autoescape=True))
                                 .order_by(column).limit(SHOWN + 1)).all()
    if len(matches) > 1:
        raise AmbiguousPrefix(what, text, list(matches))
    return matches[0] if matches else None
