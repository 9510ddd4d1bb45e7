"""Gateway configuration: where each family lives, batch size, deadlines.

A YAML file (``champollion serve --config``) or built in code by the embedded
stack:

    families:
      surface: localhost:50061      # a family left out is "not configured"
    batch_size: 256
    deadline_seconds: 300
    max_in_flight: 16
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gateway.layout import FAMILIES


@dataclass
class GatewayConfig:
    # Family name -> address ("host:port"). Missing families are not configured.
    families: dict[str, str] = field(default_factory=dict)
    batch_size: int = 256
    # Deadline of one ScoreBatch call.
    deadline_seconds: float = 300.0
    # ScoreBatch calls in flight at once across all families.
    max_in_flight: int = 16

    def __post_init__(self):
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown family name(s) in gateway config: {', '.join(sorted(unknown))}")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")


def load_config(path: str | Path) -> GatewayConfig:
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    return GatewayConfig(**data)
