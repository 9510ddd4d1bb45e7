"""The command line's grammar: every command, its arguments and flags, and
the function that runs it.

Building it must stay cheap: `champollion --help` and `--version` load
nothing but this module and argparse. Command modules are imported when
their command runs (`_run_from`), and a command whose flags need a heavy
module (`up`, `meta-eval`) has them added only when it is the command
parsed (`_LazyCommands`)."""
from __future__ import annotations

import argparse
import difflib
import importlib
import textwrap

from champollion import __version__
from apps.cli.common import TOKEN_VARIABLE
from champollion.core.corpus_rules import PURPOSES
from champollion.core.families import FAMILY_NAMES, GATEWAY_PORT
from champollion.core.roles import ROLES
from champollion.core.tiers import RETIRED_TIERS, SECRET_TIERS, TABLE as TIER_TABLE
from champollion.core.sampling import CORRECTIONS, DEFAULT_RESAMPLES, DEFAULT_SEED, DEFAULT_TRIALS
from champollion.core.sampling import METHODS as COMPARE_METHODS
from champollion.core import review_protocols

DEFAULT_PORT = GATEWAY_PORT
SERVE_HOST = "127.0.0.1"  # serve's default --host
# Columns a command's description is filled to (argparse's own default width).
HELP_WIDTH = 78
# Rows a leaderboard shows unless --limit says otherwise: the top of a board
# of any size answers in about 0.1 s (bench/leaderboard.py).
DEFAULT_BOARD_ROWS = 100


def _run_from(module: str, name: str):
    """A command handler imported when its command runs, so that building
    the parser loads no command module (and `serve`, `token`, `db` alone
    load the server side)."""
    def handler(args):
        return getattr(importlib.import_module(module), name)(args)
    return handler


def _serve_or_stacks(args):
    """`serve`, or with --background, --status or --stop the background
    stacks' command (which loads no server module to list or stop them)."""
    if args.background or args.status or args.stop:
        from apps.cli.stacks import cmd_stacks

        return cmd_stacks(args, {"host": SERVE_HOST, "port": DEFAULT_PORT})
    return _run_from("apps.cli.serve", "cmd_serve")(args)


class _LazyCommands(argparse._SubParsersAction):
    """Subcommands that (1) add their flags only when they are the command
    parsed, where `define` is given: a command whose flags need a heavy
    module costs nothing to the others and to --help; and (2) report a flag
    they do not know with their own usage, not the top level's, naming the
    closest flag they have."""

    def add_parser(self, name, define=None, examples: tuple[str, ...] = (), **kwargs):
        if examples:  # kept as written (argparse would join the lines); the description filled here
            kwargs["epilog"] = "examples:\n" + "\n".join(f"  {line}" for line in examples)
            kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
            if kwargs.get("description"):
                kwargs["description"] = textwrap.fill(kwargs["description"], HELP_WIDTH)
        command = super().add_parser(name, **kwargs)
        command._define = define
        return command

    def __call__(self, parser, namespace, values, option_string=None):
        command = self._name_parser_map.get(values[0])
        if command is not None and getattr(command, "_define", None) is not None:
            define, command._define = command._define, None
            define(command)
        super().__call__(parser, namespace, values, option_string)
        unknown = getattr(namespace, argparse._UNRECOGNIZED_ARGS_ATTR, None)
        if unknown and command is not None:
            command.error(_unrecognized(command, unknown))


def _unrecognized(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    message = f"unrecognized arguments: {' '.join(unknown)}"
    flag = next((text.split("=", 1)[0] for text in unknown if text.startswith("--")), None)
    if flag:
        known = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
        close = difflib.get_close_matches(flag, known, n=1)
        if close:
            message += f" (did you mean {close[0]}?)"
    return message


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands are _LazyCommands (the
    subcommands' parsers are of this class too)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _LazyCommands)


def _either(words) -> str:
    """"a, b or c": the tier table's names as the help writes them."""
    words = list(words)
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1])))


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _output_format(text: str) -> bool:
    """sacreBLEU's `-f/--format`: json or text; True for json."""
    if text not in ("json", "text"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from 'json', 'text')")
    return text == "json"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="champollion", description="Score machine-translation runs.",
                           epilog="`champollion COMMAND --help` for a command's flags and examples.")
    parser.add_argument("--version", action="version", version=f"champollion {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    evaluate = commands.add_parser(
        "evaluate", help="score one or several systems' translations and print a summary",
        description="Score a run (or several systems on one corpus) and print a summary: each metric with its "
                    "95% confidence interval and signature, the composite, tier and coverage, the warnings, and "
                    "the run id. Several systems are compared with the first by a paired test.",
        examples=(
            "champollion evaluate -s src.en -r ref.de -i hyp.de --source-lang eng --target-lang deu",
            "champollion evaluate -s src.en -r ref.de -i a.de b.de c.de --name a b c -m bleu,chrf,ter --paired ar "
            "--all-pairs",
            "champollion evaluate corpus.json predictions.jsonl --meta meta.json -o card.json --json",
        ))
    evaluate.add_argument("corpus", nargs="?",
                          help="corpus JSON (object with entries, or a list of entries); not with --corpus-id")
    evaluate.add_argument("predictions", nargs="*",
                          help="predictions, JSON Lines (several files: several systems, compared with the first)")
    evaluate.add_argument("-s", "--src", metavar="SRC.txt",
                          help="plain text instead of CORPUS PREDICTIONS: sources, one segment a line ('-': stdin)")
    evaluate.add_argument("-r", "--ref", action="append", metavar="REF.txt",
                          help="with --src: references, one segment a line (repeat for several references)")
    evaluate.add_argument("-i", "--hyp", nargs="+", action="extend", metavar="HYP.txt",
                          help="with --src: translations, one a line; several files: several systems, compared "
                               "with the first ('-': stdin, for one)")
    evaluate.add_argument("--name", nargs="+", action="extend", metavar="NAME",
                          help="the systems' names, in the order of their files (default: each file's name); "
                               "recorded as model_slug unless --meta gives one")
    evaluate.add_argument("-m", "--metrics", type=_comma_list, action="extend", metavar="M,M",
                          help="compute only these metrics (run-card keys or short names: bleu, chrf, ter, comet, "
                               "...); the others are null, 'not requested'")
    evaluate.add_argument("--families", type=_comma_list, action="extend", metavar="F,F",
                          help=f"run only these families ({', '.join(FAMILY_NAMES)})")
    evaluate.add_argument("--paired", choices=COMPARE_METHODS, default=None,
                          help="several systems: the paired test against the first, bs (bootstrap, the default) "
                               "or ar (approximate randomization), as sacreBLEU's --paired-bs / --paired-ar")
    _add_pairs_options(evaluate, "several systems: every pair compared by the --paired test (instead of each "
                                 "with the first), with corrected p-values, win/tie/loss and clusters")
    evaluate.add_argument("--corpus-id", metavar="ID",
                          help="score against this corpus registered in the gateway's store (server-side: "
                               "send predictions only)")
    evaluate.add_argument("--corpus-version", metavar="V",
                          help="with --corpus-id: its version number or hash (prefix); default the latest")
    evaluate.add_argument("--dataset-id", metavar="ID",
                          help="the corpus's dataset id (the board its runs are on); default: the corpus file's "
                               "own id, else a name from the file names and a digest of the texts")
    evaluate.add_argument("--meta", action="append", metavar="META.json",
                          help="run metadata JSON (model, timings, pricing); once for every system, or once per "
                               "system in order")
    evaluate.add_argument("--glossary", help="glossary JSON: list of {source, target, alternatives}")
    evaluate.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    evaluate.add_argument("-o", "--out", action="extend", nargs="+", metavar="CARD.json",
                          help="also write the whole run card (entries included) here; several systems: one file "
                               "per system, in order (-o a.json b.json, or -o a.json -o b.json)")
    _add_json_flag(evaluate, "the run card (without its entries unless --entries) instead of the summary; "
                             "several systems: {runs, comparisons}")
    evaluate.add_argument("--entries", action="store_true", help="with --json: the per-entry results too")
    evaluate.add_argument("--batch-size", type=int, help="entries per family call")
    evaluate.add_argument("--seed", type=int, help=f"seed of the bootstrap and the paired test (default "
                                                   f"{DEFAULT_SEED}, as sacreBLEU)")
    evaluate.add_argument("--resamples", type=int,
                          help=f"bootstrap resamples (default {DEFAULT_RESAMPLES}); also the paired test's "
                               f"resamples or trials (default {DEFAULT_RESAMPLES} for bs, {DEFAULT_TRIALS} for ar)")
    evaluate.add_argument("--comet-model", help="COMET model id for this run, instead of the card's choice")
    evaluate.add_argument("--no-plugins", action="store_true",
                          help="universal metrics only: leave the target language's eval-standard plugins out")
    evaluate.add_argument("--source-lang", help="source language, any common tag: fr, fra, fre, fr-FR, "
                                                "fra_Latn (for a bare list of entries, TSV/CSV or --src; "
                                                "overrides the corpus's)")
    evaluate.add_argument("--target-lang", help="target language, as --source-lang (for a bare list of entries, "
                                                "TSV/CSV or --src; overrides the corpus's)")
    evaluate.add_argument("--workers", type=int, metavar="N",
                          help="embedded stack: worker processes, one pool shared by the families "
                               "(default: $CHAMPOLLION_WORKERS, else one per core; 0 or 1: in threads)")
    _add_daemon_flag(evaluate, "score in a stack of this process, stopped at the end, instead of the background "
                               "stack of these settings (started by the first run, it stops after "
                               "$CHAMPOLLION_DAEMON_IDLE seconds without one, default 900)")
    _add_store_options(evaluate, "store the run card in this store")
    _add_access_options(evaluate)
    evaluate.set_defaults(handler=_run_from("apps.cli.scoring", "cmd_evaluate"))

    serve = commands.add_parser("serve", help="serve the gateway and families, or the named ones")
    serve.add_argument("--family", action="append", default=[], metavar="NAME",
                       help="serve only this family (repeatable; 'gateway' for the gateway alone)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help="gateway port; with --family, the first named service's port (the next get +1, +2...)")
    serve.add_argument("--host", default=SERVE_HOST, help="address to bind (0.0.0.0 in containers)")
    serve.add_argument("--config", help="gateway config YAML (with --family gateway)")
    serve.add_argument("--languages", type=lambda text: [code.strip() for code in text.split(",") if code.strip()],
                       help="comma-separated target languages a structural service loads and serves (default: all)")
    serve.add_argument("--device", choices=("cpu", "cuda"), help="semantic family: where COMET runs")
    serve.add_argument("--comet-dir", help="semantic family: directory of local COMET models")
    serve.add_argument("--max-text-chars", type=int, metavar="N",
                       help="longest source, reference, variant, prediction or raw_prediction (characters) that the "
                            "families and the gateway served take (default 20000; for the gateway, before "
                            "--config's max_text_chars)")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--workers", type=int, metavar="N",
                       help="worker processes: without --family one pool shared by the families (default: "
                            "$CHAMPOLLION_WORKERS, else one per core); with --family a pool per family (default: "
                            "in threads); 0 or 1: in threads")
    serve.add_argument("--auth", metavar="TOKENS.yaml",
                       help="the gateway asks every call for one of these tokens: "
                            "tokens: [{name, role: reviewer|submitter|maintainer, sha256}] (see `champollion token new`)")
    serve.add_argument("--family-auth", metavar="TOKENS.yaml",
                       help="the families named with --family ask every call for a maintainer's token of this file "
                            "(the gateway sends its config's family_token_file)")
    serve.add_argument("--insecure-open", action="store_true",
                       help="serve a gateway without --auth on a non-loopback --host (anyone reaching it may do anything)")
    serve.add_argument("--tls-cert", metavar="CERT.pem", help="serve over TLS with this certificate (chain, PEM)")
    serve.add_argument("--tls-key", metavar="KEY.pem", help="the private key of --tls-cert (PEM)")
    serve.add_argument("--health-port", type=int, metavar="N",
                       help="with --family, also answer health checks only, in plaintext, on this port "
                            "(+1, +2... as --port): for probes that speak no TLS")
    _add_store_options(serve, "the gateway stores every run card here (before the default: --config's store)")
    background = serve.add_mutually_exclusive_group()
    background.add_argument("--background", action="store_true",
                            help="start the background stack `evaluate` uses (every family, on this user's Unix "
                                 "socket, over --store, with --workers) and return; it stops after --idle-timeout "
                                 "seconds without a run")
    background.add_argument("--status", action="store_true", help="list this user's background stacks")
    background.add_argument("--stop", action="store_true", help="stop this user's background stacks")
    serve.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                       help="with --background: seconds without a run before the stack stops (default "
                            "$CHAMPOLLION_DAEMON_IDLE, else 900)")
    serve.set_defaults(handler=_serve_or_stacks)

    compare = commands.add_parser(
        "compare", help="paired significance test (bootstrap or approximate randomization) between run cards",
        examples=(
            "champollion compare baseline.json system.json",
            "champollion compare 1c51912 8d0e4a7 --method ar       # stored runs, by id prefix",
            "champollion compare a.json b.json c.json d.json --all-pairs --correction bh --json -o pairs.json",
        ))
    compare.add_argument("runs", nargs="+", metavar="RUN",
                         help="run card JSON files or stored runs' ids (or their first 6+ characters): the first "
                              "is the baseline, each other run is compared with it (--all-pairs: every pair)")
    compare.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded gateway)")
    _add_store_options(compare, "the store the run ids are in", no_store=False)
    _add_daemon_flag(compare, _READING_DAEMON_HELP)
    compare.add_argument("--seed", type=int, help=f"seed (default {DEFAULT_SEED}, as sacreBLEU)")
    compare.add_argument("--resamples", type=int, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES}) or "
                                                       f"randomization trials (default {DEFAULT_TRIALS})")
    compare.add_argument("--method", choices=COMPARE_METHODS, default="bs",
                         help="bs: paired bootstrap (default); ar: approximate randomisation (as sacreBLEU's)")
    _add_pairs_options(compare, "every pair of the runs, with corrected p-values, win/tie/loss and clusters")
    compare.add_argument("--metric", type=_comma_list, action="extend", metavar="M,M",
                         help="with --all-pairs: only these metrics (keys or short names, and composite; default: "
                              "every metric, the composite and chrF++ printed)")
    compare.add_argument("-o", "--out", metavar="COMPARISON.json", help="also write the comparison (JSON) here")
    _add_json_flag(compare, "the comparison as JSON instead of a table")
    _add_access_options(compare)
    compare.set_defaults(handler=_run_from("apps.cli.scoring", "cmd_compare"))

    up = commands.add_parser("up", help="the distributed topology on this machine: a process per family "
                                        "(two structural replicas) and a gateway in front",
                             define=_define_up)
    up.set_defaults(handler=_run_from("apps.launch.local_cluster", "run"))

    describe = commands.add_parser("describe", help="what is loaded: families, metrics, languages")
    describe.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    describe.add_argument("--languages", action="store_true",
                          help="only the languages: every written language card, and how a generic card is built "
                               "for any other language")
    _add_json_flag(describe, "the description as JSON instead of a summary")
    _add_access_options(describe)
    describe.set_defaults(handler=_run_from("apps.cli.scoring", "cmd_describe"))

    runs = commands.add_parser("runs", help="list stored runs, newest first")
    runs.add_argument("--dataset", help="only runs on this corpus id")
    runs.add_argument("--model", help="only runs of this model slug")
    _add_reading_options(runs)
    runs.set_defaults(handler=_run_from("apps.cli.stored", "cmd_runs"))

    show = commands.add_parser("show", help="summarise a run card, stored or in a file (--json: the card)")
    show.add_argument("run_id", metavar="CARD_OR_RUN_ID",
                      help="a run card JSON file, or a stored run's id (or its first 6+ characters)")
    show.add_argument("-o", "--out", metavar="CARD.json", help="also write the whole run card (entries included) here")
    _add_reading_options(show, json_help="the run card (without its entries unless --entries) instead of the summary")
    show.add_argument("--entries", action="store_true", help="with --json: the per-entry results too")
    show.set_defaults(handler=_run_from("apps.cli.stored", "cmd_show"))

    meta_eval = commands.add_parser("meta-eval", help="how well each metric of a set of run cards agrees with "
                                                      "human judgments of the same systems",
                                    define=_define_meta_eval)
    meta_eval.set_defaults(handler=_run_from("apps.cli.stored", "cmd_meta_eval"))

    leaderboard = commands.add_parser(
        "leaderboard", help="stored runs of one corpus version, ranked",
        examples=(
            "champollion leaderboard --dataset newstest2021.en-de",
            "champollion leaderboard --dataset newstest2021.en-de --sort bleu --version dbf6c2",
            "champollion leaderboard --dataset newstest2021.en-de --html -o board.html",
        ))
    leaderboard.add_argument("--dataset", required=True, help="corpus id")
    leaderboard.add_argument("--version", help="corpus version, or its first 6+ characters (default: the latest "
                                               "stored one)")
    leaderboard.add_argument("--sort", default="composite_score",
                             help="a spec §9.1 numeric column, a run-card metric (bleu, ter, chrf...) or "
                                  "cost_adjusted (default composite_score)")
    direction = leaderboard.add_mutually_exclusive_group()
    direction.add_argument("--desc", dest="ascending", action="store_false", help="highest first (the default)")
    direction.add_argument("--asc", dest="ascending", action="store_true", help="lowest first")
    leaderboard.set_defaults(ascending=False)
    leaderboard.add_argument("--all-submissions", action="store_true",
                             help="every run of a fingerprint, not only its first submission")
    leaderboard.add_argument("--include-disqualified", action="store_true", help="disqualified runs too")
    leaderboard.add_argument("--official", action="store_true",
                             help="only runs scored against a registered holdout or gold corpus")
    leaderboard.add_argument("--limit", type=int, default=DEFAULT_BOARD_ROWS,
                             help=f"at most this many rows (default {DEFAULT_BOARD_ROWS}; 0: all)")
    leaderboard.add_argument("--html", action="store_true",
                             help="write the board, with each run's card, as an HTML page to -o/--out")
    leaderboard.add_argument("-o", "--out", metavar="BOARD.html", help="with --html: the page's file")
    _add_reading_options(leaderboard)
    leaderboard.set_defaults(handler=_run_from("apps.cli.stored", "cmd_leaderboard"))

    report = commands.add_parser(
        "report", help="an HTML report of one or several run cards",
        examples=(
            "champollion report card.json -o report.html",
            "champollion report 1c51912 8d0e4a7 -o report.html      # stored runs, by id prefix",
            "champollion report a.json b.json -o report.html --corpus corpus.json --predictions a.jsonl "
            "--predictions b.jsonl",
        ))
    report.add_argument("cards", nargs="+", metavar="CARD_OR_RUN_ID",
                        help="run card JSON files or stored run ids (or their first 6+ characters)")
    report.add_argument("-o", "--out", required=True, metavar="REPORT.html", help="the report's file")
    report.add_argument("--corpus", metavar="CORPUS", help="the runs' corpus file: sources, references and "
                        "domains for the worst entries and the by-domain breakdown (cards do not carry texts)")
    report.add_argument("--predictions", metavar="PREDICTIONS", nargs="+", action="extend", default=[],
                        help="the runs' predictions files, one per card in the same order (after one flag or "
                             "each after its own): their outputs and latencies")
    report.add_argument("-s", "--src", metavar="SRC.txt", help="plain text instead of --corpus: the sources, one "
                        "segment a line, line N being entry line-N as `evaluate --src` reads it ('-': stdin)")
    report.add_argument("-r", "--ref", action="append", default=[], metavar="REF.txt",
                        help="plain text: references, one a line (the first is shown)")
    report.add_argument("-i", "--hyp", nargs="+", action="extend", default=[], metavar="HYP.txt",
                        help="plain text instead of --predictions: the runs' translations, one a line, one file per "
                             "card in the same order (after one flag or each after its own)")
    _add_reading_options(report, json_help=None)
    report.set_defaults(handler=_run_from("apps.cli.stored", "cmd_report"))

    db = commands.add_parser("db", help="store maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply the store's pending migrations")
    _add_store_options(upgrade, "the store to upgrade", no_store=False)
    upgrade.set_defaults(handler=_run_from("apps.cli.admin", "cmd_db_upgrade"))
    version_key = db_commands.add_parser(
        "version-key", help="the key of secret-tier corpus versions' public ids (kept outside the store)")
    version_key_commands = version_key.add_subparsers(dest="version_key_command", required=True)
    for action, action_help in (("new", "make the key file (refused if it exists) and derive the public ids"),
                                ("rotate", "replace the key and re-derive every public id (old ones stop "
                                           "resolving)")):
        key_command = version_key_commands.add_parser(action, help=action_help)
        key_command.add_argument("--version-key", metavar="FILE",
                                 help="the key file (default: $CHAMPOLLION_VERSION_KEY, else STORE.version-key "
                                      "beside a SQLite store)")
        _add_store_options(key_command, "the store whose public ids to derive", no_store=True)
        key_command.set_defaults(handler=_run_from("apps.cli.admin", "cmd_db_version_key"))

    corpus = commands.add_parser("corpus", help="registered corpora: register, list, retire, promote, sources; "
                                                 "check (any corpus)")
    corpus_commands = corpus.add_subparsers(dest="corpus_command", required=True)
    register = corpus_commands.add_parser("register", help="register a corpus (a new version of it with "
                                                           "--new-version) with its secrecy tier")
    register.add_argument("corpus", help="corpus JSON (object with id, languages and entries)")
    register.add_argument("--tier", required=True, help=_either(f"{tier.name} ({tier.words})" for tier in TIER_TABLE))
    register.add_argument("--new-version", action="store_true",
                          help="record content that differs from the registered versions as the next version")
    check = corpus_commands.add_parser("check", help="a corpus against the design rules: sizes, mixes, phenomena, "
                                                     "reference quality, analyzer coverage, power, rotation")
    check.add_argument("corpus", metavar="CORPUS", help="a corpus file, or the id of a registered corpus")
    check.add_argument("--version", help="of a registered corpus: version hash, prefix or number (default: latest)")
    check.add_argument("--purpose", choices=PURPOSES,
                       help="the tier whose rules apply (default: holdout for a file, a registered version's tier)")
    check.add_argument("--pilot", nargs="+", default=[], metavar="RUN_CARD",
                       help="two or more run cards (files, or stored run ids for a registered corpus) of pilot "
                            "systems on one corpus: simulate the power of the paired bootstrap at this size")
    check.add_argument("--html", action="store_true", help="also write the report as an HTML page to -o/--out")
    check.add_argument("-o", "--out", metavar="CHECK.html", help="with --html: the page's file")
    check.add_argument("--strict", action="store_true", help="exit 1 when a required rule fails")
    check.set_defaults(handler=_run_from("apps.cli.corpus_check", "cmd_corpus_check"))
    listing = corpus_commands.add_parser("list", help="every registered corpus version and its tier")
    retire = corpus_commands.add_parser("retire",
                                        help=f"rotation: move a corpus version to {_either(RETIRED_TIERS)} (public)")
    promote = corpus_commands.add_parser("promote", help=f"rotation: move a corpus version to {_either(SECRET_TIERS)}")
    sources = corpus_commands.add_parser("sources", help="a corpus version's sources as JSON Lines "
                                                         "{id, source, domain, difficulty}")
    for parser_, handler in ((retire, "cmd_corpus_retire"), (promote, "cmd_corpus_promote"),
                             (sources, "cmd_corpus_sources")):
        parser_.add_argument("corpus_id")
        parser_.add_argument("--version", help="version hash, hash prefix (6+ characters) or number "
                                               "(default: the latest)")
        parser_.set_defaults(handler=_run_from("apps.cli.corpora", handler))
    retire.add_argument("--to", required=True, help=_either(RETIRED_TIERS))
    promote.add_argument("--to", required=True, help=_either(SECRET_TIERS))
    for parser_ in (register, promote):
        parser_.add_argument("--accept-check-failures", metavar="REASON",
                             help=f"enter {_either(SECRET_TIERS)} although the corpus check's gate fails (sizes, "
                                  "provenance); the reason is kept in the tier history")
    register.set_defaults(handler=_run_from("apps.cli.corpora", "cmd_corpus_register"))
    listing.set_defaults(handler=_run_from("apps.cli.corpora", "cmd_corpus_list"))
    for parser_ in (register, listing, retire, promote, sources, check):
        _add_reading_options(parser_, json_help={listing: "JSON instead of a table",
                                                 check: "the report as JSON"}.get(parser_))

    web = commands.add_parser(
        "web", help="the web front: live leaderboards, run and corpus pages, community review",
        examples=("champollion web --store sqlite:///runs.sqlite",
                  "champollion web --host 0.0.0.0 --store postgresql://champollion@db/champollion "
                  "--auth tokens.yaml --secret-file session.key --tls-cert web.pem --tls-key web.key"))
    web.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 in containers)")
    web.add_argument("--port", type=int, default=8080)
    _add_store_options(web, "the run store to read and write review campaigns in", no_store=False)
    web.add_argument("--auth", metavar="TOKENS.yaml",
                     help="visitors sign in with one of these tokens (the gateway's file format; reviewer, "
                          "submitter and maintainer roles); without it every visitor is a maintainer")
    web.add_argument("--insecure-open", action="store_true",
                     help="serve without --auth on a non-loopback address (something else guards it)")
    web.add_argument("--secret-file", metavar="FILE",
                     help="the key that signs session cookies (else $CHAMPOLLION_WEB_SECRET, else a random one: "
                          "sessions end at restart); replicas share it")
    web.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (cookies then Secure)")
    web.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    web.add_argument("--secure-cookie", action="store_true",
                     help="mark cookies Secure (HTTPS ends at a proxy in front of this server)")
    web.add_argument("--max-body-bytes", type=int, default=64 * 1024, metavar="N",
                     help="the most bytes a request's body may have (forms, the rating API); a bigger one is "
                          "refused with 413 before it is read (default 65536)")
    web.add_argument("--log-level", default="INFO")
    web.set_defaults(handler=_run_from("apps.cli.web", "cmd_web"))

    token = commands.add_parser("token", help="API tokens for `serve --auth`")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    new = token_commands.add_parser("new", help="print a fresh random token and its line for the tokens file")
    new.add_argument("--name", required=True, help="who or what will use it (logged on its calls)")
    new.add_argument("--role", required=True, choices=ROLES)
    new.add_argument("--expires", metavar="WHEN", help="ISO-8601 date or time (UTC) after which it is refused")
    new.set_defaults(handler=_run_from("apps.cli.admin", "cmd_token_new"))

    review = commands.add_parser("review", help="maintainers: runs held for review (secret tiers), cleared or "
                                                "disqualified; community review campaigns")
    review_commands = review.add_subparsers(dest="review_command", required=True)
    create = review_commands.add_parser(
        "create", help="a community review campaign over stored runs of one registered corpus version",
        examples=("champollion review create --name 'crk pilot' --run 3f2a9c --run 77b01e "
                  "--reviewers ana,ben,chen --items 200",))
    create.add_argument("--name", required=True, help="what the reviewers see the campaign as")
    create.add_argument("--run", dest="runs", action="append", required=True, metavar="RUN_ID",
                        help="a stored run (id or unique prefix) to review; two or more, one corpus version")
    create.add_argument("--reviewers", required=True,
                        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
                        help="comma-separated names of the reviewers' tokens (the web front's tokens file)")
    create.add_argument("--items", type=int, default=0, help="sources to sample, stratified by difficulty and "
                                                             "domain (default 200)")
    create.add_argument("--overlap", type=int, default=0, help="reviewers per item (default 3)")
    create.add_argument("--seed", type=int, help="the sample's and queues' seed (default 12345)")
    create.add_argument("--reference-review", action="store_true",
                        help="reviewers see the reference after rating an item and may flag it")
    create.add_argument("--protocol", choices=review_protocols.PROTOCOLS, default=review_protocols.DA,
                        help="da: score, optional spans and the usable verdict (default); esa: error span annotation "
                             "as WMT runs it (spans with [MISSING], anchored slider, a gate of tutorial and attention "
                             "items); mqm: the esa page with an MQM category on each span")
    create.add_argument("--prefill", choices=review_protocols.PREFILLS, default=review_protocols.PREFILL_NONE,
                        help="lyss: show the metric families' findings as suggested spans the reviewer accepts, edits "
                             "or rejects (esa and mqm)")
    create.add_argument("--prefill-share", type=float, default=None, metavar="SHARE",
                        help="the share of items shown without suggestions, to measure the bias of pre-filling "
                             f"(default {review_protocols.DEFAULT_PREFILL_SHARE})")
    create.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_create"))
    _add_reading_options(create)
    campaigns = review_commands.add_parser("campaigns", help="review campaigns and their progress")
    campaigns.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_campaigns"))
    _add_reading_options(campaigns)
    results = review_commands.add_parser(
        "results", help="a campaign's results: per-system means with intervals, agreement, rater reliability",
        examples=("champollion review results 5c1e0a9b2d44",
                  "champollion review results 5c1e0a9b2d44 --tsv -o judgments.tsv"))
    results.add_argument("campaign_id")
    results.add_argument("--tsv", action="store_true",
                         help="the judgments in meta-eval's system<TAB>segment<TAB>score format")
    results.add_argument("-o", "--out", help="with --tsv: the file to write (default standard output)")
    results.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_results"))
    _add_reading_options(results)
    _define_review_growth(review_commands)
    held = review_commands.add_parser("list", help="runs held for review, with why and which entries")
    held.add_argument("--dataset", help="only runs on this corpus id")
    for decision in ("clear", "disqualify"):
        decide = review_commands.add_parser(decision, help=f"{decision} a held run")
        if decision == "clear":
            decide.add_argument("run_id", nargs="?", help="the run (or use --pending)")
            decide.add_argument("--pending", action="store_true",
                                help="publish every run held with nothing found (optionally --dataset), oldest first")
            decide.add_argument("--dataset", help="with --pending: only runs on this corpus id")
        else:
            decide.add_argument("run_id")
        decide.add_argument("--note", default="", help="why (kept in the stored run card)")
        decide.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_decide"),
                            decision=decision)
        _add_reading_options(decide, json_help=None)
    held.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_list"))
    _add_reading_options(held)
    return parser


def _define_review_growth(review_commands) -> None:
    """`review export`, `add-reviewers`, `extend` and `audit` (issue 36; docs/community-review.md)."""
    from champollion.core.review_protocols import EXPORT_FORMATS

    export = review_commands.add_parser(
        "export", help="a campaign's ratings in WMT's ESA format (JSON lines; meta-eval --format wmt-esa reads it)",
        examples=("champollion review export 5c1e0a9b2d44 --format wmt-esa -o campaign.esa.jsonl",))
    export.add_argument("campaign_id")
    export.add_argument("--format", dest="export_format", required=True, choices=EXPORT_FORMATS,
                        help="wmt-esa: one rating a line, WMT24's ESA fields (docs/community-review.md)")
    export.add_argument("-o", "--out", help="the file to write (default standard output)")
    export.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_export"))
    _add_reading_options(export, format_flag=False)
    add = review_commands.add_parser(
        "add-reviewers", help="reviewers added to an open campaign; nobody's ratings change",
        examples=("champollion review add-reviewers 5c1e0a9b2d44 dana eli",))
    add.add_argument("campaign_id")
    add.add_argument("reviewers", nargs="+", metavar="NAME", help="a reviewer's token name, new to the campaign")
    add.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_add_reviewers"))
    _add_reading_options(add)
    extend = review_commands.add_parser(
        "extend", help="new items sampled into an open campaign from the same strata; nobody's ratings change",
        examples=("champollion review extend 5c1e0a9b2d44 --items 50",))
    extend.add_argument("campaign_id")
    extend.add_argument("--items", type=int, required=True, help="how many entries to add")
    extend.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_extend"))
    _add_reading_options(extend)
    audit = review_commands.add_parser("audit", help="a campaign's changes since creation: who, when, what")
    audit.add_argument("campaign_id")
    audit.set_defaults(handler=_run_from("apps.cli.review", "cmd_review_audit"))
    _add_reading_options(audit)


def _define_up(up: argparse.ArgumentParser) -> None:
    from apps.launch import local_cluster

    local_cluster.add_arguments(up)


def _define_meta_eval(meta_eval: argparse.ArgumentParser) -> None:
    from apps.meta_eval import METRIC_SEGMENTS
    from apps.meta_eval.wmt import METRIC_DRAWS
    from apps.meta_eval.human_judgments import FORMATS

    meta_eval.add_argument("cards", nargs="*", metavar="CARD_OR_RUN_ID",
                           help="run card JSON files or stored run ids, one per system, of one corpus version "
                                "(with --human campaign:ID, default: the campaign's runs)")
    meta_eval.add_argument("--human", required=True, metavar="FILE|campaign:ID",
                           help="human judgments: a file (see --format), or a community review campaign's "
                                "(its systems' run cards are read when no card is given)")
    meta_eval.add_argument("--format", default="auto", choices=FORMATS,
                           help="system-score: system<TAB>score per segment line; system-segment-score: "
                                "system<TAB>segment<TAB>score; mqm: WMT's MQM average segment scores; "
                                "mqm-errors: MQM error annotations, scored by their weights; wmt-esa: ESA ratings as "
                                "JSON lines (`review export`, WMT24's ESA dump); appraise: an Appraise export (CSV "
                                "or JSON lines), TGT items (default: told from the first line)")
    meta_eval.add_argument("--lower-is-better", action="store_true",
                           help="the human scores are errors or costs: lower is better")
    meta_eval.add_argument("--system", action="append", default=[], metavar="CARD=NAME",
                           help="match this card (as given) to this judged system, or name this --floor card "
                                "(default: its model_slug)")
    meta_eval.add_argument("--floor", nargs="+", action="extend", default=[], metavar="CARD_OR_RUN_ID",
                           help="run cards (or stored run ids) of degenerate systems, on the judged cards' corpus "
                                "version: not judged; each metric reports how many it ranks below every judged "
                                "system (give it after the judged cards)")
    meta_eval.add_argument("--metric-segments", default="all", choices=METRIC_SEGMENTS,
                           help="what a metric's system score covers: all segments of the test set (default, "
                                "WMT's convention) or only those the humans judged")
    meta_eval.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    meta_eval.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                           help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    meta_eval.add_argument("--metric-draws", type=int, default=METRIC_DRAWS, metavar="K",
                           help=f"PERM-BOTH draws per pair of metrics for the significance clusters of SPA, acc_eq "
                                f"and their WMT24 combination (default {METRIC_DRAWS}, as WMT; 0: no clusters)")
    _add_reading_options(meta_eval, format_flag=False)  # its --format is the judgments'


def _add_store_options(parser: argparse.ArgumentParser, purpose: str, no_store: bool = True) -> None:
    parser.add_argument("--store", metavar="URL",
                        help=f"{purpose}: sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DB "
                             "(default: $CHAMPOLLION_STORE, else runs.sqlite in $XDG_DATA_HOME/champollion)")
    if no_store:
        parser.add_argument("--no-store", action="store_true", help="store nothing")


_READING_DAEMON_HELP = "read through a gateway of this process even where a background stack runs over the store"


def _add_daemon_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    """--no-daemon: the command does without background stacks ($CHAMPOLLION_DAEMON=0 for every command)."""
    parser.add_argument("--no-daemon", action="store_true", help=help_text)


def _add_access_options(parser: argparse.ArgumentParser) -> None:
    """How a command reaches --gateway: its token and TLS (an embedded
    gateway is open, on loopback, and needs neither)."""
    parser.add_argument("--token", help=f"API token for --gateway (shown by `ps`: prefer --token-file or "
                                        f"${TOKEN_VARIABLE})")
    parser.add_argument("--token-file", metavar="FILE", help="read the API token from this file's first line")
    parser.add_argument("--insecure-token", action="store_true",
                        help="send the token to a non-loopback --gateway without TLS (a trusted network only)")
    parser.add_argument("--tls-ca", metavar="CA.pem", help="reach --gateway over TLS, trusting this CA certificate")
    parser.add_argument("--tls", action="store_true",
                        help="reach --gateway over TLS, trusting the usual public CAs (no --tls-ca)")


def _add_pairs_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--all-pairs and the flags that go with it (compare, evaluate)."""
    parser.add_argument("--all-pairs", action="store_true", help=what)
    parser.add_argument("--correction", choices=CORRECTIONS, default=None,
                        help="with --all-pairs: the correction of each metric's p-values for its number of pairs: "
                             "holm (Holm's step-down, the default), bh (Benjamini-Hochberg) or none")
    parser.add_argument("--tie-threshold", type=float, metavar="X",
                        help="with --all-pairs: an entry whose two values differ by at most X is a tie in the "
                             "win/tie/loss shares (default 0: only equal values tie)")


def _add_json_flag(parser: argparse.ArgumentParser, what: str, format_flag: bool = True) -> None:
    """`--json` (one name on every command) and sacreBLEU's `-f json|text`
    (not where --format means something else: meta-eval's judgments)."""
    parser.add_argument("--json", action="store_true", help=what)
    if format_flag:
        parser.add_argument("-f", "--format", dest="json", type=_output_format, default=argparse.SUPPRESS,
                            metavar="{text,json}", help="as sacreBLEU's -f: json is --json, text the default")


def _add_reading_options(parser: argparse.ArgumentParser, json_help: str | None = "JSON instead of a table",
                         format_flag: bool = True) -> None:
    """The options of the commands that read stored runs."""
    parser.add_argument("--gateway", help="HOST:PORT of a running gateway (default: an embedded gateway over --store)")
    _add_store_options(parser, "the store to read", no_store=False)
    _add_daemon_flag(parser, _READING_DAEMON_HELP)
    _add_access_options(parser)
    if json_help:
        _add_json_flag(parser, json_help, format_flag)
