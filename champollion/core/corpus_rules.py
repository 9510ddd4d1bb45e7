"""The corpus design framework's rules (seed 001 §2-§6; SPEC §12 "Corpus
check") in one table: every number the corpus check, the registration
gates and the run card's size warnings use, and the words each rule is
reported in. `gateway/corpus_check` applies them; README "Corpus check"
explains each one and where it comes from.

Data only: no code that applies a rule lives here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from champollion.core.tiers import TIER_NAMES

# A corpus is checked for the tier it is meant for (the tier table).
PURPOSES = TIER_NAMES
REQUIRED, RECOMMENDED = "required", "recommended"
# The metric seed 001 §6.3 states power in. Words below name it "{metric}":
# the corpus check writes its label from the metric table (results.with_label).
POWER_METRIC = "chrf_plus_plus"


@dataclass(frozen=True)
class Rule:
    id: str
    # required: --strict fails on it; recommended: advice.
    severity: str
    # What the rule asks, in words (the report's first column).
    asks: str
    # Where the framework says so.
    source: str
    # The rule's number(s): a value, or one per purpose.
    limit: Any = None
    # Registering or promoting a version to holdout or gold is refused when it fails.
    gate: bool = False

    def limit_for(self, purpose: str):
        return self.limit[purpose] if isinstance(self.limit, dict) else self.limit


# Seed 001 §2.1-§2.2: the domains and the share each should have.
DOMAIN_TARGETS = {"ui": 0.25, "admin": 0.15, "edu": 0.15, "lit": 0.10, "conv": 0.10, "tech": 0.10,
                  "health": 0.10, "news": 0.05}
# Seed 001 §3.1, §3.3: difficulty tiers 1-5 and their shares.
TIER_TARGETS = {1: 0.15, 2: 0.25, 3: 0.30, 4: 0.20, 5: 0.10}
# Seed 001 §6.1 step 6; SPEC §9: what every entry's provenance records.
PROVENANCE_FIELDS = ("source_doc", "source_license", "translator", "translator_qualification",
                     "translation_date", "reviewer", "review_date")

RULES = (
    Rule("size_minimum", REQUIRED, "at least the purpose's minimum number of entries", "seed 001 §6.3",
         {"dev": 50, "holdout": 100, "gold": 200}, gate=True),
    Rule("size_recommended", RECOMMENDED, "the purpose's recommended number of entries", "seed 001 §6.3",
         {"dev": 100, "holdout": 200, "gold": 500}),
    Rule("labels", REQUIRED, "every entry has a domain of the taxonomy and a difficulty tier 1-5",
         "seed 001 §2.1, §3.1; SPEC §9"),
    Rule("domain_minimum", REQUIRED, "at least 10 entries in every domain present", "seed 001 §6.3", 10, gate=True),
    Rule("tier_minimum", REQUIRED, "at least 10 entries in every difficulty tier present", "seed 001 §6.3", 10,
         gate=True),
    Rule("domain_recommended", RECOMMENDED, "25 or more entries per domain", "seed 001 §6.3", 25),
    Rule("tier_recommended", RECOMMENDED, "20 or more entries per difficulty tier", "seed 001 §6.3", 20),
    # Absolute deviation of a share from its target, in share points (0.05 = 5 points).
    Rule("domain_mix", RECOMMENDED, "domain shares within 5 points of the targets", "seed 001 §2.2", 0.05),
    Rule("tier_mix", RECOMMENDED, "difficulty shares within 5 points of the targets", "seed 001 §3.3", 0.05),
    Rule("universal_phenomena", REQUIRED, "every universal phenomenon covered by at least one entry",
         "seed 001 §6.2", 1),
    Rule("pair_phenomena", REQUIRED, "every phenomenon the language cards name covered by at least one entry",
         "seed 001 §6.2, §6.1 step 1", 1),
    Rule("dual_references", REQUIRED, "a second independent reference on every tier 4-5 entry",
         "seed 001 §4.3, §6.1 step 4", (4, 5)),
    Rule("acceptable_variants", RECOMMENDED, "acceptable variants documented on every entry", "seed 001 §4.3"),
    Rule("community_review", REQUIRED, "every reference reviewed by someone other than its translator",
         "seed 001 §4.3"),
    Rule("provenance", REQUIRED, "every provenance field given on every entry", "seed 001 §6.1 step 6; SPEC §9",
         PROVENANCE_FIELDS, gate=True),
    Rule("licence", REQUIRED, "every source licence known to allow evaluation use", "seed 001 §2.3"),
    Rule("licence_review", RECOMMENDED, "no licence that needs review (NC, ND, research-only)", "seed 001 §2.3"),
    Rule("recency", RECOMMENDED, "texts from the last 10 years", "seed 001 §2.3", 10),
    # Duplicates weigh an item twice in every score and interval.
    Rule("duplicates", REQUIRED, "no source twice", "this project (each item counts once)"),
    Rule("near_duplicates", RECOMMENDED, "no near-duplicate sources or references, no reference twice",
         "this project (each item counts once)"),
    Rule("untranslated", RECOMMENDED, "no reference identical to its source", "seed 001 §4.4"),
    # chrF++ points the paired bootstrap should detect (p < 0.05, 80% power).
    Rule("power", RECOMMENDED, "detects the purpose's {metric} difference", "seed 001 §6.3",
         {"dev": 5.0, "holdout": 2.0, "gold": 2.0}),
    Rule("rotation", RECOMMENDED, "a holdout replaced after 12 months in use", "seed 001 §5.3", 12),
)
RULE = {rule.id: rule for rule in RULES}
GATE_RULES = tuple(rule.id for rule in RULES if rule.gate)

# Seed 001 §6.2: what every corpus covers, whatever the pair. Each: id,
# words, and the labels (normalised: lower case, '_' between words) also
# taken for it besides those the word rule finds (phenomena.py).
UNIVERSAL_PHENOMENA = (
    ("pronoun_resolution", "pronoun resolution (ambiguous antecedents)",
     ("anaphora", "coreference", "ambiguous_antecedent", "ambiguous_pronoun")),
    ("negation", "negation (single, double, scope)", ("negative", "double_negative")),
    ("quantifiers", "quantifiers (all, some, none, most)", ("quantification",)),
    ("temporal_expressions", "temporal expressions (relative dates, durations)",
     ("date", "time", "duration", "relative_date", "temporal")),
    ("named_entities", "named entities (people, places, organisations)",
     ("ner", "entity", "proper_noun", "proper_name", "toponym")),
    ("numbers_and_measures", "numbers and measures",
     ("numeral", "unit", "measure", "measurement", "percentage", "currency", "decimal_separator")),
    ("lists", "lists and enumerations", ("list", "enumeration")),
)
# Words a label may add to a card phenomenon's own: "english_loanword"
# covers contact influence "English", "register_formal" register "formal".
QUALIFIERS = {
    "challenge": (),
    "contact": ("contact", "loanword", "loan", "borrowing", "code", "switching", "influence", "interference",
                "calque"),
    "register": ("register", "style"),
    "script": ("script", "orthography", "writing", "system"),
}
# Words no label needs to match.
STOP_WORDS = ("a", "an", "and", "as", "by", "for", "in", "of", "on", "or", "the", "to", "with", "vs")
# Two words match when equal, equal without a plural -s/-es, or when one
# begins the other and the shorter has at least this many letters
# ("formal"/"formality", "compound"/"compounding").
PREFIX_LETTERS = 5
# Script codes' names, for labels that name a script ("syllabics").
SCRIPT_NAMES = {"Latn": "Latin", "Latn-SRO": "Standard Roman Orthography", "Cans": "Canadian syllabics",
                "Cyrl": "Cyrillic", "Arab": "Arabic", "Hang": "Hangul", "Hani": "Han", "Jpan": "Japanese kana kanji",
                "Grek": "Greek", "Deva": "Devanagari", "Ethi": "Ethiopic"}

# Seed 001 §2.3: licences, normalised (upper case, '-' between parts), by
# regular expression. First match wins, in this order.
LICENCE_CLASSES = (
    ("needs review", r"^CC-?BY(-SA)?-(NC|ND)|^CC-?BY-NC|^CC-?BY-ND|RESEARCH|NON-?COMMERCIAL|NO-?DERIV|PERMISSION"),
    ("allowed", (r"^CC-?BY(-SA)?(-\d(\.\d)?)?(-[A-Z]{2,5}|-INTERNATIONAL)?$|^CC-?0(-1\.0)?$"
                 r"|^PUBLIC-DOMAIN$|^PD$|^PDDL|^MIT$|^APACHE-2(\.0)?$|^BSD-[23]-CLAUSE$|^ODC-BY")),
    ("not allowed", r"ALL-RIGHTS-RESERVED|PROPRIETARY|^COPYRIGHT|^NONE$|^NO-LICEN[CS]E$"),
)

# Provenance fields tried, in order, for an entry's date (recency).
DATE_FIELDS = ("source_date", "translation_date")

# Seed 001 §6.3's rule of thumb, used without pilot run cards: (fewest
# entries, chrF++ points a paired bootstrap of 1,000 resamples detects at
# p < 0.05, what it says).
RULE_OF_THUMB = (
    (0, 5.0, "fewer than about 100 entries: differences under about 5 {metric} points cannot be detected reliably"),
    (100, 5.0, "100 to 199 entries: about 5 {metric} points"),
    (200, 2.0, "200 entries or more: about 2 {metric} points at p < 0.05"),
)


@dataclass(frozen=True)
class PowerSettings:
    """The simulation behind a pilot-based power estimate (power.py)."""
    resamples: int = 1000  # each simulated corpus's paired bootstrap, as `compare`
    power: float = 0.80  # the share of simulated corpora in which the shift must be detected
    draws: int = 200  # simulated corpora per estimate
    seed: int = 12345
    # Metrics estimated, with the scale their differences are given on.
    metrics: tuple = field(default=((POWER_METRIC, "{metric} points"), ("composite", "composite (0-1)")))


POWER = PowerSettings()
# Entries named in a finding, at most.
IDS_SHOWN = 5
# Rejected words listed per analyzer, at most.
REJECTED_SHOWN = 20
