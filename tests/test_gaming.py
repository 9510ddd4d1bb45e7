"""A benchmark that cannot be probed (issue 26): every attack that worked
against a gateway with tokens, a real store, examples/eng-spa registered as
holdout and a copy as gold, run again against such a gateway and shown to
fail, or to be capped and flagged to the maintainers.

The gateway is this module's own (no families of its own: the session
stack's are reached by address), with tokens for several submitters (one
per attack, so that each spends its own budget) and a maintainer, over a
store of its own. Each attack is written as the attacker would run it."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc
import structlog
import yaml

from apps.client import Client, ClientError, InvalidSettings
from apps.launch.embedded import EmbeddedStack
from champollion.core.serving import ServerTls
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.server.board_ranks import LADDER_NOTE
from gateway.server.config import GatewayConfig
from gateway.server.tokens import Token, TokenFile, new_token, token_hash, token_line
from gateway.store import RunStore
from gateway.store.location import open_engine, parse_store_url
from gateway.store.tables import submissions
from tests.conftest import EXAMPLE, REPO
from tests.test_tls import free_ports, make_certificates

HOLDOUT = "gaming-eng-spa"
GOLD = "gaming-eng-spa-gold"
CORPUS = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
PREDICTIONS = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
META = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
# One token per attacker, so that each attack spends a budget of its own.
SUBMITTERS = ("alice", "bob", "climber", "dictionary", "partial", "oracle", "second", "watcher")
TOKENS = {name: new_token() for name in (*SUBMITTERS, "maintainer")}
BUDGET = GatewayConfig().submission_budget


def _role(name: str) -> str:
    return "maintainer" if name == "maintainer" else "submitter"


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('gaming-store') / 'runs.sqlite'}"
    store = RunStore.open(url)
    try:
        store.register_corpus({**CORPUS, "id": HOLDOUT}, "holdout")
        store.register_corpus({**CORPUS, "id": GOLD}, "gold")
    finally:
        store.close()
    return url


@pytest.fixture(scope="module")
def gateway(stack, store_url) -> str:
    tokens = TokenFile([Token(name, _role(name), token_hash(token)) for name, token in TOKENS.items()])
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store_url,
                       tokens=tokens) as running:
        yield running.gateway_address


@pytest.fixture(scope="module")
def token_files(tmp_path_factory) -> dict:
    """Each token in a file of its own, as `--token-file` reads it."""
    folder = tmp_path_factory.mktemp("token-files")
    files = {}
    for name, token in TOKENS.items():
        files[name] = folder / name
        files[name].write_text(token + "\n", encoding="utf-8")
    return files


def client(gateway: str, name: str) -> Client:
    return Client(gateway, TOKENS[name])


def refused(call) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


def registered(corpus_id: str = HOLDOUT) -> gateway_pb2.CorpusRef:
    return gateway_pb2.CorpusRef(id=corpus_id)


def with_prediction(entry_id: str, text: str, base=PREDICTIONS) -> list[dict]:
    """The example's predictions with one entry's replaced."""
    return [{**prediction, "prediction": text} if prediction["id"] == entry_id else prediction
            for prediction in base]


def long_entry() -> dict:
    """An entry of the example whose reference the verbatim rule catches alone."""
    return next(entry for entry in CORPUS["entries"] if len(entry["reference"]) >= 40)


@pytest.fixture(scope="module")
def runs(gateway, run_card_validator) -> dict:
    """The runs the attacks aim at: a gold run (the maintainer's), a holdout
    run each of alice and bob, and alice's full card of the same texts sent
    as a corpus of her own (dev data she may read whole)."""
    made = {}
    with client(gateway, "maintainer") as maintainer:
        made["gold"] = maintainer.evaluate(registered(GOLD), PREDICTIONS, META)
    with client(gateway, "alice") as alice:
        made["alice"] = alice.evaluate(registered(), PREDICTIONS, META)
        made["alice_full"] = alice.evaluate({**CORPUS, "id": "alice-own-copy"}, PREDICTIONS, META)
    with client(gateway, "bob") as bob:
        # Other predictions than alice's (a near-duplicate of hers would be held as probing).
        made["bob"] = bob.evaluate(registered(), bobs_predictions(), {**META, "model_slug": "bob-llm"})
    for card in made.values():
        run_card_validator.validate(card)
    # Every submission to a holdout waits for a maintainer (issue 33): these two are published.
    publish(gateway, made["alice"]["run_id"], made["bob"]["run_id"])
    assert made["alice_full"]["entries"] and not made["alice"]["entries"] and not made["gold"]["entries"]
    return made


def bobs_predictions() -> list[dict]:
    """The example's predictions with every third entry reworded."""
    return [{**p, "prediction": f"{p['prediction']} (bob)"} if "prediction" in p and i % 3 == 0 else p
            for i, p in enumerate(PREDICTIONS)]


def publish(gateway: str, *run_ids: str) -> None:
    """A maintainer clears held runs onto the board."""
    with client(gateway, "maintainer") as maintainer:
        for run_id in run_ids:
            maintainer.review_run(run_id, "clear", "published")


def forged_baseline(card: dict, version: str) -> dict:
    """The attack's crafted baseline: a card of the attacker's own whose
    per-entry statistics are zero but for one entry, claiming the victim's
    corpus version, so that a one-resample comparison reads the victim's
    statistics back."""
    forged = json.loads(json.dumps(card))
    forged["dataset"]["version"] = version
    for position, entry in enumerate(forged["entries"]):
        entry["stats"] = {metric: [0.0 if position else value for value in values]
                          for metric, values in entry["stats"].items()}
    return forged


# --- 1. Compare and reads respect tiers -----------------------------------------------------

def test_a_forged_card_compared_with_a_gold_run_is_refused(gateway, runs, cli, token_files, tmp_path):
    forged = forged_baseline(runs["alice_full"], runs["gold"]["dataset"]["version"])
    with client(gateway, "alice") as alice:
        error = refused(lambda: alice.compare(forged, runs["gold"]["run_id"], resamples=1, seed=7))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.details == (f"Compare of system run {runs['gold']['run_id']!r} on a gold corpus: needs the "
                             f"maintainer role; token 'alice' has the submitter role")
    # The command line of the attack, as it was run.
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(forged), encoding="utf-8")
    result = cli("compare", crafted, runs["gold"]["run_id"], "--resamples", "1", "--seed", "7",
                 "--gateway", gateway, "--token-file", token_files["alice"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "PERMISSION_DENIED: Compare of system run" in result.stderr


def test_a_forged_card_or_a_stored_run_against_another_submitters_holdout_run_is_refused(gateway, runs):
    bob_run = runs["bob"]["run_id"]
    forged = forged_baseline(runs["alice_full"], runs["bob"]["dataset"]["version"])
    with client(gateway, "alice") as alice:
        uploaded = refused(lambda: alice.compare(forged, bob_run, resamples=1, seed=7))
        stored = refused(lambda: alice.compare(runs["alice"]["run_id"], bob_run))
    assert uploaded.code == stored.code == grpc.StatusCode.PERMISSION_DENIED
    assert uploaded.details.startswith("Compare: the baseline is an uploaded run card and run")
    assert stored.details == (f"Compare: run {bob_run!r} on a holdout corpus was not submitted with token "
                              f"'alice'; there a submitter compares only its own runs")


def test_a_submitter_compares_its_own_holdout_runs_with_the_gateways_settings_only(gateway, runs):
    with client(gateway, "alice") as alice:
        one_resample = refused(lambda: alice.compare(runs["alice"]["run_id"], runs["alice"]["run_id"],
                                                     resamples=1, seed=7))
        assert one_resample.code == grpc.StatusCode.PERMISSION_DENIED
        assert "the seed and sample count are the gateway's" in one_resample.details
        # An uploaded card against her own holdout run is refused too: the
        # card could say anything.
        forged = forged_baseline(runs["alice_full"], runs["alice"]["dataset"]["version"])
        assert refused(lambda: alice.compare(forged, runs["alice"]["run_id"])).code == \
            grpc.StatusCode.PERMISSION_DENIED
        comparison = alice.compare(runs["alice"]["run_id"], runs["alice"]["run_id"])
    assert comparison["test"]["samples"] == DEFAULT_RESAMPLES >= 1000 and comparison["test"]["seed"] == DEFAULT_SEED
    with client(gateway, "maintainer") as maintainer:  # maintainers read everything anyway
        assert maintainer.compare(runs["alice"]["run_id"], runs["gold"]["run_id"], resamples=1, seed=7)


def test_all_pairs_keep_compares_rules_naming_the_run(gateway, runs, cli, token_files, tmp_path):
    """ComparePairs checks each of its runs as Compare checks a stored side
    (issue 34): the attacks above, with more runs, are refused the same way."""
    gold, alice_run, bob_run = runs["gold"]["run_id"], runs["alice"]["run_id"], runs["bob"]["run_id"]
    forged = forged_baseline(runs["alice_full"], runs["gold"]["dataset"]["version"])
    with client(gateway, "alice") as alice:
        read = refused(lambda: alice.compare_pairs([forged, alice_run, gold], resamples=1, seed=7))
        foreign = refused(lambda: alice.compare_pairs([alice_run, alice_run, bob_run]))
        uploaded = refused(lambda: alice.compare_pairs([alice_run, forged]))
        one_resample = refused(lambda: alice.compare_pairs([alice_run, alice_run], resamples=1, seed=7))
        own = alice.compare_pairs([alice_run, alice_run])
    assert {read.code, foreign.code, uploaded.code, one_resample.code} == {grpc.StatusCode.PERMISSION_DENIED}
    assert read.details == (f"ComparePairs of #3 run {gold!r} on a gold corpus: needs the maintainer role; "
                            f"token 'alice' has the submitter role")
    assert foreign.details == (f"ComparePairs: run {bob_run!r} on a holdout corpus was not submitted with token "
                               f"'alice'; there a submitter compares only its own runs")
    assert uploaded.details.startswith(f"ComparePairs: the #2 is an uploaded run card and run {alice_run!r}")
    assert "the seed and sample count are the gateway's" in one_resample.details
    # Her own runs, with the gateway's settings; the version by its public id, as her card names it.
    assert own["test"]["samples"] == DEFAULT_RESAMPLES and own["test"]["seed"] == DEFAULT_SEED
    assert own["dataset_version"] == runs["alice"]["dataset"]["version"]
    with client(gateway, "maintainer") as maintainer:
        whole = maintainer.compare_pairs([alice_run, bob_run, alice_run], resamples=1, seed=7)
        version = maintainer.show(alice_run)["dataset"]["version"]
    assert whole["dataset_version"] == version != own["dataset_version"] and len(version) == 64
    # The command line: one line, the run named, exit 1 as every refused access.
    result = cli("compare", alice_run, bob_run, alice_run, "--all-pairs", "--gateway", gateway, "--token-file",
                 token_files["alice"])
    assert result.exit_code == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert f"PERMISSION_DENIED: ComparePairs: run {bob_run!r} on a holdout corpus" in result.stderr


def test_all_pairs_across_versions_name_a_secret_one_by_its_public_id(gateway, runs):
    """Her holdout run beside a run on a corpus of her own with one
    reference changed (another version): refused, each version named as she
    may see it."""
    changed = {**CORPUS, "id": "alice-changed-copy",
               "entries": [{**entry, "reference": entry["reference"] + " ¡Hola!"} if index == 0 else entry
                           for index, entry in enumerate(CORPUS["entries"])]}
    with client(gateway, "alice") as alice:
        other = alice.evaluate(changed, PREDICTIONS, META)
        error = refused(lambda: alice.compare_pairs([runs["alice"]["run_id"], other["run_id"]], ["holdout", "copy"]))
    public, copy = runs["alice"]["dataset"]["version"], other["dataset"]["version"]
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.details == (f"different corpus versions (holdout on {public[:12]}…; copy on {copy[:12]}…): scores "
                             f"compare only within a version")
    with client(gateway, "maintainer") as maintainer:
        hidden = maintainer.show(runs["alice"]["run_id"])["dataset"]["version"]
    assert hidden[:12] not in error.details


def test_gold_runs_are_listed_and_ranked_for_maintainers_only(gateway, runs, cli, token_files):
    access = ("--gateway", gateway, "--token-file", token_files["alice"])
    for command in (("leaderboard", "--dataset", GOLD, "--official", "--json"), ("runs", "--dataset", GOLD)):
        result = cli(*command, *access)
        assert result.exit_code == 1 and result.stdout == "", result
        assert "PERMISSION_DENIED" in result.stderr and f"corpus {GOLD!r} (gold): needs the maintainer role" \
            in result.stderr and result.stderr.count("\n") == 1
    listed = json.loads(cli("runs", "--json", *access).stdout)
    assert runs["gold"]["run_id"] not in {run["run_id"] for run in listed}
    assert all("submitted_by" not in run and "review" not in run for run in listed)
    board = json.loads(cli("leaderboard", "--dataset", HOLDOUT, "--json", *access).stdout)
    assert board and all("submitted_by" not in row for row in board)

    maintainer = ("--gateway", gateway, "--token-file", token_files["maintainer"])
    gold_board = json.loads(cli("leaderboard", "--dataset", GOLD, "--official", "--json", *maintainer).stdout)
    assert [(row["run_id"], row["submitted_by"]) for row in gold_board] == [(runs["gold"]["run_id"], "maintainer")]
    listed = {run["run_id"]: run for run in json.loads(cli("runs", "--json", *maintainer).stdout)}
    assert listed[runs["alice"]["run_id"]]["submitted_by"] == "alice"
    assert listed[runs["bob"]["run_id"]]["submitted_by"] == "bob"


def test_the_ladders_board_carries_no_rank_range_and_a_maintainers_holdout_board_does(gateway, runs):
    """Issue 34: intervals and rank ranges are computed from the references;
    the public board of a secret tier releases the Ladder's values only."""
    rank_fields = ("rank_range", "ci", "cluster")
    with client(gateway, "alice") as alice:
        public = alice.leaderboard_page(HOLDOUT)
    assert public.rows and all(row[field] is None for row in public.rows for field in rank_fields)
    assert public.ranks_note == LADDER_NOTE
    with client(gateway, "maintainer") as maintainer:
        whole = maintainer.leaderboard_page(HOLDOUT, all_submissions=True)
    ranked = [row for row in whole.rows if row["comparable"] and not row["floor"] and not row["disqualified"]]
    assert {runs["alice"]["run_id"], runs["bob"]["run_id"]} <= {row["run_id"] for row in ranked}
    assert whole.ranks_note == "" and all(row["rank_range"] and row["ci"] and row["cluster"] for row in ranked)


def test_corpus_level_answers_name_no_private_provenance(gateway, runs):
    private = {entry["provenance"]["source_doc"] for entry in CORPUS["entries"] if entry.get("provenance")}
    assert private and set(runs["alice_full"]["scores"]["by_provenance"]) == private  # what there was to hide
    with client(gateway, "alice") as alice:
        read_back = alice.show(runs["alice"]["run_id"])
    for card in (runs["alice"], read_back):
        assert card["scores"]["by_provenance"] == {}
        assert not any(doc in json.dumps(card) for doc in private)


# --- 2. Submissions tied to tokens ---------------------------------------------------------

def test_every_stored_run_records_its_token_and_the_log_says_so(gateway, store_url):
    with structlog.testing.capture_logs() as events, client(gateway, "bob") as bob:
        card = bob.evaluate({**CORPUS, "id": "bob-own-copy"}, PREDICTIONS, META)
    stored = [event for event in events if event["event"] == "run_stored" and event.get("run_id") == card["run_id"]]
    assert stored and stored[0]["token"] == "bob" and stored[0]["log_level"] == "info"
    store = RunStore.open(store_url)
    try:
        assert {run["run_id"]: run["submitted_by"] for run in store.list_runs("bob-own-copy")} == \
            {card["run_id"]: "bob"}
    finally:
        store.close()


def test_a_partial_submission_to_a_holdout_is_refused_and_not_counted(gateway, store_url, cli, token_files,
                                                                      tmp_path):
    one_entry = [PREDICTIONS[0]]
    with client(gateway, "partial") as partial:
        error = refused(lambda: partial.evaluate(registered(), one_entry, META))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith(f"predictions: cover 1 of the {len(CORPUS['entries'])} entries of registered "
                                    f"corpus {HOLDOUT!r} version 1; on a holdout corpus a run predicts every entry")
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(one_entry[0]) + "\n", encoding="utf-8")
    result = cli("evaluate", "--corpus-id", HOLDOUT, path, "--gateway", gateway, "--token-file", token_files["partial"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "cover 1 of the 36 entries" in result.stderr
    # Refused before it was admitted: nothing was counted against the budget.
    assert submissions_of(store_url, "partial") == 0
    with client(gateway, "partial") as partial:
        partial.evaluate(registered(), PREDICTIONS, META)
    assert submissions_of(store_url, "partial") == 1


def submissions_of(store_url: str, token: str) -> int:
    """Submissions counted against `token`'s budget, read from the store's table."""
    engine = open_engine(parse_store_url(store_url))
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.select(sa.func.count()).select_from(submissions)
                                     .where(submissions.c.token == token))
    finally:
        engine.dispose()


def test_the_bootstrap_of_a_holdout_run_is_the_gateways(gateway):
    with client(gateway, "oracle") as oracle:
        error = refused(lambda: oracle.evaluate(registered(), PREDICTIONS, META, seed=3, resamples=1))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith("options.seed / options.bootstrap_resamples: on a holdout corpus the bootstrap "
                                    "is the gateway's")


def test_a_client_sent_corpus_cannot_take_a_registered_id(gateway, runs):
    """The attack: a corpus of one's own (references one wrote) under the
    holdout's id, to join its leaderboard. Refused; nothing is stored."""
    with client(gateway, "oracle") as oracle:
        error = refused(lambda: oracle.evaluate({**CORPUS, "id": HOLDOUT}, PREDICTIONS,
                                                {**META, "model_slug": "own-references"}))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.details.startswith(f"corpus.id: {HOLDOUT!r} is the id of a registered (holdout) corpus")
        assert not oracle.runs(HOLDOUT, "own-references")


def test_the_cherry_pick_flag_counts_a_tokens_runs_whatever_the_model_slug(gateway, runs):
    # alice's second run: another model name, predictions differing in many
    # entries (not a near-duplicate): both on the board, both flagged.
    other = [{**p, "prediction": f"{p['prediction']} ahora"} if "prediction" in p and i % 2 else p
             for i, p in enumerate(PREDICTIONS)]
    with client(gateway, "alice") as alice:
        second = alice.evaluate(registered(), other, {**META, "model_slug": "alice-second"})
    publish(gateway, second["run_id"])
    with client(gateway, "maintainer") as maintainer:
        board = {row["run_id"]: row for row in maintainer.leaderboard(HOLDOUT, all_submissions=True)}
    for run_id in (runs["alice"]["run_id"], second["run_id"]):
        assert board[run_id]["submissions_by_token"] == 2 and board[run_id]["cherry_pick_suspect"] is True
        assert board[run_id]["submitted_by"] == "alice"
    assert board[runs["bob"]["run_id"]]["cherry_pick_suspect"] is False


# --- 3. No live oracles --------------------------------------------------------------------

def chrf(card: dict) -> float:
    return card["scores"]["chrf_plus_plus"]


def probing_of_another_token(reasons: list[str], changed: int, token: str) -> None:
    """The hold's one reason: a near-duplicate of a run another token sent
    (alice's predictions, or the newest of the other tokens' that sent them again)."""
    reason, = reasons
    assert re.fullmatch(rf"probing: its predictions differ from those of run [0-9a-f]{{32}} \(sent by token "
                        rf"'(?!{token}')[a-z]+', same corpus version\) in {changed} of {len(CORPUS['entries'])} "
                        rf"entries", reason), reason


def test_a_chrf_hill_climb_stops_at_the_budget_and_is_flagged(gateway, runs, run_card_validator):
    """The attack: guess one entry's reference a character at a time, kept
    when the corpus chrF++ rises. Every submission is a near-duplicate of an
    earlier one, the first of alice's run (another token: issue 33), the
    others of the climber's own: held for review as probing (off the board),
    and the budget stops the climb long before a reference is recovered."""
    target = long_entry()
    alphabet = sorted({char for char in target["reference"].lower() if char.isalpha()})
    guess, best, answered, cards = "", None, 0, []
    with client(gateway, "climber") as climber:
        for step in range(50):
            candidate = guess + alphabet[step % len(alphabet)]
            try:
                card = climber.evaluate(registered(), with_prediction(target["id"], candidate), META)
            except ClientError as error:
                stopped = error
                break
            run_card_validator.validate(card)
            answered += 1
            cards.append(card)
            if best is None or chrf(card) > best:
                guess, best = candidate, chrf(card)
        else:
            pytest.fail("the climb was never stopped")
    assert answered == BUDGET and guess != target["reference"]
    assert stopped.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stopped.details.startswith(f"submission budget spent: token 'climber' has made {BUDGET} submissions to "
                                      f"corpus {HOLDOUT!r} version 1 in the last 24 h (at most {BUDGET}); "
                                      f"the next is accepted from ")
    resets = datetime.fromisoformat(stopped.details.rsplit(" ", 1)[1])
    assert timedelta(hours=23) < resets - datetime.now(timezone.utc) <= timedelta(hours=24)
    with client(gateway, "maintainer") as maintainer:
        held = {run["run_id"]: run for run in maintainer.held_runs(HOLDOUT)}
        board = {row["run_id"] for row in maintainer.leaderboard(HOLDOUT, all_submissions=True)}
    probes = [card["run_id"] for card in cards]
    assert set(probes) <= set(held)
    probing_of_another_token(held[probes[0]]["reasons"], 1, "climber")
    for run_id in probes[1:]:
        assert held[run_id]["submitted_by"] == "climber"
        assert held[run_id]["reasons"][0].startswith("probing: its predictions differ from those of run ")
        assert held[run_id]["reasons"][0].endswith(
            f"(same token, same corpus version) in 1 of {len(CORPUS['entries'])} entries")
    assert not board & set(probes)  # no probe is ranked


def test_the_contamination_dictionary_attack_learns_nothing_and_stops_at_the_budget(gateway, runs):
    """The attack: the same predictions, a prompt quoting one guess of an
    entry's reference each time; it worked because a verdict came back iff
    the guess was the reference. Now every answer is the same whatever the
    guess, and each probe is held with its reason for the maintainers."""
    target = long_entry()
    wrong = [f"{target['reference'][:-6]} {word}." for word in ("ayer", "luego", "nunca", "siempre", "pronto")]
    # The right guess, disguised: other case, zero-width spaces for its spaces.
    right = target["reference"].upper().replace(" ", "\u200b")
    guesses = [wrong[0], wrong[1], right, *wrong[2:]]
    answers = []
    with client(gateway, "dictionary") as attacker:
        for guess in guesses:
            try:
                answers.append(attacker.evaluate(registered(), PREDICTIONS,
                                                 {**META, "prompt": f"Translate. Hint: {guess}"}))
            except ClientError as error:
                stopped = error
                break
    assert len(answers) == BUDGET and stopped.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    integrity = [card["integrity"] for card in answers]
    assert all(block == {**integrity[0], "submissions_with_fingerprint": block["submissions_with_fingerprint"]}
               for block in integrity)
    assert integrity[0]["verdict_withheld"] is True and integrity[0]["disqualified"] is False
    assert [card["scores"] for card in answers[1:]] == [answers[0]["scores"]] * (BUDGET - 1)
    with client(gateway, "maintainer") as maintainer:
        held = {run["run_id"]: run for run in maintainer.held_runs(HOLDOUT)}
        stored = maintainer.show(answers[2]["run_id"])
    # Every one held, right guess or wrong; the first as alice's predictions sent again by another token.
    assert all(card["run_id"] in held for card in answers)
    probing_of_another_token(held[answers[0]["run_id"]]["reasons"], 0, "dictionary")
    reasons = held[answers[2]["run_id"]]["reasons"]
    assert reasons[0].startswith("contamination: 1 entry found") and reasons[1].startswith("probing:")
    assert held[answers[2]["run_id"]]["contaminated_entries"] == [target["id"]]
    assert stored["integrity"]["reasons"] == [f"reference of entry {target['id']} appears verbatim in meta.prompt"]
    assert all(held[card["run_id"]]["reasons"] == [held[card["run_id"]]["reasons"][0]] and
               held[card["run_id"]]["reasons"][0].startswith("probing:") for card in answers[3:])


def test_maintainers_clear_or_disqualify_held_runs(gateway, cli, token_files):
    maintainer = ("--gateway", gateway, "--token-file", token_files["maintainer"])
    listed = json.loads(cli("review", "list", "--dataset", HOLDOUT, "--json", *maintainer).stdout)
    assert len(listed) >= 2
    cleared, disqualified = listed[0]["run_id"], listed[1]["run_id"]
    submitter = cli("review", "clear", cleared, "--gateway", gateway, "--token-file", token_files["alice"])
    assert submitter.exit_code == 1 and "PERMISSION_DENIED" in submitter.stderr
    assert cli("review", "clear", cleared, "--note", "a fixed typo, not a probe", *maintainer).exit_code == 0
    assert cli("review", "disqualify", disqualified, *maintainer).exit_code == 0
    again = cli("review", "clear", cleared, *maintainer)
    assert again.exit_code == 2 and f"run {cleared!r} is not held for review (cleared)" in again.stderr
    board = json.loads(cli("leaderboard", "--dataset", HOLDOUT, "--all-submissions", "--json", *maintainer).stdout)
    assert cleared in {row["run_id"] for row in board} and disqualified not in {row["run_id"] for row in board}
    with_disqualified = json.loads(cli("leaderboard", "--dataset", HOLDOUT, "--all-submissions", "--json",
                                       "--include-disqualified", *maintainer).stdout)
    assert {row["run_id"]: row["disqualified"] for row in with_disqualified}[disqualified] is True
    card = json.loads(cli("show", cleared, "--json", *maintainer).stdout)
    decision = card["integrity"]["review_reasons"][-1]
    assert card["integrity"]["review"] == "cleared" and card["integrity"]["disqualified"] is False
    assert decision.startswith("cleared by token 'maintainer' at ") and decision.endswith(": a fixed typo, not a probe")


def reworded(every: int, offset: int, word: str) -> list[dict]:
    """The example's predictions with every `every`-th entry (from `offset`)
    ending in `word`: far from any other run (more than the near-duplicate
    threshold of 3 entries)."""
    return [{**p, "prediction": f"{p['prediction']} {word}"} if "prediction" in p and i % every == offset else p
            for i, p in enumerate(PREDICTIONS)]


def public_board(gateway: str, name: str) -> list[dict]:
    with client(gateway, name) as submitter:
        return submitter.leaderboard(HOLDOUT)


def ranked(board: list[dict]) -> list[tuple]:
    """What a board ranks (its counts of submissions go up with every run, held or not)."""
    return [(row["rank"], row["run_id"], row["chrf_plus_plus"], row.get("public_score")) for row in board]


def test_nothing_a_submitter_reads_tells_a_held_run_from_a_clean_one(gateway, runs, cli, token_files):
    """Finding 2 (issue 33): three submissions by one token, one of them
    with a reference in its prompt, got identical answers, but the board
    listed the two clean ones, and `runs --dataset` listed every token's
    runs. Now every submission waits for a maintainer as the contaminated
    one does, the board does not change with any of them, and a submitter
    lists its own runs only."""
    before = public_board(gateway, "watcher")
    target = long_entry()
    sent = [
        (reworded(4, 1, "hoy"), META),
        (reworded(4, 2, "hoy"), {**META, "prompt": f"Translate. Hint: {target['reference']}"}),  # contaminated
        (reworded(4, 3, "hoy"), META),
    ]
    with client(gateway, "watcher") as watcher:
        answers = [watcher.evaluate(registered(), predictions, meta) for predictions, meta in sent]
        listed = watcher.runs(HOLDOUT)
    blocks = [{**card["integrity"], "submissions_with_fingerprint": None} for card in answers]
    assert blocks[1:] == [blocks[0]] * 2 and blocks[0]["verdict_withheld"] is True
    assert ranked(public_board(gateway, "watcher")) == ranked(before)  # none of the three, held or not
    assert {run["run_id"] for run in listed} == {card["run_id"] for card in answers}
    assert all("review" not in run and "submitted_by" not in run for run in listed)
    with client(gateway, "maintainer") as maintainer:
        held = {run["run_id"]: run for run in maintainer.held_runs(HOLDOUT)}
        everything = maintainer.runs(HOLDOUT)
    assert {card["run_id"] for card in answers} <= set(held)
    assert held[answers[0]["run_id"]]["reasons"][0].startswith("pending: nothing found")
    assert held[answers[1]["run_id"]]["reasons"][0].startswith("contamination: 1 entry found")
    # The maintainers' view stays whole: every token's runs, with who sent them and their review state.
    assert {run["submitted_by"] for run in everything} >= {"alice", "bob", "climber", "dictionary", "watcher"}
    assert {run["review"] for run in everything if run["run_id"] in held} == {"held"}
    # The command line of the finding: alice lists her own holdout runs, no one else's.
    mine = json.loads(cli("runs", "--dataset", HOLDOUT, "--json", "--gateway", gateway, "--token-file",
                          token_files["alice"]).stdout)
    with client(gateway, "maintainer") as maintainer:
        alices = {run["run_id"] for run in maintainer.runs(HOLDOUT) if run["submitted_by"] == "alice"}
    assert mine and {run["run_id"] for run in mine} == alices


def test_a_near_duplicate_sent_by_a_second_token_is_held_as_probing(gateway, runs):
    """Finding 5 (issue 33): alice's predictions with one entry changed,
    sent by another token, were not held and ranked first on the public
    board. Now they are held as probing, naming alice's run and token."""
    target = long_entry()
    with client(gateway, "second") as second:
        card = second.evaluate(registered(), with_prediction(target["id"], target["reference"]), META)
    with client(gateway, "maintainer") as maintainer:
        held = {run["run_id"]: run for run in maintainer.held_runs(HOLDOUT)}
        exact = {row["run_id"] for row in maintainer.leaderboard(HOLDOUT, all_submissions=True)}
    probing_of_another_token(held[card["run_id"]]["reasons"], 1, "second")
    assert card["run_id"] not in exact
    assert card["run_id"] not in {row["run_id"] for row in public_board(gateway, "second")}


def test_the_public_holdout_board_is_the_ladders(gateway, runs):
    """A submitter's board of a holdout: the runs that took the Ladder's
    lead (gateway/card/ladder.py), each with the value it released, rounded
    to its margin, and no score computed from the references; maintainers
    keep the exact board. alice's run was published first; bob's, worse,
    took no step."""
    rows = [row for row in public_board(gateway, "bob") if not row["floor"]]
    assert rows and rows[-1]["run_id"] == runs["alice"]["run_id"]
    assert runs["bob"]["run_id"] not in {row["run_id"] for row in rows}
    for row in rows:
        assert row["public_metric"] == "chrf_plus_plus" and row["chrf_plus_plus"] == row["public_score"]
        assert row["composite_score"] is None and row["corpus_bleu"] is None and row["quality_tier"] is None
        assert "submitted_by" not in row
    first = rows[-1]
    with client(gateway, "maintainer") as maintainer:
        board = {row["run_id"]: row for row in maintainer.leaderboard(HOLDOUT, all_submissions=True)}
    exact = board[runs["alice"]["run_id"]]["chrf_plus_plus"]
    assert abs(first["public_score"] - exact) <= first["ladder_margin"] / 2 + 0.01
    assert "public_score" not in board[runs["alice"]["run_id"]]
    # The submitters' own answers carried the Ladder's release, no exact score.
    assert runs["bob"]["scores"]["chrf_plus_plus"] is None and board[runs["bob"]["run_id"]]["chrf_plus_plus"] > 0
    assert all(runs[name]["ladder"]["metric"] == "chrf_plus_plus" for name in ("alice", "bob"))


# --- 4. Families are never exposed by accident --------------------------------------------

def _connects(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(5)
        try:
            probe.connect((host, port))
            return True
        except OSError:
            return False


def test_served_on_every_interface_the_families_answer_on_loopback_only(stack, tmp_path):
    """`serve --host 0.0.0.0 --auth ... --tls-*` starts the stack as this
    does. 127.0.0.2 is an address of this machine other than 127.0.0.1:
    what a caller from the network reaches is what it reaches."""
    certificates = make_certificates(tmp_path / "tls")
    tokens = TokenFile([Token("ops", "maintainer", token_hash(TOKENS["maintainer"]))])
    with EmbeddedStack(host="0.0.0.0", families=("surface", "compliance"), tokens=tokens, workers=0,
                       tls=ServerTls(certificates["cert"], certificates["key"])) as served:
        gateway_port = int(served.gateway_address.rpartition(":")[2])
        assert served.gateway_address.startswith("0.0.0.0:")
        assert _connects("127.0.0.2", gateway_port)
        for family, address in served.family_addresses.items():
            host, _, port = address.rpartition(":")
            assert host == "127.0.0.1", family
            assert _connects("127.0.0.1", int(port)) and not _connects("127.0.0.2", int(port)), family
        # The gateway there speaks TLS only, and asks for a token before anything.
        options = [("grpc.ssl_target_name_override", "localhost")]
        credentials = grpc.ssl_channel_credentials(certificates["ca"].read_bytes())
        with grpc.secure_channel(f"127.0.0.2:{gateway_port}", credentials, options=options) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            with pytest.raises(grpc.RpcError) as anonymous:
                stub.Describe(family_pb2.DescribeRequest(), timeout=30)
            assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
            described = stub.Describe(family_pb2.DescribeRequest(), timeout=30,
                                      metadata=(("authorization", f"Bearer {TOKENS['maintainer']}"),))
        with grpc.insecure_channel(f"127.0.0.2:{gateway_port}") as channel:
            with pytest.raises(grpc.RpcError) as plaintext:
                gateway_pb2_grpc.GatewayStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
            assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE
    listens = {status.family: (status.listens, status.address) for status in described.families if status.reachable}
    assert set(listens) == {"surface", "compliance"}
    assert all(where == "loopback" and address.startswith("127.0.0.1:") for where, address in listens.values())


_LARGE_CALL = """
import sys, grpc
from apps.client.channel import CHANNEL_OPTIONS
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
request = gateway_pb2.EvaluateRequest()
request.meta.prompt = "a" * (250 * 1024 * 1024)
with grpc.insecure_channel(sys.argv[1], options=CHANNEL_OPTIONS) as channel:
    try:
        gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=120)
    except grpc.RpcError as error:
        print(error.code().name, error.details())
"""


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def test_an_unauthenticated_large_call_is_refused_unread(gateway):
    """A 250 MiB message without a token: refused before it is read, so the
    gateway (this process) does not grow by the message (before the change:
    1.26 -> 1.85 GB). The client is another process, whose memory is its own."""
    before, peak, done = _rss_mb(), [0.0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = subprocess.run([sys.executable, "-c", _LARGE_CALL, gateway], cwd=REPO, capture_output=True,
                                text=True, timeout=300, env={**os.environ, "GRPC_VERBOSITY": "NONE"})
    finally:
        done.set()
        watcher.join()
    assert result.stdout.startswith("UNAUTHENTICATED missing token"), result.stdout + result.stderr
    assert peak[0] - before < 50, f"the gateway grew by {peak[0] - before:.0f} MB"


# --- 5. Token hygiene ---------------------------------------------------------------------

def test_a_token_goes_in_plaintext_to_loopback_only(cli, token_files):
    result = cli("runs", "--gateway", "gateway.example.com:50051", "--token-file", token_files["alice"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "refusing to send an API token in plaintext to gateway.example.com:50051" in result.stderr
    assert TOKENS["alice"] not in result.stderr
    with pytest.raises(InvalidSettings):
        Client("10.1.2.3:50051", TOKENS["alice"])
    Client("10.1.2.3:50051", TOKENS["alice"], insecure_token=True).close()  # said to be a trusted network
    Client("10.1.2.3:50051").close()  # nothing to leak


def test_the_token_file_is_read_and_an_unreadable_one_named(cli, gateway, token_files, tmp_path):
    assert cli("describe", "--gateway", gateway, "--token-file", token_files["alice"]).exit_code == 0
    missing = cli("describe", "--gateway", gateway, "--token-file", tmp_path / "nope")
    assert missing.exit_code == 2 and missing.stderr.startswith("champollion: error: --token-file: cannot read")


def test_an_expired_token_is_refused(stack, tmp_path):
    token = new_token()
    past = datetime.now(timezone.utc) - timedelta(minutes=1)
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tokens:\n  {token_line('old-ci', 'submitter', token, past)}\n", encoding="utf-8")
    with EmbeddedStack(families=(), tokens=TokenFile.load(path)) as running, \
            Client(running.gateway_address, token) as old:
        error = refused(old.describe)
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert error.details.startswith("expired token: 'old-ci' expired at ")


def test_sighup_reloads_the_tokens_file(tmp_path):
    """Revoking a token: delete its line, send SIGHUP; the gateway (a real
    `serve` process) refuses it from then on and keeps the others."""
    kept, revoked = new_token(), new_token()
    path = tmp_path / "tokens.yaml"

    def write(*entries):
        path.write_text("tokens:\n" + "".join(f"  {token_line(name, 'submitter', token)}\n"
                                              for name, token in entries), encoding="utf-8")

    write(("kept", kept), ("revoked", revoked))
    port = free_ports(1)
    process = subprocess.Popen([sys.executable, "-m", "apps.cli", "serve", "--family", "gateway",
                                "--port", str(port), "--auth", path, "--no-store"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        address = f"127.0.0.1:{port}"
        with grpc.insecure_channel(address) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)

            def describe(token):
                return stub.Describe(family_pb2.DescribeRequest(), wait_for_ready=True, timeout=60,
                                     metadata=(("authorization", f"Bearer {token}"),))

            describe(revoked)
            write(("kept", kept))
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 60
            while True:
                try:
                    describe(revoked)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
                    break
                assert time.monotonic() < deadline, "the revoked token is still accepted"
                time.sleep(0.1)
            describe(kept)
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_token_new_writes_an_expiry_the_tokens_file_reads(cli, tmp_path):
    result = cli("token", "new", "--name", "ci", "--role", "submitter", "--expires", "2030-01-31")
    token, line = result.stdout.splitlines()
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tokens:\n{line}\n", encoding="utf-8")
    found = TokenFile.load(path).find(token)
    assert found.expires == datetime(2030, 1, 31, tzinfo=timezone.utc)
    assert yaml.safe_load(path.read_text())["tokens"][0]["expires"] == "2030-01-31T00:00:00Z"
    bad = cli("token", "new", "--name", "ci", "--role", "submitter", "--expires", "soon")
    assert bad.exit_code == 2 and bad.stderr.startswith("champollion: error: --expires: must be an ISO-8601")


def test_a_family_deployed_apart_asks_for_the_gateways_token(tmp_path):
    """`serve --family surface --family gateway --auth --family-auth`: the
    family asks every call for a maintainer's token too, and the gateway
    sends its own (config family_token_file); a caller reaching the family
    directly gets UNAUTHENTICATED, health checks stay open."""
    gateway_token, submitter = new_token(), new_token()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  {token_line('gateway', 'maintainer', gateway_token)}\n"
                      f"  {token_line('ci', 'submitter', submitter)}\n", encoding="utf-8")
    (tmp_path / "family-token").write_text(gateway_token + "\n", encoding="utf-8")
    port = free_ports(2)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"families": {"surface": f"127.0.0.1:{port}"},
                                      "family_token_file": str(tmp_path / "family-token")}), encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "apps.cli", "serve", "--family", "surface",
                                "--family", "gateway", "--port", str(port), "--auth", tokens, "--family-auth",
                                tokens, "--config", config, "--no-store"],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), wait_for_ready=True,
                                                                timeout=120)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as direct:
                family_pb2_grpc.FamilyStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
            assert direct.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with Client(f"127.0.0.1:{port + 1}", submitter) as ci:
            card = ci.evaluate({**CORPUS, "id": "family-token-check"}, PREDICTIONS, META)
        assert card["scores"]["chrf_plus_plus"] is not None
        assert not any(warning.startswith("family 'surface'") for warning in card["warnings"])
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_maintainers_publish_every_pending_run_at_once(gateway, cli, token_files):
    """`review clear --pending`: every run held with nothing found (held only
    so that a hold tells nothing) is published in one command, oldest first;
    the runs held for a finding stay for review. Last in this module: it
    publishes what the tests above left pending."""
    from apps.cli.review import PENDING_PREFIX
    from gateway.server.submissions import PENDING_REASON

    assert PENDING_REASON.startswith(PENDING_PREFIX)
    maintainer = ("--gateway", gateway, "--token-file", token_files["maintainer"])
    held = json.loads(cli("review", "list", "--dataset", HOLDOUT, "--json", *maintainer).stdout)
    pending = {run["run_id"] for run in held if all(reason.startswith(PENDING_PREFIX) for reason in run["reasons"])}
    assert pending and len(pending) < len(held), held
    both = cli("review", "clear", "--pending", held[0]["run_id"], *maintainer)
    assert both.exit_code == 2 and "not both" in both.stderr
    published = cli("review", "clear", "--pending", "--dataset", HOLDOUT, *maintainer)
    assert published.exit_code == 0, published.stderr
    assert f"{len(pending)} pending runs published; {len(held) - len(pending)} held runs with findings" in \
        published.stderr
    left = json.loads(cli("review", "list", "--dataset", HOLDOUT, "--json", *maintainer).stdout)
    assert {run["run_id"] for run in left} == {run["run_id"] for run in held} - pending
