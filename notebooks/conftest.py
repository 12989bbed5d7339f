"""pytest configuration of the notebooks (run by nbval): they run in fast mode, the mode their
checked outputs were stored in. It lives here so that ``python -m pytest notebooks/ANY.ipynb``
works alone; the cells of one notebook stay in one kernel through ``--dist loadfile``
(pyproject.toml), which needs no hook at all."""

import os


def pytest_configure() -> None:
    """Fast mode for the kernels nbval starts (they inherit this environment), unless set."""
    os.environ.setdefault("IMPACTLAB_FAST", "1")
