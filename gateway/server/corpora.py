"""The gateway's registered corpora (seed 001 §5, §8.1): RegisterCorpus,
ListCorpora, SetCorpusTier, GetSources and CheckCorpus, called by the
servicer's thin methods. The store (gateway/store/corpora.py) keeps the
corpora; this module validates what arrives, runs the corpus check
(gateway/corpus_check) and its gate on the way into holdout and gold, and
decides what of an entry may leave the gateway: `source_entry`, nothing
else, for GetSources.

`stored(context, use)` is the servicer's: it runs `use(store)` off the event
loop. What is refused here is a refusals.py error (InvalidRequest naming the
field, Forbidden), answered, as the store's errors are, by the servicer's
status table (gateway/server/statuses.py)."""
from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Awaitable, Callable

from google.protobuf import json_format

from champollion.core.analyzers import AnalyzerRegistry
from champollion.core.cards import CardRegistry, UnknownLanguage
from champollion.core.corpus_rules import PURPOSES
from champollion.core.tiers import TIER_NAMES
from champollion.eval.v1 import gateway_pb2
from gateway.card.compare import ComparableRun
from gateway.card.floor import headroom
from gateway.corpus_check import PilotRefused, check_corpus, refusal, summary_of
from gateway.server.access import check_read, corpus_info_view, is_maintainer
from gateway.server.callers import current_caller
from gateway.server.refusals import InvalidRequest
from gateway.server.validation import InvalidRun, check_dataset_id, check_entry, check_header
from gateway.store import RunStore, UnknownCorpus
from gateway.store.corpora import MIN_VERSION_PREFIX, pick, shown_version

Stored = Callable[[object, Callable[[RunStore], object]], Awaitable]
# Sources go back in messages of this many entries.
SOURCES_PER_MESSAGE = 2000


def authorize(action: str, corpus_tier: str | None) -> None:
    """Whether the caller may do `action` ("register_corpus", "list_corpora",
    "set_corpus_tier", "read_sources") on a corpus of `corpus_tier`: the
    RPC table (gateway/server/auth.py) has admitted the caller to the RPC;
    what is left is the tier's rule, access.check_read's (a gold corpus's
    sources are for maintainers only; refusals.Forbidden otherwise)."""
    check_read(current_caller(), corpus_tier, action)


def _check_tier(tier: str) -> None:
    if tier not in TIER_NAMES:
        raise InvalidRequest(f"tier: unknown tier {tier!r}; tiers: {', '.join(TIER_NAMES)}")


def _require_corpus_id(corpus_id: str) -> None:
    if not corpus_id:
        raise InvalidRequest("corpus_id: is required")


def info_message(info: dict, maintainer: bool = True) -> gateway_pb2.CorpusInfo:
    """A store's corpus_info as the RPCs send it: `version` is the content
    hash for a maintainer, else the id the caller may see (the keyed public
    id of a holdout or gold version: shown_version)."""
    info = corpus_info_view(info, maintainer)  # access.py: a secret tier's findings about references
    fields = {key: value for key, value in info.items() if key not in ("history", "check", "public_version")}
    if not maintainer:
        fields["version"] = shown_version(info)
    message = gateway_pb2.CorpusInfo(**fields)
    message.history.extend(gateway_pb2.TierSpan(**span) for span in info["history"])
    if info.get("check"):
        message.check.CopyFrom(json_format.ParseDict(info["check"], gateway_pb2.CorpusCheckSummary(),
                                                     ignore_unknown_fields=True))
    return message


def entry_dict(entry: gateway_pb2.CorpusEntry) -> dict:
    """An entry as the store keeps it: the corpus file's JSON form."""
    return json_format.MessageToDict(entry, preserving_proto_field_name=True)


def source_entry(entry: dict) -> gateway_pb2.SourceEntry:
    """What a method may see of an entry (seed 001 §8.1: sources only):
    its id, source, domain and difficulty."""
    return gateway_pb2.SourceEntry(id=entry["id"], source=entry["source"], domain=entry.get("domain", ""),
                                   difficulty=entry.get("difficulty"))


def _later_part_header(part: gateway_pb2.RegisterCorpusRequest) -> list[str]:
    corpus = part.corpus
    found = (("corpus.id", corpus.id), ("corpus.source_lang", corpus.source_lang),
             ("corpus.target_lang", corpus.target_lang), ("tier", part.tier), ("new_version", part.new_version),
             ("accept_check_failures", part.accept_check_failures))
    return [name for name, value in found if value]


def checked_entries(entries, seen: set[str], start: int = 0) -> list[dict]:
    """CorpusEntry messages as the store keeps them, each checked as an
    evaluated run's are and its id unique among those `seen` (counted from
    `start`); raises InvalidRun naming the field and entry id."""
    found = []
    for index, entry in enumerate(entries, start=start):
        check_entry(entry, index)
        if entry.id in seen:
            raise InvalidRun(f"corpus.entries[{index}].id", "duplicate id", entry.id)
        seen.add(entry.id)
        found.append(entry_dict(entry))
    return found


async def _entries(first: gateway_pb2.RegisterCorpusRequest, later: AsyncIterator) -> list[dict]:
    """Every part's entries, each checked as an evaluated run's are; raises
    InvalidRun naming the field and entry id."""
    entries: list[dict] = []
    seen: set[str] = set()
    entries += checked_entries(first.corpus.entries, seen)
    async for part in later:
        extra = _later_part_header(part)
        if extra:
            raise InvalidRun(extra[0], "only the first part carries the corpus header, tier, new_version and "
                                       "accept_check_failures")
        entries += checked_entries(part.corpus.entries, seen, len(entries))
    if not entries:
        raise InvalidRun("corpus.entries", "a corpus needs at least one entry")
    return entries


async def _checked(context, corpus: dict, tier: str, reason: str, cards: CardRegistry,
                   registered: dict | None = None) -> tuple[dict, dict | None, str | None]:
    """The corpus check's summary for `tier`; what a maintainer accepts
    ({reason, failures, by}) when its gate fails and a `reason` is given;
    else the refusal naming every gate failure, which the store raises
    (FAILED_PRECONDITION) only if the version would enter the tier (not one
    registered already, nor a conflict)."""
    report = await asyncio.to_thread(check_corpus, corpus, tier, cards, registered=registered)
    summary = summary_of(report)
    failures = summary["gate_failures"]
    if not failures:
        return summary, None, None
    if not reason.strip():
        return summary, None, refusal(corpus["id"], tier, failures)
    return summary, {"reason": reason.strip(), "failures": failures, "by": current_caller().name}, None


async def register_corpus(parts: AsyncIterator, context, cards: CardRegistry, stored: Stored):
    parts = parts.__aiter__()
    try:
        first = await parts.__anext__()
    except StopAsyncIteration:
        raise InvalidRequest("the upload carried no part") from None
    header = first.corpus
    if not header.id:
        raise InvalidRequest("corpus.id: is required")
    _check_tier(first.tier)
    authorize("register_corpus", first.tier)
    # An InvalidRun from these is answered with its field and entry id as details (statuses.py).
    check_dataset_id(header.id, "corpus.id")  # the characters a client-sent corpus's id may use
    languages = check_header(gateway_pb2.EvaluateRequest(corpus=gateway_pb2.Corpus(
        source_lang=header.source_lang, target_lang=header.target_lang)), cards)
    entries = await _entries(first, parts)
    # Stored as canonical tags, as a run card records them.
    corpus = {"id": header.id, "source_lang": languages.source.tag, "target_lang": languages.target.tag,
              "entries": entries}
    check, accepted, refused = await _checked(context, corpus, first.tier, first.accept_check_failures, cards)

    def register(store: RunStore) -> dict:
        _keep_stored_spelling(store, corpus, cards)
        return store.register_corpus(corpus, first.tier, first.new_version, check, accepted, refused)

    info = await stored(context, register)
    return info_message(info)


def _keep_stored_spelling(store: RunStore, corpus: dict, cards: CardRegistry) -> None:
    """A corpus registered before languages were stored as canonical tags
    (`eng` for `eng_Latn`) keeps its spelling where it names the same
    language, so that the same corpus is not taken for other content."""
    try:
        latest = store.corpus_info(corpus["id"], None)
    except UnknownCorpus:
        return
    for name in ("source_lang", "target_lang"):
        try:
            same = cards.resolve(latest[name]).tag == corpus[name]
        except UnknownLanguage:
            same = False
        if same:
            corpus[name] = latest[name]


async def list_corpora(context, stored: Stored) -> gateway_pb2.ListCorporaResponse:
    authorize("list_corpora", None)
    listed = await stored(context, lambda store: store.list_corpora())
    maintainer = _is_maintainer(context)
    return gateway_pb2.ListCorporaResponse(corpora=[info_message(info, maintainer) for info in listed])


def _is_maintainer(context) -> bool:
    return is_maintainer(current_caller())


def version_info(store: RunStore, corpus_id: str, version: str | None, maintainer: bool) -> dict:
    """The corpus_info of the version a request names (store side, off the
    event loop): for a maintainer as the store resolves it (number, content
    hash, public id or a prefix); for anyone else a holdout or gold version
    by its number or public id only (its content hash is unknown to them:
    naming it must confirm no guessed references), an ambiguity naming only
    ids they see."""
    if maintainer or not version or (version.isdigit() and len(version) < MIN_VERSION_PREFIX):
        return store.corpus_info(corpus_id, version or None)
    found = pick(store.list_corpora(), corpus_id, version, public_only=True)
    return store.corpus_info(corpus_id, str(found["number"]))


async def _whole(context, stored: Stored, info: dict) -> dict:
    """A registered version with all its entries (server side only)."""
    entries = await stored(context, lambda store: [entry for batch in store.corpus_entries(info["id"], info["version"])
                                                   for entry in batch])
    return {"id": info["id"], "source_lang": info["source_lang"], "target_lang": info["target_lang"],
            "entries": entries}


async def set_corpus_tier(request: gateway_pb2.SetCorpusTierRequest, context, cards: CardRegistry, stored: Stored):
    _require_corpus_id(request.corpus_id)
    _check_tier(request.tier)
    authorize("set_corpus_tier", request.tier)
    info = await stored(context, lambda store: store.corpus_info(request.corpus_id, request.version or None))
    check, accepted, refused = None, None, None
    if info["tier"] != request.tier:
        # Checked for the tier it enters: the gate for holdout and gold, the summary for any.
        check, accepted, refused = await _checked(context, await _whole(context, stored, info), request.tier,
                                                  request.accept_check_failures, cards, info)
    info = await stored(context, lambda store: store.set_corpus_tier(
        info["id"], info["version"], request.tier, check, accepted, refused))
    return info_message(info)


async def _pilots(request: gateway_pb2.CheckCorpusRequest, context, stored: Stored) -> list:
    pilots = []
    for run_id in request.pilot_run_ids:
        card, rows = await stored(context, lambda store, run_id=run_id: store.comparable_stats(run_id))
        pilots.append((run_id, ComparableRun.from_stored(card, rows)))
    for index, card in enumerate(request.pilot_cards):
        pilots.append((f"pilot_cards[{index}]", ComparableRun.from_proto(card)))
    return pilots


async def check_registered_corpus(request: gateway_pb2.CheckCorpusRequest, context, cards: CardRegistry,
                                  stored: Stored) -> gateway_pb2.CheckCorpusResponse:
    """The whole corpus check of a registered version (maintainers only, by
    the RPC table: it reads references and provenance)."""
    _require_corpus_id(request.corpus_id)
    if request.purpose and request.purpose not in PURPOSES:
        raise InvalidRequest(f"purpose: unknown purpose {request.purpose!r}; purposes: {', '.join(PURPOSES)}")
    info = await stored(context, lambda store: store.corpus_info(request.corpus_id, request.version or None))
    corpus = await _whole(context, stored, info)
    pilots = await _pilots(request, context, stored)
    try:
        report = await asyncio.to_thread(check_corpus, corpus, request.purpose or info["tier"], cards,
                                         AnalyzerRegistry(), pilots or None, info)
    except PilotRefused as error:
        raise InvalidRequest(str(error)) from None
    # The floor and the headroom above it (gateway/card/floor.py), from the version's stored runs.
    report["floor"] = headroom(await stored(context, lambda store: store.version_scores(info["id"], info["version"])))
    return gateway_pb2.CheckCorpusResponse(corpus=info_message(info), report_json=json.dumps(report,
                                                                                             ensure_ascii=False))


async def get_sources(request: gateway_pb2.GetSourcesRequest, context, stored: Stored):
    """The version's sources in parts, the first with its CorpusInfo."""
    _require_corpus_id(request.corpus_id)
    maintainer = _is_maintainer(context)
    info = await stored(context, lambda store: version_info(store, request.corpus_id, request.version, maintainer))
    authorize("read_sources", info["tier"])
    # By its full hash: a version registered meanwhile does not change what is read.
    batches = await stored(context, lambda store: store.corpus_entries(
        request.corpus_id, info["version"], SOURCES_PER_MESSAGE))
    first = True
    while True:
        batch = await stored(context, lambda store: next(batches, None))
        if batch is None:
            return
        yield gateway_pb2.SourcesPart(corpus=info_message(info, maintainer) if first else None,
                                      entries=[source_entry(entry) for entry in batch])
        first = False
