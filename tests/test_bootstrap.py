"""Bootstrap CIs and paired significance (SPEC §7) against sacreBLEU's own
resampling, on the statistics the run card carries."""
import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample

from champollion.eval.v1 import gateway_pb2
from apps.inputs import load_corpus, load_predictions
from gateway.card import bootstrap
from gateway.card.bootstrap import confidence_intervals, resample_counts, resampled_sums
from gateway.card.compare import ComparableRun, CompareRefused, compare_run_cards, compare_runs
from gateway.card.composite import composite_input
from gateway.card.corpus import values_from_sums
from tests.conftest import REPO, composite_statistics, evaluate, make_request
from tests.test_composite import spec_composite
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
    # Some outputs are truncated: the composite reads them at their worst.
    assert not all(entry["scores"]["adequate"] for entry in card["entries"])
    stats = composite_statistics(card)
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


# --- Intervals with sparse denominators ------------------------------------------------------

CRK = REPO / "examples" / "eng-crk"
def drawn_counts(entry_count, resamples=1000, seed=12345):
    """sacreBLEU's resampling, written out: how often each entry is drawn."""
    indices = np.random.default_rng(seed).choice(entry_count, size=(resamples, entry_count), replace=True)
    return np.stack([np.bincount(row, minlength=entry_count) for row in indices])


def composite_by_hand(card, counts):
    """Each resample's composite as SPEC §4 says, one resample at a time,
    over the metrics defined in that resample."""
    stats = composite_statistics(card)
    chrf = CHRF(word_order=2)
    composites = []
    for row in counts:
        values = {}
        for metric_id, matrix in stats.items():
            summed = row @ matrix
            if metric_id == "chrf_plus_plus":
                values[metric_id] = chrf._compute_score_from_stats(list(summed)).score
            elif summed[1] > 0:
                values[metric_id] = summed[0] / summed[1]
        composites.append(spec_composite(values, card["composite_coverage"]["profile"]))
    return np.sort(composites)


@pytest.fixture(scope="module")
def sparse_morphology_card(gateway):
    """The Plains Cree example grown to 100 entries, gold morphology on 5."""
    corpus = load_corpus(CRK / "corpus.json")
    predictions = {p.id: p for p in load_predictions(CRK / "predictions.jsonl").predictions}
    request = gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(
        id=corpus.id, source_lang=corpus.source_lang, target_lang=corpus.target_lang))
    with_gold = 0
    for index in range(100):
        original = corpus.entries[index % len(corpus.entries)]
        entry = request.corpus.entries.add()
        entry.CopyFrom(original)
        entry.id = f"{original.id}-{index}"
        if entry.morphology and with_gold < 5:
            with_gold += 1
        else:
            del entry.morphology[:]
        if original.id in predictions:
            prediction = request.predictions.add()
            prediction.CopyFrom(predictions[original.id])
            prediction.id = entry.id
    assert with_gold == 5
    return evaluate(gateway, request)


def test_composite_interval_with_gold_morphology_on_5_of_100_entries(sparse_morphology_card, run_card_validator):
    card = sparse_morphology_card
    run_card_validator.validate(card)
    assert card["composite_coverage"]["profile"] == "A"
    assert "morphological_accuracy" in card["composite_coverage"]["weights"]
    counts = drawn_counts(100)
    # Some resamples draw none of the 5 annotated entries: morphology is undefined there.
    undefined = int(((counts @ stats_of(card, "morphological_accuracy"))[:, 1] == 0).sum())
    assert undefined > 0
    interval = card["scores"]["confidence_intervals"]["composite"]
    ordered = composite_by_hand(card, counts)
    assert interval["ci_lower"] == pytest.approx(ordered[25])
    assert interval["ci_upper"] == pytest.approx(ordered[974])
    assert interval["ci_lower"] < card["scores"]["composite"] < interval["ci_upper"]
    assert not any("no confidence interval" in w for w in card["warnings"]), card["warnings"]


def test_an_interval_that_cannot_be_computed_is_named_in_the_warnings(gateway):
    """Bokmål outputs with words in 2 of 100 entries (numbers are not words):
    FST acceptance is defined, but not in resamples that draw neither; one
    difficulty tier holds a single entry."""
    entries = [{"id": f"n{i}", "reference": "Jeg leser boka i dag.", "difficulty": 5 if i == 0 else 1}
               for i in range(100)]
    predictions = [{"id": e["id"], "prediction": "Jeg leser boka i dag." if i < 2 else "2024"}
                   for i, e in enumerate(entries)]
    card = evaluate(gateway, make_request(entries, predictions, target_lang="nob"))
    undefined = int((drawn_counts(100)[:, :2].sum(axis=1) == 0).sum())
    assert 0 < undefined < 1000
    intervals = card["scores"]["confidence_intervals"]
    assert card["scores"]["fst_acceptance_rate"] == 1.0 and "fst_acceptance_rate" not in intervals
    assert (f"no confidence interval for fst_acceptance_rate: undefined in {undefined} of 1000 resamples "
            "(they draw no entry it counts)") in card["warnings"]
    # The composite re-normalises over what each resample defines: it keeps its interval.
    assert "composite" in intervals
    assert set(card["scores"]["confidence_intervals_by_tier"]) == {"1"}
    assert ("no confidence interval for exact_match_rate, chrf_plus_plus in difficulty tier 5: "
            "1 entry is too few to resample") in card["warnings"]


def test_intervals_say_why_they_are_missing():
    rates = np.zeros((50, 2))
    rates[0] = [1, 2]  # one entry with anything to count
    found = confidence_intervals({"fst_acceptance_rate": rates, "exact_match_rate": np.ones((50, 2))},
                                 {"exact_match_rate": 1.0}, 200, 3)
    undefined = int((drawn_counts(50, 200, 3)[:, 0] == 0).sum())
    assert set(found.found) == {"exact_match_rate", "composite"}
    assert found.missing == {"fst_acceptance_rate": f"undefined in {undefined} of 200 resamples "
                                                    "(they draw no entry it counts)"}
    # A metric undefined everywhere is null, not an interval to explain.
    nothing = confidence_intervals({"fst_acceptance_rate": np.zeros((50, 2))}, {}, 200, 3)
    assert nothing.found == {} and nothing.missing == {}
    one = confidence_intervals({"fst_acceptance_rate": np.zeros((1, 2)), "exact_match_rate": np.ones((1, 2))},
                               {"exact_match_rate": 1.0}, 200, 3)
    assert one.found == {}
    assert one.missing == {"exact_match_rate": "1 entry is too few to resample",
                           "composite": "1 entry is too few to resample"}


def test_compare_names_a_difference_it_cannot_test():
    rates = np.zeros((50, 2))
    rates[:2] = [[1, 2], [2, 2]]
    ids = [f"e{i}" for i in range(50)]
    baseline = ComparableRun("v", ids, {"fst_acceptance_rate": rates, "exact_match_rate": np.ones((50, 2))}, None, {})
    result = compare_runs(baseline, baseline, 300, 5)
    undefined = int((drawn_counts(50, 300, 5)[:, :2].sum(axis=1) == 0).sum())
    assert set(result["metrics"]) == {"exact_match_rate"}
    assert result["warnings"] == [f"no confidence interval for fst_acceptance_rate (difference; no paired test): "
                                  f"undefined in {undefined} of 300 resamples (they draw no entry it counts)"]
