"""Registered corpora (seed 001 §5, §8.1; spec §11): every version of a
corpus kept under its content hash and a number per corpus id, each entry's
content-derived fingerprint, and the secrecy tier with its history.

Versions have two ids (docs/store-and-corpora.md, "Versions"): the content
hash (`version`, the internal identity: runs compare within it) and the
public id (`public_version`, identity.keyed_version under the version key,
gateway/store/version_keys.py), which is what a non-maintainer sees of a
holdout or gold version and names it by (`shown_version`, `pick`).

Queries on a connection the RunStore hands over, as leaderboard.py's."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, select, text, update

from gateway.card.identity import corpus_version, entry_fingerprint, keyed_version, version_reference
from gateway.store import version_keys
from champollion.core.tiers import SECRET_TIERS, TIER_NAMES
from gateway.store.errors import CheckGateRefused, CorpusConflict, InvalidQuery, UnknownCorpus
from gateway.store.prefixes import MIN_PREFIX, AmbiguousPrefix
from gateway.store.rows import utc
from gateway.store.tables import corpora, corpus_entries, corpus_tiers

# Versions of secret tiers are seen by non-maintainers by their keyed public
# id only (the tier table: champollion/core/tiers.py).
KEYED_TIERS = SECRET_TIERS
# A version named by its hash needs this many leading hex digits (prefixes.py's
# rule); shorter digit strings are numbers.
MIN_VERSION_PREFIX = MIN_PREFIX
# Entry ids named per kind of difference in a conflict message.
IDS_SHOWN = 5
INSERT_BATCH = 1000


def check_tier(tier: str) -> None:
    if tier not in TIER_NAMES:
        raise InvalidQuery(f"tier: unknown tier {tier!r}; tiers: {', '.join(TIER_NAMES)}")


def canonical_entry(entry: dict) -> dict:
    """The entry as stored and compared: empty fields left out, since gRPC
    does not tell an unset field from an empty one."""
    return {key: value for key, value in entry.items() if value not in (None, "", [], {})}


def _lock(connection: Connection, corpus_id: str) -> None:
    """Two gateways registering one corpus id at once must not both take the
    same version number (SQLite serialises writers already)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"corpus:{corpus_id}"})


def _short(version: str) -> str:
    return version[:12]


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:IDS_SHOWN])
    return shown + (", ..." if len(ids) > IDS_SHOWN else "")


def _differences(connection: Connection, registered, corpus: dict, entries: list[dict]) -> list[str]:
    """What differs between a registered version and a corpus sent: its
    languages, and entries added, removed or changed, by id."""
    differences = [f"{name} {corpus[name]!r} where it has {getattr(registered, name)!r}"
                   for name in ("source_lang", "target_lang") if corpus[name] != getattr(registered, name)]
    stored = dict(connection.execute(
        select(corpus_entries.c.entry_id, corpus_entries.c.entry)
        .where(corpus_entries.c.corpus_id == registered.corpus_id, corpus_entries.c.version == registered.version)
        .order_by(corpus_entries.c.position)).all())
    sent = {entry["id"]: entry for entry in entries}
    for kind, ids in (("added", [i for i in sent if i not in stored]),
                      ("removed", [i for i in stored if i not in sent]),
                      ("changed", [i for i in sent if i in stored and sent[i] != stored[i]])):
        if ids:
            differences.append(f"{len(ids)} {'entry' if len(ids) == 1 else 'entries'} {kind} ({_ids(ids)})")
    return differences


def content_version(entries: list[dict]) -> str:
    """The version hash of these entries (as stored: canonical_entry)."""
    return corpus_version((entry["id"], version_reference(entry["reference"], entry.get("extra_references", ())))
                          for entry in entries)


def _tier_row(corpus_id: str, version: str, step: int, tier: str, now: datetime, accepted: dict | None) -> dict:
    """A corpus_tiers row; `accepted`: {reason, failures, by} when a
    maintainer accepted the corpus check's failures to enter `tier`."""
    row = {"corpus_id": corpus_id, "version": version, "step": step, "tier": tier, "since": now}
    if accepted:
        row.update(accepted_reason=accepted["reason"], accepted_failures=accepted["failures"],
                   accepted_by=accepted.get("by"))
    return row


def register(connection: Connection, corpus: dict, tier: str, new_version: bool, now: datetime,
             check: dict | None = None, accepted: dict | None = None, refusal: str | None = None) -> dict:
    """Registers `corpus` ({id, source_lang, target_lang, entries}) with
    `tier`, its corpus `check` summary and what was `accepted`; `refusal`
    refuses a new version (CheckGateRefused) once it is known not to be a
    conflict or registered already. See RunStore.register_corpus."""
    check_tier(tier)
    corpus_id = corpus["id"]
    entries = [canonical_entry(entry) for entry in corpus["entries"]]
    if not entries:
        raise InvalidQuery("corpus.entries: a corpus needs at least one entry")
    version = content_version(entries)
    _lock(connection, corpus_id)
    registered = connection.execute(
        select(corpora).where(corpora.c.corpus_id == corpus_id).order_by(corpora.c.number)).all()
    same = next((row for row in registered if row.version == version), None)
    if same is not None:
        differences = _differences(connection, same, corpus, entries)
        if differences:
            raise CorpusConflict(
                f"corpus {corpus_id!r} version {same.number} ({_short(version)}) is registered with the same "
                f"ids and references but other content: {'; '.join(differences)}. Sources, variants and "
                f"metadata do not make a new version (the version hashes ids and references): register the "
                f"changed corpus under another id")
        return {**info(connection, same), "created": False}
    if registered and not new_version:
        listed = ", ".join(f"{row.number} ({_short(row.version)})" for row in registered)
        differences = _differences(connection, registered[-1], corpus, entries)
        raise CorpusConflict(
            f"corpus {corpus_id!r} is registered as version{'s' if len(registered) > 1 else ''} {listed} "
            f"with other content than this one "
            f"({_short(version)}): against version {registered[-1].number}, {'; '.join(differences)}. "
            f"Register it as a new version (new_version, --new-version) to record it as version "
            f"{registered[-1].number + 1}")
    if refusal:
        raise CheckGateRefused(refusal)
    number = registered[-1].number + 1 if registered else 1
    connection.execute(insert(corpora), [{
        "corpus_id": corpus_id, "version": version, "number": number, "source_lang": corpus["source_lang"],
        "target_lang": corpus["target_lang"], "entries": len(entries), "created_at": now,
        **({"check_summary": check} if check is not None else {})}])
    for start in range(0, len(entries), INSERT_BATCH):
        connection.execute(insert(corpus_entries), [
            {"corpus_id": corpus_id, "version": version, "position": position, "entry_id": entry["id"],
             "fingerprint": entry_fingerprint(entry["source"], entry["reference"], entry.get("extra_references", ())),
             "entry": entry}
            for position, entry in enumerate(entries[start:start + INSERT_BATCH], start=start)])
    connection.execute(insert(corpus_tiers), [_tier_row(corpus_id, version, 0, tier, now, accepted)])
    refresh_public_versions(connection, _key(connection, create=True))
    row = connection.execute(select(corpora).where(corpora.c.corpus_id == corpus_id,
                                                   corpora.c.version == version)).one()
    return {**info(connection, row), "created": True}


def resolve(connection: Connection, corpus_id: str, version: str | None, public_only: bool = False):
    """The `corpora` row of one version: the latest number when `version` is
    None, else by number (a short digit string), content hash, public id or
    a unique prefix of either. `public_only` (a non-maintainer's request): a
    holdout or gold version is found by its public id only, never by its
    content hash, so that naming a version confirms no guess."""
    query = select(corpora).where(corpora.c.corpus_id == corpus_id)
    if version is None:
        rows = connection.execute(query.order_by(corpora.c.number.desc()).limit(1)).all()
    elif version.isdigit() and len(version) < MIN_VERSION_PREFIX:
        rows = connection.execute(query.where(corpora.c.number == int(version))).all()
    elif len(version) < MIN_VERSION_PREFIX:
        raise InvalidQuery(f"version: {version!r} is neither a version number nor a hash prefix of at least "
                           f"{MIN_VERSION_PREFIX} characters")
    else:
        rows = connection.execute(query.order_by(corpora.c.number)).all()
        if rows:
            histories = _histories(connection, corpus_id)
            key = _key(connection)
            described = [_described(row, histories[(row.corpus_id, row.version)], key) for row in rows]
            found = pick(described, corpus_id, version, public_only)
            rows = [row for row in rows if row.version == found["version"]]
    if not rows:
        raise UnknownCorpus(corpus_id, version)
    return rows[0]


def shown_version(info: dict) -> str:
    """The id a non-maintainer sees of a version (corpus_info): its public
    id on a holdout or gold tier, its content hash on dev (public anyway)."""
    if info["tier"] in KEYED_TIERS:
        return info.get("public_version") or ""
    return info["version"]


def pick(infos: list[dict], corpus_id: str, version: str, public_only: bool = False) -> dict:
    """The one version of `corpus_id` among `infos` (corpus_info dicts) that
    `version` names: a number, or the whole or a unique prefix (at least
    MIN_VERSION_PREFIX characters) of its public id or, unless `public_only`
    holds and the version is holdout or gold, of its content hash.
    UnknownCorpus, InvalidQuery (malformed) or AmbiguousPrefix otherwise;
    an ambiguity lists only ids the caller may see."""
    mine = [info for info in infos if info["id"] == corpus_id]
    if version.isdigit() and len(version) < MIN_VERSION_PREFIX:
        found = [info for info in mine if info["number"] == int(version)]
        if not found:
            raise UnknownCorpus(corpus_id, version)
        return found[0]
    if len(version) < MIN_VERSION_PREFIX:
        raise InvalidQuery(f"version: {version!r} is neither a version number nor a hash prefix of at least "
                           f"{MIN_VERSION_PREFIX} characters")
    wanted = version.lower()

    def names(info: dict) -> list[str]:
        shown = [info["public_version"]] if info.get("public_version") else []
        if not public_only or info["tier"] not in KEYED_TIERS:
            shown.append(info["version"])
        return shown

    exact = [info for info in mine if wanted in names(info)]
    if exact:
        return exact[0]
    matches = {}
    for info in mine:
        for name in names(info):
            if name.startswith(wanted):
                matches[info["version"]] = (info, name)
    if len(matches) > 1:
        raise AmbiguousPrefix(f"version: corpus {corpus_id!r} version", version,
                              sorted(name for _, name in matches.values()))
    if not matches:
        raise UnknownCorpus(corpus_id, version)
    return next(iter(matches.values()))[0]


def _key(connection: Connection, create: bool = False):
    return version_keys.key_for(connection.engine.url, create=create)


def _public(row, key) -> str | None:
    """A row's public id: derived under the process's key, unless that key is
    the process's own random one and the row has one stored already (made by
    a process with the store's real key)."""
    if key is not None and (key.persistent or row.public_version is None or row.version_key_id == key.key_id):
        return keyed_version(key.key, row.corpus_id, row.version)
    return row.public_version


def refresh_public_versions(connection: Connection, key) -> int:
    """Stores every version's public id under `key` (VersionKey) where it is
    missing or was derived under another key (a rotation); a process's own
    random key only fills missing ones. How many rows it changed."""
    if key is None:
        return 0
    stale = corpora.c.public_version.is_(None)
    if key.persistent:
        stale = stale | corpora.c.version_key_id.is_(None) | (corpora.c.version_key_id != key.key_id)
    rows = connection.execute(select(corpora.c.corpus_id, corpora.c.version).where(stale)).all()
    if not rows:
        return 0
    # Cleared first: a unique index would refuse a new id equal to an old one of another row mid-way.
    for row in rows:
        connection.execute(update(corpora).where(corpora.c.corpus_id == row.corpus_id,
                                                 corpora.c.version == row.version)
                           .values(public_version=None, version_key_id=None))
    for row in rows:
        connection.execute(update(corpora).where(corpora.c.corpus_id == row.corpus_id,
                                                 corpora.c.version == row.version)
                           .values(public_version=keyed_version(key.key, row.corpus_id, row.version),
                                   version_key_id=key.key_id))
    return len(rows)


def _histories(connection: Connection, corpus_id: str | None = None) -> dict[tuple[str, str], list[dict]]:
    """(corpus id, version) -> its tiers in order, each with when it began."""
    query = select(corpus_tiers).order_by(corpus_tiers.c.corpus_id, corpus_tiers.c.version, corpus_tiers.c.step)
    if corpus_id is not None:
        query = query.where(corpus_tiers.c.corpus_id == corpus_id)
    histories: dict[tuple[str, str], list[dict]] = {}
    for row in connection.execute(query):
        span = {"tier": row.tier, "since": utc(row.since).isoformat()}
        if row.accepted_reason is not None:
            span.update(accepted_reason=row.accepted_reason, accepted_failures=row.accepted_failures or [],
                        accepted_by=row.accepted_by or "")
        histories.setdefault((row.corpus_id, row.version), []).append(span)
    return histories


def _described(row, history: list[dict], key=None) -> dict:
    """A version as corpus_info gives it: `version` its content hash,
    `public_version` its keyed id (None while no key derived one)."""
    return {
        "id": row.corpus_id, "version": row.version, "public_version": _public(row, key), "number": row.number,
        "tier": history[-1]["tier"], "tier_since": history[-1]["since"],
        "source_lang": row.source_lang, "target_lang": row.target_lang, "entries": row.entries,
        "created_at": utc(row.created_at).isoformat(), "history": history, "check": row.check_summary,
    }


def info(connection: Connection, row) -> dict:
    return _described(row, _histories(connection, row.corpus_id)[(row.corpus_id, row.version)], _key(connection))


def list_all(connection: Connection) -> list[dict]:
    """Every registered version, by corpus id and number."""
    histories = _histories(connection)
    rows = connection.execute(select(corpora).order_by(corpora.c.corpus_id, corpora.c.number)).all()
    key = _key(connection)
    return [_described(row, histories[(row.corpus_id, row.version)], key) for row in rows]


def set_tier(connection: Connection, corpus_id: str, version: str | None, tier: str, now: datetime,
             check: dict | None = None, accepted: dict | None = None, refusal: str | None = None) -> dict:
    """Moves a version to `tier` (rotation, seed 001 §5.3), keeping its
    history, with its corpus `check` for that tier and what was `accepted`
    (`refusal`: CheckGateRefused instead); a version already there is left
    as it is."""
    check_tier(tier)
    _lock(connection, corpus_id)
    row = resolve(connection, corpus_id, version)
    last = connection.execute(
        select(corpus_tiers.c.step, corpus_tiers.c.tier)
        .where(corpus_tiers.c.corpus_id == row.corpus_id, corpus_tiers.c.version == row.version)
        .order_by(corpus_tiers.c.step.desc()).limit(1)).one()
    if last.tier != tier:
        if refusal:
            raise CheckGateRefused(refusal)
        connection.execute(insert(corpus_tiers), [_tier_row(row.corpus_id, row.version, last.step + 1, tier, now,
                                                            accepted)])
        refresh_public_versions(connection, _key(connection, create=True))
        if check is not None:
            connection.execute(update(corpora).where(corpora.c.corpus_id == row.corpus_id,
                                                     corpora.c.version == row.version).values(check_summary=check))
            row = resolve(connection, row.corpus_id, row.version)
    return info(connection, row)


def entries_from(connection: Connection, row, position: int, limit: int) -> list[tuple[int, dict]]:
    """Up to `limit` (position, entry) of a version from `position` on."""
    found = connection.execute(
        select(corpus_entries.c.position, corpus_entries.c.entry)
        .where(corpus_entries.c.corpus_id == row.corpus_id, corpus_entries.c.version == row.version,
               corpus_entries.c.position >= position)
        .order_by(corpus_entries.c.position).limit(limit)).all()
    return [(found_row.position, found_row.entry) for found_row in found]


def fingerprints(connection: Connection, row) -> dict[str, str]:
    return dict(connection.execute(
        select(corpus_entries.c.entry_id, corpus_entries.c.fingerprint)
        .where(corpus_entries.c.corpus_id == row.corpus_id, corpus_entries.c.version == row.version)
        .order_by(corpus_entries.c.position)).all())
