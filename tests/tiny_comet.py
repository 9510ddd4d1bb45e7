"""A tiny but real COMET checkpoint, built offline once and cached.

What gets built under ``build/tiny-comet/`` (about 1 MB, well under a second
after the imports):

- ``encoder/``: a local Hugging Face directory for a 2-layer, hidden-32
  XLM-R-style encoder (``config.json``) and its tokenizer, a sentencepiece
  model trained here on a few hundred generated sentences;
- ``models/champollion/tiny-comet/``: COMET's regression model class on that
  encoder (reads source, translation and reference, as wmt22-comet-da), saved
  as ``checkpoints/model.ckpt`` + ``hparams.yaml``, the layout
  ``comet.load_from_checkpoint`` reads;
- ``models/champollion/tiny-comet-qe/``: the reference-free regression class
  (source and translation only, as CometKiwi or AfriCOMET-MTL).

The checkpoint stores its encoder as ``pretrained_model`` and loading always
fetches that encoder's tokenizer and config, so it names the local
``encoder/`` directory by absolute path. The weights are random (seeded): the
scores mean nothing, but every step of the real loading and prediction code
runs. Usable as a script: ``python -m tests.tiny_comet [DIR [SIZE]]`` prints
the model directory; SIZE "base" or "large" builds the same models with the
compute of XLM-R base/large (random weights) for benchmarks.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BUILD_DIR = REPO / "build" / "tiny-comet"
MODEL_ID = "champollion/tiny-comet"
QE_MODEL_ID = "champollion/tiny-comet-qe"
# Bumped whenever what is built changes, so a stale cache is rebuilt.
BUILD_VERSION = "3"
# Encoder and estimator sizes. "tiny" is what the tests use; "base" and
# "large" have the compute of XLM-R base / large (and of wmt22-comet-da's
# estimator) with random weights, for benchmarks only.
SIZES = {
    "tiny": {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64, "estimator": [64, 32]},
    "base": {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072, "estimator": [2048, 1024]},
    "large": {"hidden": 1024, "layers": 24, "heads": 16, "intermediate": 4096, "estimator": [3072, 1024]},
}
SEED = 20240531

_SUBJECTS = {
    "en": ["The cat", "My neighbour", "The teacher", "A small child", "The old farmer", "Our doctor"],
    "es": ["El gato", "Mi vecino", "La maestra", "Un niño pequeño", "El viejo granjero", "Nuestra doctora"],
    "de": ["Die Katze", "Mein Nachbar", "Die Lehrerin", "Ein kleines Kind", "Der alte Bauer", "Unsere Ärztin"],
    "yo": ["Ológbò náà", "Aládùúgbò mi", "Olùkọ́ náà", "Ọmọ kékeré kan", "Àgbẹ̀ àgbà náà", "Dókítà wa"],
    "ko": ["고양이가", "내 이웃이", "선생님이", "어린 아이가", "늙은 농부가", "우리 의사가"],
}
_PREDICATES = {
    "en": ["reads a book", "walks to the market", "drinks cold water", "writes a long letter", "sleeps in the garden"],
    "es": ["lee un libro", "camina al mercado", "bebe agua fría", "escribe una carta larga", "duerme en el jardín"],
    "de": ["liest ein Buch", "geht zum Markt", "trinkt kaltes Wasser", "schreibt einen langen Brief", "schläft im Garten"],
    "yo": ["ń ka ìwé kan", "ń rìn lọ sí ọjà", "ń mu omi tútù", "ń kọ lẹ́tà gígùn kan", "ń sùn nínú ọgbà"],
    "ko": ["책을 읽는다", "시장에 걸어간다", "찬물을 마신다", "긴 편지를 쓴다", "정원에서 잔다"],
}


def training_sentences() -> list[str]:
    """A few hundred short sentences in five languages and three scripts."""
    sentences = []
    for language, subjects in _SUBJECTS.items():
        for subject in subjects:
            for predicate in _PREDICATES[language]:
                sentences.append(f"{subject} {predicate}.")
                sentences.append(f"{subject} {predicate} every day, 42 times!")
    return sentences


def _checkpoint_dir(root: Path, model_id: str) -> Path:
    return root / "models" / model_id


def checkpoint_path(root: Path = DEFAULT_BUILD_DIR, model_id: str = MODEL_ID) -> Path:
    return _checkpoint_dir(root, model_id) / "checkpoints" / "model.ckpt"


def _offline() -> None:
    # A hub name would otherwise be looked up online and hang before failing.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _build_encoder(encoder_dir: Path, work: Path, size: dict) -> None:
    import sentencepiece as spm
    from transformers import XLMRobertaConfig, XLMRobertaTokenizerFast

    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(training_sentences()) + "\n", encoding="utf-8")
    # XLM-R's layout: <unk>=0, <s>=1, </s>=2 in the sentencepiece model; the
    # tokenizer adds the fairseq offset and <pad>/<mask> around it.
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(work / "sp"), vocab_size=300, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2, num_threads=1, seed_sentencepiece_size=5000,
    )
    tokenizer = XLMRobertaTokenizerFast(vocab_file=str(work / "sp.model"))
    tokenizer.save_pretrained(str(encoder_dir))
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer), hidden_size=size["hidden"], num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"], intermediate_size=size["intermediate"],
        max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, type_vocab_size=1,
    )
    config.save_pretrained(str(encoder_dir))


def _build_model(encoder_dir: Path, model_dir: Path, reference_free: bool, size: dict) -> None:
    import pytorch_lightning as ptl
    import torch
    import yaml
    from comet.models import ReferencelessRegression, RegressionMetric

    torch.manual_seed(SEED)
    model_class = ReferencelessRegression if reference_free else RegressionMetric
    model = model_class(
        pretrained_model=str(encoder_dir), encoder_model="XLM-RoBERTa", hidden_sizes=size["estimator"],
        layer="mix", layer_transformation="softmax", layer_norm=True, pool="avg", dropout=0.1,
        final_activation="Sigmoid", load_pretrained_weights=False, local_files_only=True,
    )
    hparams = dict(model.hparams)
    (model_dir / "checkpoints").mkdir(parents=True)
    torch.save(
        {
            "state_dict": model.state_dict(),
            "hyper_parameters": hparams,
            "pytorch-lightning_version": ptl.__version__,
            "epoch": 0,
            "global_step": 0,
        },
        model_dir / "checkpoints" / "model.ckpt",
    )
    (model_dir / "hparams.yaml").write_text(yaml.safe_dump(hparams, sort_keys=True), encoding="utf-8")


def build_comet(root: Path, size: str = "tiny") -> Path:
    """The model directory (``<root>/models``) with MODEL_ID and QE_MODEL_ID
    of the given size, building them when missing or stale."""
    root = Path(root).resolve()
    stamp = root / "stamp.json"
    expected = {"version": BUILD_VERSION, "size": size, "encoder": str(root / "encoder")}
    built = all(checkpoint_path(root, model_id).is_file() for model_id in (MODEL_ID, QE_MODEL_ID))
    if stamp.is_file() and json.loads(stamp.read_text()) == expected and built:
        return root / "models"
    _offline()
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-comet-", dir=root.parent))
    try:
        # The checkpoint names its encoder by absolute path, so it is built
        # where it will stay: the final root, filled from a clean slate.
        shutil.rmtree(root, ignore_errors=True)
        encoder_dir = root / "encoder"
        encoder_dir.mkdir(parents=True)
        _build_encoder(encoder_dir, staging, SIZES[size])
        _build_model(encoder_dir, _checkpoint_dir(root, MODEL_ID), reference_free=False, size=SIZES[size])
        _build_model(encoder_dir, _checkpoint_dir(root, QE_MODEL_ID), reference_free=True, size=SIZES[size])
        stamp.write_text(json.dumps(expected), encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root / "models"


def build_tiny_comet(root: Path = DEFAULT_BUILD_DIR) -> Path:
    """The tests' model directory, built once and cached under build/tiny-comet."""
    return build_comet(root, "tiny")


if __name__ == "__main__":
    # python -m tests.tiny_comet [DIR [tiny|base|large]]
    print(build_comet(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_BUILD_DIR,
                      sys.argv[2] if len(sys.argv) > 2 else "tiny"))
