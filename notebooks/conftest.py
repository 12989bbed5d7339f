"""pytest configuration of the notebooks (run by nbval).

The stored outputs are what a reader gets by running a notebook as shipped: full size. The
default test run executes every cell in fast mode (``IMPACTLAB_FAST=1``, shrunken runs), which
proves that each notebook runs top to bottom but prints other numbers, so it compares no output;
``IMPACTLAB_FAST=0 python -m pytest notebooks/`` runs them at full size and compares the cells
marked ``# NBVAL_CHECK_OUTPUT`` with the stored outputs (``.ci/run`` does both).

It lives here so that ``python -m pytest notebooks/ANY.ipynb`` works alone; the cells of one
notebook stay in one kernel through ``--dist loadfile`` (pyproject.toml), which needs no hook.
"""

import os

import pytest


def fast() -> bool:
    """Whether the notebooks run shrunken (the default under pytest)."""
    return os.environ.get("IMPACTLAB_FAST") == "1"


def pytest_configure() -> None:
    """Fast mode for the kernels nbval starts (they inherit this environment), unless set."""
    os.environ.setdefault("IMPACTLAB_FAST", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In fast mode, run the notebooks' cells without comparing their outputs."""
    if not fast():
        return
    for item in items:
        options = getattr(item, "options", None)
        if type(item).__name__ == "IPyNbCell" and isinstance(options, dict):
            options["check"] = False
