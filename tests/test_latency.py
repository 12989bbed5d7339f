"""Latencies of a real scheduler (docs/model.md section 8): the scheduling cycle, the start-up
of every attempt and the preemption grace period, on small cases computed by hand."""

from __future__ import annotations

import pytest
from helpers import run_tiny

from impactlab.sim.engine import Timing
from impactlab.sim.grace import GraceBook


def events_of(result, job_id: str) -> list[tuple[float, str, float, float]]:
    """(t_s, event, overhead_s, lost_s) of one job."""
    log = result.events
    rows = log[log.job_id == job_id]
    return list(zip(rows.t_s, rows.event, rows.overhead_s, rows.lost_s))


def low_then_urgent(kind: str = "training") -> list[dict]:
    """Legacy: V (priority 0, 8 GPUs, 1000 s, checkpoints every second) runs from 0; urgent P
    (8 GPUs, 500 s) arrives at 100 and preempts it."""
    return [
        {
            "job_id": "V",
            "submit_s": 0.0,
            "gpus": 8,
            "duration_s": 1000.0,
            "priority": 0,
            "kind": kind,
            "preemptible": True,
            "checkpoint_s": 0.0,
        },
        {
            "job_id": "P",
            "submit_s": 100.0,
            "gpus": 8,
            "duration_s": 500.0,
            "priority": 3,
            "kind": "debug",
            "preemptible": True,
            "checkpoint_s": 0.0,
        },
    ]


def test_with_a_cycle_a_job_starts_at_the_next_multiple_of_it():
    rows = [
        {"job_id": "a", "submit_s": 10.0, "gpus": 1, "duration_s": 100.0},
        {"job_id": "b", "submit_s": 60.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_tiny(rows, cycle_s=30.0)
    assert events_of(result, "a") == [
        (10.0, "submit", 0, 0),
        (30.0, "start", 0, 0),
        (130.0, "finish", 0, 0),
    ]
    assert events_of(result, "b")[1] == (60.0, "start", 0, 0)  # submitted on a boundary: no wait
    assert result.jobs.set_index("job_id")["wait_s"].to_dict() == {"a": 20.0, "b": 0.0}


def test_without_a_cycle_the_pass_follows_every_change():
    rows = [{"job_id": "a", "submit_s": 10.0, "gpus": 1, "duration_s": 100.0}]
    assert events_of(run_tiny(rows), "a")[1] == (10.0, "start", 0, 0)


def test_every_start_pays_the_start_up_which_is_occupancy_but_not_utilization():
    rows = [{"job_id": "a", "submit_s": 0.0, "gpus": 8, "duration_s": 100.0, "util": 1.0}]
    result = run_tiny(rows, startup_s=20.0, horizon_s=200.0)
    assert events_of(result, "a") == [
        (0.0, "submit", 0, 0),
        (0.0, "start", 20.0, 0),
        (120.0, "finish", 0, 0),
    ]
    summary = result.summary()
    assert summary["occupancy"] == pytest.approx(120 / 200)
    assert summary["utilization"] == pytest.approx(100 / 200)
    assert summary["wait_s"]["all"]["p50"] == 0.0  # the wait ends at the start, before the start-up


def test_a_victim_in_its_grace_period_at_the_end_holds_its_gpus_and_is_not_queued():
    result = run_tiny(low_then_urgent(), policy="legacy", grace_s=30.0, horizon_s=120.0)
    state = result.jobs.set_index("job_id")["state"]
    assert (state["V"], state["P"]) == ("running", "queued")
    assert result.summary()["queued_at_end"] == 1  # P: the queue the log replays agrees
    # V's preemption is at 100, in the window, though its GPUs are released only after it
    by_kind = result.preemptions_by_kind().set_index("kind")["preemptions"]
    assert by_kind["training"] == result.summary()["preemptions"] == 1
    series = result.preemption_series(bucket_s=60.0)
    assert series.groupby("t_h")["preemptions"].sum().tolist() == [0, 1]


def test_a_victim_keeps_its_gpus_for_the_grace_period_and_the_preemptor_starts_after():
    # P preempts V at 100; V holds its GPUs until 130, when P starts. V restarts when P ends
    # (630) with the restart overhead (60) and its remaining 900 s: it finishes at 1590.
    result = run_tiny(low_then_urgent(), policy="legacy", grace_s=30.0, horizon_s=2000.0)
    assert events_of(result, "V") == [
        (0.0, "submit", 0, 0),
        (0.0, "start", 0, 0),
        (100.0, "preempt", 0, 0),
        (130.0, "requeue", 0, 0),
        (630.0, "start", 60.0, 0),
        (1590.0, "finish", 0, 0),
    ]
    assert events_of(result, "P") == [
        (100.0, "submit", 0, 0),
        (130.0, "start", 0, 0),
        (630.0, "finish", 0, 0),
    ]
    summary = result.summary()
    assert summary["wait_s"]["debug"]["p50"] == 30.0
    assert summary["occupancy"] == pytest.approx(1590 / 2000)  # V's grace is held
    assert summary["utilization"] == pytest.approx(
        (100 + 500 + 900) / 2000
    )  # ... and makes no progress
    assert summary["lost_gpu_hours"] == pytest.approx(
        8 * (30 + 60) / 3600
    )  # grace + restart overhead
    assert summary["preemptions"] == 1


def test_all_latencies_add_up_on_one_preemption():
    # Cycle 30: P (submitted at 100) is judged at 120 and starts after the grace, at 150, paying
    # 20 s of start-up; V restarts when P ends (150 + 20 + 500 = 670, on a boundary at 690).
    result = run_tiny(
        low_then_urgent(),
        policy="legacy",
        cycle_s=30.0,
        startup_s=20.0,
        grace_s=30.0,
        horizon_s=3000.0,
    )
    assert events_of(result, "P")[1:] == [(150.0, "start", 20.0, 0), (670.0, "finish", 0, 0)]
    assert events_of(result, "V")[2:5] == [
        (120.0, "preempt", 0, 0),
        (150.0, "requeue", 0, 0),
        (690.0, "start", 80.0, 0),
    ]


def test_a_start_takes_gpus_outside_the_grace_first_and_waits_only_for_the_rest():
    book = GraceBook(nodes=2)
    book.grant(victim=7, nodes=(0,), per_node=4, release_s=130.0)
    free_after = [2, 8]  # node 0: 4 free before the grace + 4 in grace; a 6-GPU job just took 6
    assert book.claim(1, (0,), free_after) == 130.0  # 2 of its 6 are in grace
    assert [(g.release_s, g.gpus) for g in book.on_node[0]] == [(130.0, 2)]
    assert book.claim(2, (1,), free_after) == -float("inf")  # node 1 has no grace
    book.unclaim(1, {7: False})  # job 1 gives up: the two GPUs it took from the grant return
    assert {g.release_s for g in book.on_node[0]} == {130.0} and sum(
        g.gpus for g in book.on_node[0]
    ) == 4
    book.release(7, (0,))
    assert book.on_node[0] == []


def test_the_engine_defaults_are_the_instant_model():
    assert Timing() == Timing(cycle_s=0.0, startup_s=0.0, grace_s=0.0)
