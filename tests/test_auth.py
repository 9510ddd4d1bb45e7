"""Access control: API tokens and roles on a gateway started with a tokens
file (`serve --auth`), over the session stack's families.

What is checked: a call without a token, with a malformed authorization
header or with an unknown token is UNAUTHENTICATED (saying which); a
submitter calling a maintainer's RPC, or reading a gold corpus's sources,
is PERMISSION_DENIED; a submitter evaluates and reads the leaderboard from
the CLI (--token or CHAMPOLLION_TOKEN); health checks and reflection need no
token; tokens never reach the logs; the tokens file and `serve`'s refusal
to run an open gateway off loopback give one line, exit 2."""
from __future__ import annotations

import json

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from champollion.core.roles import ROLES
from gateway.server.auth import RPC_ROLES
from gateway.server.callers import current_caller
from gateway.server.config import ConfigError
from gateway.server.tokens import TokenFile, new_token, token_hash, token_line
from tests.conftest import EXAMPLE

DATASET = "champollion-example-eng-spa"


class Tokens:
    submitter = new_token()
    maintainer = new_token()
    reviewer = new_token()


def write_tokens_file(path) -> None:
    path.write_text("tokens:\n" + "".join(
        f"  {token_line(name, role, token)}\n"
        for name, role, token in (("platform-ci", "submitter", Tokens.submitter),
                                  ("alice", "maintainer", Tokens.maintainer),
                                  ("rater-1", "reviewer", Tokens.reviewer))), encoding="utf-8")


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "tokens.yaml"
    write_tokens_file(path)
    return path


@pytest.fixture(scope="module")
def guarded(stack, tokens_file, tmp_path_factory) -> str:
    """A gateway with --auth over the session stack's families and its own store."""
    store = f"sqlite:///{tmp_path_factory.mktemp('auth-store') / 'runs.sqlite'}"
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store,
                       tokens=TokenFile.load(tokens_file)) as running:
        yield running.gateway_address


@pytest.fixture(scope="module")
def channel(guarded):
    with grpc.insecure_channel(guarded) as opened:
        yield opened


def bearer(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


def refusal(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("metadata, expected", [
    ((), "missing token"),
    ((("authorization", f"Token {Tokens.submitter}"),), "malformed authorization header"),
    ((("authorization", "Bearer"),), "malformed authorization header"),
    ((("authorization", "Bearer two words"),), "malformed authorization header"),
    (bearer(Tokens.submitter) + bearer(Tokens.maintainer), "malformed authorization header"),
    (bearer("revoked-or-never-issued"), "unknown token"),
    # A token's hash in place of the token is not the token.
    (bearer(token_hash(Tokens.maintainer)), "unknown token"),
])
def test_calls_without_a_valid_token_are_unauthenticated(channel, metadata, expected):
    stub = gateway_pb2_grpc.GatewayStub(channel)
    for call in (lambda: stub.Describe(family_pb2.DescribeRequest(), metadata=metadata, timeout=10),
                 lambda: list(stub.GetRun(gateway_pb2.GetRunRequest(run_id="x"), metadata=metadata, timeout=10))):
        error = refusal(call)
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error.details().startswith(expected), error.details()


def corpus_part(corpus_id: str, tier: str) -> gateway_pb2.RegisterCorpusRequest:
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    # The example is below a holdout's minimum sizes: the corpus check's gate is accepted.
    part = gateway_pb2.RegisterCorpusRequest(tier=tier, corpus=gateway_pb2.Corpus(
        id=corpus_id, source_lang=corpus["source_lang"], target_lang=corpus["target_lang"]),
        accept_check_failures="test corpus")
    for entry in corpus["entries"]:
        part.corpus.entries.add(id=entry["id"], source=entry["source"], reference=entry["reference"])
    return part


def test_a_submitter_is_refused_the_maintainers_rpcs(channel):
    stub = gateway_pb2_grpc.GatewayStub(channel)
    maintainers = sorted(rpc for rpc, role in RPC_ROLES.items() if role == "maintainer")
    assert maintainers == ["CheckCorpus", "RegisterCorpus", "SetCorpusTier"]
    error = refusal(lambda: stub.RegisterCorpus(iter([corpus_part("auth-dev", "dev")]),
                                                metadata=bearer(Tokens.submitter), timeout=30))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == ("RegisterCorpus: needs the maintainer role; "
                               "token 'platform-ci' has the submitter role")
    error = refusal(lambda: stub.SetCorpusTier(gateway_pb2.SetCorpusTierRequest(corpus_id="auth-dev", tier="gold"),
                                               metadata=bearer(Tokens.submitter), timeout=30))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "SetCorpusTier" in error.details()
    error = refusal(lambda: stub.CheckCorpus(gateway_pb2.CheckCorpusRequest(corpus_id="auth-dev"),
                                             metadata=bearer(Tokens.submitter), timeout=30))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "CheckCorpus" in error.details()


def test_a_reviewer_calls_no_scoring_or_reading_rpc(channel):
    """A reviewer's token is for the web front's review pages: every
    Gateway RPC needs a submitter at least."""
    stub = gateway_pb2_grpc.GatewayStub(channel)
    assert min(RPC_ROLES.values(), key=ROLES.index) == "submitter"
    for call in (lambda: stub.Describe(family_pb2.DescribeRequest(), metadata=bearer(Tokens.reviewer), timeout=10),
                 lambda: stub.ListRuns(gateway_pb2.ListRunsRequest(), metadata=bearer(Tokens.reviewer), timeout=10)):
        error = refusal(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "needs the submitter role; token 'rater-1' has the reviewer role" in error.details()


def test_gold_sources_are_for_maintainers_holdout_sources_for_submitters(channel):
    stub = gateway_pb2_grpc.GatewayStub(channel)
    for tier in ("gold", "holdout"):
        info = stub.RegisterCorpus(iter([corpus_part(f"auth-{tier}", tier)]),
                                   metadata=bearer(Tokens.maintainer), timeout=30)
        assert info.tier == tier

    def sources(corpus_id: str, token: str) -> list[str]:
        parts = stub.GetSources(gateway_pb2.GetSourcesRequest(corpus_id=corpus_id), metadata=bearer(token), timeout=30)
        return [entry.id for part in parts for entry in part.entries]

    error = refusal(lambda: sources("auth-gold", Tokens.submitter))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == ("read_sources on a gold corpus: needs the maintainer role; "
                               "token 'platform-ci' has the submitter role")
    assert sources("auth-gold", Tokens.maintainer) == sources("auth-holdout", Tokens.submitter)
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    assert sources("auth-holdout", Tokens.submitter) == [entry["id"] for entry in corpus["entries"]]


def test_health_checks_and_reflection_need_no_token(channel):
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (answer,) = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(iter([request]), timeout=10)
    assert "champollion.eval.v1.Gateway" in {service.name for service in answer.list_services_response.service}


def test_a_submitter_evaluates_and_reads_the_leaderboard_from_the_cli(cli, guarded, monkeypatch, tmp_path,
                                                                      run_card_validator):
    out = tmp_path / "card.json"
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--gateway", guarded, "--token", Tokens.submitter, "--out", out)
    assert result.exit_code == 0, result.stderr
    card = json.loads(out.read_text(encoding="utf-8"))
    run_card_validator.validate(card)
    # The token from the environment, for every command.
    monkeypatch.setenv("CHAMPOLLION_TOKEN", Tokens.submitter)
    board = cli("leaderboard", "--dataset", DATASET, "--gateway", guarded, "--json")
    assert board.exit_code == 0, board.stderr
    assert card["run_id"] in [row["run_id"] for row in json.loads(board.stdout)]
    shown = cli("show", card["run_id"], "--gateway", guarded, "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["run_id"] == card["run_id"]
    # --token wins over the environment.
    monkeypatch.setenv("CHAMPOLLION_TOKEN", "not-a-token-of-this-gateway")
    assert cli("describe", "--gateway", guarded, "--token", Tokens.submitter).exit_code == 0


@pytest.mark.parametrize("token, exit_code, message", [
    (None, 1, "UNAUTHENTICATED: missing token"),
    ("expired-or-revoked", 1, "UNAUTHENTICATED: unknown token"),
    # Refused before anything is sent: it cannot travel in a header.
    ("two words", 2, "--token: a token is one word of printable ASCII"),
    ("garbled\x07", 2, "--token: a token is one word of printable ASCII"),
])
def test_refused_tokens_give_one_line(cli, guarded, monkeypatch, token, exit_code, message):
    monkeypatch.delenv("CHAMPOLLION_TOKEN", raising=False)
    result = cli("runs", "--gateway", guarded, *(["--token", token] if token else []))
    assert result.exit_code == exit_code
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("champollion: error: ")
    assert message in result.stderr, result.stderr
    if token:
        assert token not in result.stderr  # never echoed


def test_a_malformed_token_from_the_environment_names_the_variable(cli, guarded, monkeypatch):
    monkeypatch.setenv("CHAMPOLLION_TOKEN", "line\nbreak")
    result = cli("runs", "--gateway", guarded)
    assert result.exit_code == 2
    assert result.stderr.startswith("champollion: error: CHAMPOLLION_TOKEN: ")


def test_tokens_are_never_logged_token_names_are(capsys, channel):
    capsys.readouterr()
    stub = gateway_pb2_grpc.GatewayStub(channel)
    stub.Describe(family_pb2.DescribeRequest(), metadata=bearer(Tokens.submitter), timeout=10)
    for token in (Tokens.maintainer[:-1], "Bearer", Tokens.submitter):
        refusal(lambda: stub.RegisterCorpus(iter([]), metadata=bearer(token), timeout=10))
    logged = "".join(capsys.readouterr())
    assert "unauthenticated" in logged and "permission_denied" in logged and "platform-ci" in logged
    for secret in (Tokens.submitter, Tokens.maintainer, Tokens.maintainer[:-1], token_hash(Tokens.submitter)):
        assert secret not in logged


def test_outside_a_call_the_caller_has_the_least_role():
    assert current_caller().role == "submitter"


def test_token_new_prints_a_token_and_the_line_that_admits_it(cli, tmp_path):
    result = cli("token", "new", "--name", "platform: staging", "--role", "maintainer")
    assert result.exit_code == 0
    token, line = result.stdout.splitlines()
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tokens:\n{line}\n", encoding="utf-8")
    found = TokenFile.load(path).find(token)
    assert (found.name, found.role) == ("platform: staging", "maintainer")
    assert token not in line
    again = cli("token", "new", "--name", "x", "--role", "submitter").stdout.splitlines()[0]
    assert again != token and TokenFile.load(path).find(again) is None


GOOD = {"name": "ci", "role": "submitter", "sha256": "a" * 64}


@pytest.mark.parametrize("content, where", [
    ("tokens: [", "malformed YAML"),
    ("- {name: ci}", "must be a mapping with one key, tokens"),
    ({"tokens": []}, "tokens: must be a non-empty list"),
    ({"tokens": ["ci"]}, "tokens[0]: must be a mapping"),
    ({"tokens": [{**GOOD, "token": "plain"}]}, "tokens[0]: unknown field(s) token"),
    ({"tokens": [{**GOOD, "name": ""}]}, "tokens[0].name: required"),
    ({"tokens": [GOOD, {**GOOD, "sha256": "b" * 64}]}, "tokens[1].name: 'ci' is used by an earlier entry"),
    ({"tokens": [{**GOOD, "role": "admin"}]}, "tokens[0].role: must be one of reviewer, submitter, maintainer, got 'admin'"),
    ({"tokens": [{**GOOD, "sha256": "not-a-hash"}]}, "tokens[0].sha256: must be the 64-hex-digit SHA-256"),
    ({"tokens": [GOOD, {**GOOD, "name": "other"}]}, "tokens[1].sha256: the same token as an earlier entry"),
])
def test_a_bad_tokens_file_is_refused_naming_file_and_field(cli, tmp_path, content, where):
    path = tmp_path / "tokens.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        TokenFile.load(path)
    assert str(caught.value).startswith(f"{path}: {where}")
    # `serve` stops before starting anything: one line, exit 2.
    result = cli("serve", "--family", "gateway", "--port", "0", "--auth", path)
    assert result.exit_code == 2
    assert result.stderr == f"champollion: error: --auth {caught.value}\n"
    assert "not-a-hash" not in result.stderr and "plain" not in result.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "gateway.example.com", "::"])
def test_an_open_gateway_binds_loopback_only(cli, host):
    for command in (["serve"], ["serve", "--family", "gateway"]):
        result = cli(*command, "--host", host, "--port", "0")
        assert result.exit_code == 2
        assert result.stderr.startswith(f"champollion: error: refusing to serve an open gateway on {host}: ")
        assert "--auth" in result.stderr and "--insecure-open" in result.stderr
        assert result.stderr.count("\n") == 1


def test_auth_is_the_gateways_option(cli, tokens_file):
    result = cli("serve", "--family", "surface", "--port", "0", "--auth", tokens_file)
    assert result.exit_code == 2 and "--auth applies to the gateway" in result.stderr
    assert "--family-auth" in result.stderr
    result = cli("serve", "--port", "0", "--family-auth", tokens_file)
    assert result.exit_code == 2 and "--family-auth applies to the families named with --family" in result.stderr


def test_a_new_token_never_reads_as_a_flag():
    """`--token VALUE` on a command line: a value starting with "-" would be
    taken for a flag (secrets.token_urlsafe gives one in 64)."""
    tokens = [new_token() for _ in range(2000)]
    assert not any(token.startswith("-") for token in tokens)
    assert len(set(tokens)) == len(tokens) and all(len(token) == 43 for token in tokens)


def test_a_submitter_may_not_grow_a_campaign(channel):
    """The campaign RPCs are not in RPC_ROLES: maintainers only, as every RPC it does not list."""
    stub = gateway_pb2_grpc.GatewayStub(channel)
    for call, rpc in (
        (lambda: stub.AddCampaignReviewers(gateway_pb2.AddCampaignReviewersRequest(campaign_id="c", reviewers=["x"]),
                                           metadata=bearer(Tokens.submitter), timeout=10), "AddCampaignReviewers"),
        (lambda: stub.ExtendCampaign(gateway_pb2.ExtendCampaignRequest(campaign_id="c", items=1),
                                     metadata=bearer(Tokens.submitter), timeout=10), "ExtendCampaign"),
        (lambda: stub.CampaignAudit(gateway_pb2.CampaignResultsRequest(campaign_id="c"),
                                    metadata=bearer(Tokens.submitter), timeout=10), "CampaignAudit"),
    ):
        error = refusal(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error.details().startswith(f"{rpc}: needs the maintainer role")
