"""Reading a run from files (the CLI's input formats, documented in README.md)
into an EvaluateRequest. This layer checks JSON syntax and types and remembers
where each prediction came from; the rules about values (duplicates, unknown
ids, negative counts, NaN) live in `gateway.server.validation`, shared with the RPC."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from apps.inputs.corpus_table import TABLE_SUFFIXES, load_table_corpus
from apps.inputs.dataset_names import content_dataset_id
from champollion.eval.v1 import family_pb2, gateway_pb2, run_card_pb2
from apps.inputs.input_text import InputError, PredictionFile, check_text, decode_utf8
from apps.inputs.plain_text import load_plain_text_run  # noqa: F401 (one place for every input format)
from champollion.core.run_card import dict_to_message, entry_for_compare
from champollion.core.usage import TOKEN_FIELDS
from champollion.core.limits import ECHO_CHARS, InvalidField, shown

# Deepest nesting of arrays and objects a file may have: far more than any
# input format needs, far less than would exhaust Python's stack (or the 100
# levels protobuf parses).
MAX_JSON_DEPTH = 64
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class _Fields:
    """Typed access to one JSON object, with errors that say where it is."""
    data: dict
    where: str

    def _fail(self, key: str, expected: str):
        raise InputError(f"{self.where}: {key}: must be {expected}, got {type(self.data[key]).__name__}")

    def string(self, key: str, required: bool = False) -> str | None:
        if key not in self.data or self.data[key] is None:
            if required:
                raise InputError(f"{self.where}: {key}: is required")
            return None
        if not isinstance(self.data[key], str):
            self._fail(key, "a string")
        return self.data[key]

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not _is_number(value):
            self._fail(key, "a number")
        return float(value)

    def integer(self, key: str, bounds: tuple[int, int] = INT64) -> int | None:
        """An integer within `bounds` (the protobuf field's range)."""
        value = self.data.get(key)
        if value is None:
            return None
        if not _is_integer(value):
            self._fail(key, "an integer")
        if not bounds[0] <= value <= bounds[1]:
            raise InputError(f"{self.where}: {key}: {shown(value)} is outside the range {bounds[0]} to {bounds[1]}")
        return value

    def items(self, key: str) -> list:
        """A list (of anything: the caller checks each item)."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self._fail(key, "a list")
        return value

    def strings(self, key: str) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise InputError(f"{self.where}: {key}: must be a list of strings")
        return value

    def copy_to(self, message, names: tuple[str, ...], read) -> None:
        """Sets each named field of `message` that the object carries, read
        with `read` (e.g. `self.string`)."""
        for name in names:
            value = read(name)
            if value is not None:
                setattr(message, name, value)

    def mapping(self, key: str) -> "_Fields | None":
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self._fail(key, "an object")
        return _Fields(value, f"{self.where}: {key}")


def _parse_json(text: str, where: str, line: int | None = None):
    """The JSON in `text`, checked by _check_json; `line`: the file's line
    `text` is (JSON Lines), else errors give the line within `text`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}:{line or error.lineno}: malformed JSON: {error.msg}") from None
    except RecursionError:  # deeper than Python's stack: far deeper than allowed
        raise InputError(f"{where}:{line or 1}: JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    _check_json(data, f"{where}:{line}" if line else where)
    return data


def _check_json(data, where: str) -> None:
    """What JSON allows but a run cannot carry, refused with its path:
    nesting deeper than MAX_JSON_DEPTH, integers outside int64, and lone
    surrogates (\ud800 escapes), which are not Unicode text."""
    pending = [(data, "", 1)]
    while pending:
        value, path, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise InputError(f"{where}: {path or 'the document'}: nested more than {MAX_JSON_DEPTH} levels deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    name = key if key.isidentifier() and len(key) <= ECHO_CHARS else shown(key)
                    child = f"{path}.{name}" if path else name
                    check_text(key, where, child)
                else:
                    child = f"{path}[{key}]"
                pending.append((item, child, depth + 1))
        elif isinstance(value, str):
            check_text(value, where, path)
        elif _is_integer(value) and not INT64[0] <= value <= INT64[1]:
            raise InputError(f"{where}: {path}: {shown(value)} is outside the range of a 64-bit integer")


def _read_json(path: Path):
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    return _parse_json(decode_utf8(data, str(path)), str(path))


def _corpus_entry(data, where: str) -> gateway_pb2.CorpusEntry:
    if not isinstance(data, dict):
        raise InputError(f"{where}: an entry must be a JSON object")
    fields = _Fields(data, where)
    entry_id = fields.string("id", required=True)
    fields.where = f"{where} (id {shown(entry_id)})"
    references = _references(fields)
    entry = gateway_pb2.CorpusEntry(
        id=entry_id,
        source=fields.string("source", required=True),
        reference=references[0],
        extra_references=references[1:],
        acceptable_variants=fields.strings("acceptable_variants"),
        domain=fields.string("domain") or "",
        phenomena=fields.strings("phenomena"),
    )
    difficulty = fields.integer("difficulty", INT32)
    if difficulty is not None:
        entry.difficulty = difficulty
    for index, gold in enumerate(fields.items("morphology")):
        gold_fields = _Fields(gold if isinstance(gold, dict) else {}, f"{fields.where}: morphology[{index}]")
        entry.morphology.add(word=gold_fields.string("word", required=True), features=gold_fields.strings("features"))
    for index, term in enumerate(fields.items("terms")):
        entry.terms.append(_term(term, f"{fields.where}: terms[{index}]"))
    provenance = data.get("provenance")
    if isinstance(provenance, str):
        entry.provenance.update({"source_doc": provenance})
    elif isinstance(provenance, dict):
        entry.provenance.update(provenance)
    elif provenance is not None:
        raise InputError(f"{fields.where}: provenance: must be an object or a string")
    return entry


def _references(fields: _Fields) -> list[str]:
    """`reference` (one), or `references` (one or more, the first the primary
    one), or both when they agree on the primary."""
    single = fields.string("reference")
    if fields.data.get("references") is None:
        if single is None:
            raise InputError(f"{fields.where}: reference: is required (or `references`, a list)")
        return [single]
    several = fields.strings("references")
    if not several:
        raise InputError(f"{fields.where}: references: must list at least one reference")
    if single is not None and single != several[0]:
        raise InputError(f"{fields.where}: reference: differs from references[0]; send `reference` or "
                         "`references` (whose first is the primary reference), or both agreeing")
    return several


def load_corpus(path: Path, source_lang: str | None = None, target_lang: str | None = None) -> gateway_pb2.Corpus:
    """A corpus object {id, source_lang, target_lang, entries}, or a bare list
    of entries with the languages given by the caller (flags override); a
    `.tsv` or `.csv` file is a table of entries (apps.inputs.corpus_table)."""
    if path.suffix.lower() in TABLE_SUFFIXES:
        return load_table_corpus(path, source_lang, target_lang)
    return corpus_from_data(_read_json(path), str(path), path.stem, source_lang, target_lang)


def corpus_from_data(data, where: str, default_id: str, source_lang: str | None = None,
                     target_lang: str | None = None) -> gateway_pb2.Corpus:
    """A corpus file's parsed JSON (an object with entries, or a bare list of
    entries) as a Corpus; `where` starts error messages; when the data names
    no id, its id is `default_id` and a digest of its content
    (content_dataset_id); languages given here override the data's."""
    if isinstance(data, list):
        header, entries = {}, data
    elif isinstance(data, dict):
        header, entries = data, data.get("entries")
        if not isinstance(entries, list):
            raise InputError(f"{where}: entries: must be a list of entry objects")
    else:
        raise InputError(f"{where}: must be a JSON object with entries, or a list of entries")
    fields = _Fields(header, where)
    corpus = gateway_pb2.Corpus(
        # A string, as over the RPC: [1, 2] is no id (str() made it "[1, 2]").
        id=fields.string("id"),
        source_lang=source_lang or fields.string("source_lang") or "",
        target_lang=target_lang or fields.string("target_lang") or "",
    )
    for name in ("source_lang", "target_lang"):
        if not getattr(corpus, name):
            raise InputError(f"{where}: {name}: missing (set it in the corpus or pass --{name.replace('_', '-')})")
    corpus.entries.extend(_corpus_entry(entry, f"{where}: entries[{index}]") for index, entry in enumerate(entries))
    if not corpus.id:
        corpus.id = content_dataset_id(default_id, corpus)
    return corpus


def _prediction(data, where: str) -> gateway_pb2.Prediction:
    if not isinstance(data, dict):
        raise InputError(f"{where}: each line must be a JSON object")
    fields = _Fields(data, where)
    entry_id = fields.string("id", required=True)
    fields.where = f"{where}: id {shown(entry_id)}"
    prediction = gateway_pb2.Prediction(id=entry_id)
    fields.copy_to(prediction, ("prediction", "raw_prediction", "error"), fields.string)
    fields.copy_to(prediction, ("latency_s", "cost_usd"), fields.number)
    usage = fields.mapping("usage")
    if usage is not None and set(usage.data) <= set(TOKEN_FIELDS):
        # The flat form is the proto's own Usage, so it is typed here.
        prediction.usage.SetInParent()
        usage.copy_to(prediction.usage, TOKEN_FIELDS, usage.integer)
    elif usage is not None:
        # A provider's usage object goes as it came; the gateway maps it
        # (champollion.core.usage), so one place knows the shapes.
        try:
            prediction.provider_usage.update(usage.data)
        except OverflowError:
            raise InputError(f"{usage.where}: a number too large for a token count") from None
    return prediction


def load_predictions(path: Path) -> PredictionFile:
    """JSON Lines: one object per entry; blank lines are ignored."""
    loaded = PredictionFile(path)
    try:
        handle = path.open("rb")
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    offset = 0
    with handle:
        for number, raw in enumerate(handle, start=1):
            line = decode_utf8(raw, f"{path}:{number}", offset)
            offset += len(raw)
            if not line.strip():
                continue
            data = _parse_json(line, str(path), number)
            loaded.predictions.append(_prediction(data, f"{path}:{number}"))
            loaded.lines.append(number)
    return loaded


def load_meta(path: Path) -> gateway_pb2.RunMeta:
    return meta_from_data(_read_json(path), str(path))


def meta_from_data(data, where: str) -> gateway_pb2.RunMeta:
    """A meta file's parsed JSON as a RunMeta; `where` starts error messages."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: must be a JSON object")
    fields = _Fields(data, where)
    meta = gateway_pb2.RunMeta()
    fields.copy_to(meta, ("model_slug", "condition", "time_start", "time_end", "prompt", "comet_model"), fields.string)
    fields.copy_to(meta, ("elapsed_seconds", "temperature"), fields.number)
    pricing = fields.mapping("pricing")
    if pricing is not None:
        for name in ("prompt_per_1m", "completion_per_1m"):
            value = pricing.number(name)
            if value is None:
                raise InputError(f"{pricing.where}: {name}: is required")
            setattr(meta.pricing, name, value)
        pricing.copy_to(meta.pricing, ("cached_per_1m",), pricing.number)
    meta.coaching_data.extend(_coaching_data(data.get("coaching_data"), f"{where}: coaching_data"))
    return meta


def _coaching_data(items, where: str) -> list[gateway_pb2.CoachingExample]:
    """A list of strings or of {source, target} objects."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise InputError(f"{where}: must be a list of strings or of {{source, target}} objects")
    examples = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            examples.append(gateway_pb2.CoachingExample(text=item))
        elif isinstance(item, dict):
            fields = _Fields(item, f"{where}[{index}]")
            examples.append(gateway_pb2.CoachingExample(
                source=fields.string("source", required=True), target=fields.string("target", required=True)
            ))
        else:
            raise InputError(f"{where}[{index}]: must be a string or a {{source, target}} object")
    return examples


def _term(item, where: str) -> family_pb2.GlossaryTerm:
    if not isinstance(item, dict):
        raise InputError(f"{where}: a term must be a JSON object")
    fields = _Fields(item, where)
    return family_pb2.GlossaryTerm(
        source=fields.string("source", required=True),
        target=fields.string("target", required=True),
        alternatives=fields.strings("alternatives"),
    )


def load_glossary(path: Path) -> list[family_pb2.GlossaryTerm]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: must be a JSON list of terms")
    return [_term(item, f"{path}: [{index}]") for index, item in enumerate(data)]


def load_run_card(path: Path) -> dict:
    """A run card JSON file, entries included."""
    card = _read_json(path)
    if not isinstance(card, dict) or not isinstance(card.get("entries"), list):
        raise InputError(f"{path}: not a Champollion run card (no entries list)")
    return card


def load_run_card_for_compare(path: Path) -> run_card_pb2.RunCard:
    """A stored run card (JSON) as the Compare RPC takes it: the dataset,
    composite, coverage and each entry as `entry_for_compare` keeps it."""
    card = load_run_card(path)
    card["entries"] = [entry_for_compare(entry) for entry in card["entries"]]
    try:
        return dict_to_message(card, run_card_pb2.RunCard())
    except (ValueError, TypeError, AttributeError) as error:
        raise InputError(f"{path}: not a Champollion run card: {error}") from None


def in_corpus_order(predictions: PredictionFile, corpus: gateway_pb2.Corpus) -> PredictionFile:
    """Sorts `predictions` by their entry's position in the corpus (ids no
    entry has last), each keeping its line number, and returns it. Uploaded
    in parts (see request_parts), every prediction then travels with its
    entry, and the positions the gateway's error messages count are these.
    In place, and only here (the client's evaluate_request calls it): a
    caller that keeps the file, as the CLI does to point an error at its
    line, reads the lines in the order the request sends them."""
    position = {entry.id: index for index, entry in enumerate(corpus.entries)}
    order = sorted(range(len(predictions.predictions)),
                   key=lambda index: position.get(predictions.predictions[index].id, len(position)))
    predictions.predictions[:] = [predictions.predictions[i] for i in order]
    predictions.lines[:] = [predictions.lines[i] for i in order]
    return predictions


# The run's options as the command line names them.
OPTION_FLAGS = {"options.seed": "--seed", "options.bootstrap_resamples": "--resamples",
                "options.batch_size": "--batch-size", "options.metrics": "--metrics",
                "options.families": "--families"}


def language_flags(source_lang: str | None, target_lang: str | None) -> dict[str, str]:
    """The corpus's language fields that command-line flags gave, by the
    flag (a flag overrides the corpus file, so an error is the flag's)."""
    given = (("corpus.source_lang", "--source-lang", source_lang), ("corpus.target_lang", "--target-lang", target_lang))
    return {field: flag for field, flag, value in given if value}


def locate_invalid(violation: InvalidField, corpus: Path | None, predictions: PredictionFile, meta: Path | None,
                   glossary: Path | None, flags: dict[str, str] | None = None) -> str:
    """One line for a field the gateway refused (its structured details:
    apps.client reads them), prefixed with the file that holds the field,
    and the line for a prediction; a field a flag gave (`flags`, field ->
    flag: language_flags) is named by the flag."""
    flag = {**OPTION_FLAGS, **(flags or {})}.get(violation.field)
    if flag is not None:
        return f"{flag}: {violation.message}"
    # The path's first step: "predictions[6]" of "predictions[6].latency_s".
    name, _, index = violation.field.split(".", 1)[0].partition("[")
    if name == "predictions" and index.rstrip("]").isdigit():
        position = int(index.rstrip("]"))
        if position < len(predictions.lines):
            return f"{predictions.path}:{predictions.lines[position]}: {violation}"
    path = {"corpus": corpus, "meta": meta, "glossary": glossary}.get(name)
    return f"{path}: {violation}" if path is not None else str(violation)


def build_request(
    corpus: gateway_pb2.Corpus | gateway_pb2.CorpusRef,
    predictions: PredictionFile,
    meta: gateway_pb2.RunMeta | None = None,
    glossary: list[family_pb2.GlossaryTerm] | None = None,
    batch_size: int = 0,
    seed: int | None = None,
    resamples: int = 0,
) -> gateway_pb2.EvaluateRequest:
    """`corpus`: the corpus sent, or a CorpusRef naming a corpus registered
    in the gateway's store (server-side scoring: predictions only)."""
    request = gateway_pb2.EvaluateRequest(predictions=predictions.predictions)
    if isinstance(corpus, gateway_pb2.CorpusRef):
        request.corpus_ref.CopyFrom(corpus)
    else:
        request.corpus.CopyFrom(corpus)
    if meta is not None:
        request.meta.CopyFrom(meta)
    request.glossary.extend(glossary or [])
    request.options.batch_size = batch_size
    if seed is not None:
        request.options.seed = seed
    request.options.bootstrap_resamples = resamples
    return request
