"""Results a user can trust: impact on useful work next to impact, preemptions per job, the
default contract of a trace that declares none, and the warnings (thrashing, a backlog, impact
counting work thrown away) firing for every policy alike, and only past their thresholds."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pandas as pd
import pytest
from helpers import INSTANT, run_tiny

import impactlab as il
from impactlab.analysis import findings as f
from impactlab.analysis.metrics import Window, lost_to, useful_held_gpu_s, wasted_gpu_s
from impactlab.base.units import HOUR_S
from impactlab.cli import main

CAP = frozenset({"cap_hours", "protect_unallocated"})


def summary(**values) -> dict:
    """A summary with nothing to warn about, then ``values``."""
    quiet = {
        "impact": 0.9,
        "impact_useful": 0.88,
        "preemption_lost_share": 0.01,
        "preemptions_per_job_max": 90,
        "funded_preemptions_per_job_max": 3,
        "most_preempted_funded_job": "j1",
        "queued_at_end": 2,
        "queued_at_end_share": 0.01,
        "queue_quarters": [1, 2, 3, 2, 2],
        "backlog_growing": False,
        "wait_s": {"all": {"p50": 600.0}},
        "withdrawn_funded_share": 0.01,
        "withdrawn_funded_work_share": 0.01,
    }
    return {**quiet, **values}


def codes(s: dict, knobs: frozenset[str] = CAP) -> list[str]:
    return [x.code for x in f.findings(s, "run", knobs)]


# ----- thresholds, on hand-written summaries ----------------------------------------------------
def test_a_quiet_run_has_no_findings():
    """Unallocated backfill preempted 90 times is its contract; what it lost is in the share."""
    assert codes(summary()) == []


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ({"preemption_lost_share": f.LOST_SHARE}, False),
        ({"preemption_lost_share": f.LOST_SHARE + 0.001}, True),
        ({"funded_preemptions_per_job_max": f.PREEMPTIONS_PER_JOB}, False),
        ({"funded_preemptions_per_job_max": f.PREEMPTIONS_PER_JOB + 1}, True),
        ({"preemption_lost_share": math.nan}, False),
    ],
)
def test_thrashing_fires_past_either_threshold(values, fires):
    assert ("thrashing" in codes(summary(**values))) == fires


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ({"queued_at_end_share": f.QUEUED_SHARE}, False),
        ({"queued_at_end_share": f.QUEUED_SHARE + 0.001}, True),
        ({"wait_s": {"all": {"p50": f.MEDIAN_WAIT_S}}}, False),
        ({"wait_s": {"all": {"p50": f.MEDIAN_WAIT_S + 1}}}, True),
        ({"wait_s": {"all": {"p50": None}}}, False),
        ({"backlog_growing": True}, True),
    ],
)
def test_a_backlog_fires_past_either_threshold_whatever_the_trend(values, fires):
    assert ("backlog" in codes(summary(**values))) == fires


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ({"withdrawn_funded_share": f.WITHDRAWN_SHARE}, False),
        ({"withdrawn_funded_share": f.WITHDRAWN_SHARE + 0.001}, True),
        ({"withdrawn_funded_work_share": f.WITHDRAWN_SHARE}, False),
        ({"withdrawn_funded_work_share": f.WITHDRAWN_SHARE + 0.001}, True),
        ({"withdrawn_funded_share": math.nan, "withdrawn_funded_work_share": None}, False),
    ],
)
def test_funded_jobs_giving_up_fire_past_either_threshold(values, fires):
    assert ("gave_up" in codes(summary(**values))) == fires


def test_a_share_near_a_threshold_is_said_with_a_decimal():
    """fairshare on the default scenario: 4.87% of its funded jobs gave up, 14.5% of the work;
    "5% of the funded jobs" next to "warned above 5%" would read as a contradiction."""
    s = summary(
        withdrawn_funded=435, withdrawn_funded_share=0.0487, withdrawn_funded_work_share=0.145
    )
    (found,) = f.findings(s, "fairshare", CAP)
    assert "435 funded jobs (4.9% of the funded jobs, 14% of the funded work" in found.message


def test_jobs_that_gave_up_are_counted_and_said_by_hand():
    """One 8-GPU cluster: a holds it for 2 h; b (4 GPUs, 1 h), c (8 GPUs, 3 h) and the
    unallocated d wait 30 min and give up. Funded: 2 of 3 jobs, (4 + 24) of 44 GPU-hours."""
    rows = [
        {"job_id": "a", "submit_s": 0.0, "gpus": 8, "duration_s": 2 * HOUR_S, "project": "p"},
        {"job_id": "b", "submit_s": 0.0, "gpus": 4, "duration_s": HOUR_S, "project": "p"},
        {"job_id": "c", "submit_s": 0.0, "gpus": 8, "duration_s": 3 * HOUR_S, "project": "q"},
        {"job_id": "d", "submit_s": 0.0, "gpus": 1, "duration_s": HOUR_S, "project": ""},
    ]
    for row in rows:
        row["patience_s"] = math.inf if row["job_id"] == "a" else 1800.0
    result = run_tiny(rows, horizon_s=5 * HOUR_S)
    s = result.summary()
    assert (s["withdrawn"], s["withdrawn_funded"]) == (3, 2)
    assert s["withdrawn_funded_share"] == pytest.approx(2 / 3)
    assert s["withdrawn_funded_work_share"] == pytest.approx(28 / 44)
    assert result.jobs.set_index("job_id").loc[["b", "c", "d"], "wait_s"].tolist() == [1800.0] * 3
    (said,) = [w for w in s["warnings"] if "gave up waiting" in w]
    assert said.startswith("fifo: 2 funded jobs (67% of the funded jobs, 64% of the funded work")
    assert s["warning_codes"] == result.warning_codes  # one code per sentence, in order
    assert result.warning_codes[s["warnings"].index(said)] == "gave_up"
    assert len(s["warning_codes"]) == len(s["warnings"])


def test_unallocated_backfill_giving_up_is_no_warning():
    rows = [
        {"job_id": "a", "submit_s": 0.0, "gpus": 8, "duration_s": 2 * HOUR_S, "project": "p"},
        *(
            {
                "job_id": f"u{i}",
                "submit_s": 60.0 * i,
                "gpus": 1,
                "duration_s": 600.0,
                "project": "",
                "patience_s": 900.0,
            }
            for i in range(5)
        ),
    ]
    s = run_tiny(rows, horizon_s=5 * HOUR_S).summary()
    assert s["withdrawn"] == 5 and s["withdrawn_funded"] == 0
    assert not any("gave up" in w for w in s["warnings"])


def test_a_shrinking_but_large_queue_is_a_backlog():
    """Philly's queue peaked mid-run and then shrank: still most of the run's jobs at the end."""
    s = summary(
        queued_at_end=26_597,
        queued_at_end_share=0.24,
        queue_quarters=[9_000, 60_000, 45_000, 30_000, 26_597],
    )
    (found,) = f.findings(s, "impactful", CAP)
    assert found.message.startswith(
        "impactful: a backlog: 26,597 jobs (24% of the run's) are still queued"
    )
    assert "9,000 -> 60,000 -> 45,000 -> 30,000 -> 26,597" in found.message


def test_the_advice_follows_why_the_most_preempted_job_was_preempted():
    """A job preempted as a borrower of the interactive reserve, or on nodes drained for a gang,
    is spared by those knobs, not by a longer contract: the sentence names them first."""
    knobs = {"cap_hours": 8.0, "interactive_reserve": 0.1, "drain_for_gangs": True}
    reasons = {"interactive reserve": 20, "drain": 10, "fair share": 5}
    thrash = {
        "funded_preemptions_per_job_max": 35,
        "most_preempted_funded_job": "x9",
        "most_preempted_funded_reasons": reasons,
    }
    said = f.findings(summary(**thrash), "impactful", knobs)[0].message
    assert "(by reason: interactive reserve 20, drain 10, fair share 5)" in said
    assert said.index("interactive_reserve") < said.index("drain_for_gangs=False")
    assert said.index("drain_for_gangs=False") < said.index("cap_hours")
    off = f.findings(summary(**thrash), "impactful", {**knobs, "drain_for_gangs": False})
    assert "drain_for_gangs" not in off[0].message


def test_a_runs_reasons_are_counted_from_its_log():
    """Under legacy, b (priority 3) preempts the preemptible a (priority 1) once, at 600 s."""
    rows = [
        {"job_id": "a", "submit_s": 0.0, "gpus": 8, "duration_s": 4 * HOUR_S, "project": "p",
         "priority": 1, "preemptible": True},
        {"job_id": "b", "submit_s": 600.0, "gpus": 8, "duration_s": HOUR_S, "project": "q",
         "priority": 3},
    ]  # fmt: skip
    s = run_tiny(rows, "legacy", horizon_s=6 * HOUR_S).summary()
    assert s["most_preempted_funded_job"] == "a"
    assert s["most_preempted_funded_reasons"] == {"priority": 1}


def test_one_job_is_said_in_the_singular():
    s = summary(
        queued_at_end=1, queued_at_end_share=0.2, withdrawn_funded=1, withdrawn_funded_share=0.5
    )
    backlog, gave_up = (x.message for x in f.findings(s, "fifo", CAP))
    assert backlog.startswith("fifo: a backlog: 1 job (20% of the run's) is still queued")
    assert gave_up.startswith("fifo: 1 funded job (50% of the funded jobs, 1.0% of the funded")
    assert "gave up waiting and was withdrawn" in gave_up and "leave its work out" in gave_up


def test_patience_is_advised_only_where_it_would_change_the_run():
    """``patience_hours`` gives a patience to a replayed trace's jobs that record none: advised
    for such a trace, not once every job has one, nor for the synthetic workload (it has its
    own, and the knob leaves it alone)."""
    advice = "the jobs need a patience (patience_hours)"
    said = {
        no_patience: f.findings(summary(queued_at_end_share=0.2), "fifo", CAP, False, no_patience)
        for no_patience in (False, True)
    }
    assert advice in said[True][0].message and advice not in said[False][0].message
    config = il.SimConfig(policy="fifo", gpus=16, days=4, **INSTANT)
    replayed = il.simulate(config, trace=overloaded()).summary()["warnings"]
    assert any(advice in w for w in replayed)
    patient = il.simulate(config.with_params(patience_hours=24.0), trace=overloaded())
    assert not any(advice in w for w in patient.summary()["warnings"])
    synthetic = il.simulate(il.SimConfig(policy="fifo", gpus=16, days=4, demand=6.0, **INSTANT))
    warned = synthetic.summary()["warnings"]
    assert any("a backlog" in w for w in warned) and not any(advice in w for w in warned)


@pytest.mark.parametrize(
    ("gap", "fires"), [(f.IMPACT_GAP - 0.001, False), (f.IMPACT_GAP + 0.001, True)]
)
def test_impact_counting_thrown_away_work_is_said(gap, fires):
    assert ("impact_gap" in codes(summary(impact=0.95, impact_useful=0.95 - gap))) == fires


def test_the_advice_names_the_knob_that_protects_the_preempted_jobs():
    thrash = {"funded_preemptions_per_job_max": 74, "most_preempted_funded_job": "x9"}
    impactful = f.findings(summary(**thrash), "impactful", CAP)[0].message
    assert "funded job x9 was preempted 74 times" in impactful
    assert "cap_hours" in impactful and "min_runtime_s" in impactful
    assert "none is sure to help" in impactful
    # protecting unallocated work only moves preemptions onto funded jobs: never advised
    assert "protect_unallocated" not in impactful
    # a trace replayed unprotected: no cap binds (every minimum runtime is 0), the contract does
    unprotected = f.Protection(cap_binds=False, trace_runtimes=False, contract="job-length")
    said = f.findings(summary(**thrash), "impactful", {"cap_hours": 8.0}, protection=unprotected)
    assert "contract_default=job-length" in said[0].message and "cap_hours" not in said[0].message
    # each job already protected for its own length: only a cap it exceeds can add
    filled = f.Protection(cap_binds=True, trace_runtimes=False)
    said = f.findings(summary(**thrash), "impactful", {"cap_hours": 8.0}, protection=filled)
    assert "cap_hours, now 8 h" in said[0].message and "min_runtime_s" not in said[0].message
    spent = f.Protection(cap_binds=False, trace_runtimes=False)
    said = f.findings(summary(**thrash), "impactful", {"cap_hours": 8.0}, protection=spent)
    assert said[0].message.endswith("no knob of its policy that would protect them longer")
    one = f.findings(summary(funded_preemptions_per_job_max=1, preemption_lost_share=0.2,
                            most_preempted_funded_job="x9",
                            most_preempted_funded_reasons={"drain": 1, f.DRAINED_STARTS: 1}),
                     "impactful", {"drain_for_gangs": True})[0].message  # fmt: skip
    assert "was preempted 1 time (by reason: drain 1; 1 of its starts was unprotected" in one
    synthetic = f.findings(
        summary(**thrash), "legacy", frozenset(), protection=f.Protection(synthetic=True)
    )[0].message
    assert "opt_out_long, opt_out_short" in synthetic and "preemptible=False" not in synthetic
    legacy = f.findings(summary(**thrash), "legacy", frozenset())[0].message
    assert "preemptible=False" in legacy and "cap_hours" not in legacy
    lost_only = f.findings(
        summary(preemption_lost_share=0.5, funded_preemptions_per_job_max=0), "x", CAP
    )[0]
    assert (
        "50% of the delivered GPU time" in lost_only.message
        and "no funded job was preempted" in lost_only.message
    )


# ----- impact on useful work, by hand -----------------------------------------------------------
def test_useful_time_leaves_out_overhead_and_lost_progress_once_each():
    att = pd.DataFrame(
        {
            "start_s": [0.0, 100.0, 500.0],
            "end_s": [100.0, 400.0, 520.0],
            "overhead_s": [10.0, 60.0, 30.0],
            "lost_s": [30.0, 0.0, 50.0],
            "gpus": [8, 8, 2],
            "ended_by": ["preempt", "finish", "preempt"],
            "restart_after": ["", "preempt", "preempt"],
        }
    )
    window = Window(0.0, 1000.0, 16)
    held = ((att["end_s"] - att["start_s"]) * att["gpus"]).to_numpy()
    # 1: 10 s start-up + 30 s lost; 2: 60 s restart; 3: preempted 20 s in, during its 30 s restart
    assert wasted_gpu_s(att, window).tolist() == [40 * 8, 60 * 8, 20 * 2]
    assert useful_held_gpu_s(att, held, window).tolist() == [60 * 8, 240 * 8, 0.0]
    assert wasted_gpu_s(att, window, "preempt").tolist() == [
        30 * 8,
        60 * 8,
        20 * 2,
    ]  # not the start-up
    assert wasted_gpu_s(att, Window(50.0, 1000.0, 16)).tolist() == [
        30 * 8,
        60 * 8,
        20 * 2,
    ]  # clipped


def test_a_grace_period_during_a_first_start_up_is_lost_to_the_preemption():
    """Preempted 300 s into a 600 s start-up, with a 30 s grace period: all 330 s are wasted,
    and the 30 s of grace are the preemption's (lost_gpu_hours counts them too)."""
    att = pd.DataFrame(
        {
            "start_s": [0.0],
            "end_s": [330.0],
            "overhead_s": [600.0],
            "lost_s": [30.0],
            "gpus": [2],
            "ended_by": ["preempt"],
            "restart_after": [""],
        }
    )
    window = Window(0.0, 1000.0, 8)
    assert wasted_gpu_s(att, window).tolist() == [330 * 2]
    assert wasted_gpu_s(att, window, "preempt").tolist() == [30 * 2]
    assert lost_to(att, "preempt", window) == 30 * 2


def test_without_preemption_or_overhead_useful_impact_is_impact():
    config = il.SimConfig(policy="fifo", gpus=32, days=2, restart_overhead_s=0, startup_s=0)
    result = il.simulate(config)
    budgets = result.budgets
    assert result.metrics()["impact_useful"] == result.metrics()["impact"]
    assert np.allclose(budgets["useful_gpu_s"], budgets["delivered_gpu_s"])


def test_useful_impact_is_below_impact_at_every_budget_node_and_in_every_output():
    result = il.simulate(il.SimConfig(policy="impactful", gpus=32, days=2))
    budgets = result.budgets
    assert (budgets["useful_gpu_s"] <= budgets["delivered_gpu_s"] + 1e-6).all()
    owed = budgets["owed_gpu_s"] > 0
    assert (budgets.loc[owed, "impact_useful"] <= budgets.loc[owed, "impact"] + 1e-12).all()
    assert (
        result.metrics()["impact_useful"]
        == budgets["impact_useful"].iloc[0]
        < result.metrics()["impact"]
    )
    assert "impact_useful" in il.metrics_frame([result]).columns


# ----- end to end: traces built here ------------------------------------------------------------
def slurm_dump(path, jobs: int = 160, seed: int = 1) -> None:
    """A ``sacct --parsable2`` dump of a busy GPU cluster: no minimum runtimes (sacct has none)."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2026-01-01")
    submit = start + pd.to_timedelta(np.cumsum(rng.exponential(900, jobs)), unit="s")
    duration = (rng.lognormal(8.5, 1.2, jobs) + 60).astype(int)
    gpus = rng.choice([1, 1, 2, 4, 8, 8, 16], jobs)
    elapsed = [
        f"{d // 86400}-{d % 86400 // 3600:02d}:{d % 3600 // 60:02d}:{d % 60:02d}" for d in duration
    ]
    rows = [
        f"{1000 + i}|u{i % 9}|acct{i % 3}|{submit[i]:%Y-%m-%dT%H:%M:%S}|{submit[i]:%Y-%m-%dT%H:%M:%S}|"
        f"{submit[i] + pd.Timedelta(seconds=int(duration[i])):%Y-%m-%dT%H:%M:%S}|{elapsed[i]}|"
        f"billing=1,cpu=4,gres/gpu={gpus[i]},node=1|COMPLETED"
        for i in range(jobs)
    ]
    path.write_text(
        "JobID|User|Account|Submit|Start|End|Elapsed|AllocTRES|State\n" + "\n".join(rows) + "\n"
    )


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    path = tmp_path_factory.mktemp("slurm") / "sacct.txt"
    slurm_dump(path)
    return path


def compare_json(capsys, caplog, argv: list[str]) -> tuple[list[dict], str]:
    """The JSON ``compare`` prints, and the warnings it logs (stderr, on the command line)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        assert main(["compare", "--policies", "legacy", "impactful", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out), caplog.text


def test_a_slurm_dump_at_the_suggested_size_does_not_thrash_silently(dump, capsys, caplog):
    assert main(["inspect", str(dump), "--json"]) == 0
    advice = json.loads(capsys.readouterr().out)["advice"]
    (legacy, impactful), err = compare_json(
        capsys, caplog, ["--trace", str(dump), *advice["flags"].split()]
    )
    assert err.count("the trace declares no minimum runtimes") == 1  # said once for the comparison
    assert "impact_useful" in impactful
    quiet = abs(impactful["utilization"] - legacy["utilization"]) <= 0.3
    assert quiet or "impactful: preemption is thrashing" in err
    assert (
        impactful["funded_preemptions_per_job_max"] <= f.PREEMPTIONS_PER_JOB
    )  # each asks to run to its end


def test_the_same_dump_replayed_unprotected_thrashes_and_says_so(dump, capsys, caplog):
    assert main(["inspect", str(dump), "--json"]) == 0
    flags = json.loads(capsys.readouterr().out)["advice"]["flags"].split()
    (_legacy, impactful), err = compare_json(
        capsys, caplog, ["--trace", str(dump), *flags, "--contract-default", "none"]
    )
    assert "the trace declares no minimum runtimes" not in err
    assert (
        impactful["preemption_lost_share"] > f.LOST_SHARE
        and impactful["impact_useful"] < impactful["impact"]
    )
    assert "impactful: preemption is thrashing" in err and "impactful: impact" in err
    assert "contract_default=job-length (the trace declares none)" in err
    assert "cap_hours" not in err.split("impactful: preemption is thrashing")[1].split("\n")[0]
    assert "legacy: preemption is thrashing" not in err
    assert any(w.startswith("impactful: preemption is thrashing") for w in impactful["warnings"])


def test_a_declared_contract_is_kept_and_the_defaults_are_selectable(tmp_path, caplog):
    rows = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "submit_s": [0.0, 60.0],
            "gpus": [8, 8],
            "duration_s": [7200.0, 600.0],
            "kind": ["training", "debug"],
        }
    )
    path = tmp_path / "t.csv"
    rows.to_csv(path, index=False)
    base = il.SimConfig(policy="impactful", gpus=8, trace_path=str(path))
    own = il.inputs.workload.prepare(base)
    assert (
        own.trace["min_runtime_s"].tolist() == [7200.0, 600.0]
        and "own length" in own.provenance["contract"]
    )
    per_kind = (
        il.inputs.workload.prepare(base.with_params(contract_default="per-kind"))
        .trace["min_runtime_s"]
        .tolist()
    )
    assert per_kind == [6 * HOUR_S, 1800.0]  # the generator's training and debug contracts
    none = il.inputs.workload.prepare(base.with_params(contract_default="none"))
    assert none.trace["min_runtime_s"].tolist() == [0.0, 0.0]
    rows.assign(min_runtime_s=[0.0, 300.0]).to_csv(path, index=False)
    assert il.inputs.workload.prepare(base).trace["min_runtime_s"].tolist() == [
        0.0,
        300.0,
    ]  # declared: kept
    hand = il.inputs.workload.prepare(
        base, trace=rows
    )  # a table written in Python is taken as it is
    assert hand.trace["min_runtime_s"].tolist() == [0.0, 0.0]


def overloaded(jobs: int = 300) -> pd.DataFrame:
    """An 8-GPU, 2 h job every 20 min on 16 GPUs: three times what the cluster can run."""
    return pd.DataFrame(
        {
            "job_id": [f"j{i:03d}" for i in range(jobs)],
            "submit_s": np.arange(jobs) * 1200.0,
            "gpus": 8,
            "duration_s": 2 * HOUR_S,
            "project": np.where(np.arange(jobs) % 2, "p", "q"),
            "min_runtime_s": HOUR_S,
        }
    )


def test_every_policy_reports_a_backlog(caplog):
    results = il.compare(
        il.SimConfig(gpus=16, days=4, **INSTANT),
        ["legacy", "impactful", "fairshare", "fifo"],
        trace=overloaded(),
    )
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        for r in results:
            assert r.summary()["queued_at_end_share"] > f.QUEUED_SHARE
    for policy in ("legacy", "impactful", "fairshare", "fifo"):
        assert f"{policy}: a backlog:" in caplog.text


def test_a_light_load_warns_about_nothing(caplog):
    light = overloaded(60).assign(submit_s=np.arange(60) * 3 * HOUR_S)
    results = il.compare(
        il.SimConfig(gpus=16, days=8, **INSTANT),
        ["legacy", "impactful", "fairshare", "fifo"],
        trace=light,
    )
    for r in results:
        assert r.warnings == [] and r.summary()["warnings"] == []


@pytest.mark.parametrize("policy", ["impactful", "legacy"])
def test_the_reasons_of_the_most_preempted_job_add_up_to_its_preemptions(policy):
    """On a busy synthetic run: the reasons count each of the job's preemptions in the window
    once, and its starts on draining nodes are those its start rows say."""
    result = il.simulate(il.SimConfig(policy=policy, gpus=64, days=4, demand=3.0, **INSTANT))
    s, events = result.summary(), result.events
    reasons = dict(s["most_preempted_funded_reasons"])
    drained = reasons.pop(f.DRAINED_STARTS, 0)
    assert sum(reasons.values()) == s["funded_preemptions_per_job_max"] > 0
    window = events["t_s"].between(result.window.t0, result.window.t1, inclusive="left")
    mine = events[window & (events["job_id"] == s["most_preempted_funded_job"])]
    starts = mine[mine["event"] == "start"]["detail"]
    assert drained == starts.str.startswith("unprotected: on nodes draining for job").sum()
