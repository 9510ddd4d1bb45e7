"""A Python client of the gateway: a run evaluated, runs compared, stored
runs and registered corpora read, with uploading in parts and putting run
cards back together hidden. The `champollion` command talks to gateways
through it.

    with Client("localhost:50051") as client:
        card = client.evaluate(corpus, predictions, meta={"model_slug": "my-model"})
        print(card["scores"]["composite_score"])

Corpus, predictions, meta and glossary take the shapes of the command's
input files (README "Input formats") as plain Python data, or protos built
already. A refused call raises a ClientError carrying the gRPC status."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import grpc
from google.protobuf import json_format

from apps import inputs
from apps.client.channel import ChannelError, check_token, is_untrusted_certificate, open_channel
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc, run_card_pb2
from apps.inputs import InputError, PredictionFile
from apps.client.upload import collect_run_card, compare_parts, corpus_parts, pairs_parts, request_parts
from champollion.core.run_card import dict_to_message, entry_for_compare, message_to_dict
from champollion.core.columns import SPEC_COLUMNS
from champollion.core.field_errors import field_violations
from champollion.core.limits import InvalidField
from champollion.core.sampling import DEFAULT_RESAMPLES

# Seconds a call may take: reading or ranking stored runs is quick; comparing
# and streaming stored cards back reads every entry.
QUICK_CALL_S = 60
LONG_CALL_S = 600


class ClientError(Exception):
    """A call the gateway refused or could not answer. `code` is its gRPC
    status (None when the stream broke off), `details` its message as sent,
    `violations` the fields an INVALID_ARGUMENT names in its structured
    details (google.rpc.BadRequest: field path, what is wrong, entry id)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None, details: str = "", address: str = "",
                 violations: Sequence[InvalidField] = ()):
        super().__init__(message)
        self.code = code
        self.details = details
        self.address = address
        self.violations = tuple(violations)


class InvalidSettings(ClientError, ValueError):
    """A token, CA file or input the client cannot use; nothing was sent."""


class RequestRefused(ClientError):
    """The request is at fault (INVALID_ARGUMENT, NOT_FOUND,
    FAILED_PRECONDITION, ALREADY_EXISTS): the message is the gateway's, as
    sent, naming the field and entry id."""


class InvalidArgument(RequestRefused):
    """INVALID_ARGUMENT: a field of the run (or an option) is out of bounds."""


class NotFound(RequestRefused):
    """NOT_FOUND: an unknown run id, corpus id or version."""


class GatewayUnavailable(ClientError):
    """The gateway could not answer: unreachable, overloaded
    (RESOURCE_EXHAUSTED, retryable), failing, or refusing access
    (UNAUTHENTICATED, PERMISSION_DENIED)."""


class UntrustedCertificate(GatewayUnavailable):
    """The TLS handshake failed: the gateway's certificate is not signed by
    a trusted CA (give `tls` the CA certificate that signed it)."""


_REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: RequestRefused,
    grpc.StatusCode.ALREADY_EXISTS: RequestRefused,
}


def _error_from(error: grpc.RpcError, address: str) -> ClientError:
    code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(details, code, details, address, field_violations(error))
    if code in _REFUSALS:
        return _REFUSALS[code](details, code, details, address)
    if is_untrusted_certificate(error):
        return UntrustedCertificate(f"gateway at {address}: its TLS certificate is not trusted", code, details,
                                    address)
    return GatewayUnavailable(f"gateway at {address}: {code.name}: {details}", code, details, address)


@dataclass(frozen=True)
class Progress:
    """How far a run is: entries every family has answered out of the
    corpus's entries, family calls answered and scheduled so far, and the
    families that overran a call's deadline."""
    entries_done: int
    entries_total: int
    batches_done: int
    batches_total: int
    upload_complete: bool
    slow_families: tuple[str, ...] = ()


@dataclass
class Leaderboard:
    """A leaderboard page: the corpus version ranked, the sort column, and
    the rows (as `champollion leaderboard --json` prints them)."""
    dataset_id: str
    corpus_version: str
    sort: str
    rows: list[dict] = field(default_factory=list)
    # Why no row has a rank range or interval, or a remark on them ("": none).
    ranks_note: str = ""


# A stored run's fields in print order (a Struct keeps none): rank (and a
# board's rank range, interval and cluster) and id, then spec §9.1's
# columns in the spec's order, then the rest alphabetically.
_FIELD_ORDER = {name: index for index, name in enumerate(("rank", "rank_range", "ci", "cluster", "run_id",
                                                          *(c.name for c in SPEC_COLUMNS)))}


def plain_row(struct) -> dict:
    """A store row sent as a Struct, as a dict in print order. Struct numbers
    are doubles: whole ones (ranks, counts) are written as integers."""
    def plain(value):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    row = plain(json_format.MessageToDict(struct))
    return dict(sorted(row.items(), key=lambda item: (_FIELD_ORDER.get(item[0], len(_FIELD_ORDER)), item[0])))


CorpusLike = Mapping[str, Any] | Sequence[Mapping[str, Any]] | gateway_pb2.Corpus | gateway_pb2.CorpusRef
PredictionsLike = Iterable[Mapping[str, Any] | gateway_pb2.Prediction] | PredictionFile
MetaLike = Mapping[str, Any] | gateway_pb2.RunMeta
GlossaryLike = Iterable[Mapping[str, Any] | family_pb2.GlossaryTerm]
CardLike = str | Mapping[str, Any] | run_card_pb2.RunCard


class Client:
    """A connection to one gateway. `token`: an API token sent on every call;
    `tls`: the path of the CA certificate that signed the gateway's, or True
    for the usual public CAs (None: plaintext, where a token goes only to a
    loopback address unless `insecure_token`). Use it as a context manager,
    or call close()."""

    def __init__(self, address: str, token: str | None = None, tls: str | Path | bool | None = None,
                 insecure_token: bool = False):
        self.address = address
        try:
            self._channel = open_channel(
                address, check_token(token, "token") if token is not None else None,
                tls_ca=Path(tls) if isinstance(tls, (str, Path)) else None, tls=tls is True,
                insecure_token=insecure_token)
        except ChannelError as error:
            raise InvalidSettings(str(error)) from None
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, ask: Callable[[gateway_pb2_grpc.GatewayStub], Any]) -> Any:
        try:
            return ask(self._stub)
        except grpc.RpcError as error:
            raise _error_from(error, self.address) from None
        except ValueError as error:  # a stream that ended early
            raise GatewayUnavailable(str(error), address=self.address) from None

    # Scoring

    def evaluate(
        self,
        corpus: CorpusLike,
        predictions: PredictionsLike,
        meta: MetaLike | None = None,
        glossary: GlossaryLike | None = None,
        *,
        progress: Callable[[Progress], None] | None = None,
        batch_size: int = 0,
        seed: int | None = None,
        resamples: int = 0,
        disable_plugins: bool = False,
        comet_model: str | None = None,
        source_lang: str | None = None,
        target_lang: str | None = None,
        metrics: Sequence[str] = (),
        families: Sequence[str] = (),
        on_entries: Callable[[dict, list[dict]], None] | None = None,
    ) -> dict:
        """The run card (a dict, entries included) of `predictions` against
        `corpus`: a corpus object {id, source_lang, target_lang, entries}, a
        list of entries (give source_lang and target_lang), a Corpus proto,
        or a CorpusRef naming a corpus registered in the gateway's store.
        `predictions`: objects as the JSON Lines file's lines, or Prediction
        protos. `progress` is called with a Progress as the run is scored.
        `metrics` (run-card keys or short names: "bleu", "chrf", "ter",
        "comet"...) and `families` ("surface"...) choose what is computed
        (default: everything); the rest is null, "not requested".
        `on_entries(card, entries)`, when given, takes the card's entries a
        part at a time as they arrive (with the card, less its entries) and
        the card returned has none: a run larger than memory can be written
        out as it comes."""
        request = self.evaluate_request(corpus, predictions, meta, glossary, batch_size=batch_size, seed=seed,
                                        resamples=resamples, disable_plugins=disable_plugins,
                                        comet_model=comet_model, source_lang=source_lang, target_lang=target_lang,
                                        metrics=metrics, families=families)
        return self.send_evaluation(request, progress, on_entries)

    @staticmethod
    def evaluate_request(corpus: CorpusLike, predictions: PredictionsLike, meta: MetaLike | None = None,
                         glossary: GlossaryLike | None = None, *, batch_size: int = 0, seed: int | None = None,
                         resamples: int = 0, disable_plugins: bool = False, comet_model: str | None = None,
                         source_lang: str | None = None, target_lang: str | None = None,
                         metrics: Sequence[str] = (), families: Sequence[str] = (),
                         ) -> gateway_pb2.EvaluateRequest:
        """The EvaluateRequest `evaluate` sends; InvalidSettings for data of
        the wrong shape (naming the field and entry). A PredictionFile given
        as `predictions` is put in corpus order in place (lines with them:
        the request's positions are then its positions)."""
        try:
            corpus_message = _corpus(corpus, source_lang, target_lang)
            prediction_file = _predictions(predictions)
            if not isinstance(corpus_message, gateway_pb2.CorpusRef):
                # Each prediction then travels with its entry (request_parts).
                prediction_file = inputs.in_corpus_order(prediction_file, corpus_message)
            request = inputs.build_request(corpus_message, prediction_file, _meta(meta), _glossary(glossary),
                                           batch_size, seed, resamples)
        except InputError as error:
            raise InvalidSettings(str(error)) from None
        request.options.disable_plugins = disable_plugins
        request.options.metrics.extend(metrics)
        request.options.families.extend(families)
        if comet_model:
            request.meta.comet_model = comet_model
        return request

    def send_evaluation(self, request: gateway_pb2.EvaluateRequest,
                        progress: Callable[[Progress], None] | None = None,
                        on_entries: Callable[[dict, list[dict]], None] | None = None) -> dict:
        """The run card of a built EvaluateRequest, sent in parts (a run
        larger than one gRPC message fits); `on_entries` as in `evaluate`."""
        known_total = len(request.corpus.entries)

        def report(update: gateway_pb2.EvaluateProgress) -> None:
            progress(Progress(
                entries_done=update.entries_done,
                # A registered corpus's size is the gateway's to tell.
                entries_total=max(known_total, update.entries_total),
                batches_done=update.batches_done, batches_total=update.batches_total,
                upload_complete=update.upload_complete, slow_families=tuple(update.slow_families)))

        return self._call(lambda stub: collect_run_card(stub.EvaluateUpload(request_parts(request)),
                                                        report if progress is not None else None, on_entries))

    def compare(self, baseline: CardLike, system: CardLike, method: str = "bs", seed: int | None = None,
                resamples: int = 0) -> dict:
        """Paired significance between two run cards of one corpus version:
        each a stored run's id, a run card dict (as `evaluate` returns) or
        a RunCard proto.
        `method`: "bs" (paired bootstrap) or "ar" (approximate randomisation);
        `resamples` 0: the gateway's default (1000 resamples for bs, 10000 trials for ar)."""
        request = gateway_pb2.CompareRequest(resamples=resamples, method=method)
        if seed is not None:
            request.seed = seed
        for side, card in (("baseline", baseline), ("system", system)):
            if isinstance(card, str):
                setattr(request, f"{side}_run_id", card)
            elif isinstance(card, run_card_pb2.RunCard):
                getattr(request, side).CopyFrom(card)
            else:
                getattr(request, side).CopyFrom(card_for_compare(card, side))
        # Sent in parts, so that run cards larger than one gRPC message fit.
        response = self._call(lambda stub: stub.CompareUpload(compare_parts(request), timeout=LONG_CALL_S))
        return message_to_dict(response)

    def compare_pairs(self, runs: Sequence[CardLike], names: Sequence[str] | None = None, method: str = "bs",
                      seed: int | None = None, resamples: int = 0, correction: str = "holm",
                      tie_threshold: float = 0.0, metrics: Sequence[str] = ()) -> dict:
        """Every pair of two or more runs of one corpus version, each a
        stored run's id, a run card dict or a RunCard proto, named by
        `names` (default: a run id as given, a card by the first 12
        characters of its run id, else its position #1, #2...). Per metric in `metrics`
        (keys or short names, and "composite"; default every metric compare
        tests and the composite): the runs' values, each pair's paired test
        (`method` as in `compare`) with its p-value uncorrected and corrected
        (`correction`: "holm", "bh" for Benjamini-Hochberg, or "none") over
        the metric's pairs, the shares of entries each side wins or ties
        (a difference of at most `tie_threshold` is a tie), and each run's
        rank range and significance cluster."""
        if names is not None and len(names) != len(runs):
            raise InvalidSettings(f"names: {len(names)} given for {len(runs)} runs")
        request = gateway_pb2.ComparePairsRequest(method=method, resamples=resamples, correction=correction,
                                                  tie_threshold=tie_threshold, metrics=list(metrics))
        if seed is not None:
            request.seed = seed
        for index, card in enumerate(runs):
            run = request.runs.add(name=names[index] if names is not None else "")
            if isinstance(card, str):
                run.run_id = card
            else:
                run.card.CopyFrom(card if isinstance(card, run_card_pb2.RunCard)
                                  else card_for_compare(card, f"runs[{index}]"))
        # Sent in parts, so that run cards larger than one gRPC message fit.
        response = self._call(lambda stub: stub.ComparePairsUpload(pairs_parts(request), timeout=LONG_CALL_S))
        return message_to_dict(response)

    def describe(self) -> dict:
        """What the gateway has loaded: families (reachable or not, metrics,
        versions) and languages."""
        return message_to_dict(self._call(lambda stub: stub.Describe(family_pb2.DescribeRequest(), timeout=30)))

    # Stored runs

    def runs(self, dataset: str | None = None, model: str | None = None) -> list[dict]:
        """Stored runs, newest first, optionally of one corpus id or model slug."""
        request = gateway_pb2.ListRunsRequest(dataset_id=dataset, model_slug=model)
        return [plain_row(run) for run in self._call(lambda stub: stub.ListRuns(request, timeout=QUICK_CALL_S)).runs]

    def show(self, run_id: str) -> dict:
        """A stored run card, entries included, as `evaluate` returned it
        (`run_id`: the id or a unique prefix of 6 or more characters)."""
        return self._call(lambda stub: collect_run_card(
            stub.GetRun(gateway_pb2.GetRunRequest(run_id=run_id), timeout=LONG_CALL_S)))

    def leaderboard(self, dataset: str, **options) -> list[dict]:
        """The rows of `leaderboard_page(dataset, **options)`."""
        return self.leaderboard_page(dataset, **options).rows

    def leaderboard_page(self, dataset: str, version: str | None = None, sort: str = "", ascending: bool = False,
                         all_submissions: bool = False, include_disqualified: bool = False,
                         official: bool = False, limit: int = 100) -> Leaderboard:
        """The runs of one corpus version (the latest unless `version`: a
        hash or a unique prefix of 6+ characters), ranked by `sort` (a spec
        §9.1 numeric column, a run-card metric such as "bleu", or
        cost_adjusted; empty: composite_score), highest first unless
        `ascending`; at most `limit` rows (0: all)."""
        request = gateway_pb2.LeaderboardRequest(
            dataset_id=dataset, version=version, sort=sort, ascending=ascending, all_submissions=all_submissions,
            include_disqualified=include_disqualified, official=official, limit=limit)
        board = self._call(lambda stub: stub.Leaderboard(request, timeout=QUICK_CALL_S))
        rows = [plain_row(row) for row in board.rows]
        for row in rows:  # a gateway older than floor runs sends no flag
            row.setdefault("floor", False)
        return Leaderboard(board.dataset_id, board.corpus_version, board.sort, rows, board.ranks_note)

    # Runs held for review (maintainers)

    def held_runs(self, dataset: str | None = None) -> list[dict]:
        """Runs held for a maintainer's review (secret tiers: a contamination
        finding, probing), oldest first: who submitted them, why, which entries."""
        request = gateway_pb2.ListHeldRunsRequest(dataset_id=dataset)
        return [plain_row(run) for run in
                self._call(lambda stub: stub.ListHeldRuns(request, timeout=QUICK_CALL_S)).runs]

    def review_run(self, run_id: str, decision: str, note: str = "") -> dict:
        """A held run cleared (`decision` "clear": it joins the leaderboard)
        or disqualified ("disqualify"); the run as held_runs lists it."""
        request = gateway_pb2.ReviewRunRequest(run_id=run_id, decision=decision, note=note)
        return plain_row(self._call(lambda stub: stub.ReviewRun(request, timeout=QUICK_CALL_S)).run)

    # Community review campaigns (maintainers; docs/community-review.md)

    def create_campaign(self, name: str, run_ids: list[str], reviewers: list[str], items: int = 0, overlap: int = 0,
                        seed: int | None = None, reference_review: bool = False, protocol: str = "",
                        prefill: str = "", prefill_share: float | None = None) -> dict:
        """A review campaign over stored runs of one registered corpus
        version (`items` 0: 200, `overlap` 0: 3 reviewers per item;
        `protocol` da, esa or mqm, empty: da; `prefill` none or lyss, with
        `prefill_share` of the items shown without suggestions): the
        campaign as stored, its id in `campaign_id`."""
        request = gateway_pb2.CreateCampaignRequest(name=name, run_ids=run_ids, reviewers=reviewers, items=items,
                                                    overlap=overlap, seed=seed, reference_review=reference_review,
                                                    protocol=protocol, prefill=prefill, prefill_share=prefill_share)
        return plain_row(self._call(lambda stub: stub.CreateCampaign(request, timeout=LONG_CALL_S)).campaign)

    def campaigns(self) -> list[dict]:
        """Every review campaign, newest first, with its progress."""
        response = self._call(lambda stub: stub.ListCampaigns(gateway_pb2.ListCampaignsRequest(), timeout=QUICK_CALL_S))
        return [plain_row(campaign) for campaign in response.campaigns]

    def campaign_results(self, campaign_id: str) -> dict:
        """A campaign with its progress and `results` (None before any
        rating): per-system means and intervals, agreement, rater
        reliability, and `judgments` (run id -> entry id -> mean score)."""
        request = gateway_pb2.CampaignResultsRequest(campaign_id=campaign_id)
        return plain_row(self._call(lambda stub: stub.CampaignResults(request, timeout=LONG_CALL_S)).campaign)

    def campaign_export(self, campaign_id: str, export_format: str) -> tuple[dict, str]:
        """A campaign with its results, and its ratings in `export_format`
        ("wmt-esa"; docs/community-review.md): (campaign, text)."""
        request = gateway_pb2.CampaignResultsRequest(campaign_id=campaign_id, export_format=export_format)
        response = self._call(lambda stub: stub.CampaignResults(request, timeout=LONG_CALL_S))
        return plain_row(response.campaign), response.export

    def add_campaign_reviewers(self, campaign_id: str, reviewers: list[str]) -> dict:
        """Reviewers added to an open campaign (their queues built, nobody's
        ratings touched): the campaign, with the items each got in `added`."""
        request = gateway_pb2.AddCampaignReviewersRequest(campaign_id=campaign_id, reviewers=reviewers)
        return plain_row(self._call(lambda stub: stub.AddCampaignReviewers(request, timeout=LONG_CALL_S)).campaign)

    def extend_campaign(self, campaign_id: str, items: int) -> dict:
        """`items` new items sampled into an open campaign from the same
        strata: the campaign, with the new entry ids in `added`."""
        request = gateway_pb2.ExtendCampaignRequest(campaign_id=campaign_id, items=items)
        return plain_row(self._call(lambda stub: stub.ExtendCampaign(request, timeout=LONG_CALL_S)).campaign)

    def campaign_audit(self, campaign_id: str) -> list[dict]:
        """A campaign's changes since creation, oldest first."""
        request = gateway_pb2.CampaignResultsRequest(campaign_id=campaign_id)
        response = self._call(lambda stub: stub.CampaignAudit(request, timeout=QUICK_CALL_S))
        return [plain_row(change) for change in response.changes]

    # Registered corpora

    def register_corpus(self, corpus: CorpusLike, tier: str, new_version: bool = False,
                        accept_check_failures: str | None = None) -> dict:
        """Registers `corpus` with its secrecy tier (dev, holdout, gold): its
        CorpusInfo as a dict, `created` false when already registered. Into
        holdout or gold it must pass the corpus check's gate (RequestRefused
        naming every failure) unless `accept_check_failures` gives a reason."""
        try:
            message = _corpus(corpus, None, None)
        except InputError as error:
            raise InvalidSettings(str(error)) from None
        return message_to_dict(self._call(lambda stub: stub.RegisterCorpus(
            corpus_parts(message, tier, new_version, accept_check_failures=accept_check_failures or ""),
            timeout=LONG_CALL_S)))

    def corpora(self) -> list[dict]:
        """Every registered corpus version, its tier and tier history."""
        listing = self._call(lambda stub: stub.ListCorpora(gateway_pb2.ListCorporaRequest(), timeout=QUICK_CALL_S))
        return [{key: value for key, value in message_to_dict(info).items() if key != "created"}
                for info in listing.corpora]

    def set_corpus_tier(self, corpus_id: str, tier: str, version: str | None = None,
                        accept_check_failures: str | None = None) -> dict:
        """Moves a corpus version (the latest unless `version`) to `tier`,
        through the corpus check's gate as register_corpus."""
        request = gateway_pb2.SetCorpusTierRequest(corpus_id=corpus_id, version=version or "", tier=tier,
                                                   accept_check_failures=accept_check_failures or "")
        return message_to_dict(self._call(lambda stub: stub.SetCorpusTier(request, timeout=LONG_CALL_S)))

    def check_corpus(self, corpus_id: str, version: str | None = None, purpose: str | None = None,
                     pilot_run_ids: Sequence[str] = (), pilot_cards: Sequence[run_card_pb2.RunCard] = ()
                     ) -> tuple[dict, dict]:
        """The corpus check of a registered version (maintainers only):
        (its CorpusInfo, the report). `purpose` defaults to its tier;
        pilot runs (stored ids, cards) give a simulated power estimate."""
        request = gateway_pb2.CheckCorpusRequest(corpus_id=corpus_id, version=version or "", purpose=purpose or "",
                                                 pilot_run_ids=list(pilot_run_ids), pilot_cards=list(pilot_cards))
        answer = self._call(lambda stub: stub.CheckCorpus(request, timeout=LONG_CALL_S))
        return message_to_dict(answer.corpus), json.loads(answer.report_json)

    def sources(self, corpus_id: str, version: str | None = None,
                on_corpus: Callable[[dict], None] | None = None) -> Iterator[dict]:
        """A corpus version's entries as {id, source, domain, difficulty},
        as they arrive; `on_corpus` gets the version's CorpusInfo first."""
        request = gateway_pb2.GetSourcesRequest(corpus_id=corpus_id, version=version or "")
        parts = self._call(lambda stub: stub.GetSources(request, timeout=LONG_CALL_S))
        try:
            for part in parts:
                if part.HasField("corpus") and on_corpus is not None:
                    on_corpus(message_to_dict(part.corpus))
                for entry in part.entries:
                    yield {"id": entry.id, "source": entry.source, "domain": entry.domain or None,
                           "difficulty": entry.difficulty if entry.HasField("difficulty") else None}
        except grpc.RpcError as error:
            raise _error_from(error, self.address) from None


def row_flags(row: Mapping[str, Any]) -> list[str]:
    """What a leaderboard row is flagged for, in words."""
    flags = []
    if row.get("cherry_pick_suspect"):
        by_token = row.get("submissions_by_token") or 0
        if by_token > 1 and by_token >= (row.get("submissions_with_fingerprint") or 0):
            flags.append(f"cherry-pick suspect ({by_token} submissions by its token)")
        else:
            flags.append(f"cherry-pick suspect ({row.get('submissions_with_fingerprint')} submissions)")
    if row.get("comparable") is False:
        flags.append("not comparable")
    if row.get("disqualified"):
        flags.append("disqualified")
    if row.get("floor"):
        flags.append(f"floor ({row.get('floor_kind')}): unranked")
    return flags


def rank_text(row: Mapping[str, Any]) -> str:
    """A board row's rank as the CLI and the pages show it: its rank range
    ("1–3"; "2" where both ends agree), else its rank ("" for none)."""
    found = row.get("rank_range")
    if found:
        best, worst = found
        return str(best) if best == worst else f"{best}–{worst}"
    return "" if row.get("rank") is None else str(row["rank"])


def ranks_explained(sort: str, clusters: str) -> str:
    """What a board's rank ranges and intervals are, in one sentence for
    the CLI and the pages; `clusters`: how the clusters are shown."""
    return (f"Rank: the ranks that paired bootstrap tests of every pair of ranked runs allow ({DEFAULT_RESAMPLES:,} "
            f"resamples, p from their normal fit, Holm-corrected, p < 0.05); in brackets beside {sort}, its 95% "
            f"interval; {clusters}.")


def split_floor(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """A board's rows as (systems, floor rows): the floor runs the gateway
    scored itself (degenerate systems, `floor` true) never take a rank."""
    return [row for row in rows if not row.get("floor")], [row for row in rows if row.get("floor")]


def card_for_compare(card: Mapping[str, Any], side: str = "card") -> run_card_pb2.RunCard:
    """A run card dict as the Compare RPC takes it: each entry as
    `entry_for_compare` keeps it, the dict left as it was."""
    if not isinstance(card, Mapping) or not isinstance(card.get("entries"), list):
        raise InvalidSettings(f"{side}: not a Champollion run card (no entries list)")
    trimmed = dict(card)
    trimmed["entries"] = [entry_for_compare(dict(entry)) if isinstance(entry, Mapping) else entry
                          for entry in card["entries"]]
    try:
        return dict_to_message(trimmed, run_card_pb2.RunCard())
    except (ValueError, TypeError, AttributeError) as error:
        raise InvalidSettings(f"{side}: not a Champollion run card: {error}") from None


def _corpus(corpus: CorpusLike, source_lang: str | None, target_lang: str | None,
            ) -> gateway_pb2.Corpus | gateway_pb2.CorpusRef:
    if isinstance(corpus, (gateway_pb2.Corpus, gateway_pb2.CorpusRef)):
        return corpus
    if isinstance(corpus, str) or not isinstance(corpus, (Mapping, Sequence)):
        raise InputError("corpus: must be a corpus object with entries, a list of entries, or a Corpus")
    return inputs.corpus_from_data(dict(corpus) if isinstance(corpus, Mapping) else list(corpus), "corpus", "corpus",
                                   source_lang, target_lang)


def _predictions(predictions: PredictionsLike) -> PredictionFile:
    if isinstance(predictions, PredictionFile):
        return predictions
    loaded = PredictionFile(Path("predictions"))
    for index, item in enumerate(predictions):
        loaded.predictions.append(item if isinstance(item, gateway_pb2.Prediction)
                                  else inputs._prediction(item, f"predictions[{index}]"))
        loaded.lines.append(index + 1)
    return loaded


def _meta(meta: MetaLike | None) -> gateway_pb2.RunMeta | None:
    if meta is None or isinstance(meta, gateway_pb2.RunMeta):
        return meta
    return inputs.meta_from_data(dict(meta) if isinstance(meta, Mapping) else meta, "meta")


def _glossary(glossary: GlossaryLike | None) -> list[family_pb2.GlossaryTerm] | None:
    if glossary is None:
        return None
    return [term if isinstance(term, family_pb2.GlossaryTerm) else inputs._term(term, f"glossary[{index}]")
            for index, term in enumerate(glossary)]
