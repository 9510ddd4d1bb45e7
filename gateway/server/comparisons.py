"""Comparisons of stored runs and cards as the gateway answers them: the
paired test's settings of Compare and ComparePairs, Compare and
ComparePairs themselves (issue 34) and the all-pairs comparison of a run
with its board that the web front's run page shows.

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

from champollion.core.limits import MAX_ID_CHARS, MAX_RESAMPLES, shown
from champollion.core.run_card import dict_to_message
from champollion.core.sampling import BOOTSTRAP, DEFAULT_SEED, METHODS
from champollion.core.tiers import SECRET_TIERS
from champollion.eval.v1 import gateway_pb2
from gateway.card.compare import DEFAULT_SAMPLES, DIFFERENCE_CI, ComparableRun, CompareRefused, compare_runs
from gateway.card.metrics import COMPARED_METRICS, METRIC_NAMES
from gateway.card.multiplicity import CORRECTIONS, HOLM
from gateway.card.pairs import COMPOSITE, MIN_RUNS, DifferentVersions, check_tie_threshold, compare_all
from gateway.server.access import CompareSide, check_compare, is_maintainer
from gateway.server.callers import Caller
from gateway.server.refusals import InvalidRequest, Precondition
from gateway.server.readings import leaderboard_for, shown_compared_version
from gateway.store import RunStore
from gateway.store.errors import NothingStored

# ComparePairs compares N(N-1)/2 pairs: 32 runs are 496 pairs (a WMT
# language pair has about 20 systems).
MAX_PAIRED_RUNS = 32
# The runs of its board a run page compares a run with (the first by composite).
BOARD_RUNS = 10


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
    ComparePairsRequest; refusals.InvalidRequest naming the field."""
    seed = request.seed if request.HasField("seed") else None
    if (seed is not None and seed < 0) or not 0 <= request.resamples <= MAX_RESAMPLES:
        raise InvalidRequest(f"seed must not be negative and resamples must be 0 (default) to {MAX_RESAMPLES}")
    method = request.method or BOOTSTRAP
    if method not in METHODS:
        raise InvalidRequest(f"method must be one of {', '.join(METHODS)} (empty: bs), got {shown(request.method)}")
    return TestSettings(method, seed, request.resamples)


def stored_run(store: RunStore, run_id: str) -> ComparableRun:
    """What a comparison reads of a stored run (`run_id` or a unique prefix)."""
    return ComparableRun.from_stored(*store.comparable_stats(run_id))


def _side(store: RunStore | None, name: str, run_id: str) -> CompareSide:
    """A side as access.check_compare weighs it: a stored run's tier and submitter."""
    tier, submitted_by = store.run_access(run_id) if run_id else (None, None)
    return CompareSide(name, run_id, tier, submitted_by)


def _comparable(store: RunStore | None, run_id: str, card) -> ComparableRun:
    """A side's statistics: the stored run `run_id`, else the card sent."""
    return stored_run(store, run_id) if run_id else ComparableRun.from_proto(card)


def compare(store: RunStore | None, caller: Caller, request: gateway_pb2.CompareRequest) -> gateway_pb2.CompareResponse:
    """Compare's answer: the paired test of the system against the baseline,
    each a stored run (by id) or a card. Who may compare what is checked
    before any statistics are read (a stored side read as GetRun reads it;
    on a secret tier a submitter's own stored runs, the gateway's seed and
    samples). Refused (refusals.py): InvalidRequest (settings), Forbidden,
    Precondition (runs that cannot be compared). `store` None: both sides
    are cards."""
    settings = paired_test_settings(request)
    sides = [_side(store, name, getattr(request, f"{name}_run_id")) for name in ("baseline", "system")]
    check_compare(caller, sides, settings.method, settings.seed, settings.resamples)
    baseline = _comparable(store, request.baseline_run_id, request.baseline)
    system = _comparable(store, request.system_run_id, request.system)
    try:
        # Bootstrap resamples, or randomization trials.
        result = compare_runs(baseline, system, settings.samples, settings.seed_used, settings.method)
    except CompareRefused as error:
        raise Precondition(str(error)) from None
    if store is not None:  # a secret version by its public id (issue 33)
        result["dataset_version"] = shown_compared_version(store, caller, result["dataset_version"])
    return dict_to_message(result, gateway_pb2.CompareResponse())


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
        raise InvalidRequest(f"metrics: {shown(name)} is not a metric the paired test compares (those are: "
                       f"{', '.join([*COMPARED_METRICS, COMPOSITE])}, or their short names)")
    return key


def pairs_settings(request: gateway_pb2.ComparePairsRequest) -> PairsSettings:
    """A ComparePairsRequest's settings, every one checked before any run
    is read; refusals.InvalidRequest naming the field."""
    if not MIN_RUNS <= len(request.runs) <= MAX_PAIRED_RUNS:
        raise InvalidRequest(f"runs: all pairs compares {MIN_RUNS} to {MAX_PAIRED_RUNS} runs, got {len(request.runs)}")
    for index, run in enumerate(request.runs):
        if not run.run_id and not run.HasField("card"):
            raise InvalidRequest(f"runs[{index}]: give a stored run's run_id or a card")
        if len(run.name) > MAX_ID_CHARS:
            raise InvalidRequest(f"runs[{index}].name: at most {MAX_ID_CHARS} characters, got {len(run.name)}")
    test = paired_test_settings(request)
    correction = request.correction or HOLM
    if correction not in CORRECTIONS:
        raise InvalidRequest(f"correction: must be one of {', '.join(CORRECTIONS)} (empty: {HOLM}), "
                       f"got {shown(request.correction)}")
    try:
        check_tie_threshold(request.tie_threshold)
    except ValueError as error:
        raise InvalidRequest(f"tie_threshold: {error}") from None
    metric_ids = list(dict.fromkeys(_metric_id(name) for name in request.metrics)) or None
    return PairsSettings(test, correction, request.tie_threshold, metric_ids)


def _name(index: int, run: gateway_pb2.PairedRun) -> str:
    return run.name or run.run_id or run.card.run_id[:12] or f"#{index + 1}"


def compare_pairs(store: RunStore | None, caller: Caller,
                  request: gateway_pb2.ComparePairsRequest) -> gateway_pb2.ComparePairsResponse:
    """ComparePairs's answer. Refused (refusals.py): InvalidRequest
    (settings), Forbidden (a run `caller` may not compare, named),
    Precondition (runs that cannot be compared: different corpus
    versions, each named). `store` None: a gateway without one (every run
    is then a card; the servicer answers run ids UNAVAILABLE)."""
    settings = pairs_settings(request)
    sides = [_side(store, f"#{index + 1}", run.run_id) for index, run in enumerate(request.runs)]
    test = settings.test
    check_compare(caller, sides, test.method, test.seed, test.resamples, what="ComparePairs")
    runs = [_comparable(store, run.run_id, run.card) for run in request.runs]

    def shown_version(version: str) -> str:
        return version if store is None else shown_compared_version(store, caller, version)

    try:
        result = compare_all(runs, test.resamples or None, test.seed_used, test.method, settings.correction,
                             settings.tie_threshold, settings.metric_ids,
                             [_name(index, run) for index, run in enumerate(request.runs)])
    except DifferentVersions as error:
        raise Precondition(error.worded(shown_version)) from None
    except CompareRefused as error:
        raise Precondition(str(error)) from None
    result["dataset_version"] = shown_version(result["dataset_version"])
    result["test"]["difference_ci"] = DIFFERENCE_CI[test.method]
    return dict_to_message(result, gateway_pb2.ComparePairsResponse())


def add_pairs_part(request: gateway_pb2.ComparePairsRequest | None,
                   part: gateway_pb2.ComparePairsPart) -> gateway_pb2.ComparePairsRequest:
    """ComparePairsUpload's request so far (None before the first part)
    with `part` added; refusals.InvalidRequest for a part out of place."""
    if request is None:
        if not part.HasField("request"):
            raise InvalidRequest("request: the first part of the upload carries the request")
        return part.request
    if part.HasField("request"):
        raise InvalidRequest("request: only the first part of the upload carries it")
    if not 0 <= part.run < len(request.runs) or request.runs[part.run].run_id:
        raise InvalidRequest(f"run: {part.run} is not the position of a card among the request's {len(request.runs)} runs")
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
