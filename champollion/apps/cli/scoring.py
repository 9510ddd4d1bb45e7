"""The commands that score or compare: evaluate (with its progress bar),
compare, describe."""
from __future__ import annotations

import sys
from pathlib import Path

from tqdm import tqdm

from champollion.apps.cli.common import (
    EXIT_INVALID_INPUT,
    CliError,
    embedded_store_url,
    gateway_client,
    raise_if_interrupted,
    reading_client,
    write_json,
)
from champollion.apps.client import Client, InvalidArgument, Progress
from champollion.eval.v1 import gateway_pb2
from champollion.apps.inputs import (
    INT32,
    INT64,
    InputError,
    in_corpus_order,
    language_flags,
    load_corpus,
    load_glossary,
    load_meta,
    load_plain_text_run,
    load_predictions,
    load_run_card_for_compare,
    locate_invalid,
)
from champollion.core.cards import UnknownLanguage, default_registry
from champollion.core.language_tags import LANGUAGES_HINT
from champollion.core.limits import MAX_RESAMPLES, shown


class ProgressBar:
    """A run's progress on stderr: entries scored out of the corpus's
    entries (known from the start), the rate and the time left, and the
    families that overran a deadline. Shown only on a terminal (disable=None),
    and only once scoring has run for more than a moment: logs and pipes get
    the error line alone."""

    def __init__(self, total_entries: int, file=None, disable: bool | None = None, delay: float = 0.5):
        self._bar = tqdm(total=total_entries or None, unit="entry", file=file or sys.stderr, delay=delay,
                         desc="scoring", leave=False, disable=disable)

    def update(self, progress: Progress) -> None:
        raise_if_interrupted()
        if progress.entries_total and progress.entries_total != self._bar.total:
            self._bar.total = progress.entries_total  # a registered corpus: the gateway knows its size
        self._bar.update(progress.entries_done - self._bar.n)
        if progress.slow_families:
            self._bar.set_postfix_str("slow: " + ", ".join(progress.slow_families), refresh=False)

    def text(self) -> str:
        """What the bar shows now (it redraws at most every 0.1 s)."""
        return str(self._bar)

    def close(self) -> None:
        self._bar.close()


def _check_run_options(args) -> None:
    """--seed, --resamples, --batch-size within what the gateway takes (and
    the protobuf fields hold), refused by flag name before anything is read."""
    for flag, value, high in (("--seed", args.seed, INT64[1]), ("--resamples", args.resamples, MAX_RESAMPLES),
                              ("--batch-size", getattr(args, "batch_size", None), INT32[1]),
                              ("--workers", getattr(args, "workers", None), 1024)):
        if value is not None and not 0 <= value <= high:
            raise CliError(f"{flag}: must be a whole number from 0 to {high}, got {shown(value)}", EXIT_INVALID_INPUT)


_PLAIN_TEXT_FLAGS = ("--src", "--ref", "--hyp")


def _input_kind(args) -> str:
    """'plain' (--src/--ref/--hyp), 'registered' (--corpus-id) or 'files'
    (CORPUS PREDICTIONS); refuses mixtures."""
    plain = [flag for flag, value in zip(_PLAIN_TEXT_FLAGS, (args.src, args.ref, args.hyp)) if value]
    if args.corpus_id and args.corpus and not args.predictions:
        args.corpus, args.predictions = None, args.corpus  # `--corpus-id ID PREDICTIONS`
    if plain:
        missing = [flag for flag in _PLAIN_TEXT_FLAGS if flag not in plain]
        if missing:
            raise CliError(f"{', '.join(plain)} with {' and '.join(missing)}: plain-text input needs --src, "
                           f"--ref (one or more) and --hyp", EXIT_INVALID_INPUT)
        if args.corpus or args.predictions or args.corpus_id:
            raise CliError("--src/--ref/--hyp replace CORPUS PREDICTIONS and --corpus-id", EXIT_INVALID_INPUT)
        if not args.source_lang or not args.target_lang:
            raise CliError("--src/--ref/--hyp need --source-lang and --target-lang", EXIT_INVALID_INPUT)
        return "plain"
    if not args.corpus_id:
        if args.corpus_version:
            raise CliError("--corpus-version needs --corpus-id", EXIT_INVALID_INPUT)
        if not args.corpus or not args.predictions:
            raise CliError("evaluate needs CORPUS PREDICTIONS, or --corpus-id ID PREDICTIONS", EXIT_INVALID_INPUT)
        return "files"
    given = [name for name, value in (("CORPUS", args.corpus), ("--source-lang", args.source_lang),
                                      ("--target-lang", args.target_lang)) if value]
    if given:
        raise CliError(f"{given[0]} with --corpus-id: the registered corpus's entries and languages are used",
                       EXIT_INVALID_INPUT)
    if not args.predictions:
        raise CliError("evaluate --corpus-id ID needs PREDICTIONS", EXIT_INVALID_INPUT)
    return "registered"


def _load_run(args, kind: str):
    """(corpus, predictions, the file a corpus field's error names)."""
    if kind == "plain":
        corpus, predictions = load_plain_text_run(args.src, list(args.ref), args.hyp, args.source_lang,
                                                  args.target_lang)
        return corpus, in_corpus_order(predictions, corpus), Path(args.src)
    if kind == "registered":  # scored server-side: predictions only
        corpus = gateway_pb2.CorpusRef(id=args.corpus_id, version=args.corpus_version or "")
        return corpus, load_predictions(Path(args.predictions)), None
    corpus_path = Path(args.corpus)
    corpus = load_corpus(corpus_path, args.source_lang, args.target_lang)
    return corpus, in_corpus_order(load_predictions(Path(args.predictions)), corpus), corpus_path


def _check_language_flags(args) -> None:
    """--source-lang and --target-lang, refused by flag before the embedded
    stack starts, as its gateway would refuse them (same cards, same words).
    A remote gateway's cards are its own: it answers for them."""
    if args.gateway:
        return
    for flag, value in (("--source-lang", args.source_lang), ("--target-lang", args.target_lang)):
        if value:
            try:
                default_registry().resolve(value)
            except UnknownLanguage as error:
                raise CliError(f"{flag}: {error}; {LANGUAGES_HINT}", EXIT_INVALID_INPUT) from None


def cmd_evaluate(args) -> int:
    _check_run_options(args)
    if args.workers is not None and args.gateway:
        raise CliError(f"--workers sets the embedded stack's; the gateway at {args.gateway} has its own "
                       f"(`champollion serve --workers N`)", EXIT_INVALID_INPUT)
    kind = _input_kind(args)
    _check_language_flags(args)
    meta_path = Path(args.meta) if args.meta else None
    glossary_path = Path(args.glossary) if args.glossary else None
    try:
        corpus, predictions, corpus_path = _load_run(args, kind)
        meta = load_meta(meta_path) if meta_path else None
        glossary = load_glossary(glossary_path) if glossary_path else None
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    request = Client.evaluate_request(corpus, predictions, meta, glossary, batch_size=args.batch_size or 0,
                                      seed=args.seed, resamples=args.resamples or 0,
                                      disable_plugins=args.no_plugins, comet_model=args.comet_model)
    stack = {"store": embedded_store_url(args)}
    if args.workers is not None:
        stack["workers"] = args.workers
    with gateway_client(args, **stack) as client:
        bar = ProgressBar(len(request.corpus.entries))
        try:
            card = client.send_evaluation(request, bar.update)
        except InvalidArgument as error:
            message = locate_invalid(error.details, corpus_path, predictions, meta_path, glossary_path,
                                     language_flags(args.source_lang, args.target_lang))
            raise CliError(message, EXIT_INVALID_INPUT) from None
        finally:
            bar.close()
    write_json(card, args.out)
    return 0


def cmd_compare(args) -> int:
    _check_run_options(args)
    sides = []
    for text in (args.baseline, args.system):
        # A run card file, or else the id of a stored run.
        if Path(text).is_file():
            try:
                sides.append(load_run_card_for_compare(Path(text)))
            except InputError as error:
                raise CliError(str(error), EXIT_INVALID_INPUT) from None
        else:
            sides.append(text)
    with reading_client(args, store=any(isinstance(side, str) for side in sides)) as client:
        comparison = client.compare(*sides, method=args.method, seed=args.seed, resamples=args.resamples or 0)
    write_json(comparison, args.out)
    return 0


def cmd_describe(args) -> int:
    with gateway_client(args) as client:
        description = client.describe()
    if args.languages:
        # The written cards, and how any other language is scored.
        description = {"languages": description.get("languages", []),
                       "generic_card": description.get("generic_card", "")}
    write_json(description, None)
    return 0
