"""Shared fixtures and hypothesis strategies: a small budget tree, random traces in the schema,
and a helper that runs a tiny hand-written trace."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest
from hypothesis import strategies as st

from impactlab import BudgetTree, SimConfig, register_policy, simulate
from impactlab.trace import KINDS

# ----- profiles: the default run, and a thorough one for CI --------------------------------------
#: ``--thorough`` (or IMPACTLAB_THOROUGH=1): every hypothesis example and the whole oracle grid.
#: The default run keeps every rule and every hand-made case, with fewer random examples.
THOROUGH = False


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--thorough`` profile switch."""
    parser.addoption("--thorough", action="store_true", help="all random examples and the whole oracle grid")


def pytest_configure(config: pytest.Config) -> None:
    """Read the profile before test modules are imported (their decorators ask for it)."""
    global THOROUGH
    THOROUGH = bool(config.getoption("--thorough", False)) or os.environ.get("IMPACTLAB_THOROUGH") == "1"
    # The notebooks' stored outputs are fast-mode runs; the kernels nbval starts inherit this.
    # (A conftest in notebooks/ would shadow this module, which the tests import helpers from.)
    os.environ.setdefault("IMPACTLAB_FAST", "1")
    config.addinivalue_line("markers", "thorough: only in the thorough profile (--thorough)")


#: Modules of many independent cases and no costly module fixture: xdist spreads their tests
#: over the workers one by one. Every other module's tests run together on one worker, in order
#: (a notebook's cells share one kernel; module fixtures and servers are built once).
SPREAD = frozenset({"test_invariants.py", "test_oracle.py"})


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group each module's tests for xdist (``--dist loadgroup``) but those of ``SPREAD``;
    outside the thorough profile, skip what is marked thorough."""
    skip = pytest.mark.skip(reason="thorough profile only (python -m pytest --thorough)")
    for item in items:
        if item.path.name not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(str(item.path.relative_to(config.rootpath))))
        if not THOROUGH and "thorough" in item.keywords:
            item.add_marker(skip)


def examples(n: int) -> int:
    """Random examples for a property test: ``n`` in the thorough profile, a quarter (at least 3)
    by default."""
    return n if THOROUGH else max(3, n // 4)


# A policy from outside the package: registering it puts it through every test that runs
# each registered policy (the invariants above all).
register_policy("shortest", "plugin_policy:ShortestFirst")

DAY_S = 86_400.0
INF = math.inf

#: A small two-level tree: two programs and one project directly under the root.
TREE_SPEC = {
    "name": "root",
    "children": [
        {
            "name": "progA",
            "share": 3,
            "children": [{"name": "pa1", "share": 1}, {"name": "pa2", "share": 2}],
        },
        {"name": "progB", "share": 1, "children": [{"name": "pb1", "share": 1}]},
        {"name": "pc", "share": 2},
    ],
}
PROJECTS = ("pa1", "pa2", "pb1", "pc")


def small_tree() -> BudgetTree:
    """The tree of ``TREE_SPEC``."""
    return BudgetTree.from_dict(TREE_SPEC)


@pytest.fixture
def tree() -> BudgetTree:
    """The small two-level budget tree."""
    return small_tree()


#: The model without latencies (decisions act at once), where preempted sessions requeue like
#: any job: hand-computed cases of the scheduling rules are written for it.
INSTANT = {"cycle_s": 0.0, "startup_s": 0.0, "grace_s": 0.0, "preempted_sessions": "requeue"}


def run_tiny(
    rows: list[dict],
    policy: str = "fifo",
    gpus: int = 8,
    gpus_per_node: int = 8,
    horizon_s: float = 10_000.0,
    budgets: BudgetTree | None = None,
    **config,
):
    """Simulate a hand-written trace; the reporting window is the whole horizon by default, and
    decisions act at once (``INSTANT``) unless the test sets a latency or the sessions' rule."""
    config.setdefault("warmup_days", 0.0)
    for key, value in INSTANT.items():
        config.setdefault(key, value)
    cfg = SimConfig(
        policy=policy, gpus=gpus, gpus_per_node=gpus_per_node, days=horizon_s / DAY_S, **config
    )
    return simulate(cfg, trace=pd.DataFrame(rows), budgets=budgets)


# ----- random traces in the schema -----------------------------------------------------------
def _gang_sizes(capacity: int, per: int) -> st.SearchStrategy[int]:
    """Mostly small jobs; some whole-node and multi-node gangs (some holding a partial node)."""
    small = st.integers(1, per)
    options = [small, small, small, st.just(per)]
    if capacity > per:
        options += [st.integers(per + 1, capacity), st.just(capacity)]
    return st.one_of(*options)


@st.composite
def traces(draw, capacity: int, per: int, horizon_s: float, max_jobs: int = 20) -> pd.DataFrame:
    """A random trace: ties in submit times, jobs after the horizon, funded and unallocated work,
    checkpoints of 0 and inf, infinite and finite patience, protected and opted-out jobs."""
    n = draw(st.integers(1, max_jobs))
    slot = horizon_s / 30
    submit = st.one_of(
        st.integers(0, 36).map(lambda k: k * slot),
        st.floats(0, horizon_s * 1.1, allow_nan=False).map(lambda x: round(x, 1)),
    )
    duration = st.one_of(
        st.integers(1, 3600).map(float), st.floats(1.0, horizon_s, allow_nan=False)
    )
    names = draw(st.permutations([f"j{i:02d}" for i in range(n)]))
    rows = [
        {
            "job_id": names[i],
            "submit_s": draw(submit),
            "user": draw(st.sampled_from(["ann", "bob", "cy"])),
            "project": draw(st.sampled_from((*PROJECTS, "", ""))),
            "gpus": draw(_gang_sizes(capacity, per)),
            "duration_s": draw(duration),
            "kind": draw(st.sampled_from(KINDS)),
            "min_runtime_s": draw(st.sampled_from([0.0, 60.0, 600.0, 1800.0, 4 * 3600.0, INF])),
            "priority": draw(st.integers(0, 3)),
            "preemptible": draw(st.booleans()),
            "checkpoint_s": draw(st.sampled_from([0.0, INF, 60.0, 300.0, 1800.0])),
            "util": draw(st.floats(0.0, 1.0, allow_nan=False)),
            "patience_s": draw(st.one_of(st.just(INF), st.floats(1.0, horizon_s, allow_nan=False))),
        }
        for i in range(n)
    ]
    return pd.DataFrame(rows)
