"""MQM scoring against the published scores (issue 36): the WMT21 TED en-de
expert MQM annotations (../shared/data/mqm-ted-ende, Apache-2.0), one error a
row, scored by gateway/review/mqm.py as `meta-eval --format mqm-errors`
reads them, compared with the release's own average segment scores
(`mqm_ted_ende.avg_seg_scores.tsv`, six decimals): every (system, segment)
must give the same text, and the segments it calls None must have no
annotation. The release names the reference translation `ref` among the
annotations and `ref-A` among the scores. Exit 1 on any difference.

Usage: python bench/mqm_ted.py [--data DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apps.meta_eval.human_judgments import NOT_JUDGED, read_judgments  # noqa: E402

DATA = Path(os.environ.get("CHAMPOLLION_SHARED", REPO.parent / "shared")) / "data" / "mqm-ted-ende"
# The scores file's name for a system the annotations name otherwise.
RENAMED = {"ref-A": "ref"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    errors, published = args.data / "mqm_ted_ende.tsv", args.data / "mqm_ted_ende.avg_seg_scores.tsv"
    if not errors.exists():
        print(f"no MQM data in {args.data}", file=sys.stderr)
        return 1
    computed = read_judgments(errors, "mqm-errors").scores
    same, unjudged, different = 0, 0, []
    for line in published.read_text(encoding="utf-8").splitlines()[1:]:
        system, rest = line.split("\t")
        score, segment = rest.split(" ")
        ours = computed.get(RENAMED.get(system, system), {}).get(segment)
        if score == NOT_JUDGED:
            unjudged += ours is None
            if ours is not None:
                different.append((system, segment, score, ours))
        elif ours is not None and f"{ours:.6f}" == score:
            same += 1
        else:
            different.append((system, segment, score, ours))
    systems = len({system for system in computed})
    print(f"{errors.name}: {sum(len(s) for s in computed.values())} scored (system, segment) pairs of {systems} "
          f"systems; against {published.name}: {same} scores identical to six decimals, {unjudged} None "
          f"unannotated, {len(different)} different")
    for system, segment, score, ours in different[:10]:
        print(f"  {system} segment {segment}: published {score}, computed {ours}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
