"""The commands that score or compare: evaluate (one system or several,
with its progress bar and summary), compare (two runs, each of several with
the first, or every pair), describe."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tqdm import tqdm

from apps.cli.common import (
    EXIT_INVALID_INPUT,
    CliError,
    card_file_or_run_id,
    embedded_store_url,
    gateway_client,
    raise_if_interrupted,
    reading_client,
    write_json,
)
from apps.cli.output import (
    Style,
    card_summary,
    comparison_summary,
    comparison_table,
    description_summary,
    emit,
    heading,
    languages_summary,
    pairs_summary,
    warning_lines,
)
from apps.cli.card_file import CardFile, card_files
from apps.client import Client, InvalidArgument, Progress
from champollion.eval.v1 import gateway_pb2
from apps.inputs import (
    INT32,
    INT64,
    InputError,
    PredictionFile,
    language_flags,
    load_corpus,
    load_glossary,
    load_meta,
    load_predictions,
    load_run_card_for_compare,
    locate_invalid,
)
from apps.inputs.corpus_table import TABLE_SUFFIXES
from champollion.core.cards import UnknownLanguage, default_registry
from champollion.core.language_tags import LANGUAGES_HINT
from apps.inputs.plain_text import STDIN, load_plain_text_runs, system_names
from champollion.core.limits import MAX_RESAMPLES, shown
from champollion.core.sampling import BOOTSTRAP, HOLM


class ProgressBar:
    """A run's progress on stderr: entries scored out of the corpus's
    entries (known from the start), the rate and the time left, and the
    families that overran a deadline. Shown only on a terminal (disable=None),
    and only once scoring has run for more than a moment: logs and pipes get
    the error line alone."""

    def __init__(self, total_entries: int, file=None, disable: bool | None = None, delay: float = 0.5,
                 desc: str = "scoring"):
        self._bar = tqdm(total=total_entries or None, unit="entry", file=file or sys.stderr, delay=delay,
                         desc=desc, leave=False, disable=disable)

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
# A corpus file's suffixes (predictions are JSON Lines): with --corpus-id, a
# first file of these is a CORPUS given where the registered one is used.
CORPUS_SUFFIXES = (".json", *TABLE_SUFFIXES)


def _input_kind(args) -> str:
    """'plain' (--src/--ref/--hyp), 'registered' (--corpus-id) or 'files'
    (CORPUS PREDICTIONS...); refuses mixtures."""
    plain = [flag for flag, value in zip(_PLAIN_TEXT_FLAGS, (args.src, args.ref, args.hyp)) if value]
    if args.corpus_id and args.corpus:
        if Path(args.corpus).suffix.lower() in CORPUS_SUFFIXES:
            raise CliError("CORPUS with --corpus-id: the registered corpus's entries and languages are used",
                           EXIT_INVALID_INPUT)
        args.corpus, args.predictions = None, [args.corpus, *args.predictions]  # `--corpus-id ID PREDICTIONS...`
    if plain:
        missing = [flag for flag in _PLAIN_TEXT_FLAGS if flag not in plain]
        if missing:
            raise CliError(f"{', '.join(plain)} with {' and '.join(missing)}: plain-text input needs --src, "
                           f"--ref (one or more) and --hyp", EXIT_INVALID_INPUT)
        if args.corpus_id:
            raise CliError("--corpus-id with --src/--ref/--hyp: plain text is scored as a corpus of its own",
                           EXIT_INVALID_INPUT)
        stray = [name for name in (args.corpus, *args.predictions) if name]
        if stray:
            # Argparse leaves a file that no flag took as CORPUS or PREDICTIONS:
            # name it, and how the flags take their files.
            raise CliError(f"{', '.join(stray)}: a file given where no file is expected: with --src/--ref/--hyp "
                           f"every file follows its flag (-r/--ref takes one: repeat it for each reference; "
                           f"-i/--hyp and -o/--out take several after one flag, one per system)", EXIT_INVALID_INPUT)
        if not args.source_lang or not args.target_lang:
            raise CliError("--src/--ref/--hyp need --source-lang and --target-lang", EXIT_INVALID_INPUT)
        return "plain"
    if not args.corpus_id:
        if args.corpus_version:
            raise CliError("--corpus-version needs --corpus-id", EXIT_INVALID_INPUT)
        if not args.corpus or not args.predictions:
            raise CliError("evaluate needs CORPUS PREDICTIONS, or --corpus-id ID PREDICTIONS", EXIT_INVALID_INPUT)
        return "files"
    given = [name for name, value in (("--source-lang", args.source_lang), ("--target-lang", args.target_lang))
             if value]
    if given:
        raise CliError(f"{given[0]} with --corpus-id: the registered corpus's entries and languages are used",
                       EXIT_INVALID_INPUT)
    if not args.predictions:
        raise CliError("evaluate --corpus-id ID needs PREDICTIONS", EXIT_INVALID_INPUT)
    return "registered"


def _prediction_files(args, kind: str) -> list[str]:
    return list(args.hyp) if kind == "plain" else list(args.predictions)


def _names(args, files: list[str]) -> list[str]:
    """Each system's name: --name in order, else from its file's name."""
    if args.name and len(args.name) != len(files):
        raise CliError(f"--name: give one name per system ({len(files)}), got {len(args.name)}", EXIT_INVALID_INPUT)
    names = list(args.name) if args.name else system_names(files)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CliError(f"two systems named {repeated[0]!r}: give each its own with --name", EXIT_INVALID_INPUT)
    return names


def _check_outputs(args, count: int) -> list[str | None]:
    """--out once per system (or none)."""
    outs = list(args.out or [])
    if outs and len(outs) != count:
        raise CliError(f"-o/--out: give one file per system ({count}), got {len(outs)}", EXIT_INVALID_INPUT)
    if len(set(outs)) != len(outs):
        raise CliError("-o/--out: each system's run card needs its own file", EXIT_INVALID_INPUT)
    return outs or [None] * count


def _selection(args):
    """The metrics asked for with --metrics/--families, checked before
    anything is read or started; None: every metric."""
    if not args.metrics and not args.families:
        return None
    from gateway.card.metrics import UnknownSelection, select  # the metric table: names and aliases

    try:
        return select(args.metrics or [], args.families or [])
    except UnknownSelection as error:
        raise CliError(f"--{error.option}: {error}", EXIT_INVALID_INPUT) from None


def _load_run(args, kind: str, files: list[str]):
    """(corpus, each system's predictions, the file a corpus field's error
    names). The predictions are in file order: Client.evaluate_request puts
    them in corpus order, lines with them (apps.inputs.in_corpus_order)."""
    if kind == "registered":  # scored server-side: predictions only
        if args.dataset_id:
            raise CliError("--dataset-id with --corpus-id: a registered corpus has its id", EXIT_INVALID_INPUT)
        corpus = gateway_pb2.CorpusRef(id=args.corpus_id, version=args.corpus_version or "")
        return corpus, [load_predictions(Path(name)) for name in files], None
    if kind == "plain":
        corpus, runs = load_plain_text_runs(args.src, list(args.ref), files, args.source_lang, args.target_lang)
        corpus_path = Path(args.src)
    else:
        corpus_path = Path(args.corpus)
        corpus = load_corpus(corpus_path, args.source_lang, args.target_lang)
        runs = [load_predictions(Path(name)) for name in files]
    if args.dataset_id:
        corpus.id = args.dataset_id
    return corpus, runs, corpus_path


def _metas(args, files: list[str], names: list[str]) -> list[tuple[gateway_pb2.RunMeta, Path | None]]:
    """Each system's meta and its file: --meta once per system, or once for
    all (its model_slug then stands for one system only, so each system is
    named by its name). The name is the model_slug unless the system's own
    --meta gives one; a system read from stdin without --name has none."""
    paths = [Path(path) for path in args.meta or []]
    if len(paths) not in (0, 1, len(files)):
        raise CliError(f"--meta: give one file for every system, or one per system ({len(files)}), got {len(paths)}",
                       EXIT_INVALID_INPUT)
    loaded = {path: load_meta(path) for path in dict.fromkeys(paths)}
    metas = []
    for index, (file, name) in enumerate(zip(files, names)):
        path = paths[index] if len(paths) == len(files) else (paths[0] if paths else None)
        meta = gateway_pb2.RunMeta()
        if path is not None:
            meta.CopyFrom(loaded[path])
        shared = len(paths) == 1 and len(files) > 1
        if (shared or not meta.HasField("model_slug")) and (args.name or file != STDIN):
            meta.model_slug = name
        metas.append((meta, path))
    return metas


def _side(card: dict, target: CardFile | None):
    """What Compare gets of a scored card: its stored run's id when it was
    stored (the gateway reads its statistics back), else the card whole,
    read from its file."""
    if (card.get("integrity") or {}).get("submissions_with_fingerprint") is not None:
        return card["run_id"]
    return target.read()


def _without_entries(card: dict) -> dict:
    return {key: value for key, value in card.items() if key != "entries"}


def _where_stored(args) -> str:
    if args.gateway:
        return f"the store of the gateway at {args.gateway}"
    from gateway.store.location import parse_store_url, redact  # the embedded gateway's: loaded already

    return redact(parse_store_url(embedded_store_url(args)))


def _run_lines(args, names: list[str], cards: list[dict], outs: list[str | None]) -> list[str]:
    """Where each run went: its id (stored or not) and its card's file."""
    lines = []
    for name, card, out in zip(names, cards, outs):
        stored = (card.get("integrity") or {}).get("submissions_with_fingerprint") is not None
        who = f"{name}: " if len(cards) > 1 else ""
        text = f"{who}run {card['run_id']} " + (f"stored in {_where_stored(args)}" if stored else "not stored")
        if out:
            text += f"; run card written to {out}"
        lines.append(text)
    return lines


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
    files = _prediction_files(args, kind)
    names = _names(args, files)
    outs = _check_outputs(args, len(files))
    if args.paired and len(files) < 2:
        raise CliError("--paired: compares several systems (give several --hyp or PREDICTIONS files)",
                       EXIT_INVALID_INPUT)
    _check_pairs_flags(args, len(files), "give several --hyp or PREDICTIONS files")
    if args.entries and not args.json:
        raise CliError("--entries: with --json (the summary shows no entries; --out writes them all)",
                       EXIT_INVALID_INPUT)
    selection = _selection(args)
    glossary_path = Path(args.glossary) if args.glossary else None
    try:
        corpus, runs, corpus_path = _load_run(args, kind, files)
        metas = _metas(args, files, names)
        glossary = load_glossary(glossary_path) if glossary_path else None
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    requests = [Client.evaluate_request(corpus, predictions, meta, glossary, batch_size=args.batch_size or 0,
                                        seed=args.seed, resamples=args.resamples or 0,
                                        disable_plugins=args.no_plugins, comet_model=args.comet_model,
                                        metrics=args.metrics or (), families=args.families or ())
                for predictions, (meta, _) in zip(runs, metas)]
    # The requests carry the run from here: the files' entries and predictions as read go (about 1 KiB
    # an entry), and an error the gateway finds is located in its file by line alone (the lines are in
    # the requests' order: evaluate_request sorted each file in place).
    del corpus
    runs = [PredictionFile(predictions.path, lines=predictions.lines) for predictions in runs]
    stack = {"store": embedded_store_url(args)}
    if selection is not None:  # only the families the metrics asked for need start (no model otherwise)
        from gateway.card.metrics import families_for

        stack["families"] = families_for(selection, plugins=not args.no_plugins)
    if args.workers is not None:
        stack["workers"] = args.workers
    elif not args.gateway and stack.get("families") == ("surface",):
        from services.workers import WORKERS_ENV  # the embedded stack's side, loaded for it anyway

        if not os.environ.get(WORKERS_ENV):
            # sacreBLEU's metrics alone: compiled statistics (2.5 s of CPU for
            # 10,000 entries); worker processes would add their start-up.
            stack["workers"] = 0
    cards, comparisons, pairs = [], [], None
    # Each card goes to its file as it comes (card_file.py): the command holds no run's entries.
    with card_files(outs, read_again=len(files) > 1 or args.entries) as targets:
        with gateway_client(args, background="start", **stack) as client:
            for name, request, predictions, (_, meta_path), target in zip(names, requests, runs, metas, targets):
                cards.append(_scored(client, request, name if len(names) > 1 else "scoring", corpus_path,
                                     predictions, meta_path, glossary_path,
                                     language_flags(args.source_lang, args.target_lang), target))
            sides = [_side(card, target) for card, target in zip(cards, targets)] if len(cards) > 1 else []
            if args.all_pairs:
                pairs = _all_pairs(client, args, sides, names, args.paired or BOOTSTRAP)
            else:
                for side in sides[1:]:
                    comparisons.append(client.compare(sides[0], side, method=args.paired or BOOTSTRAP,
                                                      seed=args.seed, resamples=args.resamples or 0))
        _print_evaluation(args, names, cards, comparisons, outs, pairs, targets)
    return 0


def _check_pairs_flags(args, systems: int, how: str) -> None:
    """--correction, --tie-threshold and --metric go with --all-pairs,
    which compares several systems; refused by flag before anything is read."""
    given = [flag for flag, value in (("--correction", args.correction), ("--tie-threshold", args.tie_threshold),
                                      ("--metric", getattr(args, "metric", None))) if value is not None]
    if given and not args.all_pairs:
        raise CliError(f"{given[0]}: goes with --all-pairs", EXIT_INVALID_INPUT)
    if args.all_pairs and systems < 2:
        raise CliError(f"--all-pairs: compares several systems ({how})", EXIT_INVALID_INPUT)


def _all_pairs(client: Client, args, runs: list, names: list[str], method: str) -> dict:
    """Every pair of `runs` (stored ids or cards) through ComparePairs."""
    return client.compare_pairs(runs, names, method=method, seed=args.seed, resamples=args.resamples or 0,
                                correction=args.correction or HOLM, tie_threshold=args.tie_threshold or 0.0,
                                metrics=getattr(args, "metric", None) or ())


def _pairs_lines(args, pairs: dict, style: Style) -> list[str]:
    """The all-pairs summary: of every metric compared when --metric chose them, else of the headline ones."""
    from gateway.card.pairs import headline_metrics  # numpy's: only when pairs are printed

    return pairs_summary(pairs, list(pairs["metrics"]) if getattr(args, "metric", None) else
                         headline_metrics(pairs), style)


def _scored(client: Client, request, name: str, corpus_path, predictions: PredictionFile, meta_path,
            glossary_path, flags: dict, target: CardFile | None) -> dict:
    """One system's card, less its entries, which go to `target` (none:
    nowhere); an error the gateway finds in it pointed at its file and line,
    or at the language flag (`flags`) that named the value."""
    bar = ProgressBar(len(request.corpus.entries), desc=name)
    try:
        card = client.send_evaluation(request, bar.update, target.add if target is not None else _dropped)
        if target is not None:
            target.finish(card)
        return card
    except InvalidArgument as error:
        # The field's file and line from the error's details; a gateway that sends none: its message.
        message = (locate_invalid(error.violations[0], corpus_path, predictions, meta_path, glossary_path, flags)
                   if error.violations else error.details)
        raise CliError(message, EXIT_INVALID_INPUT) from None
    finally:
        bar.close()


def _dropped(card: dict, entries: list[dict]) -> None:
    """Where a card's entries go when no file and no reader wants them."""


def _print_evaluation(args, names: list[str], cards: list[dict], comparisons: list[dict],
                      outs: list[str | None], pairs: dict | None, targets: list[CardFile | None]) -> None:
    """The summary (or with --json the machine form) on stdout; with
    --json, where the runs went on stderr. `pairs`: with --all-pairs, every
    pair's comparison (then `comparisons` is empty). With --entries, the
    cards whole, from their files (`targets`)."""
    if args.json:
        if len(cards) == 1 and args.entries:
            targets[0].copy_to_stdout()  # the file is what write_json prints, entries included
        elif len(cards) == 1:
            write_json(_without_entries(cards[0]), None)
        else:
            keep = (lambda card, target: target.read()) if args.entries else (lambda card, _: _without_entries(card))
            compared = {"pairs": pairs} if pairs is not None else {
                "comparisons": [{"baseline": names[0], "system": name, **comparison}
                                for name, comparison in zip(names[1:], comparisons)]}
            write_json({"runs": [{"name": name, **keep(card, target)} for name, card, target in
                                 zip(names, cards, targets)], **compared}, None)
        emit(_run_lines(args, names, cards, outs), sys.stderr)
        return
    style = Style(sys.stdout)
    if len(cards) == 1:
        lines = card_summary(cards[0], style)
    elif pairs is not None:
        lines = [style.bold(f"{len(cards)} systems · {heading(cards[0], run=False)}")]
        lines += _pairs_lines(args, pairs, style)
        lines += warning_lines(_systems_warnings(names, cards, []), style)
    else:
        lines = [style.bold(f"{len(cards)} systems · {heading(cards[0], run=False)}")]
        lines += comparison_table(names, cards, comparisons, style)
        lines += warning_lines(_systems_warnings(names, cards, comparisons), style)
    emit(lines + _run_lines(args, names, cards, outs))


def _systems_warnings(names: list[str], cards: list[dict], comparisons: list[dict]) -> list[str]:
    """Every system's warnings once, each naming the systems it is about
    unless it is about them all, then the comparisons'."""
    about: dict[str, list[str]] = {}
    for name, card in zip(names, cards):
        for warning in dict.fromkeys(card.get("warnings") or []):
            about.setdefault(warning, []).append(name)
    warnings = [warning if len(who) == len(names) else f"{warning} ({', '.join(who)})"
                for warning, who in about.items()]
    for name, comparison in zip(names[1:], comparisons):
        warnings += [f"{names[0]} vs {name}: {warning}" for warning in comparison.get("warnings") or []]
    return warnings


def _compared_runs(texts: list[str]) -> tuple[list, list[str]]:
    """Each run `compare` is given (a run card file, or else a stored run's
    id) as the client takes it, and its name: a file by what sets its name
    apart from the other files' (system_names), a run id as given."""
    sides = []
    for text in texts:
        found = card_file_or_run_id(text)
        if isinstance(found, Path):
            try:
                sides.append(load_run_card_for_compare(found))
            except InputError as error:
                raise CliError(str(error), EXIT_INVALID_INPUT) from None
        else:
            sides.append(found)
    file_names = iter(system_names([text for text, side in zip(texts, sides) if not isinstance(side, str)]))
    return sides, [text if isinstance(side, str) else next(file_names) for text, side in zip(texts, sides)]


def cmd_compare(args) -> int:
    _check_run_options(args)
    if len(args.runs) < 2:
        raise CliError("compare needs two runs or more (run card files or stored run ids)", EXIT_INVALID_INPUT)
    _check_pairs_flags(args, len(args.runs), "give two runs or more")
    sides, names = _compared_runs(args.runs)
    with reading_client(args, store=any(isinstance(side, str) for side in sides)) as client:
        if args.all_pairs:
            answer = _all_pairs(client, args, sides, names, args.method)
        else:
            comparisons = [client.compare(sides[0], side, method=args.method, seed=args.seed,
                                          resamples=args.resamples or 0) for side in sides[1:]]
            # Two runs: the comparison itself; more: each with the first, as `evaluate` lists them.
            answer = comparisons[0] if len(comparisons) == 1 else {
                "comparisons": [{"baseline": names[0], "system": name, **comparison}
                                for name, comparison in zip(names[1:], comparisons)]}
    if args.out:
        write_json(answer, args.out)
    if args.json:
        write_json(answer, None)
        return 0
    style = Style(sys.stdout)
    if args.all_pairs:
        lines = _pairs_lines(args, answer, style)
    else:
        lines = []
        for name, comparison in zip(args.runs[1:], comparisons):
            lines += ([""] if lines else []) + comparison_summary(comparison, args.runs[0], name, style)
    emit(lines)
    if args.out:
        print(f"comparison written to {args.out}")
    return 0


def cmd_describe(args) -> int:
    with gateway_client(args) as client:
        description = client.describe()
    if args.languages:
        # The written cards, and how any other language is scored.
        description = {"languages": description.get("languages", []),
                       "generic_card": description.get("generic_card", "")}
    if args.json:
        write_json(description, None)
    elif args.languages:
        emit(languages_summary(description, Style(sys.stdout)))
    else:
        emit(description_summary(description, Style(sys.stdout)))
    return 0
