"""Rules found by review, each with the small case that once broke it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from helpers import INSTANT, run_tiny

from impactlab import BudgetTree, SimConfig, simulate
from impactlab.analysis.metrics import Window, summarise
from impactlab.inputs.budgets import ROOT
from impactlab.inputs.trace import validate_trace
from impactlab.policies.queues import Searches
from impactlab.sim.events import Event, events_frame, preempt_reason, preemptor
from impactlab.sim.policy import BACKFILL_REASON, RESERVE_REASON, BasePolicy, PolicyError

NO_RESERVE = {"interactive_reserve": 0.0}  # the whole cluster is for the jobs of these cases


def test_a_blocked_funded_gang_preempts_at_the_next_refresh_even_if_nothing_else_happens():
    rows = [
        {
            "job_id": "u",
            "submit_s": 0,
            "project": "",
            "gpus": 16,
            "duration_s": 5000,
            "kind": "other",
        },
        {
            "job_id": "g",
            "submit_s": 10,
            "project": "p",
            "gpus": 16,
            "duration_s": 100,
            "kind": "training",
        },
    ]
    log = run_tiny(
        rows,
        policy="impactful",
        gpus=16,
        budgets=BudgetTree.flat({"p": 1}),
        policy_knobs=NO_RESERVE,
    ).events
    preempt = log[log.event == "preempt"]
    assert preempt.job_id.tolist() == ["u"] and preempt.detail.tolist() == [
        f"by=g; {BACKFILL_REASON}"
    ]
    assert 10 < preempt.t_s.iloc[0] <= 10 + 300  # the first ranking refresh after the gang arrived


@pytest.mark.parametrize("b_share, preempted", [(0.7, ["b1v"]), (1.0, [])])
def test_no_ping_pong_is_judged_on_the_victims_actually_preempted(b_share, preempted):
    # A1's 8-GPU job would need b1v (B1, 8 GPUs) and, to pass the rule on the walk, counts a2v
    # (A2, on another node) as freed too; the trim keeps only b1v. With b1v alone gone, A holds
    # 16 of 32 GPUs and B 12 (usage is still ~0): A is at 0.5 / (1 / (1 + b)), B at 0.375 / (b / (1 + b)).
    # With B's share b = 0.7 the swap is fair (0.85 <= 0.91) and b1v is preempted; with b = 1, A
    # would end up better served than B (1.0 > 0.75), so nothing may be preempted.
    tree = BudgetTree.from_dict(
        {
            "name": "root",
            "children": [
                {
                    "name": "A",
                    "share": 1,
                    "children": [{"name": "A1", "share": 3}, {"name": "A2", "share": 1}],
                },
                {"name": "B", "share": b_share, "children": [{"name": "B1", "share": 1}]},
            ],
        }
    )

    def job(i, t, p, g, protect):
        return {
            "job_id": i,
            "submit_s": t,
            "project": p,
            "gpus": g,
            "duration_s": 5000,
            "kind": "training",
            "min_runtime_s": protect,
            "checkpoint_s": 0,
        }

    rows = [
        job("a2p", 0, "A2", 4, 28800),
        job("a2v", 1, "A2", 4, 28800),
        job("b1v", 2, "B1", 8, 0),
        job("b1p", 3, "B1", 8, 28800),
        job("b1q", 4, "B1", 4, 28800),
        job("j", 10, "A1", 8, 0),
    ]
    knobs = {
        **NO_RESERVE,
        "cap_hours": 8.0,
        "window_days": 7.0,
        "half_life_days": None,
        "refresh_s": 300.0,
        "max_victim_ratio": 1.0,
    }
    log = run_tiny(
        rows, policy="impactful", gpus=32, budgets=tree, horizon_s=200, policy_knobs=knobs
    ).events
    preempts = log[log.event == "preempt"]
    assert preempts.job_id.tolist() == preempted
    assert (preempts.detail.map(preemptor) == "j").all()
    # b1v's side at the root is B, j's is A; B held 20 of 32 GPUs, A 8, usage ~0 after 10 s:
    # B at (20/32) / (0.7/1.7) = 1.52, A at (8/32) / (1/1.7) = 0.42
    assert preempts.detail.map(preempt_reason).tolist() == [
        "fair share under root: B served 1.52 > A 0.42"
    ] * len(preempted)


@dataclass
class RestartsItsVictim(BasePolicy):
    """Wrong on purpose: preempts a job and starts it again in the same pass."""

    name = "restarts-its-victim"

    def schedule(self, now, sched):
        for j in sorted(sched.pending):
            nodes = sched.cluster.best_fit(sched.jobs[j].gpus)
            if nodes:
                sched.start(j, nodes)
        if now == 10 and 0 in sched.running:
            sched.preempt(0, 1)
            sched.start(0, sched.cluster.best_fit(8))


def test_the_engine_refuses_to_restart_a_victim_in_the_pass_that_preempted_it():
    rows = [
        {"job_id": "a", "submit_s": 0, "gpus": 8, "duration_s": 100},
        {"job_id": "b", "submit_s": 10, "gpus": 8, "duration_s": 100},
    ]
    config = SimConfig(policy="fifo", gpus=8, days=1000 / 86400, warmup_days=0, **INSTANT)
    with pytest.raises(PolicyError, match="not pending"):
        simulate(config, trace=pd.DataFrame(rows), policy=RestartsItsVictim())


def test_gpu_time_on_a_failed_node_is_not_occupancy():
    # Node 1 is down for the whole window; y holds node 0 throughout, x runs on node 1 for 100 s.
    events = events_frame(
        [
            Event(0, "node_down", "", 8, "1", "failure; repair=manual", 0, 0),
            Event(0, "submit", "y", 8, "", "", 0, 0),
            Event(0, "start", "y", 8, "0", "", 0, 0),
            Event(100, "submit", "x", 8, "", "", 0, 0),
            Event(100, "start", "x", 8, "1", "", 0, 0),
            Event(200, "fail", "x", 8, "1", "node 1 failed", 0, 100),
            Event(200, "requeue", "x", 8, "", "", 0, 0),
        ]
    )
    trace = validate_trace(
        pd.DataFrame(
            [
                {"job_id": "y", "submit_s": 0, "gpus": 8, "duration_s": 5000},
                {"job_id": "x", "submit_s": 100, "gpus": 8, "duration_s": 100},
            ]
        )
    )
    summary, _, _ = summarise(
        events, trace, BudgetTree.from_dict({"name": "root"}), Window(0, 1000, 16), 8, 1000
    )
    assert summary["availability"] == pytest.approx(0.5)
    assert summary["occupancy"] == pytest.approx(1.0)  # y's 8 GPUs of the 8 healthy ones
    assert summary["occupancy_unallocated"] == pytest.approx(1.0)


def test_a_job_that_lands_on_a_failed_node_fails_there_even_if_it_would_finish_sooner():
    from impactlab.sim.health import HealthConfig

    rows = [
        {
            "job_id": f"j{i}",
            "submit_s": float(i * 60),
            "gpus": 8,
            "duration_s": 100.0,
            "checkpoint_s": 0.0,
        }
        for i in range(40)
    ]
    config = SimConfig(
        policy="fifo",
        gpus=16,
        days=0.05,
        warmup_days=0,
        seed=5,
        health=HealthConfig(mtbf_hours=0.5, repair="manual", crash_s=300.0, detect_hours=1),
    )
    result = simulate(config, trace=pd.DataFrame(rows))
    log = result.events
    downs = log[log.event == "node_down"]
    assert len(downs) > 0
    hit = 0  # jobs that landed on a failed node and ended before the horizon
    for _, down in downs.iterrows():
        node, t0 = down.nodes, down.t_s
        ups = log[(log.event == "node_up") & (log.nodes == node) & (log.t_s > t0)]
        t1 = ups.t_s.min() if len(ups) else float("inf")
        landed = log[(log.event == "start") & (log.nodes == node) & (log.t_s > t0) & (log.t_s < t1)]
        for row, start in landed.iterrows():
            after = log.loc[row:]  # in log order: a job can fail and land again at one instant
            ends = after[
                (after.job_id == start.job_id) & after.event.isin(["finish", "fail", "preempt"])
            ]
            if ends.empty:  # still running at the horizon
                continue
            end = ends.iloc[0]
            assert end.event == "fail", f"{start.job_id} finished on failed node {node}"
            assert end.lost_s == pytest.approx(
                end.t_s - start.t_s - start.overhead_s
            )  # kept nothing
            assert (
                end.t_s <= start.t_s + start.overhead_s + 100.0
            )  # at the latest when it would have finished
            hit += 1
    assert hit >= 1, "no job landed on a failed node: the case tests nothing"
    assert 0 <= result.summary()["occupancy"] <= 1


def test_per_node_impact_is_reported_in_the_budget_table():
    result = run_tiny(
        [{"job_id": "a", "submit_s": 0, "project": "p", "gpus": 8, "duration_s": 100}],
        policy="fifo",
        budgets=BudgetTree.flat({"p": 1, "q": 1}),
    )
    table = result.budgets.set_index("node")
    assert table.loc["p", "impact"] == 1.0 and math.isnan(
        table.loc["q", "impact"]
    )  # q owed nothing
    assert table.iloc[ROOT]["impact"] == 1.0


def test_share_series_by_hand():
    # p (share 1 of 2) runs 8 GPUs of 8 for the first half hour of a 2-hour run.
    rows = [{"job_id": "a", "submit_s": 0, "project": "p", "gpus": 8, "duration_s": 1800}]
    result = run_tiny(
        rows, policy="fifo", gpus=8, horizon_s=7200, budgets=BudgetTree.flat({"p": 1, "q": 1})
    )
    series = result.share_series(bucket_s=3600).set_index(["node", "t_h"])
    assert series.loc[("p", 0.0), "delivered_share"] == pytest.approx(0.5)
    assert series.loc[("p", 1.0), "delivered_share"] == 0.0
    assert series.loc[("q", 0.0), "delivered_share"] == 0.0
    assert (series["entitled_share"] == 0.5).all()


def test_summary_has_queued_time_and_preemptions_by_kind():
    result = run_tiny(
        [
            {
                "job_id": "u",
                "submit_s": 0,
                "project": "",
                "gpus": 8,
                "duration_s": 500,
                "kind": "other",
                "checkpoint_s": 0,
            },
            {
                "job_id": "f",
                "submit_s": 100,
                "project": "p",
                "gpus": 8,
                "duration_s": 100,
                "kind": "debug",
            },
        ],
        policy="impactful",
        gpus=8,
        horizon_s=2000,
        budgets=BudgetTree.flat({"p": 1}),
    )
    s = result.summary()
    assert s["preemptions_by_kind"] == {"other": 1}
    # u waited 0 s for its first start, then from its preemption at 100 until f finished at 200.
    assert s["queued_s"]["other"]["p50"] == pytest.approx(100.0)
    assert s["wait_s"]["other"]["p50"] == 0.0


@pytest.mark.parametrize("b_submit", [0, 50])
def test_timers_due_at_one_instant_fire_in_the_order_they_were_set(b_submit):
    # a's finish (set when a starts, in the pass at 0), b's patience (set when b is submitted)
    # and c's arrival (set when the previous arrival fires) all fall at t=100. At b_submit=0,
    # b's patience and c's arrival are set before a starts; at 50, after. Either way b is gone
    # before the pass at 100.
    rows = [
        {"job_id": "a", "submit_s": 0, "gpus": 8, "duration_s": 100},
        {
            "job_id": "b",
            "submit_s": b_submit,
            "gpus": 8,
            "duration_s": 100,
            "patience_s": 100 - b_submit,
        },
        {"job_id": "c", "submit_s": 100, "gpus": 8, "duration_s": 100},
    ]
    log = run_tiny(rows).events
    at_100 = log[log.t_s == 100][["event", "job_id"]].values.tolist()
    if b_submit == 0:
        assert at_100 == [["withdraw", "b"], ["submit", "c"], ["finish", "a"], ["start", "c"]]
    else:
        assert at_100 == [["finish", "a"], ["withdraw", "b"], ["submit", "c"], ["start", "c"]]


def _reserve_job(i, t, p, g, kind, duration=5000.0):
    return {
        "job_id": i,
        "submit_s": t,
        "project": p,
        "gpus": g,
        "duration_s": duration,
        "kind": kind,
        "min_runtime_s": 28800,
        "checkpoint_s": 0,
    }


def _starts_and_preempts(log):
    cols = ["t_s", "event", "job_id", "nodes", "detail"]
    return [
        tuple(r) for r in log[log.event.isin(["start", "preempt"])][cols].itertuples(index=False)
    ]


def test_funded_work_borrows_the_idle_reserve_unprotected_and_yields_it_to_debug_work_at_once():
    # 2 nodes; node 1 is the reserve (reserve_min_nodes=1). t takes node 0; t2 finds no room off
    # the reserve and borrows node 1, unprotected although it asks for 8 h; unallocated u finds
    # no room. Debug d preempts the borrower at once (before any unallocated work, there is
    # none running); t2 comes back to node 1 when d ends, ahead of u (funded first).
    rows = [
        _reserve_job("t", 0, "p", 8, "training"),
        _reserve_job("t2", 5, "p", 8, "training"),
        _reserve_job("u", 6, "", 8, "other"),
        _reserve_job("d", 20, "p", 8, "debug", duration=100.0),
    ]
    tree = BudgetTree.flat({"p": 1})
    knobs = {"reserve_min_nodes": 1}
    log = run_tiny(
        rows, policy="impactful", gpus=16, budgets=tree, horizon_s=1000, policy_knobs=knobs
    ).events
    assert _starts_and_preempts(log) == [
        (0.0, "start", "t", "0", ""),
        (5.0, "start", "t2", "1", ""),
        (20.0, "preempt", "t2", "1", f"by=d; {RESERVE_REASON}"),
        (20.0, "start", "d", "1", ""),
        (120.0, "start", "t2", "1", ""),
    ]
    # Below reserve_min_nodes (8 by default) a 2-node cluster keeps no reserve: t2 is protected
    # on node 1 and the debug job waits for a node to end.
    small = run_tiny(rows, policy="impactful", gpus=16, budgets=tree, horizon_s=6000).events
    assert _starts_and_preempts(small)[:3] == [
        (0.0, "start", "t", "0", ""),
        (5.0, "start", "t2", "1", ""),
        (5000.0, "start", "d", "0", ""),
    ]


def test_a_job_larger_than_the_nodes_off_the_reserve_runs_on_it_with_its_contract():
    # 8 nodes, node 7 is the reserve. The 64-GPU gang g needs all 8 nodes: it starts at once,
    # protected, and the debug job d waits for it rather than preempting it.
    rows = [
        _reserve_job("g", 0, "p", 64, "training"),
        _reserve_job("d", 10, "p", 8, "debug", duration=100.0),
    ]
    log = run_tiny(
        rows, policy="impactful", gpus=64, budgets=BudgetTree.flat({"p": 1}), horizon_s=6000
    ).events
    assert _starts_and_preempts(log) == [
        (0.0, "start", "g", "0,1,2,3,4,5,6,7", ""),
        (5000.0, "start", "d", "0", ""),
    ]


def test_fairshare_reserves_the_soonest_nodes_for_the_blocked_gang_and_backfills_only_short_jobs():
    # 2 nodes. a (8 GPUs, ends at 1000) and b (4 GPUs, ends at 3000) run; the gang g (16 GPUs)
    # is first in line and reserves both nodes from 3000, when b ends. long (4 GPUs, 5000 s)
    # would hold node 1 past 3000: it waits. short (4 GPUs, 500 s) ends by then: it backfills.
    def job(i, t, g, duration):
        return {
            "job_id": i,
            "submit_s": t,
            "project": "p",
            "gpus": g,
            "duration_s": duration,
            "kind": "training",
        }

    rows = [
        job("a", 0, 8, 1000),
        job("b", 0, 4, 3000),
        job("g", 10, 16, 100),
        job("long", 20, 4, 5000),
        job("short", 30, 4, 500),
    ]
    tree = BudgetTree.flat({"p": 1})
    log = run_tiny(rows, policy="fairshare", gpus=16, budgets=tree, horizon_s=9000).events
    assert _starts_and_preempts(log) == [
        (0.0, "start", "a", "0", ""),
        (0.0, "start", "b", "1", ""),
        (30.0, "start", "short", "1", ""),
        (3000.0, "start", "g", "0,1", ""),
        (3100.0, "start", "long", "0", ""),
    ]
    without = run_tiny(
        rows,
        policy="fairshare",
        gpus=16,
        budgets=tree,
        horizon_s=9000,
        policy_knobs={"backfill_reservation": False},
    ).events
    starts = without[without.event == "start"]
    assert starts.set_index("job_id").t_s.to_dict() == {
        "a": 0.0,
        "b": 0.0,
        "long": 20.0,
        "short": 1000.0,
        "g": 5020.0,
    }


def test_the_event_frame_of_a_log_has_the_values_and_dtypes_of_its_rows():
    from impactlab.sim.events import EVENT_DTYPES, EventLog

    rows = [
        Event(0.0, "submit", "a", 8, "", "", 0.0, 0.0),
        Event(1.5, "start", "a", 16, "0,1", "", 30.0, 0.0),
        Event(2.0, "preempt", "a", 16, "0,1", "by=b; reason", 0.0, 0.5),
    ]
    log = EventLog()
    for row in rows:
        for append, value in zip(log.appends, row):
            append(value)
    frame = events_frame(log)
    pd.testing.assert_frame_equal(frame, events_frame(rows))
    expected = {name: np.dtype(dtype) for name, dtype in EVENT_DTYPES.items()}
    assert frame.dtypes.to_dict() == events_frame(rows).dtypes.to_dict() == expected
    assert frame.loc[2, "detail"] == "by=b; reason" and frame["gpus"].tolist() == [8, 16, 16]
    empty = events_frame(EventLog())
    assert len(empty) == 0 and empty.dtypes.to_dict() == frame.dtypes.to_dict()


def test_jobs_started_in_a_pass_move_the_search_version_only_once_time_moves_on():
    """A lane whose scan failed is skipped while the state it failed in holds. Jobs started at
    an instant are no victims until time moves on, so a second pass at the same instant (after a
    pass that preempted) sees the same version, and the first pass at a later instant a new one."""
    searches = Searches()
    searches.begin_pass(100.0)
    searches.changed()  # a funded job starts at 100
    started = searches.version
    searches.begin_pass(100.0)  # the same instant: it is no victim yet
    assert searches.version == started
    searches.begin_pass(130.0)  # now it is one
    assert searches.version == started + 1
    searches.begin_pass(160.0)  # nothing started since
    assert searches.version == started + 1
