"""Corpus version and run fingerprint (SPEC §9)."""
from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence

from champollion.core.text import normalise_for_match

# Hex digits kept of an entry fingerprint: 64 bits, no collision in any real corpus.
ENTRY_FINGERPRINT_CHARS = 16


def _sha256_of_json(value) -> str:
    canonical = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def version_reference(reference: str, extra_references: Sequence[str] = ()) -> str:
    """What the corpus version hashes of an entry's references: the reference
    itself when it is the only one, so a single-reference corpus keeps the
    version it always had; else the canonical JSON list of all of them,
    primary first (order matters: exact match uses the primary)."""
    if not extra_references:
        return reference
    return json.dumps([reference, *extra_references], ensure_ascii=False, separators=(",", ":"))


def corpus_version(entries: Iterable[tuple[str, str]]) -> str:
    """SHA-256 over the (id, version_reference) pairs sorted by id, as
    canonical JSON.

    Any edit to an id or any reference makes a new version; sources, variants
    and metadata do not, since they do not change what a score is measured
    against."""
    return _sha256_of_json(sorted([entry_id, reference] for entry_id, reference in entries))


# What a keyed (public) version id hashes, after this label: the corpus id and
# its content version, so equal references under two ids give two public ids.
PUBLIC_VERSION_LABEL = b"champollion public corpus version v1\0"


def keyed_version(key: bytes, corpus_id: str, version: str) -> str:
    """The public id of a secret-tier corpus version (docs/store-and-corpora.md,
    "Versions"): HMAC-SHA-256 under the server's version key of the corpus id
    and its content `version` (corpus_version). Without the key it cannot be
    computed from guessed references, so it confirms no guess; the corpus id
    in the message makes equal references in two corpora give unrelated ids.
    64 hex digits, as a content hash."""
    message = PUBLIC_VERSION_LABEL + json.dumps([corpus_id, version], ensure_ascii=False,
                                                separators=(",", ":")).encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def public_fingerprint(inputs: dict, public_version: str) -> str:
    """The fingerprint a non-maintainer is shown for a run on a secret-tier
    version: SHA-256 of the card's fingerprint inputs (model slug,
    temperature, the prompt's SHA-256) with the version's public id in place
    of its content hash. Runs of one configuration on one version still share
    it; from a submitter's own prompt and a guessed content hash it is not
    computable, as the stored fingerprint (run_fingerprint) would be."""
    return _sha256_of_json({**inputs, "corpus_version": public_version})


def with_public_version(card: dict, public_version: str) -> dict:
    """A copy of the run card (its dataset, fingerprint) as a non-maintainer
    sees a run on a secret-tier version: dataset.version and the fingerprint
    inputs' corpus_version are the version's public id, the fingerprint hash
    public_fingerprint. Nothing else of the card names the content hash."""
    shown = dict(card)
    if "dataset" in card:
        shown["dataset"] = {**card["dataset"], "version": public_version}
    fingerprint = card.get("fingerprint")
    if fingerprint:
        inputs = {**fingerprint.get("inputs", {}), "corpus_version": public_version}
        shown["fingerprint"] = {**fingerprint, "hash": public_fingerprint(fingerprint.get("inputs", {}), public_version),
                                "inputs": inputs}
    return shown


def run_fingerprint(
    model_slug: str | None, temperature: float | None, prompt: str | None, version: str
) -> tuple[str, dict]:
    """SHA-256 of the run configuration: model, temperature, prompt, corpus
    version. Returns the hash and the inputs shown in the run card (the prompt
    by its own SHA-256, so long prompts do not bloat the card)."""
    configuration = {
        "model_slug": model_slug,
        "temperature": temperature,
        "prompt": prompt,
        "corpus_version": version,
    }
    inputs = {
        "model_slug": model_slug,
        "temperature": temperature,
        "prompt_sha256": None if prompt is None else hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
        "corpus_version": version,
    }
    return _sha256_of_json(configuration), inputs


def entry_fingerprint(source: str, reference: str, extra_references: Sequence[str] = ()) -> str:
    """An entry's content-derived id (seed 001 §8.1): SHA-256 of its
    normalised source and references, so that an entry edited under the same
    id (a reference added included) gets another fingerprint, while
    whitespace or Unicode composition alone does not change it. A
    single-reference entry keeps the fingerprint it always had."""
    content = "\n".join(normalise_for_match(text) for text in (source, reference, *extra_references))
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:ENTRY_FINGERPRINT_CHARS]
