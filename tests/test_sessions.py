"""Interactive sessions as sessions: preempting one ends it (a kill), its user may submit it
again, a what-if restores it, and a per-kind cap may protect it longer. Small cases by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import run_tiny
from test_latency import events_of, low_then_urgent

from impactlab import BudgetTree
from impactlab.analysis.metrics import KIND_COLUMNS
from impactlab.cli import main
from impactlab.inputs.trace import validate_trace
from impactlab.policies.impactful import Impactful
from impactlab.sim.events import jobs_from_trace

H = 3600.0


def sessions(**config):
    """Legacy: session V (8 GPUs, 1000 s) runs from 0 and is preempted by urgent P (500 s) at 100."""
    return run_tiny(
        low_then_urgent(kind="interactive"), policy="legacy", horizon_s=3000.0, **config
    )


def test_a_preempted_session_ends_and_is_not_requeued():
    result = sessions(preempted_sessions="end")
    # its progress is gone (lost 100 s); the kill records the 1000 s of session it did not have
    assert events_of(result, "V") == [
        (0.0, "submit", 0, 0),
        (0.0, "start", 0, 0),
        (100.0, "preempt", 0, 100.0),
        (100.0, "kill", 0, 1000.0),
    ]
    row = result.jobs.set_index("job_id").loc["V"]
    assert (row.state, row.end_s, row.kills, row.queued_s) == ("killed", 100.0, 1, 0.0)
    summary = result.summary()
    assert summary["sessions_killed"] == 1 and summary["sessions_killed_share"] == 1.0
    assert summary["session_lost_gpu_hours"] == pytest.approx(8 * 100 / H)
    assert summary["session_cut_gpu_hours"] == pytest.approx(8 * 1000 / H)
    assert summary["resubmits"] == 0 and summary["resubmit_wait_s"]["n"] == 0


def test_a_killed_session_resubmitted_runs_again_from_the_start():
    result = sessions(
        preempted_sessions="end", session_resubmit_share=1.0, session_resubmit_delay_s=200.0
    )
    # back at 300, it waits for P to end at 600 and reruns all 1000 s after the restart overhead
    assert events_of(result, "V")[3:] == [
        (100.0, "kill", 0, 1000.0),
        (300.0, "resubmit", 0, 0),
        (600.0, "start", 60.0, 0),
        (1660.0, "finish", 0, 0),
    ]
    row = result.jobs.set_index("job_id").loc["V"]
    assert (row.state, row.kills, row.resubmits) == ("finished", 1, 1)
    assert row.queued_s == pytest.approx(
        300.0
    )  # from its resubmission to its start; the time away is not queued
    summary = result.summary()
    assert summary["session_cut_gpu_hours"] == 0.0  # it was had after all
    assert summary["resubmit_wait_s"]["p50"] == 300.0 and summary["resubmits"] == 1
    # V wants its 8 GPUs over [0, 1660) but not while its user is away (100-300 s); P over
    # [100, 600): 8 x (1460 + 500) GPU-seconds of the 8 x 3000 the cluster has
    assert summary["requested_ratio"] == pytest.approx(1960 / 3000)


def test_a_restorable_session_is_requeued_with_all_its_progress():
    result = sessions(preempted_sessions="restore")
    assert events_of(result, "V")[2:] == [
        (100.0, "preempt", 0, 0.0),
        (100.0, "requeue", 0, 0),
        (600.0, "start", 60.0, 0),
        (1560.0, "finish", 0, 0),
    ]
    assert result.summary()["sessions_killed"] == 0


def test_requeue_mode_treats_a_session_as_any_job():
    rows = low_then_urgent(kind="interactive")
    rows[0]["checkpoint_s"] = float("inf")
    result = run_tiny(rows, policy="legacy", horizon_s=3000.0, preempted_sessions="requeue")
    assert events_of(result, "V")[2:] == [
        (100.0, "preempt", 0, 100.0),
        (100.0, "requeue", 0, 0),
        (600.0, "start", 60.0, 0),
        (1660.0, "finish", 0, 0),
    ]


def test_only_interactive_jobs_are_sessions():
    result = run_tiny(
        low_then_urgent(kind="training"),
        policy="legacy",
        horizon_s=3000.0,
        preempted_sessions="end",
    )
    assert "kill" not in set(result.events.event)


def test_the_per_kind_table_counts_kills_and_preemptions_by_kind():
    table = sessions(preempted_sessions="end").by_kind().set_index("kind")
    assert list(table.columns) == ["run", "policy", *KIND_COLUMNS[1:]]
    session, debug = table.loc["interactive"], table.loc["debug"]
    assert (session.jobs, session.ran, session.preemptions, session.killed, session.finished) == (
        1,
        1,
        1,
        1,
        0,
    )
    assert session.killed_share == 1.0 and session.preempted_share == 1.0
    assert session.gpu_hours == pytest.approx(8 * 100 / H)
    assert session.cut_gpu_hours == pytest.approx(8 * 1000 / H)
    assert (debug.jobs, debug.finished, debug.killed, debug.wait_p90_s) == (1, 1, 0, 0.0)
    assert debug.gpu_hours == pytest.approx(8 * 500 / H)


def test_interactive_sessions_can_be_protected_longer_than_other_work():
    row = {"submit_s": 0, "gpus": 1, "duration_s": 1e5, "min_runtime_s": 20 * H, "project": "p"}
    trace = validate_trace(
        pd.DataFrame(
            [
                {**row, "job_id": "s", "kind": "interactive"},
                {**row, "job_id": "t", "kind": "training"},
            ]
        )
    )
    tree = BudgetTree.flat({"p": 1})
    s, t = jobs_from_trace(trace, tree, 8)
    policy = Impactful(cap_hours=8.0, cap_hours_interactive=24.0)
    assert (policy.contract_of(s), policy.contract_of(t)) == (20 * H, 8 * H)
    assert Impactful(cap_hours=8.0).contract_of(s) == 8 * H  # none: the common cap


def test_the_cli_reports_killed_sessions_in_json_and_in_the_table(capsys):
    args = ["simulate", "--policy", "impactful", "--gpus", "16", "--days", "2", "--seed", "3"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert isinstance(summary["sessions_killed"], int)
    assert set(summary["by_kind"]["interactive"]) == set(KIND_COLUMNS[1:])
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "sessions_killed" in text and "per kind" in text and "interactive" in text
