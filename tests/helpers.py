"""Helpers the tests import: the test profile, a small budget tree, a runner for tiny
hand-written traces and hypothesis strategies for random traces in the schema.

They live here, not in ``conftest.py``: pytest loads every ``conftest.py`` under the name
``conftest``, so a test that imported from it would get whichever was loaded last (the
notebooks have one of their own).
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import strategies as st

from impactlab import BudgetTree, SimConfig, simulate
from impactlab.inputs.trace import KINDS

#: The thorough profile (``--thorough`` or IMPACTLAB_THOROUGH=1): every hypothesis example and
#: the whole oracle grid. ``conftest.py`` sets it before the test modules are imported.
THOROUGH = False


def examples(n: int) -> int:
    """Random examples for a property test: ``n`` in the thorough profile, a quarter (at least 3)
    by default."""
    return n if THOROUGH else max(3, n // 4)


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


#: One letter per job event, to match a job's events against a lifecycle regex.
CODES = {
    "submit": "S",
    "start": "R",
    "preempt": "P",
    "fail": "F",
    "requeue": "Q",
    "finish": "D",
    "withdraw": "W",
    "kill": "K",
    "resubmit": "B",
    "evict": "E",
}


def gang_tree() -> BudgetTree:
    """Two programs (one with two projects) so that victims sit on both sides of an ancestor."""
    program_a = [{"name": "a1", "share": 1}, {"name": "a2", "share": 3}]
    return BudgetTree.from_dict(
        {
            "name": "root",
            "children": [
                {"name": "progA", "share": 2, "children": program_a},
                {"name": "progB", "share": 1, "children": [{"name": "b1", "share": 1}]},
            ],
        }
    )
