"""Review campaigns over the store: creating one (its sample, queues and
controls, gateway/review/design.py; the gate of an ESA or MQM campaign,
gateway/review/gate.py; the suggested spans of `--prefill`,
gateway/review/prefill.py), its results (gateway/review/results.py), and
what they say about one run (the run card's `community_review` block).
Rating is gateway/review/reviewing.py's. Blocking store calls: the
gateway runs these in a worker thread, the web front in its thread pool."""
from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass, field

import numpy as np

from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.review import protocol
from gateway.review.detectors import campaign_detectors
from gateway.review.design import CorpusItem, assign_items, degrade, reviewer_tasks, sample_entries
from gateway.review.errors import CampaignRefused
from gateway.review.gate import changed_span, expected_answer
from gateway.review.prefill import suggestions_for
from gateway.review.results import Rating, campaign_results, system_validated
from gateway.store import RunStore

__all__ = ["CampaignRefused", "CampaignRequest", "create_campaign", "results_of"]

MAX_ITEMS = 10_000
MAX_NAME = 200


@dataclass
class CampaignRequest:
    name: str
    run_ids: list[str]
    reviewers: list[str]
    items: int = protocol.DEFAULT_ITEMS
    overlap: int = protocol.DEFAULT_OVERLAP
    seed: int = DEFAULT_SEED
    reference_review: bool = False
    created_by: str | None = None
    prefill: str = protocol.PREFILL_NONE
    prefill_share: float = protocol.DEFAULT_PREFILL_SHARE  # of the items, shown without suggestions
    shares: dict = field(default_factory=lambda: {"repeat": protocol.REPEAT_SHARE, "control": protocol.CONTROL_SHARE})
    protocol: str = protocol.DA  # last: the field's name hides the module below it in the class body

    @classmethod
    def given(cls, **fields) -> CampaignRequest:
        """A request from what a front door was sent: a field it was not sent
        (None) takes the campaign's default, decided here and not there."""
        return cls(**{name: value for name, value in fields.items() if value is not None})


def derived_seed(seed: int, *parts: str) -> int:
    """A seed of its own for each reviewer and task, from the campaign's."""
    digest = hashlib.sha256(":".join((str(seed), *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _check_request(request: CampaignRequest) -> None:
    if not request.name.strip() or len(request.name) > MAX_NAME:
        raise CampaignRefused(f"name: required, at most {MAX_NAME} characters")
    if len(request.run_ids) < 2 or len(set(request.run_ids)) != len(request.run_ids):
        raise CampaignRefused(f"run_ids: give two or more different stored runs, got {len(request.run_ids)}")
    reviewers = [name.strip() for name in request.reviewers]
    if not reviewers or any(not name for name in reviewers) or len(set(reviewers)) != len(reviewers):
        raise CampaignRefused("reviewers: give one or more different token names")
    if not 1 <= request.overlap <= len(reviewers):
        raise CampaignRefused(f"overlap: each item needs {request.overlap} reviewers, and {len(reviewers)} are named")
    if not 1 <= request.items <= MAX_ITEMS:
        raise CampaignRefused(f"items: must be 1 to {MAX_ITEMS}, got {request.items}")
    if request.protocol not in protocol.PROTOCOLS:
        raise CampaignRefused(f"protocol: one of {', '.join(protocol.PROTOCOLS)}, got {request.protocol[:20]!r}")
    if request.prefill not in protocol.PREFILLS:
        raise CampaignRefused(f"prefill: one of {', '.join(protocol.PREFILLS)}, got {request.prefill[:20]!r}")
    if request.prefill != protocol.PREFILL_NONE and request.protocol not in protocol.SPAN_PROTOCOLS:
        raise CampaignRefused(f"prefill: suggested spans go with the {' or '.join(protocol.SPAN_PROTOCOLS)} "
                              f"protocol, not {request.protocol}")
    if not 0 <= request.prefill_share <= 1:
        raise CampaignRefused(f"prefill_share: a share from 0 to 1, got {request.prefill_share:g}")


def create_campaign(store: RunStore, request: CampaignRequest) -> dict:
    """Samples the items, builds every reviewer's queue (with its repeated
    and degraded controls) and stores the campaign in one transaction."""
    _check_request(request)
    versions = store.run_versions(request.run_ids)  # UnknownRun for an id no run has
    systems = list(versions)
    if len(set(systems)) != len(systems):
        raise CampaignRefused("run_ids: two of them name the same run")
    corpora = {(dataset, version) for dataset, version, _ in versions.values()}
    if len(corpora) != 1:
        raise CampaignRefused("run_ids: the runs are on different corpus versions; a campaign compares systems on one")
    corpus_id, version = corpora.pop()
    corpus = store.corpus_info(corpus_id, version)  # UnknownCorpus: the sources are the registered corpus's
    entries = [entry for batch in store.corpus_entries(corpus_id, version) for entry in batch]
    outputs = {system: store.run_predictions(system) for system in systems}
    # Only entries every system has an output for can be shown side by side.
    items = [CorpusItem(entry["id"], entry.get("difficulty"), entry.get("domain")) for entry in entries
             if all(outputs[system].get(entry["id"]) for system in systems)]
    if not items:
        raise CampaignRefused(f"run_ids: no entry of corpus {corpus_id!r} has a stored output from every run "
                              f"(runs stored before outputs were kept cannot be reviewed)")
    sampled = sample_entries(items, request.items, request.seed)
    reviewers = [name.strip() for name in request.reviewers]
    seats = assign_items(sampled, reviewers, request.overlap, request.seed)  # entry id -> its reviewers
    assigned = {reviewer: [entry_id for entry_id in sampled if reviewer in seats[entry_id]] for reviewer in reviewers}
    by_id = {entry["id"]: entry for entry in entries}
    suggested = suggested_spans(store, request.prefill, request.prefill_share, derived_seed(request.seed, "prefill"),
                                systems, outputs, by_id, sampled)
    gate = _gate_tasks(request, systems, outputs, by_id, sampled, [item.entry_id for item in items])
    tasks = []
    for reviewer in reviewers:
        tasks.extend({**task, "reviewer": reviewer} for task in gate)
        tasks += queue_rows(reviewer, assigned[reviewer], systems, outputs, request.seed, request.shares, len(gate),
                            (reviewer,), sampled, suggested)
    settings = {"source_lang": corpus["source_lang"], "target_lang": corpus["target_lang"], "systems": systems,
                "models": {system: versions[system][2] for system in systems},
                "reviewers": reviewers, "items": len(sampled), "overlap": request.overlap, "seed": request.seed,
                "reference_review": request.reference_review, "shares": request.shares,
                "protocol": request.protocol, "prefill": request.prefill, "prefill_share": request.prefill_share}
    campaign = {"campaign_id": uuid.uuid4().hex[:12], "name": request.name.strip(), "corpus_id": corpus_id,
                "corpus_version": version, "created_by": request.created_by, "settings": settings}
    return store.save_campaign(campaign, tasks)


def queue_rows(reviewer: str, entry_ids: list[str], systems: list[str], outputs: dict[str, dict[str, str | None]],
               seed: int, shares: dict, first_position: int, seed_parts: tuple[str, ...], donors: list[str],
               suggested: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """A reviewer's tasks over `entry_ids` as the store keeps them, from
    `first_position` on: design.reviewer_tasks' queue, each degraded
    control's text made by design.degrade (its donor: the output of the
    entry after it in `donors`), each item's suggested spans (`suggested`,
    suggested_spans'). `seed_parts` name the queue in the seeds it draws.
    Creation and a campaign's growth (gateway/review/growth.py) both build
    queues here."""
    queue = reviewer_tasks(entry_ids, systems, derived_seed(seed, *seed_parts), shares["repeat"], shares["control"])
    rows = []
    for task in queue:
        degraded_text = None
        if task.degraded is not None:
            degraded_text = degrade(outputs[task.degraded][task.entry_id],
                                    _donor(outputs[task.degraded], task.entry_id, donors),
                                    derived_seed(seed, *seed_parts, str(task.position)))
        shown = suggested.get(task.entry_id)
        if shown is not None and task.degraded is not None:
            # The degraded output is not the one the families scored: no suggestion on it.
            shown = {**shown, task.degraded: []}
        rows.append({"reviewer": reviewer, "position": first_position + task.position, "entry_id": task.entry_id,
                     "kind": task.kind, "systems": list(task.systems), "degraded": task.degraded,
                     "degraded_text": degraded_text, "suggestions": shown, "expected": None})
    return rows


def suggested_spans(store: RunStore, prefill: str, prefill_share: float, seed: int, systems: list[str],
                    outputs: dict[str, dict], entries: dict[str, dict],
                    sampled: list[str]) -> dict[str, dict[str, list[dict]]]:
    """Entry id -> {run id: the suggested spans of its output}, for the
    sampled entries shown with suggestions; the others (a seeded share,
    `prefill_share`) are left out: their tasks store NULL."""
    if prefill == protocol.PREFILL_NONE:
        return {}
    rng = np.random.default_rng(seed)
    plain = math.floor(prefill_share * len(sampled) + 0.5)  # half up, as the controls' counts
    without = {sampled[int(i)] for i in rng.choice(len(sampled), size=plain, replace=False)}
    scores = {system: store.run_entry_scores(system) for system in systems}
    return {entry_id: {system: [found.as_dict() for found in suggestions_for(
                outputs[system][entry_id], entries[entry_id]["source"], scores[system].get(entry_id) or {})]
                       for system in systems}
            for entry_id in sampled if entry_id not in without}


def _gate_tasks(request: CampaignRequest, systems: list[str], outputs: dict[str, dict], entries: dict[str, dict],
                sampled: list[str], eligible: list[str]) -> list[dict]:
    """The gate every reviewer of an ESA or MQM campaign passes first
    (gateway/review/gate.py): a tutorial item (an entry's reference, shown
    as the first run's output) and an attention item (the next entry's
    output of that run with a span replaced); none for DA. Both entries are
    taken outside the sample while there are any (`eligible`: every entry
    the runs can be shown on), so that no rated item was seen with its
    reference or degraded first."""
    if request.protocol not in protocol.SPAN_PROTOCOLS:
        return []
    system = systems[0]
    taken = set(sampled)
    pool = [entry_id for entry_id in eligible if entry_id not in taken] + sampled
    tutorial_entry, attention_entry = pool[0], pool[1 % len(pool)]
    original = outputs[system][attention_entry]
    degraded = degrade(original, _donor(outputs[system], attention_entry, pool),
                       derived_seed(request.seed, "attention"))
    common = {"systems": [system], "degraded": system, "suggestions": None}
    return [
        {**common, "position": 0, "entry_id": tutorial_entry, "kind": protocol.TUTORIAL,
         "degraded_text": entries[tutorial_entry]["reference"], "expected": expected_answer(protocol.TUTORIAL, [])},
        {**common, "position": 1, "entry_id": attention_entry, "kind": protocol.ATTENTION, "degraded_text": degraded,
         "expected": expected_answer(protocol.ATTENTION, [changed_span(original, degraded)])},
    ]


def _donor(outputs: dict[str, str | None], entry_id: str, sampled: list[str]) -> str:
    """Another sampled entry's output of the same system: the words a
    degraded control borrows (the next entry's, so it is reproducible)."""
    index = sampled.index(entry_id)
    for step in range(1, len(sampled)):
        other = outputs.get(sampled[(index + step) % len(sampled)])
        if other:
            return other
    return outputs[entry_id] or ""


# --- results -----------------------------------------------------------------------

def results_of(store: RunStore, campaign_id: str, detectors: bool = True) -> dict:
    """The campaign with its progress and results; with `detectors`, its
    detectors' report too (the campaign page, `review results`, a run card:
    a leaderboard's labels need none of it)."""
    campaign = store.campaign(campaign_id)
    # The gate's items teach and check the reviewer: they are not results.
    rows = [row for row in store.campaign_ratings(campaign_id) if row["kind"] not in protocol.GATE_KINDS]
    ratings = [Rating(row["reviewer"], row["entry_id"], row["system"], row["kind"], row["score"], row["usable"],
                      row["degraded"], tuple(row["spans"] or ())) for row in rows]
    progress = store.reviewer_progress(campaign_id)
    results = campaign_results(ratings, campaign["systems"], DEFAULT_SEED, DEFAULT_RESAMPLES,
                               protocol=campaign.get("protocol", "da")) if ratings else None
    if results is not None:
        for summary in results["systems"]:
            summary["model_slug"] = campaign["models"].get(summary["system"])
            summary["validates"], summary["reasons"] = system_validated(results, summary["system"])
        if detectors:
            results["detectors"] = campaign_detectors(store, campaign, results)
    return {**campaign, "progress": progress, "results": results}


class ReviewCache:
    """What campaigns say about stored runs, each campaign's results
    computed once per reading (a leaderboard reads many runs)."""

    def __init__(self, store: RunStore, run_ids: list[str]):
        self.store = store
        self._campaigns = store.campaigns_of_runs(run_ids)  # one query for every run read
        self._read: dict[str, dict] = {}

    def _campaign_results(self, campaign_id: str, detectors: bool) -> dict | None:
        """The campaign's results, read once; its detectors' report added the
        first time a reader needs it."""
        if campaign_id not in self._read:
            self._read[campaign_id] = results_of(self.store, campaign_id, detectors=False)
        campaign = self._read[campaign_id]
        results = campaign["results"]
        if detectors and results is not None and "detectors" not in results:
            results["detectors"] = campaign_detectors(self.store, campaign, results)
        return results

    def block(self, run_id: str, heuristic_tier: str | None, detectors: bool = True) -> dict | None:
        """The run card's `community_review` block: every campaign that
        reviews the run, and whether one validates its tier (None: no
        campaign reviews it). Without `detectors`, no campaign's citations
        of its detectors (a leaderboard's label needs none)."""
        campaign_ids = self._campaigns[run_id]
        if not campaign_ids:
            return None
        summaries = [self._summary(campaign_id, run_id, detectors) for campaign_id in campaign_ids]
        validated = heuristic_tier in protocol.VALIDATABLE_TIERS and any(s["validates"] for s in summaries)
        return {"validated": validated,
                "label": protocol.VALIDATED_LABEL if validated else protocol.HEURISTIC_LABEL,
                "campaigns": summaries}

    def label(self, run_id: str, heuristic_tier: str | None) -> str | None:
        """A leaderboard row's `community_review`: the block's label, None
        when no campaign reviews the run."""
        block = self.block(run_id, heuristic_tier, detectors=False)
        return None if block is None else block["label"]

    def _summary(self, campaign_id: str, run_id: str, detectors: bool) -> dict:
        results = self._campaign_results(campaign_id, detectors)
        found = None if results is None else next(s for s in results["systems"] if s["system"] == run_id)
        if found is None:
            return {"campaign_id": campaign_id, "reviewers": 0, "items": 0, "mean": None, "z": None,
                    "usable_share": None, "alpha": None, "validates": False, "reasons": ["no ratings yet"],
                    "detectors": []}
        used = [rater for rater in results["raters"] if not rater["excluded"]]
        return {"campaign_id": campaign_id, "reviewers": len(used), "items": found["items"], "mean": found["mean"],
                "z": found["z"], "usable_share": found["usable_share"], "alpha": results["alpha"]["da"],
                "validates": found["validates"], "reasons": found["reasons"],
                # The detectors' confirmed shares this campaign may cite (gateway/review/detectors.py's bar).
                "detectors": (results.get("detectors") or {}).get("cited", [])}


def with_review(card: dict, review: dict) -> dict:
    """A stored card as read with its review: the block, and the tier's
    basis naming the campaign that validates it (else kept heuristic)."""
    card = {**card, "community_review": review}
    if review["validated"]:
        campaign = next(summary for summary in review["campaigns"] if summary["validates"])
        card["quality_tier_basis"] = (
            f"{protocol.VALIDATED_LABEL}: campaign {campaign['campaign_id']} ({campaign['reviewers']} reviewers, "
            f"{campaign['items']} items, alpha {campaign['alpha']:.3f}, usable share {campaign['usable_share']:.2f})")
    return card
