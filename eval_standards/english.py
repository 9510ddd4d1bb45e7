"""English content lemmas with spaCy: a blank English pipeline, its lookup
lemmatizer (tables from spacy-lookups-data) and its stop words."""
from __future__ import annotations

import threading
from functools import lru_cache

_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _pipeline():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("lemmatizer", config={"mode": "lookup"})
    nlp.initialize()
    return nlp


def content_lemmas(text: str) -> set[str]:
    """Lower-cased lemmas of the alphabetic, non-stop-word tokens."""
    with _LOCK:  # one pipeline shared by the threads that score batches
        doc = _pipeline()(text)
    return {(token.lemma_ or token.text).lower() for token in doc if token.is_alpha and not token.is_stop}
