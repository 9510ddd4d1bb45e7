"""The gateway's merge of the families' answers (gateway/server/merge.py):
per metric, every entry's statistics as one matrix in corpus order, batch
after batch from the run's spill."""
from __future__ import annotations

import numpy as np
import pytest

from champollion.eval.v1 import family_pb2
from gateway.server.merge import merge_statistics
from gateway.server.spill import RunSpill


def _answer(rows: dict[str, list[list[float]]]) -> family_pb2.ScoreBatchResponse:
    """A surface answer whose entry i has rows[metric][i] for each metric."""
    response = family_pb2.ScoreBatchResponse(family="surface")
    for index in range(len(next(iter(rows.values())))):
        entry = response.entries.add(id=f"e{index}")
        for metric_id, values in rows.items():
            entry.stats[metric_id].values.extend(values[index])
    return response


def test_statistics_are_one_matrix_per_metric_in_corpus_order(tmp_path):
    with RunSpill(tmp_path) as spill:
        # batches stored out of order: the merge reads them in batch order
        spill.add_response("surface", 1, _answer({"bleu": [[5, 6]], "ter": [[7, 8, 9]]}))
        spill.add_response("surface", 0, _answer({"bleu": [[1, 2], [3, 4]], "ter": [[1, 1, 1], [2, 2, 2]]}))
        merged = merge_statistics(spill, ["surface"], 3)
    assert merged.stats["bleu"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert merged.stats["ter"].tolist() == [[1, 1, 1], [2, 2, 2], [7, 8, 9]]
    assert merged.stats["bleu"].dtype == np.float64 and merged.sources == {"bleu": "surface", "ter": "surface"}


def test_a_batch_whose_rows_differ_in_length_is_refused_by_family_and_metric(tmp_path):
    with RunSpill(tmp_path) as spill:
        spill.add_response("surface", 0, _answer({"bleu": [[1, 2], [3, 4, 5]]}))
        with pytest.raises(ValueError, match="surface returned bleu statistics of 2 and 3 values in one batch"):
            merge_statistics(spill, ["surface"], 2)


def _values(family: str, values: list[dict]) -> family_pb2.ScoreBatchResponse:
    response = family_pb2.ScoreBatchResponse(family=family)
    for index, entry_values in enumerate(values):
        response.entries.add(id=f"e{index}").values.update(entry_values)
    return response


def test_an_entrys_scores_are_the_first_familys_value_or_a_plugins():
    from google.protobuf import struct_pb2

    from champollion.core.run_card import struct_to_dict
    from gateway.server.merge import merge_entry_scores

    responses = {
        "surface": _values("surface", [{"shared": 1.0, "equivalent_match_rate": 0.5, "note": {"a": 1}}, {}]),
        "semantic": _values("semantic", [{"semantic_score": 0.7}, {"semantic_score": 0.6}]),
        "behavioral": _values("behavioral", [{"shared": 2.0, "note": {"b": 2}}, {"shared": 3.0}]),
        # a language plugin's values override the universal ones (PLUGIN_OVERRIDES)
        "structural": _values("structural", [{"equivalent_match_rate": 0.9, "semantic_score": 0.2}, {}]),
    }
    scores = [struct_pb2.Struct(), struct_pb2.Struct()]
    merge_entry_scores(responses, scores)
    assert struct_to_dict(scores[0]) == {"equivalent_match_rate": 0.9, "note": {"a": 1}, "semantic_score": 0.2,
                                         "shared": 1.0}  # surface's note whole, not merged with behavioral's
    assert struct_to_dict(scores[1]) == {"semantic_score": 0.6, "shared": 3.0}
