"""The `corpus` commands: register, list, retire, promote, sources (check:
corpus_check.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tabulate import tabulate

from apps.cli.common import EXIT_INVALID_INPUT, CliError, reading_client, write_json
from apps.inputs import InputError, load_corpus
from champollion.core.tiers import RETIRED_TIERS, SECRET_TIERS


# How the gateway replaces, for a submitter, a secret tier's findings about its
# references and private metadata (gateway/server/access.py WITHHELD_FINDINGS).
WITHHELD_FINDINGS = "findings about the references and the corpus's private metadata withheld"


def _print_corpus(info: dict, note: str) -> None:
    """A corpus version as `corpus register/retire/promote` print it."""
    print(tabulate([["id", info["id"]], ["version", info["version"]], ["number", info["number"]],
                    ["tier", f"{info['tier']} (since {info['tier_since']})"], ["entries", info["entries"]]],
                   tablefmt="plain", disable_numparse=True))
    print(note, file=sys.stderr)


def cmd_corpus_register(args) -> int:
    path = Path(args.corpus)
    try:
        corpus = load_corpus(path)
    except InputError as error:
        raise CliError(str(error), EXIT_INVALID_INPUT) from None
    try:
        with reading_client(args) as client:
            info = client.register_corpus(corpus, args.tier, args.new_version, args.accept_check_failures)
    except CliError as error:
        if error.exit_code == EXIT_INVALID_INPUT and str(error).startswith("corpus."):
            raise CliError(f"{path}: {error}", EXIT_INVALID_INPUT) from None  # the field is the file's
        raise
    _print_corpus(info, f"registered as version {info['number']}{_accepted_note(info)}" if info["created"] else
                  f"already registered with this content as version {info['number']}; its tier is unchanged")
    return 0


def _accepted_note(info: dict) -> str:
    span = info["history"][-1]
    if not span.get("accepted_reason"):
        return ""
    return (f"; corpus check failures accepted ({span['accepted_reason']}): "
            f"{' | '.join(span['accepted_failures'])}")


def _check_cell(info: dict) -> str:
    """`corpus list`'s check column: the verdict for the tier it entered."""
    check = info.get("check")
    if not check:
        return "-"
    # A submitter's listing of a secret tier gives the findings about references as one line (the gateway's).
    shown = [line for line in check["failures"] if not line.startswith(WITHHELD_FINDINGS)]
    more = " and findings withheld" if len(shown) < len(check["failures"]) else ""
    if check["passed"]:
        return f"pass ({check['purpose']})"
    return f"FAIL ({check['purpose']}: {len(shown)} rules{more})"


def _set_corpus_tier(args, allowed: tuple[str, ...], command: str) -> int:
    if args.to not in allowed:
        other = "retire" if args.to in RETIRED_TIERS else "promote"
        raise CliError(f"--to: `corpus {command}` moves a corpus to {' or '.join(allowed)}; "
                       f"to move it to {args.to!r} use `corpus {other}`", EXIT_INVALID_INPUT)
    with reading_client(args) as client:
        info = client.set_corpus_tier(args.corpus_id, args.to, args.version,
                                      getattr(args, "accept_check_failures", None))
    _print_corpus(info, f"corpus {info['id']} version {info['number']} is {info['tier']} since {info['tier_since']}"
                        f"{_accepted_note(info)}")
    return 0


def cmd_corpus_retire(args) -> int:
    # Rotation (seed 001 §5.3): a retired holdout becomes public, a dev set.
    return _set_corpus_tier(args, RETIRED_TIERS, "retire")


def cmd_corpus_promote(args) -> int:
    return _set_corpus_tier(args, SECRET_TIERS, "promote")


def cmd_corpus_list(args) -> int:
    with reading_client(args) as client:
        corpora = client.corpora()
    if args.json:
        write_json(corpora, None)
        return 0
    print(tabulate(
        [[info["id"], info["number"], info["version"][:12], info["tier"], info["tier_since"], info["entries"],
          f"{info['source_lang']}-{info['target_lang']}", info["created_at"], _check_cell(info),
          info["history"][-1].get("accepted_reason") or ""] for info in corpora],
        headers=["id", "number", "version", "tier", "tier since", "entries", "languages", "registered", "check",
                 "check failures accepted"],
        disable_numparse=True,
    ))
    return 0


def cmd_corpus_sources(args) -> int:
    """JSON Lines {id, source, domain, difficulty} on stdout, as they arrive."""
    def announce(info: dict) -> None:
        print(f"corpus {info['id']} version {info['number']} ({info['version'][:12]}), "
              f"{info['tier']}: {info['entries']} entries", file=sys.stderr)

    with reading_client(args) as client:
        for entry in client.sources(args.corpus_id, args.version, on_corpus=announce):
            print(json.dumps(entry, ensure_ascii=False))
    return 0
