"""The commands that read stored runs: runs, show, leaderboard (a table,
JSON or an HTML page), report, meta-eval."""
from __future__ import annotations

import sys
from pathlib import Path

from tabulate import tabulate

from apps.cli.common import (
    EXIT_INVALID_INPUT,
    CliError,
    card_file_or_run_id,
    reading_client,
    write_json,
)
from apps.client import Client, rank_text, ranks_explained, row_flags, split_floor
from apps.inputs import InputError, load_corpus, load_predictions, load_run_card


def cmd_runs(args) -> int:
    with reading_client(args) as client:
        runs = client.runs(args.dataset, args.model)
    if args.json:
        write_json(runs, None)
    else:
        from gateway.card.display import column_text

        print(tabulate(
            [[run["run_id"], run["created_at"], run["dataset_id"], run["model_slug"], run["condition"],
              column_text("composite_score", run["composite_score"]), run["quality_tier"]] for run in runs],
            headers=["run_id", "created_at", "dataset", "model", "condition", "composite", "tier"],
            disable_numparse=True,  # as written: tabulate would drop the composite's trailing zeros
        ))
    return 0


def cmd_show(args) -> int:
    if args.entries and not args.json:
        raise CliError("--entries: with --json (the summary shows no entries; --out writes them all)",
                       EXIT_INVALID_INPUT)
    from apps.cli.output import Style, card_summary, emit  # the metric table: not for `runs`

    card = _cards(args, [args.run_id])[args.run_id]
    if args.out:
        write_json(card, args.out)
    if args.json:
        write_json(card if args.entries else {key: value for key, value in card.items() if key != "entries"}, None)
    else:
        emit(card_summary(card, Style(sys.stdout)) +
             [f"run {card['run_id']}" + (f"; run card written to {args.out}" if args.out else "")])
    return 0


def _cards(args, given: list[str]) -> dict[str, dict]:
    """Each CARD_OR_RUN_ID's full run card: an existing file is a run card
    JSON, anything else a stored run's id (read through the gateway)."""
    found = {text: card_file_or_run_id(text) for text in given}
    try:
        cards = {text: load_run_card(path) for text, path in found.items() if isinstance(path, Path)}
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    run_ids = [text for text in given if text not in cards]
    if run_ids:
        with reading_client(args) as client:
            cards.update((run_id, client.show(run_id)) for run_id in run_ids)
    return cards


def cmd_report(args) -> int:
    """An HTML report of one or several run cards (apps/report),
    with the texts from the runs' files: JSON (--corpus, --predictions) or
    plain text as `evaluate` reads it (--src, --ref, --hyp)."""
    from apps.report import entry_inputs, plain_text_inputs, unmatched_entries, write_report

    plain = bool(args.src or args.ref or args.hyp)
    if plain and (args.corpus or args.predictions):
        raise CliError("--src/--ref/--hyp replace --corpus and --predictions: give one or the other",
                       EXIT_INVALID_INPUT)
    flag, per_run = ("--hyp", args.hyp) if plain else ("--predictions", args.predictions)
    if per_run and len(per_run) != len(args.cards):
        raise CliError(f"{flag}: give one file per card ({len(args.cards)}), got {len(per_run)}", EXIT_INVALID_INPUT)
    cards = _cards(args, args.cards)
    inputs = None
    try:
        if plain:
            inputs = plain_text_inputs(args.src, args.ref, args.hyp)
            inputs = inputs * len(args.cards) if len(inputs) == 1 else inputs  # no --hyp: the texts every card shares
        elif args.corpus or args.predictions:
            corpus = load_corpus(Path(args.corpus)) if args.corpus else None  # read once for every card
            predictions = [load_predictions(Path(p)) for p in args.predictions] or [None] * len(args.cards)
            inputs = [entry_inputs(corpus, run) for run in predictions]
    except InputError as error:
        hint = "; for plain text, one segment a line, use --src/--ref/--hyp" if "malformed JSON" in str(error) else ""
        raise CliError(f"{error}{hint}", EXIT_INVALID_INPUT) from None
    if plain or args.corpus:  # the files hold every entry: a card they do not fit is the wrong card
        for text, given in zip(args.cards, inputs):
            why = unmatched_entries(cards[text], given)
            if why:
                raise CliError(f"{text}: {why}", EXIT_INVALID_INPUT)
    write_report([cards[text] for text in args.cards], Path(args.out), inputs=inputs)
    print(f"report of {len(args.cards)} run card(s) written to {args.out}", file=sys.stderr)
    return 0


# --human campaign:ID reads a review campaign's judgments from the store.
CAMPAIGN_PREFIX = "campaign:"


def _campaign_judgments(args, campaign_id: str):
    """A campaign's judgments (each item's mean score over its reliable
    raters, per run) as meta-eval reads a judgment file, and the run ids to
    read when no card is given: the campaign's systems."""
    from apps.meta_eval.human_judgments import Judgments

    with reading_client(args) as client:
        campaign = client.campaign_results(campaign_id)
    if campaign["results"] is None:
        raise CliError(f"--human {CAMPAIGN_PREFIX}{campaign_id}: the campaign has no ratings yet", EXIT_INVALID_INPUT)
    judgments = Judgments(Path(f"{CAMPAIGN_PREFIX}{campaign_id}"), "campaign", by_position=False,
                          scores={run_id: {entry: float(score) for entry, score in by_entry.items()}
                                  for run_id, by_entry in campaign["results"]["judgments"].items()})
    return judgments, args.cards or list(campaign["systems"])


def cmd_meta_eval(args) -> int:
    """Agreement of each metric of the given run cards with human judgments
    (apps/meta_eval/)."""
    from apps.meta_eval import (
        MetaEvalError,
        floor_failures,
        match_floor,
        match_systems,
        meta_evaluate,
        table_headers,
        table_rows,
        wmt_notes,
    )
    from apps.meta_eval.human_judgments import JudgmentError, read_judgments

    if args.resamples < 0:
        raise CliError("--resamples: must be 0 (no intervals) or more", EXIT_INVALID_INPUT)
    if args.metric_draws < 0:
        raise CliError("--metric-draws: must be 0 (no significance clusters) or more", EXIT_INVALID_INPUT)
    names = {}
    for pair in args.system:
        card, _, name = pair.partition("=")
        if not card or not name:
            raise CliError(f"--system: expected CARD=NAME, got {pair!r}", EXIT_INVALID_INPUT)
        names[card] = name
    try:
        if args.human.startswith(CAMPAIGN_PREFIX):
            judgments, given = _campaign_judgments(args, args.human[len(CAMPAIGN_PREFIX):])
            cards = _cards(args, given + args.floor)
            # A campaign's systems are its run ids: each card is its run's.
            names = {text: cards[text].get("run_id") or "" for text in given} | names
        else:
            if not args.cards:
                raise CliError("give the run cards (or stored run ids) of the judged systems", EXIT_INVALID_INPUT)
            judgments, given = read_judgments(Path(args.human), args.format), args.cards
            cards = _cards(args, given + args.floor)
        runs = match_systems([(text, cards[text]) for text in given], judgments,
                             {card: name for card, name in names.items() if card not in args.floor})
        floor = match_floor([(text, cards[text]) for text in args.floor], names, runs) if args.floor else None
        report = meta_evaluate(runs, judgments, args.lower_is_better, args.resamples, args.seed,
                               args.metric_segments, floor, args.metric_draws)
    except (InputError, JudgmentError, MetaEvalError) as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    if args.json:
        write_json(report, None)
        return 0
    segments = report["segments"]
    print(f"{len(runs)} systems; human scores over {segments['used']} of {segments['total']} segments (those "
          f"judged for every system), metric scores over {segments['metric_segments']} segments; 95% bootstrap "
          f"intervals over segments ({args.resamples} resamples, seed {args.seed}); "
          f"segment Kendall: {report['segment_kendall']}")
    if floor:
        print(f"floor: {len(floor)} degenerate systems ({', '.join(run.name for run in floor)}), not judged; "
              "K/N: how many of the N with a score the metric ranks below every judged system")
    print(tabulate(table_rows(report), headers=table_headers(report), disable_numparse=True))
    print("\n".join(wmt_notes(report)))
    failures = floor_failures(report)
    if failures:
        print("metrics that rank a degenerate system at or above a judged one:")
        print("\n".join(f"  {line}" for line in failures))
    return 0


def cmd_leaderboard(args) -> int:
    if args.limit < 0:
        raise CliError("--limit: must be 0 (every row) or a positive number", EXIT_INVALID_INPUT)
    if args.html and not args.out:
        raise CliError("--html: give the page's file with -o/--out", EXIT_INVALID_INPUT)
    if args.out and not args.html:
        raise CliError("-o/--out: the leaderboard writes a file only as an HTML page (--html)", EXIT_INVALID_INPUT)
    if args.json and args.html:
        raise CliError("--json and --html: choose one", EXIT_INVALID_INPUT)
    with reading_client(args) as client:
        board = client.leaderboard_page(
            args.dataset, version=args.version, sort=args.sort, ascending=args.ascending,
            all_submissions=args.all_submissions, include_disqualified=args.include_disqualified,
            official=args.official, limit=args.limit)
        if args.html:
            return _leaderboard_page(client, board, args)
    if args.json:
        write_json(board.rows, None)
        return 0
    systems, floor = split_floor(board.rows)
    print(_board_title(board, args))
    if not systems:
        return 0
    print(_board_table(systems, "rank", rank_text, board.sort))
    if any(row.get("rank_range") for row in systems):
        print(ranks_explained(board.sort, "blank lines separate significance clusters"))
    if board.ranks_note:
        print(f"({board.ranks_note})")
    if args.limit and len(systems) == args.limit:
        print(f"(the first {args.limit} rows; --limit 0 for all)")
    if floor:
        print("\nfloor: degenerate systems the gateway scored on this version (unranked; a run whose composite "
              "interval reaches theirs is tier baseline)")
        print(_board_table(floor, "floor", lambda row: row.get("floor_kind")))
    return 0


# The table's value columns (row keys; headers: display.column_label); a
# board sorted by another column shows it first.
BOARD_TABLE = ("composite_score", "chrf_plus_plus", "corpus_bleu", "ter", "cost_per_entry_usd", "cost_adjusted")


def _board_table(rows: list[dict], first: str, first_cell, sort: str | None = None) -> str:
    """The rows as a table; the `sort` column's values with their interval,
    and a blank line between significance clusters."""
    columns = list(BOARD_TABLE)
    if sort is not None and sort not in columns:
        columns.insert(0, sort)

    from gateway.card.display import column_label, column_text  # the metric table's: not for `--json`

    def cell(row: dict, key: str) -> str:
        interval = row.get("ci") if key == sort else None
        text = column_text(key, row.get(key))
        return f"{text} [{column_text(key, interval['ci_lower'])}, {column_text(key, interval['ci_upper'])}]" \
            if interval else text

    table = tabulate(
        [[first_cell(row), row["model_slug"], *(cell(row, key) for key in columns),
          ", ".join(flag for flag in row_flags(row) if not flag.startswith("floor"))] for row in rows],
        headers=[first, "model", *map(column_label, columns), "flags"],
        disable_numparse=True,
    )
    return "\n".join(_between_clusters(table.splitlines(), [row.get("cluster") for row in rows]))


def _between_clusters(lines: list[str], clusters: list[int | None]) -> list[str]:
    """A table's lines (header, rule, one line a row) with a blank line
    where the rows' cluster changes; as they are when a row took several
    lines or no row has a cluster."""
    header, body = lines[:2], lines[2:]
    if len(body) != len(clusters) or not any(cluster is not None for cluster in clusters):
        return lines
    spaced = []
    for index, (line, cluster) in enumerate(zip(body, clusters)):
        if index and cluster != clusters[index - 1]:
            spaced.append("")
        spaced.append(line)
    return header + spaced


def _no_run(board, args) -> str:
    """An empty board in one line (it has no version to name nor row to
    show), with what the flags left out."""
    where = f" on corpus version {board.corpus_version[:12]}" if board.corpus_version else ""
    left_out = ["--official: only runs scored against a registered holdout or gold corpus"] if args.official else []
    if not args.include_disqualified:
        left_out.append("disqualified runs only with --include-disqualified")
    return f"{board.dataset_id}: no run to rank{where} ({'; '.join(left_out + ['held runs once cleared'])})"


def _board_title(board, args) -> str:
    if not split_floor(board.rows)[0]:
        return _no_run(board, args)
    order = "lowest" if args.ascending else "highest"
    return f"{board.dataset_id}, corpus version {board.corpus_version[:12]}, by {board.sort} ({order} first)"


def _leaderboard_page(client: Client, board, args) -> int:
    """The board as an HTML page, with each row's run card (apps/report)."""
    from apps.report import write_leaderboard_page

    cards = [client.show(row["run_id"]) for row in board.rows]
    write_leaderboard_page(board.rows, cards, Path(args.out), _board_title(board, args), sort=board.sort,
                           ranks_note=board.ranks_note)
    print(f"leaderboard page ({len(board.rows)} rows) written to {args.out}", file=sys.stderr)
    return 0
