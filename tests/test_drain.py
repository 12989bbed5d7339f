"""Draining nodes for a blocked gang (``impactful``'s ``drain_for_gangs``), on cases small enough
to say by hand which job starts where and when, and who is preempted."""

from __future__ import annotations

from helpers import run_tiny

from impactlab import BudgetTree
from impactlab.analysis.explain import explain
from impactlab.sim.policy import DRAIN_NOTE, DRAIN_REASON

TREE = BudgetTree.flat({"p": 1, "q": 1})
#: Every knob the cases rely on (3 nodes keep no interactive reserve anyway).
KNOBS = {
    "refresh_s": 300.0,
    "cap_hours": 8.0,
    "window_days": 7.0,
    "half_life_days": None,
    "interactive_reserve": 0.0,
    "max_victim_ratio": 1.0,
}


def _job(i, t, p, gpus, duration, protect, kind="training"):
    return {
        "job_id": i,
        "submit_s": t,
        "project": p,
        "gpus": gpus,
        "duration_s": duration,
        "kind": kind,
        "min_runtime_s": protect,
        "checkpoint_s": 0,
    }


#: 3 nodes of 8 GPUs (too few for an interactive reserve). q1-q3 fill nodes 0-2 at t=0,
#: protected for 1000 s, 2000 s and 8 h; q1 ends at 500. The 2-node gang g (project p) arrives
#: at t=10: the nodes that free soonest are 0 (q1) and 1 (q2's protection ends at 2000).
ROWS = [
    _job("q1", 0, "q", 8, 500, 1000),
    _job("q2", 0, "q", 8, 50_000, 2000),
    _job("q3", 0, "q", 8, 50_000, 28_800),
    _job("x", 400, "q", 8, 50_000, 28_800),
    _job("g", 10, "p", 16, 1000, 0),
]


def _starts_and_preempts(log):
    rows = log[log.event.isin(["start", "preempt"])][["t_s", "event", "job_id", "nodes", "detail"]]
    return [tuple(r) for r in rows.itertuples(index=False)]


def _run(drain: bool, horizon_s: float = 40_000.0):
    return run_tiny(
        ROWS,
        policy="impactful",
        gpus=24,
        budgets=TREE,
        horizon_s=horizon_s,
        policy_knobs={**KNOBS, "drain_for_gangs": drain},
    )


def test_work_started_on_draining_nodes_is_unprotected_and_yields_to_the_gang():
    # x finds node 0 free at 500 (q1 ended), on the draining nodes: it starts unprotected although
    # it asks for 8 h, and its start row says why. At the refresh of 600 the gang could take x
    # but not q2 (protected until 2000); at the first refresh after that, 2100, it reclaims both
    # (whatever the fair shares) and starts on nodes 0 and 1; they come back when it ends at 3100,
    # in their queue's order (q2 was submitted first) by best fit.
    log = _run(True).events
    reclaim = f"by=g; {DRAIN_REASON}"
    assert _starts_and_preempts(log) == [
        (0.0, "start", "q1", "0", ""),
        (0.0, "start", "q2", "1", ""),
        (0.0, "start", "q3", "2", ""),
        (500.0, "start", "x", "0", DRAIN_NOTE + "g"),
        (2100.0, "preempt", "x", "0", reclaim),
        (2100.0, "preempt", "q2", "1", reclaim),
        (2100.0, "start", "g", "0,1", ""),
        (3100.0, "start", "q2", "0", ""),
        (3100.0, "start", "x", "1", ""),
    ]


def test_without_draining_the_gang_cannot_assemble_its_nodes():
    # x starts on node 0 protected for 8 h. The gang finds one node (q2's, from 2000) but not a
    # second until q3's and x's protections end (28,800 and 28,900); then the fair swap refuses:
    # with g running, p would hold 16 of 24 GPUs, served (0 + 16/24) / 0.5 = 1.33, and q 8 of
    # 24 plus its usage (24 GPUs x 28,800 s of a 7-day window, 0.048), (0.048 + 8/24) / 0.5 =
    # 0.76 < 1.33. So nothing is preempted and the gang waits for q's jobs to end (50,000 s).
    log = _run(False).events
    starts = _starts_and_preempts(log)
    assert (500.0, "start", "x", "0", "") in starts
    assert not [row for row in starts if row[1] == "preempt" or row[2] == "g"]


def test_the_story_of_a_drained_start_says_it_is_unprotected_and_why():
    result = _run(True, horizon_s=4000.0)
    story = explain(result, "x")
    starts = [step.text for step in story.steps if step.kind == "start"]
    assert (
        starts[0]
        == "started on node 0; unprotected: it runs on nodes draining for job g, which reclaims them"
    )
    assert (
        starts[1] == "started on node 1; protected until 8.86 h"
    )  # 3100 s + 8 h, nothing draining then
