"""Tables kept in marshal files (services/behavioral/table_cache.py) and the
behavioral family's word lists read through them."""
from __future__ import annotations

import pytest

from champollion.core.cards import default_registry
from services.behavioral import lexicons, table_cache
from services.behavioral.table_cache import CACHE_ENV, cached, table_folder


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def counting(table):
    """A build function that counts its calls."""
    calls = []

    def build():
        calls.append(1)
        return table
    return build, calls


def test_a_table_is_built_once_then_read_from_its_file(cache_dir):
    for index, table in enumerate(({"Haus": -9.5, "über": -7.25}, frozenset({"a", "b"}), {"x": "y"})):
        name = f"t{index}"
        build, calls = counting(table)
        assert cached(name, build) == table
        assert cached(name, build) == table and type(cached(name, build)) is type(table)
        assert len(calls) == 1
        assert (table_folder() / f"{name}.marshal").is_file()
    assert table_folder().parent == cache_dir
    assert not [path for path in table_folder().iterdir() if path.name.startswith(".")]  # no file left aside


def test_an_unreadable_file_is_built_again_and_replaced(cache_dir):
    build, calls = counting({"a": 1.0})
    cached("t", build)
    (table_folder() / "t.marshal").write_bytes(b"\x00not marshal")
    assert cached("t", build) == {"a": 1.0} and len(calls) == 2
    assert cached("t", build) == {"a": 1.0} and len(calls) == 2


def test_without_a_writable_cache_directory_the_table_is_built_each_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    build, calls = counting({"a": 1.0})
    assert cached("t", build) == {"a": 1.0} and cached("t", build) == {"a": 1.0}
    assert len(calls) == 2


def test_another_spacy_version_keeps_its_own_tables(cache_dir, monkeypatch):
    build, calls = counting({"a": 1.0})
    cached("t", build)
    monkeypatch.setattr(table_cache, "_version", lambda package: "0.0-other")
    cached("t", build)
    assert len(calls) == 2 and len(list(cache_dir.iterdir())) == 2


def test_the_default_cache_is_under_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert table_folder().parent == tmp_path / "champollion"


def test_word_lists_read_back_from_the_cache_equal_spacys(cache_dir, monkeypatch):
    english = default_registry().get("eng")

    def fresh():
        for function in (lexicons._lemma_table, lexicons._words_for, lexicons._probabilities):
            function.cache_clear()

    fresh()
    built = (lexicons.lexicon(english), lexicons.lemma_table(english), lexicons.word_probabilities(english))
    fresh()

    def no_json(code, name):
        raise AssertionError(f"{code}_{name} read from spaCy's JSON although it is in the cache")
    monkeypatch.setattr(lexicons, "_lookups_table", no_json)
    read = (lexicons.lexicon(english), lexicons.lemma_table(english), lexicons.word_probabilities(english))
    fresh()
    assert read == built
    assert "the" in read[0] and read[1].get("went") == "go" and read[2]["the"] > read[2]["zebra"]


def test_without_a_home_directory_the_table_is_built(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(table_cache.Path, "home", staticmethod(no_home))
    assert cached("t", lambda: {"a": 1.0}) == {"a": 1.0}


def test_tables_are_readable_by_other_users_and_named_after_their_format(cache_dir):
    cached("t", lambda: {"a": 1.0})
    path = table_folder() / "t.marshal"
    assert path.stat().st_mode & 0o777 == 0o644
    assert table_folder().name.startswith(f"tables{table_cache.TABLES_FORMAT}-spacy")
