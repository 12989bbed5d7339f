"""``impactlab.widgets``, the documented path of :mod:`impactlab.notebook.widgets` (the same module object)."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("impactlab.notebook.widgets")
