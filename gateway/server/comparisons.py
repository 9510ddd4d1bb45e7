"""Comparisons of stored runs and cards as the gateway answers them: the
paired test's settings of Compare and ComparePairs, ComparePairs itself
(issue 34) and the all-pairs comparison of a run with its board that the
web front's run page shows.

Every stored run is checked as a stored side of Compare is
(access.check_compare), before any statistics are read; the statistics
are gateway/card/pairs.py's; a secret version is named by its public id
for whoever may not see its content hash (readings.shown_compared_version).
A stored run's statistics are read afresh (`stored_run`), not through
readings.stored_comparable's cache: that cache keeps a run's publication
time with them, and a run compared while held for review would keep "never
published" there once cleared, misplacing it in the Ladder.
Store calls block: the servicer and the web front run these in a worker
thread."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import grpc

from champollion.core.limits import MAX_ID_CHARS, MAX_RESAMPLES, shown
from champollion.core.run_card import dict_to_message
from champollion.core.sampling import BOOTSTRAP, DEFAULT_SEED, METHODS
from champollion.core.tiers import SECRET_TIERS
from champollion.eval.v1 import gateway_pb2
from gateway.card.compare import DEFAULT_SAMPLES, DIFFERENCE_CI, ComparableRun, CompareRefused
from gateway.card.metrics import COMPARED_METRICS, METRIC_NAMES
from gateway.card.multiplicity import CORRECTIONS, HOLM
from gateway.card.pairs import COMPOSITE, MIN_RUNS, DifferentVersions, check_tie_threshold, compare_all
from gateway.server.access import CompareSide, Refused, check_compare, is_maintainer
from gateway.server.auth import Caller
from gateway.server.readings import leaderboard_for, shown_compared_version
from gateway.store import RunStore
from gateway.store.errors import NothingStored

# ComparePairs compares N(N-1)/2 pairs: 32 runs are 496 pairs (a WMT
# language pair has about 20 systems).
MAX_PAIRED_RUNS = 32
# The runs of its board a run page compares a run with (the first by composite).
BOARD_RUNS = 10


def _invalid(message: str) -> Refused:
    return Refused(message, grpc.StatusCode.INVALID_ARGUMENT)


@dataclass(frozen=True)
class TestSettings:
    """The paired test a Compare or ComparePairs request asks for."""
    method: str
    seed: int | None  # None: the gateway's
    resamples: int  # 0: the method's default

    @property
    def samples(self) -> int:
        return self.resamples or DEFAULT_SAMPLES[self.method]

    @property
    def seed_used(self) -> int:
        return DEFAULT_SEED if self.seed is None else self.seed


def paired_test_settings(request) -> TestSettings:
    """The method, seed and resamples of a CompareRequest or
    ComparePairsRequest; Refused (INVALID_ARGUMENT naming the field)."""
    seed = request.seed if request.HasField("seed") else None
    if (seed is not None and seed < 0) or not 0 <= request.resamples <= MAX_RESAMPLES:
        raise _invalid(f"seed must not be negative and resamples must be 0 (default) to {MAX_RESAMPLES}")
    method = request.method or BOOTSTRAP
    if method not in METHODS:
        raise _invalid(f"method must be one of {', '.join(METHODS)} (empty: bs), got {shown(request.method)}")
    return TestSettings(method, seed, request.resamples)


def stored_run(store: RunStore, run_id: str) -> ComparableRun:
    """What a comparison reads of a stored run (`run_id` or a unique prefix)."""
    return ComparableRun.from_stored(*store.comparable_stats(run_id))


# --- ComparePairs ----------------------------------------------------------------

@dataclass(frozen=True)
class PairsSettings:
    test: TestSettings
    correction: str
    tie_threshold: float
    metric_ids: list[str] | None  # None: every metric


def _metric_id(name: str) -> str:
    """A requested metric's key (a key or a short name, or "composite")."""
    key = COMPOSITE if name.strip().lower() == COMPOSITE else METRIC_NAMES.get(name.strip().lower())
    if key is None or (key != COMPOSITE and key not in COMPARED_METRICS):
        raise _invalid(f"metrics: {shown(name)} is not a metric the paired test compares (those are: "
                       f"{', '.join([*COMPARED_METRICS, COMPOSITE])}, or their short names)")
    return key


def pairs_settings(request: gateway_pb2.ComparePairsRequest) -> PairsSettings:
    """A ComparePairsRequest's settings, every one checked before any run
    is read; Refused (INVALID_ARGUMENT naming the field)."""
    if not MIN_RUNS <= len(request.runs) <= MAX_PAIRED_RUNS:
        raise _invalid(f"runs: all pairs compares {MIN_RUNS} to {MAX_PAIRED_RUNS} runs, got {len(request.runs)}")
    for index, run in enumerate(request.runs):
        if not run.run_id and not run.HasField("card"):
            raise _invalid(f"runs[{index}]: give a stored run's run_id or a card")
        if len(run.name) > MAX_ID_CHARS:
            raise _invalid(f"runs[{index}].name: at most {MAX_ID_CHARS} characters, got {len(run.name)}")
    test = paired_test_settings(request)
    correction = request.correction or HOLM
    if correction not in CORRECTIONS:
        raise _invalid(f"correction: must be one of {', '.join(CORRECTIONS)} (empty: {HOLM}), "
                       f"got {shown(request.correction)}")
    try:
        check_tie_threshold(request.tie_threshold)
    except ValueError as error:
        raise _invalid(f"tie_threshold: {error}") from None
    metric_ids = list(dict.fromkeys(_metric_id(name) for name in request.metrics)) or None
    return PairsSettings(test, correction, request.tie_threshold, metric_ids)


def _name(index: int, run: gateway_pb2.PairedRun) -> str:
    return run.name or run.run_id or run.card.run_id[:12] or f"#{index + 1}"


def compare_pairs(store: RunStore | None, caller: Caller,
                  request: gateway_pb2.ComparePairsRequest) -> gateway_pb2.ComparePairsResponse:
    """ComparePairs's answer. Refused: INVALID_ARGUMENT (settings),
    PERMISSION_DENIED (a run `caller` may not compare, named),
    FAILED_PRECONDITION (runs that cannot be compared: different corpus
    versions, each named). `store` None: a gateway without one (every run
    is then a card; the servicer answers run ids UNAVAILABLE)."""
    settings = pairs_settings(request)
    sides = []
    for index, run in enumerate(request.runs):
        tier, submitted_by = store.run_access(run.run_id) if run.run_id else (None, None)
        sides.append(CompareSide(f"#{index + 1}", run.run_id, tier, submitted_by))
    test = settings.test
    check_compare(caller, sides, test.method, test.seed, test.resamples, what="ComparePairs")
    runs = [stored_run(store, run.run_id) if run.run_id else ComparableRun.from_proto(run.card) for run in request.runs]

    def shown_version(version: str) -> str:
        return version if store is None else shown_compared_version(store, caller, version)

    try:
        result = compare_all(runs, test.resamples or None, test.seed_used, test.method, settings.correction,
                             settings.tie_threshold, settings.metric_ids,
                             [_name(index, run) for index, run in enumerate(request.runs)])
    except DifferentVersions as error:
        raise Refused(error.worded(shown_version), grpc.StatusCode.FAILED_PRECONDITION) from None
    except CompareRefused as error:
        raise Refused(str(error), grpc.StatusCode.FAILED_PRECONDITION) from None
    result["dataset_version"] = shown_version(result["dataset_version"])
    result["test"]["difference_ci"] = DIFFERENCE_CI[test.method]
    return dict_to_message(result, gateway_pb2.ComparePairsResponse())


def add_pairs_part(request: gateway_pb2.ComparePairsRequest | None,
                   part: gateway_pb2.ComparePairsPart) -> gateway_pb2.ComparePairsRequest:
    """ComparePairsUpload's request so far (None before the first part)
    with `part` added; Refused (INVALID_ARGUMENT) for a part out of place."""
    if request is None:
        if not part.HasField("request"):
            raise _invalid("request: the first part of the upload carries the request")
        return part.request
    if part.HasField("request"):
        raise _invalid("request: only the first part of the upload carries it")
    if not 0 <= part.run < len(request.runs) or request.runs[part.run].run_id:
        raise _invalid(f"run: {part.run} is not the position of a card among the request's {len(request.runs)} runs")
    request.runs[part.run].card.entries.extend(part.entries)
    return request


# --- a run page's pairs ----------------------------------------------------------

def board_pairs(store: RunStore, caller: Caller, card: dict, limit: int = BOARD_RUNS) -> dict:
    """The all-pairs comparison a run page shows: the run of `card` (as
    readings.run_for shows it to `caller`) with the first `limit` runs by
    composite of its corpus version's board as `caller` may list it (the
    run itself last when it is not among them). {"result": compare_all's
    result or None, "run_ids": the runs compared, "run": the run's
    position, "note": why there is no result}. A secret tier's runs are compared for maintainers only: anyone
    else is shown that tier's board through the Ladder alone (issue 33)."""
    tier, _ = store.run_access(card["run_id"])
    if tier in SECRET_TIERS and not is_maintainer(caller):
        return _no_pairs(f"the runs of a {tier} corpus are compared by maintainers only")
    dataset = card["dataset"]
    try:
        rows = leaderboard_for(store, caller, dataset["id"], version=dataset["version"])["rows"]
    except NothingStored:  # no published run on the version yet
        rows = []
    chosen = {row["run_id"]: row.get("model_slug") for row in rows if not row.get("floor")}
    ids = list(chosen)[:limit]
    if card["run_id"] not in ids:
        ids = ids[:limit - 1] + [card["run_id"]]
        chosen[card["run_id"]] = card.get("model_slug")
    if len(ids) < MIN_RUNS:
        return _no_pairs("no other run on its corpus version's board to compare it with")
    slugs = [chosen[run_id] or run_id[:12] for run_id in ids]
    # Two runs of one model are told apart by their ids.
    names = [f"{slug} ({run_id[:8]})" if slugs.count(slug) > 1 else slug for slug, run_id in zip(slugs, ids)]
    try:
        result = _compared(store, tuple(ids), tuple(names))
    except CompareRefused as error:
        return _no_pairs(str(error))
    return {"result": result, "run_ids": ids, "run": ids.index(card["run_id"]), "note": None}


def _no_pairs(why: str) -> dict:
    return {"result": None, "run_ids": [], "run": None, "note": why}


@lru_cache(maxsize=64)
def _compared(store: RunStore, run_ids: tuple[str, ...], names: tuple[str, ...]) -> dict:
    """compare_all of stored runs with the gateway's settings; kept, as a
    stored run's statistics do not change (the page only reads it)."""
    return compare_all([stored_run(store, run_id) for run_id in run_ids], names=names)
