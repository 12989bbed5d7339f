"""``python -m impactlab`` runs the command line."""

import sys

from .cli import main

if __name__ == "__main__":  # (a sweep's worker processes import this module again)
    sys.exit(main())
