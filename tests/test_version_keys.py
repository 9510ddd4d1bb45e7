"""Keyed public version ids (issue 33, finding 3): the version a
non-maintainer sees of a holdout or gold corpus is an HMAC under a key kept
outside the store, so recomputing sha256(json(sorted([id, reference]))) from
a guessed corpus file confirms nothing, and equal references under two ids
give two public ids; dev versions keep their content hash. The store (SQLite
and PostgreSQL), a store migrated from 0006, `db version-key new|rotate`,
and a gateway with tokens answering a submitter's ListCorpora, GetSources,
Evaluate and `corpus list`."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from datetime import datetime, timezone

import grpc
import pytest
import sqlalchemy as sa
from alembic import command

from apps.launch.embedded import EmbeddedStack
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.card.identity import keyed_version, public_fingerprint, run_fingerprint, with_public_version
from gateway.server.access import public_card
from gateway.server.tokens import Token, TokenFile, token_hash
from gateway.store import InvalidQuery, RunStore, UnknownCorpus, version_keys
from gateway.store.corpora import canonical_entry, content_version, pick, shown_version
from gateway.store.location import open_engine, parse_store_url
from gateway.store.migrate import alembic_config
from gateway.store.tables import corpora, corpus_entries, corpus_tiers
from tests.test_corpora import example_corpus

TOKENS = {"submitter": "submitter-token-for-version-keys", "maintainer": "maintainer-token-for-version-keys"}


def offline_version(corpus: dict) -> str:
    """The attack: the version hash recomputed from a (guessed) corpus file."""
    pairs = sorted([entry["id"], entry["reference"]] for entry in corpus["entries"])
    canonical = json.dumps(pairs, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.fixture
def key_file(tmp_path, monkeypatch):
    path = tmp_path / "keys" / "version.key"
    version_keys.write_key_file(path, version_keys.new_key())
    monkeypatch.setenv(version_keys.ENVIRONMENT, str(path))
    return path


@pytest.fixture
def store(store_url, key_file):
    opened = RunStore.open(store_url)
    yield opened
    opened.close()


def test_a_holdout_public_id_is_keyed_and_proves_no_guess(store, key_file):
    corpus = example_corpus()
    info = store.register_corpus(corpus, "holdout")
    guessed = offline_version(corpus)
    assert info["version"] == guessed == content_version(corpus["entries"])  # the internal identity
    public = shown_version(info)
    assert public == info["public_version"] == keyed_version(version_keys.read_key_file(key_file), corpus["id"],
                                                             guessed)
    assert len(public) == 64 and public != guessed
    # Not computable without the key: any other key gives another id, and no plain hash of what is public is it.
    assert keyed_version(version_keys.new_key(), corpus["id"], guessed) != public
    assert public not in {hashlib.sha256(text.encode()).hexdigest() for text in (guessed, corpus["id"] + guessed)}
    # The public id names the version, as the content hash and the number do for a maintainer.
    for name in (public, public[:8], guessed, guessed[:8], "1"):
        assert store.corpus_info(corpus["id"], name)["version"] == guessed
    # A non-maintainer's request: by public id or number only; a guessed content hash is simply unknown.
    listed = store.list_corpora()
    assert pick(listed, corpus["id"], public[:10], public_only=True)["version"] == guessed
    for guess in (guessed, guessed[:12]):
        with pytest.raises(UnknownCorpus) as unknown:
            pick(listed, corpus["id"], guess, public_only=True)
        assert str(unknown.value) == f"no registered corpus {corpus['id']!r} version {guess!r}"
    with pytest.raises(InvalidQuery):
        pick(listed, corpus["id"], "abc", public_only=True)


def test_equal_references_in_two_corpora_give_different_public_ids_and_dev_keeps_its_hash(store):
    corpus = example_corpus()
    holdout = store.register_corpus(corpus, "holdout")
    gold = store.register_corpus({**corpus, "id": corpus["id"] + "-gold"}, "gold")
    dev = store.register_corpus({**corpus, "id": corpus["id"] + "-dev"}, "dev")
    assert holdout["version"] == gold["version"] == dev["version"] == offline_version(corpus)
    shown = [shown_version(info) for info in (holdout, gold, dev)]
    assert shown[0] != shown[1] and offline_version(corpus) not in shown[:2]
    assert shown[2] == offline_version(corpus)  # dev is public: its content hash
    # Retired to dev, a holdout shows its content hash; promoted back, its public id again.
    retired = store.set_corpus_tier(corpus["id"], None, "dev")
    assert shown_version(retired) == retired["version"]
    assert shown_version(store.set_corpus_tier(corpus["id"], None, "holdout")) == shown[0]


def test_the_public_ids_are_stored_with_their_key_id_and_never_the_key(store, store_url, key_file):
    corpus = example_corpus()
    info = store.register_corpus(corpus, "holdout")
    key = version_keys.read_key_file(key_file)
    engine = open_engine(parse_store_url(store_url))
    try:
        with engine.connect() as connection:
            row = connection.execute(sa.select(corpora)).one()
            dump = json.dumps([list(r) for table in ("corpora", "corpus_entries", "corpus_tiers")
                               for r in connection.execute(sa.text(f"SELECT * FROM {table}"))], default=str)
    finally:
        engine.dispose()
    assert (row.public_version, row.version_key_id) == (info["public_version"], version_keys.key_id(key))
    assert key.hex() not in dump
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600


def test_a_store_migrated_from_0006_keeps_working_and_gets_public_ids(store_url, key_file):
    corpus = example_corpus()
    version = content_version(corpus["entries"])
    url = parse_store_url(store_url)
    engine = open_engine(url)
    now = datetime.now(timezone.utc)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "0006")
            connection.execute(sa.insert(corpora), [{
                "corpus_id": corpus["id"], "version": version, "number": 1, "source_lang": corpus["source_lang"],
                "target_lang": corpus["target_lang"], "entries": len(corpus["entries"]), "created_at": now}])
            connection.execute(sa.insert(corpus_entries), [
                {"corpus_id": corpus["id"], "version": version, "position": i, "entry_id": entry["id"],
                 "fingerprint": f"{i:016x}", "entry": canonical_entry(entry)}
                for i, entry in enumerate(corpus["entries"])])
            connection.execute(sa.insert(corpus_tiers), [{"corpus_id": corpus["id"], "version": version, "step": 0,
                                                          "tier": "holdout", "since": now}])
    finally:
        engine.dispose()
    store = RunStore.open(store_url)  # migrates 0007, 0008
    try:
        expected = keyed_version(version_keys.read_key_file(key_file), corpus["id"], version)
        [listed] = store.list_corpora()
        assert (listed["version"], listed["public_version"], listed["tier"]) == (version, expected, "holdout")
        assert store.corpus_info(corpus["id"], expected[:8])["number"] == 1
        assert store.register_corpus(corpus, "holdout")["created"] is False
        # The first write with a key stores the ids the migration could not derive.
        store.register_corpus({**corpus, "id": "another"}, "dev")
    finally:
        store.close()
    engine = open_engine(url)
    try:
        with engine.connect() as connection:
            stored = dict(connection.execute(sa.select(corpora.c.corpus_id, corpora.c.public_version)).all())
    finally:
        engine.dispose()
    assert stored[corpus["id"]] == expected and stored["another"] is not None


def test_rotation_changes_the_ids_and_old_ones_stop_resolving(cli, tmp_path, monkeypatch):
    monkeypatch.delenv(version_keys.ENVIRONMENT, raising=False)
    key = tmp_path / "version.key"
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    made = cli("db", "version-key", "new", "--version-key", key, "--store", url)
    assert made.exit_code == 0, made.stderr
    assert "0 corpus versions given public ids" in made.stderr and stat.S_IMODE(os.stat(key).st_mode) == 0o600
    again = cli("db", "version-key", "new", "--version-key", key, "--no-store")
    assert again.exit_code == 2 and "exists already" in again.stderr
    monkeypatch.setenv(version_keys.ENVIRONMENT, str(key))
    corpus = example_corpus()
    store = RunStore.open(url)
    try:
        before = store.register_corpus(corpus, "holdout")["public_version"]
    finally:
        store.close()
    rotated = cli("db", "version-key", "rotate", "--version-key", key, "--store", url)
    assert rotated.exit_code == 0, rotated.stderr
    assert "1 corpus version given public ids" in rotated.stderr and "no longer resolve" in rotated.stderr
    store = RunStore.open(url)
    try:
        after = store.corpus_info(corpus["id"])["public_version"]
        assert after != before and after == keyed_version(version_keys.read_key_file(key), corpus["id"],
                                                          offline_version(corpus))
        with pytest.raises(UnknownCorpus):
            pick(store.list_corpora(), corpus["id"], before, public_only=True)
        assert pick(store.list_corpora(), corpus["id"], after, public_only=True)["number"] == 1
    finally:
        store.close()
    missing = cli("db", "version-key", "rotate", "--version-key", tmp_path / "none.key", "--no-store")
    assert missing.exit_code == 2 and "no such file to rotate" in missing.stderr


def test_without_a_configured_key_a_sqlite_store_keeps_one_beside_it(tmp_path, monkeypatch):
    monkeypatch.delenv(version_keys.ENVIRONMENT, raising=False)
    path = tmp_path / "runs.sqlite"
    store = RunStore.open(f"sqlite:///{path}")
    try:
        info = store.register_corpus(example_corpus(), "gold")
    finally:
        store.close()
    beside = tmp_path / "runs.sqlite.version-key"
    assert stat.S_IMODE(os.stat(beside).st_mode) == 0o600
    assert info["public_version"] == keyed_version(version_keys.read_key_file(beside), info["id"], info["version"])


def test_a_card_as_a_submitter_sees_it_names_the_public_id_only():
    version = "ab" * 32
    fingerprint, inputs = run_fingerprint("m", 0.0, "translate", version)
    card = {"dataset": {"id": "c", "version": version, "tier": "holdout"},
            "fingerprint": {"hash": fingerprint, "inputs": inputs}, "scores": {"chrf_plus_plus": 50.0}}
    corpus = {"tier": "holdout", "version": version, "public_version": "cd" * 32}
    shown = public_card(card, corpus, "submitter")
    assert version not in json.dumps(shown) and fingerprint not in json.dumps(shown)
    assert shown["dataset"]["version"] == "cd" * 32 == shown["fingerprint"]["inputs"]["corpus_version"]
    assert shown["fingerprint"]["hash"] == public_fingerprint(inputs, "cd" * 32)
    assert card["dataset"]["version"] == version  # the stored card is left as it is
    assert public_card(card, corpus, "maintainer") is card
    assert public_card(card, {**corpus, "tier": "dev"}, "submitter") is card
    assert with_public_version(card, "ef" * 32)["scores"] == card["scores"]


# --- a gateway with tokens ------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(stack, tmp_path_factory):
    """A gateway with a submitter's and a maintainer's token over a store with
    the example registered as holdout and (a copy) as gold, under a key."""
    folder = tmp_path_factory.mktemp("version-keys")
    key = folder / "version.key"
    version_keys.write_key_file(key, version_keys.new_key())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(version_keys.ENVIRONMENT, str(key))
        url = f"sqlite:///{folder / 'runs.sqlite'}"
        store = RunStore.open(url)
        corpus = {**example_corpus(), "id": f"vk-{uuid.uuid4().hex[:6]}"}
        try:
            store.register_corpus(corpus, "holdout")
            store.register_corpus({**corpus, "id": corpus["id"] + "-gold"}, "gold")
        finally:
            store.close()
        tokens = TokenFile([Token(role, role, token_hash(token)) for role, token in TOKENS.items()])
        with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=url,
                           tokens=tokens) as running:
            with grpc.insecure_channel(running.gateway_address) as channel:
                yield running.gateway_address, gateway_pb2_grpc.GatewayStub(channel), corpus, key


def as_role(role: str):
    return (("authorization", f"Bearer {TOKENS[role]}"),)


def test_a_submitter_sees_and_names_public_ids_only(guarded):
    _, stub, corpus, key = guarded
    guessed = offline_version(corpus)
    public = keyed_version(version_keys.read_key_file(key), corpus["id"], guessed)
    listed = stub.ListCorpora(gateway_pb2.ListCorporaRequest(), metadata=as_role("submitter")).corpora
    shown = {info.id: info.version for info in listed}
    assert shown[corpus["id"]] == public
    assert guessed not in shown.values() and guessed[:12] not in repr(listed)
    assert shown[corpus["id"]] != shown[corpus["id"] + "-gold"]
    as_maintainer = stub.ListCorpora(gateway_pb2.ListCorporaRequest(), metadata=as_role("maintainer")).corpora
    assert {info.id: info.version for info in as_maintainer}[corpus["id"]] == guessed

    sources = list(stub.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus["id"], version=public[:10]),
                                   metadata=as_role("submitter"), timeout=60))
    assert sources[0].corpus.version == public
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus["id"], version=guessed),
                             metadata=as_role("submitter"), timeout=60))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert list(stub.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus["id"], version=guessed),
                                metadata=as_role("maintainer"), timeout=60))[0].corpus.version == guessed

    # Evaluate naming the guessed content hash: unknown, as any wrong version (nothing is scored).
    request = gateway_pb2.EvaluateRequest(corpus_ref=gateway_pb2.CorpusRef(id=corpus["id"], version=guessed),
                                          predictions=[gateway_pb2.Prediction(id="x", prediction="y")])
    with pytest.raises(grpc.RpcError) as unknown:
        stub.Evaluate(request, metadata=as_role("submitter"), timeout=60)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert unknown.value.details() == f"corpus_ref: no registered corpus {corpus['id']!r} version {guessed!r}"
    # By its public id it is found (and refused for the unknown prediction id, naming the public id only).
    request.corpus_ref.version = public
    with pytest.raises(grpc.RpcError) as invalid:
        stub.Evaluate(request, metadata=as_role("submitter"), timeout=60)
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert public[:12] in invalid.value.details() and guessed[:12] not in invalid.value.details()


def test_the_cli_shows_the_public_id_to_a_submitter(cli, guarded):
    address, _, corpus, key = guarded
    guessed = offline_version(corpus)
    public = keyed_version(version_keys.read_key_file(key), corpus["id"], guessed)
    table = cli("corpus", "list", "--gateway", address, "--token", TOKENS["submitter"])
    assert table.exit_code == 0, table.stderr
    assert public[:12] in table.stdout and guessed[:12] not in table.stdout
    listed = json.loads(cli("corpus", "list", "--json", "--gateway", address, "--token", TOKENS["submitter"]).stdout)
    assert {c["id"]: c["version"] for c in listed}[corpus["id"]] == public
    assert guessed not in json.dumps(listed)
