"""Why a rule refuses a request, as plain exceptions: the rules below the
front doors (access.py, readings.py, registered.py, comparisons.py,
runs.py, admission.py, submissions.py) raise these, never a gRPC status
(those of pyproject.toml's "never import gRPC" contract import no gRPC at
all). Each front door turns them into its own answer in one table: the
gRPC servicer's status codes (gateway/server/statuses.py), the web front's
HTTP statuses (apps/web/rendering.py), by `kind_of`, which also sorts the
errors of the layers below (the store's, a field's check, a comparison's,
the review rules') into the same kinds. The message names the field or the
rule, as the caller reads it."""
from __future__ import annotations

from champollion.core.limits import InvalidField
from gateway.card.compare import CompareRefused
from gateway.review.errors import CampaignRefused, NotAReviewer, NotNow
from gateway.store.errors import (
    CampaignChanged,
    CheckGateRefused,
    CorpusConflict,
    InvalidQuery,
    NothingStored,
    NotHeld,
    StoreError,
    UnknownCampaign,
    UnknownCorpus,
    UnknownRun,
    UnknownTask,
)


class Refused(Exception):
    """A request a rule refuses; the subclass says which kind of refusal."""


class InvalidRequest(Refused):
    """The request itself is wrong: the message names the field."""


class Forbidden(Refused):
    """The caller's role or token may not do this."""


class NotFound(Refused):
    """A named corpus, run or campaign does not exist."""


class Precondition(Refused):
    """The request is well formed, but the state it acts on does not allow it."""


class Unavailable(Refused):
    """Something the request needs (the run store) is missing or failing."""


class Exhausted(Refused):
    """A limit is reached: a submission budget, the gateway's queue, open uploads."""


class TimedOut(Refused):
    """An upload went idle or ran past its deadline."""


class Failed(Refused):
    """A bug, not bad input: the request failed inside the gateway."""


class Aborted(Refused):
    """Another change won the race: the request may be sent again."""


class Conflict(Refused):
    """What the request would create exists already, differently."""


# The kinds of refusal, as the front doors' tables name them.
KINDS: tuple[type[Refused], ...] = (InvalidRequest, Forbidden, NotFound, Precondition, Conflict, Aborted, Exhausted,
                                    TimedOut, Unavailable, Failed)

# The errors of the layers below the rules, by kind: a field's check, the
# store's, a comparison's, a campaign's (first match wins: the store's
# specific errors before StoreError).
RAISED_BELOW: tuple[tuple[tuple[type[Exception], ...], type[Refused]], ...] = (
    ((InvalidField, InvalidQuery, CampaignRefused), InvalidRequest),
    ((NotAReviewer,), Forbidden),
    ((UnknownRun, UnknownCorpus, NothingStored, UnknownCampaign, UnknownTask), NotFound),
    ((CompareRefused, CheckGateRefused, NotHeld, NotNow), Precondition),
    ((CorpusConflict,), Conflict),
    ((CampaignChanged,), Aborted),
    ((StoreError,), Unavailable),
)
ANSWERED: tuple[type[Exception], ...] = (Refused, *(kind for kinds, _ in RAISED_BELOW for kind in kinds))


def kind_of(error: Exception) -> type[Refused] | None:
    """The kind of refusal `error` is (None: not a refusal, a bug)."""
    for kind in KINDS:
        if isinstance(error, kind):
            return kind
    for kinds, kind in RAISED_BELOW:
        if isinstance(error, kinds):
            return kind
    return None
