"""Registered corpora (seed 001 §5, §8.1; spec §11): registration, versions,
entry fingerprints, secrecy tiers and rotation, the official leaderboard,
migration 0002, against SQLite and PostgreSQL; RegisterCorpus / GetSources
through the session's gateway; the `champollion corpus` commands in-process
over a store of their own."""
from __future__ import annotations

import copy
import hashlib
import json
import unicodedata
import uuid
from datetime import datetime

import grpc
import pytest
import sqlalchemy as sa
from alembic import command

from champollion.eval.v1 import gateway_pb2
from apps.inputs import load_corpus
from apps.client.upload import corpus_parts
from gateway.store import CorpusConflict, InvalidQuery, RunStore, UnknownCorpus
from gateway.store.location import open_engine, parse_store_url
from gateway.store.migrate import alembic_config
from gateway.store.rows import entry_row, run_row
from gateway.store.tables import run_entries, runs
from tests.conftest import EXAMPLE, evaluate, make_request
from tests.test_store import DATASET, make_card, make_entries, ranked, save

CORPUS_PATH = EXAMPLE / "corpus.json"


def example_corpus() -> dict:
    return json.loads(CORPUS_PATH.read_text(encoding="utf-8"))


def edited(corpus: dict, change) -> dict:
    """A deep copy of `corpus` changed by `change(copy)`."""
    copied = copy.deepcopy(corpus)
    change(copied)
    return copied


def private_strings(corpus: dict) -> set[str]:
    """What must never leave the gateway: references and variants."""
    return {text for entry in corpus["entries"]
            for text in (entry["reference"], *entry.get("acceptable_variants", []))}


@pytest.fixture
def store(store_url):
    opened = RunStore.open(store_url)
    yield opened
    opened.close()


# --- the store ---------------------------------------------------------------

def test_register_is_idempotent_and_a_changed_corpus_conflicts_or_becomes_a_new_version(store, gateway):
    corpus = example_corpus()
    first = store.register_corpus(corpus, "holdout")
    assert (first["id"], first["number"], first["tier"], first["entries"], first["created"]) == \
        (corpus["id"], 1, "holdout", len(corpus["entries"]), True)
    # The version is what a run card of the same corpus calls dataset.version.
    card = evaluate(gateway, make_request(
        [{key: entry[key] for key in ("id", "source", "reference")} for entry in corpus["entries"]]))
    assert first["version"] == card["dataset"]["version"]

    again = store.register_corpus(corpus, "dev")
    assert again["created"] is False and again["version"] == first["version"]
    assert again["tier"] == "holdout" and again["number"] == 1

    def change(copied):
        copied["entries"][2]["reference"] += " (revisada)"
        del copied["entries"][4]
        copied["entries"].append({"id": "es-new", "source": "New entry", "reference": "Entrada nueva"})

    changed = edited(corpus, change)
    with pytest.raises(CorpusConflict) as conflict:
        store.register_corpus(changed, "holdout")
    message = str(conflict.value)
    for expected in (repr(corpus["id"]), "version 1 (" + first["version"][:12],
                     "1 entry added (es-new)", f"1 entry removed ({corpus['entries'][4]['id']})",
                     f"1 entry changed ({corpus['entries'][2]['id']})", "new_version"):
        assert expected in message

    second = store.register_corpus(changed, "holdout", new_version=True)
    assert (second["number"], second["created"]) == (2, True) and second["version"] != first["version"]
    # The first content again is still version 1, whatever the newest.
    assert store.register_corpus(corpus, "holdout")["number"] == 1

    # Same ids and references, another source: the version cannot tell them
    # apart, so no flag makes it a new version.
    resourced = edited(corpus, lambda copied: copied["entries"][0].update(source="Save all changes"))
    for new_version in (False, True):
        with pytest.raises(CorpusConflict, match=f"other content: 1 entry changed \\({corpus['entries'][0]['id']}\\)"):
            store.register_corpus(resourced, "holdout", new_version=new_version)
    assert [(c["number"], c["entries"]) for c in store.list_corpora()] == \
        [(1, len(corpus["entries"])), (2, len(changed["entries"]))]


def independent_fingerprint(source: str, reference: str) -> str:
    def normalised(text: str) -> str:
        return " ".join(unicodedata.normalize("NFC", text).split())
    return hashlib.sha256(f"{normalised(source)}\n{normalised(reference)}".encode("utf-8")).hexdigest()[:16]


def test_entry_fingerprints_hash_the_normalised_source_and_reference(store):
    corpus = {"id": "fp", "source_lang": "eng", "target_lang": "spa", "entries": [
        {"id": "a", "source": "  Cafe\u0301   au lait ", "reference": "Cafe\u0301 con\tleche"},
        {"id": "b", "source": "Open", "reference": "Abrir", "acceptable_variants": ["Abre"]},
    ]}
    registered = store.register_corpus(corpus, "dev")
    fingerprints = store.entry_fingerprints("fp", registered["version"])
    assert fingerprints == {entry["id"]: independent_fingerprint(entry["source"], entry["reference"])
                            for entry in corpus["entries"]}
    assert all(len(value) == 16 for value in fingerprints.values())
    # Whitespace and composition do not change an entry's fingerprint; its words do.
    tidy = edited(corpus, lambda c: c.update(id="fp-tidy") or c["entries"][0].update(
        source="Café au lait", reference="Café con leche"))
    store.register_corpus(tidy, "dev")
    assert store.entry_fingerprints("fp-tidy", None)["a"] == fingerprints["a"]
    reworded = edited(corpus, lambda c: c.update(id="fp-reworded") or c["entries"][0].update(source="Tea"))
    store.register_corpus(reworded, "dev")
    assert store.entry_fingerprints("fp-reworded", None)["a"] != fingerprints["a"]


def test_versions_are_found_by_hash_prefix_and_number(store):
    corpus = example_corpus()
    first = store.register_corpus(corpus, "holdout")
    newer = edited(corpus, lambda c: c["entries"][0].update(reference="Guarda los cambios"))
    second = store.register_corpus(newer, "dev", new_version=True)
    corpus_id = corpus["id"]
    assert store.corpus_info(corpus_id)["version"] == second["version"]  # the latest by default
    for name in ("1", first["version"], first["version"][:8], first["version"][:6], first["version"][:20].upper()):
        assert store.corpus_info(corpus_id, name)["version"] == first["version"], name
    assert store.corpus_info(corpus_id, "2")["tier"] == "dev"
    for unknown_id, version in ((corpus_id, "3"), (corpus_id, "deadbeef"), ("no-such-corpus", None)):
        with pytest.raises(UnknownCorpus, match=repr(unknown_id)):
            store.corpus_info(unknown_id, version)
    with pytest.raises(InvalidQuery, match="at least 6"):
        store.corpus_info(corpus_id, "e5ae")
    # The whole entries come back in registration order, batch by batch.
    batches = list(store.corpus_entries(corpus_id, "1", batch=7))
    assert [len(batch) for batch in batches] == [7, 7, 7, 7, 7, 1]
    # (An empty list, which gRPC cannot tell from an absent one, is not kept.)
    assert [entry for batch in batches for entry in batch] == \
        [{key: value for key, value in entry.items() if value != []} for entry in corpus["entries"]]
    with pytest.raises(UnknownCorpus):
        store.corpus_entries(corpus_id, "9")


def test_rotation_keeps_each_versions_tier_history(store):
    corpus = example_corpus()
    old = store.register_corpus(corpus, "holdout")
    replacement = store.register_corpus(
        edited(corpus, lambda c: c["entries"].pop()), "dev", new_version=True)
    # Seed 001 §5.3: retire the old holdout to dev, promote the new one.
    retired = store.set_corpus_tier(corpus["id"], old["version"][:10], "dev")
    promoted = store.set_corpus_tier(corpus["id"], None, "holdout")
    assert store.set_corpus_tier(corpus["id"], "2", "holdout") == promoted  # already there: no new step
    gold = store.set_corpus_tier(corpus["id"], "2", "gold")
    assert [span["tier"] for span in retired["history"]] == ["holdout", "dev"]
    assert [span["tier"] for span in gold["history"]] == ["dev", "holdout", "gold"]
    assert promoted["version"] == replacement["version"]
    listed = {info["number"]: info for info in store.list_corpora()}
    assert listed[1]["history"] == retired["history"] and listed[2]["history"] == gold["history"]
    for info in listed.values():
        moments = [datetime.fromisoformat(span["since"]) for span in info["history"]]
        assert moments == sorted(moments) and moments[0] == datetime.fromisoformat(info["created_at"])
        assert info["tier_since"] == info["history"][-1]["since"]
        assert all(moment.utcoffset().total_seconds() == 0 for moment in moments)
    with pytest.raises(InvalidQuery, match="unknown tier 'public'"):
        store.set_corpus_tier(corpus["id"], None, "public")
    with pytest.raises(InvalidQuery, match="unknown tier"):
        store.register_corpus(edited(corpus, lambda c: c.update(id="other")), "secret")
    with pytest.raises(UnknownCorpus):
        store.set_corpus_tier("no-such-corpus", None, "dev")


def test_the_official_leaderboard_holds_holdout_and_gold_runs_only(store):
    def tiered(model, composite, tier, version="v1", **options):
        card = make_card(model=model, composite=composite, version=version, **options)
        if tier is not None:
            card["dataset"]["tier"] = tier
        return save(store, card)

    holdout, gold = tiered("holdout", 0.5, "holdout"), tiered("gold", 0.6, "gold")
    dev, unregistered = tiered("dev", 0.9, "dev"), tiered("sent", 0.8, None)
    tiered("cheat", 0.99, "holdout", disqualified=True)
    tiered("newer-dev", 0.7, "dev", version="v2")  # the newest version, but of a dev run only
    official = store.leaderboard(DATASET, official=True)
    assert official["corpus_version"] == "v1"
    assert ranked(official) == [gold["run_id"], holdout["run_id"]]
    everything = store.leaderboard(DATASET, version="v1")
    assert set(ranked(everything)) == {r["run_id"] for r in (holdout, gold, dev, unregistered)}
    assert store.leaderboard(DATASET)["corpus_version"] == "v2"


def test_migration_0002_keeps_every_run_stored_under_0001(store_url):
    url = parse_store_url(store_url)
    engine = open_engine(url)
    cards = [make_card(model=f"m{i}", composite=0.1 * i) for i in range(3)]
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0001")
        for card in cards:
            row = run_row({k: v for k, v in card.items() if k != "entries"}, datetime.now().astimezone(), 1)
            for later in ("corpus_tier", "submitted_by", "review", "floor_kind"):  # not columns of 0001's runs
                del row[later]
            connection.execute(sa.insert(runs), [row])
            entries = [entry_row(card["run_id"], i, entry) for i, entry in enumerate(make_entries(4))]
            for entry in entries:
                del entry["prediction"]  # not a column of 0001's run_entries
            connection.execute(sa.insert(run_entries), entries)
    # Read as 0001 left them (nothing read here needs a later migration), then migrated.
    before_store = RunStore(url, engine)
    before = [before_store.get_run(card["run_id"]) for card in cards]
    engine.dispose()
    store = RunStore.open(store_url)
    try:
        assert [store.get_run(card["run_id"]) for card in cards] == before
        board = store.leaderboard(DATASET)
        assert [row["run_id"] for row in board["rows"]] == [card["run_id"] for card in reversed(cards)]
        assert all(row["submitted_by"] is None and row["submissions_by_token"] is None for row in board["rows"])
        assert store.leaderboard(DATASET, official=True)["rows"] == []  # no tier: not official
        assert store.list_corpora() == []
        assert store.register_corpus(example_corpus(), "holdout")["number"] == 1
    finally:
        store.close()
    engine = open_engine(url)
    with engine.connect() as connection:
        inspector = sa.inspect(connection)
        assert {"corpora", "corpus_entries", "corpus_tiers"} <= set(inspector.get_table_names())
        assert connection.scalar(sa.text("SELECT count(*) FROM runs WHERE corpus_tier IS NULL")) == 3
        indexes = {index["name"] for index in inspector.get_indexes("corpus_entries")}
        assert {"idx_corpus_entry_id", "idx_corpus_entry_fingerprint"} <= indexes
    engine.dispose()


# --- the RPCs, through the session's gateway ---------------------------------

def registered_parts(corpus: dict, tier: str, new_version: bool = False, per_part: int = 10):
    proto = load_corpus(CORPUS_PATH)
    proto.id = corpus["id"]
    # The example is below a holdout's minimum sizes (tests/test_corpus_check.py tests the gate).
    return corpus_parts(proto, tier, new_version, per_part, accept_check_failures="test corpus")


def test_register_and_get_sources_over_grpc_never_send_a_reference(gateway):
    corpus = example_corpus()
    corpus["id"] = f"rpc-{uuid.uuid4().hex[:8]}"  # the session store is shared
    info = gateway.RegisterCorpus(registered_parts(corpus, "holdout"), timeout=60)
    assert (info.id, info.number, info.tier, info.entries, info.created) == \
        (corpus["id"], 1, "holdout", len(corpus["entries"]), True)
    assert info.version in {c.version for c in gateway.ListCorpora(gateway_pb2.ListCorporaRequest()).corpora}
    parts = list(gateway.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus["id"]), timeout=60))
    assert parts[0].corpus.version == info.version
    sent = [entry for part in parts for entry in part.entries]
    assert [(e.id, e.source, e.domain, e.difficulty) for e in sent] == \
        [(e["id"], e["source"], e["domain"], e["difficulty"]) for e in corpus["entries"]]
    wire = b"".join(part.SerializeToString() for part in parts)
    leaked = [text for text in private_strings(corpus) if text.encode("utf-8") in wire]
    assert leaked == []
    assert {field.name for e in sent for field, _ in e.ListFields()} == {"id", "source", "domain", "difficulty"}


def rpc_error(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def test_corpus_rpcs_refuse_bad_input_with_precise_statuses(gateway):
    corpus = example_corpus()
    corpus["id"] = f"rpc-bad-{uuid.uuid4().hex[:8]}"
    gateway.RegisterCorpus(registered_parts(corpus, "dev"), timeout=60)
    unknown = rpc_error(lambda: gateway.GetSources(gateway_pb2.GetSourcesRequest(corpus_id="no-such-corpus")).next())
    assert unknown.code() == grpc.StatusCode.NOT_FOUND and "'no-such-corpus'" in unknown.details()
    tier = rpc_error(lambda: gateway.SetCorpusTier(
        gateway_pb2.SetCorpusTierRequest(corpus_id=corpus["id"], tier="public")))
    assert tier.code() == grpc.StatusCode.INVALID_ARGUMENT and tier.details().startswith("tier: unknown tier")

    parts = list(registered_parts(corpus, "dev"))
    parts[1].corpus.entries[3].reference = "otra cosa"
    conflict = rpc_error(lambda: gateway.RegisterCorpus(iter(parts), timeout=60))
    assert conflict.code() == grpc.StatusCode.ALREADY_EXISTS
    assert f"{corpus['id']!r} is registered as version 1" in conflict.details()

    bad = list(registered_parts(corpus, "dev"))
    bad[1].corpus.entries[2].reference = " "
    invalid = rpc_error(lambda: gateway.RegisterCorpus(iter(bad), timeout=60))
    assert invalid.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert invalid.details().startswith(f"corpus.entries[12].reference (id {corpus['entries'][12]['id']!r})")
    twice = list(registered_parts(corpus, "dev"))
    twice[2].corpus.entries[0].id = corpus["entries"][0]["id"]
    assert "corpus.entries[20].id" in rpc_error(lambda: gateway.RegisterCorpus(iter(twice), timeout=60)).details()
    header_again = list(registered_parts(corpus, "dev"))
    header_again[1].tier = "gold"
    assert rpc_error(lambda: gateway.RegisterCorpus(iter(header_again), timeout=60)).details().startswith("tier:")
    # Nothing of the refused registrations was kept.
    assert [c.number for c in gateway.ListCorpora(gateway_pb2.ListCorporaRequest()).corpora
            if c.id == corpus["id"]] == [1]


# --- the CLI, over a store of its own ----------------------------------------

def one_error_line(result, exit_code: int) -> str:
    assert result.exit_code == exit_code, result
    assert result.stdout == "" and result.stderr.startswith("champollion: error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_cli_registers_lists_serves_sources_and_retires(cli, tmp_path):
    store = ("--store", f"sqlite:///{tmp_path / 'corpora.sqlite'}")
    corpus = example_corpus()
    registered = cli("corpus", "register", CORPUS_PATH, "--tier", "holdout", "--accept-check-failures", "test corpus",
                     *store)
    assert registered.exit_code == 0, registered.stderr
    fields = dict(line.split(None, 1) for line in registered.stdout.splitlines())
    assert fields["id"] == corpus["id"] and fields["number"] == "1" and fields["tier"].startswith("holdout")
    assert len(fields["version"]) == 64 and "registered as version 1" in registered.stderr

    listed = json.loads(cli("corpus", "list", "--json", *store).stdout)
    assert [(c["id"], c["version"], c["tier"], c["entries"]) for c in listed] == \
        [(corpus["id"], fields["version"], "holdout", len(corpus["entries"]))]

    sources = cli("corpus", "sources", corpus["id"], *store)
    assert sources.exit_code == 0
    lines = [json.loads(line) for line in sources.stdout.splitlines()]
    assert all(set(line) == {"id", "source", "domain", "difficulty"} for line in lines)
    assert [line["id"] for line in lines] == [entry["id"] for entry in corpus["entries"]]
    assert [line["source"] for line in lines] == [entry["source"] for entry in corpus["entries"]]
    output = sources.stdout + sources.stderr
    assert [text for text in private_strings(corpus) if text in output] == []

    retired = cli("corpus", "retire", corpus["id"], "--to", "dev", "--version", "1", *store)
    assert retired.exit_code == 0 and "is dev since" in retired.stderr
    history = json.loads(cli("corpus", "list", "--json", *store).stdout)[0]["history"]
    assert [span["tier"] for span in history] == ["holdout", "dev"]
    table = cli("corpus", "list", *store).stdout
    assert corpus["id"] in table and fields["version"][:12] in table and " dev " in table


def test_cli_bad_inputs_are_one_line_with_the_right_exit_code(cli, tmp_path):
    store = ("--store", f"sqlite:///{tmp_path / 'corpora.sqlite'}")
    corpus = example_corpus()
    assert cli("corpus", "register", CORPUS_PATH, "--tier", "holdout", "--accept-check-failures", "test corpus",
               *store).exit_code == 0
    assert "no registered corpus 'nope'" in one_error_line(cli("corpus", "sources", "nope", *store), 2)
    assert "no registered corpus 'nope'" in one_error_line(cli("corpus", "retire", "nope", "--to", "dev", *store), 2)
    assert "version '7'" in one_error_line(cli("corpus", "sources", corpus["id"], "--version", "7", *store), 2)
    assert "unknown tier 'secret'" in one_error_line(
        cli("corpus", "register", CORPUS_PATH, "--tier", "secret", *store), 2)
    assert "`corpus retire`" in one_error_line(cli("corpus", "promote", corpus["id"], "--to", "dev", *store), 2)
    assert "`corpus promote`" in one_error_line(cli("corpus", "retire", corpus["id"], "--to", "gold", *store), 2)

    changed_path = tmp_path / "changed.json"
    changed_path.write_text(json.dumps(edited(corpus, lambda c: c["entries"][0].update(reference="Guardar"))))
    conflict = one_error_line(cli("corpus", "register", changed_path, "--tier", "holdout", *store), 2)
    assert "registered as version 1" in conflict and f"1 entry changed ({corpus['entries'][0]['id']})" in conflict
    empty_reference = tmp_path / "empty.json"
    empty_reference.write_text(json.dumps(edited(corpus, lambda c: c["entries"][1].update(reference=""))))
    assert one_error_line(cli("corpus", "register", empty_reference, "--tier", "dev", *store), 2).startswith(
        f"champollion: error: {empty_reference}: corpus.entries[1].reference")
    assert "cannot read" in one_error_line(cli("corpus", "register", tmp_path / "missing.json", "--tier", "dev",
                                               *store), 2)
    one_error_line(cli("corpus", "list", "--gateway", "127.0.0.1:1"), 1)
    # The refusals changed nothing.
    assert [c["number"] for c in json.loads(cli("corpus", "list", "--json", *store).stdout)] == [1]


def test_cli_official_leaderboard_leaves_dev_runs_out(cli, tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore.open(url)
    cards = {tier: make_card(model=f"on-{tier}", composite=score) for tier, score in (("holdout", 0.4), ("dev", 0.9))}
    for tier, card in cards.items():
        card["dataset"]["tier"] = tier
        save(store, card)
    store.close()
    board = ("leaderboard", "--dataset", DATASET, "--json", "--store", url)
    assert [row["run_id"] for row in json.loads(cli(*board, "--official").stdout)] == [cards["holdout"]["run_id"]]
    assert [row["run_id"] for row in json.loads(cli(*board).stdout)] == [cards["dev"]["run_id"],
                                                                          cards["holdout"]["run_id"]]


def test_an_empty_official_board_says_there_is_no_run(cli, tmp_path):
    """A board with runs on the corpus but none official: one line saying so
    (no empty version nor table), the JSON an empty list, status 0."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore.open(url)
    card = make_card(model="on-dev", composite=0.5)
    card["dataset"]["tier"] = "dev"
    save(store, card)
    store.close()
    result = cli("leaderboard", "--dataset", DATASET, "--official", "--store", url)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{DATASET}: no run to rank (--official: only runs scored against a registered holdout or gold corpus; "
        "disqualified runs only with --include-disqualified; held runs once cleared)"]
    assert json.loads(cli("leaderboard", "--dataset", DATASET, "--official", "--json", "--store", url).stdout) == []
    assert cli("leaderboard", "--dataset", DATASET, "--store", url).stdout.startswith(f"{DATASET}, corpus version ")
