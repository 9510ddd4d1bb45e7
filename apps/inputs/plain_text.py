"""A run from sacreBLEU-style plain-text files: a source file, one or more
reference files and a hypothesis file, one segment a line, line N of each
being entry `line-N`. Lines are split at "\\n" only and stripped of trailing
whitespace, as sacreBLEU reads them, so the scores agree with
`sacrebleu REF... -i HYP`."""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

from champollion.eval.v1 import gateway_pb2
from apps.inputs.dataset_names import content_dataset_id
from apps.inputs.input_text import InputError, PredictionFile, decode_utf8

STDIN = "-"
STDIN_NAME = "<stdin>"


def entry_id(line: int) -> str:
    return f"line-{line}"


def _display(name: str) -> str:
    return STDIN_NAME if name == STDIN else name


def _read_bytes(name: str) -> bytes:
    """The file's bytes (`-`: standard input; `.gz`: decompressed, as sacreBLEU does)."""
    if name == STDIN:
        return sys.stdin.buffer.read()
    try:
        data = Path(name).read_bytes()
    except OSError as error:
        raise InputError(f"{name}: cannot read: {error.strerror}") from None
    if name.endswith(".gz"):
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise InputError(f"{name}: not a gzip file: {error}") from None
    return data


def read_segments(name: str) -> list[str]:
    """The file's lines, each without its trailing whitespace; an encoding
    error names the file and line."""
    where = _display(name)
    data = _read_bytes(name)
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":  # the newline that ends the last line
        raw_lines.pop()
    segments, offset = [], 0
    for number, raw in enumerate(raw_lines, start=1):
        segments.append(decode_utf8(raw, f"{where}:{number}", offset).rstrip())
        offset += len(raw) + 1
    return segments


def _check_blank(segments: list[str], name: str, role: str) -> None:
    """A blank source or reference line would be refused by the gateway as
    entry line-N's; said here it names the file."""
    for number, segment in enumerate(segments, start=1):
        if not segment:
            raise InputError(f"{_display(name)}:{number}: an empty line: every {role} line needs text "
                             f"(entry {entry_id(number)})")


def dataset_id(src: str, refs: list[str]) -> str:
    """The name a plain-text corpus's id starts with (content_dataset_id
    adds its digest): the file names' common dot-separated start (`newstest2021.en-de` for
    `newstest2021.en-de.src.en` and `newstest2021.en-de.ref.A.de`); else
    the source file's name without its last suffix (the first reference's
    when the source is standard input). The hypothesis file plays no part,
    so every system's run on the same files has the same dataset."""
    names = [Path(name).name for name in (src, *refs) if name != STDIN]
    parts = [name.split(".") for name in names]
    common = []
    for pieces in zip(*parts):
        if len(set(pieces)) > 1:
            break
        common.append(pieces[0])
    # A whole name in common (the same file twice) keeps its last suffix off too.
    if common and len(common) < min(len(p) for p in parts):
        return ".".join(common)
    return Path(names[0]).stem or names[0]


def system_names(files: list[str]) -> list[str]:
    """A name for each system's file: the dot-separated pieces that set it
    apart from the others (`Facebook-AI` and `happypoet` for
    `newstest2021.en-de.hyp.Facebook-AI.de` and `...hyp.happypoet.de`), or
    for one file its name without its last suffix; `stdin` for `-`."""
    parts = [Path(name).name.split(".") for name in files if name != STDIN]
    if len(parts) < 2:
        names = iter([".".join(p[:-1]) if len(p) > 1 else p[0] for p in parts])
    else:
        shortest = min(len(p) for p in parts)
        lead = next((i for i in range(shortest) if len({tuple(p[:i + 1]) for p in parts}) > 1), shortest)
        tail = next((i for i in range(shortest - lead) if len({p[len(p) - 1 - i] for p in parts}) > 1),
                    shortest - lead)
        names = iter([".".join(p[lead:len(p) - tail]) or ".".join(p) for p in parts])
    return ["stdin" if name == STDIN else next(names) for name in files]


def load_plain_text_run(src: str, refs: list[str], hyp: str, source_lang: str,
                        target_lang: str) -> tuple[gateway_pb2.Corpus, PredictionFile]:
    """The corpus and predictions of one hypothesis file (load_plain_text_runs)."""
    corpus, (predictions,) = load_plain_text_runs(src, refs, [hyp], source_lang, target_lang)
    return corpus, predictions


def load_plain_text_runs(src: str, refs: list[str], hyps: list[str], source_lang: str,
                         target_lang: str) -> tuple[gateway_pb2.Corpus, list[PredictionFile]]:
    """The corpus (entries `line-1`, `line-2`, ...; the first reference file
    gives each entry's primary reference, the others its extra references)
    and, per hypothesis file (a system each), the predictions (line N of
    the file; a blank line is an empty output). `-` names standard input,
    for at most one of the files."""
    if not refs:
        raise InputError("--ref: at least one reference file is required")
    if not hyps:
        raise InputError("--hyp: at least one hypothesis file is required")
    names = [src, *refs, *hyps]
    if names.count(STDIN) > 1:
        raise InputError("`-` (standard input) given for more than one file; at most one can be read from it")
    for name, flag in ((source_lang, "--source-lang"), (target_lang, "--target-lang")):
        if not name:
            raise InputError(f"{flag}: required with plain-text files")
    sources = read_segments(src)
    if not sources:
        raise InputError(f"{_display(src)}: empty: no segment to score")
    references = [read_segments(name) for name in refs]
    hypotheses = [read_segments(name) for name in hyps]
    for name, segments in (*zip(refs, references), *zip(hyps, hypotheses)):
        if len(segments) != len(sources):
            raise InputError(f"{_display(name)} has {len(segments)} lines but {_display(src)} has {len(sources)}: "
                             "every file needs one line per segment")
    _check_blank(sources, src, "source")
    for name, segments in zip(refs, references):
        _check_blank(segments, name, "reference")
    corpus = gateway_pb2.Corpus(source_lang=source_lang, target_lang=target_lang)
    for index, source in enumerate(sources):
        corpus.entries.add(id=entry_id(index + 1), source=source, reference=references[0][index],
                           extra_references=[stream[index] for stream in references[1:]])
    corpus.id = content_dataset_id(dataset_id(src, refs), corpus)
    runs = []
    for hyp, lines in zip(hyps, hypotheses):
        predictions = PredictionFile(Path(_display(hyp)))
        for index, hypothesis in enumerate(lines):
            predictions.predictions.append(gateway_pb2.Prediction(id=entry_id(index + 1), prediction=hypothesis))
            predictions.lines.append(index + 1)
        runs.append(predictions)
    return corpus, runs
