"""Board numbers (issue 37): one format per metric, from the metric table's
`decimals`, and one per board column, in the CLI's table, the --html page
and the web board alike, so that no column shows `0.01` beside `0.003333`."""
from __future__ import annotations

import json
import re

from apps.cli.stored import BOARD_TABLE
from apps.report.render import BOARD_COLUMNS, board_rows, score_text
from champollion.core.columns import SORT_COLUMNS, SPEC_COLUMNS, REAL
from gateway.card.display import column_format, column_text, metric_text
from gateway.card.metrics import METRICS
from gateway.store import RunStore
from tests.test_store import DATASET, make_card, save


def test_formats_worked_by_hand():
    assert metric_text("chrf_plus_plus", 73.9) == "73.90"  # sacreBLEU's percentages: two decimals
    assert metric_text("ter", 21.98) == "21.98"
    assert metric_text("exact_match_rate", 0.5) == "0.5000"  # rates: four
    assert metric_text("composite", 0.82537) == "0.8254"
    assert metric_text("bleu", None) == "-"
    assert column_text("corpus_bleu", 67.0) == "67.00"  # the §9.1 column of the card's `bleu`
    assert column_text("cost_per_entry_usd", 0.01) == "1.000e-02"  # costs: 4 significant digits, always
    assert column_text("cost_per_entry_usd", 0.003333) == "3.333e-03"
    assert column_text("cost_adjusted", 19.1271) == "19.13"
    assert column_text("model_slug", "m") == "m" and column_text("rank", 2) == "2"
    assert column_text("composite_score", None, "—") == "—"


def test_every_metric_and_numeric_column_has_one_format():
    assert {row.decimals for key, row in METRICS.items() if row.scale == 100.0} == {2}
    assert {row.decimals for key, row in METRICS.items() if row.scale == 1.0} == {4}
    numeric = {column.name for column in SPEC_COLUMNS if column.kind == REAL} | set(SORT_COLUMNS)
    shown = set(BOARD_TABLE) | {key for key, _ in BOARD_COLUMNS if key in numeric}
    assert shown <= numeric
    assert [column for column in sorted(numeric) if column_format(column) is None] == []


def board_store(tmp_path) -> str:
    """Two runs whose costs and chrF++ differ in their number of digits."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore.open(url)
    for model, composite, chrf, cost in (("model-a", 0.8254, 77.96, 0.003333), ("model-b", 0.7, 73.9, 0.01)):
        save(store, make_card(model=model, composite=composite, chrf_plus_plus=chrf, cost_per_entry_usd=cost))
    store.close()
    return url


def test_the_cli_board_writes_each_column_in_one_format(cli, tmp_path):
    result = cli("leaderboard", "--dataset", DATASET, "--store", board_store(tmp_path))
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if re.match(r"\d+(–\d+)?\s+model-", line)}
    assert set(rows) == {"model-a", "model-b"}
    assert "77.96" in rows["model-a"] and "73.90" in rows["model-b"]
    assert "3.333e-03" in rows["model-a"] and "1.000e-02" in rows["model-b"]
    assert "0.8254" in rows["model-a"] and "0.7000" in rows["model-b"]
    assert "0.01 " not in result.stdout and "0.003333" not in result.stdout


def test_the_pages_cells_are_the_clis_texts(cli, tmp_path):
    """The --html page and the web board read board_rows's texts."""
    rows = json.loads(cli("leaderboard", "--dataset", DATASET, "--json", "--store", board_store(tmp_path)).stdout)
    shown = board_rows(rows)
    for row, page_row in zip(rows, shown):
        cells = {key: text for key, _, text in page_row["cells"]}
        assert cells["chrf_plus_plus"] == column_text("chrf_plus_plus", row["chrf_plus_plus"])
        assert cells["cost_per_entry_usd"] == column_text("cost_per_entry_usd", row["cost_per_entry_usd"])
        assert cells["semantic_score"] == "—"  # none: the pages' dash
    assert [dict((k, t) for k, _, t in r["cells"])["cost_per_entry_usd"] for r in shown] == ["3.333e-03", "1.000e-02"]


def test_the_pages_score_tables_write_a_metric_as_the_cli_does():
    """The report's, the --html board's and the web run page's scores tables."""
    assert score_text(73.9, "chrf_plus_plus") == "73.90" == metric_text("chrf_plus_plus", 73.9)
    assert score_text(0.5, "composite") == "0.5000" and score_text(0.0033333, "exact_match_rate") == "0.0033"
    assert score_text(12, "exact_matches") == "12"  # a count stays whole
    assert score_text("fluent", "quality_tier") == "fluent" and score_text(None, "bleu") == "—"
