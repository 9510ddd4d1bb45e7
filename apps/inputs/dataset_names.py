"""The dataset id of a corpus whose file names none (plain text, a table, a
bare list of entries): a name taken from the file, then a digest of the
corpus's content. A name alone put every `src.en` corpus on one board
called `src` (issue 37); different texts now get different ids, the same
texts the same one, whatever their files are called."""
from __future__ import annotations

import hashlib
import json

from champollion.eval.v1 import gateway_pb2

# Hex digits of the digest kept: 32 bits, so that two corpora sharing a name
# collide about once in 65,000 pairs (the corpus version tells them apart).
DIGEST_CHARS = 8


def content_dataset_id(name: str, corpus: gateway_pb2.Corpus) -> str:
    """`name`-`digest`: the digest (SHA-256) of every entry's id, source and
    references, in order (not the language tags: `de` and `deu` name one
    language, and the same texts must get one id whichever is given)."""
    digest = hashlib.sha256()
    for entry in corpus.entries:
        digest.update(json.dumps([entry.id, entry.source, entry.reference, list(entry.extra_references)],
                                 ensure_ascii=False).encode())
    return f"{name}-{digest.hexdigest()[:DIGEST_CHARS]}"
