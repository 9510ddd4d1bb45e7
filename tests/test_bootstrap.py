"""Bootstrap CIs and paired significance (SPEC §7) against sacreBLEU's own
resampling, on the statistics the run card carries."""
import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample

from gateway.card import bootstrap
from gateway.card.bootstrap import resample_counts, resampled_sums, values_from_sums
from gateway.card.compare import CompareRefused, compare_run_cards
from gateway.card.composite import composite_input
from tests.conftest import evaluate, make_request
from tests.test_surface_corpus import synthetic_corpus


def stats_of(card, metric_id):
    return np.asarray([entry["stats"][metric_id] for entry in card["entries"]], dtype=float)


@pytest.fixture(scope="module")
def run(gateway):
    entries, predictions = synthetic_corpus("spa", 120, seed=3)
    return entries, predictions, evaluate(gateway, make_request(entries, predictions, batch_size=50))


def test_resampled_corpus_scores_equal_sacrebleu_on_resampled_texts(run):
    entries, predictions, card = run
    hypotheses = [p["prediction"] for p in predictions]
    references = [e["reference"] for e in entries]
    counts = next(resample_counts(len(entries), 5, seed=11))
    indices = np.random.default_rng(11).choice(len(entries), size=(5, len(entries)), replace=True)
    for metric_id, metric in (("chrf_plus_plus", CHRF(word_order=2)), ("bleu", BLEU())):
        ours = values_from_sums(metric_id, counts @ stats_of(card, metric_id))
        for row, resample in enumerate(indices):
            expected = metric.corpus_score([hypotheses[i] for i in resample], [[references[i] for i in resample]]).score
            assert ours[row] == pytest.approx(expected, abs=1e-6)


def test_resample_counts_do_not_depend_on_the_chunk_size(monkeypatch):
    """Large corpora draw fewer resamples at a time (bounded memory); the
    resamples are the same, those of sacreBLEU's single draw."""
    indices = np.random.default_rng(7).choice(101, size=(120, 101), replace=True)
    expected = np.stack([np.bincount(row, minlength=101) for row in indices])
    assert np.array_equal(np.vstack(list(resample_counts(101, 120, 7))), expected)
    monkeypatch.setattr(bootstrap, "CHUNK_BYTES", 16 * 101 * 3)
    chunks = list(resample_counts(101, 120, 7))
    assert [len(chunk) for chunk in chunks] == [3] * 40
    assert np.array_equal(np.vstack(chunks), expected)


def test_bounds_equal_sacrebleu_percentile_points(run):
    entries, predictions, card = run
    hypotheses = [p["prediction"] for p in predictions]
    references = [[e["reference"] for e in entries]]
    for metric_id, metric in (("chrf_plus_plus", CHRF(word_order=2)), ("bleu", BLEU())):
        stats = metric._extract_corpus_statistics(hypotheses, references)
        _, scores = _bootstrap_resample(stats, metric, 1000)  # seed 12345, sacreBLEU's default
        ordered = sorted(score.score for score in scores)
        interval = card["scores"]["confidence_intervals"][metric_id]
        assert interval["ci_lower"] == pytest.approx(ordered[25], abs=1e-6)
        assert interval["ci_upper"] == pytest.approx(ordered[974], abs=1e-6)
        # ... which is the half-width sacreBLEU itself reports.
        reported = metric.corpus_score(hypotheses, references, n_bootstrap=1000)
        assert 0.5 * (interval["ci_upper"] - interval["ci_lower"]) == pytest.approx(reported._ci, abs=1e-6)


def test_card_reports_bootstrap_settings_and_every_core_interval(run):
    card = run[2]
    assert card["bootstrap"] == {"method": "percentile", "resamples": 1000, "alpha": 0.05, "seed": 12345}
    intervals = card["scores"]["confidence_intervals"]
    assert {"chrf_plus_plus", "bleu", "exact_match_rate", "composite"} <= set(intervals)
    for key in ("chrf_plus_plus", "exact_match_rate", "composite"):
        assert intervals[key]["ci_lower"] <= card["scores"][key] <= intervals[key]["ci_upper"]


def test_composite_interval_recomputes_every_metric_on_the_same_resample(run):
    card = run[2]
    weights = card["composite_coverage"]["weights"]
    stats = {m: stats_of(card, m) for m in weights}
    sums = resampled_sums(stats, 1000, 12345)
    composite = sum(w * composite_input(m, values_from_sums(m, sums[m])) for m, w in weights.items())
    ordered = np.sort(composite)
    assert card["scores"]["confidence_intervals"]["composite"]["ci_lower"] == pytest.approx(ordered[25])
    assert card["scores"]["confidence_intervals"]["composite"]["ci_upper"] == pytest.approx(ordered[974])


def test_tier_intervals(gateway):
    entries, predictions = synthetic_corpus("spa", 60, seed=5)
    for index, entry in enumerate(entries):
        entry["difficulty"] = 1 + index % 2
    card = evaluate(gateway, make_request(entries, predictions))
    by_tier = card["scores"]["confidence_intervals_by_tier"]
    assert set(by_tier) == {"1", "2"}
    assert set(by_tier["1"]) == {"chrf_plus_plus", "exact_match_rate"}


def test_intervals_shrink_as_the_corpus_grows(gateway):
    widths = []
    for size in (40, 400):
        entries, predictions = synthetic_corpus("spa", size, seed=9)
        card = evaluate(gateway, make_request(entries, predictions, batch_size=200))
        interval = card["scores"]["confidence_intervals"]["chrf_plus_plus"]
        widths.append(interval["ci_upper"] - interval["ci_lower"])
    assert widths[1] < widths[0] / 2


def degraded(predictions, rng, share):
    """Drops a word from a share of the predictions."""
    out = []
    for p in predictions:
        words = p["prediction"].split()
        if words and rng.random() < share:
            words.pop(rng.integers(len(words)))
        out.append({"id": p["id"], "prediction": " ".join(words)})
    return out


def test_paired_p_values_equal_sacrebleu_paired_bootstrap(gateway):
    entries, predictions = synthetic_corpus("spa", 200, seed=21)
    other = degraded(predictions, np.random.default_rng(0), 0.04)
    baseline = evaluate(gateway, make_request(entries, predictions))
    system = evaluate(gateway, make_request(entries, other))
    result = compare_run_cards(baseline, system, 1000, 12345)
    references = [[e["reference"] for e in entries]]
    test = PairedTest(
        [("baseline", [p["prediction"] for p in predictions]), ("system", [p["prediction"] for p in other])],
        {"chrf": CHRF(word_order=2), "bleu": BLEU()}, references, test_type="bs", n_samples=1000,
    )
    _, sacre = test()
    assert result["metrics"]["chrf_plus_plus"]["p_value"] == pytest.approx(sacre["chrF2++"][1].p_value)
    assert result["metrics"]["bleu"]["p_value"] == pytest.approx(sacre["BLEU"][1].p_value)
    assert result["metrics"]["chrf_plus_plus"]["system"] == pytest.approx(sacre["chrF2++"][1].score)
    # A borderline difference, so that the p-values compared are not both at their floor.
    assert 0.01 < result["metrics"]["chrf_plus_plus"]["p_value"] < 0.9


def test_a_real_five_point_difference_is_significant_and_zero_is_not(gateway):
    entries, predictions = synthetic_corpus("spa", 200, seed=33)
    worse = degraded(predictions, np.random.default_rng(1), 0.7)
    card = evaluate(gateway, make_request(entries, predictions))
    worse_card = evaluate(gateway, make_request(entries, worse))
    difference = worse_card["scores"]["chrf_plus_plus"] - card["scores"]["chrf_plus_plus"]
    assert difference < -5
    result = compare_run_cards(card, worse_card, 1000, 12345)["metrics"]["chrf_plus_plus"]
    assert result["significant"] and result["p_value"] < 0.05
    assert result["difference_ci"]["ci_upper"] < 0
    same = compare_run_cards(card, card, 1000, 12345)["metrics"]["chrf_plus_plus"]
    assert not same["significant"] and same["difference"] == 0


def test_compare_refuses_different_corpus_versions(gateway):
    entries, predictions = synthetic_corpus("spa", 20, seed=2)
    card = evaluate(gateway, make_request(entries, predictions))
    entries[0]["reference"] += " más"
    edited = evaluate(gateway, make_request(entries, predictions))
    with pytest.raises(CompareRefused, match="different corpus versions"):
        compare_run_cards(card, edited, 100, 12345)
