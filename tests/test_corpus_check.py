"""The corpus check (README "Corpus check"): the example fails the rules it
should and names them; a corpus built at test time to the framework's rules
passes, and breaking any one rule fails that rule; phenomenon labels,
licences, rotation; analyzer coverage counts what fst_acceptance_rate
counts; the power estimate, by rule of thumb and simulated from pilot cards;
the HTML page escapes corpus text."""
from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from champollion.core.analyzers import DEFAULT_FST_DIR, AnalyzerRegistry
from champollion.core.cards import default_registry
from champollion.core.corpus_rules import DOMAIN_TARGETS, POWER, RULE, RULES, TIER_TARGETS
from gateway.card.compare import ComparableRun
from gateway.corpus_check import PilotRefused, check_corpus, gate_failures
from gateway.corpus_check.phenomena import Phenomenon, card_phenomena, normalise_label, universal_phenomena
from gateway.corpus_check.power import _rate, check_power, detectable_differences, pilot_runs
from gateway.corpus_check.references import licence_class, parse_date
from gateway.corpus_check.rotation import check_rotation
from services.contract import BatchContext, EntryInput
from services.structural.metrics import StructuralScorer
from tests.conftest import EXAMPLE, REPO, evaluate, make_request

CARDS = default_registry()
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def example(code: str = "spa") -> dict:
    return json.loads((REPO / "examples" / f"eng-{code}" / "corpus.json").read_text(encoding="utf-8"))


def results(report: dict) -> dict[str, dict]:
    return {rule["rule"]: rule for rule in report["rules"]}


def failing(report: dict, severity: str = "required") -> set[str]:
    return {rule["rule"] for rule in report["rules"] if rule["passed"] is False and rule["severity"] == severity}


# --- the example ---------------------------------------------------------------

def test_the_example_as_a_holdout_fails_and_names_every_failing_rule(cli):
    path = EXAMPLE / "corpus.json"
    strict = cli("corpus", "check", path, "--purpose", "holdout", "--strict")
    assert strict.exit_code == 1 and strict.stderr == ""
    assert cli("corpus", "check", path, "--purpose", "holdout").exit_code == 0  # findings, not an error, unless strict
    report = json.loads(cli("corpus", "check", path, "--purpose", "holdout", "--json").stdout)
    assert report["passed"] is False
    assert failing(report) == {"size_minimum", "domain_minimum", "tier_minimum", "universal_phenomena",
                               "pair_phenomena", "dual_references", "community_review", "provenance"}
    found = results(report)
    assert found["size_minimum"]["finding"] == "36 entries; a holdout set needs 100"
    assert found["domain_minimum"]["finding"] == ("domains below 10: ui 7, admin 4, edu 4, lit 2, conv 5, tech 4, "
                                                  "health 4, news 6")
    assert found["tier_minimum"]["finding"] == "tiers below 10: 1 6, 4 7, 5 2"
    assert "pronoun resolution" in found["universal_phenomena"]["finding"]
    assert "quantifiers" in found["universal_phenomena"]["finding"]
    assert "clitic pronouns" in found["pair_phenomena"]["finding"]
    assert found["provenance"]["finding"].startswith("reviewer missing on 36 (es-001, es-002, es-003, ... (36)); "
                                                     "review_date missing on 36")
    assert found["dual_references"]["finding"].startswith("9 of 9 tier 4-5 entries have one reference only")
    # Every failing rule is in the text output, marked, with its finding.
    for rule in failing(report):
        line = next(line for line in strict.stdout.splitlines() if line.startswith(rule + " "))
        assert " FAIL " in line and found[rule]["finding"][:40] in line
    assert gate_failures(report) == [f"{r}: {found[r]['finding']}" for r in
                                     ("size_minimum", "domain_minimum", "tier_minimum", "provenance")]
    # Its licences, dates and texts are fine; its power is the rule of thumb's.
    assert {"licence", "duplicates", "labels"} <= {r for r, rule in found.items() if rule["passed"]}
    assert report["power"]["method"].startswith("rule of thumb")
    assert found["power"]["finding"].startswith("36 entries detect more than 5 chrF++ points")
    assert found["rotation"]["passed"] is None


def test_the_example_as_a_dev_set_is_held_to_the_dev_minimum(cli):
    report = json.loads(cli("corpus", "check", EXAMPLE / "corpus.json", "--purpose", "dev", "--json").stdout)
    assert results(report)["size_minimum"]["finding"] == "36 entries; a dev set needs 50"
    assert gate_failures(report) == []  # dev has no gate


def test_check_refuses_bad_arguments_in_one_line(cli, tmp_path):
    no_langs = tmp_path / "no-langs.json"
    corpus = example()
    del corpus["source_lang"], corpus["target_lang"]
    no_langs.write_text(json.dumps(corpus))
    for args, expected in (
            ((no_langs,), "source_lang: missing"),
            ((EXAMPLE / "corpus.json", "--pilot", tmp_path / "none.json"), "--pilot"),
            ((EXAMPLE / "corpus.json", "--html"), "--html and -o/--out go together"),
            ((EXAMPLE / "corpus.json", "--version", "2"), "--version")):
        result = cli("corpus", "check", *args)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.startswith("champollion: error: ") and result.stderr.count("\n") == 1
        assert expected in result.stderr


# --- a corpus built to the rules -----------------------------------------------

# What a corpus author might write for each phenomenon the check asks of eng->spa.
LABELS = ["pronoun_resolution", "Negation", "quantifiers", "dates", "Named Entity", "number", "list",
          "gender-agreement", "formality", "clitic_pronoun", "anglicism", "formal", "informal", "voseo"]


def _word(number: int) -> str:
    """A distinct letters-only word per number (no digits: near-duplicate skeletons stay apart)."""
    letters = ""
    number += 26 * 27
    while number:
        number, rest = divmod(number, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[rest]
    return letters


def built_corpus(size: int = 300) -> dict:
    """`size` entries meeting every rule: domain shares within 5 points of the
    targets and 25+ per domain, tiers at their targets, every phenomenon,
    second references on tiers 4-5, variants, full provenance reviewed by
    another person, allowed licences, recent dates, no duplicates."""
    domains = {"ui": 72, "admin": 44, "edu": 44, "lit": 29, "conv": 29, "tech": 29, "health": 28, "news": 25}
    assert sum(domains.values()) == size
    domain_of = [domain for domain, count in domains.items() for _ in range(count)]
    tier_of = [tier for tier, share in TIER_TARGETS.items() for _ in range(round(share * size))]
    rng = np.random.default_rng(7)
    rng.shuffle(tier_of)
    entries = []
    for index in range(size):
        word = _word(index)
        entry = {
            "id": f"b-{index:04d}", "source": f"The {word} report arrived.", "reference": f"El informe {word} llegó.",
            "acceptable_variants": [f"Llegó el informe {word}."], "domain": domain_of[index],
            "difficulty": int(tier_of[index]), "phenomena": [LABELS[index % len(LABELS)], LABELS[(index + 5) % 14]],
            "provenance": {"source_doc": f"doc-{domain_of[index]}", "source_license": "CC-BY-SA-4.0",
                           "translator": "Ana Translator", "translator_qualification": "professional, L1",
                           "translation_date": "2025-03-01", "reviewer": "Rui Reviewer", "review_date": "2025-04-01"},
        }
        if entry["difficulty"] >= 4:
            entry["extra_references"] = [f"Ha llegado el informe {word}."]
        entries.append(entry)
    return {"id": "built", "source_lang": "eng", "target_lang": "spa", "entries": entries}


def as_file(corpus: dict) -> dict:
    """The stored form (`extra_references`) as a corpus file writes it: `references`, the primary first."""
    copied = copy.deepcopy(corpus)
    for entry in copied["entries"]:
        if "extra_references" in entry:
            entry["references"] = [entry["reference"], *entry.pop("extra_references")]
    return copied


def test_a_corpus_built_to_the_rules_passes_every_rule(cli, tmp_path):
    corpus = built_corpus()
    report = check_corpus(corpus, "holdout", CARDS, now=NOW)
    assert [rule for rule in report["rules"] if rule["passed"] is False] == []
    assert {rule["rule"] for rule in report["rules"] if rule["passed"] is None} == {"rotation"}
    assert report["passed"] and report["failures"] == [] and report["advice"] == []
    assert len(report["rules"]) == len(RULES)
    assert all(row["entries"] for row in report["phenomena"]["phenomena"])
    path = tmp_path / "built.json"
    path.write_text(json.dumps(as_file(corpus)), encoding="utf-8")
    assert cli("corpus", "check", path, "--strict").exit_code == 0


def _entry(corpus: dict, index: int) -> dict:
    return corpus["entries"][index]


def _first_of_tier(corpus: dict, tier: int) -> dict:
    return next(entry for entry in corpus["entries"] if entry["difficulty"] == tier)


# Each: (what breaks one rule, the rule that must fail, words its finding must have).
BREAKS = [
    (lambda c: c["entries"].__delitem__(slice(90, None)), "size_minimum", "90 entries; a holdout set needs 100"),
    (lambda c: _entry(c, 3).update(domain="sports"), "labels", "without a domain"),
    (lambda c: [e.update(domain="ui") for e in [e for e in c["entries"] if e["domain"] == "news"][5:]],
     "domain_minimum", "domains below 10: news 5"),
    (lambda c: [e.update(difficulty=3) for e in [e for e in c["entries"] if e["difficulty"] == 5][:21]],
     "tier_minimum", "tiers below 10: 5 9"),
    (lambda c: [e.update(phenomena=["negation"]) for e in c["entries"] if "quantifiers" in e["phenomena"]],
     "universal_phenomena", "quantifiers"),
    (lambda c: [e.update(phenomena=["negation"]) for e in c["entries"] if "voseo" in e["phenomena"]],
     "pair_phenomena", "voseo"),
    (lambda c: _first_of_tier(c, 5).pop("extra_references"), "dual_references", "1 of 90 tier 4-5"),
    (lambda c: _entry(c, 7)["provenance"].update(reviewer="  ana translator "), "community_review",
     "reviewed by their own translator (b-0007)"),
    (lambda c: _entry(c, 8)["provenance"].pop("translation_date"), "provenance", "translation_date missing on 1"),
    (lambda c: _entry(c, 9)["provenance"].update(source_license="All rights reserved"), "licence", "not allowed"),
    (lambda c: _entry(c, 9)["provenance"].update(source_license="see website"), "licence", "unknown"),
    (lambda c: _entry(c, 10)["provenance"].update(source_license="CC BY-NC-SA 4.0"), "licence_review", "NC-SA"),
    (lambda c: _entry(c, 11)["provenance"].update(source_date="2011-05"), "recency", "(b-0011)"),
    (lambda c: _entry(c, 12).update(source=_entry(c, 13)["source"]), "duplicates", "b-0012 = b-0013"),
    (lambda c: _entry(c, 14).update(source=_entry(c, 15)["source"].upper().replace(".", "!")), "near_duplicates",
     "near-duplicate sources"),
    (lambda c: _entry(c, 16).update(reference=_entry(c, 16)["source"]), "untranslated", "b-0016"),
    (lambda c: _entry(c, 17).pop("acceptable_variants"), "acceptable_variants", "b-0017"),
]


@pytest.mark.parametrize("breaking, rule, words", BREAKS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BREAKS)])
def test_breaking_one_rule_fails_that_rule(breaking, rule, words):
    corpus = built_corpus()
    breaking(corpus)
    report = check_corpus(corpus, "holdout", CARDS, now=NOW)
    found = results(report)
    assert found[rule]["passed"] is False, found[rule]
    if words:
        assert words in found[rule]["finding"]
    assert report["passed"] is (RULE[rule].severity != "required")


def test_domain_and_tier_shares_are_measured_against_the_targets():
    report = check_corpus(built_corpus(), "gold", CARDS, now=NOW)
    rows = {row["group"]: row for row in report["distribution"]["domains"]}
    assert list(rows) == list(DOMAIN_TARGETS)
    assert rows["news"]["count"] == 25 and rows["news"]["deviation"] == pytest.approx(25 / 300 - 0.05)
    assert results(report)["size_minimum"]["finding"] == "300 entries (≥ 200)"
    assert results(report)["size_recommended"]["finding"] == "300 entries; a gold set needs 500"
    skewed = built_corpus()
    for entry in skewed["entries"][:60]:
        entry["domain"] = "news"
    assert "news" in results(check_corpus(skewed, "holdout", CARDS, now=NOW))["domain_mix"]["finding"]


# --- phenomena, licences, dates, rotation --------------------------------------

def _covers(label: str, phenomenon: Phenomenon) -> bool:
    return phenomenon.covered_by(normalise_label(label))


def test_phenomenon_labels_match_through_case_separators_plurals_and_listed_synonyms():
    universal = {p.id: p for p in universal_phenomena()}
    for label, pid in (("Named-Entity", "named_entities"), ("named entities", "named_entities"),
                       ("NER", "named_entities"), ("Date", "temporal_expressions"), ("time", "temporal_expressions"),
                       ("Quantifier", "quantifiers"), ("decimal_separator", "numbers_and_measures"),
                       ("lists", "lists"), ("Pronoun/Resolution", "pronoun_resolution")):
        assert _covers(label, universal[pid]), (label, pid)
    assert not _covers("clitic_pronoun", universal["pronoun_resolution"])  # a word of its own left over
    assert not _covers("tense", universal["temporal_expressions"])
    nob = {p.title: p for p in card_phenomena(CARDS.get("nob"), "target")}
    assert _covers("english_loanword", nob["contact influence: English"])
    assert not _covers("loanword", nob["contact influence: English"])  # which contact language?
    assert _covers("compounds", nob["compounding"]) and not _covers("compound_nouns", nob["compounding"])
    crk = {p.title: p for p in card_phenomena(CARDS.get("crk"), "target")}
    assert "script: Cans (Canadian syllabics)" in crk and _covers("syllabics", crk["script: Cans (Canadian syllabics)"])
    # Registers count when a card lists several, and only for the target.
    assert not [p for p in card_phenomena(CARDS.get("eng"), "source") if p.kind == "register"]


def test_licences_and_dates():
    assert [licence_class(text) for text in ("CC-BY-4.0", "CC BY-SA 3.0 IGO", "cc0", "Public domain",
                                             "CC BY-NC 4.0", "CC-BY-ND-4.0", "research only", "proprietary",
                                             "All rights reserved", "GPL-3.0")] == \
        ["allowed"] * 4 + ["needs review"] * 3 + ["not allowed"] * 2 + ["unknown"]
    assert parse_date("2019") == datetime(2019, 1, 1).date()
    assert parse_date("2019-07-15T10:00:00Z") == datetime(2019, 7, 15).date()
    assert parse_date("last spring") is None and parse_date("2019-13-01") is None


def test_rotation_advises_replacing_a_holdout_after_twelve_months():
    def history(tier: str, months: float) -> list[dict]:
        since = NOW - timedelta(days=months * 30.44)
        return [{"tier": "dev", "since": (since - timedelta(days=9)).isoformat()},
                {"tier": tier, "since": since.isoformat()}]

    section, fresh = check_rotation(history("holdout", 3), NOW)
    assert fresh.passed is True and section["months_in_tier"] == pytest.approx(3, abs=0.1)
    section, old = check_rotation(history("holdout", 13), NOW)
    assert old.passed is False and "retire" in old.finding and "successor" in section["advice"]
    assert check_rotation(history("gold", 30), NOW)[1].passed is None
    assert check_rotation(None, NOW)[1].passed is None


# --- analyzer coverage ----------------------------------------------------------

@pytest.fixture(scope="module")
def registry():
    missing = [code for code in ("nob", "spa", "eus") if not (DEFAULT_FST_DIR / f"{code}.hfstol").is_file()]
    assert not missing, f"analyzers {missing} are not built: run `make fst` (make test does)"
    return AnalyzerRegistry()


@pytest.mark.parametrize("code", ["nob", "spa", "eus"])
def test_analyzer_coverage_counts_what_fst_acceptance_rate_counts(registry, code):
    corpus = example(code)
    coverage = check_corpus(corpus, "dev", CARDS, registry, now=NOW)["analyzer_coverage"]
    assert coverage["analyzer"] == f"{code}.hfstol" and coverage["words"] > 100
    # The structural family scoring the references as predictions counts the same words and rejections.
    entries = [EntryInput(id=e["id"], source=e["source"], reference=e["reference"], prediction=e["reference"])
               for e in corpus["entries"]]
    scored = StructuralScorer(registry=registry).score(
        entries, BatchContext(source=CARDS.get("eng"), target=CARDS.get(code), plugins=False))
    words = sum(output.values["fst_words"] for output in scored.entries)
    rejected = [word for output in scored.entries for word in output.values["fst_rejected"]]
    assert coverage["words"] == words
    assert coverage["rejected"] == words - sum(output.values["fst_accepted"] for output in scored.entries)
    assert sorted(item["word"] for item in coverage["top_rejected"] for _ in range(item["count"])) == sorted(rejected)


def test_analyzer_coverage_of_the_examples_names_the_rejected_words(registry):
    found = {code: check_corpus(example(code), "dev", CARDS, registry, now=NOW)["analyzer_coverage"]
             for code in ("spa", "eus", "nob")}
    assert (found["spa"]["words"], found["spa"]["rejected"]) == (395, 5)
    assert {item["word"] for item in found["spa"]["top_rejected"]} == {"Celsius", "respecto", "cántaros", "Reinicia",
                                                                       "API"}
    assert found["eus"]["rejected"] == 16 and "fitxategia" in {i["word"] for i in found["eus"]["top_rejected"]}
    assert found["nob"]["rejected"] == 0 and found["nob"]["rejected_share"] == 0.0


def test_analyzer_coverage_says_why_there_is_none(tmp_path):
    missing = check_corpus(example(), "dev", CARDS, AnalyzerRegistry([tmp_path]), now=NOW)["analyzer_coverage"]
    assert missing["analyzer"] is None and "no analyzer for spa" in missing["note"]
    crk = check_corpus(example("crk"), "dev", CARDS, AnalyzerRegistry(), now=NOW)["analyzer_coverage"]
    assert any("test fragment" in caveat for caveat in crk["caveats"])


# --- power -----------------------------------------------------------------------

def test_the_rule_of_thumb_without_pilot_cards():
    for size, purpose, points, passed in ((36, "dev", 5.0, False), (150, "dev", 5.0, True),
                                          (150, "holdout", 5.0, False), (250, "holdout", 2.0, True)):
        section, result = check_power(size, purpose, None)
        assert (section["chrf_plus_plus"], result.passed) == (points, passed), size


@pytest.fixture(scope="module")
def pilot_cards(gateway) -> list[dict]:
    """The example's predictions and a worse system (every other prediction cut to its first word), scored."""
    corpus = example()
    predictions = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text().splitlines()]
    worse = [{**p, "prediction": p["prediction"].split(" ")[0] if i % 2 else p["prediction"]}
             for i, p in enumerate(predictions) if "prediction" in p]
    entries = [{key: entry[key] for key in ("id", "source", "reference", "domain", "difficulty")}
               for entry in corpus["entries"]]
    return [evaluate(gateway, make_request(entries, [{"id": p["id"], "prediction": p["prediction"]} for p in run]))
            for run in ([p for p in predictions if "prediction" in p], worse)]


def test_simulated_power_shrinks_with_size_and_meets_its_own_definition(pilot_cards):
    (_, a), (_, b) = pilot_runs([("a", ComparableRun.from_card(pilot_cards[0])),
                                 ("b", ComparableRun.from_card(pilot_cards[1]))])
    settings = replace(POWER, draws=60)
    small = detectable_differences(a, b, 40, settings)
    large = detectable_differences(a, b, 400, settings)
    assert small["pilot_difference"]["chrf_plus_plus"] < -5  # the worse system is worse
    assert 0 < large["detectable"]["chrf_plus_plus"] < small["detectable"]["chrf_plus_plus"]
    # Ten times the entries: about a third of the difference (1/sqrt(10)), within simulation noise.
    assert 0.2 < large["detectable"]["chrf_plus_plus"] / small["detectable"]["chrf_plus_plus"] < 0.5
    assert 0 < large["detectable"]["composite"] < small["detectable"]["composite"] < 1
    # Two systems that agree on every entry: any shift is detected.
    assert detectable_differences(a, a, 40, settings)["detectable"]["chrf_plus_plus"] < 0.01


def test_the_estimate_is_the_smallest_shift_detected_in_80_percent(pilot_cards, monkeypatch):
    from gateway.corpus_check import power

    recorded = {}
    original = power._smallest_shift

    def keep(samples, observed, wanted, unit):
        found = original(samples, observed, wanted, unit)
        recorded.setdefault("chrf", (samples, observed, found))
        return found

    monkeypatch.setattr(power, "_smallest_shift", keep)
    a, b = (ComparableRun.from_card(card) for card in pilot_cards)
    detectable_differences(a, b, 100, replace(POWER, draws=40))
    samples, observed, found = recorded["chrf"]
    assert _rate(samples, observed, found) >= 0.8 > _rate(samples, observed, found - 0.02)


def test_pilot_cards_through_the_cli(cli, tmp_path, pilot_cards, monkeypatch):
    import gateway.corpus_check as check

    monkeypatch.setattr(check, "POWER", replace(POWER, draws=30))
    paths = []
    for index, card in enumerate(pilot_cards):
        paths.append(tmp_path / f"pilot{index}.json")
        paths[-1].write_text(json.dumps(card))
    report = json.loads(cli("corpus", "check", EXAMPLE / "corpus.json", "--pilot", *paths, "--json").stdout)
    assert report["power"]["method"].startswith("simulated from 2 pilot run cards (36 entries): 30 corpora of 36")
    assert len(report["power"]["pairs"]) == 1 and report["power"]["chrf_plus_plus"] > 0
    assert results(report)["power"]["finding"].startswith("36 entries detect ")
    text = cli("corpus", "check", EXAMPLE / "corpus.json", "--pilot", *paths).stdout
    assert "detectable chrF++ points" in text
    one = cli("corpus", "check", EXAMPLE / "corpus.json", "--pilot", paths[0])
    assert one.exit_code == 2 and "at least two run cards" in one.stderr
    level = copy.deepcopy(pilot_cards[1])
    level["entries"] = []
    (tmp_path / "level.json").write_text(json.dumps(level))
    refused = cli("corpus", "check", EXAMPLE / "corpus.json", "--pilot", paths[0], tmp_path / "level.json")
    assert refused.exit_code == 2 and "no per-entry statistics" in refused.stderr


def test_pilots_of_different_corpora_are_refused(pilot_cards):
    a = ComparableRun.from_card(pilot_cards[0])
    b = ComparableRun.from_card({**pilot_cards[1], "dataset": {**pilot_cards[1]["dataset"], "version": "f" * 64}})
    with pytest.raises(PilotRefused, match="b: corpus version ffffffffffff"):
        pilot_runs([("a", a), ("b", b)])


# --- the page ----------------------------------------------------------------------

def test_the_html_page_escapes_corpus_text(cli, tmp_path):
    corpus = example()
    corpus["entries"][0]["phenomena"] = ["<script>alert(1)</script>"]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(corpus), encoding="utf-8")
    page = tmp_path / "check.html"
    result = cli("corpus", "check", path, "--html", "-o", page)
    assert result.exit_code == 0
    html = page.read_text(encoding="utf-8")
    # The label as the check normalises it ('/' a separator), escaped.
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;_script&gt;" in html
    assert "size_minimum" in html and "Celsius" in html


# --- the gate, the stored summary, the run card's warning ------------------------

GATE = ["size_minimum", "domain_minimum", "tier_minimum", "provenance"]


def test_registering_the_example_as_holdout_is_refused_with_the_reasons_then_accepted(cli, tmp_path):
    store = ("--store", f"sqlite:///{tmp_path / 'corpora.sqlite'}")
    path = EXAMPLE / "corpus.json"
    refused = cli("corpus", "register", path, "--tier", "holdout", *store)
    assert refused.exit_code == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1
    for words in ("fails the corpus check for holdout", "size_minimum: 36 entries; a holdout set needs 100",
                  "domain_minimum: domains below 10: ui 7", "tier_minimum: tiers below 10: 1 6, 4 7, 5 2",
                  "provenance: reviewer missing on 36", "--accept-check-failures"):
        assert words in refused.stderr
    assert "universal_phenomena" not in refused.stderr  # not a gate rule
    assert json.loads(cli("corpus", "list", "--json", *store).stdout) == []

    reason = "the bundled example, registered for the test suite"
    accepted = cli("corpus", "register", path, "--tier", "holdout", "--accept-check-failures", reason, *store)
    assert accepted.exit_code == 0 and f"corpus check failures accepted ({reason})" in accepted.stderr
    listed = json.loads(cli("corpus", "list", "--json", *store).stdout)[0]
    span = listed["history"][-1]
    assert (span["tier"], span["accepted_reason"], span["accepted_by"]) == ("holdout", reason, "")
    assert [failure.partition(":")[0] for failure in span["accepted_failures"]] == GATE
    assert listed["check"]["purpose"] == "holdout" and listed["check"]["passed"] is False
    assert len(listed["check"]["failures"]) == 8
    table = cli("corpus", "list", *store).stdout
    assert "FAIL (holdout: 8 rules)" in table and reason in table

    # The registered version checked by the gateway: the same findings, its history.
    registered = json.loads(cli("corpus", "check", listed["id"], "--json", *store).stdout)
    local = json.loads(cli("corpus", "check", path, "--json").stdout)
    assert registered["corpus"]["tier"] == "holdout" and registered["purpose"] == "holdout"
    assert [(r["rule"], r["finding"]) for r in registered["rules"] if r["rule"] != "rotation"] == \
        [(r["rule"], r["finding"]) for r in local["rules"] if r["rule"] != "rotation"]
    assert registered["rotation"]["history"][0]["accepted_reason"] == reason
    assert results(registered)["rotation"]["passed"] is True
    assert cli("corpus", "check", listed["id"], "--strict", *store).exit_code == 1


def test_promoting_is_gated_and_retiring_rechecks(cli, tmp_path):
    store = ("--store", f"sqlite:///{tmp_path / 'corpora.sqlite'}")
    nob = REPO / "examples" / "eng-nob" / "corpus.json"
    assert cli("corpus", "register", nob, "--tier", "dev", *store).exit_code == 0
    corpus_id = example("nob")["id"]
    refused = cli("corpus", "promote", corpus_id, "--to", "gold", *store)
    assert refused.exit_code == 2 and "fails the corpus check for gold: size_minimum: 25 entries; a gold set needs " \
                                      "200" in refused.stderr
    assert json.loads(cli("corpus", "list", "--json", *store).stdout)[0]["tier"] == "dev"
    assert cli("corpus", "promote", corpus_id, "--to", "gold", "--accept-check-failures", "a trial", *store) \
        .exit_code == 0
    assert cli("corpus", "retire", corpus_id, "--to", "dev", *store).exit_code == 0
    history = json.loads(cli("corpus", "list", "--json", *store).stdout)[0]
    assert [(s["tier"], s["accepted_reason"]) for s in history["history"]] == \
        [("dev", ""), ("gold", "a trial"), ("dev", "")]
    assert history["check"]["purpose"] == "dev"


def test_the_gate_comes_after_conflicts_and_spares_content_already_registered(gateway):
    import grpc

    from apps.client.upload import corpus_parts
    from apps.inputs import load_corpus
    from champollion.eval.v1 import gateway_pb2

    corpus = load_corpus(EXAMPLE / "corpus.json")
    corpus.id = f"gate-{NOW.timestamp():.0f}-{np.random.default_rng().integers(1 << 30)}"
    assert gateway.RegisterCorpus(corpus_parts(corpus, "dev"), timeout=60).tier == "dev"
    # The same content asked for as holdout: already registered, its tier kept, nothing to gate.
    again = gateway.RegisterCorpus(corpus_parts(corpus, "holdout"), timeout=60)
    assert (again.created, again.tier) == (False, "dev")
    changed = gateway_pb2.Corpus()
    changed.CopyFrom(corpus)
    changed.entries[0].reference = "Guardar"
    with pytest.raises(grpc.RpcError) as conflict:
        gateway.RegisterCorpus(corpus_parts(changed, "holdout"), timeout=60)
    assert conflict.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as gated:
        gateway.RegisterCorpus(corpus_parts(changed, "holdout", new_version=True), timeout=60)
    assert gated.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert gated.value.details().startswith(f"corpus {corpus.id!r} fails the corpus check for holdout: size_minimum")
    with pytest.raises(grpc.RpcError) as promoted:
        gateway.SetCorpusTier(gateway_pb2.SetCorpusTierRequest(corpus_id=corpus.id, tier="holdout"), timeout=60)
    assert promoted.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    listed = [c for c in gateway.ListCorpora(gateway_pb2.ListCorporaRequest()).corpora if c.id == corpus.id]
    assert [(c.number, c.tier) for c in listed] == [(1, "dev")]
    assert listed[0].check.purpose == "dev" and not listed[0].check.passed
    checked = gateway.CheckCorpus(gateway_pb2.CheckCorpusRequest(corpus_id=corpus.id, purpose="gold"), timeout=120)
    report = json.loads(checked.report_json)
    assert report["purpose"] == "gold" and results(report)["size_minimum"]["finding"].endswith("needs 200")
    with pytest.raises(grpc.RpcError) as unknown:
        gateway.CheckCorpus(gateway_pb2.CheckCorpusRequest(corpus_id=corpus.id, purpose="final"), timeout=60)
    assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "purpose" in unknown.value.details()


def test_a_run_on_a_registered_corpus_that_fails_the_check_says_so_once(gateway, run_card_validator):
    from apps.client.upload import corpus_parts
    from apps.inputs import load_corpus
    from champollion.eval.v1 import gateway_pb2

    corpus = load_corpus(EXAMPLE / "corpus.json")
    corpus.id = f"warned-{np.random.default_rng().integers(1 << 30)}"
    gateway.RegisterCorpus(corpus_parts(corpus, "dev"), timeout=60)
    request = gateway_pb2.EvaluateRequest(corpus_ref=gateway_pb2.CorpusRef(id=corpus.id),
                                          predictions=[gateway_pb2.Prediction(id=e.id, prediction=e.reference)
                                                       for e in corpus.entries])
    card = evaluate(gateway, request)
    run_card_validator.validate(card)
    warned = [w for w in card["warnings"] if "corpus check" in w]
    assert warned == [(f"registered corpus {corpus.id!r} version 1 fails the corpus check for dev (8 required rules: "
                       "size_minimum, domain_minimum, tier_minimum, universal_phenomena, pair_phenomena, "
                       f"dual_references, community_review, provenance); see `champollion corpus check {corpus.id} "
                       "--version 1`")]


def test_the_store_keeps_the_summary_and_what_was_accepted(store_url):
    from gateway.store import CheckGateRefused, RunStore

    store = RunStore.open(store_url)
    try:
        corpus = example()
        summary = {"purpose": "holdout", "passed": False, "checked_at": NOW.isoformat(), "failures": ["x: y"],
                   "advice": [], "gate_failures": ["x: y"]}
        with pytest.raises(CheckGateRefused, match="refused here"):
            store.register_corpus(corpus, "holdout", check=summary, refusal="refused here")
        assert store.list_corpora() == []
        info = store.register_corpus(corpus, "holdout", check=summary,
                                     accepted={"reason": "why", "failures": ["x: y"], "by": "ops"})
        assert info["check"] == summary
        assert info["history"] == [{"tier": "holdout", "since": info["tier_since"], "accepted_reason": "why",
                                    "accepted_failures": ["x: y"], "accepted_by": "ops"}]
        # Content already registered is answered as it is, whatever the refusal.
        assert store.register_corpus(corpus, "holdout", refusal="refused here")["created"] is False
        with pytest.raises(CheckGateRefused):
            store.set_corpus_tier(corpus["id"], None, "gold", check=summary, refusal="refused here")
        assert store.corpus_info(corpus["id"])["tier"] == "holdout"
        dev = {**summary, "purpose": "dev"}
        moved = store.set_corpus_tier(corpus["id"], None, "dev", check=dev)
        assert moved["check"] == dev and moved["history"][-1] == {"tier": "dev", "since": moved["tier_since"]}
    finally:
        store.close()


def test_check_corpus_takes_stored_runs_and_cards_sent_as_pilots(gateway, pilot_cards, monkeypatch):
    import grpc

    import gateway.corpus_check as check
    from apps.client.upload import corpus_parts
    from apps.inputs import load_corpus
    from champollion.core.run_card import run_card_to_proto
    from champollion.eval.v1 import gateway_pb2

    monkeypatch.setattr(check, "POWER", replace(POWER, draws=20))
    corpus = load_corpus(EXAMPLE / "corpus.json")
    corpus.id = f"piloted-{np.random.default_rng().integers(1 << 30)}"
    gateway.RegisterCorpus(corpus_parts(corpus, "dev"), timeout=60)
    request = gateway_pb2.CheckCorpusRequest(corpus_id=corpus.id, pilot_run_ids=[pilot_cards[0]["run_id"]],
                                             pilot_cards=[run_card_to_proto(pilot_cards[1])])
    report = json.loads(gateway.CheckCorpus(request, timeout=300).report_json)
    assert report["purpose"] == "dev" and report["power"]["method"].startswith("simulated from 2 pilot run cards")
    assert [(pair["baseline"], pair["system"]) for pair in report["power"]["pairs"]] == \
        [(pilot_cards[0]["run_id"], "pilot_cards[0]")]
    alone = gateway_pb2.CheckCorpusRequest(corpus_id=corpus.id, pilot_run_ids=[pilot_cards[0]["run_id"]])
    with pytest.raises(grpc.RpcError) as refused:
        gateway.CheckCorpus(alone, timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "at least two" in refused.value.details()
