"""What `make fst` builds, read from the language cards (the one place that
says which analyzers exist and where they come from).

    python -m services.structural.analyzer_builds apt-packages
        the Debian packages the builds need, one line: the HFST and lttoolbox
        tools and every Apertium package a card names
    python -m services.structural.analyzer_builds list
        one build per line, `KIND FILE SOURCE`: `apertium nob.hfstol
        /usr/share/apertium/apertium-nno-nob/nob-nno.automorf.bin` or
        `script crk-fragment.hfstol eval_standards/crk/analyzer/build.sh`

`build_analyzers.sh` runs the builds; the Makefile and the Dockerfile install
the packages. Analyzer entries with neither `apertium` nor `script` (GiellaLT's
Plains Cree analyzer) are installed by hand and not listed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from champollion.core.cards import CardRegistry, default_registry

# Where Debian's Apertium packages put their compiled data.
APERTIUM_DATA = "/usr/share/apertium"
# Tools per kind of build: `hfst` (hfst-txt2fst, hfst-fst2fst, hfst-lexc) and
# lttoolbox's lt-print, which Debian ships in lttoolbox-dev.
TOOLS = {"apertium": ("hfst", "lttoolbox", "lttoolbox-dev"), "script": ("hfst",)}


@dataclass(frozen=True)
class Build:
    kind: str  # "apertium" or "script"
    file: str  # the .hfstol written into the output directory
    source: str  # the .automorf.bin converted, or the script run with the output directory
    package: str | None = None  # Debian package of the source


def builds(registry: CardRegistry) -> list[Build]:
    """Every card's buildable analyzers, by card code then priority."""
    found = []
    for card in sorted(registry.cards(), key=lambda c: c.code):
        for entry in card.fst.analyzers:
            if entry.apertium:
                source = f"{APERTIUM_DATA}/{entry.apertium.package}/{entry.apertium.automorf}"
                found.append(Build("apertium", entry.file, source, entry.apertium.package))
            elif entry.script:
                found.append(Build("script", entry.file, entry.script))
    return found


def apt_packages(registry: CardRegistry) -> list[str]:
    """The tools the builds need, then the packages they convert, each once."""
    planned = builds(registry)
    tools = [tool for build in planned for tool in TOOLS[build.kind]]
    data = [build.package for build in planned if build.package]
    return list(dict.fromkeys(tools + data))


def main(argv: list[str]) -> int:
    registry = default_registry()
    if argv == ["apt-packages"]:
        print(" ".join(apt_packages(registry)))
    elif argv == ["list"]:
        for build in builds(registry):
            print(build.kind, build.file, build.source)
    else:
        print("usage: python -m services.structural.analyzer_builds apt-packages|list", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
