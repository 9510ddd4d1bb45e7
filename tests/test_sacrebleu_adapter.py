"""Pins the sacreBLEU internals the project relies on (all in one adapter),
on the compiled path and on sacreBLEU's own (CHAMPOLLION_PURE_SACREBLEU=1)."""
import pytest
import sacrebleu

from champollion.core import sacrebleu_adapter
from champollion.core.sacrebleu_adapter import (
    PURE_SACREBLEU_ENV,
    build_metric,
    merged_signature,
    reference_count,
    reference_streams,
    score_from_statistics,
    segment_statistics,
    signature,
)

HYPOTHESES = ["The cat sat on the mat.", "A dog barked loudly at night", ""]
REFERENCES = ["The cat is sitting on the mat.", "The dog barked at night.", "Nothing was said."]
# Further references for the same three entries: 3, 2 and 1 references in all.
SECOND = ["A cat sat on the mat.", "A dog was barking at night."]
THIRD = ["On the mat sat the cat."]
METRICS = ["chrf_plus_plus", "bleu", "ter"]


@pytest.fixture(params=["native", "pure"])
def path(request, monkeypatch):
    """Each test on both paths: sacreBLEU's Python and the compiled statistics (built by make)."""
    if request.param == "pure":
        monkeypatch.setenv(PURE_SACREBLEU_ENV, "1")
    else:
        assert sacrebleu_adapter.native_statistics_enabled(), "champollion.core.native._stats is not built (g++?)"
    return request.param


@pytest.mark.parametrize("metric_id", METRICS)
def test_summed_segment_statistics_give_the_corpus_score(metric_id, path):
    metric = build_metric(metric_id)
    stats = segment_statistics(metric, HYPOTHESES, [[reference] for reference in REFERENCES])
    summed = [sum(column) for column in zip(*stats)]
    expected = metric.corpus_score(HYPOTHESES, [REFERENCES]).score
    assert score_from_statistics(metric, summed) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("metric_id", METRICS)
def test_several_references_give_the_corpus_score_of_several_streams(metric_id, path):
    metric = build_metric(metric_id)
    references = [[REFERENCES[0], SECOND[0], THIRD[0]], [REFERENCES[1], SECOND[1]], [REFERENCES[2]]]
    stats = segment_statistics(metric, HYPOTHESES, references)
    summed = [sum(column) for column in zip(*stats)]
    streams = [REFERENCES, SECOND + [None], THIRD + [None, None]]
    assert reference_streams(references) == streams
    expected = metric.corpus_score(HYPOTHESES, streams).score
    assert score_from_statistics(metric, summed) == pytest.approx(expected, abs=1e-9)
    # A further reference can only help: scores differ from the first stream's alone.
    single = segment_statistics(metric, HYPOTHESES, [[reference] for reference in REFERENCES])
    assert stats != single


@pytest.mark.parametrize("metric_id", ["chrf_plus_plus", "ter"])
def test_one_segment_statistics_give_the_sentence_score(metric_id, path):
    metric = build_metric(metric_id)
    stats = segment_statistics(metric, HYPOTHESES[:1], [REFERENCES[:1]])[0]
    expected = metric.sentence_score(HYPOTHESES[0], [REFERENCES[0]]).score
    assert score_from_statistics(metric, stats) == pytest.approx(expected, abs=1e-9)


def test_every_entry_needs_a_reference():
    with pytest.raises(ValueError, match="at least one reference"):
        segment_statistics(build_metric("ter"), ["a"], [[]])
    with pytest.raises(ValueError, match="2 hypotheses but 1 reference lists"):
        segment_statistics(build_metric("ter"), ["a", "b"], [["a"]])


def test_signatures_name_configuration_and_version():
    assert signature(build_metric("chrf_plus_plus")) == (
        f"nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:{sacrebleu.__version__}"
    )
    assert "tok:ko-mecab" in signature(build_metric("bleu", bleu_tokenizer="ko-mecab"))
    assert "asian:yes" in signature(build_metric("ter", ter_asian_support=True))


@pytest.mark.parametrize("metric_id", METRICS)
def test_signature_says_nrefs_as_sacrebleu_does(metric_id):
    """sacreBLEU learns nrefs from the reference streams: N when every entry
    has N references, 'var' when they differ."""
    for references, streams in [
        ([["a b", "b a"], ["c d", "d c"]], [["a b", "c d"], ["b a", "d c"]]),
        ([["a b", "b a"], ["c d"]], [["a b", "c d"], ["b a", None]]),
    ]:
        kind = type(build_metric(metric_id))
        metric = kind()  # a fresh object: corpus_score sets its num_refs
        metric.corpus_score(["a b", "c d"], streams)
        assert signature(kind(), reference_count(references)) == metric.get_signature().format()
    assert reference_count([["a"], ["b", "c"]]) == "var"
    assert "nrefs:var" in signature(build_metric(metric_id), "var")
    assert "nrefs:3" in signature(build_metric(metric_id), 3)


def test_batches_with_different_nrefs_merge_to_var():
    one, two = (signature(build_metric("bleu"), n) for n in (1, 2))
    assert merged_signature(None, one) == one
    assert merged_signature(one, one) == one
    assert merged_signature(one, two) == signature(build_metric("bleu"), "var")
    assert merged_signature(merged_signature(one, two), one) == signature(build_metric("bleu"), "var")
    # Anything else that differs keeps the first answer, as before.
    assert merged_signature(one, signature(build_metric("bleu", bleu_tokenizer="char"), 2)) == one
    assert merged_signature("fst:a|version:1", "fst:b|version:1") == "fst:a|version:1"
