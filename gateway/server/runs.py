"""One run scored from request to stored card, whichever door it came by
(Evaluate, EvaluateStream, EvaluateUpload): the registered corpus it names,
the sampling rule and the budget of a non-maintainer on a secret tier
(counted one submission at a time), the hold for review, the Ladder's
release, the floor's tier rule and storage. The servicer hands it the
request's parts and answers what it returns; what it refuses is a
refusals.py error or an InvalidRun naming the field (the servicer's status
table says how each is answered)."""
from __future__ import annotations

import asyncio
import time
from typing import Callable

import structlog

from champollion.core.cards import CardRegistry
from champollion.core.degenerate import FLOOR_KINDS
from champollion.core.tiers import SECRET_TIERS
from gateway.card.floor import FLOOR_SLUG_PREFIX
from gateway.card.ladder import LADDER_METRIC
from gateway.server.access import budget_applies, check_sampling, is_maintainer
from gateway.server.admission import DeferredTurn
from gateway.server.callers import Caller, current_caller
from gateway.server.config import GatewayConfig
from gateway.server.evaluation import ScoredRun, evaluate
from gateway.server.fanout import FamilyClient
from gateway.server.floor import EntryKeeper, apply_tier_rule, client_floor, registered_floor
from gateway.server.intake import RunIntake
from gateway.server.readings import ladder_release
from gateway.server.refusals import Failed, Refused
from gateway.server.registered import refuse_registered_id, registered_run
from gateway.server.spill import RunSpill
from gateway.server.stored_runs import GatewayStore, record_run
from gateway.server.submissions import admit, hold_for_review
from gateway.server.validation import InvalidRun
from gateway.store import StoreError

log = structlog.get_logger()

# (target language) -> the family clients that serve it, and why each configured family without a route is left out.
ClientsFor = Callable[[str], tuple[dict[str, FamilyClient], dict[str, str]]]


class Runs:
    """Scores runs for one gateway: its configuration, language cards,
    store (None: runs are answered, not stored) and family clients."""

    def __init__(self, config: GatewayConfig, cards: CardRegistry, store: GatewayStore | None,
                 clients_for: ClientsFor):
        self.config = config
        self.cards = cards
        self.store = store
        self.clients_for = clients_for
        # Budgets are counted one submission at a time (the store's advisory
        # lock covers several gateways on one PostgreSQL database).
        self._admitting = asyncio.Lock()

    @property
    def floor_wanted(self) -> bool:
        return self.config.floor_runs and self.store is not None

    async def score(self, first_part, later_parts, spill: RunSpill, on_progress=None, floors: list | None = None,
                    turn: DeferredTurn | None = None) -> ScoredRun:
        """Validates, scores and stores a run. Raises InvalidRun naming the
        field and entry on bad input, a refusals.py error when a rule
        refuses it, refusals.Failed on a bug. A non-maintainer's run on a
        secret tier is counted against its token's budget once its header
        and predictions are known good, before anything is scored. The
        floor its version lacks, if any, is put in `floors` for the caller
        to schedule once the run is answered. An upload's `turn` is taken
        when scoring starts: its first batch ready or, on a registered
        corpus, its predictions all in (before the budget is counted); a run
        sent whole holds its turn already."""
        started = time.perf_counter()
        caller = current_caller()
        registered = admitted = keeper = None
        try:
            if first_part.meta.model_slug.startswith(FLOOR_SLUG_PREFIX):
                raise InvalidRun("meta.model_slug", f"{first_part.meta.model_slug!r}: model slugs starting with "
                                                    f"{FLOOR_SLUG_PREFIX!r} name the gateway's own floor runs")
            # A run on a registered corpus: the stored entries with the client's predictions.
            registered = await registered_run(first_part, later_parts, self.store, caller.role, self.cards)
            if registered is not None:
                first_part, later_parts = registered.header, registered.parts()
            else:
                await refuse_registered_id(first_part, self.store, caller.role)
                if self.floor_wanted:
                    # The entries, kept for the version's floor (built from them once the run is answered).
                    keeper = EntryKeeper(first_part)
                    later_parts = keeper.parts(later_parts)
            intake = RunIntake(first_part, self.cards, spill, self.config.max_text_chars,
                               before_batches=turn.take if turn is not None else None)
            if registered is not None:
                options = first_part.options
                check_sampling(caller, registered.tier, options.seed if options.HasField("seed") else None,
                               options.bootstrap_resamples)
                if turn is not None:  # the upload is in: scoring starts
                    await turn.take()
                if budget_applies(caller, registered.tier):
                    async with self._admitting:
                        admitted = await admit(registered, caller, self.config)
            clients, unrouted = self.clients_for(intake.run.target.card.code)
            scored = await evaluate(intake, later_parts, self.config, clients, unrouted, spill, on_progress,
                                    expected_entries=registered.corpus["entries"] if registered else 0)
        except (InvalidRun, Refused):
            raise
        except Exception as error:  # a bug, not bad input: say so, keep serving
            log.exception("evaluate_failed", family="gateway")
            raise Failed(f"evaluation failed: {type(error).__name__}: {error}") from error
        if registered is not None:
            registered.label(scored.card)
            if registered.tier in SECRET_TIERS:
                hold_for_review(scored.card, admitted, scored.card["scores"]["total"])
                if not is_maintainer(caller) and self.store is not None:
                    # What the caller's answer and reads of this run show in place of its scores.
                    scored.card["ladder"] = await self._ladder_release(scored, caller)
        floor_kinds = await self._floor_rule(scored.card)
        # Stored before the card is sent, so that it can say how many stored
        # runs share its fingerprint.
        await record_run(self.store, scored, caller.name, admitted.submission_id if admitted else None)
        if registered is not None:  # the answer names a secret version by its public id (issue 33)
            scored.card = registered.public_card(scored.card, caller.role)
        if floors is not None and self.floor_wanted and floor_kinds is not None and len(floor_kinds) < len(FLOOR_KINDS):
            floors.append(registered_floor(registered.corpus) if registered is not None
                          else client_floor(scored.card, first_part, keeper) if keeper is not None else None)
        log.info(
            "evaluate",
            run_id=scored.card["run_id"],
            family="gateway",
            token=caller.name,
            entries=scored.card["scores"]["total"],
            duration_s=round(time.perf_counter() - started, 4),
            spill_bytes=spill.size_bytes(),
        )
        return scored

    async def _ladder_release(self, scored: ScoredRun, caller: Caller) -> dict | None:
        """The Ladder's release for a run on a secret tier (readings.ladder_release)."""
        card = scored.card
        matrix = scored.stats.get(LADDER_METRIC)
        if matrix is None:
            return None
        rows = [(entry_id, {LADDER_METRIC: statistics}) for entry_id, statistics in zip(scored.entry_ids(), matrix)]
        try:
            return await self.store.call(lambda store: ladder_release(
                store, caller, card["dataset"]["id"], card["dataset"]["version"], card["run_id"], rows))
        except StoreError:
            return None

    async def _floor_rule(self, card: dict) -> set[str] | None:
        """The tier rule against the version's floor runs (gateway/card/floor.py);
        returns the floor kinds stored on the version (None: no store, or it failed)."""
        if self.store is None:
            return None
        dataset = card["dataset"]
        try:
            floor_runs = await self.store.call(lambda store: store.floor_runs(dataset["id"], dataset["version"]))
        except StoreError:
            return None
        if floor_runs:
            try:
                apply_tier_rule(card, floor_runs)
            except Exception:  # a bug: logged, the run is still answered
                log.exception("floor_rule_failed", family="gateway", run_id=card.get("run_id"))
        return {run["floor_kind"] for run in floor_runs}
