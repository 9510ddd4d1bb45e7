"""What the ESA review tests share (tests/test_review_esa.py, the browser
test): a Plains Cree corpus in syllabics whose entries carry document ids,
a Spanish one, and two runs of each: one that copies the references and a
rough one whose words the languages' analyzers reject (so `--prefill lyss`
has suggestions to show). Checked words: the project's Cree analyzer
rejects ᐊᑎᒪᐠ, ᑖᓂᓯᐠ and ᒥᐢᑕᑎᒪᐠ; Spanish's rejects perrro, cassa, gatto, libbro."""
from __future__ import annotations

from apps.client import Client
from champollion.eval.v1 import gateway_pb2

# (source, reference, rough output, document id)
CREE = [
    ("The Cree language.", "ᓀᐦᐃᔭᐍᐏᐣ᙮", "ᓀᐦᐃᔭᐍᐏᐣ ᐊᑎᒪᐠ ᑖᓂᓯᐠ᙮", "story-1"),
    ("A dog.", "ᐊᑎᒼ᙮", "ᐊᑎᒪᐠ ᑖᓂᓯᐠ᙮", "story-1"),
    ("A horse.", "ᒥᐢᑕᑎᒼ᙮", "ᒥᐢᑕᑎᒪᐠ ᐊᑎᒪᐠ᙮", "story-1"),
    ("Hello.", "ᑖᓂᓯ᙮", "ᑖᓂᓯᐠ ᐊᑎᒪᐠ᙮", "story-2"),
    ("The dogs are sleeping.", "ᐊᑎᒷᐠ ᓂᐹᐘᐠ᙮", "ᐊᑎᒪᐠ ᓂᐹᐘᐠ ᑖᓂᓯᐠ᙮", "story-2"),
]
SPANISH = [
    ("The dog sleeps in the house.", "El perro duerme en la casa.", "El perrro duerme en la cassa.", "home"),
    ("The cat reads a book.", "El gato lee un libro.", "El gatto lee un libbro.", "home"),
    ("The house is big.", "La casa es grande.", "La cassa es grande.", "home"),
]
# The Spanish rough outputs behind an emoji (two UTF-16 units, one character), one with "\r\n" inside:
# the page's offsets must stay the server's characters.
SPANISH_EMOJI = [
    (source, reference, f"{emoji} {rough}".replace(" en la", "\r\nen la"), document)
    for (source, reference, rough, document), emoji in zip(SPANISH, ("\U0001F642", "\U0001F63A", "\U0001F3E0"))
]
REJECTED = {"ᐊᑎᒪᐠ", "ᑖᓂᓯᐠ", "ᒥᐢᑕᑎᒪᐠ", "perrro", "cassa", "gatto", "libbro"}


def review_corpus(corpus_id: str, target: str, rows: list[tuple] | None = None) -> dict:
    rows = rows or (CREE if target == "crk" else SPANISH)
    return {"id": corpus_id, "source_lang": "eng", "target_lang": target,
            "entries": [{"id": f"{target}-{i + 1}", "source": source, "reference": reference,
                         "provenance": {"source_doc": document}}
                        for i, (source, reference, _, document) in enumerate(rows)]}


def store_two_runs(gateway_address: str, corpus_id: str, target: str, rows: list[tuple] | None = None) -> list[str]:
    """Registers the corpus (dev) and stores two runs: the references, and
    the rough outputs (`rows`: CREE or SPANISH by `target` unless given)."""
    rows = rows or (CREE if target == "crk" else SPANISH)
    corpus = review_corpus(corpus_id, target, rows)
    with Client(gateway_address) as client:
        client.register_corpus(corpus, "dev")
        return [client.evaluate(gateway_pb2.CorpusRef(id=corpus_id),
                                [{"id": entry["id"], "prediction": row[1] if rough == 0 else row[2]}
                                 for entry, row in zip(corpus["entries"], rows)],
                                {"model_slug": f"{target}-{'good' if rough == 0 else 'rough'}",
                                 "prompt": f"Translate ({corpus_id})."})["run_id"]
                for rough in (0, 1)]
