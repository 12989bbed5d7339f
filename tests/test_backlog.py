"""Backlogs are visible and controllable: the queue at the end, a growing backlog flagged (and
warned about), and a declared patience for replays whose trace records none."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
from helpers import INSTANT

import impactlab as il
from impactlab.analysis.metrics import Window, backlog, queue_lengths
from impactlab.base.units import HOUR_S
from impactlab.inputs.traces.reshape import default_patience


def overloaded(n: int = 400) -> pd.DataFrame:
    """An 8-GPU, 1 h job every 15 min on 16 GPUs: 4 arrive per hour, 2 finish per hour."""
    return pd.DataFrame(
        {
            "job_id": [f"j{i:03d}" for i in range(n)],
            "submit_s": np.arange(n) * 900.0,
            "gpus": 8,
            "duration_s": HOUR_S,
            "project": "a",
        }
    )


def test_queue_lengths_count_submits_requeues_starts_and_withdrawals():
    events = pd.DataFrame(
        {
            "t_s": [0.0, 0.0, 5.0, 7.0, 9.0, 9.0],
            "event": ["submit", "submit", "start", "requeue", "withdraw", "finish"],
        }
    )
    # after 0: 2 queued; after 5: 1; after 7: 2; after 9: 1 (finish does not move the queue)
    assert queue_lengths(events, np.array([-1.0, 0.0, 6.0, 8.0, 9.0, 100.0])).tolist() == [
        0,
        2,
        1,
        2,
        1,
        1,
    ]


def test_an_overloaded_replay_without_patience_is_flagged_with_its_queue(caplog):
    result = il.simulate(
        il.SimConfig(policy="fifo", gpus=16, days=4, **INSTANT), trace=overloaded()
    )
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        summary = result.summary()
    # the queue grows by 4 - 2 = 2 jobs an hour: 2 x 48 at the window's start (day 2), 2 x 96 at the end
    assert (summary["queued_at_start"], summary["queued_at_end"]) == (96, 192)
    assert summary["backlog_growing"] and result.metrics()["queued_at_end"] == 192
    # 384 jobs are submitted in the 4 days simulated: half of them are still queued at the end
    assert (
        summary["queue_quarters"] == [96, 120, 144, 168, 192]
        and summary["queued_at_end_share"] == 192 / 384
    )
    assert (
        "fifo: a backlog: 192 jobs (50% of the run's) are still queued at the end (queue over the window: "
        "96 -> 120 -> 144 -> 168 -> 192)" in caplog.text
    )


def test_a_declared_patience_bounds_the_backlog(caplog):
    config = il.SimConfig(policy="fifo", gpus=16, days=4, patience_hours=6, **INSTANT)
    result = il.simulate(config, trace=overloaded())
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        summary = result.summary()
    # a job that waited 6 h is withdrawn, so at most 6 h x 4 arrivals an hour are ever queued
    assert (
        summary["queued_at_end"] <= 24
        and not summary["backlog_growing"]
        and summary["withdrawn"] > 100
    )
    jobs = result.jobs
    gone = jobs[jobs["state"] == "withdrawn"]
    assert np.allclose(gone["end_s"] - gone["submit_s"], 6 * HOUR_S)


def test_default_patience_fills_only_jobs_that_record_none():
    trace = il.validate_trace(overloaded(3).assign(patience_s=[60.0, math.inf, math.inf]))
    out = default_patience(trace, 3600.0)
    assert out["patience_s"].tolist() == [60.0, 3600.0, 3600.0]
    assert "patience 1 h for the 2 of 3 jobs that recorded none" in out.attrs["reshape"][-1]
    with pytest.raises(ValueError, match="patience_s > 0"):
        default_patience(trace, 0)


def test_patience_applies_to_replays_only_not_to_the_generator():
    base = il.SimConfig(policy="fifo", gpus=16, days=1)
    synthetic = il.inputs.workload.prepare(base).trace
    assert il.inputs.workload.prepare(base.with_params(patience_hours=1)).trace.equals(synthetic)


def test_a_steady_queue_is_not_flagged():
    events = pd.DataFrame({"t_s": np.arange(40.0), "event": ["submit", "start"] * 20})
    assert backlog(events, Window(0.0, 40.0, 8), jobs=20) == {
        "queued_at_start": 1,
        "queued_at_end": 0,
        "queued_at_end_share": 0.0,
        "queue_quarters": [1, 1, 1, 1, 0],
        "backlog_growing": False,
    }
