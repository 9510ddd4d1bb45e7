"""Compliance family: placeholder integrity, quote and casing rules,
compliance index and repair effectiveness (SPEC §2.5). Quality gates, not in
the composite."""
