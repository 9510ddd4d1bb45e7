"""Documented examples are tests (issue 37): every shell command line of
README.md, docs/*.md, bench/README.md and deploy/README.md, one test id per
example (file:line), run as written on small files made here.

What counts as an example (the docs write commands two ways):
- in a fenced block of shell or text (```sh, ```text, or no language): a
  line after a `$ ` prompt, whose following lines, up to the next prompt,
  are the output the doc shows; in a block without prompts, a line that
  starts with a program's name (`champollion`, `psql`, `make`, ...), the
  indented lines under it being its continuation; `# ...` comments dropped;
- in prose: an inline code span that gives `champollion` a command and an
  argument (`champollion describe --languages`) or a flag (`champollion
  --version`). A bare command name (`champollion web`) is a mention; spans in
  tables label rows (timings, columns) and are not commands.

Placeholders (ID, RUN_ID, CAMPAIGN, URL, NAME, L...) are filled from
PLACEHOLDERS with what the module's workspace holds: a store of its own, a
gateway over the session's families that stores there, the example scored as
the docs' board shows it, a registered corpus, a rated review campaign, and
the files the examples name. A line that still has a synopsis's marks
(`[optional]`, `a|b`, `...`, flags named without their values) is a synopsis:
each flag it names must be one its command takes. Any other line runs: a
`champollion` line in this process (with the workspace's gateway added to
`evaluate` and `describe`, which would otherwise start every family), a line
with shell syntax or another program through bash. It passes when it exits 0,
writes the files its `-o` names, prints no traceback, and, where the doc shows
output, prints that in substance (the first line; JSON: the keys shown, in
order, and the nulls shown). What cannot run here is in SKIPPED, with why."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.cli.parser import build_parser
from apps.client import Client
from apps.launch.embedded import EmbeddedStack
from champollion.eval.v1 import gateway_pb2
from gateway.review.campaigns import CampaignRequest, create_campaign
from gateway.store import RunStore
from tests.conftest import EXAMPLE, REPO, run_cli
from tests.test_review_campaigns import RATERS, rate_everything

DOCS = ("README.md", *sorted(f"docs/{path.name}" for path in (REPO / "docs").glob("*.md")), "bench/README.md",
        "deploy/README.md")
SHELL_BLOCKS = {"", "sh", "shell", "bash", "console", "text"}
PROGRAMS = {"champollion", "python", "python3", "make", "git", "kubectl", "psql", "docker", "xdg-open", ".",
            "grpcurl", "curl"}
FENCE = re.compile(r"^\s*```(\S*)\s*$")
SPAN = re.compile(r"`([^`]+)`")
DATASET = "champollion-example-eng-spa"


@dataclass(frozen=True)
class Example:
    where: str  # file:line
    command: str
    shown: tuple[str, ...] = ()  # the output the doc shows under a `$ ` prompt


def _without_comment(line: str) -> str:
    return re.sub(r"\s{2,}#(\s.*)?$", "", line).rstrip()


def fenced_examples(name: str, lines: list[str]) -> list[Example]:
    found: list[list] = []  # [line, command, shown or None]
    language, current = None, None
    for number, raw in enumerate(lines, 1):
        fence = FENCE.match(raw)
        if fence:
            language, current = (fence.group(1) if language is None else None), None
            continue
        text = raw.strip()
        if language not in SHELL_BLOCKS or language is None:
            continue
        if text.startswith("$ "):
            current = [number, _without_comment(text[2:]), []]
            found.append(current)
        elif current is not None and current[2] is not None:
            current[2].append(text)  # what the prompt's command printed
        elif not text or text.startswith("#"):
            continue
        elif text.split()[0] in PROGRAMS:
            current = [number, _without_comment(text), None]
            found.append(current)
        elif current is not None:  # a wrapped line
            current[1] = f"{current[1].rstrip(chr(92)).rstrip()} {_without_comment(text)}"
    return [Example(f"{name}:{number}", command, tuple(shown or ())) for number, command, shown in found]


def prose_examples(name: str, lines: list[str]) -> list[Example]:
    found, paragraph, in_block = [], [], False

    def read(paragraph: list[tuple[int, str]]) -> None:
        # A span may wrap across the paragraph's lines: joined, then placed by its offset.
        ends, text = [], ""
        for number, line in paragraph:
            text += line.strip() + " "
            ends.append((len(text), number))
        for span in SPAN.finditer(text):
            words = span.group(1).split()
            if words[0] == "champollion" and (len(words) >= 3 or (len(words) == 2 and words[1].startswith("-"))):
                line = next(number for end, number in ends if end > span.start())
                found.append(Example(f"{name}:{line}", " ".join(words)))

    for number, raw in enumerate(lines, 1):
        if FENCE.match(raw):
            in_block = not in_block
            read(paragraph)
            paragraph = []
        elif not in_block and raw.strip() and not raw.lstrip().startswith("|"):
            paragraph.append((number, raw))
        elif not in_block:
            read(paragraph)
            paragraph = []
    read(paragraph)
    return found


def documented_examples() -> list[Example]:
    examples = []
    for name in DOCS:
        lines = (REPO / name).read_text(encoding="utf-8").splitlines()
        found = fenced_examples(name, lines) + prose_examples(name, lines)
        examples += sorted(found, key=lambda example: int(example.where.rsplit(":", 1)[1]))
    return examples


EXAMPLES = documented_examples()


def _ids(examples: list[Example]) -> list[str]:
    """file:line, and #2, #3... for a line's later examples."""
    ids = []
    for example in examples:
        seen = sum(1 for other in ids if other.split("#")[0] == example.where)
        ids.append(example.where if not seen else f"{example.where}#{seen + 1}")
    return ids

# Placeholders, in order: (pattern, replacement; {names} are the workspace's).
PLACEHOLDERS = (
    (r"\bleaderboard \.\.\. ", "leaderboard --dataset {dataset} "),  # docs/report.md elides the board's flags
    (r"\bCARD_OR_RUN_ID\.\.\.", "card.json"),
    (r"--dataset ID\b", "--dataset {dataset}"),
    (r"\bshow (ID|RUN_ID)\b", "show {run}"),
    (r"\bRUN_ID_A RUN_ID_B\b", "{run} {other_run}"),
    (r"\bcorpus sources ID\b", "corpus sources {registered}"),
    (r"\b3f2a9c 77b01e 9d41c0\b", "{campaign_runs}"),  # docs/community-review.md: a campaign's runs by prefix
    (r"\bcampaign:(C|ID|5c1e0a9b2d44)\b", "campaign:{campaign}"),
    (r"\breview results (C|CAMPAIGN|5c1e0a9b2d44)\b", "review results {campaign}"),
    (r"--store (URL|postgresql://\.\.\.)", "--store {store}"),
    (r"--gateway host:port\b", "--gateway {gateway}"),
    (r"--name NAME\b", "--name ana"),
    (r"\bCOMMAND --help\b", "evaluate --help"),
    (r"--source-lang L\b", "--source-lang en"),
    (r"--target-lang L\b", "--target-lang es"),
    (r"\bevaluate CORPUS\.tsv PREDICTIONS\.jsonl\b", "evaluate corpus.tsv predictions.jsonl"),
    (r"\bevaluate CORPUS PREDICTIONS\b", "evaluate corpus.json predictions.jsonl"),
    (r"\bcorpus check CORPUS\b", "corpus check corpus.json"),
)

# Examples that cannot run here, by what they start with, and why.
SKIPPED = (
    (r"git clone ", "fetches the repository over the network"),
    (r"make ", "builds or reinstalls .venv, which this test run uses (`make test` is what CI runs)"),
    (r"xdg-open ", "opens a desktop browser (tests/test_report.py opens reports in headless Chromium)"),
    (r"champollion (serve|web|up)\b", "a server that runs until stopped (tests/test_cli.py, tests/test_web.py and "
                                      "tests/test_multiprocess.py start and stop them)"),
    (r"kubectl ", "needs a Kubernetes cluster (tests/test_deploy_manifests.py renders the manifests offline)"),
)

# What an example prints beyond its exit status, where the doc says so in
# prose (by the command as filled): a check of the result, and what it means.
EXPECTED = {
    "champollion describe --languages": (lambda out, ws: out.splitlines()[1].split()[:2] == ["code", "name"],
                                         "a table of the written language cards"),
    "champollion leaderboard --dataset ID --official": (
        lambda out, ws: out.startswith(f"{DATASET}: no run to rank (--official"),
        "an empty official board says there is no run"),
    "champollion show ID --json | head -1": (lambda out, ws: out == "{\n", "the card's first line, then quiet"),
    "champollion evaluate -s src.en -r ref.de -i sys1.de sys2.de --name baseline candidate --source-lang en "
    "--target-lang de -o baseline.json candidate.json": (
        lambda out, ws: out.startswith("2 systems") and ws.plain_text_dataset(),
        "two systems in one table, one card each, on a dataset named by the files and a digest of their texts"),
}

SHELL_SYNTAX = re.compile(r"[|><;&$]|\$\(")


def skip_reason(command: str) -> str | None:
    return next((why for pattern, why in SKIPPED if re.match(pattern, command)), None)


# --- synopses ---------------------------------------------------------------------

def _subcommands(parser) -> dict:
    return next((action.choices for action in parser._actions if isinstance(getattr(action, "choices", None), dict)),
                {})


def _parser_at(path: list[str]):
    """The parser of `champollion PATH...`, a command's lazy flags added."""
    parser = build_parser()
    for name in path:
        parser = _subcommands(parser)[name]
        define = getattr(parser, "_define", None)
        if define is not None:
            parser._define = None
            define(parser)
    return parser


def _options(parser) -> dict:
    return {option: action for action in parser._actions for option in action.option_strings}


def _command_paths(words: list[str]) -> tuple[list[list[str]], list[str]]:
    """The commands the first words name (`review clear|disqualify`: two),
    and the words after them."""
    paths = [[]]
    while words:
        names, available = words[0].split("|"), _subcommands(_parser_at(paths[0]))
        if not available or not all(name in available for name in names):
            break
        paths = [path + [name] for path in paths for name in names]
        words = words[1:]
    return paths, words


def synopsis_problems(command: str) -> list[str]:
    """The flags a synopsis names that its command does not take. ` | `
    parts naming a command (`... | review clear|disqualify RUN_ID`) are
    synopses of their own; other parts (`[--desc | --asc]`) go on the
    command before them."""
    problems, paths = [], [[]]
    words = command.replace("[", " ").replace("]", " ").split()[1:]
    parts = [part.split() for part in " ".join(words).split(" | ")]
    for part in parts:
        named, part = _command_paths(part)
        if named != [[]]:
            paths = named
        for path in paths:
            options = _options(_parser_at(path))
            for word in part:
                flag = word.split("=", 1)[0].rstrip(",")
                if re.fullmatch(r"--?[A-Za-z][\w-]*", flag) and flag not in options:
                    problems.append(f"champollion {' '.join(path)} has no {flag}")
    return problems


def flags_named_only(argv: list[str]) -> bool:
    """Flags named without the values they take (`evaluate --src --ref --hyp`)."""
    paths, words = _command_paths(argv[1:])
    options = _options(_parser_at(paths[0]))
    for index, word in enumerate(words):
        action = options.get(word)
        following = words[index + 1] if index + 1 < len(words) else "-"
        if action is not None and action.nargs != 0 and following.startswith("-"):
            return True
    return False


def is_synopsis(command: str) -> bool:
    bare = re.sub(r"'[^']*'|\"[^\"]*\"", "", command)  # quoted text is a value (`PASSWORD '...'`)
    if "[" in bare or "..." in bare or re.search(r"\w\|\w", bare):
        return True
    if command.startswith("champollion ") and not SHELL_SYNTAX.search(command):
        return flags_named_only(shlex.split(command))
    return False


# --- the workspace ------------------------------------------------------------------

SOURCES = ("Save changes", "Open the file", "Close the window", "Delete the draft", "Print the page",
           "Send the message")
REFERENCES = ("Änderungen speichern", "Datei öffnen", "Fenster schließen", "Entwurf löschen", "Seite drucken",
              "Nachricht senden")
SYSTEM_2 = ("Änderungen sichern", "Die Datei öffnen", "Fenster schließen", "Entwurf entfernen", "Seite drucken",
            "Nachricht schicken")


class Workspace:
    """A folder with the files the examples name, a store, a gateway that
    stores there, and the values PLACEHOLDERS fill in."""

    def __init__(self, folder: Path, gateway: str, store: str):
        self.folder, self.gateway, self.store = folder, gateway, store
        self.values = {"gateway": gateway, "store": store, "dataset": DATASET}

    def filled(self, command: str) -> str:
        for pattern, replacement in PLACEHOLDERS:
            command = re.sub(pattern, replacement, command)
        return re.sub(r"\{(\w+)\}", lambda name: self.values.get(name.group(1), name.group(0)), command)

    def plain_text_dataset(self) -> bool:
        ids = {json.loads((self.folder / name).read_text(encoding="utf-8"))["dataset"]["id"]
               for name in ("baseline.json", "candidate.json")}
        return len(ids) == 1 and re.fullmatch(r"src-[0-9a-f]{8}", ids.pop()) is not None


def _write_lines(path: Path, lines) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _scored(out: Path, *args) -> dict:
    """A run scored through the CLI, its card read from the file it wrote."""
    assert run_cli("evaluate", *args, "-o", out) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workspace(stack, tmp_path_factory):
    folder = tmp_path_factory.mktemp("documented")
    store = f"sqlite:///{folder / 'store' / 'runs.sqlite'}"
    saved = os.environ.get("CHAMPOLLION_STORE")
    os.environ["CHAMPOLLION_STORE"] = store  # the examples' default store is the workspace's
    try:
        with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store) as gateway:
            yield _filled_workspace(Workspace(folder, gateway.gateway_address, store))
    finally:
        if saved is None:
            os.environ.pop("CHAMPOLLION_STORE", None)
        else:
            os.environ["CHAMPOLLION_STORE"] = saved


def _filled_workspace(ws: Workspace) -> Workspace:
    folder, gateway = ws.folder, ws.gateway
    # The quick start's plain text: English sources, German references, two systems.
    _write_lines(folder / "src.en", SOURCES)
    _write_lines(folder / "ref.de", REFERENCES)
    _write_lines(folder / "sys1.de", REFERENCES[:3] + ("Entwurf löschen bitte", "Seite druckt", "Nachricht"))
    _write_lines(folder / "sys2.de", SYSTEM_2)
    # The example's files, and the same corpus as TSV.
    for name in ("corpus.json", "predictions.jsonl", "meta.json", "glossary.json"):
        (folder / name).write_bytes((EXAMPLE / name).read_bytes())
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    rows = [f"{e['id']}\t{e['source']}\t{e['reference']}" for e in corpus["entries"]]
    _write_lines(folder / "corpus.tsv", ["id\tsource\treference", *rows])
    # The docs' board: the example as example-llm-mini twice, and lower-cased at a third of the cost.
    lines = (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predictions = [json.loads(line) for line in lines]
    lowered = [{**p, **({"prediction": p["prediction"].lower()} if "prediction" in p else {}),
                **({"cost_usd": p["cost_usd"] / 3} if "cost_usd" in p else {})} for p in predictions]
    _write_lines(folder / "predictions-b.jsonl", [json.dumps(p, ensure_ascii=False) for p in lowered])
    meta = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8"))
    (folder / "meta-b.json").write_text(json.dumps({**meta, "model_slug": "example-llm-b"}), encoding="utf-8")
    example = (folder / "corpus.json", "--glossary", folder / "glossary.json", "--gateway", gateway)
    mini = [_scored(folder / name, example[0], folder / "predictions.jsonl", "--meta", folder / "meta.json",
                    *example[1:]) for name in ("card.json", "card-again.json")]
    cheap = _scored(folder / "card-b.json", example[0], folder / "predictions-b.jsonl", "--meta",
                    folder / "meta-b.json", *example[1:])
    ws.values.update(run=mini[0]["run_id"], other_run=cheap["run_id"])
    # The quick start's cards (its own example writes them again).
    assert run_cli("evaluate", "-s", folder / "src.en", "-r", folder / "ref.de", "-i", folder / "sys1.de",
                   folder / "sys2.de", "--name", "baseline", "candidate", "--source-lang", "en", "--target-lang",
                   "de", "-o", folder / "baseline.json", "-o", folder / "candidate.json", "--gateway", gateway) == 0
    # A registered corpus, three systems scored on it, and a review campaign their raters finished.
    registered = {**corpus, "id": "docs-registered-eng-spa"}
    systems = {"as-is": lambda text: text, "lower": str.lower, "upper": str.upper}
    with Client(gateway) as client:
        client.register_corpus(registered, "dev")
        runs = [client.evaluate(gateway_pb2.CorpusRef(id=registered["id"]),
                                [{**p, **({"prediction": change(p["prediction"])} if "prediction" in p else {})}
                                 for p in predictions], {"model_slug": f"docs-{name}"})["run_id"]
                for name, change in systems.items()]
    opened = RunStore.open(ws.store)
    try:
        campaign = create_campaign(opened, CampaignRequest("docs", runs, list(RATERS), items=30, overlap=3, seed=11))
        rate_everything(opened, campaign, dict(zip(runs, (80, 60, 40))))
    finally:
        opened.close()
    ws.values.update(registered=registered["id"], campaign=campaign["campaign_id"],
                     campaign_runs=" ".join(run[:8] for run in runs))
    return ws


# --- running an example -------------------------------------------------------------

@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


def _environment() -> dict:
    """The test's environment (the workspace's store), this tree's code and
    this interpreter's `champollion` first on PATH."""
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_in_shell(command: str, cwd: Path, env: dict) -> Ran:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    return Ran(done.returncode, done.stdout, done.stderr)


def run_here(argv: list[str], capsys) -> Ran:
    capsys.readouterr()
    try:
        code = run_cli(*argv[1:])
    except SystemExit as stopped:  # --help, --version, a usage error
        code = stopped.code if isinstance(stopped.code, int) else 2
    return Ran(code, *capsys.readouterr())


def _outputs(argv: list[str]) -> list[str]:
    """The files an example's -o/--out names (one, or several after one flag)."""
    found = []
    for index, word in enumerate(argv):
        if word in ("-o", "--out"):
            rest = argv[index + 1:]
            found += rest[:next((n for n, value in enumerate(rest) if value.startswith("-")), len(rest))]
    return found


def _postgres_env(request, env: dict) -> dict:
    cluster = request.getfixturevalue("postgres_cluster")
    return {**env, "PGHOST": "127.0.0.1", "PGPORT": str(cluster.port), "PGUSER": "postgres",
            "PGDATABASE": "postgres"}


def check_shown(shown: tuple[str, ...], stdout: str) -> None:
    """The doc's output in substance: its first line (… stands for anything),
    or for JSON the keys shown, in that order, and the nulls shown."""
    first = shown[0]
    if first.startswith(("[", "{")):
        printed = json.loads(stdout)
        row = printed[0] if isinstance(printed, list) else printed
        # The first object's own keys: objects inside it collapsed, and what follows it cut off.
        inner = first[first.index("{") + 1:]
        while re.search(r"\{[^{}]*[^{}\s][^{}]*\}", inner):
            inner = re.sub(r"\{[^{}]*\}", "{}", inner)
        inner = re.split(r"(?<!\{)\}", inner)[0]
        keys = re.findall(r'"(\w+)":', inner)
        assert [key for key in row if key in keys] == keys, (keys, list(row))
        assert [key for key in re.findall(r'"(\w+)": null', inner) if row[key] is not None] == []
    else:
        pattern = ".*".join(re.escape(piece) for piece in first.split("…"))
        assert re.fullmatch(pattern, stdout.splitlines()[0] if stdout else ""), (first, stdout[:300])


def spills_of_this_process() -> list[str]:
    """Spill files of this process's gateways left in $TMPDIR (each is named
    after its gateway's process id: gateway/server/spill.py)."""
    folder = Path(tempfile.gettempdir()) / f"champollion-spill-{os.getuid()}"
    return sorted(path.name for path in folder.glob(f"run-{os.getpid()}-*.sqlite")) if folder.exists() else []


@pytest.mark.parametrize("example", EXAMPLES, ids=_ids(EXAMPLES))
def test_documented_example(example: Example, workspace: Workspace, request, capsys, monkeypatch):
    command = workspace.filled(example.command)
    if is_synopsis(command):
        assert command.startswith("champollion "), "a synopsis of another program: no rule reads its flags"
        assert synopsis_problems(command) == []
        return
    why = skip_reason(command)
    if why:
        pytest.skip(why)
    monkeypatch.chdir(workspace.folder)
    env = _environment()
    if command.startswith("psql "):
        env = _postgres_env(request, env)
    if SHELL_SYNTAX.search(command) or not command.startswith("champollion "):
        in_repo = not command.startswith("champollion ")  # `. .venv/bin/activate`: the clone's folder
        ran = run_in_shell(command, REPO if in_repo else workspace.folder, env)
        outputs = []
    else:
        argv = shlex.split(command)
        if argv[1] in ("evaluate", "describe") and "--gateway" not in argv:
            argv += ["--gateway", workspace.gateway]  # the workspace's: no stack of every family per example
        outputs = _outputs(argv)
        before = {name: Path(name).read_bytes() for name in outputs if Path(name).is_file()}
        for name in outputs:
            Path(name).unlink(missing_ok=True)  # so that the run must write them
        ran = run_here(argv, capsys)
        for name, content in before.items():
            if not Path(name).is_file() and ran.exit_code:
                Path(name).write_bytes(content)  # a failed run: the examples after it still find the file
    assert ran.exit_code == 0, f"{command}: exit {ran.exit_code}\n{ran.stderr[-2000:]}"
    assert "Traceback" not in ran.stderr
    assert "corpus version , by" not in ran.stdout
    assert [name for name in outputs if not Path(name).is_file()] == []
    if example.shown:
        check_shown(example.shown, ran.stdout)
    expected = EXPECTED.get(example.command)
    if expected is not None:
        check, what = expected
        assert check(ran.stdout, workspace), f"{command}: expected {what}; printed:\n{ran.stdout[:2000]}"
    if command.startswith("champollion evaluate"):
        assert spills_of_this_process() == []  # the workspace's gateway runs here: its spills went with its runs


def test_the_rules_find_the_examples_the_issue_names():
    """The examples the issue lists are found, as examples (not synopses)."""
    commands = {example.command for example in EXAMPLES}
    for expected in (
        "champollion evaluate -s src.en -r ref.de -i sys1.de sys2.de --name baseline candidate --source-lang en "
        "--target-lang de -o baseline.json candidate.json",
        "champollion report baseline.json candidate.json --src src.en --ref ref.de --hyp sys1.de --hyp sys2.de "
        "-o report.html",
        "champollion describe --languages",
        "champollion token new --name NAME --role reviewer",
        "champollion leaderboard --dataset ID --official",
        'psql -c "CREATE DATABASE champollion OWNER champollion"',
        "champollion review results 5c1e0a9b2d44 --tsv -o judgments.tsv",
        "champollion meta-eval --human judgments.tsv 3f2a9c 77b01e 9d41c0",
    ):
        assert expected in commands
    assert not any(is_synopsis(command) for command in commands if command.startswith("champollion evaluate -s src.en"))
    assert is_synopsis("champollion evaluate --src --ref --hyp")  # flags named, not a command line
    assert len(EXAMPLES) >= 80
    assert set(EXPECTED) <= commands  # every check is of a documented example


def test_a_synopsis_naming_a_flag_its_command_lacks_is_caught():
    assert synopsis_problems("champollion token new --name NAME --role ROLE [--expires WHEN]") == []
    assert synopsis_problems("champollion token new --label NAME [--role ROLE]") == [
        "champollion token new has no --label"]
    assert synopsis_problems("champollion review list [--dataset ID] | review clear|disqualify RUN_ID [--notes T]") \
        == ["champollion review clear has no --notes", "champollion review disqualify has no --notes"]


@pytest.mark.parametrize("password", ["p", "s3cr3t-Pass"])
@pytest.mark.parametrize("command", [("db", "upgrade"), ("runs",), ("leaderboard", "--dataset", DATASET),
                                     ("corpus", "list")])
def test_a_store_password_never_shows_in_a_documented_commands_error(cli, password, command):
    """`--store postgresql://USER:PASSWORD@HOST:PORT/DB` (docs/commands.md) to
    a database that does not answer: one line, exit 1, the password masked as
    a whole, the rest of the message (`port ...`) as the driver wrote it."""
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = cli(*command, "--store", f"postgresql://champollion:{password}@127.0.0.1:{port}/champollion")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "champollion:***@127.0.0.1" in result.stderr
    assert re.search(rf"(?<![\w]){re.escape(password)}(?![\w])", result.stderr) is None
    assert f"port {port}" in result.stderr and "***ort" not in result.stderr
