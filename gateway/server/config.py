"""Gateway configuration: where each family lives, batch size, deadlines.

A YAML file (``champollion serve --config``) or built in code by the embedded
stack:

    families:
      surface: localhost:50061      # a family left out is "not configured"
      structural:                   # or per target language, with a default
        routes: {crk: ca-west:50062, nob: eu-north:50062}
        default: localhost:50062
    batch_size: 256
    deadline_seconds: 300
    max_in_flight: 16
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gateway.card.metrics import FAMILIES


@dataclass
class GatewayConfig:
    # Family name -> address ("host:port"), or {"routes": {language: address},
    # "default": address}. Missing families are not configured.
    families: dict[str, str | dict] = field(default_factory=dict)
    batch_size: int = 256
    # Deadline of one ScoreBatch call.
    deadline_seconds: float = 300.0
    # ScoreBatch calls of one run in flight at once, across its families; an
    # upload is read no further ahead than that.
    max_in_flight: int = 16

    def __post_init__(self):
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown family name(s) in gateway config: {', '.join(sorted(unknown))}")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for name, target in self.families.items():
            if isinstance(target, dict) and set(target) - {"routes", "default"}:
                raise ValueError(f"families.{name}: only 'routes' and 'default' may be given")

    def address_for(self, family: str, language: str) -> str | None:
        """Where `family` is served for target `language` (ISO 639-3); None
        when the family is not configured or no route covers the language."""
        target = self.families.get(family)
        if isinstance(target, dict):
            return (target.get("routes") or {}).get(language) or target.get("default")
        return target

    def addresses(self, family: str) -> list[str]:
        """Every address configured for `family`."""
        target = self.families.get(family)
        if isinstance(target, dict):
            found = [*(target.get("routes") or {}).values(), target.get("default")]
            return sorted({address for address in found if address})
        return [target] if target else []


def load_config(path: str | Path) -> GatewayConfig:
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    return GatewayConfig(**data)
