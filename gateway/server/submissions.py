"""Submissions to a holdout or gold corpus (issue 26; seed 001 §8.2): the
scores a submitter gets back answer questions about the private
references, so each answer is spent from a budget and watched.

- A budget per token and corpus version (GatewayConfig
  `submission_budget` runs per `submission_window_hours`), counted when the
  run is admitted, before anything is scored; past it, RESOURCE_EXHAUSTED
  saying when a place frees.
- Near-duplicates: a submission whose predictions differ from an earlier
  one on the version in only a few entries (or none), whichever token sent
  that one (issue 33: a second token is no disguise), probes the references
  entry by entry: it is held for a maintainer's review, as a run whose
  prompt or meta contains an entry is.
- Nothing reveals a hold (issue 33): every submission of a non-maintainer
  to a secret tier is stored held ("pending"), with the reasons when the
  checks found something and a line saying nothing was found otherwise,
  and stays off every leaderboard until a maintainer clears (publishes) or
  disqualifies it (ReviewRun); the submitter's answer, listing and board
  are the same whether the checks found something or not.

Who is budgeted is gateway/server/access.py's rule; the counting is the
store's (gateway/store/submissions.py).
"""
from __future__ import annotations

import hashlib
from datetime import timedelta

import structlog

from champollion.core.text import fold_for_comparison
from champollion.core.limits import shown
from gateway.server.access import check_maintainer
from gateway.server.callers import Caller
from gateway.server.config import GatewayConfig
from gateway.server.refusals import Exhausted, InvalidRequest
from gateway.server.registered import RegisteredRun, in_store
from gateway.store import BudgetSpent, RunStore
from gateway.store.submissions import DECISIONS, HASH_CHARS, HELD, Admitted, Budget

log = structlog.get_logger()
# What an entry without a text prediction (an error) hashes as.
_NO_TEXT = "\x00error"


def budget_of(config: GatewayConfig) -> Budget:
    return Budget(limit=config.submission_budget, window=timedelta(hours=config.submission_window_hours),
                  near_entries=config.near_duplicate_entries, near_share=config.near_duplicate_share)


def prediction_digests(run: RegisteredRun) -> str:
    """A hash of each entry's prediction in corpus order, HASH_CHARS hex
    digits each. The prediction is folded first (case, punctuation,
    whitespace, invisible characters): re-punctuating the entries a probe
    does not ask about does not hide it."""
    digests = []
    for entry_id in run.ids:
        prediction = run.predictions[entry_id][1]
        text = fold_for_comparison(prediction.prediction) if prediction.HasField("prediction") else _NO_TEXT
        digests.append(hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS])
    return "".join(digests)


async def admit(run: RegisteredRun, caller: Caller, config: GatewayConfig) -> Admitted:
    """Counts the run against the caller's budget for the corpus version;
    refusals.Exhausted when it is spent."""
    corpus, budget = run.corpus, budget_of(config)
    digests = prediction_digests(run)
    try:
        admitted = await in_store(run.store, lambda store: store.admit_submission(
            caller.name, corpus["id"], corpus["version"], digests, budget))
    except BudgetSpent as spent:
        log.info("submission_refused", family="gateway", token=caller.name, corpus_id=corpus["id"],
                 corpus_number=corpus["number"], submissions=spent.count, limit=spent.limit)
        raise Exhausted(
            f"submission budget spent: token {caller.name!r} has made {spent.count} submissions to corpus "
            f"{corpus['id']!r} version {corpus['number']} in the last {_hours(budget.window)} (at most "
            f"{spent.limit}); the next is accepted from {spent.resets_at.isoformat(timespec='seconds')}") from None
    log.info("submission_admitted", family="gateway", token=caller.name, corpus_id=corpus["id"],
             corpus_number=corpus["number"], submission=admitted.used, limit=admitted.limit,
             near_duplicate_of=admitted.near_duplicate_of, changed_entries=admitted.changed_entries)
    return admitted


def _hours(window: timedelta) -> str:
    hours = window.total_seconds() / 3600
    return f"{hours:g} h"


# The reason a submission is held when the checks found nothing: it waits
# for publication as every other one does, so that a hold tells nothing.
PENDING_REASON = ("pending: nothing found; held for publication as every submission to a holdout or gold "
                  "corpus is (a maintainer clears it onto the public board)")


def hold_for_review(card: dict, admitted: Admitted | None, total: int) -> None:
    """Marks a secret-tier run's card held for review: every submission
    counted against a budget (`admitted`: a non-maintainer's), and any run
    whose contamination check found an entry. The reasons (stored card
    only) say what was found: contamination, a near-duplicate of an earlier
    run (naming its token: the same or another), or nothing."""
    integrity = card.setdefault("integrity", {"disqualified": False})
    reasons = []
    if integrity.get("disqualified"):
        count = integrity.get("contaminated_entry_count") or len(integrity.get("contaminated_entries") or [])
        reasons.append(f"contamination: {count} entr{'y' if count == 1 else 'ies'} found in the run's own texts "
                       f"(integrity.reasons and contaminated_entries say which and where)")
    if admitted is not None and admitted.near_duplicate_of is not None:
        reasons.append(f"probing: its predictions differ from those of {_earlier(admitted.near_duplicate_of)} "
                       f"({_whose(admitted.near_duplicate_token)}, same corpus version) in "
                       f"{admitted.changed_entries} of {total} entries")
    if admitted is not None and not reasons:
        reasons.append(PENDING_REASON)
    if reasons:
        integrity.update(review=HELD, review_reasons=reasons)


def _whose(other_token: str | None) -> str:
    return "same token" if other_token is None else f"sent by token {other_token!r}"


def _earlier(reference: str) -> str:
    return reference if reference.startswith("submission ") else f"run {reference}"


def review_held_run(store: RunStore, caller: Caller, run_id: str, decision: str, note: str) -> dict:
    """ReviewRun: a maintainer's decision (store.submissions.DECISIONS) on a
    held run; refusals.InvalidRequest for another decision, the store's
    NotHeld for a run not held (blocking: the servicer runs it in a worker
    thread)."""
    check_maintainer(caller, "ReviewRun")
    if decision not in DECISIONS:
        raise InvalidRequest(f"decision: must be one of {', '.join(DECISIONS)}, got {shown(decision)}")
    run = store.review_run(run_id, decision, note, caller.name)
    log.info("run_reviewed", family="gateway", run_id=run_id, decision=decision, token=caller.name)
    return run
