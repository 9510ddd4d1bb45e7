"""Validation of an EvaluateRequest, piece by piece, so that a run uploaded
in parts is checked as it arrives (gateway.server.intake puts the pieces together).
Every error names the field path and, where there is one, the entry id, so
the CLI can point at a file and line and the gRPC server can answer
INVALID_ARGUMENT with a precise message."""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from google.protobuf import json_format

from champollion.core.cards import CardRegistry, Language, UnknownLanguage
from champollion.core.language_tags import LANGUAGES_HINT
from champollion.eval.v1 import gateway_pb2
from gateway.card.costs import parse_timestamp
from champollion.core.limits import (DEFAULT_MAX_TEXT_CHARS, MAX_ID_CHARS, MAX_LANGUAGE_CHARS, MAX_RESAMPLES,
                                     InvalidField, check_reference_count, check_text, shown)
from gateway.card.metrics import UnknownSelection, select
from champollion.core.usage import TOKEN_FIELDS, UsageReading, UsageValueError, read_usage


# One problem with the run: `field` a path such as ``predictions[6].latency_s``,
# `entry_id` the id concerned, if any. The core's type, since the checks the
# families run too (champollion.core.limits: check_text...) raise it.
InvalidRun = InvalidField


@dataclass(frozen=True)
class ValidatedRun:
    # Each side's card and canonical tag (champollion.core.cards.Language).
    source: Language
    target: Language
    # The score keys the run asked for (options.metrics, options.families);
    # None: every one.
    requested: frozenset[str] | None = None


def _finite_non_negative(value: float, field: str, entry_id: str | None = None) -> None:
    if not math.isfinite(value):
        raise InvalidRun(field, f"must be a finite number, got {value}", entry_id)
    if value < 0:
        raise InvalidRun(field, f"must not be negative, got {value}", entry_id)


def check_language(cards: CardRegistry, code: str, field: str) -> Language:
    """A language tag in any common form (champollion.core.language_tags),
    its card and canonical tag; InvalidRun naming `field` otherwise."""
    if not code:
        raise InvalidRun(field, "is required")
    if len(code) > MAX_LANGUAGE_CHARS:
        raise InvalidRun(field, f"a language code of {len(code)} characters (at most {MAX_LANGUAGE_CHARS}): {shown(code)}")
    try:
        return cards.resolve(code)
    except UnknownLanguage as error:
        raise InvalidRun(field, f"{error}; {LANGUAGES_HINT}") from None


def check_id(value: str, field: str) -> None:
    """An entry's or a prediction's id: given, and short."""
    if not value:
        raise InvalidRun(field, "is required")
    if len(value) > MAX_ID_CHARS:
        raise InvalidRun(field, f"an id of {len(value)} characters (at most {MAX_ID_CHARS})", value)


# A dataset id (a corpus's, a board's name): ASCII letters, digits, '.',
# '_' and '-', starting with a letter or digit. So no look-alike letters, no
# invisible or blank characters, no '/' (an id is a path segment of the web
# front's boards) and nothing for a shell or a URL to quote.
DATASET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
DATASET_ID_RULE = "letters A-Z and a-z, digits, '.', '_' and '-', starting with a letter or a digit"


def check_dataset_id(value: str, field: str) -> None:
    """A dataset id: given, short and of DATASET_ID's characters; InvalidRun
    naming `field` otherwise (the first character refused, by code point,
    since it may be invisible)."""
    if not value:
        raise InvalidRun(field, "is required")
    if len(value) > MAX_ID_CHARS:
        raise InvalidRun(field, f"an id of {len(value)} characters (at most {MAX_ID_CHARS})")
    if DATASET_ID.fullmatch(value):
        return
    position, char = next(((index, char) for index, char in enumerate(value)
                           if not (DATASET_ID.fullmatch(char) or (index and char in "._-"))), (0, value[0]))
    name = unicodedata.name(char, "unnamed")
    raise InvalidRun(field, f"{shown(value)}: character {position + 1} is U+{ord(char):04X} {name}; a dataset id "
                            f"takes {DATASET_ID_RULE}")


def _check_term(term, field: str, entry_id: str | None = None) -> None:
    if not term.source.strip() or not term.target.strip():
        raise InvalidRun(field, "source and target must be non-empty strings", entry_id)


def check_entry(entry: gateway_pb2.CorpusEntry, index: int, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> None:
    """One corpus entry on its own; `index` counts entries across upload parts."""
    path = f"corpus.entries[{index}]"
    check_id(entry.id, f"{path}.id")
    for name in ("source", "reference"):
        check_text(getattr(entry, name), f"{path}.{name}", entry.id, max_text_chars)
    for variant_index, variant in enumerate(entry.acceptable_variants):
        check_text(variant, f"{path}.acceptable_variants[{variant_index}]", entry.id, max_text_chars)
    if not entry.source.strip():
        raise InvalidRun(f"{path}.source", "must be a non-empty string", entry.id)
    if not entry.reference.strip():
        # sacreBLEU refuses empty references; an entry needs one (SPEC §9).
        raise InvalidRun(f"{path}.reference", "must be a non-empty string", entry.id)
    _check_extra_references(entry, path, max_text_chars)
    if entry.HasField("difficulty") and not 1 <= entry.difficulty <= 5:
        raise InvalidRun(f"{path}.difficulty", f"must be 1-5, got {entry.difficulty}", entry.id)
    for term_index, term in enumerate(entry.terms):
        _check_term(term, f"{path}.terms[{term_index}]", entry.id)
    for word_index, gold in enumerate(entry.morphology):
        # An empty word has no lemmas, so any word of the translation showing
        # its features would match it (services/structural/morphology.py).
        if not gold.word.strip():
            raise InvalidRun(f"{path}.morphology[{word_index}].word", "must be a non-empty string", entry.id)


def _check_extra_references(entry: gateway_pb2.CorpusEntry, path: str, max_text_chars: int) -> None:
    """Each further reference as the primary one. They are named as a corpus
    file's `references` list names them (the primary is references[0]),
    with the message's field beside it."""
    check_reference_count(len(entry.extra_references), f"{path}.extra_references", entry.id)
    for index, reference in enumerate(entry.extra_references):
        field = f"{path}.references[{index + 1}]"
        check_text(reference, field, entry.id, max_text_chars)
        if not reference.strip():
            raise InvalidRun(field, f"must be a non-empty string (the message's extra_references[{index}])",
                             entry.id)


def _usage_of(prediction: gateway_pb2.Prediction, path: str) -> UsageReading | None:
    """The prediction's usage (flat `usage` or the provider's own object in
    `provider_usage`) read into the spec's token fields."""
    if prediction.HasField("usage") and prediction.HasField("provider_usage"):
        raise InvalidRun(f"{path}.provider_usage", "send usage or provider_usage, not both", prediction.id)
    if prediction.HasField("usage"):
        data = {name: getattr(prediction.usage, name) for name in TOKEN_FIELDS if prediction.usage.HasField(name)}
    elif prediction.HasField("provider_usage"):
        data = json_format.MessageToDict(prediction.provider_usage)
    else:
        return None
    try:
        return read_usage(data)
    except UsageValueError as error:
        # Named as the platform's JSON names it: its `usage` object.
        raise InvalidRun(f"{path}.usage.{error.key}", error.message, prediction.id) from None


def check_prediction(prediction: gateway_pb2.Prediction, index: int,
                     max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> UsageReading | None:
    """One prediction on its own; returns its token usage read into the
    spec's fields (None without usage). Whether its id names a corpus entry,
    once, is the intake's to check (gateway.server.intake)."""
    path = f"predictions[{index}]"
    entry_id = prediction.id
    check_id(entry_id, f"{path}.id")
    for name in ("prediction", "raw_prediction"):
        if prediction.HasField(name):
            check_text(getattr(prediction, name), f"{path}.{name}", entry_id, max_text_chars)
    if not prediction.HasField("prediction") and not prediction.HasField("error"):
        raise InvalidRun(f"{path}.prediction", "missing (send `error` for an entry the method failed on)", entry_id)
    if prediction.HasField("latency_s"):
        _finite_non_negative(prediction.latency_s, f"{path}.latency_s", entry_id)
    if prediction.HasField("cost_usd"):
        _finite_non_negative(prediction.cost_usd, f"{path}.cost_usd", entry_id)
    return _usage_of(prediction, path)


def _validate_meta(meta: gateway_pb2.RunMeta) -> None:
    if meta.HasField("elapsed_seconds"):
        _finite_non_negative(meta.elapsed_seconds, "meta.elapsed_seconds")
    if meta.HasField("temperature") and not math.isfinite(meta.temperature):
        raise InvalidRun("meta.temperature", "must be a finite number")
    times = {}
    for name in ("time_start", "time_end"):
        if meta.HasField(name):
            try:
                times[name] = parse_timestamp(getattr(meta, name))
            except ValueError:
                raise InvalidRun(f"meta.{name}", f"not an ISO-8601 timestamp: {shown(getattr(meta, name))}") from None
    if len(times) == 2:
        try:
            backwards = times["time_end"] < times["time_start"]
        except TypeError:
            raise InvalidRun("meta.time_end", "time_start and time_end must both carry a time zone, or neither") from None
        if backwards:
            raise InvalidRun("meta.time_end", "is before meta.time_start")
    if meta.HasField("pricing"):
        for name in ("prompt_per_1m", "completion_per_1m", "cached_per_1m"):
            _finite_non_negative(getattr(meta.pricing, name), f"meta.pricing.{name}")
    for index, example in enumerate(meta.coaching_data):
        _check_coaching(example, f"meta.coaching_data[{index}]")


def _check_coaching(example: gateway_pb2.CoachingExample, path: str) -> None:
    """A text, or a source and its target; never both kinds, nothing empty."""
    if example.HasField("text"):
        if example.HasField("source") or example.HasField("target"):
            raise InvalidRun(path, "send a text, or a source and a target, not both")
        names = ("text",)
    else:
        names = ("source", "target")
    for name in names:
        if not getattr(example, name).strip():
            raise InvalidRun(f"{path}.{name}", "must be a non-empty string")


def check_header(request: gateway_pb2.EvaluateRequest, cards: CardRegistry) -> ValidatedRun:
    """Everything of a run but its entries and predictions: languages, meta,
    options, glossary. Raises InvalidRun on the first problem found."""
    corpus = request.corpus
    if corpus.id:
        check_dataset_id(corpus.id, "corpus.id")
    source = check_language(cards, corpus.source_lang, "corpus.source_lang")
    target = check_language(cards, corpus.target_lang, "corpus.target_lang")
    _validate_meta(request.meta)
    if request.options.batch_size < 0:
        raise InvalidRun("options.batch_size", f"must not be negative, got {request.options.batch_size}")
    if not 0 <= request.options.bootstrap_resamples <= MAX_RESAMPLES:
        raise InvalidRun("options.bootstrap_resamples", f"must be 0 (default) to {MAX_RESAMPLES}")
    if request.options.HasField("seed") and request.options.seed < 0:
        # numpy's generators take no negative seed.
        raise InvalidRun("options.seed", f"must not be negative, got {request.options.seed}")
    try:
        requested = select(request.options.metrics, request.options.families)
    except UnknownSelection as error:
        raise InvalidRun(f"options.{error.option}", str(error)) from None
    for index, term in enumerate(request.glossary):
        _check_term(term, f"glossary[{index}]")
    return ValidatedRun(source=source, target=target, requested=requested)


def header_fields_in(part: gateway_pb2.EvaluateRequest) -> list[str]:
    """The header fields a later upload part sets (it must set none)."""
    corpus = part.corpus
    found = (
        ("corpus.id", bool(corpus.id)),
        ("corpus.source_lang", bool(corpus.source_lang)),
        ("corpus.target_lang", bool(corpus.target_lang)),
        ("meta", part.HasField("meta")),
        ("glossary", len(part.glossary) > 0),
        ("options", part.HasField("options")),
    )
    return [name for name, is_set in found if is_set]
