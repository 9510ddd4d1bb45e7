"""The command line's grammar: every command, its arguments and flags, and
the function that runs it."""
from __future__ import annotations

import argparse
import importlib

from champollion.apps.cli.common import TOKEN_VARIABLE
from champollion.apps.cli.corpus_check import cmd_corpus_check
from champollion.apps.cli.corpora import (
    cmd_corpus_list,
    cmd_corpus_promote,
    cmd_corpus_register,
    cmd_corpus_retire,
    cmd_corpus_sources,
)
from champollion.apps.cli.scoring import cmd_compare, cmd_describe, cmd_evaluate
from champollion.apps.cli.stored import cmd_leaderboard, cmd_meta_eval, cmd_report, cmd_runs, cmd_show
from champollion.apps.meta_eval.human_judgments import FORMATS
from champollion.apps.launch import local_cluster
from champollion.apps.meta_eval import METRIC_SEGMENTS
from gateway.card.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.compare import METHODS as COMPARE_METHODS
from champollion.core.corpus_rules import PURPOSES
from champollion.core.roles import ROLES

DEFAULT_PORT = 50051
# Rows a leaderboard shows unless --limit says otherwise: the top of a board
# of any size answers in about 0.1 s (bench/leaderboard.py).
DEFAULT_BOARD_ROWS = 100


def _run_from(module: str, name: str):
    """A command handler imported when its command runs: `serve`, `token`
    and `db` need the server side (the stack, the store, the families),
    which no other command should load."""
    def handler(args):
        return getattr(importlib.import_module(module), name)(args)
    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="champollion", description="Score machine-translation runs.")
    commands = parser.add_subparsers(dest="command", required=True)

    evaluate = commands.add_parser("evaluate", help="evaluate a run and print its run card")
    evaluate.add_argument("corpus", nargs="?",
                          help="corpus JSON (object with entries, or a list of entries); not with --corpus-id")
    evaluate.add_argument("predictions", nargs="?", help="predictions, JSON Lines")
    evaluate.add_argument("--src", metavar="SRC.txt",
                          help="plain text instead of CORPUS PREDICTIONS: sources, one segment a line ('-': stdin)")
    evaluate.add_argument("--ref", action="append", metavar="REF.txt",
                          help="with --src: references, one segment a line (repeat for several references)")
    evaluate.add_argument("--hyp", metavar="HYP.txt", help="with --src: the system's translations, one a line")
    evaluate.add_argument("--corpus-id", metavar="ID",
                          help="score against this corpus registered in the gateway's store (server-side: "
                               "send predictions only)")
    evaluate.add_argument("--corpus-version", metavar="V",
                          help="with --corpus-id: its version number or hash (prefix); default the latest")
    evaluate.add_argument("--meta", help="run metadata JSON (model, timings, pricing)")
    evaluate.add_argument("--glossary", help="glossary JSON: list of {source, target, alternatives}")
    evaluate.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    evaluate.add_argument("--out", help="write the run card here instead of stdout")
    evaluate.add_argument("--batch-size", type=int, help="entries per family call")
    evaluate.add_argument("--seed", type=int, help="seed (default 12345, as sacreBLEU)")
    evaluate.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000)")
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
    _add_store_options(evaluate, "store the run card in this store")
    _add_access_options(evaluate)
    evaluate.set_defaults(handler=cmd_evaluate)

    serve = commands.add_parser("serve", help="serve the gateway and families, or the named ones")
    serve.add_argument("--family", action="append", default=[], metavar="NAME",
                       help="serve only this family (repeatable; 'gateway' for the gateway alone)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help="gateway port; with --family, the first named service's port (the next get +1, +2...)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 in containers)")
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
                            "tokens: [{name, role: submitter|maintainer, sha256}] (see `champollion token new`)")
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
    serve.set_defaults(handler=_run_from("champollion.apps.cli.serve", "cmd_serve"))

    compare = commands.add_parser("compare", help="paired significance test (bootstrap or approximate randomization) "
                                     "between two run cards")
    compare.add_argument("baseline", help="run card JSON of the baseline, or a stored run's id")
    compare.add_argument("system", help="run card JSON of the system compared with it, or a stored run's id")
    compare.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded gateway)")
    _add_store_options(compare, "the store the run ids are in", no_store=False)
    compare.add_argument("--seed", type=int, help="seed (default 12345, as sacreBLEU)")
    compare.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000) or randomization trials (default 10000)")
    compare.add_argument("--method", choices=COMPARE_METHODS, default="bs",
                         help="bs: paired bootstrap (default); ar: approximate randomisation (as sacreBLEU's)")
    compare.add_argument("--out", help="write the comparison here instead of stdout")
    _add_access_options(compare)
    compare.set_defaults(handler=cmd_compare)

    up = commands.add_parser("up", help="the distributed topology on this machine: a process per family "
                                        "(two structural replicas) and a gateway in front")
    local_cluster.add_arguments(up)
    up.set_defaults(handler=local_cluster.run)

    describe = commands.add_parser("describe", help="what is loaded: families, metrics, languages")
    describe.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    describe.add_argument("--languages", action="store_true",
                          help="only the languages: every written language card, and how a generic card is built "
                               "for any other language")
    _add_access_options(describe)
    describe.set_defaults(handler=cmd_describe)

    runs = commands.add_parser("runs", help="list stored runs, newest first")
    runs.add_argument("--dataset", help="only runs on this corpus id")
    runs.add_argument("--model", help="only runs of this model slug")
    _add_reading_options(runs)
    runs.set_defaults(handler=cmd_runs)

    show = commands.add_parser("show", help="print a stored run card, entries included")
    show.add_argument("run_id")
    show.add_argument("--out", help="write the run card here instead of stdout")
    _add_reading_options(show, json_flag=False)
    show.set_defaults(handler=cmd_show)

    meta_eval = commands.add_parser("meta-eval", help="how well each metric of a set of run cards agrees with "
                                                      "human judgments of the same systems")
    meta_eval.add_argument("cards", nargs="+", metavar="CARD_OR_RUN_ID",
                           help="run card JSON files or stored run ids, one per system, of one corpus version")
    meta_eval.add_argument("--human", required=True, metavar="FILE", help="human judgments (see --format)")
    meta_eval.add_argument("--format", default="auto", choices=FORMATS,
                           help="system-score: system<TAB>score per segment line; system-segment-score: "
                                "system<TAB>segment<TAB>score; mqm: WMT's MQM average segment scores "
                                "(default: told from the first line)")
    meta_eval.add_argument("--lower-is-better", action="store_true",
                           help="the human scores are errors or costs: lower is better")
    meta_eval.add_argument("--system", action="append", default=[], metavar="CARD=NAME",
                           help="match this card (as given) to this judged system (default: its model_slug)")
    meta_eval.add_argument("--metric-segments", default="all", choices=METRIC_SEGMENTS,
                           help="what a metric's system score covers: all segments of the test set (default, "
                                "WMT's convention) or only those the humans judged")
    meta_eval.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    meta_eval.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                           help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    _add_reading_options(meta_eval)
    meta_eval.set_defaults(handler=cmd_meta_eval)

    leaderboard = commands.add_parser("leaderboard", help="stored runs of one corpus version, ranked")
    leaderboard.add_argument("--dataset", required=True, help="corpus id")
    leaderboard.add_argument("--version", help="corpus version (default: the latest stored one)")
    leaderboard.add_argument("--sort", default="composite_score",
                             help="a spec §9.1 numeric column or cost_adjusted (default composite_score)")
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
    leaderboard.set_defaults(handler=cmd_leaderboard)

    report = commands.add_parser("report", help="an HTML report of one or several run cards")
    report.add_argument("cards", nargs="+", metavar="CARD_OR_RUN_ID",
                        help="run card JSON files or stored run ids")
    report.add_argument("-o", "--out", required=True, metavar="REPORT.html", help="the report's file")
    report.add_argument("--corpus", metavar="CORPUS", help="the runs' corpus file: sources, references and "
                        "domains for the worst entries and the by-domain breakdown (cards do not carry texts)")
    report.add_argument("--predictions", metavar="PREDICTIONS", action="append", default=[],
                        help="a run's predictions file, once per card in the same order: its outputs and latencies")
    report.add_argument("--src", metavar="SRC.txt", help="plain text instead of --corpus: the sources, one "
                        "segment a line, line N being entry line-N as `evaluate --src` reads it ('-': stdin)")
    report.add_argument("--ref", action="append", default=[], metavar="REF.txt",
                        help="plain text: references, one a line (the first is shown)")
    report.add_argument("--hyp", action="append", default=[], metavar="HYP.txt",
                        help="plain text instead of --predictions: a run's translations, one a line, once per card "
                             "in the same order")
    _add_reading_options(report, json_flag=False)
    report.set_defaults(handler=cmd_report)

    db = commands.add_parser("db", help="store maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply the store's pending migrations")
    _add_store_options(upgrade, "the store to upgrade", no_store=False)
    upgrade.set_defaults(handler=_run_from("champollion.apps.cli.admin", "cmd_db_upgrade"))

    corpus = commands.add_parser("corpus", help="registered corpora: register, list, retire, promote, sources; "
                                                 "check (any corpus)")
    corpus_commands = corpus.add_subparsers(dest="corpus_command", required=True)
    register = corpus_commands.add_parser("register", help="register a corpus (a new version of it with "
                                                           "--new-version) with its secrecy tier")
    register.add_argument("corpus", help="corpus JSON (object with id, languages and entries)")
    register.add_argument("--tier", required=True, help="dev (public), holdout (references private) or "
                                                        "gold (fully private)")
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
    check.set_defaults(handler=cmd_corpus_check)
    listing = corpus_commands.add_parser("list", help="every registered corpus version and its tier")
    retire = corpus_commands.add_parser("retire", help="rotation: move a corpus version to dev (public)")
    promote = corpus_commands.add_parser("promote", help="rotation: move a corpus version to holdout or gold")
    sources = corpus_commands.add_parser("sources", help="a corpus version's sources as JSON Lines "
                                                         "{id, source, domain, difficulty}")
    for parser_, handler in ((retire, cmd_corpus_retire), (promote, cmd_corpus_promote),
                             (sources, cmd_corpus_sources)):
        parser_.add_argument("corpus_id")
        parser_.add_argument("--version", help="version hash, hash prefix (8+ characters) or number "
                                               "(default: the latest)")
        parser_.set_defaults(handler=handler)
    retire.add_argument("--to", required=True, help="dev")
    promote.add_argument("--to", required=True, help="holdout or gold")
    for parser_ in (register, promote):
        parser_.add_argument("--accept-check-failures", metavar="REASON",
                             help="enter holdout or gold although the corpus check's gate fails (sizes, "
                                  "provenance); the reason is kept in the tier history")
    register.set_defaults(handler=cmd_corpus_register)
    listing.set_defaults(handler=cmd_corpus_list)
    for parser_ in (register, listing, retire, promote, sources, check):
        _add_reading_options(parser_, json_flag=parser_ in (listing, check))

    token = commands.add_parser("token", help="API tokens for `serve --auth`")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    new = token_commands.add_parser("new", help="print a fresh random token and its line for the tokens file")
    new.add_argument("--name", required=True, help="who or what will use it (logged on its calls)")
    new.add_argument("--role", required=True, choices=ROLES)
    new.add_argument("--expires", metavar="WHEN", help="ISO-8601 date or time (UTC) after which it is refused")
    new.set_defaults(handler=_run_from("champollion.apps.cli.admin", "cmd_token_new"))

    review = commands.add_parser("review", help="maintainers: runs held for review (secret tiers), cleared or "
                                                "disqualified")
    review_commands = review.add_subparsers(dest="review_command", required=True)
    held = review_commands.add_parser("list", help="runs held for review, with why and which entries")
    held.add_argument("--dataset", help="only runs on this corpus id")
    for decision in ("clear", "disqualify"):
        decide = review_commands.add_parser(decision, help=f"{decision} a held run")
        decide.add_argument("run_id")
        decide.add_argument("--note", default="", help="why (kept in the stored run card)")
        decide.set_defaults(handler=_run_from("champollion.apps.cli.review", "cmd_review_decide"),
                            decision=decision)
        _add_reading_options(decide, json_flag=False)
    held.set_defaults(handler=_run_from("champollion.apps.cli.review", "cmd_review_list"))
    _add_reading_options(held)
    return parser


def _add_store_options(parser: argparse.ArgumentParser, purpose: str, no_store: bool = True) -> None:
    parser.add_argument("--store", metavar="URL",
                        help=f"{purpose}: sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DB "
                             "(default: $CHAMPOLLION_STORE, else runs.sqlite in $XDG_DATA_HOME/champollion)")
    if no_store:
        parser.add_argument("--no-store", action="store_true", help="store nothing")


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


def _add_reading_options(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
    """The options of the commands that read stored runs."""
    parser.add_argument("--gateway", help="HOST:PORT of a running gateway (default: an embedded gateway over --store)")
    _add_store_options(parser, "the store to read", no_store=False)
    _add_access_options(parser)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="JSON instead of a table")
