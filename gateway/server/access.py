"""Who may see and do what with runs, beyond which RPC a role may call
(gateway/server/auth.py `RPC_ROLES`): the one place for these rules
(issue 26, seed 001 §5.2, §8). The servicer asks; nothing else decides.

- Reading a stored run (GetRun, a stored side of Compare): a gold corpus's
  runs are for maintainers; a holdout run is read at corpus level by anyone
  else (`stored_view`).
- Compare, for a non-maintainer, where a stored side is a holdout or gold
  run: both sides stored runs (never an uploaded card), both the caller's
  own, and the seed and sample count the gateway's.
- Evaluating on a holdout or gold corpus: the answer is corpus level
  (`answer_view`); a non-maintainer leaves the bootstrap's seed and
  resamples to the gateway and spends its token's budget
  (`budget_applies`).
- Listing runs (ListRuns, Leaderboard): gold corpora's runs are for
  maintainers; who submitted a run and its review state too.
"""
from __future__ import annotations

from dataclasses import dataclass

import grpc
import structlog

from champollion.core.tiers import SECRET_TIERS, is_secret
from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.compare import DEFAULT_SAMPLES
from gateway.card.redaction import corpus_level
from gateway.server.auth import MAINTAINER, MAINTAINER_TIERS, Caller, allows, may_use_tier

log = structlog.get_logger()

# What a listing shows maintainers only: who submitted a run, whether it is
# held for review (a held run's absence from the board is the maintainers' to read).
MAINTAINER_COLUMNS = ("submitted_by", "review")


class Refused(Exception):
    """A rule of this module refuses the call: `code` is its gRPC status."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.PERMISSION_DENIED):
        super().__init__(message)
        self.code = code


def is_maintainer(caller: Caller) -> bool:
    return allows(caller.role, MAINTAINER)


def _refused(caller: Caller, message: str) -> Refused:
    log.info("permission_denied", family="gateway", rpc=caller.rpc, token=caller.name, role=caller.role,
             reason=message.partition(":")[0])
    return Refused(message)


def _token(caller: Caller) -> str:
    return f"token {caller.name!r} has the {caller.role} role"


# --- stored runs ----------------------------------------------------------------

def check_read(caller: Caller, tier: str | None, what: str) -> None:
    """Refused unless `caller` may read a stored run of a corpus of `tier`
    (gold: maintainers only)."""
    if not may_use_tier(caller.role, tier):
        raise _refused(caller, f"{what} on a {tier} corpus: needs the maintainer role; {_token(caller)}")


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: a stored run (its id, its corpus's tier,
    who submitted it) or a card sent with the call (run_id empty)."""
    name: str  # baseline or system
    run_id: str = ""
    tier: str | None = None
    submitted_by: str | None = None

    @property
    def stored(self) -> bool:
        return bool(self.run_id)

    @property
    def secret(self) -> bool:
        return self.stored and self.tier in SECRET_TIERS


def check_compare(caller: Caller, sides: list[CompareSide], method: str, seed: int | None, samples: int) -> None:
    """Refused unless `caller` may compare `sides` with these settings (seed
    None and samples 0: the gateway's). A stored run of a secret tier is
    compared by a non-maintainer only with another of its own stored runs,
    with the gateway's seed and sample count: otherwise per-entry
    statistics of the private references would leak one resample, one
    chosen baseline, at a time."""
    for side in sides:
        if side.stored:
            check_read(caller, side.tier, f"Compare of {side.name} run {side.run_id!r}")
    secret = [side for side in sides if side.secret]
    if not secret or is_maintainer(caller):
        return
    tier = secret[0].tier
    uploaded = [side for side in sides if not side.stored]
    if uploaded:
        raise _refused(caller, f"Compare: the {uploaded[0].name} is an uploaded run card and run "
                               f"{secret[0].run_id!r} is on a {tier} corpus: there a submitter compares two of its "
                               f"own stored runs, named by id")
    foreign = [side for side in secret if caller.name is None or side.submitted_by != caller.name]
    if foreign:
        raise _refused(caller, f"Compare: run {foreign[0].run_id!r} on a {tier} corpus was not submitted with "
                               f"token {caller.name!r}; there a submitter compares only its own runs")
    fixed = DEFAULT_SAMPLES[method]
    if (seed is not None and seed != DEFAULT_SEED) or samples not in (0, fixed):
        raise _refused(caller, f"Compare on a {tier} corpus: the seed and sample count are the gateway's "
                               f"(seed {DEFAULT_SEED}, {fixed} {'resamples' if method == 'bs' else 'trials'}); "
                               f"leave --seed and --resamples unset")


# --- evaluating on a registered corpus -------------------------------------------

def budget_applies(caller: Caller, tier: str | None) -> bool:
    """Whether a run on a corpus of `tier` spends the caller's budget (and
    is watched for probing): a non-maintainer's run on a secret tier."""
    return tier in SECRET_TIERS and not is_maintainer(caller)


def check_sampling(caller: Caller, tier: str | None, seed: int | None, resamples: int) -> None:
    """A non-maintainer's run on a secret tier leaves the bootstrap to the
    gateway: one chosen seed with a single resample would turn each
    interval into a sum over a subset of entries the caller picks."""
    if not budget_applies(caller, tier):
        return
    if (seed is not None and seed != DEFAULT_SEED) or resamples not in (0, DEFAULT_RESAMPLES):
        raise Refused(f"options.seed / options.bootstrap_resamples: on a {tier} corpus the bootstrap is the "
                      f"gateway's (seed {DEFAULT_SEED}, {DEFAULT_RESAMPLES} resamples); leave --seed and "
                      f"--resamples unset", grpc.StatusCode.INVALID_ARGUMENT)


# --- listings ------------------------------------------------------------------

def hidden_tiers(caller: Caller) -> tuple[str, ...]:
    """Tiers whose runs a listing leaves out for `caller` (gold, for a submitter)."""
    return () if is_maintainer(caller) else MAINTAINER_TIERS


def check_listing(caller: Caller, registered_tier: str | None, dataset_id: str, what: str) -> None:
    """Refused when `caller` lists the runs of a registered corpus whose
    latest version is of a tier it may not read (gold: maintainers)."""
    if not may_use_tier(caller.role, registered_tier):
        raise _refused(caller, f"{what} of corpus {dataset_id!r} ({registered_tier}): needs the maintainer role; "
                               f"{_token(caller)}")


def listed_row(caller: Caller, row: dict) -> dict:
    """A listing's row as `caller` sees it: without the maintainers' columns
    for anyone else."""
    if is_maintainer(caller):
        return row
    return {key: value for key, value in row.items() if key not in MAINTAINER_COLUMNS}


# --- run cards -----------------------------------------------------------------

@dataclass(frozen=True)
class CardView:
    """What a caller is sent of a run card: `card`, and whether its
    per-entry results go with it."""
    card: dict
    entries: bool


def _view(card: dict, full: bool) -> CardView:
    if is_secret(card) and not full:
        return CardView(corpus_level(card), entries=False)
    return CardView(card, entries=True)


def answer_view(card: dict) -> CardView:
    """The answer to an evaluation: corpus level for a secret corpus,
    whoever asked (it goes back to the method's platform; maintainers read
    the whole stored card with GetRun)."""
    return _view(card, full=False)


def stored_view(card: dict, role: str) -> CardView:
    """A stored run read back (GetRun): whole for maintainers, corpus level
    for anyone else when the corpus is secret."""
    return _view(card, full=allows(role, MAINTAINER))
