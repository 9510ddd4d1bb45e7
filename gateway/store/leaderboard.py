"""The leaderboard query (spec §11: §1.5, §4.1, §6.3; seed 001 §8.2): runs
of one corpus version ranked by a numeric column, with comparability and
cherry-pick flags, computed in SQL so a large store answers quickly."""
from __future__ import annotations

from sqlalchemy import Connection, and_, case, func, or_, select, true

from champollion.core.columns import SORT_COLUMNS, SPEC_COLUMNS
from gateway.card.metrics import METRIC_NAMES
from champollion.core.tiers import OFFICIAL_TIERS
from gateway.store.errors import InvalidQuery, NothingStored
from gateway.store.prefixes import MIN_PREFIX, by_prefix
from gateway.store.rows import coverage_metrics, utc
from gateway.store.submissions import HELD, token_counts
from gateway.store.tables import runs

SPEC_NAMES = tuple(c.name for c in SPEC_COLUMNS)
ROW_COLUMNS = ("run_id", *SPEC_NAMES, "cost_adjusted", "created_at",
               "profile", "composite_metrics", "disqualified", "submitted_by", "floor_kind")


COUNT_CHUNK = 500


# A run-card metric's column: the §9.1 column its value is denormalised to
# (bleu: corpus_bleu, ter: ter...), so a board sorts by either name.
METRIC_COLUMNS = {column.path[1]: column.name for column in SPEC_COLUMNS
                  if column.path[0] == "scores" and column.name in SORT_COLUMNS}
# Versions a "no such version" message lists.
VERSIONS_SHOWN = 10


def sort_column(sort: str) -> str:
    """The column `sort` names: a §9.1 numeric column or cost_adjusted, or a
    run-card metric by its key or short name (bleu, chrf, ter, comet...)."""
    if sort in SORT_COLUMNS:
        return sort
    column = METRIC_COLUMNS.get(METRIC_NAMES.get(sort.lower(), sort.lower()))
    if column is None:
        renamed = ", ".join(f"{key} for {column}" for key, column in METRIC_COLUMNS.items() if key != column)
        raise InvalidQuery(f"unknown sort column {sort!r}; valid columns: {', '.join(SORT_COLUMNS)} (or the run "
                           f"card's names: {renamed}, and metrics' short names: chrf, em, ...)")
    return column


def _version(connection: Connection, dataset_id: str, version: str, in_scope) -> str:
    """The stored corpus version `version` names (its hash or a unique
    prefix) among the dataset's runs; NothingStored lists the versions
    there are."""
    in_dataset = and_(runs.c.dataset_id == dataset_id, in_scope)
    found = by_prefix(connection, runs.c.corpus_version, version, "corpus version", in_dataset)
    if found is not None:
        return found
    known = connection.scalars(select(runs.c.corpus_version).where(in_dataset).group_by(runs.c.corpus_version)
                               .order_by(func.min(runs.c.created_at).desc()).limit(VERSIONS_SHOWN + 1)).all()
    listed = ", ".join(v[:12] for v in known[:VERSIONS_SHOWN]) + (", ..." if len(known) > VERSIONS_SHOWN else "")
    short = f" (give the hash or at least its first {MIN_PREFIX} characters)" if len(version) < MIN_PREFIX else ""
    raise NothingStored(f"no stored run of dataset {dataset_id!r} is on corpus version {version!r}{short}; "
                        f"its versions: {listed or 'none'}")


def _known_dataset(connection: Connection, dataset_id: str, hidden_tiers: tuple[str, ...] = ()) -> None:
    """NothingStored, listing the datasets there are, when no run is on
    `dataset_id`; datasets of `hidden_tiers` (gold, for a submitter) are not
    named (issue 33: the message listed gold ids to submitters)."""
    if connection.scalar(select(runs.c.run_id).where(runs.c.dataset_id == dataset_id).limit(1)) is not None:
        return
    shown = or_(runs.c.corpus_tier.is_(None), runs.c.corpus_tier.not_in(hidden_tiers)) if hidden_tiers else true()
    known = connection.scalars(select(runs.c.dataset_id).where(shown).distinct().order_by(runs.c.dataset_id)).all()
    raise NothingStored(f"no stored run is on dataset {dataset_id!r}; datasets: {', '.join(known) or 'none yet'}")


def latest_version(connection: Connection, dataset_id: str, in_scope=true()) -> str | None:
    """The corpus version whose first run (among those `in_scope`) is the newest."""
    first_seen = func.min(runs.c.created_at)
    query = (select(runs.c.corpus_version).where(runs.c.dataset_id == dataset_id, in_scope)
             .group_by(runs.c.corpus_version).order_by(first_seen.desc(), runs.c.corpus_version).limit(1))
    return connection.scalar(query)


def _majority_coverage(connection: Connection, in_version) -> tuple | None:
    """The composite coverage of most runs on the official board (first
    submissions, not disqualified), so the flags asked for do not change
    it; a tie goes to the fuller coverage."""
    query = (select(runs.c.profile, runs.c.composite_metrics)
             .where(in_version, runs.c.submission == 1, runs.c.disqualified.is_(False))
             .group_by(runs.c.profile, runs.c.composite_metrics)
             .order_by(func.count().desc(), func.length(runs.c.composite_metrics).desc(), runs.c.composite_metrics)
             .limit(1))
    return connection.execute(query).first()


def _submission_counts(connection: Connection, fingerprints: set) -> dict[str, int]:
    """How many stored runs share each fingerprint (now, not when saved),
    asked only for the rows shown, in chunks the databases accept."""
    wanted, counts = sorted(f for f in fingerprints if f is not None), {}
    for start in range(0, len(wanted), COUNT_CHUNK):
        chunk = wanted[start:start + COUNT_CHUNK]
        counts.update(connection.execute(
            select(runs.c.fingerprint_hash, func.count()).where(runs.c.fingerprint_hash.in_(chunk),
                                                                runs.c.floor_kind.is_(None))
            .group_by(runs.c.fingerprint_hash)).all())
    return counts


def _not_comparable_reason(row, majority) -> str:
    own, most = set(coverage_metrics(row.composite_metrics)), set(coverage_metrics(majority[1]))
    parts = []
    if row.profile != majority[0]:
        parts.append(f"profile {row.profile} where most runs have {majority[0]}")
    if most - own:
        parts.append(f"lacks {', '.join(sorted(most - own))}")
    if own - most:
        parts.append(f"adds {', '.join(sorted(own - most))}")
    return "composite coverage differs from most runs on this board (§4.1): " + "; ".join(parts)


def leaderboard(connection: Connection, dataset_id: str, version: str | None, sort: str, descending: bool,
                all_submissions: bool, include_disqualified: bool, limit: int | None, official: bool = False,
                hidden_tiers: tuple[str, ...] = ()) -> dict:
    sort = sort_column(sort)
    _known_dataset(connection, dataset_id, hidden_tiers)
    # The official board (seed 001 §5.2): runs scored against a registered
    # holdout or gold corpus only; dev and unregistered corpora never appear.
    # A run held for review is on no board until a maintainer clears it, and
    # runs of `hidden_tiers` (gold, for a submitter) on none the caller sees.
    in_scope = and_(runs.c.corpus_tier.in_(OFFICIAL_TIERS) if official else true(),
                    runs.c.review.is_distinct_from(HELD),
                    or_(runs.c.corpus_tier.is_(None), runs.c.corpus_tier.not_in(hidden_tiers)) if hidden_tiers
                    else true())
    version = _version(connection, dataset_id, version, in_scope) if version else \
        latest_version(connection, dataset_id, in_scope)
    board = {"dataset_id": dataset_id, "corpus_version": version, "sort": sort, "descending": descending, "rows": []}
    if version is None:
        return board
    on_version = and_(runs.c.dataset_id == dataset_id, runs.c.corpus_version == version, in_scope)
    # Floor runs (the gateway's degenerate systems) are shown apart, after the
    # ranked rows, unranked; they never count for the majority coverage.
    in_version = and_(on_version, runs.c.floor_kind.is_(None))
    majority = _majority_coverage(connection, in_version)
    comparable = true() if majority is None else and_(
        runs.c.profile.is_not_distinct_from(majority[0]), runs.c.composite_metrics == majority[1])
    key = runs.c[sort]
    query = select(*(runs.c[name] for name in ROW_COLUMNS),
                   case((comparable, True), else_=False).label("comparable")).where(in_version)
    if not all_submissions:
        query = query.where(runs.c.submission == 1)
    if not include_disqualified:
        query = query.where(runs.c.disqualified.is_(False))
    query = query.order_by(
        runs.c.disqualified,
        case((comparable, 0), else_=1),
        case((key.is_(None), 1), else_=0),  # nulls last, whichever the direction
        key.desc() if descending else key.asc(),
        runs.c.created_at, runs.c.run_id,
    )
    if limit is not None:
        query = query.limit(limit)
    rows = connection.execute(query).all()
    submissions = _submission_counts(connection, {row.fingerprint_hash for row in rows})
    by_token = token_counts(connection, dataset_id, version, {row.submitted_by for row in rows})
    coverages: dict[tuple, tuple[dict, str | None]] = {}  # a board holds few distinct coverages
    for rank, row in enumerate(rows, start=1):
        coverage = (row.profile, row.composite_metrics)
        if coverage not in coverages:
            reason = None if row.comparable else _not_comparable_reason(row, majority)
            coverages[coverage] = ({"profile": row.profile, "metrics": coverage_metrics(row.composite_metrics)},
                                   reason)
        board["rows"].append(_board_row(rank, row, submissions.get(row.fingerprint_hash, 1),
                                        by_token.get(row.submitted_by), *coverages[coverage]))
    floor = select(*(runs.c[name] for name in ROW_COLUMNS),
                   case((comparable, True), else_=False).label("comparable")).where(
        on_version, runs.c.floor_kind.is_not(None)).order_by(
        case((key.is_(None), 1), else_=0), key.desc() if descending else key.asc(), runs.c.floor_kind)
    for row in connection.execute(floor).all():
        coverage = {"profile": row.profile, "metrics": coverage_metrics(row.composite_metrics)}
        reason = None if row.comparable else _not_comparable_reason(row, majority)
        board["rows"].append(_board_row(None, row, 1, None, coverage, reason))
    return board


def _board_row(rank: int | None, row, submissions: int, token_submissions: int | None, coverage: dict,
               not_comparable: str | None) -> dict:
    """A board's row; a floor run's has rank None and floor True."""
    values = row._mapping
    out = {"rank": rank, "run_id": row.run_id}
    out.update({name: values[name] for name in SPEC_NAMES})
    out.update(
        cost_adjusted=row.cost_adjusted,
        created_at=utc(row.created_at).isoformat(),
        composite_coverage={"profile": coverage["profile"], "metrics": list(coverage["metrics"])},
        comparable=not_comparable is None,
        not_comparable=not_comparable,
        submissions_with_fingerprint=submissions,
        # The same token's runs on this version, whatever their model slug
        # (null for runs without a token on record).
        submissions_by_token=token_submissions,
        cherry_pick_suspect=submissions > 1 or (token_submissions or 0) > 1,
        disqualified=bool(row.disqualified),
        # The token's name: for maintainers (gateway/server/access.py takes it out for others).
        submitted_by=row.submitted_by,
        floor=row.floor_kind is not None,
        floor_kind=row.floor_kind,
    )
    return out


# --- the public board of a secret tier (issue 33; gateway/card/ladder.py) -------

# What a public Ladder row leaves out: every value computed from the
# references (the Ladder's released value stands for them) and the
# composite-derived cost-adjusted score; costs, latency and speed stay.
LADDER_HIDDEN = ("composite_score", "quality_tier", "chrf_plus_plus", "exact_match_rate", "fst_acceptance_rate",
                 "corpus_bleu", "comet_score", "equivalent_match_rate", "semantic_score", "ter", "length_ratio",
                 "code_switching_rate", "hallucination_rate", "terminology_adherence", "cost_adjusted")
# The Ladder's values are shown to this many decimals (the margin is coarser).
LADDER_DECIMALS = 2


def ladder_row(rank: int, row: dict, metric: str, released: float | None, margin: float | None) -> dict:
    """A public board's row for a run that took the Ladder's lead: its
    metadata, `public_score` (the released value, rounded to the margin it
    beat; None where nothing is released) in place of every reference-derived
    value, and that margin."""
    out = {**row, **{name: None for name in LADDER_HIDDEN if name in row}}
    out.update(rank=rank, public_score=None if released is None else round(released, LADDER_DECIMALS),
               public_metric=metric, ladder_margin=None if margin is None else round(margin, LADDER_DECIMALS))
    column = METRIC_COLUMNS.get(metric, metric)
    if column in out:
        out[column] = out["public_score"]  # what the board's columns show (CLI, web)
    return out
