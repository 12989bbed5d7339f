"""impactful's victim order (docs/model.md section 5, "Preemption") and its served measure, on
hand cases whose answers are worked out in the comments, not by the production code:

1. unallocated jobs, most recently started first (ties at one instant: the one started last);
   for a single-node job (``pack_victims``), those on the nodes with the most protected GPUs
   first, so that nodes which could be cleared whole stay that way for larger jobs;
2. then funded jobs on the more over-served side of the lowest common ancestor, the most
   over-served side first, and within it the most recently started first.

How served a node is: (usage / (G x window) + GPUs its funded jobs hold now / G) / fraction.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import DAY_S, INSTANT, run_tiny

import impactlab as il
from impactlab.inputs.budgets import ROOT
from impactlab.policies.impactful import Impactful
from impactlab.sim.events import preemptor

#: Every knob these cases rely on, written out. A 4320 s window (0.05 days) lets a few thousand
#: seconds of running make a budget clearly over-served.
KNOBS = {
    "cap_hours": 8.0,
    "window_days": 0.05,
    "half_life_days": None,
    "refresh_s": 300.0,
    "interactive_reserve": 0.0,
    "boost_interactive": True,
    "protect_unallocated": False,
    "max_victim_ratio": 1.0,
    "gangs_preempt_every_pass": False,
    "pack_victims": True,
}


def job(
    job_id, submit_s, project, gpus=8, duration_s=100_000.0, min_runtime_s=0.0, kind="training"
):
    """One trace row; checkpoints keep everything, so a preemption loses nothing."""
    return {
        "job_id": job_id,
        "submit_s": float(submit_s),
        "project": project,
        "gpus": gpus,
        "duration_s": duration_s,
        "kind": kind if project else "other",
        "min_runtime_s": min_runtime_s,
        "checkpoint_s": 0.0,
    }


def preemptions(rows, shares, gpus=16, horizon_s=5000.0, **knobs):
    """(victim, by) of every preemption of an impactful run, in order."""
    log = run_tiny(
        rows,
        policy="impactful",
        gpus=gpus,
        horizon_s=horizon_s,
        budgets=il.BudgetTree.flat(shares),
        policy_knobs={**KNOBS, **knobs},
    ).events
    return [(r.job_id, preemptor(r.detail)) for r in log[log.event == "preempt"].itertuples()]


@pytest.mark.parametrize("protect_unallocated, victim", [(False, "u"), (True, "f")])
def test_unallocated_jobs_are_preempted_before_funded_ones(protect_unallocated, victim):
    # Two nodes: u (unallocated) from 0 on node 0, f (q) from 1 on node 1; j (p) arrives at 3000.
    # f is an eligible victim (p 3/4, q 1/4): after the swap p is at (0 + 8/16) / 0.75 = 0.67,
    # q at (8 x 3000 / (16 x 4320)) / 0.25 = 1.39. Still u goes first, though it started
    # earlier; only when u is protected (protect_unallocated) does f go.
    rows = [
        job("u", 0, "", min_runtime_s=8 * 3600),
        job("f", 1, "q"),
        job("j", 3000, "p", duration_s=100),
    ]
    got = preemptions(rows, {"p": 3, "q": 1}, protect_unallocated=protect_unallocated)
    assert got == [(victim, "j")]


@pytest.mark.parametrize("submits", [(0, 5), (0, 0)])
def test_the_most_recently_started_unallocated_job_is_preempted_first(submits):
    # u1 and u2 (unallocated) fill the two nodes, u2 started last (at 5, or later in the same
    # pass at 0); j (p) needs one node: u2 goes.
    rows = [
        job("u1", submits[0], ""),
        job("u2", submits[1], ""),
        job("j", 100, "p", duration_s=100),
    ]
    assert preemptions(rows, {"p": 1}) == [("u2", "j")]


@pytest.mark.parametrize(
    "pack, expected",
    [
        (True, [("u_old", "j"), ("u_new", "g")]),
        (False, [("u_new", "j")]),
    ],
)
def test_a_single_node_job_preempts_where_protected_work_already_is(pack, expected):
    # Two nodes of 8. At 0, pf (q, 4 GPUs, protected for 8 h) and then u_old (unallocated, 4)
    # land on node 0 by best fit; at 10 u_new (unallocated, 8) takes node 1. At 100 j (p, 4 GPUs,
    # protected) finds no free GPU. Newest first, u_new on node 1 would go; with packing, u_old
    # goes, since node 0 holds protected work and can never be cleared whole before pf ends.
    # At 200 g (r, 8 GPUs) needs a whole node: with packing, node 1 still has only u_new, which
    # yields; without it, node 0 holds pf and node 1 holds j, both protected, and g waits.
    eight_hours = 8 * 3600
    rows = [
        job("pf", 0, "q", gpus=4, min_runtime_s=eight_hours),
        job("u_old", 0, "", gpus=4),
        job("u_new", 10, ""),
        job("j", 100, "p", gpus=4, min_runtime_s=eight_hours),
        job("g", 200, "r", min_runtime_s=eight_hours),
    ]
    assert preemptions(rows, {"p": 1, "q": 1, "r": 1}, pack_victims=pack) == expected


def test_the_most_recently_started_funded_job_of_a_side_is_preempted_first():
    # f1 (q, from 0) and f2 (q, from 1) fill the nodes; j (p) arrives at 3000. Both are on q's
    # side; after the swap p is at 0.67, q at (16 x 3000 / (16 x 4320) + 8/16) / 0.25 = 4.8.
    rows = [job("f1", 0, "q"), job("f2", 1, "q"), job("j", 3000, "p", duration_s=100)]
    assert preemptions(rows, {"p": 3, "q": 1}) == [("f2", "j")]


@pytest.mark.parametrize("q_protected, victim", [(False, "vq"), (True, "vr")])
def test_the_most_over_served_side_is_preempted_first_before_the_most_recent(q_protected, victim):
    # p 1/2, q 1/4, r 1/4. vq (q) runs from 0 on node 0, vr (r) from 1000 on node 1; j (p)
    # arrives at 4000 (usage as of the refresh at 3900):
    #   q: (8 x 3900 / (16 x 4320) + 8/16) / 0.25 = 3.81; r: (8 x 2900 / 69120 + 0.5) / 0.25 = 3.34.
    # q is more over-served, so its older job goes before r's newer one. r's job is an eligible
    # victim too (after the swap p is at 0.5 / 0.5 = 1.0, r at 0.336 / 0.25 = 1.34): it goes
    # when vq is protected.
    rows = [
        job("vq", 0, "q", min_runtime_s=8 * 3600 if q_protected else 0.0),
        job("vr", 1000, "r"),
        job("j", 4000, "p", duration_s=100),
    ]
    assert preemptions(rows, {"p": 2, "q": 1, "r": 1}) == [(victim, "j")]


# ----- the served measure, by hand ----------------------------------------------------------------
class ServedProbe(Impactful):
    """impactful that records, after each pass at a time in ``probe_at``, how served every
    budget node is (and p with 8 more GPUs)."""

    probe_at: set[float]
    served: dict[float, dict[str, float]]

    def schedule(self, now, sched):
        super().schedule(now, sched)
        if now in self.probe_at:
            tree = self.ctx.tree
            got = {name: self.fair.served(i) for i, name in enumerate(tree.names)}
            got["p+8"] = self.fair.served(tree.names.index("p"), 8)
            self.served[now] = got


def test_served_measure_by_hand_on_a_two_project_tree():
    # 16 GPUs; p (share 3: fraction 0.75) runs 4 GPUs from 0 to 1000; q (share 1: 0.25) runs 8
    # GPUs from 0 on. Window 4000 s, ranking (and usage) refreshed every 500 s.
    rows = [job("pj", 0, "p", gpus=4, duration_s=1000), job("qj", 0, "q", gpus=8)]
    tree = il.BudgetTree.flat({"p": 3, "q": 1})
    probe = ServedProbe(**{**KNOBS, "window_days": 4000 / DAY_S, "refresh_s": 500.0})
    probe.probe_at, probe.served = {2000.0, 5500.0}, {}
    il.simulate(
        il.SimConfig(policy="impactful", gpus=16, days=6000 / DAY_S, warmup_days=0.0, **INSTANT),
        trace=pd.DataFrame(rows),
        budgets=tree,
        policy=probe,
    )
    at = probe.served
    root = tree.names[ROOT]
    # t = 2000: usage p 4 x 1000 / (16 x 4000) = 0.0625, q 8 x 2000 / 64000 = 0.25; held now p 0, q 8/16.
    assert at[2000.0]["p"] == pytest.approx(0.0625 / 0.75)
    assert at[2000.0]["q"] == pytest.approx((0.25 + 0.5) / 0.25)
    assert at[2000.0]["p+8"] == pytest.approx((0.0625 + 0.5) / 0.75)
    assert at[2000.0][root] == pytest.approx(0.0625 + 0.25 + 0.5)
    # t = 5500: the window is [1500, 5500]; p's usage has left it, q's is 8 x 4000 / 64000 = 0.5.
    assert at[5500.0]["p"] == 0.0
    assert at[5500.0]["q"] == pytest.approx((0.5 + 0.5) / 0.25)


def test_no_ping_pong_threshold_follows_the_served_measure():
    # One node; q (share 1: 1/3) runs vq from 0; j (p, share 2: 2/3) arrives at 1000 and may
    # take vq once, after the swap, p is no better served than q:
    #   p: (0 + 8/8) / (2/3) = 1.5 <= q: (8 t / (8 x 3700)) / (1/3)  <=>  t >= 1850 s.
    # Usage is refreshed every 60 s, so the preemption comes at the first refresh after 1850.
    rows = [job("vq", 0, "q"), job("j", 1000, "p", duration_s=100)]
    log = run_tiny(
        rows,
        policy="impactful",
        gpus=8,
        horizon_s=3000.0,
        budgets=il.BudgetTree.flat({"p": 2, "q": 1}),
        policy_knobs={**KNOBS, "window_days": 3700 / DAY_S, "refresh_s": 60.0},
    ).events
    preempt = log[log.event == "preempt"]
    assert preempt.job_id.tolist() == ["vq"]
    assert 1850.0 <= preempt.t_s.iloc[0] <= 1850.0 + 60.0
