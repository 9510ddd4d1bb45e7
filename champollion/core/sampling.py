"""The bootstrap's and the paired tests' defaults: the seed, resamples and
trials a request gets when it names none, the paired tests' names and those
of the corrections for many of them (gateway/card/multiplicity.py). Plain
constants (no numpy), so that a command line can show them in its help
without loading the arithmetic (gateway/card/bootstrap.py, compare.py)."""
from __future__ import annotations

# sacreBLEU's: SACREBLEU_SEED's default, --paired-bs-n, --paired-ar-n.
DEFAULT_SEED = 12345
DEFAULT_RESAMPLES = 1000
DEFAULT_TRIALS = 10_000

# The paired tests: bootstrap (sacreBLEU's --paired-bs) and approximate
# randomization (--paired-ar).
BOOTSTRAP, RANDOMIZATION = "bs", "ar"
METHODS = (BOOTSTRAP, RANDOMIZATION)

# The corrections of many paired tests' p-values (all pairs of several runs):
# Holm's (the default), Benjamini-Hochberg's, or none.
HOLM, BENJAMINI_HOCHBERG, NO_CORRECTION = "holm", "bh", "none"
CORRECTIONS = (HOLM, BENJAMINI_HOCHBERG, NO_CORRECTION)
