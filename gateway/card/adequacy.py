"""Adequacy gates: is an entry's output a translation of its source at all?

A decision beyond the specification (docs/scoring.md, "Adequacy gates"):
fluency signals (analyzer acceptance, orthography, the inverted
code-switching and hallucination rates) are perfect for any well-formed
sentence whatever it says, so a system that ignores its input used to earn
a "functional" composite. An entry that fails a gate enters every composite
input at that input's worst value; the metrics themselves keep their
definitions (they are diagnostics).

The gates, in the order they are reported:
  empty            no output (none sent, the method failed, or only spaces)
  copy             the output is the source copied: at least COPY_SHARE of
                   its words are source words, where the reference's words
                   are not (a name or a code that stays untranslated is not
                   a copy)
  length           truncated or inflated: the output's length is below
                   TRUNCATED_BELOW or above INFLATED_ABOVE times the
                   reference's (SPEC §2.1's length_ratio thresholds), for
                   references of at least MIN_REFERENCE_CHARS characters
  repeated         the same output for entries with at least REPEATED_SOURCES
                   different sources and as many different references
  source_language  at least SOURCE_LANGUAGE_SHARE of the output's words are
                   source-language words (code_switching_rate of the entry)
  detached         every output word is flagged by hallucination_rate: the
                   output has left its source (needs the sentence encoder);
                   or, where a language plugin scores semantic_score (Plains
                   Cree, beyond the encoder's reach), its verdict gives the
                   entry 0: the output says something else

The first four read only the texts, so they hold for every language,
Plains Cree included, whatever the encoder covers. All are deterministic.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from champollion import __version__
from champollion.core.text import fold_for_comparison
from gateway.card.metrics import METRICS
from gateway.card.reducers import micro_average

COPY_SHARE = 0.8
TRUNCATED_BELOW = 0.5
INFLATED_ABOVE = 2.0
MIN_REFERENCE_CHARS = 10
REPEATED_SOURCES = 3
SOURCE_LANGUAGE_SHARE = 0.5

GATES = ("empty", "copy", "length", "repeated", "source_language", "detached")
SIGNATURE = (f"gates:empty|copy>={COPY_SHARE}|length<{TRUNCATED_BELOW}or>{INFLATED_ABOVE}"
             f"(ref>={MIN_REFERENCE_CHARS}ch)|repeated>={REPEATED_SOURCES}src|srclang>={SOURCE_LANGUAGE_SHARE}"
             f"|detached|version:{__version__}")


def _key(folded: str) -> str:
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()[:32]


def _share_in(words: list[str], pool: list[str]) -> float:
    """The share of `words` found in `pool`, each pool word used once."""
    if not words:
        return 0.0
    available = Counter(pool)
    found = 0
    for word in words:
        if available[word] > 0:
            available[word] -= 1
            found += 1
    return found / len(words)


@dataclass(frozen=True)
class EntryGates:
    """What the text gates find for one entry, and the keys the repeated
    gate groups entries by (folded texts, hashed)."""
    # Gate -> reason, for the gates this entry fails on its own.
    failed: dict[str, str]
    output_key: str | None
    source_key: str
    reference_key: str


def text_gates(source: str, reference: str, prediction: str | None) -> EntryGates:
    """The gates that need one entry's texts only: empty, copy, length."""
    folded_source, folded_reference = fold_for_comparison(source), fold_for_comparison(reference)
    source_key, reference_key = _key(folded_source), _key(folded_reference)
    if prediction is None or not prediction.strip():
        return EntryGates({"empty": "no output"}, None, source_key, reference_key)
    failed = {}
    folded = fold_for_comparison(prediction)
    source_words = folded_source.split()
    copied = _share_in(folded.split(), source_words)
    if copied >= COPY_SHARE and _share_in(folded_reference.split(), source_words) < COPY_SHARE:
        failed["copy"] = f"{copied:.0%} of the output's words are the source's (>= {COPY_SHARE:.0%})"
    reference_chars = len(reference.strip())
    if reference_chars >= MIN_REFERENCE_CHARS:
        ratio = len(prediction.strip()) / reference_chars
        if ratio < TRUNCATED_BELOW:
            failed["length"] = f"truncated: {ratio:.2f} x the reference's length (< {TRUNCATED_BELOW})"
        elif ratio > INFLATED_ABOVE:
            failed["length"] = f"inflated: {ratio:.2f} x the reference's length (> {INFLATED_ABOVE})"
    return EntryGates(failed, _key(folded), source_key, reference_key)


def repeated_reason(entries: int, sources: int) -> str:
    return f"the same output for {entries} entries with {sources} different sources"


def family_gates(stats: Mapping[str, np.ndarray], row: int, plugin_semantic: bool = False) -> dict[str, str]:
    """The gates read from the families' per-entry statistics of entry `row`;
    `plugin_semantic`: semantic_score is a language plugin's verdict."""
    failed = {}
    switching = stats.get("code_switching_rate")
    if switching is not None and switching[row, 1] > 0:
        share = switching[row, 0] / switching[row, 1]
        if share >= SOURCE_LANGUAGE_SHARE:
            failed["source_language"] = (f"{share:.0%} of the output's words are source-language words "
                                         f"(>= {SOURCE_LANGUAGE_SHARE:.0%})")
    hallucination = stats.get("hallucination_rate")
    if hallucination is not None and hallucination[row, 1] > 0 and hallucination[row, 0] >= hallucination[row, 1]:
        failed["detached"] = "every output word is flagged by hallucination_rate"
    semantic = stats.get("semantic_score")
    if plugin_semantic and semantic is not None and semantic[row, 1] > 0 and semantic[row, 0] <= 0:
        failed["detached"] = "the language plugin's semantic verdict: the output says something else"
    return failed


# --- the composite's inputs for inadequate entries -------------------------------

# Metrics whose per-entry statistics count something every output has (its
# words, the output itself): an inadequate entry that gave nothing to count
# (an empty output) still counts as one wrong unit. The others count what the
# entry's annotations ask for (glossary terms, gold morphology); with none,
# the entry is outside them, adequate or not.
_COUNTS_EVERY_OUTPUT = frozenset({
    "exact_match_rate", "equivalent_match_rate", "fst_acceptance_rate", "orthographic_accuracy",
    "semantic_score", "code_switching_rate", "hallucination_rate",
})


def worst_statistics(metric_id: str, rows: np.ndarray) -> np.ndarray:
    """`rows` of `metric_id`'s per-entry statistics, each made the metric's
    worst value for that entry."""
    row = METRICS[metric_id]
    worst = np.array(rows, dtype=float, copy=True)
    if row.reducer is micro_average:
        denominators = worst[:, 1]
        if metric_id in _COUNTS_EVERY_OUTPUT:
            denominators = np.where(denominators > 0, denominators, 1.0)
        worst[:, 1] = denominators
        worst[:, 0] = denominators if row.lower_is_better else 0.0
    elif metric_id == "chrf_plus_plus":
        worst[:, 2::3] = 0.0  # [hyp, ref, match] per n-gram order: no match
    else:
        raise ValueError(f"no worst value is defined for composite metric {metric_id}")
    return worst


def gated_statistics(stats: Mapping[str, np.ndarray], inadequate: np.ndarray,
                     metric_ids) -> dict[str, np.ndarray]:
    """The statistics the composite reads: those of `metric_ids` with the
    `inadequate` entries' rows at their worst; the others as they are."""
    gated = dict(stats)
    if not inadequate.any():
        return gated
    for metric_id in metric_ids:
        if metric_id in stats:
            matrix = np.array(stats[metric_id], dtype=float, copy=True)
            matrix[inadequate] = worst_statistics(metric_id, matrix[inadequate])
            gated[metric_id] = matrix
    return gated


def inadequate_entries(entries: list[dict]) -> np.ndarray:
    """True where a run card's entry is marked inadequate
    (`entries[].scores.adequate` false); a card from before the gates marks
    none. What readers of stored cards (meta-eval, the report) gate by."""
    return np.asarray([(entry.get("scores") or {}).get("adequate", True) is False for entry in entries], dtype=bool)


@dataclass
class Adequacy:
    """Which entries passed every gate, and why the others did not."""
    # True where the entry is adequate, in corpus order.
    adequate: np.ndarray
    # Entry row -> gate -> reason, for the inadequate entries.
    reasons: dict[int, dict[str, str]]

    @property
    def inadequate(self) -> np.ndarray:
        return ~self.adequate

    def rate(self) -> float | None:
        return float(self.adequate.mean()) if self.adequate.size else None

    def counts(self) -> dict[str, int]:
        """Entries failing each gate (an entry may fail several)."""
        found = Counter(gate for failed in self.reasons.values() for gate in failed)
        return {gate: found.get(gate, 0) for gate in GATES}

    def statistics(self) -> np.ndarray:
        """adequacy_rate's per-entry [adequate, 1] statistics, for its interval."""
        return np.column_stack([self.adequate.astype(float), np.ones(self.adequate.size)])

    def block(self) -> dict:
        """The run card's `adequacy` block."""
        return {"rate": self.rate(), "entries": int(self.adequate.size),
                "inadequate": int(self.inadequate.sum()), "gates": self.counts(), "signature": SIGNATURE}


def assess(text_results: Iterable[tuple[str | None, str | None]], repeated: Mapping[str, tuple[int, int]],
           stats: Mapping[str, np.ndarray], plugin_semantic: bool = False) -> Adequacy:
    """Every gate over a run. `text_results`: each entry's output key and
    text gates failed (JSON; None: none), in corpus order; `repeated`: output
    key -> (entries, sources) of the outputs the repeated gate refuses; the
    families' per-entry `stats`, rows in the same order; `plugin_semantic`:
    semantic_score is a language plugin's verdict."""
    adequate, reasons = [], {}
    for row, (output_key, text_failed) in enumerate(text_results):
        failed = json.loads(text_failed) if text_failed else {}
        if output_key in repeated:
            failed["repeated"] = repeated_reason(*repeated[output_key])
        if "empty" not in failed:
            failed.update(family_gates(stats, row, plugin_semantic))
        adequate.append(not failed)
        if failed:
            reasons[row] = {gate: failed[gate] for gate in GATES if gate in failed}
    return Adequacy(np.array(adequate, dtype=bool), reasons)
