"""Plains Cree eval standard: CrkLinterMetric (LYSS-eq, equivalent_match_rate)
and CrkSemanticMetric (LYSS-sem, semantic_score)."""
from eval_standards.crk.linter import CrkLinterMetric
from eval_standards.crk.semantic import CrkSemanticMetric

PLUGINS = {"crk_linter": CrkLinterMetric, "crk_semantic": CrkSemanticMetric}
