"""Who may see and do what with runs, beyond which RPC a role may call
(gateway/server/auth.py `RPC_ROLES`): the one place for these rules
(issue 26, seed 001 §5.2, §8). The servicer asks; nothing else decides.
A refusal is a gateway/server/refusals.py error (Forbidden, InvalidRequest):
no transport here, each front door maps it to its own status.

- Reading a stored run (GetRun, a stored side of Compare): a gold corpus's
  runs are for maintainers; a holdout run is read at corpus level by anyone
  else (`stored_view`).
- Compare and ComparePairs, for a non-maintainer, where a stored side is a
  holdout or gold run: every side a stored run (never an uploaded card),
  each the caller's own, and the seed and sample count the gateway's.
- Evaluating on a holdout or gold corpus: the answer is corpus level
  (`answer_view`); a non-maintainer leaves the bootstrap's seed and
  resamples to the gateway and spends its token's budget
  (`budget_applies`).
- Listing runs (ListRuns, Leaderboard): gold corpora's runs are for
  maintainers; who submitted a run and its review state too.
- Nothing a non-maintainer is sent is a function of fewer than
  min_shown_entries() (k) entries of a secret-tier corpus: a card's groups,
  intervals and counts below k are null with a warning saying why
  (gateway/card/breakdowns.py `fewer_than_k_withheld`), a listing's row of
  a corpus of fewer than k entries has no scores (`listed_row`), and the
  corpus check's findings that read references or private metadata are
  the maintainers' (gateway/server/corpora.py `listed_info`).
"""
from __future__ import annotations

from dataclasses import dataclass

import structlog

from champollion.core.tiers import SECRET_TIERS, is_secret, tier_of
from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from champollion.core.columns import SPEC_COLUMNS
from champollion.core.corpus_rules import RULE
from gateway.card.breakdowns import OWN_SCORE_KEYS, fewer_than_k_withheld, min_shown_entries
from gateway.card.compare import DEFAULT_SAMPLES
from gateway.card.redaction import corpus_level, ladder_only
from gateway.server.board_ranks import RANK_FIELDS
from champollion.core.roles import MAINTAINER
from gateway.card.identity import with_public_version
from gateway.server.callers import MAINTAINER_TIERS, Caller, allows, current_caller, may_use_tier
from gateway.server.refusals import Forbidden, InvalidRequest
from gateway.store.corpora import KEYED_TIERS, shown_version

log = structlog.get_logger()

# What a listing shows maintainers only: who submitted a run, whether it is
# held for review (a held run's absence from the board is the maintainers' to read).
MAINTAINER_COLUMNS = ("submitted_by", "review")


def is_maintainer(caller: Caller) -> bool:
    return allows(caller.role, MAINTAINER)


def check_maintainer(caller: Caller, what: str) -> None:
    """Forbidden unless `caller` is a maintainer; the message names `what`."""
    if not is_maintainer(caller):
        raise _refused(caller, f"{what}: needs the maintainer role; {_token(caller)}")


def _refused(caller: Caller, message: str) -> Forbidden:
    log.info("permission_denied", family="gateway", rpc=caller.rpc, token=caller.name, role=caller.role,
             reason=message.partition(":")[0])
    return Forbidden(message)


def _token(caller: Caller) -> str:
    return f"token {caller.name!r} has the {caller.role} role"


# --- stored runs ----------------------------------------------------------------

def check_read(caller: Caller, tier: str | None, what: str) -> None:
    """Forbidden unless `caller` may read a stored run of a corpus of `tier`
    (gold: maintainers only)."""
    if not may_use_tier(caller.role, tier):
        raise _refused(caller, f"{what} on a {tier} corpus: needs the maintainer role; {_token(caller)}")


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: a stored run (its id, its corpus's tier,
    who submitted it) or a card sent with the call (run_id empty)."""
    name: str  # Compare: baseline or system; ComparePairs: #1, #2...
    run_id: str = ""
    tier: str | None = None
    submitted_by: str | None = None

    @property
    def stored(self) -> bool:
        return bool(self.run_id)

    @property
    def secret(self) -> bool:
        return self.stored and self.tier in SECRET_TIERS


def check_compare(caller: Caller, sides: list[CompareSide], method: str, seed: int | None, samples: int,
                  what: str = "Compare") -> None:
    """Forbidden unless `caller` may compare `sides` (two for Compare, any
    number for ComparePairs: `what` names the call in the refusal) with
    these settings (seed None and samples 0: the gateway's). A stored run
    of a secret tier is compared by a non-maintainer only with other stored
    runs of its own, with the gateway's seed and sample count: otherwise
    per-entry statistics of the private references would leak one
    resample, one chosen baseline, at a time."""
    for side in sides:
        if side.stored:
            check_read(caller, side.tier, f"{what} of {side.name} run {side.run_id!r}")
    secret = [side for side in sides if side.secret]
    if not secret or is_maintainer(caller):
        return
    tier = secret[0].tier
    uploaded = [side for side in sides if not side.stored]
    if uploaded:
        raise _refused(caller, f"{what}: the {uploaded[0].name} is an uploaded run card and run "
                               f"{secret[0].run_id!r} is on a {tier} corpus: there a submitter compares only "
                               f"stored runs of its own, named by id")
    foreign = [side for side in secret if caller.name is None or side.submitted_by != caller.name]
    if foreign:
        raise _refused(caller, f"{what}: run {foreign[0].run_id!r} on a {tier} corpus was not submitted with "
                               f"token {caller.name!r}; there a submitter compares only its own runs")
    fixed = DEFAULT_SAMPLES[method]
    if (seed is not None and seed != DEFAULT_SEED) or samples not in (0, fixed):
        raise _refused(caller, f"{what} on a {tier} corpus: the seed and sample count are the gateway's "
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
        raise InvalidRequest(f"options.seed / options.bootstrap_resamples: on a {tier} corpus the bootstrap is the "
                      f"gateway's (seed {DEFAULT_SEED}, {DEFAULT_RESAMPLES} resamples); leave --seed and "
                      f"--resamples unset")


# --- listings ------------------------------------------------------------------

def hidden_tiers(caller: Caller) -> tuple[str, ...]:
    """Tiers whose runs a listing leaves out for `caller` (gold, for a submitter)."""
    return () if is_maintainer(caller) else MAINTAINER_TIERS


def check_listing(caller: Caller, registered_tier: str | None, dataset_id: str, what: str) -> None:
    """Forbidden when `caller` lists the runs of a registered corpus whose
    latest version is of a tier it may not read (gold: maintainers)."""
    if not may_use_tier(caller.role, registered_tier):
        raise _refused(caller, f"{what} of corpus {dataset_id!r} ({registered_tier}): needs the maintainer role; "
                               f"{_token(caller)}")


# A listing's columns computed from the corpus's entries (the §9.1 columns read from
# `scores`, less the run's own timings, the cost-adjusted composite, and a board's
# intervals and rank ranges).
SCORE_COLUMNS = frozenset({column.name for column in SPEC_COLUMNS if column.path[0] == "scores"} - set(OWN_SCORE_KEYS)
                          | {"cost_adjusted", *RANK_FIELDS})


def listed_row(caller: Caller, row: dict, few_entries: bool = False) -> dict:
    """A listing's row as `caller` sees it: without the maintainers' columns
    for anyone else, and without scores (null, quality tier `unscored`) when
    `few_entries`: the run's corpus is secret and has fewer than k entries."""
    if is_maintainer(caller):
        return row
    shown = {key: value for key, value in row.items() if key not in MAINTAINER_COLUMNS}
    if few_entries:
        shown.update({key: None for key in SCORE_COLUMNS if key in shown and key != "quality_tier"})
        if "quality_tier" in shown:
            shown["quality_tier"] = "unscored"
    return shown


# --- registered corpora ----------------------------------------------------------

# The corpus check's rules that read only what GetSources gives anyone of a
# corpus (ids, sources, domains, difficulty tiers) and its size: their findings
# are listed to anyone who may list the corpus. Every other rule reads the
# references (untranslated, near-duplicates, dual references, variants) or the
# private metadata (provenance, licences, reviewers, phenomena): its finding,
# which names entry ids and counts of a few entries, is the maintainers'.
PUBLIC_RULES = frozenset({"size_minimum", "size_recommended", "labels", "domain_minimum", "tier_minimum",
                          "domain_recommended", "tier_recommended", "domain_mix", "tier_mix", "duplicates",
                          "power", "rotation"})
assert PUBLIC_RULES <= set(RULE), PUBLIC_RULES - set(RULE)
WITHHELD_FINDINGS = ("findings about the references and the corpus's private metadata withheld (maintainers "
                     "only: champollion corpus check ID)")


def _public_findings(lines: list[str]) -> list[str]:
    """`lines` ("rule: finding") less the findings of rules outside
    PUBLIC_RULES, which become one line saying so (when there were any)."""
    kept = [line for line in lines if line.partition(":")[0] in PUBLIC_RULES]
    return kept + ([WITHHELD_FINDINGS] if len(kept) < len(lines) else [])


def corpus_info_view(info: dict, maintainer: bool) -> dict:
    """A registered version's info (the store's corpus_info) as a caller
    is shown it (ListCorpora, GetSources, the web front's corpus pages):
    whole for maintainers and for a dev version; for anyone else, on a
    secret tier, its check and accepted failures without the findings of
    rules that read references or private metadata (issue 33: "1
    references equal their source (es-005)" gave a reference away, its
    source being public) and its version as its public id (shown_version)."""
    if maintainer or info.get("tier") not in SECRET_TIERS:
        return info
    shown = dict(info)
    # The keyed public id, never the content hash (issue 33: a guess checker).
    shown["version"] = shown_version(info)
    if info.get("check"):
        check = dict(info["check"])
        for key in ("failures", "advice", "gate_failures"):
            if key in check:
                check[key] = _public_findings(list(check[key] or []))
        shown["check"] = check
    shown["history"] = [{**span, "accepted_failures": _public_findings(list(span["accepted_failures"]))}
                        if span.get("accepted_failures") else span for span in info.get("history") or []]
    return shown


def public_card(card: dict, corpus: dict, role: str) -> dict:
    """`card` (of a run on the registered version `corpus`, a corpus_info)
    as `role` may see its version: a maintainer the content hash the card
    keeps, anyone else on a holdout or gold corpus its public id
    (identity.with_public_version). The stored card is not changed: the
    content hash stays the run's internal identity."""
    if allows(role, MAINTAINER) or corpus["tier"] not in KEYED_TIERS:
        return card
    return with_public_version(card, shown_version(corpus))


# --- run cards -----------------------------------------------------------------

@dataclass(frozen=True)
class CardView:
    """What a caller is sent of a run card: `card`, and whether its
    per-entry results go with it."""
    card: dict
    entries: bool


def _view(card: dict, full: bool, maintainer: bool) -> CardView:
    if is_secret(card) and not full:
        level = corpus_level(card)
        if not maintainer:
            # Only the Ladder's release (issue 33); fewer_than_k_withheld keeps what is left (sizes) honest.
            level = ladder_only(fewer_than_k_withheld(level, tier_of(card), min_shown_entries()))
        return CardView(level, entries=False)
    return CardView(card, entries=True)


def answer_view(card: dict, role: str | None = None) -> CardView:
    """The answer to an evaluation: corpus level for a secret corpus,
    whoever asked (it goes back to the method's platform; maintainers read
    the whole stored card with GetRun), and for anyone but a maintainer
    without any value of fewer than k entries. `role`: the caller's
    (default: the current call's; outside a call the least role)."""
    role = current_caller().role if role is None else role
    return _view(card, full=False, maintainer=allows(role, MAINTAINER))


def stored_view(card: dict, role: str) -> CardView:
    """A stored run read back (GetRun): whole for maintainers, corpus level
    and without any value of fewer than k entries for anyone else when the
    corpus is secret."""
    maintainer = allows(role, MAINTAINER)
    return _view(card, full=maintainer, maintainer=maintainer)
