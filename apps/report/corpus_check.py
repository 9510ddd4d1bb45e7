"""The corpus check's report (`champollion corpus check --html -o F`) as one
self-contained HTML page: the rules, then each part's tables. Every value is
escaped by the template (labels and rejected words are corpus text)."""
from __future__ import annotations

from pathlib import Path

from apps.report.render import environment


def write_corpus_check(report: dict, path: Path) -> None:
    html = environment().get_template("corpus_check.html.j2").render(report=report)
    path.write_text(html, encoding="utf-8")
