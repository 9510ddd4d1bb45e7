"""What the web front's tests share: a registered corpus with four stored
runs to review, a tokens file with a maintainer, a submitter and three
reviewers, and the front served by uvicorn on a free port."""
from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from apps.client import Client
from apps.web.app import WebSettings, create_app
from champollion.eval.v1 import gateway_pb2
from gateway.server.tokens import new_token, token_line

# A hostile output: shown as text, never run or loaded.
HOSTILE = '<script>window.__pwned = 1</script><img src="http://203.0.113.9/x.png" onerror="window.__pwned = 2">'
ARABIC = "هذه ترجمة خاطئة"

# Sources with their Plains Cree references (syllabics), domains and difficulties.
SENTENCES = [
    ("I see the dog.", "ᓂᐚᐸᒪᐤ ᐊᑎᒼ", "conv", 1),
    ("The house is big.", "ᒥᓯᐚᐢᑲᐦᐃᑲᓐ", "lit", 2),
    ("She is walking.", "ᐱᒥᐦᒃᑌᐤ", "conv", 1),
    ("We are eating.", "ᒦᒋᓱᔭᕽ", "edu", 2),
    ("The children play.", "ᒣᑕᐍᐏᒃ ᐊᐘᔑᓴᒃ", "lit", 3),
    ("He sees the river.", "ᐚᐸᐦᑕᒼ ᓰᐱᕀ", "edu", 3),
    ("I am happy today.", "ᒥᔼᐟᐊᐧᐩ ᐊᓄᐦᒌᐦᑳᐤ", "conv", 2),
    ("They are singing.", "ᓂᑲᒧᐘᒃ", "lit", 1),
]
CORPUS_ID = "web-review-crk"


def corpus(corpus_id: str = CORPUS_ID) -> dict:
    return {"id": corpus_id, "source_lang": "eng", "target_lang": "crk",
            "entries": [{"id": f"crk-{i + 1:02d}", "source": source, "reference": reference, "domain": domain,
                         "difficulty": difficulty} for i, (source, reference, domain, difficulty) in
                        enumerate(SENTENCES)]}


def system_predictions(system: int) -> list[dict]:
    """System 0 copies the references; the others drop words, and system 3
    answers one entry with markup and one in Arabic."""
    predictions = []
    for i, entry in enumerate(corpus()["entries"]):
        words = entry["reference"].split()
        text = " ".join(words[: max(1, len(words) - system // 2)]) if system else entry["reference"]
        if system == 3 and i == 0:
            text = HOSTILE
        if system == 3 and i == 1:
            text = ARABIC
        predictions.append({"id": entry["id"], "prediction": text})
    return predictions


def store_four_runs(gateway_address: str, corpus_id: str = CORPUS_ID) -> list[str]:
    """Registers the corpus (dev) and stores one run of each of four systems."""
    with Client(gateway_address) as client:
        client.register_corpus(corpus(corpus_id), "dev")
        return [client.evaluate(gateway_pb2.CorpusRef(id=corpus_id), system_predictions(system),
                                # A prompt of its own per corpus id: the same corpus content under two
                                # ids is one corpus version, and the same configuration on it one submission.
                                {"model_slug": f"system-{system}", "prompt": f"Translate into Plains Cree ({corpus_id})."}
                                )["run_id"] for system in range(4)]


@dataclass
class Tokens:
    maintainer: str
    submitter: str
    reviewers: dict[str, str]


def write_tokens(path) -> Tokens:
    tokens = Tokens(new_token(), new_token(), {name: new_token() for name in ("rater-1", "rater-2", "rater-3")})
    lines = [token_line("alice", "maintainer", tokens.maintainer), token_line("bob", "submitter", tokens.submitter)]
    lines += [token_line(name, "reviewer", token) for name, token in tokens.reviewers.items()]
    path.write_text("tokens:\n" + "".join(f"  {line}\n" for line in lines), encoding="utf-8")
    return tokens


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def served(settings: WebSettings):
    """The web front under uvicorn in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web front did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
