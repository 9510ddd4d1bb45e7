"""`champollion review`: the runs a gateway holds for a maintainer's review
(on a holdout or gold corpus: a run whose own texts contain an entry, or
whose predictions nearly duplicate an earlier run of the same token), and
the decision on each: clear (it joins the leaderboard) or disqualify."""
from __future__ import annotations

import sys

from tabulate import tabulate

from champollion.apps.cli.common import reading_client, write_json


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


def cmd_review_decide(args) -> int:
    with reading_client(args) as client:
        run = client.review_run(args.run_id, args.decision, args.note)
    print(f"run {run['run_id']} is {run['review']}", file=sys.stderr)
    return 0
