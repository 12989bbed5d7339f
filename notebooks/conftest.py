"""nbval runs these notebooks in fast mode (their stored outputs are fast-mode runs), unless the
caller sets IMPACTLAB_FAST; the kernels nbval starts inherit this process's environment."""

import os

os.environ.setdefault("IMPACTLAB_FAST", "1")
