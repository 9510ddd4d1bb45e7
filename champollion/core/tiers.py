"""The secrecy tiers of registered corpora as a run card records them, read
the same way by the gateway (what it withholds) and the client (what it
expects to be withheld)."""
from __future__ import annotations

# Seed 001 §5.2: holdout keeps its references private, gold everything.
SECRET_TIERS = ("holdout", "gold")


def tier_of(card: dict) -> str | None:
    """The secrecy tier of the registered corpus the run was scored
    against; None for a corpus the client sent."""
    return (card.get("dataset") or {}).get("tier")


def is_secret(card: dict) -> bool:
    return tier_of(card) in SECRET_TIERS
