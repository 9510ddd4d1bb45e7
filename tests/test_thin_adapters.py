"""The front doors are adapters (issue 35, STYLE: a servicer is glue only):
the gRPC servicer and the web front's Starlette modules make no store call
but through the rules layer (gateway/server/readings.py, comparisons.py,
runs.py, submissions.py...), import no rule constant (a tier, a role, a
decision list), spell no tier or role, and the web asks the rules through
the modules the servicer calls, never access.py or auth.py directly; no
front door picks a gRPC status (gateway/server/statuses.py's one table does).
The review pages' rules are gateway/review's (tests/test_review_front.py
checks apps/web/review.py's own calls further)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from champollion.core.roles import ROLES
from champollion.core.tiers import SECRET_TIERS
from gateway.store import RunStore

REPO = Path(__file__).resolve().parent.parent
FRONT_DOORS = ("gateway/server/servicer.py", "apps/web/app.py", "apps/web/limits.py", "apps/web/pages.py",
               "apps/web/rendering.py", "apps/web/sessions.py", "apps/web/review.py", "apps/web/growth.py")
WEB = tuple(module for module in FRONT_DOORS if module.startswith("apps/web/"))

# Opening and closing the store is wiring, not a rule.
LIFECYCLE = {"open", "close"}
STORE_METHODS = {name for name in dir(RunStore) if not name.startswith("_") and callable(getattr(RunStore, name))}
# Packages whose upper-case names are rules or their tables.
RULE_PACKAGES = ("gateway.", "champollion.core.")
# The upper-case names a front door may import from them, each with why it is no rule of its own.
ALLOWED_CONSTANTS = {
    "gateway/server/servicer.py": {
        "FAMILIES",  # the families to route to and to describe: the registry's list, not a decision
    },
    "apps/web/sessions.py": {"SIGNED_IN_AGAIN", "SIGNED_OUT"},  # why the store ends a web session
    "apps/web/review.py": {"MQM_SPAN_CATEGORIES"},  # the choices the MQM page lists; gateway/review checks them
}
# The only gateway.server modules the web front imports: the rules' reading side and their errors, the caller.
WEB_MAY_IMPORT = {"gateway.server.readings", "gateway.server.comparisons", "gateway.server.refusals",
                  "gateway.server.callers", "gateway.server.tokens"}
# Spelled in a front door, these would be a tier or role rule made there.
RULE_WORDS = {"dev", *SECRET_TIERS, *ROLES}


def store_calls(source: str) -> list[str]:
    """`receiver.method` of each call in `source` of a RunStore method
    (beyond LIFECYCLE) on something named a store."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value)
            if node.func.attr in STORE_METHODS - LIFECYCLE and "store" in receiver.lower():
                found.append(f"{receiver}.{node.func.attr}")
    return found


def rule_constants(source: str) -> set[str]:
    """Upper-case names imported from the rule packages."""
    return {alias.name for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module and f"{node.module}.".startswith(RULE_PACKAGES)
            for alias in node.names if alias.name.isupper()}


def rule_words(source: str) -> set[str]:
    """String constants of `source` that are a tier's or a role's name."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in RULE_WORDS}


def status_codes(source: str) -> list[str]:
    """The gRPC status codes `source` names (statuses.py's table is where refusals get theirs)."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "StatusCode"]


def server_imports(source: str) -> set[str]:
    """The gateway.server modules `source` imports from."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gateway.server"):
            modules |= ({node.module} if node.module != "gateway.server"
                        else {f"gateway.server.{alias.name}" for alias in node.names})
        elif isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names if alias.name.startswith("gateway.server.")}
    return modules


def read(module: str) -> str:
    return (REPO / module).read_text(encoding="utf-8")


@pytest.mark.parametrize("module", FRONT_DOORS)
def test_a_front_door_calls_the_store_only_through_the_rules(module):
    assert store_calls(read(module)) == []


@pytest.mark.parametrize("module", FRONT_DOORS)
def test_a_front_door_imports_no_rule_constant(module):
    assert rule_constants(read(module)) <= ALLOWED_CONSTANTS.get(module, set())


@pytest.mark.parametrize("module", FRONT_DOORS)
def test_a_front_door_spells_no_tier_or_role(module):
    assert rule_words(read(module)) == set()


@pytest.mark.parametrize("module", FRONT_DOORS)
def test_a_front_door_names_no_status_code_of_its_own(module):
    assert status_codes(read(module)) == []


@pytest.mark.parametrize("module", WEB)
def test_the_web_asks_the_rules_through_the_modules_the_servicer_calls(module):
    assert server_imports(read(module)) <= WEB_MAY_IMPORT


def test_the_checks_find_what_they_exist_to_stop():
    """Each check on a small front door that breaks it (so that the passes above mean something)."""
    door = ("from champollion.core.tiers import SECRET_TIERS\n"
            "from gateway.server.access import check_read\n"
            "def handler(front, caller):\n"
            "    if caller.role == 'maintainer':\n"
            "        return front.store.list_runs(None)\n"
            "    context.abort(grpc.StatusCode.NOT_FOUND, 'gone')\n"
            "    return front.call(lambda store: store.leaderboard('wmt'))\n")
    assert store_calls(door) == ["front.store.list_runs", "store.leaderboard"]
    assert rule_constants(door) == {"SECRET_TIERS"}
    assert rule_words(door) == {"maintainer"}
    assert server_imports(door) == {"gateway.server.access"}
    assert status_codes(door) == ["grpc.StatusCode.NOT_FOUND"]
    # Opening and closing the store, and a web session's own table, are not rules.
    assert store_calls("store = RunStore.open(url)\nstore.close()\nself.stored.end(sid, why)\n") == []
