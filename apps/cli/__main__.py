"""`python -m apps.cli`: the `champollion` command."""
import sys

from apps.cli import main

sys.exit(main())
