"""The run card between its two forms: the dict the gateway builds (and the CLI
prints as JSON) and the RunCard protobuf message that travels over gRPC.

The conversion walks the message descriptors, so a field added to the .proto
needs no code here. Three rules keep the JSON in the layout of spec §9:
  - a proto3 `optional` field that is unset is None (null), and None unsets it;
  - int64 fields stay integers (protobuf's own JSON mapping makes them strings);
  - a message whose only field is a map (IntervalSet) is written as that map,
    since proto maps cannot nest directly; one whose only field is a repeated
    number (StatVector) is written as that list.
Struct fields (per-entry values) use protobuf's JSON mapping.
"""
from __future__ import annotations

import math

from google.protobuf import json_format, struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from champollion.eval.v1 import run_card_pb2

_JSON_WELL_KNOWN = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _wrapped_field(descriptor: Descriptor) -> FieldDescriptor | None:
    """The one field of a message that only wraps a map or a list of scalars."""
    if len(descriptor.fields) != 1:
        return None
    field = descriptor.fields[0]
    if _is_map(field) or (field.label == FieldDescriptor.LABEL_REPEATED and field.message_type is None):
        return field
    return None


# --- proto -> dict -------------------------------------------------------------

def _value_to_python(field: FieldDescriptor, value):
    if field.message_type is None:
        return value
    if field.message_type.full_name in _JSON_WELL_KNOWN:
        return _keys_sorted(json_format.MessageToDict(value))
    return message_to_dict(value)


def _keys_sorted(value):
    """Struct keys arrive in arbitrary order; sorted output is stable and diffable."""
    if isinstance(value, dict):
        return {key: _keys_sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_keys_sorted(item) for item in value]
    return value


def message_to_dict(message: Message):
    """Every field of `message` by its proto name; unset optionals as None."""
    wrapped = _wrapped_field(message.DESCRIPTOR)
    if wrapped is not None:
        value = getattr(message, wrapped.name)
        return _map_to_dict(wrapped, value) if _is_map(wrapped) else list(value)
    result = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            result[field.name] = _map_to_dict(field, value)
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            result[field.name] = [_value_to_python(field, item) for item in value]
        elif field.has_presence and not message.HasField(field.name):
            result[field.name] = None
        else:
            result[field.name] = _value_to_python(field, value)
    return result


def _map_to_dict(field: FieldDescriptor, value) -> dict:
    value_field = field.message_type.fields_by_name["value"]
    return {key: _value_to_python(value_field, value[key]) for key in sorted(value.keys())}


# --- dict -> proto -------------------------------------------------------------

def _fill_from_python(field: FieldDescriptor, target: Message, value) -> None:
    """Fills the message `target` (of `field`'s message type) from `value`."""
    if field.message_type.full_name in _JSON_WELL_KNOWN:
        json_format.ParseDict(value, target)
    else:
        target.SetInParent()  # present even when all its fields are null
        dict_to_message(value, target)


def dict_to_message(data, message: Message) -> Message:
    wrapped = _wrapped_field(message.DESCRIPTOR)
    if wrapped is not None:
        data = {wrapped.name: data}
    for name, value in data.items():
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise ValueError(f"{message.DESCRIPTOR.name} has no field {name!r}")
        if value is None:
            continue
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            container = getattr(message, name)
            for key, item in value.items():
                if value_field.message_type is None:
                    container[key] = item
                else:
                    _fill_from_python(value_field, container[key], item)
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            container = getattr(message, name)
            if field.message_type is None:
                container.extend(value)
            else:
                for item in value:
                    _fill_from_python(field, container.add(), item)
        elif field.message_type is not None:
            _fill_from_python(field, getattr(message, name), value)
        else:
            setattr(message, name, value)
    return message


def _plain_value(value: struct_pb2.Value):
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_plain_value(item) for item in value.list_value.values]
    if kind == "number_value" and not math.isfinite(value.number_value):
        raise ValueError(f"{value.number_value} is not a JSON number")  # as protobuf's JSON mapping refuses it
    return None if kind in (None, "null_value") else getattr(value, kind)


def struct_to_dict(struct: struct_pb2.Struct) -> dict:
    """A Struct as plain Python values, keys sorted: what protobuf's JSON
    mapping gives (json_format.MessageToDict), several times faster."""
    return {key: _plain_value(struct.fields[key]) for key in sorted(struct.fields)}


def entry_as_dict(entry: run_card_pb2.EntryResult) -> dict:
    """The entry as the run card's JSON has it (what message_to_dict gives,
    which tests/test_store_rpcs.py holds this to), read field by field: ten
    times faster than the generic walk, which matters for a 10,000-entry run
    (1.8 against 0.2 s)."""
    return {
        "id": entry.id,
        "scores": struct_to_dict(entry.scores),
        "error": entry.error if entry.HasField("error") else None,
        "difficulty": entry.difficulty if entry.HasField("difficulty") else None,
        "stats": {metric_id: list(entry.stats[metric_id].values) for metric_id in sorted(entry.stats)},
    }


# The warning of a family whose batch overran its deadline and was sent again
# (gateway/server/evaluation.py): its scores are complete, so two evaluations
# of one run may differ by it alone.
SLOW_FAMILY_WARNING = "was slow: a batch overran its call deadline and was sent once more; its scores are complete"


def entry_for_compare(entry):
    """A run card entry as Compare reads it: its statistics and, of its
    per-entry scores, only an adequacy gate's verdict (the composite reads
    inadequate entries at their worst); the other scores would only cost
    conversion time. Anything but a dict is left as it is, to be refused."""
    if not isinstance(entry, dict):
        return entry
    trimmed = {key: value for key, value in entry.items() if key != "scores"}
    if isinstance(entry.get("scores"), dict) and entry["scores"].get("adequate") is False:
        trimmed["scores"] = {"adequate": False}
    return trimmed


def reproducible_part(card: dict) -> dict:
    """The card less what differs between two evaluations of the same run by
    design: its run id, the store's count of runs sharing its fingerprint
    and warnings about time. Whatever else the gateway scores meanwhile, the
    rest is the same, byte for byte (README, "Reproducibility")."""
    kept = {key: value for key, value in card.items() if key != "run_id"}
    kept["integrity"] = {k: v for k, v in card["integrity"].items() if k != "submissions_with_fingerprint"}
    kept["warnings"] = [warning for warning in card["warnings"] if SLOW_FAMILY_WARNING not in warning]
    return kept


def run_card_to_proto(card: dict) -> run_card_pb2.RunCard:
    return dict_to_message(card, run_card_pb2.RunCard())


def run_card_from_proto(message: run_card_pb2.RunCard) -> dict:
    return message_to_dict(message)
