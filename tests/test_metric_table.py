"""The metric table (gateway/card/metrics.py) against every other place a
run-card score key lives: each family scorer's declared `metrics`, the proto
`Scores` message, the run-card schema, the store's columns and the report's
lists and charts. A metric added to, or removed from, any one of them alone
fails here."""
import sacrebleu
from google.protobuf.descriptor import FieldDescriptor

from apps.report.figures import CI_CHARTS
from apps.report.model import ENTRY_METRICS, SCORE_ROWS
from champollion.core.columns import SPEC_COLUMNS
from champollion.core.sacrebleu_adapter import SACREBLEU_METRICS

from champollion.eval.v1 import run_card_pb2
from gateway.card.metrics import CI_METRICS, FAMILIES, LABELS, METRICS, PERCENT_METRICS, SCORE_KEYS, TABLE, WEIGHTS
from gateway.card.metrics import Kind
from gateway.card.metrics import RUN_LEVEL_KEYS as TABLE_RUN_LEVEL_KEYS
from gateway.card.reducers import CONSISTENCY_GROUPS
from services.behavioral.metrics import CONSISTENCY_LAYOUT
from services.registry import IMPLEMENTED, create_scorer
from tests.conftest import load_schema

# `scores` keys the gateway computes itself rather than reading from a family.
RUN_LEVEL_KEYS = set(TABLE_RUN_LEVEL_KEYS)
PROTO_TYPE = {Kind.STATISTIC: FieldDescriptor.TYPE_DOUBLE, Kind.COUNT: FieldDescriptor.TYPE_INT64,
              Kind.LABEL: FieldDescriptor.TYPE_STRING}
SCHEMA_TYPE = {Kind.STATISTIC: "number", Kind.COUNT: "integer", Kind.LABEL: "string"}


def scorer_problems() -> list[str]:
    problems = []
    if set(IMPLEMENTED) != set(FAMILIES):
        problems.append(f"families: registry {sorted(IMPLEMENTED)} vs table {sorted(FAMILIES)}")
    for family in IMPLEMENTED:
        declared = set(create_scorer(family).metrics)
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


# sacreBLEU's score at the top of its scale, per metric: a perfect
# hypothesis for chrF++ and BLEU, one with every word wrong for TER.
_FULL_SCALE = {
    "chrf_plus_plus": lambda: sacrebleu.CHRF(word_order=2).corpus_score(["the cat sat"], [["the cat sat"]]).score,
    "bleu": lambda: sacrebleu.BLEU().corpus_score(["the cat sat on the mat"], [["the cat sat on the mat"]]).score,
    "ter": lambda: sacrebleu.TER().corpus_score(["x y z"], [["a b c"]]).score,
}


def consumer_problems() -> list[str]:
    """The store's columns and the report's lists hold only table keys, and
    the scales the report groups by are sacreBLEU's."""
    problems = []
    for key in SACREBLEU_METRICS:
        if abs(METRICS[key].scale - _FULL_SCALE[key]()) > 1e-9:
            problems.append(f"{key}: scale {METRICS[key].scale}, sacreBLEU's full scale {_FULL_SCALE[key]()}")
    if set(PERCENT_METRICS) != set(SACREBLEU_METRICS):
        problems.append(f"0-100 metrics {PERCENT_METRICS} are not sacreBLEU's {SACREBLEU_METRICS}")
    charted = [key for _, _, keys in CI_CHARTS for key in keys]
    if sorted(charted) != sorted(["composite", *CI_METRICS]):
        problems.append(f"report CI charts show {charted}, the table gives intervals to {CI_METRICS} and the composite")
    for _, title, keys in CI_CHARTS:
        scales = {METRICS[key].scale for key in keys if key in METRICS}
        if len(scales) != 1 or ("0-100" in title) != (scales == {100.0}):
            problems.append(f"report chart {title!r} mixes or mislabels scales: {sorted(scales)}")
    for key in (*ENTRY_METRICS, *SCORE_ROWS):
        if key not in SCORE_KEYS and key not in RUN_LEVEL_KEYS:
            problems.append(f"report shows {key}, neither in the table nor a run-level key")
    for column in SPEC_COLUMNS:
        if column.path[0] == "scores" and column.path[1] not in SCORE_KEYS and column.path[1] not in RUN_LEVEL_KEYS:
            problems.append(f"store column {column.name} reads scores.{column.path[1]}, not a score key")
    return problems


def test_the_metric_table_agrees_with_scorers_proto_and_schema():
    problems = scorer_problems() + proto_problems() + schema_problems() + table_problems()
    assert problems == []


def test_the_store_and_report_take_their_metric_facts_from_the_table():
    assert consumer_problems() == []


def test_every_front_door_heads_a_metric_with_the_tables_label(monkeypatch):
    """A label changed in the table alone changes the CLI's board and
    comparison headers, the report's board and breakdown headers, the web's
    entry columns and the corpus check's words."""
    from apps.report import render
    from gateway.card import display
    from gateway.corpus_check import results

    assert LABELS["chrf_plus_plus"] == "chrF++" and LABELS["length_ratio"] == "length_ratio"
    relabelled = {**LABELS, "chrf_plus_plus": "CHRF-X"}
    for module in (display, results):  # each reads the table's LABELS
        monkeypatch.setattr(module, "LABELS", relabelled)
    assert display.column_label("chrf_plus_plus") == "CHRF-X"
    assert display.column_label("corpus_bleu") == "BLEU"  # a §9.1 column is headed by its metric's label
    assert results.RuleResult("power", True, "").as_dict()["asks"] == "detects the purpose's CHRF-X difference"
    # A fresh environment: Jinja folds a filter of a constant into the compiled template.
    page = render.environment.__wrapped__().from_string(
        '{% import "macros.html.j2" as m %}{{ m.breakdown_tables(b) }}').render(
        b={"by_domain": [(type("R", (), {"label": "run"})(), {"news": {"n": 1}}, None)]})
    assert "<th>CHRF-X</th>" in page and "<th>exact match</th>" in page
    columns = dict(render.BOARD_COLUMNS)
    assert (columns["chrf_plus_plus"], columns["corpus_bleu"], columns["exact_match_rate"]) == \
        (LABELS["chrf_plus_plus"], LABELS["bleu"], LABELS["exact_match_rate"])
