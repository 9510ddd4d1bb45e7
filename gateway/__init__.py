"""The gateway: owns the run. Validates, fans out to the families, merges,
computes corpus values, composite, tier, cost, speed and renders the run card."""
