"""``SimResult.owed_split``: what held the GPUs that short projects were owed, on a case worked out
by hand, and its bookkeeping on random runs."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import examples, run_tiny, small_tree, traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impactlab import BudgetTree
from impactlab.analysis.metrics import Window, attempts, down_intervals, summarise
from impactlab.analysis.tables import OWED_HOLDERS, owed_split
from impactlab.sim.events import events_frame
from impactlab.sim.health import HealthConfig

TREE = BudgetTree.flat({"a": 1, "b": 1})
#: Every knob the cases rely on (two nodes keep no interactive reserve anyway).
KNOBS = {
    "refresh_s": 300.0,
    "cap_hours": 8.0,
    "window_days": 7.0,
    "half_life_days": None,
    "interactive_reserve": 0.0,
    "max_victim_ratio": 1.0,
    "drain_for_gangs": True,
}


def _job(i, t, project, gpus, duration, protect):
    return {
        "job_id": i,
        "submit_s": t,
        "project": project,
        "gpus": gpus,
        "duration_s": duration,
        "kind": "training",
        "min_runtime_s": protect,
        "checkpoint_s": 0,
    }


#: Two nodes of 2 GPUs, projects a and b with equal shares, decisions at once (no latencies).
#: b1 and b2 (2 GPUs each) take a node each at 0; b1 is protected for its whole run (to 2000),
#: b2 for 500 s of its 1000. The gang a1 (both nodes) arrives at 1: from then on each project
#: is owed 2 GPUs and a has none until a1 starts at 2000. What held a's 2 GPUs:
#: * 1-500: b's surplus of 2, under contract (998 GPU-s);
#: * 500-1000: b's surplus of 2, half of b's GPUs under contract (b1) and half not (b2): 500
#:   GPU-s each (a1 cannot preempt b2 alone: it needs b1's node too);
#: * 1000-2000: b2 has finished, b holds what it is owed; node 1 is free but a1 needs both: u1
#:   (unallocated, 1 GPU) holds 500 GPU-s of it (1100-1600), the rest is idle (1500 GPU-s).
ROWS = [
    _job("b1", 0, "b", 2, 2000, 2000),
    _job("b2", 0, "b", 2, 1000, 500),
    _job("a1", 1, "a", 4, 3000, 0),
    {**_job("u1", 1100, "", 1, 500, 0), "kind": "other"},
]
HORIZON_S = 6000.0


def _split(rows, **knobs):
    result = run_tiny(
        rows,
        policy="impactful",
        gpus=4,
        gpus_per_node=2,
        budgets=TREE,
        horizon_s=HORIZON_S,
        policy_knobs={**KNOBS, **knobs},
    )
    starts = result.events[result.events.event == "start"][["t_s", "job_id"]]
    assert list(starts.itertuples(index=False, name=None)) == [
        (0.0, "b1"),
        (0.0, "b2"),
        (1100.0, "u1"),
        (2000.0, "a1"),
    ]
    return result.owed_split().set_index("held_by")


def test_each_owed_gpu_is_charged_to_what_held_it():
    split = _split(ROWS)
    expected = {
        OWED_HOLDERS[0]: 1498.0,
        OWED_HOLDERS[1]: 500.0,
        OWED_HOLDERS[2]: 500.0,
        OWED_HOLDERS[3]: 1500.0,
        "all": 3998.0,
    }
    assert (split["gpu_hours"] * 3600).to_dict() == pytest.approx(expected)
    assert split.loc["all", "share"] == pytest.approx(3998.0 / (4 * HORIZON_S))


def test_a_surplus_no_contract_protects_is_charged_apart():
    """Without contracts, and without the drain (which would hand a1 b's unprotected nodes), the
    same GPUs are held the same way (a1 may not preempt b's jobs: with their nodes, a would be
    the better served), and b's surplus is all charged as past its contract."""
    split = _split([{**row, "min_runtime_s": 0} for row in ROWS], drain_for_gangs=False)
    expected = {
        OWED_HOLDERS[0]: 0.0,
        OWED_HOLDERS[1]: 1998.0,
        OWED_HOLDERS[2]: 500.0,
        OWED_HOLDERS[3]: 1500.0,
        "all": 3998.0,
    }
    assert (split["gpu_hours"] * 3600).to_dict() == pytest.approx(expected)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    trace=traces(capacity=32, per=8, horizon_s=20_000.0),
    failures=st.sampled_from([None, "manual", "automatic"]),
    grace_s=st.sampled_from([0.0, 30.0]),
)
def test_the_holders_add_up_to_the_instant_shortfall_which_bounds_the_window_one(
    trace, failures, grace_s
):
    """Whatever the trace, node failures (GPUs on a failed node are held by no one, as delivered
    GPU-hours count them) and grace periods."""
    health = HealthConfig(mtbf_hours=1.0, repair=failures) if failures else HealthConfig()
    result = run_tiny(
        trace.to_dict("records"),
        policy="impactful",
        gpus=32,
        horizon_s=20_000.0,
        budgets=small_tree(),
        health=health,
        grace_s=grace_s,
        seed=3,
    )
    split = result.owed_split().set_index("held_by")["gpu_hours"]
    assert (split >= -1e-9).all()
    assert split[list(OWED_HOLDERS)].sum() == pytest.approx(split["all"], abs=1e-9)
    leaves = result.budgets[result.budgets["leaf"]]
    window_short_h = (
        leaves["owed_gpu_s"] - leaves[["owed_gpu_s", "delivered_gpu_s"]].min(axis=1)
    ).sum() / 3600
    assert window_short_h <= split["all"] + 1e-6


def test_gpus_on_a_failed_node_are_nobodys():
    """A hand-written log: 2 nodes of 2 GPUs, node 1 down from 0 (manual repair: still in
    service) and a1 (project a) on it, b1 on node 0, for 300 s. Healthy capacity is 2 GPUs, so
    each project is owed 1. a1's GPUs count as held by no one, as they deliver nothing: a is
    short 1 GPU all along, and b, holding 2, is 1 above its owed rate (no contract): 300 GPU-s,
    the whole window shortfall (a got 0 of its 300)."""
    rows = [
        (0.0, "submit", "a1", 2, "", "", 0.0, 0.0),
        (0.0, "submit", "b1", 2, "", "", 0.0, 0.0),
        (0.0, "node_down", "", 2, "1", "", 0.0, 0.0),
        (0.0, "start", "a1", 2, "1", "", 0.0, 0.0),
        (0.0, "start", "b1", 2, "0", "", 0.0, 0.0),
    ]
    events = events_frame(rows)
    trace = pd.DataFrame(
        {
            "job_id": ["a1", "b1"],
            "submit_s": [0.0, 0.0],
            "user": ["u", "v"],
            "project": ["a", "b"],
            "kind": ["training"] * 2,
            "gpus": [2, 2],
            "duration_s": [300.0, 300.0],
            "util": [1.0, 1.0],
        }
    )
    window = Window(0.0, 300.0, 4)
    att, down = attempts(events, 300.0), down_intervals(events, 300.0)
    _, jobs, budgets = summarise(events, trace, TREE, window, 2, 300.0, att=att, down=down)
    assert budgets.set_index("node").loc["a", "delivered_gpu_s"] == 0.0
    split = owed_split(events, att, jobs, down, TREE, window, 2, att["start_s"].to_numpy(float))
    expected = {
        OWED_HOLDERS[0]: 0.0,
        OWED_HOLDERS[1]: 300.0,
        OWED_HOLDERS[2]: 0.0,
        OWED_HOLDERS[3]: 0.0,
        "all": 300.0,
    }
    assert (split.set_index("held_by")["gpu_hours"] * 3600).to_dict() == pytest.approx(expected)
