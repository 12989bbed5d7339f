"""Repairs and requeues stated as assertions (not left to internal checks that raise), and the
reporting window's counts computed by hand (docs/model.md sections 2 and 7)."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import DAY_S, run_tiny

from impactlab import BudgetTree, HealthConfig, SimConfig, validate_trace
from impactlab.analysis.metrics import Window, summarise
from impactlab.sim.events import Event, events_frame

approx = pytest.approx


def starts_by_node(log: pd.DataFrame) -> dict[tuple[float, str], list[str]]:
    """(time, node) -> jobs started there then; a gang counts on each of its nodes."""
    out: dict[tuple[float, str], list[str]] = {}
    for r in log[log.event == "start"].itertuples():
        for n in r.nodes.split(","):
            out.setdefault((r.t_s, n), []).append(r.job_id)
    return out


# ----- a repaired node is back in service ---------------------------------------------------------
@pytest.mark.parametrize("repair", ["automatic", "manual"])
@pytest.mark.parametrize("policy", ["fifo", "impactful"])
def test_a_repaired_node_takes_work_at_once_when_jobs_are_waiting(policy, repair):
    # Two nodes and far more whole-node work than they can do: whenever a node comes back, a
    # waiting job starts on it at that instant.
    rows = [
        {
            "job_id": f"j{i:03d}",
            "submit_s": float(i),
            "project": "p",
            "gpus": 8,
            "duration_s": 1800.0,
            "min_runtime_s": 0.0,
        }
        for i in range(200)
    ]
    health = HealthConfig(
        mtbf_hours=4.0,
        repair=repair,
        human_fraction=0.0,
        auto_repair_hours=1.0,
        human_repair_hours=1.0,
        detect_hours=0.5,
    )
    log = run_tiny(
        rows,
        policy=policy,
        gpus=16,
        horizon_s=DAY_S,
        budgets=BudgetTree.flat({"p": 1}),
        health=health,
        seed=3,
        policy_knobs={"interactive_reserve": 0.0} if policy == "impactful" else {},
    ).events
    ups = log[log.event == "node_up"]
    assert len(ups) >= 3, "too few repairs to say anything"
    started = starts_by_node(log)
    for up in ups.itertuples():
        assert started.get((up.t_s, up.nodes)), (
            f"node {up.nodes} repaired at {up.t_s} but given no work"
        )


# ----- a FIFO job hit by a failure keeps its place -------------------------------------------------
def first_failure(health: HealthConfig, seed: int, nodes: int = 1) -> float:
    """When the first node fails under ``health`` (failure times do not depend on the trace)."""
    probe = run_tiny(
        [{"job_id": "probe", "submit_s": 0.0, "gpus": 1, "duration_s": 1.0}],
        gpus=8 * nodes,
        horizon_s=DAY_S,
        health=health,
        seed=seed,
    ).events
    downs = probe[probe.event == "node_down"]
    assert len(downs), "no failure in a day"
    return float(downs.t_s.iloc[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fifo_job_hit_by_a_failure_restarts_ahead_of_jobs_submitted_after_it(seed):
    # One node. a (submitted at 0) runs until the node fails; b and c, submitted later, wait.
    # After the repair a starts again before them, then b, then c.
    health = HealthConfig(
        mtbf_hours=2.0, repair="automatic", human_fraction=0.0, auto_repair_hours=0.5
    )
    t_fail = first_failure(health, seed)
    rows = [
        {
            "job_id": "a",
            "submit_s": 0.0,
            "gpus": 8,
            "duration_s": t_fail + 5000,
            "checkpoint_s": 0.0,
        },
        {"job_id": "b", "submit_s": 1.0, "gpus": 8, "duration_s": 10.0},
        {"job_id": "c", "submit_s": 2.0, "gpus": 8, "duration_s": 10.0},
    ]
    log = run_tiny(
        rows, policy="fifo", gpus=8, horizon_s=t_fail + 3 * DAY_S, health=health, seed=seed
    ).events
    fails = log[log.event == "fail"]
    assert fails[["t_s", "job_id"]].values.tolist()[:1] == [[t_fail, "a"]]
    after = log[(log.event == "start") & (log.t_s > t_fail)].job_id.tolist()
    assert after[:1] == ["a"]
    assert [j for j in after if j != "a"][:2] == ["b", "c"]


# ----- exact counts in a reporting window ----------------------------------------------------------
def hand_health_log() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Six 8-GPU nodes, window [1000, 6000), run to 6000.

    node 3: down 200, up 800 (human)            -> before the window: nothing counted
    node 4: down 100, up 1000 (automatic)       -> repair at t0: counted
    node 0: down 500, up 1500 (automatic)       -> repair counted, failure not
            down 5500, still down at the end    -> failure counted
    node 5: down 1000, up 2500 (human)          -> failure at t0 and repair counted
    node 1: down 2000, up 3000 (human)          -> both counted
    node 2: down 4500, still down at the end    -> failure counted

    Jobs (8 GPUs): y fails at 200 (before the window), restarts at 900 on node 2 and finishes
    at 1100; w starts at 600 on node 5, fails at 1000 losing 400 s (all before t0), restarts at
    1100 on node 2 with 60 s overhead and finishes at 2000; x starts at 1200 on node 1, fails
    at 2000 losing 300 s, restarts at 2100 on node 0 with 60 s overhead and finishes at 3000.
    """
    E = Event
    log = [
        E(0, "submit", "y", 8, "", "", 0, 0),
        E(0, "start", "y", 8, "3", "", 0, 0),
        E(100, "node_down", "", 8, "4", "failure; repair=automatic", 0, 0),
        E(200, "node_down", "", 8, "3", "failure; repair=manual", 0, 0),
        E(200, "fail", "y", 8, "3", "node 3 failed", 0, 200),
        E(200, "requeue", "y", 8, "", "", 0, 0),
        E(500, "node_down", "", 8, "0", "failure; repair=automatic", 0, 0),
        E(600, "submit", "w", 8, "", "", 0, 0),
        E(600, "start", "w", 8, "5", "", 0, 0),
        E(800, "node_up", "", 8, "3", "repair=human", 0, 0),
        E(900, "start", "y", 8, "2", "", 60, 0),
        E(1000, "node_up", "", 8, "4", "repair=automatic", 0, 0),
        E(1000, "node_down", "", 8, "5", "failure; repair=automatic", 0, 0),
        E(1000, "fail", "w", 8, "5", "node 5 failed", 0, 400),
        E(1000, "requeue", "w", 8, "", "", 0, 0),
        E(1100, "finish", "y", 8, "2", "", 0, 0),
        E(1100, "start", "w", 8, "2", "", 60, 0),
        E(1200, "submit", "x", 8, "", "", 0, 0),
        E(1200, "start", "x", 8, "1", "", 0, 0),
        E(1500, "node_up", "", 8, "0", "repair=automatic", 0, 0),
        E(2000, "finish", "w", 8, "2", "", 0, 0),
        E(2000, "node_down", "", 8, "1", "failure; repair=automatic", 0, 0),
        E(2000, "fail", "x", 8, "1", "node 1 failed", 0, 300),
        E(2000, "requeue", "x", 8, "", "", 0, 0),
        E(2100, "start", "x", 8, "0", "", 60, 0),
        E(2500, "node_up", "", 8, "5", "repair=human", 0, 0),
        E(3000, "finish", "x", 8, "0", "", 0, 0),
        E(3000, "node_up", "", 8, "1", "repair=human", 0, 0),
        E(4500, "node_down", "", 8, "2", "failure; repair=automatic", 0, 0),
        E(5500, "node_down", "", 8, "0", "failure; repair=automatic", 0, 0),
    ]
    trace = validate_trace(
        pd.DataFrame(
            [
                {"job_id": "y", "submit_s": 0, "gpus": 8, "duration_s": 900},
                {"job_id": "w", "submit_s": 600, "gpus": 8, "duration_s": 840},
                {"job_id": "x", "submit_s": 1200, "gpus": 8, "duration_s": 1540},
            ]
        )
    )
    return events_frame(log), trace


def test_repairs_failures_and_failure_losses_in_the_window_by_hand():
    events, trace = hand_health_log()
    summary, _, _ = summarise(
        events,
        trace,
        BudgetTree.from_dict({"name": "root"}),
        Window(1000.0, 6000.0, 48),
        gpus_per_node=8,
        horizon_s=6000.0,
    )
    assert (
        summary["node_failures"] == 4
    )  # node 5 at 1000, node 1 at 2000, node 2 at 4500, node 0 at 5500
    assert summary["auto_repairs"] == 2  # node 4 at 1000, node 0 at 1500
    assert summary["human_repairs"] == 2  # node 5 at 2500, node 1 at 3000
    assert summary["jobs_hit"] == 2  # w (at 1000) and x (at 2000); y was hit before the window
    # x's lost 1700-2000 and overhead 2100-2160, w's overhead 1100-1160; w's loss (600-1000) and
    # y's overhead (900-960) fall before the window.
    assert summary["failure_lost_gpu_hours"] == approx(8 * (300 + 60 + 60) / 3600)
    # down inside the window: node 0 0-500 and 5500-6000, node 5 1000-2500, node 1 2000-3000,
    # node 2 4500-6000 (node 4 came back at 1000)
    down_s = 500 + 500 + 1500 + 1000 + 1500
    assert summary["availability"] == approx(1 - 8 * down_s / (48 * 5000))


# ----- warm-up filtering ---------------------------------------------------------------------------
def test_waits_count_exactly_the_jobs_submitted_from_the_warm_up_on():
    # One GPU, FIFO, warm-up 1000 s of a 3000 s run. e1 runs 0-1200; e2 (submitted 900, before
    # the window) waits 300 s and runs 1200-1500: its wait is left out though it starts inside.
    # In the window: in1 (submitted exactly at 1000) waits 500, in2 (1300) waits 300, in3
    # (2500) and late (2950, still running at the end) wait 0.
    rows = [
        {"job_id": "e1", "submit_s": 0, "gpus": 1, "duration_s": 1200},
        {"job_id": "e2", "submit_s": 900, "gpus": 1, "duration_s": 300},
        {"job_id": "in1", "submit_s": 1000, "gpus": 1, "duration_s": 100, "kind": "debug"},
        {"job_id": "in2", "submit_s": 1300, "gpus": 1, "duration_s": 400},
        {"job_id": "in3", "submit_s": 2500, "gpus": 1, "duration_s": 100},
        {"job_id": "late", "submit_s": 2950, "gpus": 1, "duration_s": 100},
    ]
    result = run_tiny(
        rows, policy="fifo", gpus=1, gpus_per_node=1, horizon_s=3000.0, warmup_days=1000 / DAY_S
    )
    assert result.jobs.set_index("job_id").loc["e2", "wait_s"] == 300  # measured, then left out
    s = result.summary()
    assert s["jobs"] == 6  # every job submitted before the end, warm-up included
    assert s["report_from_days"] == approx(1000 / DAY_S)
    waits = s["wait_s"]
    assert waits["all"] == approx(
        {"p50": 150.0, "p90": 440.0, "p99": 494.0, "n": 4}
    )  # 0, 0, 300, 500
    assert waits["debug"] == approx({"p50": 500.0, "p90": 500.0, "p99": 500.0, "n": 1})
    assert waits["other"]["n"] == 3 and waits["other"]["p50"] == 0.0
    assert s["queued_s"]["all"]["n"] == 4 and s["queued_s"]["all"]["p50"] == approx(150.0)
    assert s["wait_by_size_s"]["1"]["n"] == 4
    # occupancy in [1000, 3000): e1 200, e2 300, in1 100, in2 400, in3 100, late 50 of 2000 s
    assert s["occupancy"] == approx(1150 / 2000)


@pytest.mark.parametrize(
    "policy, knobs, days, warmup_days",
    [
        ("impactful", {"window_days": 0.25}, 2.0, 0.25),  # the fair-share window
        ("impactful", {"window_days": 3.0}, 2.0, 1.0),  # at most half the run
        ("fifo", {}, 30.0, 7.0),  # no window: 7 days
        ("fifo", {}, 4.0, 2.0),
    ],
)
def test_the_default_warm_up_is_the_fair_share_window_at_most_half_the_run(
    policy, knobs, days, warmup_days
):
    config = SimConfig(policy=policy, gpus=8, days=days, policy_knobs=knobs)
    assert config.warmup_s == approx(warmup_days * DAY_S)
