"""`python -m champollion.cli`: the `champollion` command."""
import sys

from champollion.cli import main

sys.exit(main())
