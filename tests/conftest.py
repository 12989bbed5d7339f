"""pytest configuration of the unit, property and browser tests: the ``--thorough`` profile,
the plug-in policy every registered-policy test runs, and shared fixtures. Helpers that tests
import live in ``helpers.py``."""

from __future__ import annotations

import os

import helpers
import pytest

from impactlab import BudgetTree, register_policy


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--thorough`` profile switch."""
    parser.addoption(
        "--thorough", action="store_true", help="all random examples and the whole oracle grid"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Read the profile before test modules are imported (their decorators ask for it)."""
    helpers.THOROUGH = (
        bool(config.getoption("--thorough", False)) or os.environ.get("IMPACTLAB_THOROUGH") == "1"
    )
    config.addinivalue_line("markers", "thorough: only in the thorough profile (--thorough)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside the thorough profile, skip what is marked thorough."""
    if helpers.THOROUGH:
        return
    skip = pytest.mark.skip(reason="thorough profile only (python -m pytest --thorough)")
    for item in items:
        if "thorough" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the times tests measured (``record_property("seconds: what", s)``: the browser tests'
    first chart), also under xdist, whose workers' prints are not shown."""
    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])]
    timed = [
        (k, v)
        for r in reports
        for k, v in getattr(r, "user_properties", ())
        if k.startswith("seconds: ")
    ]
    if timed:
        terminalreporter.write_sep("-", "measured times")
        for key, seconds in timed:
            terminalreporter.write_line(f"{key.removeprefix('seconds: ')}: {seconds:.2f} s")


# A policy from outside the package: registering it puts it through every test that runs
# each registered policy (the invariants above all).
register_policy("shortest", "plugin_policy:ShortestFirst")


@pytest.fixture
def tree() -> BudgetTree:
    """The small two-level budget tree."""
    return helpers.small_tree()
