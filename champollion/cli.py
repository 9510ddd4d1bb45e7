"""The `champollion` command: evaluate, serve, compare, describe, and the
stored runs (runs, show, leaderboard, db upgrade)."""
from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import sys
import threading
from contextlib import nullcontext
from pathlib import Path

import grpc
from google.protobuf import json_format
from tabulate import tabulate
from tqdm import tqdm

from champollion import logs
from champollion.channel import ChannelError, check_token, is_untrusted_certificate, open_channel
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from champollion.human_judgments import FORMATS, JudgmentError, read_judgments
from champollion.inputs import (
    INT32,
    INT64,
    InputError,
    build_request,
    in_corpus_order,
    load_corpus,
    load_glossary,
    load_meta,
    load_predictions,
    load_run_card,
    load_run_card_for_compare,
    locate_invalid,
)
from champollion.launch import local_cluster
from champollion.launch.embedded import EmbeddedStack, start_family, start_gateway, start_stack
from champollion.meta_eval import (
    METRIC_SEGMENTS,
    TABLE_HEADERS,
    MetaEvalError,
    match_systems,
    meta_evaluate,
    table_rows,
)
from champollion.serving import ServerTls, TlsError
from champollion.upload import collect_run_card, compare_parts, corpus_parts, request_parts
from gateway.card.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from gateway.card.run_card import message_to_dict
from gateway.server.config import ConfigError, GatewayConfig, load_config
from gateway.server.tokens import ROLES, TokenFile, new_token, token_line
from gateway.server.validation import MAX_RESAMPLES, shown
from gateway.store import RunStore, StoreError, default_store_url
from gateway.store.columns import SPEC_COLUMNS
from gateway.store.location import parse_store_url, redact
from services.registry import IMPLEMENTED

EXIT_INVALID_INPUT = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
DEFAULT_PORT = 50051
# Rows a leaderboard shows unless --limit says otherwise: the top of a board
# of any size answers in about 0.1 s (bench/leaderboard.py).
DEFAULT_BOARD_ROWS = 100
TOKEN_VARIABLE = "CHAMPOLLION_TOKEN"


class CliError(Exception):
    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def _gateway_or_embedded(address: str | None, **options):
    """A context yielding a gateway address: the given one, or an embedded stack's."""
    if address:
        return nullcontext(address)

    class _Embedded:
        def __enter__(self):
            self._stack = EmbeddedStack(**options)
            return self._stack.__enter__().gateway_address

        def __exit__(self, *exc_info):
            self._stack.__exit__(*exc_info)

    return _Embedded()


def _store_url(args, configured: str | None = None) -> str | None:
    """The run store of a gateway this command starts: none with --no-store,
    else --store, else the gateway config's, else the default
    ($CHAMPOLLION_STORE, or runs.sqlite in the XDG data folder). A corrupt
    URL is a bad argument."""
    if getattr(args, "no_store", False):
        return None
    url = args.store or configured or default_store_url()
    try:
        parse_store_url(url)
    except StoreError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    return url


def _embedded_store_url(args) -> str | None:
    """The store of the embedded gateway; none with --gateway, whose gateway
    stores in its own."""
    if args.gateway:
        if args.store or getattr(args, "no_store", False):
            raise CliError(f"--store and --no-store choose the embedded gateway's store; the gateway at "
                           f"{args.gateway} uses its own", EXIT_INVALID_INPUT)
        return None
    return _store_url(args)


def _connect(args, address: str) -> grpc.Channel:
    """The channel every command talks to a gateway through: to --gateway
    with the token (--token, else $CHAMPOLLION_TOKEN) and TLS (--tls-ca,
    --tls) given; to an embedded gateway (open, loopback, plaintext) without."""
    if not args.gateway:
        return open_channel(address)
    token, source = (args.token, "--token") if args.token else (os.environ.get(TOKEN_VARIABLE), TOKEN_VARIABLE)
    try:
        return open_channel(address, check_token(token, source) if token else None,
                            tls_ca=Path(args.tls_ca) if args.tls_ca else None, tls=args.tls)
    except ChannelError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None


def _gateway_failure(error: grpc.RpcError, address: str) -> CliError:
    """A failed call as one line; exit 1. Refused access (UNAUTHENTICATED,
    PERMISSION_DENIED) is such a failure too: the input may be fine."""
    if is_untrusted_certificate(error):
        return CliError(f"gateway at {address}: its TLS certificate is not trusted (give --tls-ca with the CA "
                        f"certificate that signed it)", EXIT_FAILURE)
    details = error.details()
    if error.code() == grpc.StatusCode.UNAVAILABLE and "socket closed" in (details or "").lower():
        details += " (if the gateway serves TLS, give --tls-ca or --tls)"
    return CliError(f"gateway at {address}: {error.code().name}: {details}", EXIT_FAILURE)


def _rpc_failure(error: grpc.RpcError, address: str) -> CliError:
    """A gateway's refusal as the command's error: bad arguments (an unknown
    run id or sort column, cards that cannot be compared) exit 2, the rest 1."""
    if error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                        grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ALREADY_EXISTS):
        return CliError(error.details(), EXIT_INVALID_INPUT)
    return _gateway_failure(error, address)


def _ask_gateway(args, ask, store: bool = True):
    """`ask(stub)` against --gateway, or else an embedded gateway without
    families (reading stored runs or comparing cards scores no text), over
    the store unless `store` is false."""
    url = _embedded_store_url(args) if store else None
    with _gateway_or_embedded(args.gateway, families=(), store=url) as address:
        with _connect(args, address) as channel:
            try:
                return ask(gateway_pb2_grpc.GatewayStub(channel))
            except grpc.RpcError as error:
                raise _rpc_failure(error, address) from None
            except ValueError as error:  # a stream that ended early
                raise CliError(str(error), EXIT_FAILURE) from None


def _stream_evaluation(channel: grpc.Channel, request: gateway_pb2.EvaluateRequest) -> dict:
    stub = gateway_pb2_grpc.GatewayStub(channel)
    # Shown only on a terminal (disable=None), and only once scoring has run
    # for more than a moment: logs and pipes get the error line alone.
    bar = tqdm(unit="call", file=sys.stderr, delay=0.5, desc="scoring", leave=False, disable=None)

    def show(update) -> None:
        _raise_if_interrupted()
        bar.total = update.batches_total
        bar.update(update.batches_done - bar.n)
        if update.slow_families:
            bar.set_postfix_str("slow: " + ", ".join(update.slow_families), refresh=False)

    try:
        # Sent in parts, so that a run larger than one gRPC message fits.
        return collect_run_card(stub.EvaluateUpload(request_parts(request)), show)
    except ValueError as error:
        raise CliError(str(error), EXIT_FAILURE) from None
    finally:
        bar.close()


def _corpus_path(args) -> Path | None:
    """CORPUS; None with --corpus-id (a corpus registered in the gateway's store)."""
    if not args.corpus_id:
        if args.corpus_version:
            raise CliError("--corpus-version needs --corpus-id", EXIT_INVALID_INPUT)
        if not args.corpus:
            raise CliError("evaluate needs CORPUS PREDICTIONS, or --corpus-id ID PREDICTIONS", EXIT_INVALID_INPUT)
        return Path(args.corpus)
    given = [name for name, value in (("CORPUS", args.corpus), ("--source-lang", args.source_lang),
                                      ("--target-lang", args.target_lang)) if value]
    if given:
        raise CliError(f"{given[0]} with --corpus-id: the registered corpus's entries and languages are used",
                       EXIT_INVALID_INPUT)
    return None


def _check_run_options(args) -> None:
    """--seed, --resamples, --batch-size within what the gateway takes (and
    the protobuf fields hold), refused by flag name before anything is read."""
    for flag, value, high in (("--seed", args.seed, INT64[1]), ("--resamples", args.resamples, MAX_RESAMPLES),
                              ("--batch-size", getattr(args, "batch_size", None), INT32[1])):
        if value is not None and not 0 <= value <= high:
            raise CliError(f"{flag}: must be a whole number from 0 to {high}, got {shown(value)}", EXIT_INVALID_INPUT)


def cmd_evaluate(args) -> int:
    _check_run_options(args)
    corpus_path, predictions_path = _corpus_path(args), Path(args.predictions)
    meta_path = Path(args.meta) if args.meta else None
    glossary_path = Path(args.glossary) if args.glossary else None
    try:
        if corpus_path is None:  # scored server-side: predictions only
            corpus = gateway_pb2.CorpusRef(id=args.corpus_id, version=args.corpus_version or "")
            predictions = load_predictions(predictions_path)
        else:
            corpus = load_corpus(corpus_path, args.source_lang, args.target_lang)
            predictions = in_corpus_order(load_predictions(predictions_path), corpus)
        meta = load_meta(meta_path) if meta_path else None
        glossary = load_glossary(glossary_path) if glossary_path else None
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    request = build_request(corpus, predictions, meta, glossary, args.batch_size or 0, args.seed, args.resamples or 0)
    request.options.disable_plugins = args.no_plugins
    if args.comet_model:
        request.meta.comet_model = args.comet_model
    with _gateway_or_embedded(args.gateway, store=_embedded_store_url(args)) as address:
        try:
            with _connect(args, address) as channel:
                card = _stream_evaluation(channel, request)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                message = locate_invalid(error.details(), corpus_path, predictions, meta_path, glossary_path)
                raise CliError(message, EXIT_INVALID_INPUT) from None
            raise _rpc_failure(error, address) from None  # an unknown corpus id or version: exit 2
    _write_json(card, args.out)
    return 0


def cmd_compare(args) -> int:
    _check_run_options(args)
    request = gateway_pb2.CompareRequest(resamples=args.resamples or 0)
    if args.seed is not None:
        request.seed = args.seed
    for side, text in (("baseline", args.baseline), ("system", args.system)):
        # A run card file, or else the id of a stored run.
        if Path(text).is_file():
            try:
                getattr(request, side).CopyFrom(load_run_card_for_compare(Path(text)))
            except InputError as error:
                raise CliError(str(error), EXIT_INVALID_INPUT) from None
        else:
            setattr(request, f"{side}_run_id", text)
    # Sent in parts, so that run cards larger than one gRPC message fit.
    response = _ask_gateway(args, lambda stub: stub.CompareUpload(compare_parts(request), timeout=600),
                            store=bool(request.baseline_run_id or request.system_run_id))
    _write_json(message_to_dict(response), args.out)
    return 0


def cmd_runs(args) -> int:
    request = gateway_pb2.ListRunsRequest(dataset_id=args.dataset, model_slug=args.model)
    runs = [_plain(run) for run in _ask_gateway(args, lambda stub: stub.ListRuns(request, timeout=60)).runs]
    if args.json:
        _write_json(runs, None)
    else:
        print(tabulate(
            [[run["run_id"], run["created_at"], run["dataset_id"], run["model_slug"], run["condition"],
              _number(run["composite_score"]), run["quality_tier"]] for run in runs],
            headers=["run_id", "created_at", "dataset", "model", "condition", "composite", "tier"],
        ))
    return 0


def cmd_show(args) -> int:
    card = _ask_gateway(args, lambda stub: collect_run_card(stub.GetRun(
        gateway_pb2.GetRunRequest(run_id=args.run_id), timeout=600)))
    _write_json(card, args.out)
    return 0


def cmd_meta_eval(args) -> int:
    """Agreement of each metric of the given run cards with human judgments
    (champollion/meta_eval.py)."""
    if args.resamples < 0:
        raise CliError("--resamples: must be 0 (no intervals) or more", EXIT_INVALID_INPUT)
    names = {}
    for pair in args.system:
        card, _, name = pair.partition("=")
        if not card or not name:
            raise CliError(f"--system: expected CARD=NAME, got {pair!r}", EXIT_INVALID_INPUT)
        names[card] = name
    try:
        judgments = read_judgments(Path(args.human), args.format)
        # A run card file, or else the id of a stored run.
        files = {text: load_run_card(Path(text)) for text in args.cards if Path(text).is_file()}
        run_ids = [text for text in args.cards if text not in files]
        stored = _ask_gateway(args, lambda stub: [collect_run_card(stub.GetRun(
            gateway_pb2.GetRunRequest(run_id=run_id), timeout=600)) for run_id in run_ids]) if run_ids else []
        cards = {**files, **dict(zip(run_ids, stored))}
        runs = match_systems([(text, cards[text]) for text in args.cards], judgments, names)
        report = meta_evaluate(runs, judgments, args.lower_is_better, args.resamples, args.seed, args.metric_segments)
    except (InputError, JudgmentError, MetaEvalError) as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    if args.json:
        _write_json(report, None)
        return 0
    segments = report["segments"]
    print(f"{len(runs)} systems; human scores over {segments['used']} of {segments['total']} segments (those "
          f"judged for every system), metric scores over {segments['metric_segments']} segments; 95% bootstrap "
          f"intervals over segments ({args.resamples} resamples, seed {args.seed}); "
          f"segment Kendall: {report['segment_kendall']}")
    print(tabulate(table_rows(report), headers=TABLE_HEADERS, disable_numparse=True))
    return 0


def cmd_leaderboard(args) -> int:
    if args.limit < 0:
        raise CliError("--limit: must be 0 (every row) or a positive number", EXIT_INVALID_INPUT)
    request = gateway_pb2.LeaderboardRequest(
        dataset_id=args.dataset, version=args.version, sort=args.sort, ascending=args.ascending,
        all_submissions=args.all_submissions, include_disqualified=args.include_disqualified,
        official=args.official, limit=args.limit,
    )
    board = _ask_gateway(args, lambda stub: stub.Leaderboard(request, timeout=60))
    rows = [_plain(row) for row in board.rows]
    if args.json:
        _write_json(rows, None)
        return 0
    order = "lowest" if args.ascending else "highest"
    print(f"{board.dataset_id}, corpus version {board.corpus_version[:12]}, by {board.sort} ({order} first)")
    print(tabulate(
        [[row["rank"], row["model_slug"], _number(row["composite_score"]), _number(row["chrf_plus_plus"]),
          _number(row["cost_per_entry_usd"]), _number(row["cost_adjusted"]), ", ".join(_flags(row))]
         for row in rows],
        headers=["rank", "model", "composite", "chrF++", "cost/entry", "cost_adjusted", "flags"],
        disable_numparse=True,
    ))
    if args.limit and len(rows) == args.limit:
        print(f"(the first {args.limit} rows; --limit 0 for all)")
    return 0


def _flags(row: dict) -> list[str]:
    flags = []
    if row.get("cherry_pick_suspect"):
        flags.append(f"cherry-pick suspect ({row['submissions_with_fingerprint']} submissions)")
    if not row.get("comparable", True):
        flags.append("not comparable")
    if row.get("disqualified"):
        flags.append("disqualified")
    return flags


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


# A stored run's fields in print order (a Struct keeps none): rank and id,
# then spec §9.1's columns in the spec's order, then the rest alphabetically.
_FIELD_ORDER = {name: index for index, name in enumerate(("rank", "run_id", *(c.name for c in SPEC_COLUMNS)))}


def _plain(struct) -> dict:
    """A store row sent as a Struct, as a dict in print order. Struct numbers
    are doubles: whole ones (ranks, counts) are written as integers."""
    def plain(value):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    row = plain(json_format.MessageToDict(struct))
    return dict(sorted(row.items(), key=lambda item: (_FIELD_ORDER.get(item[0], len(_FIELD_ORDER)), item[0])))


def cmd_token_new(args) -> int:
    """A token for the caller to hand out (stdout, first line) and the line
    for the gateway's tokens file: nobody hashes by hand."""
    if not args.name.strip():
        raise CliError("--name: required, a non-empty name", EXIT_INVALID_INPUT)
    token = new_token()
    print(token)
    print("# the token above, for its user (shown once); the line below, under `tokens:` in the file of "
          "`serve --auth` (it keeps only the hash):", file=sys.stderr)
    print(f"  {token_line(args.name, args.role, token)}")
    return 0


def _print_corpus(info: gateway_pb2.CorpusInfo, note: str) -> None:
    """A corpus version as `corpus register/retire/promote` print it."""
    print(tabulate([["id", info.id], ["version", info.version], ["number", info.number],
                    ["tier", f"{info.tier} (since {info.tier_since})"], ["entries", info.entries]],
                   tablefmt="plain", disable_numparse=True))
    print(note, file=sys.stderr)


def cmd_corpus_register(args) -> int:
    path = Path(args.corpus)
    try:
        corpus = load_corpus(path)
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    try:
        info = _ask_gateway(args, lambda stub: stub.RegisterCorpus(
            corpus_parts(corpus, args.tier, args.new_version), timeout=600))
    except CliError as error:
        if error.exit_code == EXIT_INVALID_INPUT and str(error).startswith("corpus."):
            raise CliError(f"{path}: {error}", EXIT_INVALID_INPUT) from None  # the field is the file's
        raise
    _print_corpus(info, f"registered as version {info.number}" if info.created else
                  f"already registered with this content as version {info.number}; its tier is unchanged")
    return 0


def _set_corpus_tier(args, allowed: tuple[str, ...], command: str) -> int:
    if args.to not in allowed:
        other = "retire" if args.to == "dev" else "promote"
        raise CliError(f"--to: `corpus {command}` moves a corpus to {' or '.join(allowed)}; "
                       f"to move it to {args.to!r} use `corpus {other}`", EXIT_INVALID_INPUT)
    request = gateway_pb2.SetCorpusTierRequest(corpus_id=args.corpus_id, version=args.version or "", tier=args.to)
    info = _ask_gateway(args, lambda stub: stub.SetCorpusTier(request, timeout=60))
    _print_corpus(info, f"corpus {info.id} version {info.number} is {info.tier} since {info.tier_since}")
    return 0


def cmd_corpus_retire(args) -> int:
    # Rotation (seed 001 §5.3): a retired holdout becomes public, a dev set.
    return _set_corpus_tier(args, ("dev",), "retire")


def cmd_corpus_promote(args) -> int:
    return _set_corpus_tier(args, ("holdout", "gold"), "promote")


def cmd_corpus_list(args) -> int:
    corpora = _ask_gateway(args, lambda stub: stub.ListCorpora(gateway_pb2.ListCorporaRequest(), timeout=60)).corpora
    if args.json:
        # `created` is RegisterCorpus's answer, nothing a listed version has.
        _write_json([{key: value for key, value in message_to_dict(info).items() if key != "created"}
                     for info in corpora], None)
        return 0
    print(tabulate(
        [[info.id, info.number, info.version[:12], info.tier, info.tier_since, info.entries,
          f"{info.source_lang}-{info.target_lang}", info.created_at] for info in corpora],
        headers=["id", "number", "version", "tier", "tier since", "entries", "languages", "registered"],
        disable_numparse=True,
    ))
    return 0


def cmd_corpus_sources(args) -> int:
    """JSON Lines {id, source, domain, difficulty} on stdout, as they arrive."""
    request = gateway_pb2.GetSourcesRequest(corpus_id=args.corpus_id, version=args.version or "")

    def write(parts) -> None:
        for part in parts:
            if part.HasField("corpus"):
                print(f"corpus {part.corpus.id} version {part.corpus.number} ({part.corpus.version[:12]}), "
                      f"{part.corpus.tier}: {part.corpus.entries} entries", file=sys.stderr)
            for entry in part.entries:
                line = {"id": entry.id, "source": entry.source, "domain": entry.domain or None,
                        "difficulty": entry.difficulty if entry.HasField("difficulty") else None}
                print(json.dumps(line, ensure_ascii=False))

    _ask_gateway(args, lambda stub: write(stub.GetSources(request, timeout=600)))
    return 0


def cmd_db_upgrade(args) -> int:
    url = _store_url(args)
    try:
        store = RunStore.open(url)  # opening migrates; upgrade says so explicitly
        try:
            store.upgrade()
        finally:
            store.close()
    except StoreError as error:
        raise CliError(str(error), EXIT_FAILURE) from None
    print(f"store {redact(parse_store_url(url))} is at the latest schema", file=sys.stderr)
    return 0


def _write_json(data: dict, out: str | None) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)


def cmd_describe(args) -> int:
    with _gateway_or_embedded(args.gateway) as address:
        with _connect(args, address) as channel:
            try:
                description = gateway_pb2_grpc.GatewayStub(channel).Describe(
                    family_pb2.DescribeRequest(), timeout=30
                )
            except grpc.RpcError as error:
                raise _gateway_failure(error, address) from None
    print(json.dumps(message_to_dict(description), ensure_ascii=False, indent=2))
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _server_access(args) -> tuple[TokenFile | None, ServerTls | None]:
    """`serve`'s tokens file and TLS certificate, checked before anything
    starts. A gateway without --auth is open to anyone who reaches it, so it
    binds loopback only unless --insecure-open says otherwise."""
    serves_gateway = not args.family or "gateway" in args.family
    if args.auth and not serves_gateway:
        raise CliError("--auth applies to the gateway (serve it alone or with --family gateway)", EXIT_INVALID_INPUT)
    if serves_gateway and not args.auth and not args.insecure_open and not _is_loopback(args.host):
        raise CliError(f"refusing to serve an open gateway on {args.host}: without --auth anyone who reaches it may "
                       f"evaluate, read every stored run and register corpora; give --auth TOKENS.yaml, or "
                       f"--insecure-open if something else (a network policy, an authenticating proxy) guards it",
                       EXIT_INVALID_INPUT)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together: the certificate and its private key", EXIT_INVALID_INPUT)
    if args.health_port is not None and not args.family:
        raise CliError("--health-port applies to the services named with --family", EXIT_INVALID_INPUT)
    tls = ServerTls(Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None
    try:
        if tls is not None:
            tls.credentials()
        return (TokenFile.load(args.auth) if args.auth else None), tls
    except TlsError as error:
        raise CliError(f"--tls-cert/--tls-key: {error}", EXIT_INVALID_INPUT) from None
    except ConfigError as error:
        raise CliError(f"--auth {error}", EXIT_INVALID_INPUT) from None


async def _serve(args) -> None:
    tokens, tls = _server_access(args)  # checked before anything starts
    servers = []
    host = args.host
    # What the command line says about families goes to every family served
    # (each factory takes what it uses: structural languages, semantic device...).
    options = {key: value for key, value in (("languages", args.languages), ("device", args.device),
                                             ("comet_dir", args.comet_dir)) if value}
    if not args.family:
        config = load_config(args.config) if args.config else None
        stack = await start_stack(host=host, gateway_port=args.port, store=_store_url(args), family_options=options,
                                  tokens=tokens, tls=tls)
        if config is not None:
            raise CliError("--config applies to `serve --family gateway`", EXIT_INVALID_INPUT)
        servers = stack.servers
        print(json.dumps({"gateway": stack.gateway_address, "families": stack.family_addresses}), file=sys.stderr)
    else:
        for offset, name in enumerate(args.family):
            address = f"{host}:{args.port + offset}"
            health = f"{host}:{args.health_port + offset}" if args.health_port is not None else None
            if name == "gateway":
                config = load_config(args.config) if args.config else GatewayConfig()
                config.store = _store_url(args, config.store)
                server, port, _ = await start_gateway(config, address, tokens, tls, health)
            else:
                server, port = await start_family(name, address, tls=tls, health_address=health, **options)
            servers.append(server)
            print(json.dumps({"serving": name, "address": f"{host}:{port}"}), file=sys.stderr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    for server in servers:
        # Long enough for a batch in flight to finish on a scale-down or rollout
        # (the Kubernetes manifests allow 30 s to shut down).
        await server.stop(grace=25.0)


def cmd_serve(args) -> int:
    unknown = [name for name in args.family if name != "gateway" and name not in IMPLEMENTED]
    if unknown:
        known = ", ".join(["gateway", *IMPLEMENTED])
        raise CliError(f"unknown family: {', '.join(unknown)}; available: {known}", EXIT_INVALID_INPUT)
    logs.configure(args.log_level)
    try:
        asyncio.run(_serve(args))
    except ConfigError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="champollion", description="Score machine-translation runs.")
    commands = parser.add_subparsers(dest="command", required=True)

    evaluate = commands.add_parser("evaluate", help="evaluate a run and print its run card")
    evaluate.add_argument("corpus", nargs="?",
                          help="corpus JSON (object with entries, or a list of entries); not with --corpus-id")
    evaluate.add_argument("predictions", help="predictions, JSON Lines")
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
    evaluate.add_argument("--seed", type=int, help="bootstrap seed (default 12345, as sacreBLEU)")
    evaluate.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000)")
    evaluate.add_argument("--comet-model", help="COMET model id for this run, instead of the card's choice")
    evaluate.add_argument("--no-plugins", action="store_true",
                          help="universal metrics only: leave the target language's eval-standard plugins out")
    evaluate.add_argument("--source-lang", help="source language (for a bare list of entries)")
    evaluate.add_argument("--target-lang", help="target language (for a bare list of entries)")
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
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--auth", metavar="TOKENS.yaml",
                       help="the gateway asks every call for one of these tokens: "
                            "tokens: [{name, role: submitter|maintainer, sha256}] (see `champollion token new`)")
    serve.add_argument("--insecure-open", action="store_true",
                       help="serve a gateway without --auth on a non-loopback --host (anyone reaching it may do anything)")
    serve.add_argument("--tls-cert", metavar="CERT.pem", help="serve over TLS with this certificate (chain, PEM)")
    serve.add_argument("--tls-key", metavar="KEY.pem", help="the private key of --tls-cert (PEM)")
    serve.add_argument("--health-port", type=int, metavar="N",
                       help="with --family, also answer health checks only, in plaintext, on this port "
                            "(+1, +2... as --port): for probes that speak no TLS")
    _add_store_options(serve, "the gateway stores every run card here (before the default: --config's store)")
    serve.set_defaults(handler=cmd_serve)

    compare = commands.add_parser("compare", help="paired bootstrap significance between two run cards")
    compare.add_argument("baseline", help="run card JSON of the baseline, or a stored run's id")
    compare.add_argument("system", help="run card JSON of the system compared with it, or a stored run's id")
    compare.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded gateway)")
    _add_store_options(compare, "the store the run ids are in", no_store=False)
    compare.add_argument("--seed", type=int, help="bootstrap seed (default 12345, as sacreBLEU)")
    compare.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000)")
    compare.add_argument("--out", help="write the comparison here instead of stdout")
    _add_access_options(compare)
    compare.set_defaults(handler=cmd_compare)

    up = commands.add_parser("up", help="the distributed topology on this machine: a process per family "
                                        "(two structural replicas) and a gateway in front")
    local_cluster.add_arguments(up)
    up.set_defaults(handler=local_cluster.run)

    describe = commands.add_parser("describe", help="what is loaded: families, metrics, languages")
    describe.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
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
    _add_reading_options(leaderboard)
    leaderboard.set_defaults(handler=cmd_leaderboard)

    db = commands.add_parser("db", help="store maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply the store's pending migrations")
    _add_store_options(upgrade, "the store to upgrade", no_store=False)
    upgrade.set_defaults(handler=cmd_db_upgrade)

    corpus = commands.add_parser("corpus", help="registered corpora: register, list, retire, promote, sources")
    corpus_commands = corpus.add_subparsers(dest="corpus_command", required=True)
    register = corpus_commands.add_parser("register", help="register a corpus (a new version of it with "
                                                           "--new-version) with its secrecy tier")
    register.add_argument("corpus", help="corpus JSON (object with id, languages and entries)")
    register.add_argument("--tier", required=True, help="dev (public), holdout (references private) or "
                                                        "gold (fully private)")
    register.add_argument("--new-version", action="store_true",
                          help="record content that differs from the registered versions as the next version")
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
    register.set_defaults(handler=cmd_corpus_register)
    listing.set_defaults(handler=cmd_corpus_list)
    for parser_ in (register, listing, retire, promote, sources):
        _add_reading_options(parser_, json_flag=parser_ is listing)

    token = commands.add_parser("token", help="API tokens for `serve --auth`")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    new = token_commands.add_parser("new", help="print a fresh random token and its line for the tokens file")
    new.add_argument("--name", required=True, help="who or what will use it (logged on its calls)")
    new.add_argument("--role", required=True, choices=ROLES)
    new.set_defaults(handler=cmd_token_new)
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
    parser.add_argument("--token", help=f"API token for --gateway (default: ${TOKEN_VARIABLE})")
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


# Set by Ctrl-C. Python raises KeyboardInterrupt in whatever code runs at
# that moment, and code that swallows every exception (gRPC's channel
# finalizer, any __del__) can lose it: the flag is checked again at each
# progress update and once the command is done.
_INTERRUPTED = threading.Event()


def _on_interrupt(signum, frame) -> None:
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _raise_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def _run(args) -> int:
    """The command; a client command's Ctrl-C is noted even where its
    KeyboardInterrupt is lost (`serve` and `up` stop on Ctrl-C their own way)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    if args.command in ("serve", "up") or not in_main_thread:
        return args.handler(args)
    previous = signal.signal(signal.SIGINT, _on_interrupt)
    _INTERRUPTED.clear()
    try:
        code = args.handler(args)
        _raise_if_interrupted()
        return code
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("serve", "up"):
        # Service logs would clutter a command's output; only problems show.
        logs.configure("WARNING")
        # gRPC's own error lines too (a failed TLS handshake is reported as
        # one line of ours); GRPC_VERBOSITY=ERROR brings them back.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        return _run(args)
    except CliError as error:
        print(f"champollion: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C: the embedded stack has stopped on the way out
        print("champollion: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
