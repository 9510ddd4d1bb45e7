"""The adding recipes of docs/layout.md ("Adding a metric, a language, a
family or a store column"), followed on a copy of the tree (as
tests/test_layers.py breaks a copy) and run: each test makes exactly the
edits its recipe's steps say, then uses the result through the copy's own
code in a process of its own. A recipe that misses a file, or a step that
stops working, fails here."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.store import RunStore
from gateway.store.migrate import VERSION_TABLE
from tests.test_store import make_card

REPO = Path(__file__).resolve().parent.parent
LAYOUT = REPO / "docs" / "layout.md"
# What a copy holds: every package, the data they read, the deploy files and the examples.
COPIED = ("apps", "champollion", "gateway", "services", "eval_standards", "language_cards", "protos", "deploy",
          "examples")
COPIED_FILES = ("pyproject.toml", "setup.py", "README.md")
# Written by tools, never by hand: the stubs (`make proto`).
GENERATED_STUBS = "champollion/eval/"
EXAMPLE = Path("examples/eng-crk")
# A family may take at most this many files written or edited by hand (issue 35).
FAMILY_FILES_LIMIT = 8


def tree_copy(root: Path) -> Path:
    for name in COPIED:
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    for name in COPIED_FILES:
        shutil.copy(REPO / name, root / name)
    return root


def touched(copy: Path) -> set[str]:
    """The files of `copy` that are new or differ from this tree's, less
    the generated stubs."""
    found = set()
    for name in COPIED:
        for path in (copy / name).rglob("*"):
            relative = path.relative_to(copy).as_posix()
            if not path.is_file() or "__pycache__" in relative or relative.startswith(GENERATED_STUBS):
                continue
            original = REPO / relative
            if not original.is_file() or original.read_bytes() != path.read_bytes():
                found.add(relative)
    return found


def recipe(title: str) -> str:
    """The text of one recipe of docs/layout.md."""
    text = LAYOUT.read_text(encoding="utf-8")
    match = re.search(rf"^### Recipe: {re.escape(title)}\n(.*?)(?=^##)", text + "\n##", re.M | re.S)
    assert match, f"docs/layout.md has no recipe for {title}"
    return match.group(1)


def named_files(text: str) -> list[re.Pattern]:
    """The files a recipe names (code spans that are paths), `<...>` standing for any name."""
    spans = re.findall(r"`([A-Za-z0-9_.<>-]+(?:/[A-Za-z0-9_.<>-]+)+)`", text)
    return [re.compile("".join("[A-Za-z0-9_]+" if part.startswith("<") else re.escape(part)
                               for part in re.split(r"(<[^>]+>)", span)) + "$") for span in spans]


def unnamed(files: set[str], text: str) -> list[str]:
    patterns = named_files(text)
    return sorted(path for path in files if not any(pattern.match(path) for pattern in patterns))


def edit(path: Path, old: str, new: str) -> None:
    """Replace `old` (which must occur once) in the copy's file."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times: the recipe's test is stale"
    path.write_text(text.replace(old, new), encoding="utf-8")


def add_score_field(copy: Path, key: str) -> None:
    """The proto step: an optional double in Scores, the next free number, and `make proto`'s stubs."""
    proto = copy / "protos/champollion/eval/v1/run_card.proto"
    text = proto.read_text(encoding="utf-8")
    body = re.search(r"^message Scores \{\n(.*?)^\}", text, re.M | re.S).group(1)
    number = max(int(n) for n in re.findall(r"= (\d+);", body)) + 1
    edit(proto, body, f"{body}  optional double {key} = {number};\n")
    run(copy, "-m", "grpc_tools.protoc", "-I", "protos", "--python_out=.", "--grpc_python_out=.", "--pyi_out=.",
        *sorted(str(p.relative_to(copy)) for p in (copy / "protos/champollion/eval/v1").glob("*.proto")))


def run(copy: Path, *args: str, timeout: int = 180) -> str:
    """`python ARGS` in the copy, importing the copy's packages; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(copy), "CHAMPOLLION_DAEMON": "0"}
    result = subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def evaluate(copy: Path, *options: str, corpus: Path = EXAMPLE / "corpus.json",
             predictions: Path = EXAMPLE / "predictions.jsonl") -> dict:
    """`champollion evaluate` in the copy, its own embedded stack, no store: the run card."""
    return json.loads(run(copy, "-m", "apps.cli", "evaluate", str(corpus), str(predictions), "--json",
                          "--no-daemon", "--no-store", *options))


def example_pairs() -> list[tuple[str, str]]:
    """(reference, prediction) of every example entry in corpus order; a
    failed entry's prediction is empty."""
    entries = json.loads((REPO / EXAMPLE / "corpus.json").read_text(encoding="utf-8"))["entries"]
    lines = (REPO / EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predictions = {row["id"]: row.get("prediction") or "" for row in map(json.loads, lines)}
    return [(entry["reference"], predictions.get(entry["id"], "")) for entry in entries]


def test_recipe_a_metric(tmp_path):
    """A `final_mark_rate` in the compliance family: the share of outputs
    ending with their reference's last character."""
    copy = tree_copy(tmp_path)
    # 1. the family computes it
    scorer = copy / "services/compliance/metrics.py"
    edit(scorer, 'metrics = ("compliance_index", "compliance_index_raw", "repair_effectiveness")',
         'metrics = ("compliance_index", "compliance_index_raw", "repair_effectiveness", "final_mark_rate")')
    edit(scorer, "outputs = [score_entry(entry, context.target) for entry in entries]",
         "outputs = [_final_mark(score_entry(entry, context.target), entry) for entry in entries]")
    scorer.write_text(scorer.read_text(encoding="utf-8") + '''

def _final_mark(output: EntryOutput, entry: EntryInput) -> EntryOutput:
    same = float(bool(entry.prediction) and entry.prediction[-1:] == entry.reference[-1:])
    output.values["final_mark_rate"] = same
    output.stats["final_mark_rate"] = [same, 1.0]
    return output
''', encoding="utf-8")
    # 2. its row in the metric table
    table = copy / "gateway/card/metrics.py"
    edit(table, '    metric("repair_effectiveness", "compliance", in_shared_schema=False),\n',
         '    metric("repair_effectiveness", "compliance", in_shared_schema=False),\n'
         '    metric("final_mark_rate", "compliance", in_shared_schema=False, label="final mark"),\n')
    # 3. its Scores field and the stubs
    add_score_field(copy, "final_mark_rate")

    assert unnamed(touched(copy), recipe("a metric")) == []
    card = evaluate(copy, "--families", "compliance")
    pairs = example_pairs()
    expected = sum(bool(p) and p[-1:] == r[-1:] for r, p in pairs) / len(pairs)
    assert 0 < expected < 1 and card["scores"]["final_mark_rate"] == pytest.approx(expected)
    assert card["composite_coverage"]["weights"] == {}  # in no profile: it leaves the composite alone
    label = run(copy, "-c", "from gateway.card.display import column_label; print(column_label('final_mark_rate'))")
    assert label.strip() == "final mark"


CATALAN = """\
code: cat
name: Catalan
aliases: [ca]
scripts: [Latn]
casing: cased
quotes: ["«", "»", "“", "”", '"', "'"]
surface:
  bleu_tokenizer: 13a
loanwords: [email]
linguisticChallenges: [clitic pronouns, grammatical gender agreement]
"""


def test_recipe_a_language(tmp_path):
    copy = tree_copy(tmp_path)
    # 1. the card
    (copy / "language_cards/cat.yaml").write_text(CATALAN, encoding="utf-8")
    # 3. the list of bundled cards
    edit(copy / "language_cards/README.md", "yor, hau, swa.", "yor, hau, swa, cat (Catalan).")

    assert unnamed(touched(copy), recipe("a language")) == []
    loaded = run(copy, "-c", "from champollion.core.cards import default_registry; card = default_registry().get('ca');"
                             " print(card.code, card.name, card.generic, card.loanwords)")
    code, name, generic, loanwords = loaded.split(maxsplit=3)
    assert (code, name, generic) == ("cat", "Catalan", "None") and "email" in loanwords
    corpus = {"id": "eng-cat-recipe", "source_lang": "eng", "target_lang": "cat", "entries": [
        {"id": "c1", "source": "Good morning.", "reference": "Bon dia."},
        {"id": "c2", "source": "Thank you very much.", "reference": "Moltes gràcies."}]}
    predictions = [{"id": "c1", "prediction": "Bon dia."}, {"id": "c2", "prediction": "Moltes gràcies."}]
    (copy / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    (copy / "predictions.jsonl").write_text("\n".join(map(json.dumps, predictions)), encoding="utf-8")
    card = evaluate(copy, "--families", "surface", corpus=Path("corpus.json"), predictions=Path("predictions.jsonl"))
    assert card["dataset"]["language_pair"] == "eng_Latn-cat_Latn"
    assert card["scores"]["exact_match_rate"] == 1.0 and card["scores"]["chrf_plus_plus"] == pytest.approx(100.0)
    # Without the card the run warns "no language card for target cat_Latn: scored with a generic card ...".
    assert not any("language card" in warning or "generic" in warning for warning in card["warnings"])


TOY_METRICS = '''"""The toy family: the share of entries with an output."""
from __future__ import annotations

from champollion import __version__
from services.contract import BatchContext, BatchOutput, ComponentInfo, EntryInput, EntryOutput


class ToyScorer:
    name = "toy"
    version = __version__
    metrics = ("toy_answered_rate",)

    def languages(self) -> list[str]:
        return []

    def components(self) -> list[ComponentInfo]:
        return []

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        outputs = []
        for entry in entries:
            answered = float(bool(entry.prediction.strip()))
            outputs.append(EntryOutput(entry.id, {"toy_answered_rate": answered},
                                       {"toy_answered_rate": [answered, 1.0]}))
        return BatchOutput(outputs, signatures={"toy_answered_rate": f"toy|version:{__version__}"})
'''
TOY_FACTORY = '''"""The toy family's scorer, as services.registry builds it."""
from services.toy.metrics import ToyScorer


def create_scorer(**_options) -> ToyScorer:
    return ToyScorer()
'''


def test_recipe_a_family(tmp_path):
    copy = tree_copy(tmp_path)
    # 1. the package, its scorer and its factory
    (copy / "services/toy").mkdir()
    (copy / "services/toy/__init__.py").write_text('"""The toy family (docs/layout.md\'s recipe)."""\n')
    (copy / "services/toy/metrics.py").write_text(TOY_METRICS, encoding="utf-8")
    (copy / "services/toy/factory.py").write_text(TOY_FACTORY, encoding="utf-8")
    # 2. its row in the family table
    edit(copy / "champollion/core/families.py", "\n)\nFAMILIES: dict",
         '\n    Family("toy", 50066, "the share of entries with an output"),\n)\nFAMILIES: dict')
    # 3. its metric's row, 4. its Scores field
    last_row = '    metric("repair_effectiveness", "compliance", in_shared_schema=False),\n'
    edit(copy / "gateway/card/metrics.py", last_row,
         last_row + '    metric("toy_answered_rate", "toy", in_shared_schema=False, label="answered"),\n')
    add_score_field(copy, "toy_answered_rate")
    hand_written = touched(copy)
    # 6. the generated deploy files
    run(copy, "deploy/generate.py")
    run(copy, "deploy/generate.py", "--check")

    text = recipe("a family")
    assert unnamed(touched(copy), text) == []
    # By hand: what this test wrote and the documentation the recipe names (not written here).
    docs = {pattern.pattern for pattern in named_files(text) if pattern.pattern.startswith("docs/")}
    assert len(hand_written) == 6 and len(hand_written) + len(docs) <= FAMILY_FILES_LIMIT
    # Served and scored: the example has 32 entries, one of them failed (no output).
    card = evaluate(copy, "--families", "toy")
    assert card["scores"]["toy_answered_rate"] == pytest.approx(31 / 32)
    # Deployed: its image, its manifests on its port, the gateway's route.
    assert 'toy) extras="" ;;' in (copy / "deploy/docker/Dockerfile").read_text(encoding="utf-8")
    assert "toy: dns:///toy.champollion.svc.cluster.local:50066" in \
        (copy / "deploy/k8s/base/gateway-config.yaml").read_text(encoding="utf-8")
    from tests.test_deploy_manifests import kubectl
    rendered = subprocess.run([kubectl(), "kustomize", str(copy / "deploy/k8s/base")], capture_output=True, text=True,
                              timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    assert '- "50066"' in rendered.stdout and "image: champollion-toy:0.1.0" in rendered.stdout


MIGRATION = '''"""The run's sampling temperature as a column of `runs` (the store-column
recipe of docs/layout.md).

Revision ID: {revision}
Revises: {previous}

Frozen as the others are: nothing imported from the live package.
"""
from alembic import op
from sqlalchemy import REAL, Column

revision = "{revision}"
down_revision = "{previous}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", Column("temperature", REAL, nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "temperature")
'''


def test_recipe_a_store_column(tmp_path):
    # A store as this tree leaves it, one run in it.
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    before = make_card(model="before")
    store = RunStore.open(url)
    store.save_run(before, [[]])
    store.close()

    copy = tree_copy(tmp_path / "tree")
    versions = copy / "gateway/store/migrations/versions"
    previous = max(path.name[:4] for path in versions.glob("[0-9][0-9][0-9][0-9]_*.py"))
    revision = f"{int(previous) + 1:04d}"
    # 1. the migration
    (versions / f"{revision}_run_temperature.py").write_text(MIGRATION.format(revision=revision, previous=previous),
                                                              encoding="utf-8")
    # 2. the table, 3. the row
    edit(copy / "gateway/store/tables.py", '    Column("floor_kind", Text),\n)',
         '    Column("floor_kind", Text),\n    Column("temperature", REAL),\n)')
    edit(copy / "gateway/store/rows.py", "        floor_kind=floor_kind,\n    )",
         '        floor_kind=floor_kind,\n        temperature=card.get("temperature"),\n    )')
    assert unnamed(touched(copy), recipe("a store column")) == []

    after = {**make_card(model="after"), "temperature": 0.7}
    (tmp_path / "after.json").write_text(json.dumps(after), encoding="utf-8")
    run(copy, "-c", "import json, sys; from gateway.store import RunStore; store = RunStore.open(sys.argv[1]); "
                    "store.save_run(json.load(open(sys.argv[2])), [[]]); store.close()",
        url, str(tmp_path / "after.json"))
    with sqlite3.connect(tmp_path / "runs.sqlite") as connection:
        rows = dict(connection.execute("SELECT model_slug, temperature FROM runs").fetchall())
        (head,) = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    assert rows == {"before": None, "after": 0.7}
    assert head == revision
