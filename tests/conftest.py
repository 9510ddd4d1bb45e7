"""Shared fixtures: one embedded stack per test session, a gateway stub, the
run-card schema, and small builders for requests."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import NamedTuple

import grpc
import jsonschema
import numpy as np
import pytest
import structlog

from apps import cli as champollion_cli
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from champollion.core.run_card import run_card_from_proto
from gateway.card.adequacy import gated_statistics, inadequate_entries
from gateway.store import default_store_url
from tests.postgres import start_cluster

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "eng-spa"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "run_card.schema.json"

# No test writes to the real home: the default run store (and anything else
# under XDG_DATA_HOME) and the word-list cache (CHAMPOLLION_CACHE_DIR)
# live in a temporary folder for the whole session.
TEST_DATA_HOME = tempfile.mkdtemp(prefix="champollion-test-data-")
atexit.register(shutil.rmtree, TEST_DATA_HOME, ignore_errors=True)
os.environ["XDG_DATA_HOME"] = TEST_DATA_HOME
os.environ["CHAMPOLLION_CACHE_DIR"] = os.path.join(TEST_DATA_HOME, "cache")
os.environ["CHAMPOLLION_STORE"] = f"sqlite:///{TEST_DATA_HOME}/champollion/runs.sqlite"
# No test leaves a background stack behind (apps/launch/background.py):
# commands run their own embedded stack unless a test lets them (tests/test_background.py),
# and a stack's folder would be under the session's, its stacks stopped at the end.
os.environ["CHAMPOLLION_DAEMON"] = "0"
os.environ["XDG_RUNTIME_DIR"] = os.path.join(TEST_DATA_HOME, "run")


@pytest.fixture(scope="session", autouse=True)
def no_background_stack_left():
    yield
    from apps.launch import background

    for stack in background.running():
        background.stop(stack)


def load_schema() -> dict:
    """The shared run-card schema, copied verbatim from shared/schemas."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def run_card_validator():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def stack():
    # Its gateway stores every run card, as a real one does, in the session's
    # temporary default store. It scores in threads: the suite's runs are
    # small, and worker processes would each load every family's models
    # (tests/test_workers.py covers them).
    with EmbeddedStack(batch_size=64, store=default_store_url(), workers=0) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(stack):
    with grpc.insecure_channel(stack.gateway_address) as channel:
        yield gateway_pb2_grpc.GatewayStub(channel)


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium on PATH: install Debian's `chromium` package (`make test` installs it); "
                    "this test never downloads a browser")
    return found


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"], headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def postgres_cluster():
    """A real PostgreSQL server for the session (tests/postgres.py)."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_cluster) -> str:
    return postgres_cluster.url()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A fresh, empty store for one test, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}"
    cluster = request.getfixturevalue("postgres_cluster")
    return cluster.create_database(f"store_{uuid.uuid4().hex[:12]}")


def make_request(
    entries: list[dict],
    predictions: list[dict] | None = None,
    source_lang: str = "eng",
    target_lang: str = "spa",
    meta: dict | None = None,
    batch_size: int = 0,
) -> gateway_pb2.EvaluateRequest:
    """A request from plain dicts; predictions default to the references."""
    if predictions is None:
        predictions = [{"id": e["id"], "prediction": e["reference"]} for e in entries]
    request = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="test", source_lang=source_lang, target_lang=target_lang),
        predictions=[gateway_pb2.Prediction(**p) for p in predictions],
        meta=gateway_pb2.RunMeta(**(meta or {})),
    )
    for entry in entries:
        request.corpus.entries.add(**{"source": "a source sentence", **entry})
    request.options.batch_size = batch_size
    return request


def composite_statistics(card: dict) -> dict:
    """The per-entry statistics the card's composite reads: those of its
    composite metrics, entries marked inadequate at their worst (the
    adequacy gates, tested in tests/test_adequacy.py)."""
    weights = card["composite_coverage"]["weights"]
    stats = {m: np.asarray([entry["stats"][m] for entry in card["entries"]], dtype=float) for m in weights}
    return gated_statistics(stats, inadequate_entries(card["entries"]), list(weights))


def evaluate(gateway, request) -> dict:
    return run_card_from_proto(gateway.Evaluate(request, timeout=120).run_card)


def run_cli(*args) -> int:
    """`champollion ARGS` in this process (arguments may be paths): the
    command's exit status. main() configures structlog for a command's quiet
    output; the session's configuration is put back, so later tests log as
    before."""
    saved = structlog.get_config()
    try:
        return champollion_cli.main([str(arg) for arg in args])
    finally:
        structlog.configure(**saved)


class CliResult(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys):
    """run_cli with what the command printed."""

    def run(*args) -> CliResult:
        capsys.readouterr()  # only this command's output
        exit_code = run_cli(*args)
        return CliResult(exit_code, *capsys.readouterr())

    return run
