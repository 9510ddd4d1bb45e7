"""`champollion corpus check`: a corpus against the design framework's rules
(README "Corpus check"). A CORPUS that is a file is checked here (the check
is the gateway's code, imported only by this command); anything else names
a registered corpus, checked by the gateway (CheckCorpus, maintainers only)
with its stored references and tier history."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from apps.cli.common import EXIT_FAILURE, EXIT_INVALID_INPUT, CliError, reading_client, write_json
from apps.inputs import InputError, load_corpus, load_run_card, load_run_card_for_compare

# The purpose a corpus file is checked for unless --purpose says otherwise
# (a registered version: its tier).
DEFAULT_FILE_PURPOSE = "holdout"


def _percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _signed_points(value) -> str:
    return "" if value is None else f"{value * 100:+.1f}"


def _result(rule: dict) -> str:
    return {True: "pass", False: "FAIL" if rule["severity"] == "required" else "advice", None: "n/a"}[rule["passed"]]


def print_check(report: dict) -> None:
    """The report as tables on stdout."""
    corpus = report["corpus"]
    failing = len(report["failures"])
    version = f" version {corpus['number']} ({corpus['tier']})" if corpus.get("number") else ""
    verdict = "passes" if report["passed"] else f"FAILS {failing} required rule{'s' if failing != 1 else ''}"
    print(f"corpus {corpus['id']}{version} ({corpus['source_lang']}->{corpus['target_lang']}), "
          f"{report['distribution']['entries']} entries, checked for {report['purpose']}: {verdict}\n")
    print(tabulate([[rule["rule"], rule["severity"], _result(rule), rule["finding"]] for rule in report["rules"]],
                   headers=["rule", "severity", "result", "finding"], disable_numparse=True))
    for key, title in (("domains", "domain"), ("difficulty", "difficulty")):
        print()
        print(tabulate([[row["group"], row["count"], _percent(row["share"]), _percent(row["target"]),
                         _signed_points(row["deviation"])] for row in report["distribution"][key]],
                       headers=[title, "entries", "share", "target", "deviation (points)"], disable_numparse=True))
    phenomena = report["phenomena"]
    print()
    print(tabulate([[row["title"], row["origin"], row["entries"], ", ".join(row["labels"])]
                    for row in phenomena["phenomena"]],
                   headers=["phenomenon", "from", "entries", "labels"], disable_numparse=True))
    if phenomena["other_labels"]:
        print("other labels: " + ", ".join(f"{label} {n}" for label, n in phenomena["other_labels"].items()))
    _print_references(report["references"])
    _print_coverage(report["analyzer_coverage"])
    _print_power(report["power"])
    if report.get("floor"):
        _print_floor(report["floor"])
    rotation = report.get("rotation")
    if rotation:
        spans = " -> ".join(f"{span['tier']} ({span['since'][:10]})" for span in rotation["history"])
        print(f"\nrotation: {spans}; {rotation['months_in_tier']} months as {rotation['tier']}"
              + (f"; {rotation['advice']}" if rotation.get("advice") else ""))


def _print_references(references: dict) -> None:
    dual, review = references["dual_references"], references["review"]
    fields = references["provenance"]["fields"]
    total = references["acceptable_variants"]["with_variants"] + references["acceptable_variants"]["without"]
    print(f"\nreferences: second reference on {dual['with_second_reference']} of {dual['entries']} tier "
          f"{dual['tiers'][0]}-{dual['tiers'][-1]} entries; variants on "
          f"{references['acceptable_variants']['with_variants']} of {total}; reviewed by another person on "
          f"{review['reviewed_by_another']} of {total}")
    print("provenance given: " + ", ".join(f"{name} {counts['given']}/{total}" for name, counts in fields.items()))
    licences = references["licences"]
    print("licences: " + ("; ".join(f"{kind}: " + ", ".join(f"{name} ({n})" for name, n in found.items())
                                     for kind, found in licences.items()) or "none given"))
    recency = references["recency"]
    dated = ", ".join(f"{name} {n}" for name, n in recency["dated_by"].items() if n)
    print(f"recency: dated by {dated or 'nothing'}; {recency['undated']} undated; {len(recency['older'])} older "
          f"than {recency['older_than_years']} years")
    duplicates = references["duplicates"]
    print("duplicates: " + ", ".join(f"{key.replace('_', ' ')} {len(groups)}" for key, groups in duplicates.items()))


def _print_coverage(coverage: dict) -> None:
    if not coverage.get("analyzer"):
        print(f"\nanalyzer coverage ({coverage['language']}): {coverage.get('note')}")
        return
    top = ", ".join(f"{item['word']} {item['count']}" for item in coverage["top_rejected"])
    print(f"\nanalyzer coverage ({coverage['language']}, {coverage['analyzer']}): {coverage['rejected']} of "
          f"{coverage['words']} reference words rejected ({_percent(coverage['rejected_share'])}), "
          f"{coverage['rejected_types']} word types" + (f": {top}" if top else ""))
    for caveat in coverage["caveats"]:
        print(f"  caveat: {caveat}")


def _value(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _print_floor(floor: dict) -> None:
    """The floor (best floor run) and the stored systems' headroom above it, per composite metric."""
    print(f"\nfloor: {floor['floor_runs']} floor runs, {floor['systems']} stored systems (pilots) on this version")
    if not floor["floor_runs"]:
        print("no floor runs stored for this version yet")
        return
    print(tabulate([[metric, _value(row["floor"]), row["floor_kind"] or "-", _value(row["lowest"]),
                     _value(row["highest"]), _value(row["headroom_lowest"]), _value(row["headroom_highest"]),
                     {True: "UNINFORMATIVE", False: "ok", None: "-"}[row["uninformative"]]]
                    for metric, row in floor["metrics"].items()],
                   headers=["metric", "floor", "floor kind", "systems lowest", "systems highest",
                            "headroom (lowest)", "headroom (highest)", "verdict"], disable_numparse=True))
    if floor["uninformative"]:
        print(f"uninformative on this corpus (best system less than {floor['threshold_share']:.0%} of the scale "
              f"above the floor): {', '.join(floor['uninformative'])}")


def _print_power(power: dict) -> None:
    if "pairs" not in power:
        print(f"\npower ({power['method']}): {power['says']}")
        return
    print(f"\npower ({power['method']})")
    print(tabulate([[pair["baseline"], pair["system"],
                     *(f"{pair['detectable'][m]:.3g}" if pair["detectable"].get(m) is not None else "-"
                       for m in power["units"]),
                     *(f"{pair['pilot_difference'].get(m, float('nan')):+.3g}" for m in power["units"])]
                    for pair in power["pairs"]],
                   headers=["baseline", "system", *(f"detectable {unit}" for unit in power["units"].values()),
                            *(f"pilot difference {metric}" for metric in power["units"])], disable_numparse=True))
    print("median: " + ", ".join(f"{unit} {power[m]:.3g}" if power.get(m) is not None else f"{unit} -"
                                 for m, unit in power["units"].items()))


def _corpus_dict(path: Path) -> dict:
    """The corpus file as the gateway keeps a registered one, its entries
    checked as RegisterCorpus checks them."""
    from gateway.server.corpora import checked_entries
    from gateway.server.validation import InvalidRun

    try:
        corpus = load_corpus(path)
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    try:
        entries = checked_entries(corpus.entries, set())
    except InvalidRun as error:
        raise CliError(f"{path}: {error}", EXIT_INVALID_INPUT) from None
    if not entries:
        raise CliError(f"{path}: entries: the corpus has none", EXIT_INVALID_INPUT)
    return {"id": corpus.id or path.stem, "source_lang": corpus.source_lang, "target_lang": corpus.target_lang,
            "entries": entries}


def _read_card(path: str, read):
    try:
        return read(Path(path))
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None


def _check_file(path: Path, args) -> dict:
    from champollion.core.analyzers import AnalyzerRegistry
    from champollion.core.cards import default_registry
    from gateway.corpus_check import PilotRefused, check_corpus, pilot_from_card

    corpus = _corpus_dict(path)
    for pilot in args.pilot:
        if not Path(pilot).is_file():
            raise CliError(f"--pilot: {pilot}: no such run card file (stored run ids go with a registered corpus)",
                           EXIT_INVALID_INPUT)
    try:
        pilots = [pilot_from_card(pilot, _read_card(pilot, load_run_card)) for pilot in args.pilot]
        return check_corpus(corpus, args.purpose or DEFAULT_FILE_PURPOSE, default_registry(), AnalyzerRegistry(),
                            pilots or None)
    except PilotRefused as error:
        raise CliError(f"--pilot: {error}", EXIT_INVALID_INPUT) from None


def _check_registered(args) -> dict:
    cards = [_read_card(pilot, load_run_card_for_compare) for pilot in args.pilot if Path(pilot).is_file()]
    run_ids = [pilot for pilot in args.pilot if not Path(pilot).is_file()]
    with reading_client(args) as client:
        _, report = client.check_corpus(args.corpus, args.version, args.purpose, run_ids, cards)
    return report


def cmd_corpus_check(args) -> int:
    if bool(args.html) != bool(args.out):
        raise CliError("--html and -o/--out go together: --html -o CHECK.html", EXIT_INVALID_INPUT)
    path = Path(args.corpus)
    if path.is_file():
        if args.version:
            raise CliError("--version: names a version of a registered corpus, not of a file", EXIT_INVALID_INPUT)
        report = _check_file(path, args)
    else:
        report = _check_registered(args)
    if args.html:
        from apps.report.corpus_check import write_corpus_check

        write_corpus_check(report, Path(args.out))
    if args.json:
        write_json(report, None)
    else:
        print_check(report)
    # A failed rule is a finding, not bad input: exit 1, as linters do.
    return EXIT_FAILURE if args.strict and not report["passed"] else 0
