"""What the commands print for people: a run card's summary (evaluate, show),
several systems' paired comparison as one table (evaluate with several
--hyp), a comparison (compare), every pair of several systems (compare and
evaluate --all-pairs) and a description (describe). The machine form of
each is `--json`.

Colour only on a terminal, and never with $NO_COLOR set (no-color.org)."""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tabulate import tabulate

from gateway.card.display import column_label, metric_text
from gateway.card.metrics import METRICS

# At most this many warnings are printed; the card keeps them all.
WARNINGS_SHOWN = 12
# Metrics named on the "not requested" line; more are counted.
NAMES_LISTED = 6
# A stored run is named by this many characters of its id (any 6 or more do).
SHORT_ID = 12
TIER_NOTE = "heuristic"


class Style:
    """ANSI styles for a stream, or none: off when it is not a terminal or
    $NO_COLOR is set (to anything), or $TERM is dumb."""

    def __init__(self, stream=None):
        stream = stream if stream is not None else sys.stdout
        self.on = (hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ
                   and os.environ.get("TERM") != "dumb")

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on and text else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def good(self, text: str) -> str:
        return self._wrap("32", text)


def value_text(metric_id: str, value) -> str:
    """A metric value as printed: the metric table's decimals (sacreBLEU's
    percentages two, rates and scores four), "-" for none."""
    return metric_text(metric_id, value)


def interval_text(metric_id: str, interval) -> str:
    if not interval:
        return ""
    return f"[{value_text(metric_id, interval['ci_lower'])}, {value_text(metric_id, interval['ci_upper'])}]"


def dedupe(warnings: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(warnings))


def _requested(card: dict) -> set[str] | None:
    requested = card.get("requested") or []
    return set(requested) if requested else None


def heading(card: dict, run: bool = True) -> str:
    """The corpus a card is on; with `run`, the run's model and condition."""
    dataset = card.get("dataset") or {}
    scores = card.get("scores") or {}
    parts = [dataset.get("id") or "?", dataset.get("language_pair") or "?",
             f"version {(dataset.get('version') or '?')[:SHORT_ID]}", f"{scores.get('total', 0)} entries"]
    if scores.get("errors"):
        parts.append(f"{scores['errors']} failed")
    if run and card.get("model_slug"):
        parts.append(f"model {card['model_slug']}")
    if run and card.get("condition"):
        parts.append(card["condition"])
    return " · ".join(parts)


def _composite_line(card: dict) -> str:
    scores = card.get("scores") or {}
    coverage = card.get("composite_coverage") or {}
    intervals = scores.get("confidence_intervals") or {}
    composite = scores.get("composite")
    text = f"composite {'-' if composite is None else f'{composite:.4f}'}"
    if intervals.get("composite"):
        text += f" {interval_text('composite', intervals['composite'])}"
    text += f" · tier {scores.get('quality_tier', '-')} ({TIER_NOTE})"
    weights, missing = coverage.get("weights") or {}, coverage.get("missing") or []
    not_requested = coverage.get("not_requested") or []
    text += f" · coverage: profile {coverage.get('profile', '?')}, {len(weights)} of {len(weights) + len(missing)} metrics"
    absent = [metric for metric in missing if metric not in not_requested]
    notes = ([f"missing {', '.join(absent)}"] if absent else []) + (
        [f"{len(not_requested)} not requested"] if not_requested else [])
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _adequacy_line(card: dict) -> str | None:
    """adequacy_rate with its interval and the entries each gate refused
    (docs/scoring.md, "Adequacy gates"); None for a card without the block."""
    adequacy = card.get("adequacy")
    if not adequacy or adequacy.get("rate") is None:
        return None
    interval = ((card.get("scores") or {}).get("confidence_intervals") or {}).get("adequacy_rate")
    text = f"adequacy {adequacy['rate']:.4f}" + (f" {interval_text('adequacy_rate', interval)}" if interval else "")
    if not adequacy["inadequate"]:
        return text + " · every output passed the adequacy gates"
    gates = ", ".join(f"{gate} {count}" for gate, count in adequacy["gates"].items() if count)
    return (text + f" · {adequacy['inadequate']} of {adequacy['entries']} outputs are not translations of their "
            f"source ({gates}): they enter the composite at their worst")


def _ladder_line(card: dict) -> str | None:
    """What the public board's Ladder releases about a holdout or gold run
    (a non-maintainer's only score of it: docs/integrity-and-access.md)."""
    ladder = card.get("ladder")
    if not ladder:
        return None
    released = "-" if ladder.get("released") is None else value_text(ladder["metric"], ladder["released"])
    margin = "" if ladder.get("margin") is None else f" (margin {value_text(ladder['metric'], ladder['margin'])})"
    outcome = ("this run takes the lead once published" if ladder.get("stepped") else
               "this run does not beat the leader by the margin")
    return f"public board (Ladder, {ladder['metric']}): {released}{margin} · {outcome}"


def card_summary(card: dict, style: Style, warnings_shown: int = WARNINGS_SHOWN) -> list[str]:
    """A run card in at most about 40 lines: the run, each metric with a
    value (value, 95% CI, signature), the metrics without one, composite,
    tier and coverage, then the warnings, each once."""
    scores = card.get("scores") or {}
    intervals = scores.get("confidence_intervals") or {}
    signatures = card.get("signatures") or {}
    requested = _requested(card)
    rows, signed, null, not_requested = [], [], [], []
    for metric_id in METRICS:
        value = scores.get(metric_id)
        if value is None:
            (not_requested if requested is not None and metric_id not in requested else null).append(metric_id)
            continue
        label = metric_id
        if metric_id == "comet_score" and scores.get("comet_model"):
            label += f" ({scores['comet_model']})"
        rows.append([label, value_text(metric_id, value), interval_text(metric_id, intervals.get(metric_id))])
        signed.append(signatures.get(metric_id, ""))
    lines = [style.bold(heading(card))]
    if rows:
        # The signature last, outside the table: its rule stays as wide as the numbers.
        table = tabulate(rows, headers=["metric", "value", "95% CI"], tablefmt="simple", disable_numparse=True)
        head, rule, *body = table.splitlines()
        width = len(rule)
        lines += [f"{head.ljust(width)}  signature", f"{rule}  ---------"]
        lines += [f"{line.ljust(width)}  {style.dim(signature)}".rstrip() for line, signature in zip(body, signed)]
    lines += _cost_and_speed(card)
    if not_requested:
        lines.append(f"not requested: {', '.join(not_requested)}" if len(not_requested) <= NAMES_LISTED else
                     f"not requested: {len(not_requested)} other metrics (see `--metrics`)")
    if null:
        lines.append(f"null: {', '.join(null)} (see warnings)")
    for line in (_adequacy_line(card), _ladder_line(card)):
        if line:
            lines.append(line)
    lines.append(style.bold(_composite_line(card)))
    lines += warning_lines(card.get("warnings") or [], style, warnings_shown)
    return lines


def _cost_and_speed(card: dict) -> list[str]:
    """One line of what the run cost and how fast it went, when known."""
    totals, scores = card.get("totals") or {}, card.get("scores") or {}
    parts = []
    if totals.get("total_cost_usd") is not None:
        parts.append(f"cost ${totals['total_cost_usd']:.4g} ({totals.get('cost_per_entry_usd') or 0:.3g} an entry)")
    if scores.get("avg_latency_seconds") is not None:
        parts.append(f"latency {scores['avg_latency_seconds']:.3g} s average, "
                     f"{scores.get('p95_latency_seconds') or 0:.3g} s p95")
    if scores.get("tokens_per_second") is not None:
        parts.append(f"{scores['tokens_per_second']:.3g} tokens/s")
    return [" · ".join(parts)] if parts else []


def warning_lines(warnings: Sequence[str], style: Style, shown: int = WARNINGS_SHOWN,
                  not_requested_too: bool = False) -> list[str]:
    """The warnings, each once; those that only say which metrics a run did
    not ask for are left out (the summary lists those metrics)."""
    unique = [warning for warning in dedupe(warnings) if not_requested_too or ": not requested: " not in warning]
    if not unique:
        return []
    lines = [style.warn(f"warnings ({len(unique)}):")]
    lines += [f"  {style.warn('!')} {warning}" for warning in unique[:shown]]
    if len(unique) > shown:
        lines.append(f"  ... {len(unique) - shown} more in the run card's warnings")
    return lines


def short_id(run_id: str) -> str:
    return run_id[:SHORT_ID]


# --- several systems: the paired comparison table ------------------------------

def _cell(metric_id: str, card: dict) -> str:
    scores = card.get("scores") or {}
    value = scores.get(metric_id)
    interval = (scores.get("confidence_intervals") or {}).get(metric_id)
    text = value_text(metric_id, value)
    return f"{text} {interval_text(metric_id, interval)}" if interval else text


def comparison_table(names: Sequence[str], cards: Sequence[dict], comparisons: Sequence[dict],
                     style: Style) -> list[str]:
    """The systems as sacreBLEU's --paired-bs / --paired-ar print them: the
    baseline first, then each system with its p-value against the baseline
    under each value (* where significant)."""
    compared = [metric for metric in (*METRICS, "composite")
                if any(metric in comparison["metrics"] for comparison in comparisons)]
    headers = ["system", *map(column_label, compared)]
    rows = [[f"Baseline: {names[0]}", *(_cell(metric, cards[0]) for metric in compared)]]
    for name, card, comparison in zip(names[1:], cards[1:], comparisons):
        rows.append([name, *(_cell(metric, card) for metric in compared)])
        tests = comparison["metrics"]
        rows.append(["", *(_p_text(tests.get(metric)) for metric in compared)])
    table = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True,
                     colalign=("left", *("center",) * len(compared)))
    test = comparisons[0]["test"] if comparisons else {}
    method = {"bs": "paired bootstrap", "ar": "paired approximate randomization"}.get(test.get("method"), "")
    samples = "resamples" if test.get("method") == "bs" else "trials"
    rule = "p < 0.05 and the difference's 95% CI excludes 0" if test.get("method") == "bs" else \
        "p < 0.05 and a non-zero difference"
    lines = [line.rstrip() for line in table.splitlines()]
    lines.append(style.dim(f"values: the run's value [95% bootstrap CI]; (p = ...): {method} against the baseline, "
                           f"{test.get('samples')} {samples}, seed {test.get('seed')}; * significant: {rule}"))
    return lines


def _p_text(test: dict | None) -> str:
    if not test:
        return "(no test)"
    return f"(p = {test['p_value']:.4f}){'*' if test['significant'] else ''}"


# --- compare ----------------------------------------------------------------------

def comparison_summary(comparison: dict, baseline: str, system: str, style: Style) -> list[str]:
    """`compare`'s table: per metric both values, the difference, its CI
    (bs), the p-value and the verdict."""
    test = comparison.get("test") or {}
    order = [*METRICS, "composite"]
    rows = []
    for metric_id in sorted(comparison.get("metrics") or {}, key=lambda m: order.index(m) if m in order else 99):
        result = comparison["metrics"][metric_id]
        rows.append([metric_id, value_text(metric_id, result["baseline"]), value_text(metric_id, result["system"]),
                     f"{'+' if result['difference'] >= 0 else ''}{value_text(metric_id, result['difference'])}",
                     interval_text(metric_id, result.get("difference_ci")), f"{result['p_value']:.4f}",
                     style.good("yes") if result["significant"] else "no"])
    method = {"bs": "paired bootstrap", "ar": "paired approximate randomization"}.get(test.get("method"), "?")
    lines = [style.bold(f"{system} against {baseline} · corpus version "
                        f"{(comparison.get('dataset_version') or '?')[:SHORT_ID]} · {method}, {test.get('samples')} "
                        f"{'resamples' if test.get('method') == 'bs' else 'trials'}, seed {test.get('seed')}")]
    table = tabulate(rows, headers=["metric", "baseline", "system", "difference", "95% CI of difference", "p",
                                    "significant"], tablefmt="simple", disable_numparse=True)
    lines += [line.rstrip() for line in table.splitlines()]
    lines += warning_lines(comparison.get("warnings") or [], style)
    return lines


# --- all pairs (compare / evaluate --all-pairs) ------------------------------------

CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "uncorrected"}


def _share(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _rank_text(ranks: dict) -> str:
    return str(ranks["best"]) if ranks["best"] == ranks["worst"] else f"{ranks['best']}-{ranks['worst']}"


def _signed(metric_id: str, value: float) -> str:
    return f"{'+' if value >= 0 else ''}{value_text(metric_id, value)}"


def pairs_summary(result: dict, metric_ids: Sequence[str], style: Style) -> list[str]:
    """Every pair of several systems (ComparePairs's answer), per metric of
    `metric_ids`: the systems best first with their value, significance
    cluster and rank range, the matrix of corrected p-values (* where
    significant), and each pair's difference, p-values and win/tie/loss
    shares, the better system of the pair first."""
    test, names = result["test"], result["names"]
    correction = test.get("correction") or "holm"
    method = {"bs": "paired bootstrap", "ar": "paired approximate randomization"}.get(test.get("method"), "?")
    samples = "resamples" if test.get("method") == "bs" else "trials"
    lines = [style.bold(f"{len(names)} systems, every pair · corpus version "
                        f"{(result.get('dataset_version') or '?')[:SHORT_ID]} · {method}, {test.get('samples')} "
                        f"{samples}, seed {test.get('seed')} · p-values corrected: "
                        f"{CORRECTION_NAMES.get(correction, correction)}")]
    for metric_id in metric_ids:
        lines += ["", *_metric_pairs(metric_id, result["metrics"][metric_id], names, correction, style)]
    lines += ["", style.dim(
        f"p: each pair's {method} p-value, as `compare` gives it; p ({correction}): corrected over the metric's "
        f"pairs; * significant: corrected p < {test.get('alpha', 0.05)} and a non-zero difference; wins, ties, "
        f"losses: shares of the entries where the first system's value is higher by more than "
        f"{test.get('tie_threshold', 0):g} (--tie-threshold), within it, lower; clusters: a new one starts at the "
        f"first system some system of the current cluster is significantly better than")]
    lines += warning_lines(result.get("warnings") or [], style)
    return lines


def _metric_pairs(metric_id: str, block: dict, names: Sequence[str], correction: str, style: Style) -> list[str]:
    from gateway.card.pairs import ranked  # numpy's: only when pairs are printed

    runs = ranked(block)
    intervals = block.get("ci") or []

    def p_cell(run: int, other: int) -> str:
        pair = runs.seen[run, other]
        return f"{pair.p_corrected:.4f}{'*' if pair.significant else ' '}"

    rows = []
    for number, run in enumerate(runs.order, start=1):
        value = value_text(metric_id, block["values"][run])
        if intervals:
            value += f" {interval_text(metric_id, intervals[run])}"
        rows.append([f"{number} {names[run]}", value, block["clusters"][run], _rank_text(block["rank_ranges"][run]),
                     *("—" if other == run else p_cell(run, other) for other in runs.order)])
    matrix = tabulate(rows, headers=["system", "value", "cluster", "rank", *map(str, range(1, len(rows) + 1))],
                      tablefmt="simple", disable_numparse=True)
    lines = [style.bold(f"{metric_id} ({'higher' if block['higher_is_better'] else 'lower'} is better): "
                        f"p ({correction}) of each pair")]
    lines += [line.rstrip() for line in matrix.splitlines()]
    pairs = []
    for run, other in runs.pairs():
        pair = runs.seen[run, other]
        pairs.append([f"{names[run]} vs {names[other]}", _signed(metric_id, pair.difference), f"{pair.p_value:.4f}",
                      p_cell(run, other).rstrip(), _share(pair.wins), _share(pair.ties), _share(pair.losses)])
    table = tabulate(pairs, headers=["pair", "difference", "p", f"p ({correction})", "wins", "ties", "losses"],
                     tablefmt="simple", disable_numparse=True)
    return lines + [""] + [line.rstrip() for line in table.splitlines()]


# --- describe ---------------------------------------------------------------------

def description_summary(description: dict, style: Style) -> list[str]:
    lines = [style.bold(f"gateway {description.get('version', '?')}")]
    rows = []
    for family in description.get("families") or []:
        metrics = ((family.get("description") or {}).get("metrics")) or []
        status = "reachable" if family.get("reachable") else (family.get("error") or "unreachable")
        rows.append([family["family"], status, family.get("address") or "", ", ".join(metrics)])
    table = tabulate(rows, headers=["family", "status", "address", "metrics"], tablefmt="simple",
                     disable_numparse=True)
    lines += [line.rstrip() for line in table.splitlines()]
    languages = description.get("languages") or []
    lines.append(f"{len(languages)} languages: " + ", ".join(
        f"{language['code']} ({language['profile']})" for language in languages))
    return lines


def languages_summary(description: dict, style: Style) -> list[str]:
    """`describe --languages`: every written card, then how any other
    language is scored."""
    rows = [[language["code"], language.get("name", ""), ", ".join(language.get("aliases") or []),
             ", ".join(language.get("scripts") or []), language.get("profile", ""),
             language.get("bleu_tokenizer", "")] for language in description.get("languages") or []]
    table = tabulate(rows, headers=["code", "name", "aliases", "scripts", "profile", "BLEU tokenizer"],
                     tablefmt="simple", disable_numparse=True)
    lines = [style.bold(f"{len(rows)} written language cards")]
    lines += [line.rstrip() for line in table.splitlines()]
    generic = description.get("generic_card")
    if generic:
        lines += ["", f"any other language: {generic}"]
    return lines


def emit(lines: Sequence[str], stream=None) -> None:
    print("\n".join(lines), file=stream if stream is not None else sys.stdout)
