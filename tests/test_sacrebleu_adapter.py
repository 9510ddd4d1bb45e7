"""Pins the sacreBLEU internals the project relies on (all in one adapter)."""
import pytest
import sacrebleu

from champollion.sacrebleu_adapter import (
    build_metric,
    score_from_statistics,
    segment_statistics,
    signature,
)

HYPOTHESES = ["The cat sat on the mat.", "A dog barked loudly at night", ""]
REFERENCES = ["The cat is sitting on the mat.", "The dog barked at night.", "Nothing was said."]


@pytest.mark.parametrize("metric_id", ["chrf_plus_plus", "bleu", "ter"])
def test_summed_segment_statistics_give_the_corpus_score(metric_id):
    metric = build_metric(metric_id)
    stats = segment_statistics(metric, HYPOTHESES, REFERENCES)
    summed = [sum(column) for column in zip(*stats)]
    expected = metric.corpus_score(HYPOTHESES, [REFERENCES]).score
    assert score_from_statistics(metric, summed) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("metric_id", ["chrf_plus_plus", "ter"])
def test_one_segment_statistics_give_the_sentence_score(metric_id):
    metric = build_metric(metric_id)
    stats = segment_statistics(metric, HYPOTHESES[:1], REFERENCES[:1])[0]
    expected = metric.sentence_score(HYPOTHESES[0], [REFERENCES[0]]).score
    assert score_from_statistics(metric, stats) == pytest.approx(expected, abs=1e-9)


def test_signatures_name_configuration_and_version():
    assert signature(build_metric("chrf_plus_plus")) == (
        f"nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:{sacrebleu.__version__}"
    )
    assert "tok:ko-mecab" in signature(build_metric("bleu", bleu_tokenizer="ko-mecab"))
    assert "asian:yes" in signature(build_metric("ter", ter_asian_support=True))
