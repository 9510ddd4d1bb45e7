"""The layers hold (pyproject.toml [tool.importlinter]): the top-level packages
apps -> gateway and services -> champollion (core -> generated contract), the client apart from the server, no
import circles. The check is shown to fail on the imports it exists to stop,
and a client command against a gateway loads none of the server side."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("apps", "champollion", "gateway", "services", "eval_standards")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter over the packages under `root`, with the project's contracts."""
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_tree_keeps_every_layer_contract():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The packages' Python files and the contracts, in a folder of their own, to break on purpose."""
    root = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.j2",
                                                                                         "*.cpp", "*.yaml"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


# Each: (the module given one more import, the import, the contract that must break).
BREAKS = [
    ("champollion/core/cards.py", "from apps.client import Client",
     "top-level packages: apps -> gateway and services -> champollion"),
    ("gateway/card/metrics.py", "from apps.report import write_report",
     "top-level packages: apps -> gateway and services -> champollion"),
    ("champollion/eval/__init__.py", "from champollion.core import cards",
     "inside champollion: the core -> the generated contract"),
    ("apps/client/__init__.py", "from gateway.store import RunStore",
     "the client side never imports the server side"),
    ("apps/inputs/__init__.py", "import sqlalchemy",
     "the client side never imports the server side"),
    ("services/workers.py", "from services.registry import IMPLEMENTED",
     "no import circles, among the modules of a package or its sub-packages"),
    ("gateway/card/metrics.py", "from services.contract import EntryInput",
     "the gateway and the families know each other only through the contract"),
    ("eval_standards/nob/linter.py", "from services.contract import EntryInput",
     "the families and the language plugins meet only in the core's plugin contract"),
    ("gateway/server/access.py", "from gateway.server.auth import require",
     "the rules below the front doors never import gRPC"),
]


@pytest.mark.parametrize("module, line, contract", BREAKS, ids=[b[0] for b in BREAKS])
def test_the_check_fails_when_an_import_crosses_a_layer(tree_copy, module, line, contract):
    path = tree_copy / module
    original = path.read_text(encoding="utf-8")
    path.write_text(f"{original}\n{line}  # added by tests/test_layers.py\n", encoding="utf-8")
    try:
        result = lint_imports(tree_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if row.endswith("BROKEN")]
    assert any(row.startswith(contract[:60]) for row in broken), result.stdout


SERVER_SIDE = ("gateway.server", "gateway.store", "services", "sqlalchemy", "alembic", "apps.launch.embedded")


def test_a_client_command_against_a_gateway_imports_no_server_module(stack):
    """`champollion runs --gateway` in a fresh interpreter: the command runs
    for real, then the modules it loaded are listed."""
    script = (
        "import sys, json\n"
        "from apps.cli import main\n"
        f"code = main(['runs', '--gateway', {stack.gateway_address!r}, '--json'])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, result.stderr
    assert isinstance(json.loads(result.stdout), list)  # the runs it listed
    loaded = [name for name in report["modules"] if name.startswith(SERVER_SIDE)]
    assert loaded == []
