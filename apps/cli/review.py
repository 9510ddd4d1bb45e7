"""`champollion review`: the runs a gateway holds for a maintainer's review
(on a holdout or gold corpus: a run whose own texts contain an entry, or
whose predictions nearly duplicate an earlier run of the same token), and
the decision on each: clear (it joins the leaderboard) or disqualify."""
from __future__ import annotations

import sys

from tabulate import tabulate

from apps.cli.common import EXIT_INVALID_INPUT, CliError, reading_client, write_json


def cmd_review_list(args) -> int:
    with reading_client(args) as client:
        held = client.held_runs(args.dataset)
    if args.json:
        write_json(held, None)
    elif not held:
        print("no run is held for review", file=sys.stderr)
    else:
        print(tabulate([[run["run_id"], run["created_at"], run["dataset_id"], run.get("submitted_by") or "-",
                         run.get("model_slug") or "-", "; ".join(run["reasons"])] for run in held],
                       headers=["run_id", "created_at", "dataset", "token", "model", "reasons"]))
    return 0


# How the gateway begins the one reason of a run held with nothing found, only
# because every secret-tier submission waits for publication
# (gateway/server/submissions.py PENDING_REASON; tests/test_gaming.py holds them together).
PENDING_PREFIX = "pending: nothing found"


def cmd_review_decide(args) -> int:
    pending = getattr(args, "pending", False)
    if pending == bool(args.run_id):
        raise CliError("give a run id or --pending (every run held with nothing found), not both",
                       EXIT_INVALID_INPUT)
    if getattr(args, "dataset", None) and not pending:
        raise CliError("--dataset goes with --pending", EXIT_INVALID_INPUT)
    with reading_client(args) as client:
        if not pending:
            run = client.review_run(args.run_id, args.decision, args.note)
            print(f"run {run['run_id']} is {run['review']}", file=sys.stderr)
            return 0
        # A batch, published oldest first: the Ladder takes runs in the order they are cleared.
        held = sorted(client.held_runs(args.dataset), key=lambda run: run["created_at"])
        batch = [run for run in held if run["reasons"] and all(r.startswith(PENDING_PREFIX) for r in run["reasons"])]
        for run in batch:
            client.review_run(run["run_id"], args.decision, args.note)
    print(f"{len(batch)} pending runs published; {len(held) - len(batch)} held runs with findings left for review",
          file=sys.stderr)
    return 0


# --- community review campaigns (docs/community-review.md) ---------------------------

def cmd_review_create(args) -> int:
    with reading_client(args) as client:
        campaign = client.create_campaign(args.name, args.runs, args.reviewers, items=args.items,
                                          overlap=args.overlap, seed=args.seed,
                                          reference_review=args.reference_review, protocol=args.protocol,
                                          prefill=args.prefill, prefill_share=args.prefill_share)
    if args.json:
        write_json(campaign, None)
    else:
        print(campaign["campaign_id"])
    print(f"campaign {campaign['campaign_id']} ({campaign['name']!r}): {campaign['items']} items of "
          f"{campaign['corpus_id']} over {len(campaign['systems'])} runs, {campaign['overlap']} reviewers per item "
          f"({', '.join(campaign['reviewers'])}), protocol {campaign.get('protocol', 'da')}, suggestions "
          f"{campaign.get('prefill', 'none')}; reviewers rate on the web front (`champollion web`)",
          file=sys.stderr)
    return 0


def cmd_review_campaigns(args) -> int:
    with reading_client(args) as client:
        campaigns = client.campaigns()
    if args.json:
        write_json(campaigns, None)
    elif not campaigns:
        print("no review campaign", file=sys.stderr)
    else:
        print(tabulate([[c["campaign_id"], c["name"], c["corpus_id"], len(c["systems"]), ", ".join(c["reviewers"]),
                         c["items"], f"{c['tasks_done']}/{c['tasks']}", c["state"]] for c in campaigns],
                       headers=["campaign", "name", "corpus", "systems", "reviewers", "items", "done", "state"]))
    return 0


def cmd_review_results(args) -> int:
    if args.out and not args.tsv:
        raise CliError("-o/--out: with --tsv (the judgments file)", EXIT_INVALID_INPUT)
    if args.tsv and args.json:
        raise CliError("--tsv and --json: choose one", EXIT_INVALID_INPUT)
    with reading_client(args) as client:
        campaign = client.campaign_results(args.campaign_id)
    results = campaign["results"]
    if args.json:
        write_json(campaign, None)
        return 0
    if results is None:
        raise CliError(f"campaign {campaign['campaign_id']} has no ratings yet", EXIT_INVALID_INPUT)
    if args.tsv:
        from gateway.review.results import judgments_tsv  # plain text from the results: no store, no gateway

        text = judgments_tsv(results)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as out:
                out.write(text)
        else:
            sys.stdout.write(text)
        return 0
    print(f"campaign {campaign['campaign_id']} ({campaign['name']}): {results['items']} items, "
          f"{results['reviewers_per_item']['min']}+ reviewers per item; Krippendorff's alpha "
          f"{_number(results['alpha']['da'])} (scores), {_number(results['alpha']['usable'])} (usable verdicts)")
    print(tabulate([[s["rank"], s["system"][:12], s.get("model_slug") or "-", s["items"], _number(s["mean"]),
                     _interval(s["mean_ci"]), _number(s["z"]), _interval(s["z_ci"]), _number(s["usable_share"]),
                     "yes" if s["validates"] else "no: " + "; ".join(s["reasons"])] for s in results["systems"]],
                   headers=["rank", "run", "model", "items", "mean", "95% CI", "z", "z 95% CI", "usable", "validates"],
                   disable_numparse=True))
    print(tabulate([[r["reviewer"], r["ratings"], r["control_pairs"], _number(r["p_value"]),
                     {None: "not enough controls", True: "reliable", False: "unreliable"}[r["reliable"]]
                     + (" (excluded)" if r["excluded"] else ""), *_wmt_columns(r)] for r in results["raters"]],
                   headers=["reviewer", "ratings", "control pairs", "p", "verdict", *WMT_HEADERS],
                   disable_numparse=True))
    _print_mqm(results)
    if results.get("detectors"):
        _print_detectors(results["detectors"])
    return 0


# WMT's checks beside ours (gateway/review/quality.py): Mann-Whitney U of BAD vs REF, and repeat consistency.
WMT_HEADERS = ["WMT p (BAD<REF)", "WMT", "repeats", "repeat |diff|", "within tol."]


def _wmt_columns(rater: dict) -> list[str]:
    wmt = rater.get("wmt")
    if wmt is None:
        return ["-"] * len(WMT_HEADERS)
    bad_ref, repeats = wmt["bad_ref"], wmt["repeats"]
    verdict = {None: "too few controls", True: "passes", False: "fails"}[bad_ref["passes"]]
    return [_number(bad_ref["p_value"]) if bad_ref["pairs"] else "-", verdict, str(repeats["pairs"]),
            _number(repeats["mean_abs_diff"]), _number(repeats["within_tolerance_share"])]


def _print_mqm(results: dict) -> None:
    """An mqm campaign's scores from its error spans (gateway/review/mqm.py)."""
    mqm = results.get("mqm")
    if not mqm:
        return
    print(f"MQM ({mqm['weights']}):")
    print(tabulate([[row["rank"], row["system"][:12], row["items"], _number(row["score"])] for row in mqm["systems"]],
                   headers=["rank", "run", "items", "MQM score"], disable_numparse=True))


def _print_detectors(report: dict) -> None:
    """The detectors judged by speakers (gateway/review/detectors.py): confirmed shares, unsuggested errors, bias."""
    print(f"detectors judged by speakers ({report['language']}):")
    print(tabulate([[name, row["metric"] or "-", row["judged"], row["accepted"], row["edited"], row["rejected"],
                     _number(row["confirmed_share"]), _interval(row["confirmed_ci"]),
                     _number(row.get("false_rejection_rate")), _interval(row.get("false_rejection_ci"))]
                    for name, row in report["detectors"].items()],
                   headers=["detector", "metric", "judged", "accepted", "edited", "rejected", "confirmed",
                            "95% CI", "false rejections", "95% CI"], disable_numparse=True))
    alone = report["unsuggested"]
    print("errors no detector suggested: " + "; ".join(
        f"{group.replace('_', ' ')} {alone[group]['unsuggested']} of {alone[group]['spans']} spans"
        for group in ("overall", "prefilled", "not_prefilled")))
    bias = report["prefill_bias"]
    for name, what in (("score", "mean score"), ("spans", "mean spans")):
        part = bias[name]
        print(f"prefill bias, {what}: {_number(part['with'])} with suggestions ({bias['outputs']['with']} outputs), "
              f"{_number(part['without'])} without ({bias['outputs']['without']}); difference "
              f"{_number(part['difference'])} (95% CI {_interval(part['difference_ci'])})")
    print(f"prefill bias, scores: Mann-Whitney U p = {_number(bias['score_mann_whitney_p'])}")
    for cited in report.get("cited") or []:
        print(f"cited: {cited['statement']}")


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _interval(pair) -> str:
    return "-" if not pair else f"{pair[0]:.4g} – {pair[1]:.4g}"


# --- campaigns that grow, their audit, the WMT export (issue 36; docs/community-review.md) ---------------------------

def cmd_review_export(args) -> int:
    with reading_client(args) as client:
        campaign, text = client.campaign_export(args.campaign_id, args.export_format)
    if campaign["results"] is None:
        raise CliError(f"campaign {campaign['campaign_id']} has no ratings yet", EXIT_INVALID_INPUT)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"{text.count(chr(10))} ratings of campaign {campaign['campaign_id']} written to {args.out} "
              f"({args.export_format})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_review_add_reviewers(args) -> int:
    with reading_client(args) as client:
        campaign = client.add_campaign_reviewers(args.campaign_id, args.reviewers)
    if args.json:
        write_json(campaign, None)
    print(f"campaign {campaign['campaign_id']}: " + ", ".join(f"{name} gets {items} items"
                                                               for name, items in campaign["added"].items()),
          file=sys.stderr)
    return 0


def cmd_review_extend(args) -> int:
    with reading_client(args) as client:
        campaign = client.extend_campaign(args.campaign_id, args.items)
    if args.json:
        write_json(campaign, None)
    print(f"campaign {campaign['campaign_id']}: {len(campaign['added'])} items added, {campaign['items']} in all",
          file=sys.stderr)
    return 0


def cmd_review_audit(args) -> int:
    with reading_client(args) as client:
        changes = client.campaign_audit(args.campaign_id)
    if args.json:
        write_json(changes, None)
    elif not changes:
        print(f"campaign {args.campaign_id}: no change since its creation", file=sys.stderr)
    else:
        print(tabulate([[change["at"], change["by"] or "-", change["action"], _details(change["details"])]
                        for change in changes], headers=["at", "by", "action", "details"], disable_numparse=True))
    return 0


def _details(details: dict) -> str:
    """An audit row's details on one line (a long list of entry ids: its length)."""
    return "; ".join(f"{key}: {len(value)} ids" if isinstance(value, list) and len(value) > 5 else f"{key}: {value}"
                     for key, value in details.items())
