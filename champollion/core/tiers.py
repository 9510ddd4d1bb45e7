"""The secrecy tiers of registered corpora (seed 001 §5.2) in one table,
with what each implies: read the same way by the gateway (what it
withholds, who may run what, which runs are official, which versions need
the corpus check's gate), the store, the CLI and the report.

Data and lookups only: the rules that apply a tier live with their owners
(gateway/server/access.py, gateway/corpus_check, gateway/store)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tier:
    name: str
    # References private: cards are corpus level for non-maintainers and a
    # version is shown by its keyed public id only (seed 001 §5.2, §8.1).
    secret: bool
    # Its runs are on the official leaderboard (§5.2: never dev).
    official: bool
    # Registering or promoting a version into it runs the corpus check's gate.
    gated: bool
    # Only maintainers may run it or read its sources (gold is fully private).
    maintainers_only: bool
    # What the tier is, in words (the CLI's help).
    words: str


# In rotation order (seed 001 §5.3): a version is promoted up the table and
# retired back to its first row.
TABLE: tuple[Tier, ...] = (
    Tier("dev", secret=False, official=False, gated=False, maintainers_only=False, words="public"),
    Tier("holdout", secret=True, official=True, gated=True, maintainers_only=False, words="references private"),
    Tier("gold", secret=True, official=True, gated=True, maintainers_only=True, words="everything private"),
)
TIERS: dict[str, Tier] = {tier.name: tier for tier in TABLE}

TIER_NAMES: tuple[str, ...] = tuple(TIERS)
SECRET_TIERS: tuple[str, ...] = tuple(tier.name for tier in TABLE if tier.secret)
OFFICIAL_TIERS: tuple[str, ...] = tuple(tier.name for tier in TABLE if tier.official)
GATED_TIERS: tuple[str, ...] = tuple(tier.name for tier in TABLE if tier.gated)
MAINTAINER_TIERS: tuple[str, ...] = tuple(tier.name for tier in TABLE if tier.maintainers_only)
# Where `corpus retire` moves a version; `corpus promote` moves it into a secret tier.
RETIRED_TIERS: tuple[str, ...] = tuple(tier.name for tier in TABLE if not tier.secret)


def tier_of(card: dict) -> str | None:
    """The secrecy tier of the registered corpus the run was scored
    against; None for a corpus the client sent."""
    return (card.get("dataset") or {}).get("tier")


def is_secret(card: dict) -> bool:
    return tier_of(card) in SECRET_TIERS
