"""Paired approximate randomization in `compare` (method "ar") against
sacreBLEU's own `PairedTest(test_type="ar")`, on the statistics the run
cards carry."""
import grpc
import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from champollion.eval.v1 import gateway_pb2
from apps.client.upload import compare_parts
from gateway.card.compare import ComparableRun, compare_run_cards, compare_runs
from gateway.card.randomization import swap_masks
from champollion.core.run_card import message_to_dict, run_card_to_proto
from tests.conftest import evaluate, make_request
from tests.test_bootstrap import degraded
from tests.test_surface_corpus import synthetic_corpus

# Our metric id -> sacreBLEU's name for it and the metric object.
SACREBLEU = {
    "chrf_plus_plus": ("chrF2++", lambda: CHRF(word_order=2)),
    "bleu": ("BLEU", BLEU),
    "ter": ("TER", TER),
}
TRIALS = 2000


@pytest.fixture(scope="module")
def pair(gateway):
    """Two runs over one corpus, the system a little worse (a borderline
    difference, so that the p-values are not all at their floor)."""
    entries, predictions = synthetic_corpus("spa", 200, seed=21)
    other = degraded(predictions, np.random.default_rng(0), 0.04)
    baseline = evaluate(gateway, make_request(entries, predictions))
    system = evaluate(gateway, make_request(entries, other))
    texts = ([p["prediction"] for p in predictions], [p["prediction"] for p in other],
             [[e["reference"] for e in entries]])
    return baseline, system, texts


def sacrebleu_ar(texts, trials: int, seed: int, monkeypatch) -> dict:
    """sacreBLEU's paired AR on the texts: metric id -> (system score, p-value)."""
    baseline, system, references = texts
    monkeypatch.setenv("SACREBLEU_SEED", str(seed))
    test = PairedTest([("baseline", baseline), ("system", system)],
                      {name: build() for name, build in SACREBLEU.values()}, references,
                      test_type="ar", n_samples=trials)
    _, results = test()
    return {m: (results[name][1].score, results[name][1].p_value) for m, (name, _) in SACREBLEU.items()}


@pytest.mark.parametrize("seed", [12345, 7])
def test_ar_p_values_equal_sacrebleu_paired_ar(pair, monkeypatch, seed):
    baseline, system, texts = pair
    ours = compare_run_cards(baseline, system, TRIALS, seed, "ar")
    expected = sacrebleu_ar(texts, TRIALS, seed, monkeypatch)
    for metric_id, (score, p_value) in expected.items():
        assert ours["metrics"][metric_id]["system"] == pytest.approx(score, abs=1e-9)
        assert ours["metrics"][metric_id]["p_value"] == p_value, metric_id
    assert any(0.01 < ours["metrics"][m]["p_value"] < 0.9 for m in expected)
    assert ours["test"]["method"] == "ar" and ours["test"]["samples"] == TRIALS
    assert "bootstrap" not in ours
    assert all(m["difference_ci"] is None for m in ours["metrics"].values())


def test_ar_is_deterministic_for_a_seed(pair):
    baseline, system, _ = pair
    first = compare_run_cards(baseline, system, 500, 3, "ar")
    assert compare_run_cards(baseline, system, 500, 3, "ar") == first
    other_seed = compare_run_cards(baseline, system, 500, 4, "ar")
    assert any(other_seed["metrics"][m]["p_value"] != first["metrics"][m]["p_value"] for m in SACREBLEU)


def test_the_rpc_answers_the_same_ar_comparison(pair, gateway):
    baseline, system, _ = pair
    request = gateway_pb2.CompareRequest(baseline=run_card_to_proto(baseline), system=run_card_to_proto(system),
                                         resamples=300, seed=11, method="ar")
    answer = message_to_dict(gateway.Compare(request, timeout=60))
    expected = compare_run_cards(baseline, system, 300, 11, "ar")
    assert answer["test"] == expected["test"] and answer["bootstrap"] is None
    for metric_id, comparison in expected["metrics"].items():
        assert answer["metrics"][metric_id]["p_value"] == comparison["p_value"]
        assert answer["metrics"][metric_id]["significant"] == comparison["significant"]
        assert answer["metrics"][metric_id]["difference_ci"] is None
    # In parts (the CLI's way), the method travels in the first.
    assert message_to_dict(gateway.CompareUpload(compare_parts(request, entries_per_part=50), timeout=60)) == answer
    # No trials asked for: sacreBLEU's default, 10,000.
    request.resamples = 0
    assert gateway.Compare(request, timeout=60).test.samples == 10_000


def test_bs_stays_the_default_and_says_so(pair, gateway):
    baseline, system, _ = pair
    request = gateway_pb2.CompareRequest(baseline=run_card_to_proto(baseline), system=run_card_to_proto(system),
                                         resamples=200)
    answer = message_to_dict(gateway.Compare(request, timeout=60))
    assert answer["test"]["method"] == "bs" and answer["test"]["samples"] == 200
    assert answer["bootstrap"]["resamples"] == 200
    assert answer["metrics"]["bleu"] == message_to_dict(
        gateway.Compare(gateway_pb2.CompareRequest(baseline=request.baseline, system=request.system,
                                                   resamples=200, method="bs"), timeout=60))["metrics"]["bleu"]
    assert answer["metrics"]["bleu"]["difference_ci"] is not None


@pytest.mark.parametrize("method", ["AR", "paired-ar", "bootstrap"])
def test_an_unknown_method_is_invalid_argument(gateway, method):
    request = gateway_pb2.CompareRequest(baseline_run_id="a", system_run_id="b", method=method)
    with pytest.raises(grpc.RpcError) as refused:
        gateway.Compare(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == f"method must be one of bs, ar (empty: bs), got {method!r}"


def test_masks_do_not_depend_on_the_chunk_size():
    """Large corpora draw fewer trials at a time (bounded memory); the masks
    are those of sacreBLEU's single draw, even when a chunk ends inside one
    of the generator's 32-bit words."""
    expected = np.random.default_rng(9).integers(2, size=(130, 101), dtype=bool)
    for chunk_bytes in (10**9, 9 * 101 * 3, 9 * 101 * 7, 9 * 101):
        chunks = list(swap_masks(101, 130, 9, chunk_bytes))
        assert np.array_equal(np.vstack(chunks), expected)
    assert len(list(swap_masks(101, 130, 9, 9 * 101 * 7))) == 19


def rates(rows: list[list[int]]) -> np.ndarray:
    return np.asarray(rows, dtype=float)


def test_identical_runs_are_never_significant():
    """sacreBLEU's AR counts trials strictly above the observed difference: two
    runs with the same statistics get p = 1/(trials+1); the difference is 0,
    so it is not called significant."""
    ids = [f"e{i}" for i in range(40)]
    stats = {"exact_match_rate": rates([[i % 2, 1] for i in range(40)])}
    run = ComparableRun("v", ids, stats, None, {})
    result = compare_runs(run, run, 999, 5, "ar")["metrics"]["exact_match_rate"]
    assert result["p_value"] == 1 / 1000 and result["difference"] == 0 and not result["significant"]


def test_ar_on_rates_and_composite_is_counting_swapped_outcomes():
    """Exact match on 60 entries: both right on 0-9, only the system on 10-23,
    only the baseline on 24-33. The p-value (of the rate and of a composite
    of it alone) is what swapping outcomes trial by trial by hand gives."""
    ids = [f"e{i}" for i in range(60)]
    right_a, right_b = np.zeros(60, dtype=bool), np.zeros(60, dtype=bool)
    right_a[:10] = right_b[:10] = True
    right_b[10:24] = right_a[24:34] = True

    def run(right):
        return ComparableRun("v", ids, {"exact_match_rate": rates([[r, 1] for r in right])}, right.sum() / 60,
                             {"exact_match_rate": 1.0})
    result = compare_runs(run(right_a), run(right_b), 400, 2, "ar")
    masks = np.random.default_rng(2).integers(2, size=(400, 60), dtype=bool)
    # Pseudo-system A: the baseline's outcome where the mask is True, the system's elsewhere.
    pseudo_a = np.where(masks, right_a, right_b).sum(axis=1) / 60
    pseudo_b = np.where(masks, right_b, right_a).sum(axis=1) / 60
    observed = abs(right_b.sum() / 60 - right_a.sum() / 60)
    expected = (np.sum(np.abs(pseudo_b - pseudo_a) > observed) + 1) / 401
    assert 0.2 < expected < 0.9
    for name in ("exact_match_rate", "composite"):
        assert result["metrics"][name]["p_value"] == expected
        assert not result["metrics"][name]["significant"]
    assert result["metrics"]["composite"]["difference"] == pytest.approx(4 / 60)


def test_a_metric_undefined_for_a_pseudo_system_has_no_ar_test():
    """fst_acceptance_rate counted on one entry each side, different entries:
    a trial that gives neither entry to one pseudo-system leaves it undefined."""
    ids = [f"e{i}" for i in range(30)]
    fst_a, fst_b = np.zeros((30, 2)), np.zeros((30, 2))
    fst_a[0], fst_b[1] = [1, 2], [2, 2]
    same = rates([[1, 1]] * 30)
    baseline = ComparableRun("v", ids, {"fst_acceptance_rate": fst_a, "exact_match_rate": same}, None, {})
    system = ComparableRun("v", ids, {"fst_acceptance_rate": fst_b, "exact_match_rate": same}, None, {})
    result = compare_runs(baseline, system, 200, 5, "ar")
    masks = np.random.default_rng(5).integers(2, size=(200, 30), dtype=bool)
    # Pseudo-system A takes entry 0 from the baseline when masked, entry 1 from the system when not.
    undefined = int((~masks[:, 0] & masks[:, 1]).sum() + (masks[:, 0] & ~masks[:, 1]).sum())
    assert set(result["metrics"]) == {"exact_match_rate"}
    assert result["warnings"] == [(f"no paired test for fst_acceptance_rate: undefined in {undefined} of 200 "
                                   "randomization trials (a pseudo-system took no entry it counts)")]


def test_compare_runs_refuses_an_unknown_method():
    run = ComparableRun("v", ["e0"], {"exact_match_rate": rates([[1, 1]])}, None, {})
    with pytest.raises(ValueError, match="unknown comparison method 'xx'"):
        compare_runs(run, run, 10, 1, "xx")
