"""Run cards and entries to table rows and back (no database access)."""
from __future__ import annotations

from datetime import datetime, timezone

from champollion.core.columns import SPEC_COLUMNS


def card_without_entries(card: dict) -> dict:
    return {key: value for key, value in card.items() if key != "entries"}


def with_submission_count(card: dict, submissions: int) -> dict:
    """The card with integrity.submissions_with_fingerprint filled (seed 001
    §8.2); a card without an integrity block gets one, not disqualified."""
    integrity = dict(card.get("integrity") or {"disqualified": False})
    integrity["submissions_with_fingerprint"] = submissions
    return {**card, "integrity": integrity}


def run_row(card: dict, created_at: datetime, submission: int, submitted_by: str | None = None,
            floor_kind: str | None = None) -> dict:
    """The `runs` row of a card without entries, the `submission`-th stored
    with its fingerprint, submitted with the token named `submitted_by`
    (None: an open gateway); `floor_kind`: a floor run's degenerate system.
    The token's name is not in the card: it is the gateway's record, shown
    to maintainers."""
    for path in (("run_id",), ("dataset", "version")):
        node = card
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if not node:
            raise ValueError(f"run card has no {'.'.join(path)}: it cannot be stored")
    coverage = card.get("composite_coverage") or {}
    row = {column.name: column.value(card) for column in SPEC_COLUMNS}
    row.update(
        run_id=card["run_id"],
        corpus_version=card["dataset"]["version"],
        created_at=created_at,
        profile=coverage.get("profile"),
        composite_metrics=coverage_key(coverage.get("weights") or {}),
        cost_adjusted=(card.get("scores") or {}).get("cost_adjusted"),
        disqualified=bool((card.get("integrity") or {}).get("disqualified")),
        submission=submission,
        run_card=card,
        # Set when the run was scored against a registered corpus (its tier then).
        corpus_tier=card["dataset"].get("tier"),
        submitted_by=submitted_by,
        # "held" keeps a secret-tier run off the leaderboard until a maintainer decides.
        review=(card.get("integrity") or {}).get("review"),
        floor_kind=floor_kind,
    )
    return row


def coverage_key(metrics) -> str:
    """Column composite_metrics: the composite's metric ids, sorted."""
    return ",".join(sorted(metrics))


def coverage_metrics(key: str) -> list[str]:
    return key.split(",") if key else []


def entry_row(run_id: str, position: int, entry: dict) -> dict:
    return {
        "run_id": run_id,
        "position": position,
        "entry_id": entry["id"],
        "difficulty": entry.get("difficulty"),
        "error": entry.get("error"),
        "scores": entry.get("scores") or {},
        "stats": entry.get("stats") or {},
        "prediction": entry.get("prediction"),
    }


def entry_from_row(row) -> dict:
    return {"id": row.entry_id, "scores": row.scores, "stats": row.stats,
            "difficulty": row.difficulty, "error": row.error}


def utc(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; everything stored is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
