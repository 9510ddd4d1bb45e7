"""Behavioral family on realistic cases: code-switching, hallucination,
numbers, terminology (inflected forms through the target analyzer) and
consistency."""
import json

import pytest

from champollion.core.analyzers import DEFAULT_FST_DIR, AnalyzerRegistry
from champollion.core.cards import default_registry
from gateway.card.corpus import corpus_value
from champollion.core.words import words_of
from services.behavioral import lexicons
from services.behavioral.code_switching import CodeSwitchDetector
from services.behavioral.hallucination import findings, hallucinated
from services.behavioral.lexicons import number_word_test
from services.behavioral.metrics import BehavioralScorer
from services.behavioral.numbers import canonical, number_differences, numbers_in
from services.contract import BatchContext, EntryInput, Term
from tests.conftest import EXAMPLE

CARDS = default_registry()


@pytest.fixture(scope="module")
def scorer():
    assert (DEFAULT_FST_DIR / "spa.hfstol").is_file(), "run `make fst` (make test does)"
    return BehavioralScorer()


def score(scorer, target, rows, glossary=(), source="eng"):
    entries = [EntryInput(id=str(i), source=src, reference=ref, prediction=pred, terms=tuple(terms))
               for i, (src, ref, pred, *terms) in enumerate(rows)]
    context = BatchContext(CARDS.get(source), CARDS.get(target), tuple(glossary))
    return scorer.score(entries, context)


def test_english_inside_cree_syllabics_and_sro_is_code_switching(scorer):
    output = score(scorer, "iku", [("The dog sleeps", "ᕿᒻᒥᖅ ᓯᓂᒃᑐᖅ", "ᕿᒻᒥᖅ dog ᓯᓂᒃᑐᖅ")])
    assert output.entries[0].values["code_switched_words"] == ["dog"]
    assert output.entries[0].values["code_switching_rate"] == pytest.approx(1 / 3)
    output = score(scorer, "crk", [("The dog is sleeping on the bed", "Atim ê-nipât.", "Atim ê-nipât on the bed.")])
    assert output.entries[0].values["code_switched_words"] == ["on", "the", "bed"]
    assert output.entries[0].stats["code_switching_rate"] == [3.0, 5.0]


def test_spanish_function_words_are_not_english(scorer):
    output = score(scorer, "spa", [
        ("I don't like it", "No me gusta", "No me gusta a mí"),
        ("Open the file", "Abre el archivo", "Abre el file"),
    ])
    assert output.entries[0].values["code_switched_words"] == []
    assert output.entries[1].values["code_switched_words"] == ["file"]


def test_names_carried_over_from_the_source_are_not_switches(scorer):
    output = score(scorer, "spa", [("Call Microsoft Support", "Llame al soporte de Microsoft", "Llame a Microsoft")])
    assert output.entries[0].values["code_switched_words"] == []


def test_repeated_loops_are_hallucination_but_emphasis_is_not():
    flagged, total, reasons = hallucinated(
        "Gracias por todo gracias por todo gracias por todo", "Thanks for everything", "Gracias por todo"
    )
    assert reasons["oscillation"] == ["gracias", "por", "todo", "gracias", "por", "todo"]
    assert flagged == 6 and total == 9
    flagged, _, reasons = hallucinated("Es muy muy bueno", "It is very very good", "Es muy muy bueno")
    assert flagged == 0 and reasons == {}
    flagged, _, reasons = hallucinated("Es muy muy muy muy bueno", "It is very good", "Es muy bueno")
    assert reasons["oscillation"] == ["muy", "muy"]


def test_loops_of_long_phrases_are_found_in_linear_time():
    phrase = "die Regierung hat am Montag neue Regeln beschlossen"
    flagged, total, reasons = hallucinated(" ".join([phrase] * 6), "The government adopted new rules.", phrase)
    assert (flagged, total) == (40, 48) and reasons["oscillation"][:8] == phrase.split()
    # A loop read from its middle is the same loop: the reference's own repeat allows it.
    assert hallucinated("a b c a b c", "x", "c a b c a b")[0] == 0
    # 60,000 words: a scan that compared every pair of positions would not finish here.
    long_text = " ".join(f"Wort{i}" for i in range(60_000))
    assert hallucinated(long_text, "words", "Wörter")[0] == 0


def test_a_loop_is_each_run_of_words_equal_to_the_word_a_period_later():
    from services.behavioral.hallucination import _loops

    # period 1: a=a twice (two copies after the first a); period 2: b c b c b, one copy of
    # "b c" and a b; runs shorter than their period (a . a at period 2, b . . . b at 4) are none
    assert list(_loops("a a a b c b c b x".split())) == [(0, 1, 2), (3, 2, 1)]
    assert list(_loops("x y x y x y".split())) == [(0, 2, 2)]
    assert list(_loops([])) == [] and list(_loops(["a"])) == []


def test_numbers_with_no_counterpart_in_the_source():
    # Invented: no source number stands behind 300.
    _, _, reasons = hallucinated("Die Verkäufe stiegen 2024 um 20 % in 300 Filialen", "Sales rose 20% in 2024.", "x")
    assert reasons == {"number_not_in_source": ["300"]}
    # Converted or written in digits: each stands for a source number (number_mismatch_rate judges them).
    for output, source in [("Der See war etwa 25 Meter klar.", "The lake was about 80 feet clear."),
                           ("Um 20 Uhr rief man die Polizei.", "Police were called about 8pm."),
                           ("31 Personen kamen ins Krankenhaus.", "Thirty-one people were hospitalized."),
                           ("bis 10:00 Uhr (02:00 GMT)", "until 10 a.m. (0200GMT)"),
                           ("Ein Fonds über 10 Mio. Pfund, zum 12. Mal", "A £10m fund, for the 12th time")]:
        assert hallucinated(output, source, "x", is_number_word=number_word_test(CARDS.get("eng")))[2] == {}, output


def test_german_nouns_and_a_longer_free_translation_are_not_hallucination(scorer):
    """The old rules flagged capitalised words absent from one reference
    (every German noun) and words beyond twice its length."""
    output = score(scorer, "deu", [(
        "It's a training technique used to give the illusion of ancient trees on distant mountaintops.",
        "Es ist eine Technik.",
        "Es handelt sich um eine Erziehungstechnik, mit der man die Illusion uralter Bäume auf fernen "
        "Berggipfeln erzeugt.",
    )])
    assert output.entries[0].values["hallucination_reasons"] == {}
    assert output.entries[0].stats["hallucination_rate"][0] == 0.0


def test_a_detached_output_is_flagged_whole_and_a_free_faithful_one_is_not(scorer):
    source = "The fire grew from about ten acres to roughly 250 acres by the evening."
    reference = "Bis zum Abend wuchs das Feuer von etwa vier Hektar auf rund 100 Hektar an."
    output = score(scorer, "deu", [
        (source, reference, "Der Brand breitete sich bis zum Abend von rund zehn auf etwa 250 Acres aus."),
        (source, reference, "Die Zentralbank ließ die Zinsen am Donnerstag unverändert."),
    ])
    free, detached = output.entries
    assert free.values["hallucination_reasons"] == {} and free.stats["hallucination_rate"] == [0.0, 15.0]
    assert list(detached.values["hallucination_reasons"]) == ["detached_from_source"]
    assert detached.stats["hallucination_rate"] == [8.0, 8.0]
    assert "detached:cos(src,mt)<0.5*cos(src,ref)" in output.signatures["hallucination_rate"]


def test_detachment_is_off_where_the_encoder_does_not_cover_a_language(scorer):
    output = score(scorer, "crk", [("The dog sleeps", "Atim nipâw.", "Atim nipâw.")])
    assert any("does not cover crk" in w and "not detached outputs" in w for w in output.warnings)
    assert "|detached:off|" in output.signatures["hallucination_rate"]


def test_german_words_that_are_also_english_are_not_code_switching(scorer):
    output = score(scorer, "deu", [
        ("The veteran was almost gone, and the plasma of Mars was used as ammunition.", "x",
         "Der Veteran war fast fort, und das Plasma vom Mars wurde als Munition genutzt."),
        ("Open the file and save it.", "x", "Öffne the file und speichere sie."),
    ])
    assert output.entries[0].values["code_switched_words"] == []
    assert output.entries[1].values["code_switched_words"] == ["the", "file"]
    assert not [w for w in output.warnings if "unreliable" in w]


@pytest.mark.parametrize("source, target", [("eng", "deu"), ("eng", "spa"), ("deu", "eng")])
def test_the_language_pairs_tables_find_the_switches_the_whole_word_lists_find(source, target):
    """switch_tables keeps of the target's words and of both languages'
    probabilities only the words written as a source word: a detector with
    them flags the words one with the whole tables flags, word for word (a
    German text with English in it, words of every case, the bundled example)."""
    source_card, target_card = CARDS.get(source), CARDS.get(target)
    source_words = lexicons.lexicon(source_card)
    target_words, target_probabilities, source_probabilities = lexicons.switch_tables(source_card, target_card)
    assert len(target_words) < len(lexicons.lexicon(target_card)) / 10
    assert len(target_probabilities) < len(lexicons.word_probabilities(target_card)) / 10
    whole = CodeSwitchDetector(source_words, lexicons.lexicon(target_card), frozenset(), True, None,
                               lexicons.word_probabilities(target_card), lexicons.word_probabilities(source_card))
    kept = CodeSwitchDetector(source_words, target_words, frozenset(), True, None, target_probabilities,
                              source_probabilities)
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))["entries"]
    texts = [entry[key] for entry in corpus for key in ("source", "reference")] + [
        "Der Veteran war fast fort, und das Plasma vom Mars wurde als Munition genutzt.",
        "Öffne the file und speichere sie, THE FILE, The File; das Meeting war fine, aber die Deadline war hard.",
        "The hand, die Hand; kind, Kind; also, also; gift, Gift; bad, Bad; will, Will; rock, Rock."]
    flagged = 0
    for text in texts:
        words = words_of(text, False)
        assert kept.switched(words, "") == whole.switched(words, ""), text
        flagged += len(whole.switched(words, ""))
    assert flagged > 10  # switches were there to find


def test_a_target_with_no_word_list_nor_analyzer_is_warned_about(scorer):
    output = score(scorer, "hau", [("Good morning", "Ina kwana", "Ina kwana")])
    assert any(w.startswith("code_switching_rate is unreliable for hau") for w in output.warnings)


def test_number_flips_versus_changed_wording(scorer):
    assert canonical("1,000") == canonical("1.000") == canonical("1 000") == "1000"
    assert canonical("4,5") == canonical("4.5") == "4.5"
    assert numbers_in("20% increase") == numbers_in("un aumento del 20 %")
    output = score(scorer, "spa", [
        ("Sales increased 20%.", "Las ventas aumentaron un 20 %.", "Las ventas disminuyeron un 20 %."),
        ("Sales increased 20%.", "Las ventas aumentaron un 20 %.", "Las ventas aumentaron un 200 %."),
        ("It costs 1,500 dollars.", "Cuesta 1.500 dólares.", "Cuesta 1500 dólares."),
    ])
    assert [e.values["number_mismatch"] for e in output.entries] == [False, True, False]
    assert [e.values["number_mismatches"] for e in output.entries][1] == {"unmatched": [[25, 28]], "missing": ["20"]}


def test_glossary_adherence_accepts_inflected_forms(scorer):
    glossary = [Term("house", "casa"), Term("file", "archivo", ("fichero",))]
    output = score(scorer, "spa", [
        ("The houses are big", "Las casas son grandes", "Las casas son grandes"),     # inflected: casas -> casa
        ("Save the file", "Guarda el archivo", "Guarda el fichero"),                  # an alternative
        ("Delete the file", "Borra el archivo", "Borra el documento"),                # missed
        ("Good morning", "Buenos días", "Buenos días"),                               # no term applies
    ], glossary)
    values = [e.values["terminology_adherence"] for e in output.entries]
    assert values == [1.0, 1.0, 0.0, None]
    assert output.entries[2].values["terms_missed"] == ["file"]
    stats = [e.stats["terminology_adherence"] for e in output.entries]
    import numpy as np
    assert corpus_value("terminology_adherence", np.array(stats)) == pytest.approx(2 / 3)


def test_cree_inflected_term_through_the_fragment(scorer):
    assert (DEFAULT_FST_DIR / "crk-fragment.hfstol").is_file()
    output = score(scorer, "crk", [("The dogs are sleeping", "Atimwak ê-nipâcik.", "Atimwak ê-nipâcik.")],
                   [Term("dog", "atim")])
    assert output.entries[0].values["terminology_adherence"] == 1.0


def test_a_missing_target_analyzer_is_warned_about(tmp_path):
    """A behavioral service without the analyzers (no volume, as its image
    had) still scores, and says what that costs: the inflected rendering is
    a miss without the analyzer."""
    rows = [("The houses are big", "Las casas son grandes", "Las casas son grandes")]
    blind = score(BehavioralScorer(AnalyzerRegistry([tmp_path])), "spa", rows, [Term("house", "casa")])
    (warning,) = [w for w in blind.warnings if "analyzer" in w]
    assert "no analyzer for spa" in warning and str(tmp_path / "spa.hfstol") in warning
    assert "terminology_adherence" in warning and "code_switching_rate" in warning and "without it" in warning
    assert blind.entries[0].values["terminology_adherence"] == 0.0
    assert "analyzer:none" in blind.signatures["code_switching_rate"]
    # A card that names no analyzer is no reason to warn.
    assert not [w for w in score(BehavioralScorer(AnalyzerRegistry([tmp_path])), "iku",
                                 [("The dog", "ᕿᒻᒥᖅ", "ᕿᒻᒥᖅ")]).warnings if "analyzer" in w]


def test_a_full_analyzer_raises_no_warning_and_the_test_fragment_does(scorer):
    spa = score(scorer, "spa", [("The houses", "Las casas", "Las casas")])
    assert spa.warnings == []
    crk = score(scorer, "crk", [("The dog", "Atim", "Atim")])
    assert any(w.startswith("crk-fragment.hfstol is the crk card's test fragment") and "terminology_adherence" in w
               for w in crk.warnings), crk.warnings


def test_entry_terms_apply_beside_the_glossary(scorer):
    output = score(scorer, "spa", [("Open the menu", "Abre el menú", "Abre la lista", Term("menu", "menú"))])
    assert output.entries[0].values["terminology_adherence"] == 0.0


def test_consistency_is_the_majority_share_per_repeated_term(scorer):
    import numpy as np
    glossary = [Term("file", "archivo", ("fichero",)), Term("house", "casa")]
    output = score(scorer, "spa", [
        ("Save the file", "Guarda el archivo", "Guarda el archivo"),
        ("Open the file", "Abre el archivo", "Abre el archivo"),
        ("Delete the file", "Borra el archivo", "Borra el fichero"),
        ("The house", "La casa", "La casa"),  # used once: not a repeated term
    ], glossary)
    assert output.labels == {"consistency_groups": "2,1"}
    stats = np.array([e.stats["consistency_score"] for e in output.entries])
    assert corpus_value("consistency_score", stats, output.labels) == pytest.approx(2 / 3)
    assert corpus_value("consistency_score", stats[3:], output.labels) is None


def test_example_card_has_behavioral_metrics(gateway):
    from tests.conftest import evaluate
    from tests.test_run_card import example_request
    card = evaluate(gateway, example_request())
    scores = card["scores"]
    for key in ("code_switching_rate", "hallucination_rate", "terminology_adherence",
                "consistency_score", "number_mismatch_rate"):
        assert scores[key] is not None, key
    flipped = next(e for e in card["entries"] if e["id"] == "es-020")
    assert flipped["scores"]["number_mismatch"] is True
    # 45 % stands for the source's 4.5%: a wrong number, not one with no source counterpart.
    assert flipped["scores"]["hallucination_reasons"] == {}


def test_loops_and_unsupported_numbers_are_located_as_stretches_of_the_output():
    output = "Gracias por todo gracias por todo, 300 veces"
    found = findings(output, "Thanks for everything", "Gracias por todo")
    assert found.spans == {"oscillation": [[17, 33]], "number_not_in_source": [[35, 38]]}
    assert output[17:33] == "gracias por todo" and found.reasons["number_not_in_source"] == ["300"]
    assert found.flagged == 4 and found.tokens == 8


def test_number_differences_say_which_output_numbers_and_which_source_numbers():
    # 4.5% became 45 %: 45 unmatched, 4.5 missing; a second 20 has no second source copy.
    output = "Subió un 45 % en 20 tiendas, 20 más"
    assert number_differences("Rose 4.5% in 20 shops", output) == {"unmatched": [[9, 11], [29, 31]],
                                                                     "missing": ["4.5"]}
    assert output[9:11] == "45" and output[29:31] == "20"
    assert number_differences("1,500 dollars", "1.500 dólares") == {"unmatched": [], "missing": []}
