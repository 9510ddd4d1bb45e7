"""Boards that say what is distinguishable (issue 34): each ranked row's
interval, rank range and significance cluster, computed from the stored
per-entry statistics by the paired tests of every pair (compare_all), on
SQLite and PostgreSQL; the rows that take no part null; the CLI's table and
`--json`, and the web board showing the same.

The runs are exact-match runs of 200 entries with the composite over exact
match alone: A right on the first 120 entries, B on the first 118 (two
entries apart: not significantly different), C on the first 40 (far below
both)."""
from __future__ import annotations

import json
import re
from html import unescape

import numpy as np
import pytest
from starlette.testclient import TestClient

from apps.client import rank_text
from apps.web.app import WebSettings, create_app
from gateway.card.compare import ComparableRun
from gateway.card.pairs import compare_all
from gateway.server import board_ranks
from gateway.server.callers import Caller
from gateway.server.board_ranks import MAX_RANKED_RUNS, ranked_group, unranked_note
from gateway.server.readings import leaderboard_for
from gateway.store import RunStore
from tests.test_store import DATASET, make_card
from tests.web_fixtures import write_tokens

ENTRIES = 200
RIGHT = {"A": 120, "B": 118, "C": 40}
# A content hash, as real corpus versions are (the web front looks registered versions up by it).
VERSION = "5e" * 32
MAINTAINER = Caller("alice", "maintainer", "Leaderboard")
FIELDS = ("rank_range", "ci", "cluster")


def right_first(count: int) -> np.ndarray:
    return np.arange(ENTRIES) < count


def entries(right: np.ndarray) -> list[dict]:
    return [{"id": f"e{i:03d}", "scores": {"exact_match_rate": float(hit)},
             "stats": {"exact_match_rate": [float(hit), 1.0]}} for i, hit in enumerate(right)]


def store_run(store: RunStore, model: str, right: np.ndarray, **card) -> str:
    rate = float(right.mean())
    floor_kind = card.pop("floor_kind", None)
    made = make_card(model=model, composite=card.pop("composite", rate),
                     metrics=card.pop("metrics", ("exact_match_rate",)), exact_match_rate=rate, version=VERSION,
                     **card)
    store.save_run(made, [entries(right)], floor_kind=floor_kind)
    return made["run_id"]


def comparable(right: np.ndarray) -> ComparableRun:
    """The run as compare_all reads it, built here without the store."""
    ids = [f"e{i:03d}" for i in range(ENTRIES)]
    stats = {"exact_match_rate": np.column_stack([right.astype(float), np.ones(ENTRIES)])}
    return ComparableRun("v1", ids, stats, float(right.mean()), {"exact_match_rate": 1.0})


@pytest.fixture
def store(store_url):
    opened = RunStore.open(store_url)
    yield opened
    opened.close()


@pytest.fixture
def three(store) -> dict[str, str]:
    return {name: store_run(store, f"model-{name}", right_first(count)) for name, count in RIGHT.items()}


def by_model(board: dict) -> dict[str, dict]:
    return {row["model_slug"].removeprefix("model-"): row for row in board["rows"]}


def test_two_close_runs_share_a_rank_range_and_a_cluster_the_far_one_not(store, three):
    board = leaderboard_for(store, MAINTAINER, DATASET)
    rows = by_model(board)
    assert [row["model_slug"] for row in board["rows"]] == ["model-A", "model-B", "model-C"]
    assert [rows[name]["rank_range"] for name in "ABC"] == [[1, 2], [1, 2], [3, 3]]
    assert rows["A"]["cluster"] == rows["B"]["cluster"] == 1 and rows["C"]["cluster"] == 2
    assert board["ranks_note"] is None
    # Exactly what compare_all gives for the same runs (built without the store) on the composite.
    expected = compare_all([comparable(right_first(RIGHT[name])) for name in "ABC"],
                           metric_ids=["composite"], p_values="normal")["metrics"]["composite"]
    assert [rows[name]["rank_range"] for name in "ABC"] == [[r["best"], r["worst"]] for r in expected["rank_ranges"]]
    assert [rows[name]["ci"] for name in "ABC"] == expected["ci"]
    for name in "ABC":
        ci = rows[name]["ci"]
        assert ci["ci_lower"] < rows[name]["composite_score"] < ci["ci_upper"]
    # A 60% rate on 200 entries: the interval is about ±7 points wide (1.96·sqrt(.6·.4/200) = .068).
    assert 0.50 < rows["A"]["ci"]["ci_lower"] < 0.56 and 0.64 < rows["A"]["ci"]["ci_upper"] < 0.70


def test_an_ascending_board_ranks_the_other_way(store, three):
    rows = by_model(leaderboard_for(store, MAINTAINER, DATASET, descending=False))
    assert [rows[name]["rank_range"] for name in "CAB"] == [[1, 1], [2, 3], [2, 3]]
    assert (rows["C"]["cluster"], rows["A"]["cluster"], rows["B"]["cluster"]) == (1, 2, 2)


def test_the_worst_rank_counts_the_runs_below_the_page(store, three):
    page = leaderboard_for(store, MAINTAINER, DATASET, limit=1)
    assert [row["model_slug"] for row in page["rows"]] == ["model-A"]
    assert page["rows"][0]["rank_range"] == [1, 2]  # B, below the page, may be ahead of it
    assert page["rows"][0]["ci"] == by_model(leaderboard_for(store, MAINTAINER, DATASET))["A"]["ci"]


def test_rows_outside_the_ranked_group_carry_no_ranges(store, three):
    store_run(store, "model-odd", right_first(190), metrics=("exact_match_rate", "chrf_plus_plus"))
    store_run(store, "model-cheat", right_first(200), disqualified=True)
    store_run(store, "model-null", right_first(150), composite=None)
    store_run(store, "floor:constant", right_first(0), floor_kind="constant")
    board = leaderboard_for(store, MAINTAINER, DATASET, include_disqualified=True)
    rows = by_model(board)
    assert rows["odd"]["comparable"] is False and rows["cheat"]["disqualified"] is True
    assert rows["floor:constant"]["floor"] is True and rows["null"]["composite_score"] is None
    for name in ("odd", "cheat", "null", "floor:constant"):
        assert all(rows[name][field] is None for field in FIELDS), name
    # The ranked three are ranked among themselves only, as before.
    assert [rows[name]["rank_range"] for name in "ABC"] == [[1, 2], [1, 2], [3, 3]]


@pytest.mark.parametrize("sort", ["cost_adjusted", "semantic_score", "avg_latency_seconds"])
def test_a_sort_column_without_per_entry_statistics_says_why_once(store, three, sort):
    board = leaderboard_for(store, MAINTAINER, DATASET, sort=sort)
    assert all(row[field] is None for row in board["rows"] for field in FIELDS)
    assert board["ranks_note"].startswith("no intervals or rank ranges: ") and sort in board["ranks_note"]
    assert "composite_score" in board["ranks_note"]  # and which columns have them


def test_a_metric_column_ranks_by_that_metric(store, three):
    board = leaderboard_for(store, MAINTAINER, DATASET, sort="exact_match_rate")
    expected = compare_all([comparable(right_first(RIGHT[name])) for name in "ABC"],
                           metric_ids=["exact_match_rate"], p_values="normal")["metrics"]["exact_match_rate"]
    assert [row["rank_range"] for row in board["rows"]] == [[r["best"], r["worst"]] for r in expected["rank_ranges"]]
    assert [row["rank_range"] for row in board["rows"]] == [[1, 2], [1, 2], [3, 3]]
    assert [row["ci"] for row in board["rows"]] == expected["ci"]


def test_one_ranked_run_and_too_many_have_a_note(store):
    store_run(store, "alone", right_first(100))
    board = leaderboard_for(store, MAINTAINER, DATASET)
    assert board["rows"][0]["rank_range"] is None and "fewer than 2" in board["ranks_note"]
    rows = [{"rank": i + 1, "comparable": True, "disqualified": False, "floor": False, "composite_score": 0.5}
            for i in range(MAX_RANKED_RUNS + 1)]
    assert len(ranked_group(rows, "composite_score")) == MAX_RANKED_RUNS + 1
    assert f"more than {MAX_RANKED_RUNS}" in unranked_note("composite_score", MAX_RANKED_RUNS + 1)
    assert unranked_note("composite_score", MAX_RANKED_RUNS) is None


def test_a_board_of_many_runs_still_tells_them_apart(store):
    """11 runs far apart: 55 pairs. Resampled p-values could not separate
    any (none is below 1/1,001, and Holm multiplies the smallest by 55); the
    board reads the same test off the normal distribution of the resampled
    differences, which has no such floor, so each run has a rank of its own."""
    for count in range(11):
        store_run(store, f"model-{count}", right_first(20 + 16 * count))
    board = leaderboard_for(store, MAINTAINER, DATASET)
    assert board["ranks_note"] is None
    assert [row["rank_range"] for row in board["rows"]] == [[rank, rank] for rank in range(1, 12)]
    assert [row["cluster"] for row in board["rows"]] == list(range(1, 12))
    runs = [comparable(right_first(20 + 16 * count)) for count in range(11)]
    resampled = compare_all(runs, samples=1000, metric_ids=["composite"])
    assert not any(pair["significant"] for pair in resampled["metrics"]["composite"]["pairs"])
    assert resampled["warnings"][0].startswith("holm over 55 pairs")


def test_runs_that_cannot_be_compared_leave_the_board_without_ranges(store, three):
    # A run with statistics for other entries than the rest (a corrupt store, or a
    # version whose entries changed): compare_all refuses, the board says so.
    odd = make_card(model="model-D", composite=0.3, exact_match_rate=0.3, metrics=("exact_match_rate",),
                    version=VERSION)
    store.save_run(odd, [[{**entry, "id": f"x{i}"} for i, entry in enumerate(entries(right_first(60)))]])
    board = leaderboard_for(store, MAINTAINER, DATASET)
    assert all(row["rank_range"] is None for row in board["rows"])
    assert "do not cover the same entries" in board["ranks_note"]


def test_ranges_are_computed_once_per_board_state(store, three, monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("descending"))
        return compare_all(*args, **kwargs)

    monkeypatch.setattr(board_ranks, "compare_all", counted)
    first = leaderboard_for(store, MAINTAINER, DATASET)
    assert leaderboard_for(store, MAINTAINER, DATASET) == first and leaderboard_for(store, MAINTAINER, DATASET,
                                                                                    limit=2)["rows"] == first["rows"][:2]
    assert calls == [True]
    leaderboard_for(store, MAINTAINER, DATASET, descending=False)
    store_run(store, "model-E", right_first(10))
    leaderboard_for(store, MAINTAINER, DATASET)
    assert calls == [True, False, True]


def test_a_few_entries_row_is_nulled_with_its_scores():
    from gateway.server.access import listed_row

    row = {"rank": 1, "composite_score": 0.5, "rank_range": [1, 2], "ci": {"ci_lower": 0.4, "ci_upper": 0.6},
           "cluster": 1, "model_slug": "m"}
    shown = listed_row(Caller("bob", "submitter", "Leaderboard"), row, few_entries=True)
    assert all(shown[field] is None for field in (*FIELDS, "composite_score")) and shown["model_slug"] == "m"
    assert listed_row(MAINTAINER, row, few_entries=True) == row


# --- the CLI and the web board ---------------------------------------------------------

@pytest.fixture(scope="module")
def board_store(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('board-ranks') / 'runs.sqlite'}"
    store = RunStore.open(url)
    try:
        for name, count in RIGHT.items():
            store_run(store, f"model-{name}", right_first(count))
        store_run(store, "model-odd", right_first(190), metrics=("exact_match_rate", "chrf_plus_plus"))
    finally:
        store.close()
    return url


def test_leaderboard_json_and_table_show_the_ranges(cli, board_store):
    result = cli("leaderboard", "--dataset", DATASET, "--json", "--store", board_store)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["rank_range"] for row in rows] == [[1, 2], [1, 2], [3, 3], None]
    assert [row["cluster"] for row in rows] == [1, 1, 2, None]
    assert all(set(row["ci"]) == {"ci_lower", "ci_upper"} for row in rows[:3]) and rows[3]["ci"] is None
    assert list(rows[0])[:5] == ["rank", "rank_range", "ci", "cluster", "run_id"]
    table = cli("leaderboard", "--dataset", DATASET, "--store", board_store)
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    body = lines[3:]
    a, b = rows[0], rows[1]
    assert body[0].split()[:5] == ["1–2", "model-A", f"{a['composite_score']:.4f}",
                                   f"[{a['ci']['ci_lower']:.4f},", f"{a['ci']['ci_upper']:.4f}]"]
    assert body[1].split()[:2] == ["1–2", "model-B"] and f"{b['composite_score']:.4f}" in body[1]
    # A blank line between the clusters, and before the rows outside them.
    assert body[2] == "" and body[3].split()[:2] == ["3", "model-C"] and body[4] == ""
    assert body[5].split()[:2] == ["4", "model-odd"] and "not comparable" in body[5]
    assert body[6].startswith("Rank: the ranks that paired bootstrap tests") and "Holm" in body[6]
    noted = cli("leaderboard", "--dataset", DATASET, "--store", board_store, "--sort", "cost_adjusted")
    assert noted.stdout.splitlines()[-1].startswith("(no intervals or rank ranges: cost_adjusted has no")
    assert "" not in noted.stdout.splitlines()  # no cluster: no blank line


def page_ranks(html: str) -> dict[str, tuple[str, str | None, str | None, str]]:
    """Each board row of the web page: (rank shown, data-rank-range, data-ci, class)."""
    found = {}
    for run_id, attributes, row in re.findall(r'<tr data-run-id="([0-9a-f]+)"([^>]*)>(.*?)</tr>', html, re.S):
        rank = re.search(r'<td class="num rank"(?: data-rank-range="([^"]+)")?>([^<]*)</td>', row)
        ci = re.search(r'<span class="ci" data-ci="([^"]+)">\[([^\]]+)\]</span>', row)
        found[run_id] = (unescape(rank.group(2)), rank.group(1), ci and ci.group(1), ci and ci.group(2),
                         attributes.strip())
    return found


def test_the_web_board_shows_what_leaderboard_json_gives(cli, board_store, tmp_path):
    rows = json.loads(cli("leaderboard", "--dataset", DATASET, "--json", "--store", board_store).stdout)
    write_tokens(tmp_path / "tokens.yaml")
    app = create_app(WebSettings(board_store, str(tmp_path / "tokens.yaml"), secret="r" * 40))
    with TestClient(app) as visitor:
        answer = visitor.get(f"/api/leaderboard/{DATASET}")
        assert answer.status_code == 200, answer.text
        web = answer.json()
        page = visitor.get(f"/leaderboard/{DATASET}").text
    # The CLI's embedded gateway is open (a maintainer's view): the visitor's rows lack only who submitted.
    assert web["rows"] == [{k: v for k, v in row.items() if k != "submitted_by"} for row in rows]
    assert web["ranks_note"] is None
    shown = page_ranks(page)
    assert list(shown) == [row["run_id"] for row in rows]
    for row in rows:
        rank, data_range, data_ci, ci_text, attributes = shown[row["run_id"]]
        assert rank == rank_text(row)
        if row["rank_range"] is None:
            assert data_range is None and data_ci is None and "cluster" not in attributes
            continue
        assert data_range.split() == [str(end) for end in row["rank_range"]]
        assert [float(bound) for bound in data_ci.split()] == [row["ci"]["ci_lower"], row["ci"]["ci_upper"]]
        # In the sort column's one format (the composite's four decimals), as its value.
        assert ci_text == f"{row['ci']['ci_lower']:.4f}, {row['ci']['ci_upper']:.4f}"
        assert attributes == f'class="cluster-{row["cluster"] % 2}"'
    assert [shown[row["run_id"]][0] for row in rows] == ["1–2", "1–2", "3", "4"]
    assert 'id="ranks-note">Rank: the ranks' in page


def test_a_non_metric_web_board_shows_the_note(board_store, tmp_path):
    write_tokens(tmp_path / "tokens.yaml")
    app = create_app(WebSettings(board_store, str(tmp_path / "tokens.yaml"), secret="r" * 40))
    with TestClient(app) as visitor:
        page = visitor.get(f"/leaderboard/{DATASET}?sort=cost_adjusted").text
    assert 'id="ranks-remark">no intervals or rank ranges: cost_adjusted' in page and "data-rank-range" not in page
    assert 'id="ranks-note"' not in page
