"""Review campaigns over the store: creating one (its sample, queues and
controls, gateway/review/design.py), a reviewer's ratings checked and saved,
its results (gateway/review/results.py), and what they say about one run
(the run card's `community_review` block). Blocking store calls: the
gateway runs these in a worker thread, the web front in its thread pool."""
from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass, field

from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.review import protocol
from gateway.review.design import CorpusItem, assign_items, degrade, reviewer_tasks, sample_entries
from gateway.review.results import Rating, campaign_results, system_validated
from gateway.store import RunStore

MAX_ITEMS = 10_000
MAX_NAME = 200
MAX_NOTE = 2_000


class CampaignRefused(ValueError):
    """A campaign or rating that cannot be accepted: the message names the
    field first ("run_ids: ...")."""


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
    shares: dict = field(default_factory=lambda: {"repeat": protocol.REPEAT_SHARE, "control": protocol.CONTROL_SHARE})


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
    tasks = []
    for reviewer in reviewers:
        queue = reviewer_tasks(assigned[reviewer], systems, derived_seed(request.seed, reviewer),
                               request.shares["repeat"], request.shares["control"])
        for task in queue:
            degraded_text = None
            if task.degraded is not None:
                degraded_text = degrade(outputs[task.degraded][task.entry_id],
                                        _donor(outputs[task.degraded], task.entry_id, sampled),
                                        derived_seed(request.seed, reviewer, str(task.position)))
            tasks.append({"reviewer": reviewer, "position": task.position, "entry_id": task.entry_id,
                          "kind": task.kind, "systems": list(task.systems), "degraded": task.degraded,
                          "degraded_text": degraded_text})
    settings = {"source_lang": corpus["source_lang"], "target_lang": corpus["target_lang"], "systems": systems, "models": {system: versions[system][2] for system in systems},
                "reviewers": reviewers, "items": len(sampled), "overlap": request.overlap, "seed": request.seed,
                "reference_review": request.reference_review, "shares": request.shares}
    campaign = {"campaign_id": uuid.uuid4().hex[:12], "name": request.name.strip(), "corpus_id": corpus_id,
                "corpus_version": version, "created_by": request.created_by, "settings": settings}
    return store.save_campaign(campaign, tasks)


def _donor(outputs: dict[str, str | None], entry_id: str, sampled: list[str]) -> str:
    """Another sampled entry's output of the same system: the words a
    degraded control borrows (the next entry's, so it is reproducible)."""
    index = sampled.index(entry_id)
    for step in range(1, len(sampled)):
        other = outputs.get(sampled[(index + step) % len(sampled)])
        if other:
            return other
    return outputs[entry_id] or ""


# --- ratings ---------------------------------------------------------------------

def checked_ratings(systems: list[str], form: dict[str, dict]) -> dict[str, dict]:
    """A task's ratings as sent ({system: {score, usable, spans}} for every
    system shown), checked: a score from 0 to 100 for each, a verdict yes,
    no or none, spans with 0 <= start < end and a known severity."""
    checked = {}
    for index, system in enumerate(systems):
        sent = form.get(system)
        if sent is None:
            raise CampaignRefused(f"ratings[{index}]: output {index + 1} has no score")
        try:
            score = float(sent.get("score"))
        except (TypeError, ValueError):
            raise CampaignRefused(f"ratings[{index}].score: must be a number from {protocol.DA_MIN} to "
                                  f"{protocol.DA_MAX}") from None
        if not (math.isfinite(score) and protocol.DA_MIN <= score <= protocol.DA_MAX):
            raise CampaignRefused(f"ratings[{index}].score: must be from {protocol.DA_MIN} to {protocol.DA_MAX}, "
                                  f"got {score:g}")
        usable = sent.get("usable")
        if usable not in (True, False, None):
            raise CampaignRefused(f"ratings[{index}].usable: yes, no or unanswered")
        spans = []
        for number, span in enumerate(sent.get("spans") or []):
            try:
                start, end, severity = int(span["start"]), int(span["end"]), span["severity"]
            except (KeyError, TypeError, ValueError):
                raise CampaignRefused(f"ratings[{index}].spans[{number}]: needs start, end and severity") from None
            if severity not in protocol.SEVERITIES or not 0 <= start < end:
                raise CampaignRefused(f"ratings[{index}].spans[{number}]: severity one of "
                                      f"{', '.join(protocol.SEVERITIES)}, 0 <= start < end")
            spans.append({"start": start, "end": end, "severity": severity})
        checked[system] = {"score": score, "usable": usable, "spans": spans}
    return checked


def check_flag(flag: str, note: str) -> None:
    if flag not in protocol.REFERENCE_FLAGS:
        raise CampaignRefused(f"flag: one of {', '.join(protocol.REFERENCE_FLAGS)}, got {flag[:40]!r}")
    if len(note) > MAX_NOTE:
        raise CampaignRefused(f"note: at most {MAX_NOTE} characters")
    if flag == "other" and not note.strip():
        raise CampaignRefused("note: say what is wrong with the reference")


# --- results -----------------------------------------------------------------------

def results_of(store: RunStore, campaign_id: str) -> dict:
    """The campaign with its progress and results."""
    campaign = store.campaign(campaign_id)
    rows = store.campaign_ratings(campaign_id)
    ratings = [Rating(row["reviewer"], row["entry_id"], row["system"], row["kind"], row["score"], row["usable"],
                      row["degraded"], tuple(row["spans"] or ())) for row in rows]
    progress = store.reviewer_progress(campaign_id)
    results = campaign_results(ratings, campaign["systems"], DEFAULT_SEED, DEFAULT_RESAMPLES,
                               protocol=campaign.get("protocol", "da")) if ratings else None
    if results is not None:
        for summary in results["systems"]:
            summary["model_slug"] = campaign["models"].get(summary["system"])
            summary["validates"], summary["reasons"] = system_validated(results, summary["system"])
    return {**campaign, "progress": progress, "results": results}


class ReviewCache:
    """What campaigns say about stored runs, each campaign's results
    computed once per reading (a leaderboard reads many runs)."""

    def __init__(self, store: RunStore, run_ids: list[str]):
        self.store = store
        self._campaigns = store.campaigns_of_runs(run_ids)  # one query for every run read
        self._results: dict[str, dict | None] = {}

    def _campaign_results(self, campaign_id: str) -> dict | None:
        if campaign_id not in self._results:
            self._results[campaign_id] = results_of(self.store, campaign_id)["results"]
        return self._results[campaign_id]

    def block(self, run_id: str, heuristic_tier: str | None) -> dict | None:
        """The run card's `community_review` block: every campaign that
        reviews the run, and whether one validates its tier (None: no
        campaign reviews it)."""
        campaign_ids = self._campaigns[run_id]
        if not campaign_ids:
            return None
        summaries = [self._summary(campaign_id, run_id) for campaign_id in campaign_ids]
        validated = heuristic_tier in protocol.VALIDATABLE_TIERS and any(s["validates"] for s in summaries)
        return {"validated": validated,
                "label": protocol.VALIDATED_LABEL if validated else protocol.HEURISTIC_LABEL,
                "campaigns": summaries}

    def label(self, run_id: str, heuristic_tier: str | None) -> str | None:
        """A leaderboard row's `community_review`: the block's label, None
        when no campaign reviews the run."""
        block = self.block(run_id, heuristic_tier)
        return None if block is None else block["label"]

    def _summary(self, campaign_id: str, run_id: str) -> dict:
        results = self._campaign_results(campaign_id)
        found = None if results is None else next(s for s in results["systems"] if s["system"] == run_id)
        if found is None:
            return {"campaign_id": campaign_id, "reviewers": 0, "items": 0, "mean": None, "z": None,
                    "usable_share": None, "alpha": None, "validates": False, "reasons": ["no ratings yet"]}
        used = [rater for rater in results["raters"] if not rater["excluded"]]
        return {"campaign_id": campaign_id, "reviewers": len(used), "items": found["items"], "mean": found["mean"],
                "z": found["z"], "usable_share": found["usable_share"], "alpha": results["alpha"]["da"],
                "validates": found["validates"], "reasons": found["reasons"]}


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
