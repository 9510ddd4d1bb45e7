"""The intake of a run: from its parts (one for Evaluate, many for
EvaluateUpload) to batches for the families, in corpus order.

Each part is validated whole before any of its entries is batched, and the
last part before any batch goes out at all, so a run sent in one message is
refused before anything is scored. An entry's prediction comes in the same
part as the entry or an earlier one; an entry without one by the end of its
part has none (it scores as failed). So no entry waits for a later part, and
batches keep corpus order with at most two parts in memory. What the run
card needs of an entry later is kept compactly: counts and tallies here, the
id, reference, difficulty and error in the run's spill on disk.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable

from champollion.core.cards import CardRegistry
from champollion.eval.v1 import family_pb2, gateway_pb2
from gateway.card.adequacy import text_gates
from gateway.card.breakdowns import provenance_key
from gateway.card.contamination import Coaching, ContaminationCheck
from gateway.card.costs import EntryUsage, Pricing, TokenTotalOverflow, UsageTally
from gateway.card.identity import version_reference
from gateway.card.metrics import METRICS
from champollion.core.limits import shown
from champollion.core.usage import UsageReading
from gateway.server.spill import RunSpill
from gateway.server.validation import (
    DEFAULT_MAX_TEXT_CHARS,
    InvalidRun,
    ValidatedRun,
    check_entry,
    check_header,
    check_prediction,
    header_fields_in,
)


# Entries a warning names, at most; it counts the others.
IDS_SHOWN = 5


@dataclass
class RunTally:
    """What the run card's run-level blocks need of the entries, entry by entry."""
    usage: UsageTally
    total: int = 0
    failed: int = 0
    # Entries sent with a prediction and an error both, scored as failed:
    # how many, and the first IDS_SHOWN ids.
    both_sent: int = 0
    both_sent_ids: list[str] = field(default_factory=list)
    # Per entry, in corpus order: difficulty tier and provenance group (or None).
    difficulties: list[str | None] = field(default_factory=list)
    provenance: list[str | None] = field(default_factory=list)
    domains: Counter = field(default_factory=Counter)
    any_variants: bool = False

    def both_sent_warning(self) -> str | None:
        """The run card's warning about entries sent with a prediction and an
        error: the error wins (failing is never rewarded), and the method's
        author should know that a prediction it sent was not scored."""
        if not self.both_sent:
            return None
        one = self.both_sent == 1
        ids = ", ".join(shown(entry_id) for entry_id in self.both_sent_ids)
        more = self.both_sent - len(self.both_sent_ids)
        return (f"{self.both_sent} {'entry' if one else 'entries'} sent both a prediction and an error and "
                f"{'was' if one else 'were'} scored as failed, {'its prediction' if one else 'their predictions'} "
                f"ignored: {'id' if one else 'ids'} {ids}{f' and {more} more' if more else ''}")


def pricing_of(meta: gateway_pb2.RunMeta) -> Pricing | None:
    if not meta.HasField("pricing"):
        return None
    pricing = meta.pricing
    return Pricing(
        prompt_per_1m=pricing.prompt_per_1m,
        completion_per_1m=pricing.completion_per_1m,
        cached_per_1m=pricing.cached_per_1m if pricing.HasField("cached_per_1m") else None,
    )


def coaching_of(meta: gateway_pb2.RunMeta) -> list[Coaching]:
    return [item.text if item.HasField("text") else (item.source, item.target) for item in meta.coaching_data]


def meta_texts(meta: gateway_pb2.RunMeta) -> list[tuple[str, str]]:
    """Every text field of the run's meta but the prompt (checked first) and
    the coaching data, as (path, text): a reference hidden in the model slug
    or the condition is as much in the method's hands as one in the prompt.
    Read from the message's descriptor, so a field added later is checked too."""
    return [(f"meta.{field.name}", getattr(meta, field.name)) for field in meta.DESCRIPTOR.fields
            if field.type == field.TYPE_STRING and field.label != field.LABEL_REPEATED
            and field.name != "prompt" and getattr(meta, field.name)]


def _entry_usage(entry: gateway_pb2.CorpusEntry, prediction: gateway_pb2.Prediction | None,
                 reading: UsageReading | None) -> EntryUsage:
    """`reading`: the prediction's usage as validation read it."""
    cost = latency = None
    if prediction is not None:
        cost = prediction.cost_usd if prediction.HasField("cost_usd") else None
        latency = prediction.latency_s if prediction.HasField("latency_s") else None
    return EntryUsage(
        usage=reading.counts if reading else None,
        cost_usd=cost,
        latency_s=latency,
        source_chars=len(entry.source),
        unrecognised=reading.unrecognised if reading else (),
    )


def _error_of(prediction: gateway_pb2.Prediction | None) -> str | None:
    if prediction is None:
        return "no prediction"
    return prediction.error if prediction.HasField("error") else None


def _prediction_text(prediction: gateway_pb2.Prediction | None) -> str | None:
    """The output as stored with the run (for community review), None without one."""
    return prediction.prediction if prediction is not None and prediction.HasField("prediction") else None


def _batch_entry(entry: gateway_pb2.CorpusEntry, prediction: gateway_pb2.Prediction | None) -> family_pb2.BatchEntry:
    """A missing or failed prediction becomes an empty output flagged
    `failed`: failing is never rewarded."""
    failed = prediction is None or prediction.HasField("error") or not prediction.HasField("prediction")
    batch_entry = family_pb2.BatchEntry(
        id=entry.id,
        source=entry.source,
        reference=entry.reference,
        extra_references=list(entry.extra_references),
        acceptable_variants=list(entry.acceptable_variants),
        prediction="" if failed else prediction.prediction,
        failed=failed,
        morphology=list(entry.morphology),
        terms=list(entry.terms),
    )
    if prediction is not None and prediction.HasField("raw_prediction"):
        batch_entry.raw_prediction = prediction.raw_prediction
    return batch_entry


class RunIntake:
    def __init__(self, first_part: gateway_pb2.EvaluateRequest, cards: CardRegistry, spill: RunSpill,
                 max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
                 before_batches: Callable[[], Awaitable[None]] | None = None):
        """Validates the run's header, carried by `first_part`; no text of
        an entry may be longer than `max_text_chars`. `before_batches` is
        awaited once, when the first batch is ready and before it is handed
        on (an upload's turn to be scored: gateway/server/admission.py); the
        upload is read no further meanwhile, and the batch is kept."""
        self.run: ValidatedRun = check_header(first_part, cards)
        self._before_batches = before_batches
        self._max_text_chars = max_text_chars
        self.header = gateway_pb2.EvaluateRequest()
        self.header.CopyFrom(first_part)
        # The languages as the run card and the families read them: canonical tags.
        self.header.corpus.source_lang = self.run.source.tag
        self.header.corpus.target_lang = self.run.target.tag
        del self.header.corpus.entries[:]
        del self.header.predictions[:]
        self.tally = RunTally(usage=UsageTally(pricing_of(first_part.meta)))
        meta = first_part.meta
        self.contamination = ContaminationCheck.of(
            meta.prompt if meta.HasField("prompt") else None, coaching_of(meta), meta_texts(meta),
            glossary=[(term.source, term.target) for term in first_part.glossary],
        )
        self._first_part = first_part
        self._spill = spill
        # Predictions that came before their entry's part: id -> (index, a
        # copy, so that the part they came in is not kept alive).
        self._early: dict[str, tuple[int, gateway_pb2.Prediction]] = {}
        # Usage of the predictions whose entries are not readied yet, by id,
        # as validation read it (read once), with the prediction's index.
        self._usage: dict[str, tuple[int, UsageReading]] = {}
        # Entries whose part, and the parts before it, had no prediction for them.
        self._unpredicted: set[str] = set()
        self._entries_seen = 0
        self._predictions_seen = 0
        self._ready: list[family_pb2.BatchEntry] = []

    def _batch_template(self, run_id: str) -> family_pb2.ScoreBatchRequest:
        """What every batch of the run carries besides its entries: the
        languages, the glossary and the typed options the families read."""
        template = family_pb2.ScoreBatchRequest(
            run_id=run_id,
            source_lang=self.header.corpus.source_lang,
            target_lang=self.header.corpus.target_lang,
            glossary=list(self.header.glossary),
            disable_plugins=self.header.options.disable_plugins,
        )
        if self.run.requested is not None:
            # Only metrics: the counts and labels come with them.
            template.selection.metrics.extend(sorted(key for key in self.run.requested if key in METRICS))
        if self.header.meta.HasField("comet_model"):
            template.comet_model = self.header.meta.comet_model
        return template

    async def batches(
        self, later_parts: AsyncIterator[gateway_pb2.EvaluateRequest], run_id: str, batch_size: int
    ) -> AsyncIterator[family_pb2.ScoreBatchRequest]:
        """Batches of `batch_size` entries (the last may be smaller), in
        corpus order, from the first part and `later_parts`. Raises
        InvalidRun on the first problem found."""
        template = self._batch_template(run_id)

        def batch_of(entries) -> family_pb2.ScoreBatchRequest:
            batch = family_pb2.ScoreBatchRequest()
            batch.CopyFrom(template)
            batch.entries.extend(entries)
            return batch

        # One part held back: its entries are batched only once the next part
        # has come, or once the end of the upload has been checked.
        held, number = self._first_part, 1
        async for part in later_parts:
            number += 1
            misplaced = header_fields_in(part)
            if misplaced:
                raise InvalidRun(
                    misplaced[0], f"set in upload part {number} (counting from 1); only the first part carries the run's header"
                )
            self._take(held)
            while len(self._ready) >= batch_size:
                await self._starting()
                yield batch_of(self._ready[:batch_size])
                del self._ready[:batch_size]
            held = part
        self._take(held)
        self._first_part = None
        self._end_of_upload()
        for start in range(0, len(self._ready), batch_size):
            await self._starting()
            yield batch_of(self._ready[start:start + batch_size])
        self._ready.clear()

    async def _starting(self) -> None:
        """Awaits `before_batches` before the first batch goes out (once)."""
        if self._before_batches is not None:
            before, self._before_batches = self._before_batches, None
            await before()

    def _take(self, part: gateway_pb2.EvaluateRequest) -> None:
        """Validates a part and readies its entries, in order, each with its
        prediction from this part or an earlier one."""
        entries: dict[str, gateway_pb2.CorpusEntry] = {}
        for entry in part.corpus.entries:
            index = self._entries_seen
            self._entries_seen += 1
            check_entry(entry, index, self._max_text_chars)
            if entry.id in entries or self._spill.has_entry(entry.id):
                raise InvalidRun(f"corpus.entries[{index}].id", "duplicate entry id", entry.id)
            entries[entry.id] = entry
        predictions: dict[str, gateway_pb2.Prediction] = {}
        for prediction in part.predictions:
            index = self._predictions_seen
            self._predictions_seen += 1
            reading = check_prediction(prediction, index, self._max_text_chars)
            self._file_prediction(prediction, index, entries, predictions)
            if reading is not None:
                self._usage[prediction.id] = (index, reading)
        for entry_id, entry in entries.items():
            prediction = predictions.get(entry_id)
            if prediction is None and entry_id in self._early:
                prediction = self._early.pop(entry_id)[1]
            if prediction is None:
                self._unpredicted.add(entry_id)
            self._ready_entry(entry, prediction)

    def _file_prediction(self, prediction: gateway_pb2.Prediction, index: int,
                         entries: dict[str, gateway_pb2.CorpusEntry], predictions: dict) -> None:
        """Puts a prediction with its entry in this part, or aside until its
        entry comes; refuses a second one for an id, or one after its entry."""
        entry_id, path = prediction.id, f"predictions[{index}].id"
        if entry_id in predictions or entry_id in self._early:
            raise InvalidRun(path, "duplicate prediction for this id", entry_id)
        if entry_id in self._unpredicted:
            raise InvalidRun(
                path, "came after its entry's part; send a prediction in its entry's part or an earlier one", entry_id
            )
        if entry_id in entries:
            predictions[entry_id] = prediction
        elif self._spill.has_entry(entry_id):
            raise InvalidRun(path, "duplicate prediction for this id", entry_id)
        else:
            early = gateway_pb2.Prediction()
            early.CopyFrom(prediction)
            self._early[entry_id] = (index, early)

    def _end_of_upload(self) -> None:
        if self._early:
            entry_id, (index, _) = min(self._early.items(), key=lambda item: item[1][0])
            raise InvalidRun(f"predictions[{index}].id", "no corpus entry has this id", entry_id)
        if not self._entries_seen:
            raise InvalidRun("corpus.entries", "the corpus has no entries")

    def _ready_entry(self, entry: gateway_pb2.CorpusEntry, prediction: gateway_pb2.Prediction | None) -> None:
        batch_entry = _batch_entry(entry, prediction)
        difficulty = entry.difficulty if entry.HasField("difficulty") else None
        # The spill hashes what the corpus version covers: every reference.
        self._spill.add_entry(self.tally.total, entry.id, version_reference(entry.reference, entry.extra_references),
                              difficulty, _error_of(prediction), _prediction_text(prediction),
                              text_gates(entry.source, entry.reference, batch_entry.prediction))
        self.contamination.add(entry.id, entry.source, entry.reference, *entry.extra_references)
        tally = self.tally
        tally.total += 1
        tally.failed += batch_entry.failed
        if prediction is not None and prediction.HasField("prediction") and prediction.HasField("error"):
            tally.both_sent += 1
            if len(tally.both_sent_ids) < IDS_SHOWN:
                tally.both_sent_ids.append(entry.id)
        tally.difficulties.append(None if difficulty is None else str(difficulty))
        tally.provenance.append(provenance_key(entry))
        if entry.domain:
            tally.domains[entry.domain] += 1
        # Further references are accepted outputs too (equivalent match takes any of them).
        tally.any_variants = tally.any_variants or bool(entry.acceptable_variants) or bool(entry.extra_references)
        index, reading = self._usage.pop(entry.id, (None, None))
        try:
            tally.usage.add(_entry_usage(entry, prediction, reading))
        except TokenTotalOverflow as error:
            raise InvalidRun(f"predictions[{index}].usage.{error.name}", error.reason,
                             entry.id) from None
        self._ready.append(batch_entry)
