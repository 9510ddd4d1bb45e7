"""The metric table (gateway/card/metrics.py) against every other place a
run-card score key lives: each family scorer's declared `metrics`, the proto
`Scores` message and the run-card schema. A metric added to, or removed
from, any one of them alone fails here."""
from google.protobuf.descriptor import FieldDescriptor

from champollion.eval.v1 import run_card_pb2
from gateway.card.metrics import FAMILIES, SCORE_KEYS, TABLE, WEIGHTS, Kind
from gateway.card.reducers import CONSISTENCY_GROUPS
from services.behavioral.metrics import CONSISTENCY_LAYOUT
from services.registry import IMPLEMENTED
from tests.conftest import load_schema

# `scores` keys the gateway computes itself rather than reading from a family.
RUN_LEVEL_KEYS = {
    "composite", "quality_tier", "cost_adjusted",
    "tokens_per_second", "entries_per_minute", "avg_latency_seconds", "median_latency_seconds",
    "p95_latency_seconds",
    "confidence_intervals", "confidence_intervals_by_tier", "by_difficulty", "by_provenance",
    "total", "evaluated", "errors",
}
PROTO_TYPE = {Kind.STATISTIC: FieldDescriptor.TYPE_DOUBLE, Kind.COUNT: FieldDescriptor.TYPE_INT64,
              Kind.LABEL: FieldDescriptor.TYPE_STRING}
SCHEMA_TYPE = {Kind.STATISTIC: "number", Kind.COUNT: "integer", Kind.LABEL: "string"}


def scorer_problems() -> list[str]:
    problems = []
    if set(IMPLEMENTED) != set(FAMILIES):
        problems.append(f"families: registry {sorted(IMPLEMENTED)} vs table {sorted(FAMILIES)}")
    for family, create in IMPLEMENTED.items():
        declared = set(create().scorer.metrics)
        tabled = {row.key for row in TABLE if row.family == family and row.kind is Kind.STATISTIC}
        for key in sorted(declared - tabled):
            problems.append(f"{family} scorer declares {key}, the table does not give it to {family}")
        for key in sorted(tabled - declared):
            problems.append(f"table gives {key} to {family}, its scorer does not declare it")
    return problems


def proto_problems() -> list[str]:
    fields = run_card_pb2.Scores.DESCRIPTOR.fields_by_name
    problems = [f"proto Scores.{name} is neither in the table nor a run-level key"
                for name in sorted(set(fields) - set(SCORE_KEYS) - RUN_LEVEL_KEYS)]
    problems += [f"run-level key {name} missing from proto Scores" for name in sorted(RUN_LEVEL_KEYS - set(fields))]
    for row in TABLE:
        field = fields.get(row.key)
        if field is None:
            problems.append(f"{row.key} missing from proto Scores")
        elif field.type != PROTO_TYPE[row.kind] or not field.has_presence:
            problems.append(f"proto Scores.{row.key} is not an optional {SCHEMA_TYPE[row.kind]}")
    return problems


def schema_problems() -> list[str]:
    scores = load_schema()["properties"]["scores"]
    properties, required = scores["properties"], set(scores["required"])
    problems = [f"schema scores.{name} is neither in the table nor a run-level key"
                for name in sorted(set(properties) - set(SCORE_KEYS) - RUN_LEVEL_KEYS)]
    problems += [f"run-level key {name} missing from the schema" for name in sorted(RUN_LEVEL_KEYS - set(properties))]
    for row in TABLE:
        if not row.in_shared_schema:
            if row.key in properties:
                problems.append(f"{row.key} is in the schema but the table says in_shared_schema=False")
        elif row.key not in properties or row.key not in required:
            problems.append(f"{row.key} missing from the schema's scores (properties and required)")
        elif properties[row.key].get("type") != [SCHEMA_TYPE[row.kind], "null"]:
            problems.append(f"schema scores.{row.key} is not a nullable {SCHEMA_TYPE[row.kind]}")
    return problems


def table_problems() -> list[str]:
    """Rules the table states about itself."""
    problems = []
    for row in TABLE:
        if row.kind is Kind.COUNT:
            rate = SCORE_KEYS.get(row.count_of)
            if rate is None or rate.kind is not Kind.STATISTIC or rate.family != row.family:
                problems.append(f"{row.key} counts {row.count_of}, not a metric of {row.family}")
        if row.plugin_family is not None and row.plugin_family not in FAMILIES:
            problems.append(f"{row.key}: plugin family {row.plugin_family} is not a family")
        if (row.reducer is None) != (row.kind is not Kind.STATISTIC):
            problems.append(f"{row.key}: a reducer exactly when it has statistics")
    for profile, weights in WEIGHTS.items():
        if abs(sum(weights.values()) - 1.0) > 1e-9:
            problems.append(f"profile {profile} weights sum to {sum(weights.values())}")
    if CONSISTENCY_GROUPS != CONSISTENCY_LAYOUT:
        problems.append("the behavioral family and the consistency reducer name its layout label differently")
    return problems


def test_the_metric_table_agrees_with_scorers_proto_and_schema():
    problems = scorer_problems() + proto_problems() + schema_problems() + table_problems()
    assert problems == []
