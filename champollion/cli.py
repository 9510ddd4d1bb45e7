"""The `champollion` command: evaluate, serve, describe."""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from contextlib import nullcontext
from pathlib import Path

import grpc
from tqdm import tqdm

from champollion import logs
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc
from champollion.inputs import (
    InputError,
    build_request,
    in_corpus_order,
    load_corpus,
    load_glossary,
    load_meta,
    load_predictions,
    load_run_card_for_compare,
    locate_invalid,
)
from champollion.launch import local_cluster
from champollion.launch.embedded import EmbeddedStack, start_family, start_gateway, start_stack
from champollion.serving import MAX_MESSAGE_BYTES
from champollion.upload import collect_run_card, compare_parts, request_parts
from gateway.card.run_card import message_to_dict
from gateway.server.config import GatewayConfig, load_config
from services.registry import IMPLEMENTED

EXIT_INVALID_INPUT = 2
EXIT_FAILURE = 1
DEFAULT_PORT = 50051
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


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


def _stream_evaluation(address: str, request: gateway_pb2.EvaluateRequest) -> dict:
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        # Shown only once scoring has run for more than a moment.
        bar = tqdm(unit="call", file=sys.stderr, delay=0.5, desc="scoring", leave=False)

        def show(update) -> None:
            bar.total = update.batches_total
            bar.update(update.batches_done - bar.n)

        try:
            # Sent in parts, so that a run larger than one gRPC message fits.
            return collect_run_card(stub.EvaluateUpload(request_parts(request)), show)
        except ValueError as error:
            raise CliError(str(error), EXIT_FAILURE) from None
        finally:
            bar.close()


def cmd_evaluate(args) -> int:
    corpus_path, predictions_path = Path(args.corpus), Path(args.predictions)
    meta_path = Path(args.meta) if args.meta else None
    glossary_path = Path(args.glossary) if args.glossary else None
    try:
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
    with _gateway_or_embedded(args.gateway) as address:
        try:
            card = _stream_evaluation(address, request)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                message = locate_invalid(error.details(), corpus_path, predictions, meta_path, glossary_path)
                raise CliError(message, EXIT_INVALID_INPUT) from None
            raise CliError(f"gateway at {address}: {error.code().name}: {error.details()}", EXIT_FAILURE) from None
    _write_json(card, args.out)
    return 0


def cmd_compare(args) -> int:
    try:
        baseline, system = (load_run_card_for_compare(Path(path)) for path in (args.baseline, args.system))
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    request = gateway_pb2.CompareRequest(baseline=baseline, system=system, resamples=args.resamples or 0)
    if args.seed is not None:
        request.seed = args.seed
    with _gateway_or_embedded(args.gateway) as address:
        with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            try:
                # Sent in parts, so that run cards larger than one gRPC message fit.
                response = gateway_pb2_grpc.GatewayStub(channel).CompareUpload(compare_parts(request), timeout=600)
            except grpc.RpcError as error:
                code = EXIT_INVALID_INPUT if error.code() == grpc.StatusCode.FAILED_PRECONDITION else EXIT_FAILURE
                raise CliError(f"{error.details()}", code) from None
    _write_json(message_to_dict(response), args.out)
    return 0


def _write_json(data: dict, out: str | None) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)


def cmd_describe(args) -> int:
    with _gateway_or_embedded(args.gateway) as address:
        with grpc.insecure_channel(address) as channel:
            try:
                description = gateway_pb2_grpc.GatewayStub(channel).Describe(
                    family_pb2.DescribeRequest(), timeout=30
                )
            except grpc.RpcError as error:
                raise CliError(f"gateway at {address}: {error.code().name}: {error.details()}", EXIT_FAILURE) from None
    print(json.dumps(message_to_dict(description), ensure_ascii=False, indent=2))
    return 0


async def _serve(args) -> None:
    servers = []
    host = args.host
    if not args.family:
        config = load_config(args.config) if args.config else None
        stack = await start_stack(host=host, gateway_port=args.port)
        if config is not None:
            raise CliError("--config applies to `serve --family gateway`", EXIT_INVALID_INPUT)
        servers = stack.servers
        print(json.dumps({"gateway": stack.gateway_address, "families": stack.family_addresses}), file=sys.stderr)
    else:
        for offset, name in enumerate(args.family):
            address = f"{host}:{args.port + offset}"
            if name == "gateway":
                config = load_config(args.config) if args.config else GatewayConfig()
                server, port, _ = await start_gateway(config, address)
            else:
                options = {key: value for key, value in (("device", args.device), ("comet_dir", args.comet_dir))
                           if value}
                server, port = await start_family(name, address, languages=args.languages, **options)
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
    asyncio.run(_serve(args))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="champollion", description="Score machine-translation runs.")
    commands = parser.add_subparsers(dest="command", required=True)

    evaluate = commands.add_parser("evaluate", help="evaluate a run and print its run card")
    evaluate.add_argument("corpus", help="corpus JSON (object with entries, or a list of entries)")
    evaluate.add_argument("predictions", help="predictions, JSON Lines")
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
    serve.set_defaults(handler=cmd_serve)

    compare = commands.add_parser("compare", help="paired bootstrap significance between two run cards")
    compare.add_argument("baseline", help="run card JSON of the baseline")
    compare.add_argument("system", help="run card JSON of the system compared with it")
    compare.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    compare.add_argument("--seed", type=int, help="bootstrap seed (default 12345, as sacreBLEU)")
    compare.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000)")
    compare.add_argument("--out", help="write the comparison here instead of stdout")
    compare.set_defaults(handler=cmd_compare)

    up = commands.add_parser("up", help="the distributed topology on this machine: a process per family "
                                        "(two structural replicas) and a gateway in front")
    local_cluster.add_arguments(up)
    up.set_defaults(handler=local_cluster.run)

    describe = commands.add_parser("describe", help="what is loaded: families, metrics, languages")
    describe.add_argument("--gateway", help="HOST:PORT of a running gateway (default: embedded stack)")
    describe.set_defaults(handler=cmd_describe)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("serve", "up"):
        # Service logs would clutter a command's output; only problems show.
        logs.configure("WARNING")
    try:
        return args.handler(args)
    except CliError as error:
        print(f"champollion: error: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
