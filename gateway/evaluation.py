"""One evaluation, from a validated request to the run card (as a dict whose
layout is SPEC §8 / ``schemas/run_card.schema.json``)."""
from __future__ import annotations

import asyncio
import uuid
from typing import Callable

import numpy as np

from champollion.cards import LanguageCard
from champollion.eval.v1 import family_pb2, gateway_pb2
from gateway.bootstrap import (
    ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    confidence_intervals,
)
from gateway.breakdowns import breakdown, provenance_key, size_warnings, tier_intervals
from gateway.composite import WEIGHTS, Composite, compute_composite, quality_tier
from gateway.config import GatewayConfig
from gateway.corpus import corpus_values
from gateway.costs import (
    TOKEN_FIELDS,
    EntryUsage,
    Pricing,
    compute_speed,
    compute_totals,
    cost_adjusted,
    run_elapsed_seconds,
)
from gateway.fanout import FamilyClient, FamilyOutcome, fan_out
from gateway.identity import corpus_version, run_fingerprint
from gateway.layout import COUNT_OF_RATE, FAMILIES, FAMILY_SCORE_KEYS
from gateway.merge import MergedScores, merge_outcomes
from gateway.validation import ValidatedRun

QUALITY_TIER_BASIS = "heuristic: engineering proxies, not validated by community review"


def _batch_entries(request: gateway_pb2.EvaluateRequest) -> list[family_pb2.BatchEntry]:
    """Joins corpus entries with predictions. A missing or failed prediction
    becomes an empty output flagged `failed`: failing is never rewarded."""
    predictions = {p.id: p for p in request.predictions}
    joined = []
    for entry in request.corpus.entries:
        prediction = predictions.get(entry.id)
        failed = prediction is None or prediction.HasField("error") or not prediction.HasField("prediction")
        batch_entry = family_pb2.BatchEntry(
            id=entry.id,
            source=entry.source,
            reference=entry.reference,
            acceptable_variants=list(entry.acceptable_variants),
            prediction="" if failed else prediction.prediction,
            failed=failed,
            morphology=list(entry.morphology),
            terms=list(entry.terms),
        )
        if prediction is not None and prediction.HasField("raw_prediction"):
            batch_entry.raw_prediction = prediction.raw_prediction
        joined.append(batch_entry)
    return joined


def make_batches(request, run_id: str, batch_size: int) -> list[family_pb2.ScoreBatchRequest]:
    entries = _batch_entries(request)
    options = {"comet_model": request.meta.comet_model} if request.meta.HasField("comet_model") else {}
    if request.options.disable_plugins:
        options["plugins"] = "off"
    return [
        family_pb2.ScoreBatchRequest(
            run_id=run_id,
            source_lang=request.corpus.source_lang,
            target_lang=request.corpus.target_lang,
            entries=entries[start:start + batch_size],
            options=options,
            glossary=list(request.glossary),
        )
        for start in range(0, len(entries), batch_size)
    ]


def _family_warnings(outcomes: dict[str, FamilyOutcome], unrouted: dict[str, str]) -> list[str]:
    warnings = []
    for family in FAMILIES:
        keys = ", ".join(FAMILY_SCORE_KEYS[family])
        outcome = outcomes.get(family)
        if family in unrouted:
            warnings.append(f"family {family!r}: {unrouted[family]}: {keys} are null")
        elif outcome is None:
            warnings.append(f"family {family!r} is not configured: {keys} are null")
        elif outcome.failure is not None:
            warnings.append(f"family {family!r} failed ({outcome.failure}): {keys} are null")
    return warnings


def _apply_equivalence_rule(merged: MergedScores, request) -> str | None:
    """SPEC §2.1 decision: without a plugin and without variants in the corpus,
    equivalent match says nothing beyond exact match and is null."""
    if merged.sources.get("equivalent_match_rate") != "surface":
        return None
    if any(entry.acceptable_variants for entry in request.corpus.entries):
        return None
    merged.stats.pop("equivalent_match_rate")
    for values in merged.entry_values:
        values.pop("equivalent_match_rate", None)
    return ("equivalent_match_rate is null: no entry carries acceptable_variants and the target "
            "language has no equivalence plugin")


def _scores_block(values: dict, stats: dict[str, np.ndarray], labels: dict[str, str]) -> dict:
    scores = {key: None for family in FAMILIES for key in FAMILY_SCORE_KEYS[family]}
    for key in scores:
        if key in COUNT_OF_RATE and COUNT_OF_RATE[key] in stats:
            scores[key] = int(round(stats[COUNT_OF_RATE[key]][:, 0].sum()))
        elif key in values:
            scores[key] = values[key]
        elif key in labels:
            scores[key] = labels[key]
    return scores


def _coverage_warning(composite: Composite) -> str | None:
    if not composite.missing:
        return None
    profile_size = len(WEIGHTS[composite.profile])
    return (
        f"composite (profile {composite.profile}) re-normalised over {len(composite.weights)} of "
        f"{profile_size} metrics; missing: {', '.join(composite.missing)}. Do not rank it against "
        "runs with a different composite_coverage"
    )


def _entry_usages(request) -> list[EntryUsage]:
    predictions = {p.id: p for p in request.predictions}
    usages = []
    for entry in request.corpus.entries:
        prediction = predictions.get(entry.id)
        usage = cost = latency = None
        if prediction is not None:
            if prediction.HasField("usage"):
                usage = {
                    name: getattr(prediction.usage, name)
                    for name in TOKEN_FIELDS
                    if prediction.usage.HasField(name)
                }
            cost = prediction.cost_usd if prediction.HasField("cost_usd") else None
            latency = prediction.latency_s if prediction.HasField("latency_s") else None
        usages.append(EntryUsage(usage=usage, cost_usd=cost, latency_s=latency, source_chars=len(entry.source)))
    return usages


def _pricing(meta) -> Pricing | None:
    if not meta.HasField("pricing"):
        return None
    pricing = meta.pricing
    return Pricing(
        prompt_per_1m=pricing.prompt_per_1m,
        completion_per_1m=pricing.completion_per_1m,
        cached_per_1m=pricing.cached_per_1m if pricing.HasField("cached_per_1m") else None,
    )


def _optional(message, name: str):
    return getattr(message, name) if message.HasField(name) else None


async def evaluate(
    request: gateway_pb2.EvaluateRequest,
    run: ValidatedRun,
    config: GatewayConfig,
    clients: dict[str, FamilyClient],
    unrouted: dict[str, str],
    on_progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Scores a validated run and returns its run card."""
    run_id = uuid.uuid4().hex
    batch_size = request.options.batch_size or config.batch_size
    batches = make_batches(request, run_id, batch_size)
    total_calls = len(batches) * len(clients)
    done = 0

    def batch_done():
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, total_calls)

    outcomes = await fan_out(clients, batches, config.max_in_flight, batch_done)
    entries = request.corpus.entries
    merged = await asyncio.to_thread(merge_outcomes, outcomes, len(entries))
    warnings = _family_warnings(outcomes, unrouted) + merged.warnings
    equivalence_warning = _apply_equivalence_rule(merged, request)
    if equivalence_warning:
        warnings.append(equivalence_warning)

    seed = request.options.seed if request.options.HasField("seed") else DEFAULT_SEED
    resamples = request.options.bootstrap_resamples or DEFAULT_RESAMPLES
    # Everything below is CPU-bound: off the event loop, which in the
    # embedded stack also serves the families.
    card = await asyncio.to_thread(_assemble_card, request, run, merged, batches, warnings, seed, resamples)
    card["run_id"] = run_id
    return card


def _assemble_card(request, run: ValidatedRun, merged: MergedScores, batches, warnings: list[str],
                   seed: int, resamples: int) -> dict:
    entries = request.corpus.entries
    values = corpus_values(merged.stats, labels=merged.labels)
    target: LanguageCard = run.target
    composite = compute_composite(values, target.profile)
    coverage_warning = _coverage_warning(composite)
    if coverage_warning:
        warnings.append(coverage_warning)
    warnings.extend(size_warnings(entries))

    meta = request.meta
    usages = _entry_usages(request)
    totals = compute_totals(usages, _pricing(meta), warnings)
    elapsed = run_elapsed_seconds(
        _optional(meta, "elapsed_seconds"), _optional(meta, "time_start"), _optional(meta, "time_end")
    )
    failed = sum(entry.failed for batch in batches for entry in batch.entries)
    difficulties = [str(e.difficulty) if e.HasField("difficulty") else None for e in entries]

    scores = _scores_block(values, merged.stats, merged.labels)
    scores.update(
        composite=composite.value,
        quality_tier=quality_tier(composite.value),
        cost_adjusted=cost_adjusted(composite.value, totals["cost_per_entry_usd"]),
        **compute_speed(usages, elapsed, totals["total_tokens"]),
        confidence_intervals=confidence_intervals(merged.stats, composite.weights, resamples, seed),
        confidence_intervals_by_tier=tier_intervals(difficulties, merged.stats, resamples, seed),
        by_difficulty=breakdown(difficulties, merged.stats, target.profile),
        by_provenance=breakdown([provenance_key(e) for e in entries], merged.stats, target.profile),
        total=len(entries),
        evaluated=len(entries) - failed,
        errors=failed,
    )

    version = corpus_version((entry.id, entry.reference) for entry in entries)
    fingerprint_hash, fingerprint_inputs = run_fingerprint(
        _optional(meta, "model_slug"), _optional(meta, "temperature"), _optional(meta, "prompt"), version
    )
    predictions = {p.id: p for p in request.predictions}
    entry_results = []
    for index, entry in enumerate(entries):
        entry_values = merged.entry_values[index]
        entry_values["composite"] = compute_composite(
            {m: entry_values.get(m) for m in composite.weights}, target.profile
        ).value if composite.weights else None
        result = {
            "id": entry.id,
            "scores": entry_values,
            "stats": {m: matrix[index].tolist() for m, matrix in merged.stats.items()},
        }
        if entry.HasField("difficulty"):
            result["difficulty"] = entry.difficulty
        prediction = predictions.get(entry.id)
        if prediction is None:
            result["error"] = "no prediction"
        elif prediction.HasField("error"):
            result["error"] = prediction.error
        entry_results.append(result)

    return {
        "model_slug": _optional(meta, "model_slug"),
        "condition": _optional(meta, "condition"),
        "dataset": {
            "id": request.corpus.id,
            "language_pair": f"{request.corpus.source_lang}-{request.corpus.target_lang}",
            "version": version,
        },
        "fingerprint": {"hash": fingerprint_hash, "inputs": fingerprint_inputs},
        "elapsed_seconds": elapsed,
        "scores": scores,
        "totals": totals,
        "signatures": dict(sorted(merged.signatures.items())),
        "composite_coverage": {
            "profile": composite.profile,
            "weights": composite.weights,
            "missing": list(composite.missing),
        },
        "quality_tier_basis": QUALITY_TIER_BASIS,
        "bootstrap": {"method": "percentile", "resamples": resamples, "alpha": ALPHA, "seed": seed},
        "warnings": warnings,
        "entries": entry_results,
    }
