"""The review front doors hold no review rule (issue 35 item 2): the web's
apps/web/review.py reads requests, calls gateway/review and renders; every
decision (membership, open campaign, gate, reference shown, flags) is made
in gateway/review, which imports no gRPC. Checked on the source's syntax
tree, so a rule creeping back into the adapter fails here."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

WEB_REVIEW = REPO / "apps" / "web" / "review.py"
# What the adapter may import from the layers below: the review rules, and
# the access layer's own decisions (who is a maintainer, which runs a caller
# may list), which are not review rules.
ALLOWED_FROM_GATEWAY = ("gateway.review", "gateway.server.access", "gateway.server.readings")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_modules(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return found


def test_the_web_review_adapter_holds_no_rule():
    tree = _tree(WEB_REVIEW)
    # No module-level constants (a rule's number or list would be one).
    constants = [target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                 for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(target, ast.Name)]
    assert constants == []
    # No store call of its own: whatever is done with the store is a call into gateway/review
    # (or the access layer's listing) with the store as its first argument.
    store_methods = [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                     and node.func.value.id == "store"]
    assert store_methods == []
    imported = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    with_store = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and any(isinstance(arg, ast.Name) and arg.id == "store" for arg in node.args)]
    assert with_store
    for call in with_store:
        func = call.func
        name = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else func.id
        module = imported.get(name, "")
        assert module.startswith(ALLOWED_FROM_GATEWAY) or f"{module}.{name}".startswith(ALLOWED_FROM_GATEWAY), \
            ast.unparse(call)
    gateway_imports = [module for module in _imported_modules(tree) if module.startswith("gateway")]
    assert gateway_imports and all(module.startswith(ALLOWED_FROM_GATEWAY) for module in gateway_imports), \
        gateway_imports
    # The statuses a rule refuses with are not compared or raised here: no state or kind literals.
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not literals & {"open", "closed", "tutorial", "attention", "repeat", "control"}


def test_gateway_review_imports_no_grpc():
    for path in sorted((REPO / "gateway" / "review").glob("*.py")):
        modules = _imported_modules(_tree(path))
        assert not [module for module in modules if module == "grpc" or module.startswith("grpc.")], path.name
