"""The community review protocol (scoring spec §1.6, §5; seed 001 §4.3):
what a reviewer is asked, the quality controls, and the bar a campaign must
clear before a tier may read "community validated". One place for these
numbers; docs/community-review.md explains them.

A campaign shows a reviewer one source at a time with every system's output
beside it (blind, shuffled). For each output the reviewer gives:
- a score from 0 to 100, the reference hidden (WMT's source-based DA);
- error spans with a severity (minor or major): optional in a `da`
  campaign; in `esa` (as Appraise runs it) marked before the score, with
  `[MISSING]` for an omission and a warning for a score below 66 without
  any; in `mqm` each with a category of the TED MQM typology;
- the spec's verdict: "usable as a draft with human review?" yes or no.
An esa or mqm campaign opens each queue with the gate (tutorial and
attention items, gateway/review/gate.py); suggested spans from the metric
families (`--prefill lyss`) are decided on one by one (ACCEPTED, EDITED,
REJECTED).
"""
from __future__ import annotations

from champollion.core.review_protocols import (  # noqa: F401 - the names, with the rules below
    DA,
    DEFAULT_PREFILL_SHARE,
    ESA,
    MQM,
    PREFILL_LYSS,
    PREFILL_NONE,
    PREFILLS,
    PROTOCOLS,
)

# Direct assessment's slider.
DA_MIN, DA_MAX = 0, 100

# ESA error-span severities.
SEVERITIES = ("minor", "major")

# Seed 001 §4.4: what a reviewer may flag a reference for.
REFERENCE_FLAGS = {
    "post_edited_mt": "post-edited machine translation",
    "too_literal": "too literal: follows the source's wording, not the language's",
    "learner_errors": "a learner's errors",
    "one_reading": "only one reading of an ambiguous source",
    "other": "other (see the note)",
}

# Task kinds: an item rated for the results, and the two WMT-style quality
# controls placed later in the same reviewer's queue: the same item again
# ("repeat": a reliable rater scores it about the same) and the item with one
# output degraded ("control": a reliable rater scores it lower).
RATE, REPEAT, CONTROL = "rate", "repeat", "control"
# The gate an ESA or MQM reviewer passes before the campaign's items (as
# Appraise runs ESA): a tutorial item (a reference shown as the translation:
# a good one) and an attention item (an output with a span replaced by
# another text's words: the reviewer must find it). Neither counts in the
# results.
TUTORIAL, ATTENTION = "tutorial", "attention"
GATE_KINDS = (TUTORIAL, ATTENTION)
TASK_KINDS = (RATE, REPEAT, CONTROL, *GATE_KINDS)
# How near a gate answer must be to the expected one: each expected span's
# ends within this many characters, the score within this many points of
# the expected range.
SPAN_TOLERANCE = 3
SCORE_TOLERANCE = 20
# The expected score ranges (before the tolerance).
TUTORIAL_SCORE = (80, 100)
ATTENTION_SCORE = (0, 50)

# Campaign protocols (champollion/core/review_protocols.py names them).
# "da": the score, spans optional, the usable verdict (the first campaigns).
# "esa": error span annotation as WMT24-25 ran it in Appraise: spans first
# (minor, major, [MISSING] for what was left out), then the score on a
# slider with anchors, the gate before the items, each item timed. "mqm":
# the ESA page with an MQM category on every span (the typology of the TED
# MQM data, gateway/review/mqm.py).
SPAN_PROTOCOLS = (ESA, MQM)  # protocols with the gate, [MISSING] and the anchors

# The ESA slider's anchors: the score, and what a translation there is
# like (our wording).
ANCHORS = (
    (0, "nothing of the source's meaning comes through, or the text is not in the target language"),
    (33, "some of the meaning comes through, but serious errors hide or change much of it"),
    (66, "the meaning comes through; the errors are in details, wording or grammar"),
    (100, "the meaning is complete and the language correct"),
)
# Below this score a reviewer who marked no span is warned: a translation
# scored that low has errors to point at.
WARN_BELOW = 66
MISSING_MARKER = "[MISSING]"

# Suggested spans (`--prefill`): "none", or "lyss" (the metric families'
# findings, gateway/review/prefill.py). A share of items
# (DEFAULT_PREFILL_SHARE) is shown without suggestions, so that the bias of
# pre-filling can be measured.
# A reviewer's decision on one suggestion ("edited": a confirmed error whose
# extent or severity the reviewer changed).
ACCEPTED, EDITED, REJECTED = "accepted", "edited", "rejected"
DECISIONS = (ACCEPTED, EDITED, REJECTED)

# Campaign defaults.
DEFAULT_OVERLAP = 3  # reviewers per item
DEFAULT_ITEMS = 200
REPEAT_SHARE = 0.1  # of a reviewer's rated items, shown again
CONTROL_SHARE = 0.1  # of a reviewer's rated items, shown again with one output degraded

# A rater is unreliable when its degraded outputs are not scored lower than
# the same outputs intact: one-sided Wilcoxon signed-rank test, p >= this
# (WMT's test and level). Fewer pairs than MIN_CONTROL_PAIRS: not judged.
RELIABILITY_P = 0.05
MIN_CONTROL_PAIRS = 5

# The bar for "community validated" (spec §1.6: 200+ items rated by 3+
# bilingual speakers; §5: the speakers agree the output is usable).
MIN_REVIEWERS_PER_ITEM = 3
MIN_ITEMS = 200
# Krippendorff's alpha (interval, on the DA scores) at or above which the
# raters agree: Krippendorff's own lowest limit for tentative conclusions.
MIN_ALPHA = 0.667
# An item is usable when most of its reviewers say so; the output is usable
# when at least this share of its items are.
MIN_USABLE_SHARE = 0.8

# The heuristic tiers community review can confirm (spec §5: deployable or better).
VALIDATABLE_TIERS = ("deployable", "fluent")
VALIDATED_LABEL = "community validated"
HEURISTIC_LABEL = "heuristic"
