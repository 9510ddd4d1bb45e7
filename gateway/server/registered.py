"""Server-side scoring against a registered corpus (seed 001 §5.2, §8.1):
the client names the corpus (`corpus_ref`) and sends predictions only; the
entries, references included, come from the gateway's store.

The run then goes through the same intake and evaluation as a corpus the
client sends (gateway/server/intake.py): the stored entries are turned into
upload parts, each with its entries' predictions. The client's predictions
are all read, and their ids checked against the registered version, before
any part goes out, so a run against a modified corpus is never scored; on a
holdout or gold corpus they must cover every entry (a run of one entry
would tell whether that entry's reference was guessed). What a caller sees
of such a run's card is gateway/server/access.py's to say.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import AsyncIterator

import structlog
from google.protobuf import json_format

from champollion.core.cards import CardRegistry, default_registry
from champollion.core.roles import MAINTAINER
from champollion.core.skeleton import identifier_skeleton
from champollion.core.tiers import SECRET_TIERS
from champollion.eval.v1 import gateway_pb2
from gateway.server.access import public_card
from gateway.server.callers import allows, may_use_tier
from gateway.server.corpora import version_info
from gateway.server.stored_runs import GatewayStore, one_line
from gateway.server.refusals import Forbidden, InvalidRequest, NotFound, Unavailable
from gateway.server.validation import InvalidRun, check_language, check_prediction, header_fields_in
from gateway.store import InvalidQuery, StoreError, UnknownCorpus
from gateway.store.corpora import shown_version

log = structlog.get_logger()

# Unknown (or missing) prediction ids named in the refusal, at most.
UNKNOWN_IDS_SHOWN = 5


@dataclass
class RegisteredRun:
    """A run on a registered corpus, as the intake takes any run: `header`
    (the first part, with the registered corpus's id and languages) and
    `parts()` (the stored entries with the client's predictions, read from
    the store as the intake asks for them). `predictions`: every prediction
    sent, by entry id, with its index; `ids`: the version's entry ids in
    corpus order."""
    corpus: dict  # RunStore.corpus_info
    header: gateway_pb2.EvaluateRequest
    predictions: dict[str, tuple[int, gateway_pb2.Prediction]]
    ids: list[str]
    store: GatewayStore

    @property
    def tier(self) -> str:
        return self.corpus["tier"]

    def parts(self) -> AsyncIterator[gateway_pb2.EvaluateRequest]:
        return _stored_parts(self.store, self.corpus, self.predictions)

    def label(self, card: dict) -> None:
        """Names the registered version's tier and number in the card, and
        warns, once, when the version failed the corpus check."""
        card["dataset"].update(tier=self.corpus["tier"], number=self.corpus["number"])
        warning = check_warning(self.corpus)
        if warning:
            card["warnings"].append(warning)

    def public_card(self, card: dict, role: str) -> dict:
        """The card as `role` may see its version: a maintainer the content
        hash the card keeps, anyone else on a holdout or gold corpus its
        public id (identity.with_public_version). The stored card is not
        changed: the content hash stays the run's internal identity."""
        return public_card(card, self.corpus, role)


def check_warning(corpus: dict) -> str | None:
    """One line on a registered version (corpus_info) that failed the corpus
    check for its tier: how many required rules, which."""
    check = corpus.get("check")
    if not check or check["passed"]:
        return None
    rules = [failure.partition(":")[0] for failure in check["failures"]]
    accepted = corpus["history"][-1].get("accepted_reason")
    return (f"registered corpus {corpus['id']!r} version {corpus['number']} fails the corpus check for "
            f"{check['purpose']} ({len(rules)} required rule{'s' if len(rules) != 1 else ''}: {', '.join(rules)})"
            + (f"; a maintainer accepted it: {accepted}" if accepted else "")
            + f"; see `champollion corpus check {corpus['id']} --version {corpus['number']}`")


async def in_store(store: GatewayStore, use):
    """`use(store)`; the store's errors as the statuses a caller gets."""
    try:
        return await store.call(use)
    except UnknownCorpus as error:
        raise NotFound(f"corpus_ref: {error}") from None
    except InvalidQuery as error:
        raise InvalidRequest(f"corpus_ref.{error}") from None
    except StoreError as error:
        raise _store_failed(error) from None


def _store_failed(error: StoreError) -> Unavailable:
    return Unavailable(f"corpus_ref: the run store failed: {one_line(error)}")


def _check_first_part(part: gateway_pb2.EvaluateRequest) -> None:
    """A request naming a registered corpus sends no entries, and no corpus
    header but one agreeing with the reference."""
    if not part.corpus_ref.id:
        raise InvalidRun("corpus_ref.id", "is required (the registered corpus to score against)")
    if part.corpus.entries:
        raise InvalidRun("corpus.entries", "must be empty with corpus_ref: the registered corpus's entries are used")
    if part.corpus.id and part.corpus.id != part.corpus_ref.id:
        raise InvalidRun("corpus.id", f"{part.corpus.id!r} is not corpus_ref.id {part.corpus_ref.id!r}; leave it empty")


def _check_languages(part: gateway_pb2.EvaluateRequest, corpus: dict, cards: CardRegistry) -> None:
    """Languages sent with a registered corpus must name its own (in any
    spelling: `fr` for `fra_Latn`)."""
    for name in ("source_lang", "target_lang"):
        sent = getattr(part.corpus, name)
        if not sent:
            continue
        field = f"corpus.{name}"
        if check_language(cards, sent, field).tag != check_language(cards, corpus[name], field).tag:
            raise InvalidRun(field, f"{sent!r}, but registered corpus {corpus['id']!r} has "
                                    f"{corpus[name]!r}; leave it empty")


def _header(first_part: gateway_pb2.EvaluateRequest, corpus: dict) -> gateway_pb2.EvaluateRequest:
    header = gateway_pb2.EvaluateRequest()
    header.CopyFrom(first_part)
    header.ClearField("corpus_ref")
    header.ClearField("predictions")
    header.corpus.id = corpus["id"]
    header.corpus.source_lang = corpus["source_lang"]
    header.corpus.target_lang = corpus["target_lang"]
    return header


async def _predictions(first_part, later_parts) -> dict[str, tuple[int, gateway_pb2.Prediction]]:
    """Every prediction of the upload by id, with its index (counted across
    parts, as the client sent them), each checked on its own."""
    found: dict[str, tuple[int, gateway_pb2.Prediction]] = {}
    index = 0

    def take(part) -> None:
        nonlocal index
        for prediction in part.predictions:
            check_prediction(prediction, index)
            if prediction.id in found:
                raise InvalidRun(f"predictions[{index}].id", "duplicate prediction for this id", prediction.id)
            kept = gateway_pb2.Prediction()
            kept.CopyFrom(prediction)  # so that the part it came in is not kept alive
            found[prediction.id] = (index, kept)
            index += 1

    take(first_part)
    number = 1
    async for part in later_parts:
        number += 1
        misplaced = header_fields_in(part) + (["corpus_ref"] if part.HasField("corpus_ref") else [])
        if misplaced:
            raise InvalidRun(misplaced[0], f"set in upload part {number} (counting from 1); only the first part "
                                           "carries the run's header")
        if part.corpus.entries:
            raise InvalidRun("corpus.entries", f"set in upload part {number}: with corpus_ref, parts carry "
                                               "predictions only")
        take(part)
    return found


def _refuse_unknown(predictions: dict[str, tuple[int, gateway_pb2.Prediction]], ids: set[str],
                    corpus: dict, version: str) -> None:
    """INVALID_ARGUMENT naming the predictions (up to UNKNOWN_IDS_SHOWN)
    whose ids the registered version has not: the client's corpus differs."""
    unknown = sorted((index, entry_id) for entry_id, (index, _) in predictions.items() if entry_id not in ids)
    if not unknown:
        return
    shown = ", ".join(repr(entry_id) for _, entry_id in unknown[:UNKNOWN_IDS_SHOWN])
    more = f" and {len(unknown) - UNKNOWN_IDS_SHOWN} more" if len(unknown) > UNKNOWN_IDS_SHOWN else ""
    index, entry_id = unknown[0]
    raise InvalidRun(
        f"predictions[{index}].id",
        f"no entry of registered corpus {corpus['id']!r} version {corpus['number']} ({version[:12]}) "
        f"has this id; {len(unknown)} prediction id{'s' if len(unknown) > 1 else ''} outside it: {shown}{more}",
        entry_id,
    )


def _refuse_partial(predictions: dict, ids: list[str], corpus: dict) -> None:
    """On a secret tier every entry needs a prediction (or an error): a run
    of a few entries would answer, through its corpus-level scores, whether
    those entries' references were guessed."""
    missing = [entry_id for entry_id in ids if entry_id not in predictions]
    if not missing:
        return
    shown = ", ".join(repr(entry_id) for entry_id in missing[:UNKNOWN_IDS_SHOWN])
    more = f" and {len(missing) - UNKNOWN_IDS_SHOWN} more" if len(missing) > UNKNOWN_IDS_SHOWN else ""
    raise InvalidRun(
        "predictions",
        f"cover {len(ids) - len(missing)} of the {len(ids)} entries of registered corpus {corpus['id']!r} "
        f"version {corpus['number']}; on a {corpus['tier']} corpus a run predicts every entry (an entry the "
        f"method failed on is sent with its error): missing {shown}{more}")


def _entry_message(entry: dict) -> gateway_pb2.CorpusEntry:
    """A stored entry (the corpus JSON's fields) as the message a client sends."""
    return json_format.ParseDict(entry, gateway_pb2.CorpusEntry(), ignore_unknown_fields=True)


async def _stored_parts(store: GatewayStore, corpus: dict, predictions: dict):
    """The run's parts from the store: the version's entries a batch at a
    time, each with its entries' predictions."""
    batches = await in_store(store, lambda run_store: run_store.corpus_entries(corpus["id"], corpus["version"]))
    while True:
        try:
            batch = await asyncio.to_thread(next, batches, None)
        except StoreError as error:
            raise _store_failed(error) from None
        if batch is None:
            return
        part = gateway_pb2.EvaluateRequest()
        part.corpus.entries.extend(_entry_message(entry) for entry in batch)
        part.predictions.extend(predictions.pop(entry["id"])[1] for entry in batch if entry["id"] in predictions)
        yield part


async def registered_run(first_part: gateway_pb2.EvaluateRequest, later_parts: AsyncIterator,
                         store: GatewayStore | None, role: str,
                         cards: CardRegistry | None = None) -> RegisteredRun | None:
    """The run as the intake takes it when `first_part` names a registered
    corpus (None when it does not), its predictions all read and their ids
    checked against the version (every entry covered on a secret tier).
    Raises InvalidRun on bad input and refusals.NotFound, Forbidden or
    Unavailable when the corpus cannot be used by this
    `role`."""
    if not first_part.HasField("corpus_ref"):
        return None
    _check_first_part(first_part)
    if store is None:
        raise Unavailable("corpus_ref: this gateway has no run store, so no registered corpus (start it with "
                          "--store URL)")
    reference = first_part.corpus_ref
    maintainer = allows(role, MAINTAINER)
    # A non-maintainer names a holdout or gold version by its number or public id only.
    corpus = await in_store(store, lambda run_store: version_info(run_store, reference.id, reference.version,
                                                                  maintainer))
    if not may_use_tier(role, corpus["tier"]):
        raise Forbidden(f"corpus_ref: corpus {corpus['id']!r} is {corpus['tier']}: only maintainers may run it")
    _check_languages(first_part, corpus, cards or default_registry())
    started = time.perf_counter()
    predictions = await _predictions(first_part, later_parts)
    # Entry id -> fingerprint: the version's ids, without reading its entries.
    ids = list(await in_store(store, lambda run_store: run_store.entry_fingerprints(corpus["id"], corpus["version"])))
    _refuse_unknown(predictions, set(ids), corpus, corpus["version"] if maintainer else shown_version(corpus))
    if corpus["tier"] in SECRET_TIERS:
        _refuse_partial(predictions, ids, corpus)
    log.info("registered_corpus_run", family="gateway", corpus_id=corpus["id"], corpus_number=corpus["number"],
             entries=len(ids), predictions=len(predictions),
             duration_s=round(time.perf_counter() - started, 4))
    return RegisteredRun(corpus, _header(first_part, corpus), predictions, ids, store)


async def refuse_registered_id(first_part: gateway_pb2.EvaluateRequest, store: GatewayStore | None,
                               role: str | None = None) -> None:
    """A corpus the client sends may not take the id of a registered one,
    nor one that looks like it (the same confusable skeleton, UTS #39, or
    the same id case folded: `Test`, `tеst` with a Cyrillic e, `wmt2l` for
    `wmt21`): its runs would join that corpus's leaderboard beside runs
    scored on the registered entries, or be listed beside it under a name
    that reads the same. A look-alike of a gold corpus is named only to a
    maintainer (`role`; None: not one). A store that cannot be asked lets
    the run through (it then cannot be stored on any board either)."""
    corpus_id = first_part.corpus.id
    if store is None or not corpus_id:
        return
    try:
        registered = await store.call(lambda run_store: run_store.list_corpora())
    except StoreError:
        return
    tiers = {corpus["id"]: corpus["tier"] for corpus in registered}  # the latest version's, listed last
    tier = tiers.get(corpus_id)
    if tier is not None:
        raise InvalidRun("corpus.id", f"{corpus_id!r} is the id of a registered ({tier}) corpus: score against it "
                                      f"with corpus_ref (--corpus-id, predictions only), or give this corpus "
                                      f"another id")
    sent = (identifier_skeleton(corpus_id), corpus_id.casefold())
    for known, tier in sorted(tiers.items()):
        if identifier_skeleton(known) in sent or known.casefold() in sent:
            named = f"registered corpus {known!r}" if role == MAINTAINER or tier != "gold" else "a registered corpus"
            raise InvalidRun("corpus.id", f"{corpus_id!r} looks like the id of {named} (the same letters once "
                                          f"look-alike characters and case are folded): give this corpus an id "
                                          f"that reads differently")
