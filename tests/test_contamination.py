"""The contamination check (issue 14 item 4; SPEC §11, seed 001 §5.1, §8.2):
its rules on their own (gateway/card/contamination.py), then through the
session's gateway and through the CLI against a gateway with a store of this
module's own, where a disqualified run must stay off the default leaderboard."""
from __future__ import annotations

import json
import random
import unicodedata

import grpc
import pytest

from champollion.eval.v1 import gateway_pb2
from apps.launch.embedded import EmbeddedStack
from gateway.card.contamination import (GLOSSARY_MIN_WORDS, MAX_LISTED_ENTRIES, MIN_REFERENCE_CHARS, SPAN_CHARS,
                                        ContaminationCheck)
from tests.conftest import EXAMPLE, evaluate, make_request

DATASET = "champollion-example-eng-spa"
LONG_SOURCE = "Click Save to keep your changes."
LONG_REFERENCE = "Haz clic en Guardar para conservar tus cambios."


def check(prompt=None, coaching=(), entries=()) -> dict:
    contamination = ContaminationCheck.of(prompt, list(coaching))
    for entry_id, source, reference in entries:
        contamination.add(entry_id, source, reference)
    return contamination.integrity()


# --- the rules -----------------------------------------------------------------

def test_a_long_reference_in_the_prompt_disqualifies():
    integrity = check(f"Translate well. For instance: {LONG_REFERENCE} Thanks.",
                      entries=[("es-001", "Save changes", "Guardar cambios"), ("es-004", LONG_SOURCE, LONG_REFERENCE)])
    assert integrity["disqualified"] is True
    assert integrity["contaminated_entries"] == ["es-004"]
    assert integrity["contaminated_entry_count"] == 1
    assert integrity["reasons"] == ["reference of entry es-004 appears verbatim in meta.prompt"]


def test_a_short_reference_counts_only_with_its_source():
    assert len("Guardar cambios") < MIN_REFERENCE_CHARS
    entry = ("es-001", "Save changes", "Guardar cambios")
    alone = check('Use "Guardar cambios" for the button.', entries=[entry])
    assert alone["disqualified"] is False and alone["reasons"] == []
    paired = check("Example:\nSave changes -> Guardar cambios", entries=[entry])
    assert paired["contaminated_entries"] == ["es-001"]
    assert paired["reasons"] == ["source and reference of entry es-001 appear together in meta.prompt"]


def test_a_one_word_reference_alone_is_no_evidence():
    integrity = check("Answer OK when you are done.", entries=[("e1", "Okay", "OK"), ("e2", "OK", "OK")])
    # e2's source is its reference: the pair says no more than the word alone.
    assert integrity["disqualified"] is False


def test_a_coaching_example_with_the_entrys_source_and_target():
    coaching = ["Keep placeholders such as {name}.", ("Save changes", "Guardar cambios"), ("Cancel", "Cancelar")]
    integrity = check(coaching=coaching, entries=[("es-001", "Save changes", "Guardar cambios"),
                                                 ("es-009", "Delete", "Eliminar")])
    assert integrity["contaminated_entries"] == ["es-001"]
    assert integrity["reasons"] == ["source and reference of entry es-001 appear together in meta.coaching_data[1]"]


def test_a_pair_split_over_two_items_is_not_a_pair():
    integrity = check("Translate: Save changes", coaching=["Guardar cambios is the usual wording"],
                      entries=[("es-001", "Save changes", "Guardar cambios")])
    assert integrity["disqualified"] is False


def test_matching_survives_trivial_disguises():
    """Whitespace, NFC/NFKC forms, case, punctuation and invisible characters
    are folded away on both sides (fold_for_comparison): a reference quoted
    with any of them changed is still found."""
    decomposed = unicodedata.normalize("NFD", "Haz  clic en Guardar\npara conservar   tus cambios.")
    assert decomposed != LONG_REFERENCE
    disguises = [
        decomposed,
        LONG_REFERENCE.upper(),
        LONG_REFERENCE.replace(" ", "_"),
        LONG_REFERENCE.replace(" ", "\u200b"),  # zero-width spaces for spaces
        "\u200b".join(LONG_REFERENCE),  # a zero-width space between every letter
        unicodedata.normalize("NFKC", LONG_REFERENCE).translate({ord(c): ord(c) + 0xFEE0 for c in "HazclicGuardar"}),
        "Haz clic, en «Guardar» — para conservar tus cambios!",
    ]
    for disguised in disguises:
        found = check(f"Example: {disguised}", entries=[("es-004", LONG_SOURCE, LONG_REFERENCE)])
        assert found["contaminated_entries"] == ["es-004"], disguised
    # A short pair is matched word for word: its words inside others' are no match.
    assert check("Yesterday it was asi: not so.", entries=[("e1", "Yes", "Así")])["disqualified"] is False
    assert check("YES, ASÍ!", entries=[("e1", "Yes", "Así")])["disqualified"] is True


def test_every_text_the_run_carries_about_itself_is_checked():
    contamination = ContaminationCheck.of("Translate.", [], [("meta.model_slug", f"llm-{LONG_REFERENCE}"),
                                                            ("meta.condition", "zero-shot")])
    contamination.add("es-004", LONG_SOURCE, LONG_REFERENCE)
    assert contamination.integrity()["reasons"] == ["reference of entry es-004 appears verbatim in meta.model_slug"]


def test_listed_entries_are_capped_and_counted():
    entries = [(f"e{n}", f"source {n}", f"la frase de referencia número {n}") for n in range(MAX_LISTED_ENTRIES + 50)]
    prompt = " | ".join(reference for _, _, reference in entries)
    integrity = check(prompt, entries=entries)
    assert integrity["contaminated_entry_count"] == MAX_LISTED_ENTRIES + 50
    assert integrity["contaminated_entries"] == [f"e{n}" for n in range(MAX_LISTED_ENTRIES)]
    assert integrity["reasons"][-1] == "... and 50 more contaminated entries"


def _overlap_by_hand(prompt: str, references: list[str]) -> float:
    """Plain lists of 8-word tuples: no hashing, no normalisation needed for
    these single-spaced ASCII texts."""
    def grams(text):
        words = text.split()
        return [tuple(words[i:i + 8]) for i in range(len(words) - 7)]
    in_prompt = set(grams(prompt))
    every = [gram for reference in references for gram in grams(reference)]
    return sum(gram in in_prompt for gram in every) / len(every)


def test_reference_ngram_overlap():
    references = [
        "one two three four five six seven eight nine ten",  # three 8-grams
        "alpha beta gamma delta epsilon zeta eta theta",       # one
        "too short to count",                                 # none
    ]
    prompt = "Remember: one two three four five six seven eight nine and so on."
    contamination = ContaminationCheck.of(prompt, [])
    for number, reference in enumerate(references):
        contamination.add(f"r{number}", f"source {number}", reference)
    expected = _overlap_by_hand(prompt, references)
    assert expected == pytest.approx(2 / 4)
    assert contamination.overlap() == pytest.approx(expected)
    assert "50.0%" in contamination.warning()
    assert contamination.integrity()["disqualified"] is False  # overlap warns, never disqualifies

    clean = ContaminationCheck.of("Translate into Spanish.", [])
    clean.add("r0", "source", references[0])
    assert clean.overlap() == 0.0 and clean.warning() is None


def test_nothing_to_check_against():
    integrity = check(None, entries=[("es-004", LONG_SOURCE, LONG_REFERENCE)])
    assert integrity == {"disqualified": False, "reasons": [], "contaminated_entries": [],
                         "contaminated_entry_count": 0, "reference_ngram_overlap": None}


def test_many_entries_against_a_large_prompt():
    """20,000 entries against a 1 MB prompt: the index is built once and each
    entry costs a lookup, not a scan (this takes well under a second)."""
    rng = random.Random(7)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(4000)]
    entries = [(f"e{n}", " ".join(rng.choices(vocabulary, k=5)), " ".join(rng.choices(vocabulary, k=9)))
               for n in range(20_000)]
    planted = {"e5000", "e15000"}
    filler = " ".join(rng.choices(vocabulary, k=200_000))[:1_000_000]
    prompt = filler + "".join(f" {entries[int(i[1:])][2]}." for i in sorted(planted))
    integrity = check(prompt, entries=entries)
    assert set(integrity["contaminated_entries"]) == planted


# --- disguises (issue 33 finding 6) -----------------------------------------------

ACCENTED_SOURCE = "The file could not be opened; try again later."
ACCENTED_REFERENCE = "No se pudo abrir el archivo; inténtalo de nuevo más tarde."
_CYRILLIC = str.maketrans("aceopxyHKMT", "асеорхуНКМТ")


def _joined(text: str, joiner: str) -> str:
    """A joiner between every two letters (spaces kept)."""
    return " ".join(joiner.join(word) for word in text.split(" "))


def _with_accents(text: str) -> str:
    return "".join(char + "\u0301" if char in "aeiou" else char for char in text)


DISGUISES = {
    "cyrillic look-alikes": LONG_REFERENCE.translate(_CYRILLIC),
    "cyrillic capitals": LONG_REFERENCE.upper().translate(_CYRILLIC),
    "U+034F between letters": _joined(LONG_REFERENCE, "\u034f"),
    "variation selectors between letters": _joined(LONG_REFERENCE, "\ufe0f"),
    "a variation selector of the supplement": _joined(LONG_REFERENCE, "\U000e0100"),
    "combining accents added": _with_accents(LONG_REFERENCE),
    "html entities, named": LONG_REFERENCE.replace(" ", "&nbsp;").replace("a", "&#97;"),
    "html entities, every character": "".join(f"&#{ord(char)};" for char in LONG_REFERENCE),
    "html entities, twice encoded": LONG_REFERENCE.replace(" ", "&amp;nbsp;"),
    "U+3164 for spaces": LONG_REFERENCE.replace(" ", "\u3164"),
    "U+FFA0 and U+115F for spaces": LONG_REFERENCE.replace(" ", "\uffa0\u115f"),
    "reversed character order": LONG_REFERENCE[::-1],
    "reversed word order": " ".join(reversed(LONG_REFERENCE.split(" "))),
    "look-alike digits and letters": LONG_REFERENCE.replace("l", "1").replace("o", "0"),
    "several disguises at once": _joined(LONG_REFERENCE.translate(_CYRILLIC), "\u034f").replace(" ", "\u3164"),
}


@pytest.mark.parametrize("name", DISGUISES)
def test_a_disguised_reference_in_the_prompt_is_found(name):
    found = check(f"Translate well. For instance: {DISGUISES[name]} Thanks.",
                  entries=[("es-001", "Save changes", "Guardar cambios"), ("es-004", LONG_SOURCE, LONG_REFERENCE)])
    assert found["contaminated_entries"] == ["es-004"], name
    order = ("in reverse character order " if name == "reversed character order" else
             "in reverse word order " if name == "reversed word order" else "verbatim ")
    assert found["reasons"] == [f"reference of entry es-004 appears {order}in meta.prompt"]


def test_accents_stripped_from_a_reference_are_found():
    stripped = "".join(char for char in unicodedata.normalize("NFD", ACCENTED_REFERENCE)
                       if not unicodedata.combining(char))
    assert stripped != ACCENTED_REFERENCE
    for disguised in (stripped, _with_accents(stripped), unicodedata.normalize("NFD", ACCENTED_REFERENCE)):
        found = check(f"Say: {disguised}", entries=[("es-007", ACCENTED_SOURCE, ACCENTED_REFERENCE)])
        assert found["contaminated_entries"] == ["es-007"], disguised


def test_five_references_joined_by_a_grapheme_joiner():
    """The run on the public board: five references joined by U+034F."""
    entries = [(f"e{n}", f"Source sentence number {n}.", f"La frase de referencia número {n} es larga.")
               for n in range(1, 8)]
    prompt = "Translate. " + "\u034f".join(_joined(reference, "\u034f") for _, _, reference in entries[:5])
    found = check(prompt, entries=entries)
    assert found["contaminated_entries"] == ["e1", "e2", "e3", "e4", "e5"]


def test_a_reference_split_across_two_meta_fields():
    half = len(LONG_REFERENCE) // 2
    first, second = LONG_REFERENCE[:half], LONG_REFERENCE[half:]
    for fields in ([("meta.model_slug", first), ("meta.condition", second)],
                   [("meta.model_slug", second), ("meta.condition", first)],  # the second part first
                   [("meta.model_slug", first), ("meta.condition", "zero-shot"), ("meta.comet_model", second)]):
        contamination = ContaminationCheck.of("Translate into Spanish.", [], fields)
        contamination.add("es-004", LONG_SOURCE, LONG_REFERENCE)
        reasons = contamination.integrity()["reasons"]
        assert len(reasons) == 1 and reasons[0].startswith("reference of entry es-004 appears split across "), fields
        named = {path for path, text in fields if text in (first, second)}
        assert set(reasons[0].rpartition("across ")[2].split(" + ")) == named
    # Across the prompt's end and a coaching string, the prompt being long.
    prompt = "x " * (3 * SPAN_CHARS) + first
    contamination = ContaminationCheck.of(prompt, [second])
    contamination.add("es-004", LONG_SOURCE, LONG_REFERENCE)
    assert contamination.integrity()["reasons"] == [
        "reference of entry es-004 appears split across meta.prompt + meta.coaching_data[0]"]
    # A short reference's words in two items are still no pair.
    contamination = ContaminationCheck.of("Translate: Save", [], [("meta.condition", "changes Guardar cambios")])
    contamination.add("es-001", "Save changes", "Guardar cambios")
    assert contamination.integrity()["disqualified"] is False


def test_a_reference_in_the_glossary():
    glossary = [("Save", "Guardar"), ("Save changes", "Guardar cambios"), (LONG_SOURCE, LONG_REFERENCE.upper())]
    assert len(LONG_REFERENCE.split()) >= GLOSSARY_MIN_WORDS > len("Guardar cambios".split())
    contamination = ContaminationCheck.of("Translate into Spanish.", [], glossary=glossary)
    for entry in (("es-001", "Save changes", "Guardar cambios"), ("es-004", LONG_SOURCE, LONG_REFERENCE)):
        contamination.add(*entry)
    # The short terms are terminology, whole short entries or not.
    assert contamination.integrity()["reasons"] == ["reference of entry es-004 appears verbatim in glossary[2]"]
    # A long term that is part of a reference is terminology too.
    contamination = ContaminationCheck.of(None, [], glossary=[("click Save to keep", "Haz clic en Guardar para")])
    contamination.add("es-004", LONG_SOURCE, LONG_REFERENCE)
    assert contamination.integrity()["disqualified"] is False


def test_text_that_only_looks_alike_is_no_match():
    """The skeleton merges look-alikes, not different words."""
    found = check("Haz clic en Cancelar para descartar tus cambios.",
                  entries=[("es-004", LONG_SOURCE, LONG_REFERENCE)])
    assert found["disqualified"] is False


# --- through the gateway --------------------------------------------------------

ENTRIES = [
    {"id": "es-001", "source": "Save changes", "reference": "Guardar cambios"},
    {"id": "es-004", "source": LONG_SOURCE, "reference": LONG_REFERENCE},
    {"id": "es-007", "source": "The file could not be opened.", "reference": "No se pudo abrir el archivo."},
]


def test_a_prompt_with_an_entrys_source_and_reference_disqualifies_the_run(gateway, run_card_validator):
    prompt = f"Translate into Spanish. Example: {LONG_SOURCE} => {LONG_REFERENCE}"
    card = evaluate(gateway, make_request(ENTRIES, meta={"prompt": prompt}))
    run_card_validator.validate(card)
    integrity = card["integrity"]
    assert integrity["disqualified"] is True
    assert integrity["contaminated_entries"] == ["es-004"]
    assert integrity["reasons"] == ["reference of entry es-004 appears verbatim in meta.prompt"]
    assert integrity["submissions_with_fingerprint"] >= 1  # stored, and the check's fields kept


def test_a_disguised_reference_through_the_gateway(gateway, run_card_validator):
    prompt = f"Translate into Spanish. {_joined(LONG_REFERENCE.translate(_CYRILLIC), chr(0x034F))}"
    card = evaluate(gateway, make_request(ENTRIES, meta={"prompt": prompt, "model_slug": "m",
                                                         "condition": "x"}))
    run_card_validator.validate(card)
    assert card["integrity"]["contaminated_entries"] == ["es-004"]
    half = len(LONG_REFERENCE) // 2
    card = evaluate(gateway, make_request(ENTRIES, meta={"model_slug": LONG_REFERENCE[:half],
                                                         "condition": LONG_REFERENCE[half:]}))
    assert card["integrity"]["reasons"] == ["reference of entry es-004 appears split across meta.model_slug + "
                                            "meta.condition"]


def test_coaching_data_through_the_gateway(gateway, run_card_validator):
    coaching = [gateway_pb2.CoachingExample(text="Keep the tone neutral."),
                gateway_pb2.CoachingExample(source="Save changes", target="Guardar cambios")]
    card = evaluate(gateway, make_request(ENTRIES, meta={"coaching_data": coaching}))
    run_card_validator.validate(card)
    assert card["integrity"]["contaminated_entries"] == ["es-001"]
    assert "meta.coaching_data[1]" in card["integrity"]["reasons"][0]


def test_a_clean_prompt_is_not_flagged(gateway, run_card_validator):
    card = evaluate(gateway, make_request(ENTRIES, meta={"prompt": "Translate the English text into Spanish."}))
    run_card_validator.validate(card)
    integrity = card["integrity"]
    assert (integrity["disqualified"], integrity["reasons"], integrity["contaminated_entries"]) == (False, [], [])
    assert not any("reference_ngram_overlap" in warning for warning in card["warnings"])


@pytest.mark.parametrize("example, field", [
    (gateway_pb2.CoachingExample(text="a text", source="and a source"), "meta.coaching_data[0]"),
    (gateway_pb2.CoachingExample(source="Save", target=" "), "meta.coaching_data[0].target"),
    (gateway_pb2.CoachingExample(), "meta.coaching_data[0].source"),
])
def test_bad_coaching_data_is_refused(gateway, example, field):
    with pytest.raises(grpc.RpcError) as raised:
        gateway.Evaluate(make_request(ENTRIES, meta={"coaching_data": [example]}), timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(f"{field}: ")


# --- through the CLI, against a store of this module's own -----------------------

@pytest.fixture(scope="module")
def store_gateway(stack, tmp_path_factory) -> str:
    """A gateway without families (it reaches the session's by address) over
    a store of this module's own, so that its leaderboard holds only the runs
    made here."""
    store = f"sqlite:///{tmp_path_factory.mktemp('store') / 'runs.sqlite'}"
    with EmbeddedStack(families=(), remote_families=stack.family_addresses, store=store) as gateway:
        yield gateway.gateway_address


def _example_meta(folder, name: str, **changes) -> str:
    meta = json.loads((EXAMPLE / "meta.json").read_text(encoding="utf-8")) | changes
    path = folder / f"{name}.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    return str(path)


def test_a_disqualified_run_is_stored_but_not_on_the_leaderboard(cli, tmp_path, store_gateway, run_card_validator):
    contaminated = _example_meta(tmp_path, "leaky", model_slug="leaky-llm",
                                 coaching_data=["Always write it like this:", {"source": "Save changes",
                                                                             "target": "Guardar cambios"}])
    cards = {}
    for name, meta in (("clean", str(EXAMPLE / "meta.json")), ("leaky", contaminated)):
        out = tmp_path / f"{name}.card.json"
        result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", meta,
                     "--gateway", store_gateway, "--out", out)
        assert result.exit_code == 0, result.stderr
        cards[name] = json.loads(out.read_text(encoding="utf-8"))
        run_card_validator.validate(cards[name])
    assert cards["clean"]["integrity"]["disqualified"] is False
    assert cards["leaky"]["integrity"]["disqualified"] is True
    assert cards["leaky"]["integrity"]["contaminated_entries"] == ["es-001"]

    board = ("leaderboard", "--dataset", DATASET, "--json", "--gateway", store_gateway)
    result = cli(*board)
    assert result.exit_code == 0, result.stderr
    assert [row["run_id"] for row in json.loads(result.stdout)] == [cards["clean"]["run_id"]]
    result = cli(*board, "--include-disqualified")
    rows = {row["run_id"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {cards["clean"]["run_id"], cards["leaky"]["run_id"]}
    assert rows[cards["leaky"]["run_id"]]["disqualified"] is True

    shown = cli("show", cards["leaky"]["run_id"], "--gateway", store_gateway, "--json")
    assert json.loads(shown.stdout)["integrity"] == cards["leaky"]["integrity"]


@pytest.mark.parametrize("coaching, message", [
    ("one long string", "coaching_data: must be a list of strings or of {source, target} objects"),
    (["fine", 3], "coaching_data[1]: must be a string or a {source, target} object"),
    ([{"source": "Save changes"}], "coaching_data[0]: target: is required"),
])
def test_bad_coaching_data_in_the_meta_file(cli, tmp_path, stack, coaching, message):
    meta = _example_meta(tmp_path, "bad", coaching_data=coaching)
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", meta,
                 "--gateway", stack.gateway_address)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"champollion: error: {meta}: {message}"


def test_a_further_reference_in_the_coaching_data_contaminates_its_entry():
    """An entry's references beyond the primary count as much as it does."""
    further = "Die Katze schläft seit dem frühen Morgen auf dem alten Sofa im Wohnzimmer."
    contamination = ContaminationCheck.of("Translate into German.", [f"Example: {further}"])
    contamination.add("e1", "The cat has been asleep on the old sofa since early morning.",
                      "Seit dem frühen Morgen schläft die Katze auf dem alten Sofa.", further)
    contamination.add("e2", "It rains.", "Es regnet.", "Es regnet gerade.")
    assert contamination.contaminated_entries == ["e1"]
    assert contamination.overlap() > 0
