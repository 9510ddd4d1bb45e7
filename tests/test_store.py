"""The run store (spec §11) against SQLite and a real PostgreSQL server:
round trips, listing, the leaderboard's ranking rules and flags, one
transaction per run, errors, the §9.1 schema, migrations."""
from __future__ import annotations

import shutil
import textwrap
import uuid

import pytest
import sqlalchemy as sa

from gateway.store import SORT_COLUMNS, InvalidQuery, RunStore, StoreError, UnknownRun, default_store_url
from gateway.store import rows, tables
from gateway.store.errors import NothingStored
from gateway.store.prefixes import AmbiguousPrefix
from gateway.store import store as store_module
from champollion.core.columns import SPEC_COLUMNS
from gateway.store.location import open_engine, parse_store_url
from gateway.store.migrate import MIGRATIONS, upgrade_to_head
from tests.conftest import evaluate, make_request
from tests.postgres import free_port
from tests.test_migrations import copy_of, live_imports, schema_differences

DATASET = "ds-test"
PROFILE_B = ("chrf_plus_plus", "exact_match_rate", "semantic_score")


def make_card(model: str = "model-a", composite: float | None = 0.5, version: str = "v1", dataset: str = DATASET,
              metrics=PROFILE_B, profile: str = "B", fingerprint: str | None = None, disqualified: bool = False,
              **values) -> dict:
    """A small run card: what the store reads, plus §9.1 values by column
    name (`values`, placed where the card keeps them)."""
    card = {
        "run_id": uuid.uuid4().hex,
        "model_slug": model,
        "condition": "zero-shot",
        "dataset": {"id": dataset, "language_pair": "eng-spa", "version": version},
        "fingerprint": {"hash": fingerprint or f"fp-{model}-{version}", "inputs": {"model_slug": model}},
        "elapsed_seconds": 10.0,
        "scores": {"composite": composite, "quality_tier": "functional", "cost_adjusted": None},
        "totals": {},
        "composite_coverage": {"profile": profile, "weights": {m: 1 / len(metrics) for m in metrics},
                               "missing": []},
        "warnings": ["Ünïcödé warning"],
        "integrity": {"disqualified": disqualified, "reasons": []},
        "entries": [],
    }
    for name, value in values.items():
        path = ("scores", "cost_adjusted") if name == "cost_adjusted" else \
            next(c.path for c in SPEC_COLUMNS if c.name == name)
        node = card
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return card


def make_entries(count: int) -> list[dict]:
    return [
        {"id": f"entrée-{i:03d}-日本", "scores": {"chrf_plus_plus": 100.0 / (i + 1), "note": "ñandú «ok»"},
         "stats": {"chrf_plus_plus": [float(i), 0.1 * i, 1e-17], "exact_match_rate": [1.0, 1.0]},
         "difficulty": None if i % 4 == 0 else 1 + i % 5, "error": "timeout" if i == 3 else None}
        for i in range(count)
    ]


@pytest.fixture
def store(store_url):
    opened = RunStore.open(store_url)
    yield opened
    opened.close()


def save(store: RunStore, card: dict, entries: list[dict] | None = None) -> dict:
    store.save_run(card, [entries or []])
    return card


def ranked(board: dict) -> list[str]:
    return [row["run_id"] for row in board["rows"]]


def test_save_and_get_round_trip_keeps_entries_in_order(store):
    card, entries = make_card(), make_entries(23)
    # Uneven batches, an empty one among them, as a streaming gateway may send.
    assert store.save_run(card, iter([entries[:10], [], entries[10:11], entries[11:]])) == 1
    stored = store.get_run(card["run_id"])
    assert stored["entries"] == entries
    expected = {**card, "integrity": {**card["integrity"], "submissions_with_fingerprint": 1}}
    assert {k: v for k, v in stored.items() if k != "entries"} == {k: v for k, v in expected.items() if k != "entries"}
    batches = list(store.iter_entries(card["run_id"], batch=7))
    assert [len(b) for b in batches] == [7, 7, 7, 2]
    assert [e for b in batches for e in b] == entries
    summary, rows = store.comparable_stats(card["run_id"])
    assert "entries" not in summary and summary["run_id"] == card["run_id"]
    assert rows == [(e["id"], e["stats"], (e.get("scores") or {}).get("adequate") is False) for e in entries]


def test_a_real_run_card_is_stored_whole_and_still_validates(store, gateway, run_card_validator):
    entries = [
        {"id": "ç-1", "source": "Save changes", "reference": "Guardar cambios"},
        {"id": "ç-2", "source": "Good morning", "reference": "Buenos días, señor"},
        {"id": "ç-3", "source": "Open the file", "reference": "Abre el archivo"},
    ]
    predictions = [{"id": "ç-1", "prediction": "Guardar cambios"}, {"id": "ç-2", "prediction": "Buenos días"},
                   {"id": "ç-3", "prediction": "Abrir archivo"}]
    card = evaluate(gateway, make_request(entries, predictions, meta={"model_slug": "m-ñ"}))
    store.save_run({**card, "entries": []}, [card["entries"][:2], card["entries"][2:]])
    stored = store.get_run(card["run_id"])
    run_card_validator.validate(stored)
    assert stored["integrity"]["submissions_with_fingerprint"] == 1
    assert {k: v for k, v in stored.items() if k != "integrity"} == {k: v for k, v in card.items() if k != "integrity"}
    assert stored["integrity"] == {**card.get("integrity", {"disqualified": False}), "submissions_with_fingerprint": 1}
    row = store.list_runs()[0]
    assert row["composite_score"] == pytest.approx(card["scores"]["composite"], rel=1e-6)  # real: float4 on PostgreSQL
    assert row["fingerprint_hash"] == card["fingerprint"]["hash"]


def test_submissions_with_the_same_fingerprint_are_counted(store):
    first, second, other = make_card(), make_card(composite=0.9), make_card(model="model-b")
    assert [store.save_run(c, []) for c in (first, second, other)] == [1, 2, 1]
    assert store.get_run(first["run_id"])["integrity"]["submissions_with_fingerprint"] == 1
    assert store.get_run(second["run_id"])["integrity"]["submissions_with_fingerprint"] == 2


def test_list_runs_newest_first_and_filtered(store):
    a = save(store, make_card(model="model-a"))
    b = save(store, make_card(model="model-b", dataset="other"))
    c = save(store, make_card(model="model-b"))
    assert [r["run_id"] for r in store.list_runs()] == [c["run_id"], b["run_id"], a["run_id"]]
    assert [r["run_id"] for r in store.list_runs(dataset_id=DATASET)] == [c["run_id"], a["run_id"]]
    assert [r["run_id"] for r in store.list_runs(model_slug="model-b")] == [c["run_id"], b["run_id"]]
    assert [r["run_id"] for r in store.list_runs(dataset_id="other", model_slug="model-a")] == []
    row = store.list_runs(dataset_id="other")[0]
    assert set(row) == {"run_id", "created_at", "dataset_id", "corpus_version", "model_slug", "condition",
                        "composite_score", "quality_tier", "fingerprint_hash", "corpus_tier", "submitted_by", "review",
                        "floor_kind"}
    assert row["model_slug"] == "model-b" and row["corpus_version"] == "v1" and row["created_at"].endswith("+00:00")


def test_leaderboard_ranks_first_submissions_and_flags_cherry_picks(store):
    a1 = save(store, make_card(model="model-a", composite=0.6))
    b = save(store, make_card(model="model-b", composite=0.8))
    a2 = save(store, make_card(model="model-a", composite=0.9))  # same configuration again, luckier
    board = store.leaderboard(DATASET)
    assert board["corpus_version"] == "v1" and board["sort"] == "composite_score"
    assert ranked(board) == [b["run_id"], a1["run_id"]]
    top, second = board["rows"]
    assert (top["rank"], top["cherry_pick_suspect"], top["submissions_with_fingerprint"]) == (1, False, 1)
    assert (second["rank"], second["cherry_pick_suspect"], second["submissions_with_fingerprint"]) == (2, True, 2)
    assert set(c.name for c in SPEC_COLUMNS) <= set(top)
    assert top["composite_coverage"] == {"profile": "B", "metrics": sorted(PROFILE_B)}
    assert top["comparable"] is True and top["not_comparable"] is None and top["disqualified"] is False
    everything = store.leaderboard(DATASET, all_submissions=True)
    assert ranked(everything) == [a2["run_id"], b["run_id"], a1["run_id"]]
    assert [r["cherry_pick_suspect"] for r in everything["rows"]] == [True, False, True]


def test_runs_with_another_composite_coverage_rank_after_the_comparable_ones(store):
    usual = [save(store, make_card(model=f"m{i}", composite=0.5 + i / 10)) for i in range(3)]
    odd = save(store, make_card(model="odd", composite=0.99, metrics=PROFILE_B[:2]))
    board = store.leaderboard(DATASET)
    assert ranked(board) == [usual[2]["run_id"], usual[1]["run_id"], usual[0]["run_id"], odd["run_id"]]
    last = board["rows"][-1]
    assert last["comparable"] is False and "semantic_score" in last["not_comparable"]
    assert all(row["comparable"] for row in board["rows"][:3])


def test_nulls_sort_last_in_either_direction(store):
    low = save(store, make_card(model="low", composite=0.2))
    none = save(store, make_card(model="none", composite=None))
    high = save(store, make_card(model="high", composite=0.7))
    assert ranked(store.leaderboard(DATASET)) == [high["run_id"], low["run_id"], none["run_id"]]
    assert ranked(store.leaderboard(DATASET, descending=False)) == [low["run_id"], high["run_id"], none["run_id"]]


def test_ties_are_broken_by_storage_order(store):
    cards = [save(store, make_card(model=f"m{i}", composite=0.5)) for i in range(3)]
    assert ranked(store.leaderboard(DATASET)) == [c["run_id"] for c in cards]


def test_sort_by_cost_adjusted_reorders(store):
    cheap = save(store, make_card(model="cheap", composite=0.6, cost_adjusted=30.0))
    good = save(store, make_card(model="good", composite=0.8, cost_adjusted=10.0))
    assert ranked(store.leaderboard(DATASET)) == [good["run_id"], cheap["run_id"]]
    board = store.leaderboard(DATASET, sort="cost_adjusted")
    assert ranked(board) == [cheap["run_id"], good["run_id"]]
    assert board["rows"][0]["cost_adjusted"] == 30.0


@pytest.mark.parametrize("column", SORT_COLUMNS)
def test_every_sort_column_orders_the_board(store, column):
    cards = [save(store, make_card(model=f"m{i}", composite=0.5, **{column: value}))
             for i, value in enumerate([2.5, None, 7.25, 1.0])]
    board = store.leaderboard(DATASET, sort=column, descending=True)
    assert ranked(board) == [cards[i]["run_id"] for i in (2, 0, 3, 1)]
    assert [row[column] for row in board["rows"]] == [7.25, 2.5, 1.0, None]


def test_unknown_sort_column_lists_the_valid_ones(store):
    with pytest.raises(InvalidQuery) as raised:
        store.leaderboard(DATASET, sort="model_slug")
    message = str(raised.value)
    assert "'model_slug'" in message and "cost_adjusted" in message and "composite_score" in message
    assert "\n" not in message


def test_leaderboard_ranks_the_latest_corpus_version_by_default(store):
    old = save(store, make_card(model="a", version="v1", composite=0.9))
    new = save(store, make_card(model="a", version="v2", composite=0.3))
    save(store, make_card(model="b", version="v1", composite=0.8))  # a rerun on the old version
    board = store.leaderboard(DATASET)
    assert board["corpus_version"] == "v2" and ranked(board) == [new["run_id"]]
    assert ranked(store.leaderboard(DATASET, version="v1"))[0] == old["run_id"]
    with pytest.raises(NothingStored, match=f"no stored run is on dataset 'no-such-dataset'; datasets: {DATASET}"):
        store.leaderboard("no-such-dataset")


def test_run_ids_and_corpus_versions_by_a_unique_prefix_of_six_or_more(store):
    """As git takes commits: a unique prefix of 6+ characters names a run or
    a corpus version; a shared one is refused listing what it starts; an
    unknown version lists the dataset's versions."""
    first, second, other = (make_card(model=model, version="e5aeef2f4a37" + "0" * 52) for model in "abc")
    first["run_id"], second["run_id"] = "abcdef01" + "1" * 24, "abcdef02" + "2" * 24
    other["dataset"]["version"] = "dbf6c298f6df" + "1" * 52
    for card in (first, second, other):
        save(store, card, make_entries(2))
    for read in (store.get_run, store.comparable_stats):
        found = read("abcdef01")
        assert (found[0] if isinstance(found, tuple) else found)["run_id"] == first["run_id"]
    assert store.get_run("ABCDEF02")["run_id"] == second["run_id"]  # hex in either case
    assert [len(batch) for batch in store.iter_entries("abcdef02")] == [2]
    with pytest.raises(AmbiguousPrefix, match="run id 'abcdef0' is ambiguous: it starts abcdef01.*, abcdef02"):
        store.get_run("abcdef0")
    with pytest.raises(UnknownRun, match="at least its first 6 characters"):
        store.get_run("abcde")  # a prefix too short to name a run
    with pytest.raises(UnknownRun, match="no stored run with id 'abcdef03'"):
        store.get_run("abcdef03")
    board = store.leaderboard(DATASET, version="e5aeef")
    assert board["corpus_version"] == first["dataset"]["version"] and len(board["rows"]) == 2
    assert store.leaderboard(DATASET, version="DBF6C298F6DF")["corpus_version"] == other["dataset"]["version"]
    with pytest.raises(NothingStored, match="version '00000000'; its versions: (dbf6c298f6df, e5aeef2f4a37|"
                                            "e5aeef2f4a37, dbf6c298f6df)$"):
        store.leaderboard(DATASET, version="00000000")
    with pytest.raises(NothingStored, match="at least its first 6 characters"):
        store.leaderboard(DATASET, version="e5ae")


def test_a_board_sorts_by_the_run_cards_metric_names_too(store):
    save(store, make_card(model="a", corpus_bleu=30.0, ter=60.0))
    save(store, make_card(model="b", corpus_bleu=20.0, ter=50.0))
    for sort, column in (("bleu", "corpus_bleu"), ("BLEU", "corpus_bleu"), ("ter", "ter"), ("chrf", "chrf_plus_plus"),
                         ("composite", "composite_score"), ("corpus_bleu", "corpus_bleu")):
        assert store.leaderboard(DATASET, sort=sort)["sort"] == column, sort
    assert [row["model_slug"] for row in store.leaderboard(DATASET, sort="bleu")["rows"]] == ["a", "b"]
    assert [row["model_slug"] for row in store.leaderboard(DATASET, sort="ter", descending=False)["rows"]] == ["b", "a"]
    with pytest.raises(InvalidQuery, match="bleu for corpus_bleu"):
        store.leaderboard(DATASET, sort="blue")


def test_disqualified_runs_are_off_the_board_unless_asked(store):
    clean = save(store, make_card(model="clean", composite=0.5))
    cheat = save(store, make_card(model="cheat", composite=0.95, disqualified=True))
    assert ranked(store.leaderboard(DATASET)) == [clean["run_id"]]
    board = store.leaderboard(DATASET, include_disqualified=True)
    assert ranked(board) == [clean["run_id"], cheat["run_id"]] and board["rows"][1]["disqualified"] is True


def test_a_run_that_fails_while_storing_leaves_nothing_visible(store, store_url):
    card = make_card()

    def entries_then_failure():
        yield make_entries(5)
        raise RuntimeError("the spill broke")

    with pytest.raises(RuntimeError):
        store.save_run(card, entries_then_failure())
    bad_entry = {**make_entries(1)[0], "id": None}  # violates NOT NULL inside the database
    with pytest.raises(StoreError):
        store.save_run(make_card(), [make_entries(4), [bad_entry]])
    assert store.list_runs() == []
    with pytest.raises(UnknownRun):
        store.get_run(card["run_id"])
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as connection:
        assert connection.scalar(sa.text("SELECT count(*) FROM run_entries")) == 0
    engine.dispose()


def test_unknown_run_id_is_named(store):
    for read in (store.get_run, store.iter_entries, store.comparable_stats):
        with pytest.raises(UnknownRun, match="no stored run with id 'nope'"):
            read("nope")


@pytest.mark.parametrize("url", ["not a url", "mysql://user:hunter2@db/runs", "postgresql://user:hunter2@/runs",
                                 "sqlite+nosuchdriver:///x.sqlite"])
def test_corrupt_or_unsupported_url_is_one_line_without_the_password(url):
    with pytest.raises(StoreError) as raised:
        RunStore.open(url)
    assert "\n" not in str(raised.value) and "hunter2" not in str(raised.value)
    assert "sqlite:///PATH or postgresql://" in str(raised.value)


def test_unreachable_postgresql_is_one_line_without_the_password():
    url = f"postgresql://champollion:hunter2@127.0.0.1:{free_port()}/runs"
    with pytest.raises(StoreError) as raised:
        RunStore.open(url)
    message = str(raised.value)
    assert "\n" not in message and "hunter2" not in message
    assert message.startswith("store postgresql+psycopg://champollion:***@127.0.0.1:")


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "runs.sqlite"
    path.write_text("not a database, just text " * 100)
    with pytest.raises(StoreError, match="not a database"):
        RunStore.open(f"sqlite:///{path}")


def test_default_store_url_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CHAMPOLLION_STORE", "postgresql://u@db:5432/runs")
    assert default_store_url() == "postgresql://u@db:5432/runs"
    monkeypatch.delenv("CHAMPOLLION_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_store_url() == f"sqlite:///{tmp_path}/data/champollion/runs.sqlite"
    RunStore.open(default_store_url()).close()  # creates the folder and the file
    assert (tmp_path / "data" / "champollion" / "runs.sqlite").is_file()
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_url() == f"sqlite:///{tmp_path}/home/.local/share/champollion/runs.sqlite"


def test_postgresql_table_has_the_spec_columns_types_and_indexes(postgres_cluster):
    url = postgres_cluster.create_database(f"schema_{uuid.uuid4().hex[:8]}")
    RunStore.open(url).close()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as connection:
        types = dict(connection.execute(sa.text(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'runs'")).all())
        indexes = set(connection.scalars(sa.text("SELECT indexname FROM pg_indexes WHERE tablename = 'runs'")))
    engine.dispose()
    for column in SPEC_COLUMNS:
        assert types[column.name] == column.kind, column.name
    assert types["run_card"] == "jsonb" and types["run_id"] == "text"
    assert {"idx_composite", "idx_leaderboard", "idx_model", "idx_fingerprint"} <= indexes


# The README's recipe for a column ("To add a column to `runs`"), step by step:
# a reviewer's note, read from the card's review.note.
# Step 1: the next numbered migration (NEXT, LATEST filled in by the test),
# written out literally, importing only alembic and sqlalchemy.
NEXT_MIGRATION = '''
    """Test only: a reviewer note on each run.

    Revision ID: NEXT
    Revises: LATEST
    """
    import sqlalchemy as sa
    from alembic import op

    revision = "NEXT"
    down_revision = "LATEST"
    branch_labels = None
    depends_on = None


    def upgrade() -> None:
        op.add_column("runs", sa.Column("reviewer_note", sa.Text, nullable=True))
        # Runs stored before get theirs from their card.
        if op.get_bind().dialect.name == "postgresql":
            op.execute("UPDATE runs SET reviewer_note = run_card -> 'review' ->> 'note'")
        else:
            op.execute("UPDATE runs SET reviewer_note = json_extract(run_card, '$.review.note')")


    def downgrade() -> None:
        op.drop_column("runs", "reviewer_note")
'''


def with_reviewer_note(metadata: sa.MetaData) -> sa.MetaData:
    """Step 2: tables.py's `runs` with the migration's column (a copy; the
    live tables stay as they are for the other tests)."""
    copied = copy_of(metadata)
    copied.tables["runs"].append_column(sa.Column("reviewer_note", sa.Text))
    return copied


def run_row_with_reviewer_note(card: dict, created_at, submission: int, submitted_by=None, floor_kind=None) -> dict:
    """Step 3: rows.py's run_row fills the column from the card."""
    return {**rows.run_row(card, created_at, submission, submitted_by, floor_kind),
            "reviewer_note": (card.get("review") or {}).get("note")}


def test_a_column_added_as_the_readme_says_matches_the_tables_and_keeps_runs(store, store_url, tmp_path, monkeypatch):
    notes = ["fine", None, "odd spike", None]
    reviewed = [{**make_card(model=f"m{i}", composite=0.1 * i), **({"review": {"note": note}} if note else {})}
                for i, note in enumerate(notes)]
    cards = [save(store, card, make_entries(3)) for card in reviewed]
    before = [store.get_run(c["run_id"]) for c in cards]
    board_before = store.leaderboard(DATASET)
    migrations = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    latest = max(path.name[:4] for path in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    following = f"{int(latest) + 1:04d}"
    script = textwrap.dedent(NEXT_MIGRATION).replace("NEXT", following).replace("LATEST", latest)
    (migrations / "versions" / f"{following}_reviewer_note.py").write_text(script)
    assert live_imports(migrations / "versions" / f"{following}_reviewer_note.py") == []
    metadata = with_reviewer_note(tables.metadata)
    engine = open_engine(parse_store_url(store_url))
    with engine.begin() as connection:
        upgrade_to_head(connection, migrations)
    with engine.connect() as connection:
        # Migration and tables agree; without step 2 the comparison says which column is missing.
        assert schema_differences(connection, metadata) == []
        assert [(d[0], d[2], d[3].name) for d in schema_differences(connection, tables.metadata)] == \
            [("remove_column", "runs", "reviewer_note")]
        stored = dict(connection.execute(sa.text("SELECT run_id, reviewer_note FROM runs")).all())
    engine.dispose()
    assert stored == {card["run_id"]: note for card, note in zip(cards, notes)}
    assert [store.get_run(c["run_id"]) for c in cards] == before
    assert store.leaderboard(DATASET) == board_before
    # Steps 2 and 3 as the store's code sees them, and step 4 (optional): the runs listing shows it.
    monkeypatch.setattr(store_module, "runs", metadata.tables["runs"])
    monkeypatch.setattr(store_module, "run_row", run_row_with_reviewer_note)
    monkeypatch.setattr(store_module, "RUN_SUMMARY", (*store_module.RUN_SUMMARY, "reviewer_note"))
    later = save(store, {**make_card(model="m-later"), "review": {"note": "checked"}})
    listed = {run["run_id"]: run["reviewer_note"] for run in store.list_runs(DATASET)}
    assert listed == {**stored, later["run_id"]: "checked"}
    assert store.get_run(later["run_id"])["review"] == {"note": "checked"}
    # Code that does not know the new migration refuses the store rather than guess.
    with pytest.raises(StoreError, match=f"migration {following}"):
        RunStore.open(store_url)


def test_opening_an_up_to_date_store_again_changes_nothing(store, store_url):
    card = save(store, make_card(), make_entries(2))
    again = RunStore.open(store_url)
    assert again.get_run(card["run_id"])["entries"] == make_entries(2)
    again.close()
