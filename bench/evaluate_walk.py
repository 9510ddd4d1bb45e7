"""The walk of one `champollion evaluate` through the project's files
(issue 35): the command run in this process, every Python call made in its
thread while cmd_evaluate runs recorded (sys.setprofile), kept when its code
is in the project's packages (apps, gateway, services, eval_standards,
champollion.core; not the generated contract, not a module's import), and
read as a sequence of files.

  python -m bench.evaluate_walk [EVALUATE ARGS...]

Default arguments: the example run (examples/eng-spa), BLEU only, no store.
The command is run twice and the second run is the one walked: the first
starts the background stack of this tree's code (apps/launch/background.py),
which the second finds, as a user's next command does. The stack's gateway
runs in a process of its own: the walk is the command's and the client's
side. The stack stops itself after its idle time (or `champollion serve
--status` names it, to stop by its pid).

Printed, for two readings of the calls:
- calls: every call in order; a stay is a stretch of calls in one file, a
  return a stay in a file already left before (loops count each time);
- functions: each function at its first call only, in that order (what the
  issue counts: a loop over entries is one visit).
stays = files + returns in each. To compare two trees, run it with each on
PYTHONPATH (the tree's own `apps`)."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import apps
import apps.cli.scoring as scoring
from apps.cli import main

ROOT = Path(apps.__file__).resolve().parent.parent
PACKAGES = tuple(str(ROOT / name) + "/" for name in ("apps", "gateway", "services", "eval_standards",
                                                      "champollion/core"))
EXAMPLE = ROOT / "examples" / "eng-spa"
DEFAULT_ARGS = ["evaluate", str(EXAMPLE / "corpus.json"), str(EXAMPLE / "predictions.jsonl"),
                "--meta", str(EXAMPLE / "meta.json"), "--glossary", str(EXAMPLE / "glossary.json"),
                "--metrics", "bleu", "--no-store", "--json"]


def _project_file(code) -> str | None:
    name = code.co_filename
    if code.co_name == "<module>" or not name.startswith(PACKAGES):
        return None
    return str(Path(name).relative_to(ROOT))


def walk_of(calls: list[tuple[str, object]]) -> dict:
    """Stays, files and returns of a sequence of (file, code) calls."""
    stays, seen, returns = [], set(), 0
    for file, _ in calls:
        if stays and stays[-1] == file:
            continue
        returns += file in seen
        seen.add(file)
        stays.append(file)
    return {"stays": len(stays), "files": len(seen), "returns": returns, "path": stays}


def main_walk(argv: list[str]) -> dict:
    calls: list[tuple[str, object]] = []
    thread = threading.get_ident()
    original = scoring.cmd_evaluate

    def profile(frame, event, arg):
        if event == "call" and threading.get_ident() == thread:
            file = _project_file(frame.f_code)
            if file is not None:
                calls.append((file, frame.f_code))

    def traced(args):
        sys.setprofile(profile)
        try:
            return original(args)
        finally:
            sys.setprofile(None)

    main(argv)  # the background stack started, if none ran
    scoring.cmd_evaluate = traced
    code = main(argv)
    first, once = set(), []
    for file, function in calls:
        if function not in first:
            first.add(function)
            once.append((file, function))
    return {"exit": code, "calls": walk_of(calls), "functions": walk_of(once)}


if __name__ == "__main__":
    found = main_walk(sys.argv[1:] or DEFAULT_ARGS)
    summary = {reading: {key: found[reading][key] for key in ("stays", "files", "returns")}
               for reading in ("calls", "functions")}
    print(json.dumps({"exit": found["exit"], **summary, "files_in_order": found["functions"]["path"]}, indent=1),
          file=sys.stderr)
