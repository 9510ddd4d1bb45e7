"""The language plugins' contract (eval standards) and their discovery from
language cards.

A card lists plugin ids (`evalMetrics: [crk_linter, crk_semantic]`); the
package `<STANDARDS_PACKAGE>.<card code>` maps ids to classes in `PLUGINS` —
a registry from a string id to a class, imported by name when a card asks
for it. The structural service runs a language's standard so without
knowing its types: the families and the standards both import this module
and never each other (an import-linter contract keeps it so).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Protocol

from champollion.core.analyzers import Analyzer
from champollion.core.cards import LanguageCard
from champollion.core.entries import EntryInput

# The package whose sub-packages hold each language's standard, by card code.
STANDARDS_PACKAGE = "eval_standards"


@dataclass(frozen=True)
class PluginVerdict:
    # The entry's value of the plugin's metric, 0-1.
    value: float
    verdict: str
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginTools:
    """What a plugin may use: the card and the language's analyzer."""
    card: LanguageCard
    analyzer: Analyzer | None


class MetricPlugin(Protocol):
    id: str
    # The run-card metric it produces (overriding the universal value).
    metric: str
    # The per-entry key of its verdict, e.g. "lint_verdict".
    verdict_key: str

    def score_entry(self, entry: EntryInput) -> PluginVerdict: ...


def statistics(verdict: PluginVerdict) -> list[float]:
    """Corpus aggregation: the mean of entry values, as a [value, 1] rate."""
    return [verdict.value, 1.0]


@dataclass
class DiscoveredPlugins:
    plugins: list[MetricPlugin] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def discover(card: LanguageCard, analyzer: Analyzer | None) -> DiscoveredPlugins:
    """Instances of the plugins the card declares; problems as messages."""
    found = DiscoveredPlugins()
    names = list(card.eval_metrics)
    if not names:
        return found
    try:
        package = importlib.import_module(f"{STANDARDS_PACKAGE}.{card.code}")
    except ImportError as error:
        found.problems.append(f"eval standard for {card.code} cannot be loaded: {error}")
        return found
    registry = getattr(package, "PLUGINS", {})
    tools = PluginTools(card=card, analyzer=analyzer)
    for name in names:
        if name not in registry:
            found.problems.append(f"{card.code} card names plugin {name!r}; {STANDARDS_PACKAGE}.{card.code} has "
                                  f"{', '.join(sorted(registry)) or 'none'}")
            continue
        try:
            found.plugins.append(registry[name](tools))
        except Exception as error:  # a plugin that cannot start gives null + warning
            found.problems.append(f"plugin {name} could not start: {type(error).__name__}: {error}")
    return found
