"""The secrecy tiers' table (champollion/core/tiers.py) is the one place a
tier's name and properties are spelled: the corpus rules' per-tier numbers
cover exactly its tiers, its derived lists are what the seed says, and no
module outside it spells a list of tier names."""
import re
import subprocess
from pathlib import Path

from champollion.core import tiers
from champollion.core.corpus_rules import PURPOSES, RULES

ROOT = Path(__file__).resolve().parents[1]
# A tuple, set or list of two or more quoted tier names: a copy of the table.
SPELLED_LIST = re.compile(r"""[(\[{]\s*["'](dev|holdout|gold)["']\s*,\s*["'](dev|holdout|gold)["']""")


def test_the_table_derives_each_tier_list():
    # Seed 001 §5.2: dev public; holdout references private; gold fully private.
    assert tiers.TIER_NAMES == ("dev", "holdout", "gold")
    assert tiers.SECRET_TIERS == tiers.OFFICIAL_TIERS == tiers.GATED_TIERS == ("holdout", "gold")
    assert tiers.MAINTAINER_TIERS == ("gold",) and tiers.RETIRED_TIERS == ("dev",)
    assert tiers.is_secret({"dataset": {"tier": "gold"}}) and not tiers.is_secret({"dataset": {"tier": "dev"}})
    assert not tiers.is_secret({})
    assert PURPOSES == tiers.TIER_NAMES
    for rule in RULES:
        if isinstance(rule.limit, dict):
            assert set(rule.limit) == set(tiers.TIER_NAMES), rule.id


def test_no_module_spells_a_list_of_tiers_but_the_table():
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    spelled = [path for path in tracked
               if not path.startswith("tests/") and path != "champollion/core/tiers.py"
               and SPELLED_LIST.search((ROOT / path).read_text(encoding="utf-8"))]
    assert spelled == []
