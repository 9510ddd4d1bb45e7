"""Corpus version and run fingerprint (SPEC §9)."""
from gateway.card.identity import corpus_version, run_fingerprint


def test_corpus_version_ignores_order_but_not_edits():
    pairs = [("b", "Adiós"), ("a", "Hola")]
    version = corpus_version(pairs)
    assert version == corpus_version(list(reversed(pairs)))
    assert version != corpus_version([("b", "Adiós."), ("a", "Hola")])
    assert version != corpus_version([("c", "Adiós"), ("a", "Hola")])
    assert len(version) == 64


def test_fingerprint_changes_with_each_configuration_input():
    base = run_fingerprint("m", 0.0, "Translate.", "v1")[0]
    assert base == run_fingerprint("m", 0.0, "Translate.", "v1")[0]
    assert base != run_fingerprint("m2", 0.0, "Translate.", "v1")[0]
    assert base != run_fingerprint("m", 0.7, "Translate.", "v1")[0]
    assert base != run_fingerprint("m", 0.0, "Translate!", "v1")[0]
    assert base != run_fingerprint("m", 0.0, "Translate.", "v2")[0]
    inputs = run_fingerprint("m", 0.0, "Translate.", "v1")[1]
    assert "prompt" not in inputs and len(inputs["prompt_sha256"]) == 64
