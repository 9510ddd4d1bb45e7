"""The run card between its two forms: the dict the gateway builds (and the CLI
prints as JSON) and the RunCard protobuf message that travels over gRPC.

Nullable numbers are proto3 `optional` fields: None <-> unset. The conversion
walks the message descriptors, so a field added to the .proto needs no code
here; int64 fields stay integers (protobuf's own JSON mapping would turn them
into strings).
"""
from __future__ import annotations

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from champollion.eval.v1 import run_card_pb2

_JSON_WELL_KNOWN = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def run_card_to_proto(card: dict) -> run_card_pb2.RunCard:
    return json_format.ParseDict(card, run_card_pb2.RunCard())


def _value_to_python(field: FieldDescriptor, value):
    if field.message_type is None:
        return value
    if field.message_type.full_name in _JSON_WELL_KNOWN:
        converted = json_format.MessageToDict(value)
        # Struct keys arrive in arbitrary order; sorted output is stable and diffable.
        return dict(sorted(converted.items())) if isinstance(converted, dict) else converted
    return message_to_dict(value)


def message_to_dict(message: Message) -> dict:
    """Every field of `message` by its proto name; unset optionals as None."""
    result = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            result[field.name] = {
                key: _value_to_python(value_field, value[key]) for key in sorted(value.keys())
            }
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            result[field.name] = [_value_to_python(field, item) for item in value]
        elif field.has_presence and not message.HasField(field.name):
            result[field.name] = None
        else:
            result[field.name] = _value_to_python(field, value)
    return result


def run_card_from_proto(message: run_card_pb2.RunCard) -> dict:
    return message_to_dict(message)
