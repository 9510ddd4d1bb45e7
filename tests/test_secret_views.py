"""Nothing a submitter sees is a function of fewer than k entries of a
secret-tier corpus (issue 33, findings 1 and 4): every field of a
submitter's Evaluate answer, GetRun, ListRuns, Leaderboard, ListCorpora and
GetSources views, walked against a real gateway with tokens and a store, is
either public (the corpus's size, a difficulty tier's size, the run's own
usage), computed from at least k entries, or null with a reason.

The gateway is this module's own (no families of its own: the session
stack's are reached by address). The example (36 entries; difficulty tier 5
has 2, tier 1 six and tier 4 seven) is registered as holdout with one
reference equal to its source, so that its corpus check names it, and its
first five entries as a holdout of their own, smaller than k."""
from __future__ import annotations

import json
import re

import grpc
import pytest

from apps.client import Client, ClientError
from apps.launch.embedded import EmbeddedStack
from apps.report.figures import group_charts
from apps.report.model import Run
from champollion.core.cards import CardRegistry
from champollion.eval.v1 import gateway_pb2
from gateway.card.breakdowns import MIN_SHOWN_ENTRIES as K
from gateway.card.breakdowns import OWN_SCORE_KEYS
from gateway.corpus_check import check_corpus, summary_of
from gateway.server.access import PUBLIC_RULES, WITHHELD_FINDINGS
from gateway.server.tokens import Token, TokenFile, new_token, token_hash
from gateway.store import RunStore
from tests.conftest import EXAMPLE, REPO

HOLDOUT = "secret-views-eng-spa"
TINY = "secret-views-tiny"
DEV = "secret-views-dev"
BASE = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
UNTRANSLATED = "es-005"
CORPUS = {**BASE, "id": HOLDOUT, "entries": [
    {**entry, "reference": entry["source"]} if entry["id"] == UNTRANSLATED else entry for entry in BASE["entries"]]}
TINY_CORPUS = {**BASE, "id": TINY, "entries": BASE["entries"][:5]}
PREDICTIONS = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
META = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
TOKENS = {"submitter": new_token(), "maintainer": new_token()}
ENTRY_ID = re.compile(r"\bes-\d{3}\b")
TIER_SIZES = {}
for _entry in CORPUS["entries"]:
    TIER_SIZES[str(_entry["difficulty"])] = TIER_SIZES.get(str(_entry["difficulty"]), 0) + 1


def _checked(corpus: dict) -> dict:
    return summary_of(check_corpus(corpus, "holdout", CardRegistry(REPO / "language_cards")))


@pytest.fixture(scope="module")
def gateway(stack, tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('secret-views') / 'runs.sqlite'}"
    store = RunStore.open(url)
    try:
        store.register_corpus(CORPUS, "holdout", check=_checked(CORPUS))
        store.register_corpus(TINY_CORPUS, "holdout", check=_checked(TINY_CORPUS))
        store.register_corpus({**CORPUS, "id": DEV}, "dev", check=_checked(CORPUS))
    finally:
        store.close()
    tokens = TokenFile([Token(name, name, token_hash(token)) for name, token in TOKENS.items()])
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=url, tokens=tokens) as running:
        yield running.gateway_address


def client(gateway: str, name: str = "submitter") -> Client:
    return Client(gateway, TOKENS[name])


@pytest.fixture(scope="module")
def answers(gateway) -> dict:
    """The submitter's answers on the holdout and on the tiny holdout, and
    a maintainer's run on the holdout."""
    found = {}
    with client(gateway) as submitter:
        found["holdout"] = submitter.evaluate(gateway_pb2.CorpusRef(id=HOLDOUT), PREDICTIONS, META)
        tiny = [p for p in PREDICTIONS if p["id"] in {e["id"] for e in TINY_CORPUS["entries"]}]
        found["tiny"] = submitter.evaluate(gateway_pb2.CorpusRef(id=TINY), tiny, {**META, "model_slug": "tiny-llm"})
    with client(gateway, "maintainer") as maintainer:
        found["maintainer"] = maintainer.evaluate(gateway_pb2.CorpusRef(id=HOLDOUT), PREDICTIONS, {**META, "model_slug": "own-llm"})
        # A maintainer's run, on the board whatever a submitter's runs await.
        found["maintainer_tiny"] = maintainer.evaluate(gateway_pb2.CorpusRef(id=TINY), tiny,
                                                       {**META, "model_slug": "own-tiny-llm"})
    return found


# --- the walk ---------------------------------------------------------------------------

def leaves(value, path=()):
    """(path, value) of every leaf of a JSON-like value; an empty dict or
    list is a leaf."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*path, str(key)))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


# Run-level fields: the run's own (what it sent, its usage, its settings), the
# corpus's public facts, or whole-corpus blocks (checked for the corpus's size).
RUN_LEVEL = {"model_slug", "condition", "dataset", "fingerprint", "elapsed_seconds", "signatures",
             "composite_coverage", "run_id", "quality_tier_basis", "bootstrap", "requested", "totals",
             "community_review"}


def check_card(card: dict, total: int, tier_sizes: dict[str, int]) -> list[tuple]:
    """Every leaf of a submitter's card, each held to the rule for its
    field; a field no rule knows fails (a new field must be classified).
    Answers the leaves checked."""
    whole = total >= K
    walked = []
    for path, value in leaves(card):
        walked.append(path)
        head = path[0]
        where = ".".join(map(str, path))
        if head in RUN_LEVEL:
            continue
        if head == "entries":
            assert value == [], where
        elif head == "warnings":
            assert not ENTRY_ID.search(value), (where, value)
            scope = re.search(r" in difficulty tier (\S+): ", value)
            assert not scope or tier_sizes.get(scope.group(1), 0) >= K, (where, value)
        elif head == "integrity":
            # The verdict and its details are the maintainers' (unset in the message form: empty).
            assert path[1] in ("verdict_withheld", "submissions_with_fingerprint") or value in ([], None, 0, False), \
                (where, value)
        elif head == "ladder":
            # The Ladder's release (issue 33): a corpus-level value rounded to its margin, none under k entries.
            assert path[1] in ("metric", "stepped") or value is None or whole, (where, value)
        elif head == "adequacy":
            block = card["adequacy"]
            if block is None:  # withheld with every score of a secret tier's run
                continue
            if path[1] == "signature":
                continue
            if block["entries"] == 0:  # withheld: the block counts nothing
                assert block["inadequate"] == 0 and block["rate"] is None and not block["gates"], where
            else:
                assert block["entries"] == total and K <= block["inadequate"] <= total - K, where
            if path[1] == "gates" and len(path) == 3:
                assert K <= value <= total - K, (where, value)
        elif head == "scores":
            key = path[1]
            if key in ("by_difficulty", "by_provenance"):
                if len(path) < 4:
                    assert value == {}, where
                    continue
                group = card["scores"][key][path[2]]
                if path[3] == "n":
                    assert key == "by_difficulty", where  # provenance groups are private
                    continue
                if value is not None:
                    assert group["n"] >= K and whole, (where, group)
            elif key == "confidence_intervals_by_tier":
                if len(path) > 2:
                    assert tier_sizes.get(path[2], 0) >= K and whole, where
                    assert card["scores"]["by_difficulty"][path[2]]["chrf_plus_plus"] is not None
            elif key == "confidence_intervals":
                if len(path) > 2:
                    assert whole, where
                    if path[2] == "adequacy_rate":
                        assert card["adequacy"]["entries"], where
            elif key == "adequacy_rate":
                assert value is None or card["adequacy"]["entries"], where
            elif key in OWN_SCORE_KEYS:
                continue
            elif value is not None:
                assert whole, (where, value)
        else:
            raise AssertionError(f"{where}: a field no rule of this walk knows")
    return walked


def test_the_walk_fails_on_the_leaks_of_finding_1(answers):
    """The walker is not blind: the stored card (the maintainers') has tier
    5's interval of two entries, and the walk refuses it."""
    with pytest.raises(AssertionError):
        check_card(answers["maintainer"], len(CORPUS["entries"]), TIER_SIZES)


def test_a_submitters_answer_has_no_value_of_fewer_than_k_entries(answers):
    card = answers["holdout"]
    walked = check_card(card, len(CORPUS["entries"]), TIER_SIZES)
    assert len(walked) > 30
    scores = card["scores"]
    assert {tier for tier, n in TIER_SIZES.items() if n < K} == {"1", "4", "5"} and TIER_SIZES["5"] == 2
    # No score of its own at all: what the Ladder releases (issue 33), its size and speed.
    assert scores["by_difficulty"] == {} and scores["confidence_intervals_by_tier"] == {}
    assert scores["chrf_plus_plus"] is None and scores["composite"] is None and scores["quality_tier"] == "unscored"
    assert scores["total"] == len(CORPUS["entries"]) and card["adequacy"] is None
    ladder = card["ladder"]
    assert ladder["metric"] == "chrf_plus_plus" and ladder["stepped"] and ladder["released"] > 0
    assert any(warning.startswith("scores withheld: on a holdout or gold corpus") for warning in card["warnings"])


def test_the_maintainers_answer_and_stored_card_keep_the_small_groups(gateway, answers):
    scores = answers["maintainer"]["scores"]
    assert scores["by_difficulty"]["5"]["chrf_plus_plus"] is not None
    assert set(scores["confidence_intervals_by_tier"]["5"]) >= {"chrf_plus_plus"}
    with client(gateway, "maintainer") as maintainer:
        stored = maintainer.show(answers["holdout"]["run_id"])
    assert stored["scores"]["confidence_intervals_by_tier"]["5"]["chrf_plus_plus"]
    assert len(stored["entries"]) == len(CORPUS["entries"])


def test_a_corpus_of_fewer_than_k_entries_shows_no_score(answers):
    card = answers["tiny"]
    check_card(card, len(TINY_CORPUS["entries"]), {})
    scores = card["scores"]
    assert scores["composite"] is None and scores["chrf_plus_plus"] is None and scores["confidence_intervals"] == {}
    assert scores["quality_tier"] == "unscored" and scores["total"] == 5
    assert any("every score (the corpus has 5 entries) withheld" in warning for warning in card["warnings"])


def test_getrun_listings_and_board_as_a_submitter(gateway, answers):
    with client(gateway) as submitter:
        for name, total in (("holdout", len(CORPUS["entries"])), ("tiny", len(TINY_CORPUS["entries"]))):
            stored = submitter.show(answers[name]["run_id"])
            check_card(stored, total, TIER_SIZES if name == "holdout" else {})
        rows = submitter.runs()
        boards = {corpus: submitter.leaderboard(corpus) for corpus in (HOLDOUT, TINY)}
    by_id = {row["run_id"]: row for row in rows}
    tiny_row = by_id[answers["tiny"]["run_id"]]
    assert tiny_row["composite_score"] is None and tiny_row["quality_tier"] == "unscored"
    holdout_row = by_id[answers["holdout"]["run_id"]]
    assert holdout_row["composite_score"] is None and holdout_row["quality_tier"] == "unscored"  # the Ladder's
    assert boards[TINY], "the tiny holdout's board lists the maintainer's run"
    for row in boards[TINY]:
        for column in ("composite_score", "chrf_plus_plus", "exact_match_rate", "corpus_bleu", "ter",
                       "semantic_score", "cost_adjusted"):
            assert row.get(column) is None, (column, row)
        assert row["quality_tier"] == "unscored"
    # (What the holdout board releases of a run of >= k entries is the Ladder's, tests/test_gaming.py.)
    for row in [*rows, *boards[HOLDOUT], *boards[TINY]]:
        assert "submitted_by" not in row and "review" not in row
    with client(gateway, "maintainer") as maintainer:
        rows = maintainer.runs(TINY)
    assert rows and all(row["composite_score"] is not None for row in rows), rows


def test_the_report_of_a_submitters_view_draws_nothing_for_small_tiers(gateway, answers):
    """The submitter's card of a holdout run has no breakdown at all (the
    Ladder's release only): its report draws no by-difficulty bar; the
    maintainer's draws tier 5 too."""
    with client(gateway) as submitter:
        stored = submitter.show(answers["holdout"]["run_id"])
    drawn = [found for found in group_charts([Run(stored)]) if found.id == "by-difficulty"]
    assert all(found.figure is None or not any(y is not None for y in found.figure.data[0].y) for found in drawn)
    with client(gateway, "maintainer") as maintainer:
        full = maintainer.show(answers["holdout"]["run_id"])
    figure = next(found for found in group_charts([Run(full)]) if found.id == "by-difficulty")
    assert dict(zip(figure.figure.data[0].x, figure.figure.data[0].y))["tier 5"] is not None


def _info_texts(info: dict) -> list[str]:
    return [value for _, value in leaves({key: info[key] for key in ("check", "history") if key in info})
            if isinstance(value, str)]


def test_corpus_findings_about_references_are_for_maintainers(gateway):
    with client(gateway) as submitter:
        listed = {info["id"]: info for info in submitter.corpora()}
        announced = []
        list(submitter.sources(HOLDOUT, on_corpus=announced.append))
        with pytest.raises(ClientError) as refused:
            submitter.check_corpus(HOLDOUT)
    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
    with client(gateway, "maintainer") as maintainer:
        whole = {info["id"]: info for info in maintainer.corpora()}
    # The maintainers read the finding of the red team's trial.
    assert any(f"({UNTRANSLATED})" in line and line.startswith("untranslated:")
               for line in whole[HOLDOUT]["check"]["advice"])
    for info in (listed[HOLDOUT], listed[TINY], announced[0]):
        check = info["check"]
        for line in [*check["failures"], *check["advice"], *check["gate_failures"]]:
            assert line == WITHHELD_FINDINGS or line.partition(":")[0] in PUBLIC_RULES, line
        assert WITHHELD_FINDINGS in check["advice"]
        for text in _info_texts(info):
            for rule in ("untranslated", "near_duplicates", "dual_references", "acceptable_variants",
                         "provenance", "community_review"):
                assert not text.startswith(rule), text
        assert not any(text.startswith("dual_references") for text in check["failures"])
    # A dev corpus is public whole.
    assert listed[DEV]["check"] == whole[DEV]["check"]


def test_corpus_list_prints_the_withheld_findings_as_such(cli, gateway, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKENS["submitter"] + "\n", encoding="utf-8")
    result = cli("corpus", "list", "--gateway", gateway, "--token-file", token)
    assert result.exit_code == 0, result.stderr
    assert "and findings withheld" in result.stdout and not ENTRY_ID.search(result.stdout)
    listed = json.loads(cli("corpus", "list", "--json", "--gateway", gateway, "--token-file", token).stdout)
    secret = [info for info in listed if info["tier"] != "dev"]
    assert secret and not any(ENTRY_ID.search(text) for info in secret for text in _info_texts(info))


def test_k_is_the_corpus_rules_minimum_unless_the_deployment_sets_it(monkeypatch):
    from gateway.card.breakdowns import MIN_SHOWN_ENV, min_shown_entries
    from gateway.server.config import ConfigError, GatewayConfig

    monkeypatch.delenv(MIN_SHOWN_ENV, raising=False)
    assert min_shown_entries() == K == 10
    monkeypatch.setenv(MIN_SHOWN_ENV, "25")
    assert min_shown_entries() == 25
    for wrong in ("0", "ten", "-3", "2.5"):
        monkeypatch.setenv(MIN_SHOWN_ENV, wrong)
        with pytest.raises(ConfigError, match=MIN_SHOWN_ENV):
            GatewayConfig(families={})
