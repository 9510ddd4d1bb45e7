"""Reading runs from sacreBLEU-style plain-text files, corpora from TSV and
CSV tables, and a JSON corpus's `references` list (apps/inputs/plain_text.py,
apps/inputs/corpus_table.py, apps/inputs.py)."""
from __future__ import annotations

import gzip
import io
import json
import sys

import pytest

from apps.inputs import InputError, load_corpus, load_plain_text_run

SOURCES = ["The cat sleeps.", "Two dogs bark loudly.", "A bird sings."]
REFERENCES_A = ["Die Katze schläft.", "Zwei Hunde bellen laut.", "Ein Vogel singt."]
REFERENCES_B = ["Die Katze pennt.", "Zwei Hunde kläffen laut.", "Ein Vogel zwitschert."]
HYPOTHESES = ["Die Katze schläft.", "Zwei Hunde bellen.", ""]


def write_lines(path, lines, ending="\n"):
    path.write_bytes("".join(line + ending for line in lines).encode("utf-8"))
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "src": write_lines(tmp_path / "newstest.en-de.src.en", SOURCES),
        "ref_a": write_lines(tmp_path / "newstest.en-de.ref.A.de", REFERENCES_A),
        "ref_b": write_lines(tmp_path / "newstest.en-de.ref.B.de", REFERENCES_B),
        "hyp": write_lines(tmp_path / "newstest.en-de.hyp.sys.de", HYPOTHESES),
    }


def test_entries_are_lines_with_every_reference(files):
    corpus, predictions = load_plain_text_run(files["src"], [files["ref_a"], files["ref_b"]], files["hyp"],
                                              "eng", "deu")
    assert (corpus.id.rsplit("-", 1)[0], corpus.source_lang, corpus.target_lang) == ("newstest.en-de", "eng", "deu")
    assert [entry.id for entry in corpus.entries] == ["line-1", "line-2", "line-3"]
    assert [entry.source for entry in corpus.entries] == SOURCES
    assert [entry.reference for entry in corpus.entries] == REFERENCES_A
    assert [list(entry.extra_references) for entry in corpus.entries] == [[ref] for ref in REFERENCES_B]
    assert [(p.id, p.prediction) for p in predictions.predictions] == \
        [(f"line-{n}", text) for n, text in enumerate(HYPOTHESES, start=1)]
    # A blank hypothesis is an empty output, not a failure.
    assert predictions.predictions[2].HasField("prediction") and not predictions.predictions[2].HasField("error")
    assert predictions.lines == [1, 2, 3] and str(predictions.path) == files["hyp"]


def test_lines_are_read_as_sacrebleu_reads_them(tmp_path):
    """Split at "\\n" only (a U+2028 inside a segment stays), trailing
    whitespace and CR dropped, no extra entry for the final newline; .gz read."""
    src = write_lines(tmp_path / "s.txt", ["one\u2028still one  ", "two\t"], ending="\r\n")
    ref = tmp_path / "r.txt.gz"
    ref.write_bytes(gzip.compress("eins\u2028noch eins\nzwei".encode("utf-8")))  # no final newline
    hyp = write_lines(tmp_path / "h.txt", ["x", "y"])
    corpus, predictions = load_plain_text_run(src, [str(ref)], hyp, "eng", "deu")
    assert [entry.source for entry in corpus.entries] == ["one\u2028still one", "two"]
    assert [entry.reference for entry in corpus.entries] == ["eins\u2028noch eins", "zwei"]
    assert len(predictions.predictions) == 2


def test_a_dash_reads_standard_input_for_one_file(files, monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO("".join(f"{line}\n" for line in HYPOTHESES).encode("utf-8")))
    monkeypatch.setattr(sys, "stdin", stdin)
    corpus, predictions = load_plain_text_run(files["src"], [files["ref_a"]], "-", "eng", "deu")
    assert [p.prediction for p in predictions.predictions] == HYPOTHESES
    assert str(predictions.path) == "<stdin>" and corpus.id.startswith("newstest.en-de-")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(f"{s}\n" for s in SOURCES).encode())))
    corpus, _ = load_plain_text_run("-", [files["ref_a"], files["ref_b"]], files["hyp"], "eng", "deu")
    assert [entry.source for entry in corpus.entries] == SOURCES
    assert corpus.id.rsplit("-", 1)[0] == "newstest.en-de.ref"  # the references' names alone
    with pytest.raises(InputError, match=r"standard input\) given for more than one file"):
        load_plain_text_run("-", [files["ref_a"]], "-", "eng", "deu")


def test_line_count_mismatch_names_both_files_and_counts(files, tmp_path):
    short = write_lines(tmp_path / "short.de", REFERENCES_B[:2])
    with pytest.raises(InputError) as raised:
        load_plain_text_run(files["src"], [files["ref_a"], short], files["hyp"], "eng", "deu")
    assert str(raised.value) == (f"{short} has 2 lines but {files['src']} has 3: every file needs one line per "
                                 "segment")
    long = write_lines(tmp_path / "long.de", [*HYPOTHESES, "extra"])
    with pytest.raises(InputError, match=rf"^{long} has 4 lines but {files['src']} has 3"):
        load_plain_text_run(files["src"], [files["ref_a"]], long, "eng", "deu")


def test_encoding_errors_and_blank_references_name_file_and_line(files, tmp_path):
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"Die Katze.\nZwei \xff Hunde.\nEin Vogel.\n")
    with pytest.raises(InputError, match=rf"^{bad}:2: not UTF-8 text: byte offset 16 "):
        load_plain_text_run(files["src"], [str(bad)], files["hyp"], "eng", "deu")
    blank = write_lines(tmp_path / "blank.de", ["Die Katze.", "   ", "Ein Vogel."])
    with pytest.raises(InputError, match=rf"^{blank}:2: an empty line: every reference line needs text "
                                         r"\(entry line-2\)"):
        load_plain_text_run(files["src"], [files["ref_a"], blank], files["hyp"], "eng", "deu")
    with pytest.raises(InputError, match=r"^--ref: at least one"):
        load_plain_text_run(files["src"], [], files["hyp"], "eng", "deu")
    with pytest.raises(InputError, match=r"no-such-file: cannot read"):
        load_plain_text_run(files["src"], [str(tmp_path / "no-such-file")], files["hyp"], "eng", "deu")


def test_dataset_id_comes_from_the_file_names_and_the_texts(tmp_path):
    src = write_lines(tmp_path / "src.txt", ["a"])
    ref = write_lines(tmp_path / "ref.txt", ["b"])
    corpus, _ = load_plain_text_run(src, [ref], write_lines(tmp_path / "wmt.hyp", ["c"]), "eng", "deu")
    name, digest = corpus.id.rsplit("-", 1)
    assert name == "src" and len(digest) == 8  # nothing in common: the source's name, then the texts' digest
    # The system plays no part: every system on these files is on one board.
    other_hyp = write_lines(tmp_path / "other.hyp", ["d"])
    assert load_plain_text_run(src, [ref], other_hyp, "eng", "deu")[0].id == corpus.id
    # Other texts under the same names: another dataset (issue 37: every src.en was one board).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_src = write_lines(elsewhere / "src.txt", ["a different source"])
    other_ref = write_lines(elsewhere / "ref.txt", ["b"])
    other = load_plain_text_run(other_src, [other_ref], other_hyp, "eng", "deu")[0].id
    assert other.startswith("src-") and other != corpus.id
    # The same texts under other names: the same digest.
    renamed = write_lines(elsewhere / "renamed.txt", ["a"])
    assert load_plain_text_run(renamed, [write_lines(elsewhere / "r2.txt", ["b"])], other_hyp, "eng",
                               "deu")[0].id.endswith(digest)


def test_evaluate_dataset_id_names_the_board(cli, stack, tmp_path):
    src = write_lines(tmp_path / "src.en", SOURCES)
    ref = write_lines(tmp_path / "ref.de", REFERENCES_A)
    hyp = write_lines(tmp_path / "hyp.de", HYPOTHESES)
    named = cli("evaluate", "-s", src, "-r", ref, "-i", hyp, "--source-lang", "en", "--target-lang", "de",
                "--dataset-id", "my-set.v1", "--gateway", stack.gateway_address, "--json", "--metrics", "chrf")
    assert named.exit_code == 0, named.stderr
    assert json.loads(named.stdout)["dataset"]["id"] == "my-set.v1"
    refused = cli("evaluate", "--corpus-id", "x", hyp, "--dataset-id", "y", "--gateway", stack.gateway_address)
    assert refused.exit_code == 2 and "--dataset-id with --corpus-id" in refused.stderr


# --- TSV and CSV corpora -------------------------------------------------------

def test_tsv_columns_map_to_the_json_corpus_fields(tmp_path):
    path = tmp_path / "tiny.tsv"
    path.write_text(
        "id\tsource\treference\treference_2\treference_3\tacceptable_variants\tdomain\tdifficulty\tprovenance\n"
        'e1\t"Quoted," he said.\t„Zitiert", sagte er.\tZitiert, sagte er.\t\t["Zitiert sagte er."]\tnews\t3\tdoc-7\n'
        "\n"
        "e2\tHello\tHallo\tServus\tGrüß Gott\t\t\t\t\n",
        encoding="utf-8")
    corpus = load_corpus(path, "eng", "deu")
    assert (corpus.id.rsplit("-", 1)[0], corpus.source_lang, corpus.target_lang) == ("tiny", "eng", "deu")
    first, second = corpus.entries
    assert first.source == '"Quoted," he said.' and first.reference == '„Zitiert", sagte er.'
    assert list(first.extra_references) == ["Zitiert, sagte er."]  # an empty reference_3 cell: none
    assert list(first.acceptable_variants) == ["Zitiert sagte er."]
    assert (first.domain, first.difficulty, first.provenance["source_doc"]) == ("news", 3, "doc-7")
    assert list(second.extra_references) == ["Servus", "Grüß Gott"]
    assert not second.HasField("difficulty") and not second.domain


def test_csv_quoting_and_errors_with_line_and_column(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text('id,source,reference,difficulty\n'
                    'a,"Hi, there","Hola,\nallí",1\n'
                    'b,Bye,Adiós,hard\n', encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_corpus(path, "eng", "spa")
    # The quoted cell spans lines 2-3, so entry b is on line 4.
    assert str(raised.value) == f"{path}:4: column 4 (difficulty): must be an integer, got 'hard'"
    path.write_text('id,source,reference\na,"Hi, there","Hola,\nallí"\n', encoding="utf-8")
    (entry,) = load_corpus(path, "eng", "spa").entries
    assert (entry.source, entry.reference) == ("Hi, there", "Hola,\nallí")


@pytest.mark.parametrize("content, message", [
    ("id\tsource\tregerence\nx\ty\tz\n", r":1: column 3 'regerence': unknown column"),
    ("id\tsource\n", r":1: no 'reference' column"),
    ("id\tsource\treference\treference_3\n", r":1: reference columns must be numbered reference_2"),
    ("id\tsource\treference\nx\ty\n", r":2: 2 cells, but the header row names 3 columns"),
    ("id\tsource\treference\nx\t\tz\n", r":2: column 2 \(source\): is empty"),
    ("id\tsource\treference\tphenomena\nx\ty\tz\tidiom\n", r":2: column 4 \(phenomena\): must be a JSON list"),
    ("id\tsource\treference\tphenomena\nx\ty\tz\t[\"\\ud800\"]\n", r":2: column 4 \(phenomena\): \[0\]: a lone surrogate"),
    ("", r": empty: no header row"),
])
def test_table_errors_name_the_line_and_column(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}{message}"):
        load_corpus(path, "eng", "deu")


def test_table_needs_languages_and_utf8(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"id\tsource\treference\nx\ty\t\xe9\n")
    with pytest.raises(InputError, match=r"target_lang: a .tsv corpus does not name its languages; pass --target-lang"):
        load_corpus(path, "eng", None)
    with pytest.raises(InputError, match=rf"^{path}:2: not UTF-8 text: byte offset 24 "):
        load_corpus(path, "eng", "deu")


# --- a JSON corpus's `references` ---------------------------------------------

def json_corpus(tmp_path, entry: dict):
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"id": "c", "source_lang": "eng", "target_lang": "deu",
                                "entries": [{"id": "e1", "source": "Hi", **entry}]}), encoding="utf-8")
    return path


def test_json_references_list_gives_primary_and_extra(tmp_path):
    (entry,) = load_corpus(json_corpus(tmp_path, {"references": ["Hallo", "Servus", "Moin"]})).entries
    assert entry.reference == "Hallo" and list(entry.extra_references) == ["Servus", "Moin"]
    agreeing = {"reference": "Hallo", "references": ["Hallo", "Servus"]}
    (entry,) = load_corpus(json_corpus(tmp_path, agreeing)).entries
    assert entry.reference == "Hallo" and list(entry.extra_references) == ["Servus"]
    (entry,) = load_corpus(json_corpus(tmp_path, {"reference": "Hallo"})).entries
    assert list(entry.extra_references) == []


@pytest.mark.parametrize("entry, message", [
    ({"reference": "Hallo", "references": ["Servus", "Hallo"]}, r"reference: differs from references\[0\]"),
    ({"references": []}, r"references: must list at least one reference"),
    ({"references": "Hallo"}, r"references: must be a list of strings"),
    ({}, r"reference: is required \(or `references`, a list\)"),
])
def test_json_references_errors_name_entry_and_field(tmp_path, entry, message):
    path = json_corpus(tmp_path, entry)
    with pytest.raises(InputError, match=rf"^{path}: entries\[0\] \(id 'e1'\): {message}"):
        load_corpus(path)


# --- through the command line ----------------------------------------------------

def test_cli_refuses_a_line_count_mismatch_with_exit_2_and_one_line(cli, files, tmp_path):
    short = write_lines(tmp_path / "short.de", REFERENCES_B[:2])
    result = cli("evaluate", "--src", files["src"], "--ref", files["ref_a"], "--ref", short, "--hyp", files["hyp"],
                 "--source-lang", "eng", "--target-lang", "deu", "--no-store")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == \
        [f"champollion: error: {short} has 2 lines but {files['src']} has 3: every file needs one line per segment"]
    assert "Traceback" not in result.stderr and result.stdout == ""
