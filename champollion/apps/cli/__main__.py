"""`python -m champollion.apps.cli`: the `champollion` command."""
import sys

from champollion.apps.cli import main

sys.exit(main())
