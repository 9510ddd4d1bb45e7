"""One evaluation, from a run's parts to its run card: the card's run-level
blocks as a dict whose layout is SPEC §8 / ``schemas/run_card.schema.json``,
and its per-entry results as messages, produced batch by batch from the
run's spill so that no step holds the whole run."""
from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from itertools import count, islice
from typing import AsyncIterator, Callable, Iterator

from champollion.eval.v1 import run_card_pb2
from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.adequacy import REPEATED_SOURCES, Adequacy, assess, gated_statistics
from gateway.card.adequacy import SIGNATURE as ADEQUACY_SIGNATURE
from gateway.card.bootstrap import (
    ALPHA,
    confidence_intervals,
    missing_interval_warnings,
)
from gateway.card.breakdowns import breakdown, size_warnings, tier_intervals
from gateway.card.composite import Composite, compute_composite, entry_composites, quality_tier
from gateway.card.corpus import corpus_values, family_scores
from gateway.card.costs import compute_speed, compute_totals, cost_adjusted, run_elapsed_seconds
from gateway.card.identity import run_fingerprint
from gateway.card.languages import SIGNATURE_KEY, language_card_notes
from gateway.card.metrics import FAMILIES, FAMILY_SCORE_KEYS, PLUGIN_OVERRIDES, SCORE_KEYS, WEIGHTS, families_for
from champollion.core.run_card import SLOW_FAMILY_WARNING
from gateway.server.config import GatewayConfig
from gateway.server.fanout import FamilyClient, FanOut
from gateway.server.intake import RunIntake
from gateway.server.merge import MergedStatistics, merge_entry_scores, merge_statistics
from gateway.server.spill import RunSpill

# The adequacy gates' rules and thresholds, among the metrics' signatures.
ADEQUACY_SIGNATURE_KEY = "adequacy"
QUALITY_TIER_BASIS = "heuristic: engineering proxies, not validated by community review"
EQUIVALENCE_WARNING = (
    "equivalent_match_rate is null: no entry carries acceptable_variants or further references and the target "
    "language has no equivalence plugin"
)


@dataclass
class ScoredRun:
    # The run card without its entries.
    card: dict
    # The run card's entries, one list per batch, in corpus order: each call
    # reads them afresh from the spill (the store and the answer both need
    # them), so the spill must stay open meanwhile.
    entry_results: Callable[[], Iterator[list[run_card_pb2.EntryResult]]]
    # Each entry's prediction in corpus order (None: none sent), kept with
    # the stored run for community review; read from the spill as above.
    predictions: Callable[[], Iterator[str | None]] = lambda: iter(())
    # Each entry's id, in corpus order, and the merged per-entry statistics
    # (metric id -> entries x statistics), for what reads them whole (the
    # Ladder's release of a secret-tier run).
    entry_ids: Callable[[], Iterator[str]] = lambda: iter(())
    stats: dict = field(default_factory=dict)


def _family_warnings(clients: dict[str, FamilyClient], failures: dict[str, str],
                     unrouted: dict[str, str], slow: set[str], called: tuple[str, ...] = FAMILIES) -> list[str]:
    """Why a family the run called has no scores (or was slow); a family
    not called (its metrics not requested) is _not_requested_warnings'."""
    warnings = []
    for family in called:
        keys = ", ".join(FAMILY_SCORE_KEYS[family])
        if family in unrouted:
            warnings.append(f"family {family!r}: {unrouted[family]}: {keys} are null")
        elif family not in clients:
            warnings.append(f"family {family!r} is not configured: {keys} are null")
        elif family in failures:
            warnings.append(f"family {family!r} failed ({failures[family]}): {keys} are null")
        elif family in slow:
            warnings.append(f"family {family!r} {SLOW_FAMILY_WARNING}")
    return warnings


def _not_requested_warnings(requested: frozenset[str] | None) -> list[str]:
    """Per family, the scores a run did not ask for (EvaluateOptions.metrics,
    families), which are null."""
    if requested is None:
        return []
    warnings = []
    for family in FAMILIES:
        keys = [key for key in FAMILY_SCORE_KEYS[family] if key not in requested]
        if keys:
            warnings.append(f"{family}: not requested: {', '.join(keys)} {'is' if len(keys) == 1 else 'are'} null")
    return warnings


def _not_requested(composite: Composite, requested: frozenset[str] | None) -> list[str]:
    """The composite's missing metrics that the run did not ask for."""
    return [] if requested is None else [metric for metric in composite.missing if metric not in requested]


def _coverage_warning(composite: Composite, not_requested: list[str]) -> str | None:
    if not composite.missing:
        return None
    profile_size = len(WEIGHTS[composite.profile])
    absent = [metric for metric in composite.missing if metric not in not_requested]
    why = "; ".join(part for part in (f"missing: {', '.join(absent)}" if absent else "",
                                      f"not requested: {', '.join(not_requested)}" if not_requested else "") if part)
    return (
        f"composite (profile {composite.profile}) re-normalised over {len(composite.weights)} of "
        f"{profile_size} metrics; {why}. Do not rank it against "
        "runs with a different composite_coverage"
    )


def _optional(message, name: str):
    return getattr(message, name) if message.HasField(name) else None


async def evaluate(
    intake: RunIntake,
    later_parts: AsyncIterator,
    config: GatewayConfig,
    clients: dict[str, FamilyClient],
    unrouted: dict[str, str],
    spill: RunSpill,
    on_progress: Callable[..., None] | None = None,
    expected_entries: int = 0,
) -> ScoredRun:
    """Scores a run whose header `intake` has validated, its entries coming
    from the first part and `later_parts`, batches scored while they come.
    `on_progress(done, total, upload_complete, slow_families, entries_done,
    entries_total)`: entries_total is `expected_entries` (a registered
    corpus's size) or, for an upload, the entries received so far."""
    run_id = uuid.uuid4().hex
    header = intake.header
    batch_size = header.options.batch_size or config.batch_size
    # A run that asked for some metrics only calls the families they need.
    requested = intake.run.requested
    called = families_for(requested, plugins=not header.options.disable_plugins)
    clients = {family: client for family, client in clients.items() if family in called}
    unrouted = {family: reason for family, reason in unrouted.items() if family in called}
    upload_complete = False

    def progress(done: int, total: int, slow: list[str]) -> None:
        if on_progress is not None:
            on_progress(done, total, upload_complete, slow, fan_out.entries_scored,
                        max(expected_entries, fan_out.entries_sent))

    fan_out = FanOut(clients, config.max_in_flight, spill.add_response, progress)
    try:
        index = 0
        async for batch in intake.batches(later_parts, run_id, batch_size):
            await fan_out.submit(index, batch)
            index += 1
        upload_complete = True
        progress(fan_out.answered, fan_out.scheduled, sorted(fan_out.slow))
        await fan_out.finish()
    finally:
        fan_out.cancel()  # nothing left to cancel unless the upload failed
    answered = [family for family in clients if family not in fan_out.failures]

    seed = header.options.seed if header.options.HasField("seed") else DEFAULT_SEED
    resamples = header.options.bootstrap_resamples or DEFAULT_RESAMPLES
    language_warnings, language_signature = language_card_notes(intake.run.source, intake.run.target)
    warnings = language_warnings + _family_warnings(clients, fan_out.failures, unrouted, fan_out.slow, called)
    warnings += _not_requested_warnings(requested)
    # Everything below is CPU-bound: off the event loop, which in the
    # embedded stack also serves the families.
    merged = await asyncio.to_thread(merge_statistics, spill, answered, intake.tally.total)
    if language_signature is not None:
        merged.signatures[SIGNATURE_KEY] = language_signature
    warnings += merged.warnings
    if requested is not None:
        merged.keep_only(requested)
    drop_equivalence = merged.sources.get("equivalent_match_rate") == "surface" and not intake.tally.any_variants
    if drop_equivalence:
        # SPEC §2.1 decision: without a plugin and without variants in the
        # corpus, equivalent match says nothing beyond exact match.
        merged.stats.pop("equivalent_match_rate")
        warnings.append(EQUIVALENCE_WARNING)
    card, composite, adequacy = await asyncio.to_thread(_assemble_card, intake, spill, merged, warnings, seed,
                                                        resamples)
    card["run_id"] = run_id
    return ScoredRun(card=card, entry_results=lambda: _entry_results(
        spill, merged, answered, composite, adequacy, batch_size, drop_equivalence, requested),
        predictions=spill.predictions, entry_ids=lambda: (entry_id for entry_id, _, _ in spill.entries()),
        stats=merged.stats)


def _assemble_card(intake: RunIntake, spill: RunSpill, merged: MergedStatistics, warnings: list[str],
                   seed: int, resamples: int) -> tuple[dict, Composite, Adequacy]:
    tally = intake.tally
    both_sent_warning = tally.both_sent_warning()
    if both_sent_warning:
        warnings.append(both_sent_warning)
    values = corpus_values(merged.stats, labels=merged.labels)
    profile = intake.run.target.card.profile
    adequacy = assess(spill.text_gates(), spill.repeated_outputs(REPEATED_SOURCES), merged.stats,
                      plugin_semantic=merged.sources.get("semantic_score") == PLUGIN_OVERRIDES["semantic_score"])
    # The composite reads inadequate entries at their worst; the metrics stay as defined.
    composite_stats = gated_statistics(merged.stats, adequacy.inadequate, WEIGHTS[profile])
    composite = compute_composite(
        corpus_values({m: composite_stats[m] for m in WEIGHTS[profile] if m in composite_stats}), profile)
    not_requested = _not_requested(composite, intake.run.requested)
    coverage_warning = _coverage_warning(composite, not_requested)
    if coverage_warning:
        warnings.append(coverage_warning)
    difficulty_counts = Counter(tier for tier in tally.difficulties if tier is not None)
    warnings.extend(size_warnings(tally.total, tally.domains, difficulty_counts))
    overlap_warning = intake.contamination.warning()
    if overlap_warning:
        warnings.append(overlap_warning)

    meta = intake.header.meta
    totals = compute_totals(tally.usage, warnings)
    elapsed = run_elapsed_seconds(
        _optional(meta, "elapsed_seconds"), _optional(meta, "time_start"), _optional(meta, "time_end")
    )
    intervals = confidence_intervals(merged.stats, composite.weights, resamples, seed, labels=merged.labels,
                                     composite_stats=composite_stats,
                                     rates={"adequacy_rate": adequacy.statistics()})
    warnings.extend(missing_interval_warnings(intervals.missing))
    tier_found, tier_warnings = tier_intervals(tally.difficulties, merged.stats, resamples, seed)
    warnings.extend(tier_warnings)
    scores = family_scores(values, merged.stats, merged.labels)
    scores.update(
        adequacy_rate=adequacy.rate(),
        composite=composite.value,
        quality_tier=quality_tier(composite.value),
        cost_adjusted=cost_adjusted(composite.value, totals["cost_per_entry_usd"]),
        **compute_speed(tally.usage, elapsed, totals["total_tokens"]),
        confidence_intervals=intervals.found,
        confidence_intervals_by_tier=tier_found,
        by_difficulty=breakdown(tally.difficulties, merged.stats, profile, composite_stats),
        by_provenance=breakdown(tally.provenance, merged.stats, profile, composite_stats),
        total=tally.total,
        evaluated=tally.total - tally.failed,
        errors=tally.failed,
    )

    corpus = intake.header.corpus
    version = spill.corpus_version()
    merged.signatures[ADEQUACY_SIGNATURE_KEY] = ADEQUACY_SIGNATURE
    fingerprint_hash, fingerprint_inputs = run_fingerprint(
        _optional(meta, "model_slug"), _optional(meta, "temperature"), _optional(meta, "prompt"), version
    )
    card = {
        "model_slug": _optional(meta, "model_slug"),
        "condition": _optional(meta, "condition"),
        "dataset": {"id": corpus.id, "language_pair": f"{corpus.source_lang}-{corpus.target_lang}", "version": version},
        "fingerprint": {"hash": fingerprint_hash, "inputs": fingerprint_inputs},
        "elapsed_seconds": elapsed,
        "scores": scores,
        "totals": totals,
        "signatures": dict(sorted(merged.signatures.items())),
        "composite_coverage": {
            "profile": composite.profile,
            "weights": composite.weights,
            "missing": list(composite.missing),
            "not_requested": not_requested,
        },
        "adequacy": adequacy.block(),
        "quality_tier_basis": QUALITY_TIER_BASIS,
        "bootstrap": {"method": "percentile", "resamples": resamples, "alpha": ALPHA, "seed": seed},
        "warnings": warnings,
        "requested": [] if intake.run.requested is None else [key for key in SCORE_KEYS
                                                                if key in intake.run.requested],
        # submissions_with_fingerprint is added when the run is stored.
        "integrity": intake.contamination.integrity(),
        "entries": [],
    }
    return card, composite, adequacy


def _entry_results(spill: RunSpill, merged: MergedStatistics, answered: list[str], composite: Composite,
                   adequacy: Adequacy, batch_size: int, drop_equivalence: bool,
                   requested: frozenset[str] | None = None) -> Iterator[list[run_card_pb2.EntryResult]]:
    """Each batch's entry results: the families' merged values (of the
    metrics requested), whether the output passed the adequacy gates (and
    which it failed, why), the entry's own composite (same weights as the
    run's; 0 when inadequate), its statistics, difficulty and error."""
    entries = spill.entries()
    dropped = [key for key in SCORE_KEYS if (requested is not None and key not in requested)
               or (drop_equivalence and key == "equivalent_match_rate")]
    row = 0
    for batch in count():
        chunk = list(islice(entries, batch_size))
        if not chunk:
            return
        results = [run_card_pb2.EntryResult(id=entry_id, difficulty=difficulty, error=error)
                   for entry_id, difficulty, error in chunk]
        merge_entry_scores(spill.batch_responses(batch, answered), [result.scores for result in results])
        for result in results:
            fields = result.scores.fields
            for key in dropped:
                if key in fields:
                    del fields[key]
        composites = entry_composites([_numbers(result.scores, composite.weights) for result in results], composite)
        for result, entry_composite in zip(results, composites):
            failed = adequacy.reasons.get(row)
            result.scores["adequate"] = failed is None
            if failed is not None:
                result.scores["adequacy_gates"] = failed
            # Every composite input at its worst: the weighted mean of worst values is 0.
            result.scores["composite"] = entry_composite if failed is None or entry_composite is None else 0.0
            for metric_id, matrix in merged.stats.items():
                result.stats[metric_id].values.extend(matrix[row].tolist())
            row += 1
        yield results


def _numbers(scores, keys) -> dict[str, float | None]:
    """An entry's values of `keys` as numbers, read from its merged scores
    (None: absent or null; a verdict true or false: 1 or 0)."""
    found = {}
    for key in keys:
        kind = scores.fields[key].WhichOneof("kind") if key in scores.fields else None
        found[key] = float(getattr(scores.fields[key], kind)) if kind in ("number_value", "bool_value") else None
    return found
