"""Norwegian Bokmål eval standard: NobLinterMetric (LYSS-eq)."""
from eval_standards.nob.linter import NobLinterMetric

PLUGINS = {"nob_linter": NobLinterMetric}
