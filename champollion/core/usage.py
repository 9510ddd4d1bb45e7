"""Token usage objects, as providers return them, read into the spec's four
token fields (SPEC §6.1): `prompt_tokens` includes cached tokens and
`completion_tokens` includes reasoning tokens.

Accepted shapes (README "Input formats"):
- flat: prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens;
- OpenAI Chat Completions: the flat counts, with cached and reasoning tokens
  in prompt_tokens_details.cached_tokens and
  completion_tokens_details.reasoning_tokens;
- OpenAI Responses: input_tokens, output_tokens,
  input_tokens_details.cached_tokens, output_tokens_details.reasoning_tokens;
- Anthropic: input_tokens (not cached), cache_read_input_tokens,
  cache_creation_input_tokens, output_tokens (thinking included);
- Gemini: promptTokenCount (cached included), cachedContentTokenCount,
  candidatesTokenCount, thoughtsTokenCount (not in candidates), either at
  the top level or under usageMetadata.

Totals (total_tokens, totalTokenCount) are not read: the run card adds them
up itself. Keys a shape does not know, at the top level or under
usageMetadata, are reported back, never dropped silently, so the run card can
warn that they were not counted; the other keys of a details object are
breakdowns of counts already read (audio, accepted prediction tokens).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")

GEMINI_WRAPPER = "usageMetadata"
GEMINI_COUNTS = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount")
ANTHROPIC_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
RESPONSES_DETAILS = ("input_tokens_details", "output_tokens_details")


class UsageValueError(ValueError):
    """A count that is not a non-negative integer; `key` is its path inside
    the usage object, e.g. ``prompt_tokens_details.cached_tokens``."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class UsageReading:
    """One usage object read: `counts` holds the §6.1 fields it gave (None
    when its shape was not recognised); `unrecognised` the key paths that
    were not counted."""
    counts: dict[str, int] | None
    unrecognised: tuple[str, ...] = ()


def _type_name(value) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", str: "string", list: "list", dict: "object"}.get(type(value), type(value).__name__)


class _Object:
    """One JSON object of a usage object, read key by key; remembers what
    was read, so that what was not can be reported."""

    def __init__(self, data: Mapping, prefix: str = ""):
        self.data = data
        self.prefix = prefix
        self.read: set[str] = set()

    def count(self, key: str) -> int | None:
        """A non-negative integer, or None when absent or null. Numbers may
        come as whole floats: a protobuf Struct carries every number so."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            return None
        path = self.prefix + key
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageValueError(path, f"must be an integer, got {_type_name(value)}")
        if isinstance(value, float):
            if not value.is_integer():
                raise UsageValueError(path, f"must be an integer, got {value}")
            value = int(value)
        if value < 0:
            raise UsageValueError(path, f"must not be negative, got {value}")
        return value

    def inner(self, key: str) -> "_Object":
        """A nested object (empty when absent or null)."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise UsageValueError(self.prefix + key, f"must be an object, got {_type_name(value)}")
        return _Object(value, f"{self.prefix}{key}.")

    def skip(self, *keys: str) -> None:
        """Keys known to carry nothing to count: totals, labels, breakdowns."""
        self.read.update(keys)

    def unread(self) -> tuple[str, ...]:
        return tuple(self.prefix + key for key in self.data if key not in self.read)


def _sum(*counts: int | None) -> int | None:
    """The sum of the counts given; None when none was."""
    given = [count for count in counts if count is not None]
    return sum(given) if given else None


def _one_of(obj: _Object, flat_key: str, details: _Object, detail_key: str) -> int | None:
    """A count that may come flat or in a details object; both may be sent
    only when they agree."""
    flat, detailed = obj.count(flat_key), details.count(detail_key)
    if flat is not None and detailed is not None and flat != detailed:
        raise UsageValueError(
            obj.prefix + flat_key, f"is {flat} but {details.prefix}{detail_key} is {detailed}; send one of them"
        )
    return detailed if flat is None else flat


def _openai_chat(obj: _Object) -> dict:
    obj.skip("total_tokens")
    return {
        "prompt_tokens": obj.count("prompt_tokens"),
        "completion_tokens": obj.count("completion_tokens"),
        "reasoning_tokens": _one_of(obj, "reasoning_tokens", obj.inner("completion_tokens_details"), "reasoning_tokens"),
        "cached_tokens": _one_of(obj, "cached_tokens", obj.inner("prompt_tokens_details"), "cached_tokens"),
    }


def _openai_responses(obj: _Object) -> dict:
    obj.skip("total_tokens")
    return {
        "prompt_tokens": obj.count("input_tokens"),
        "completion_tokens": obj.count("output_tokens"),
        "reasoning_tokens": obj.inner("output_tokens_details").count("reasoning_tokens"),
        "cached_tokens": obj.inner("input_tokens_details").count("cached_tokens"),
    }


def _anthropic(obj: _Object) -> dict:
    # cache_creation splits cache_creation_input_tokens by lifetime.
    obj.skip("cache_creation", "service_tier")
    cache_read = obj.count("cache_read_input_tokens")
    return {
        "prompt_tokens": _sum(obj.count("input_tokens"), cache_read, obj.count("cache_creation_input_tokens")),
        "completion_tokens": obj.count("output_tokens"),
        "reasoning_tokens": None,  # Anthropic does not report thinking tokens apart
        "cached_tokens": cache_read,
    }


def _gemini(obj: _Object) -> dict:
    obj.skip("totalTokenCount", "promptTokensDetails", "candidatesTokensDetails", "cacheTokensDetails", "trafficType")
    thoughts = obj.count("thoughtsTokenCount")
    return {
        "prompt_tokens": obj.count("promptTokenCount"),
        "completion_tokens": _sum(obj.count("candidatesTokenCount"), thoughts),
        "reasoning_tokens": thoughts,
        "cached_tokens": obj.count("cachedContentTokenCount"),
    }


def _shape_of(data: Mapping) -> Callable[[_Object], dict] | None:
    """The reader for the shape `data` has, told apart by the keys only that
    shape uses; None when no shape's keys are there."""
    keys = set(data)
    if keys & set(GEMINI_COUNTS):
        return _gemini
    if keys & set(RESPONSES_DETAILS):
        return _openai_responses
    if keys & set(ANTHROPIC_COUNTS):
        return _anthropic
    if not keys or keys & {*TOKEN_FIELDS, "prompt_tokens_details", "completion_tokens_details"}:
        return _openai_chat
    return None


def read_usage(data: Mapping) -> UsageReading:
    """Reads one usage object; raises UsageValueError on a count that is not
    a non-negative integer."""
    if all(key in TOKEN_FIELDS and type(value) is int and value >= 0 for key, value in data.items()):
        # The flat form with valid counts, as the proto's Usage brings it: the
        # common case, read without the general machinery.
        return UsageReading(counts=dict(data))
    top = _Object(data)
    obj = top.inner(GEMINI_WRAPPER) if data.get(GEMINI_WRAPPER) is not None else top
    reader = _shape_of(obj.data)
    counts = None
    if reader is not None:
        counts = {name: count for name, count in reader(obj).items() if count is not None}
    unread = top.unread() if obj is top else top.unread() + obj.unread()
    return UsageReading(counts=counts, unrecognised=tuple(sorted(unread)))
