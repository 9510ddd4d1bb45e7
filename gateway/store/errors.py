"""What the store raises: one-line messages a CLI can print and a servicer
can turn into a gRPC status."""
from __future__ import annotations


class StoreError(Exception):
    """The store cannot be used: a corrupt URL, an unreachable database, a
    database newer than this code. The message never shows a password."""


class UnknownRun(LookupError):
    """No stored run has this id (or starts with it)."""

    def __init__(self, run_id: str, hint: str = ""):
        super().__init__(f"no stored run with id {run_id!r}{hint}")
        self.run_id = run_id

    def __str__(self) -> str:  # LookupError would quote the whole message
        return self.args[0]


class InvalidQuery(ValueError):
    """A query the store cannot answer, e.g. an unknown sort column."""


class UnknownCorpus(LookupError):
    """No registered corpus has this id (or this version of it)."""

    def __init__(self, corpus_id: str, version: str | None = None):
        what = f"corpus {corpus_id!r}" if version is None else f"corpus {corpus_id!r} version {version!r}"
        super().__init__(f"no registered {what}")
        self.corpus_id = corpus_id
        self.version = version

    def __str__(self) -> str:
        return self.args[0]


class CorpusConflict(ValueError):
    """A corpus id registered again with other content (seed 001 §8.1): the
    message names the id, its registered versions and what differs."""


class BudgetSpent(Exception):
    """A token has used its submissions to a corpus version for the current
    window: `count` made, `limit` allowed, the next accepted from `resets_at`
    (an aware datetime). The gateway words the refusal."""

    def __init__(self, count: int, limit: int, resets_at):
        super().__init__(f"{count} submissions of {limit} allowed; the next from {resets_at.isoformat()}")
        self.count = count
        self.limit = limit
        self.resets_at = resets_at


class NotHeld(ValueError):
    """A review decision for a run that is not held for review."""


class CheckGateRefused(ValueError):
    """A version would enter holdout or gold although the corpus check's gate
    fails and no reason was given: the message (the caller's) names every
    failure."""


class NothingStored(LookupError):
    """A dataset, or a version of it, that no stored run is on: the message
    names it and lists what is stored."""

    def __str__(self) -> str:
        return self.args[0]


class UnknownCampaign(LookupError):
    """No review campaign has this id."""

    def __init__(self, campaign_id: str):
        super().__init__(f"no review campaign with id {campaign_id!r}")

    def __str__(self) -> str:
        return self.args[0]


class UnknownTask(LookupError):
    """A reviewer asked for a task that is not in its queue."""

    def __init__(self, campaign_id: str, reviewer: str, position: int):
        super().__init__(f"campaign {campaign_id!r} has no task {position} for reviewer {reviewer!r}")

    def __str__(self) -> str:
        return self.args[0]


class CampaignChanged(Exception):
    """A campaign changed by someone else between reading it and growing it."""
