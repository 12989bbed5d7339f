"""``explain``: a job's story from the event log (issue 17 item 4). Each wait reason and each
preemption reason on a small hand-built trace whose answer is worked out in the comments; the
story against the log on generated runs; the CLI end to end; the Explorer's picker."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from helpers import DAY_S, examples, run_tiny, small_tree, traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import impactlab as il
from impactlab.analysis.explain import ExplainError, Reason, story_choices
from impactlab.cli import main
from impactlab.sim.health import HealthConfig
from impactlab.sim.policy import BACKFILL_REASON, RESERVE_REASON
from impactlab.widgets import Explorer

HOUR_S = 3600.0
#: impactful's knobs these cases rely on, written out.
KNOBS = {
    "cap_hours": 8.0,
    "window_days": 0.5,
    "half_life_days": None,
    "refresh_s": 300.0,
    "interactive_reserve": 0.0,
    "boost_interactive": True,
    "protect_unallocated": False,
    "max_victim_ratio": 1.0,
    "gangs_preempt_every_pass": False,
}


def job(
    job_id,
    submit_s,
    project,
    gpus=8,
    duration_s=1000.0,
    kind="training",
    min_runtime_s=0.0,
    **extra,
):
    """One trace row; checkpoints keep everything."""
    return {
        "job_id": job_id,
        "submit_s": float(submit_s),
        "project": project,
        "gpus": gpus,
        "duration_s": duration_s,
        "kind": kind if project else "other",
        "min_runtime_s": min_runtime_s,
        "checkpoint_s": 0.0,
        **extra,
    }


def kinds(story):
    return [s.kind for s in story.steps]


def waits(story):
    return [s for s in story.steps if s.kind == "wait"]


def why(step, reason):
    """The text of one reason of a wait (it must be there)."""
    found = [w.text for w in step.why if w.reason == reason]
    assert found, f"no {reason} in {step.why}"
    return found[0]


# ----- impactful: protected victims, then a fair-share preemption ---------------------------------
@pytest.fixture(scope="module")
def contract_run():
    # One 8-GPU node. p (share 1 of 8) runs `long` from 0, protected for 2 h; q (share 7 of 8)
    # submits q1 at 1 h: no room, and the only running job is protected until 2 h. Once it is
    # not, p is far more over-served than q, and q1 preempts it (test_contract has the numbers).
    rows = [
        job("long", 0, "p", duration_s=48 * HOUR_S, min_runtime_s=2 * HOUR_S),
        job("q1", HOUR_S, "q"),
    ]
    return run_tiny(
        rows,
        policy="impactful",
        gpus=8,
        horizon_s=12 * HOUR_S,
        budgets=il.BudgetTree.flat({"p": 1, "q": 7}),
        policy_knobs=KNOBS,
    )


def test_a_job_waiting_for_a_protected_job_is_told_until_when(contract_run):
    story = contract_run.explain("q1")
    assert kinds(story) == ["submit", "wait", "start", "finish"]
    wait = waits(story)[0]
    assert why(wait, Reason.NO_ROOM).startswith(
        "no room: it needed 8 free GPUs on one node; the largest free block was 0"
    )
    assert why(wait, Reason.PROTECTED) == (
        "1 running job holding 8 GPUs could not be preempted: protected until 2.00 h"
    )
    assert Reason.BEHIND not in story.reasons()  # nobody else started meanwhile
    start = story.steps[2]
    assert 2 * HOUR_S <= start.t_s <= 2 * HOUR_S + 300 and wait.span_s == start.t_s - HOUR_S


def test_a_preempted_job_is_told_who_preempted_it_and_the_fair_share_sides(contract_run):
    story = contract_run.explain("long")
    assert kinds(story) == ["submit", "start", "preempt", "requeue", "wait", "start", "running"]
    assert story.steps[1].text == "started on node 0; protected until 2.00 h"
    preempt = story.steps[2].text
    assert preempt.startswith(
        "preempted by job q1 (training, 8 GPUs, q): fair share under root: p served "
    )
    served = dict(re.findall(r"(\w) (?:served )?(\d+\.\d+)", preempt.split("root: ")[1]))
    # p ran 2 h of a 12 h window with 1/8 of the share, q has 0: p > 1.33 (test_contract), q = 0
    assert float(served["p"]) > 1.33 and float(served["q"]) == 0.0
    # requeued behind q1, which holds the only node; it may not preempt q1 (p is the over-served side)
    wait = waits(story)[0]
    assert wait.t_s == story.steps[2].t_s and Reason.NO_ROOM in [w.reason for w in wait.why]
    assert "still running at the end of the run" in story.text()


def test_an_unallocated_victim_and_a_gang_waiting_for_whole_nodes():
    # u (unallocated) holds both nodes from 0; the funded gang g arrives at 10 and preempts it at
    # the next ranking refresh (test_engine_rules).
    rows = [job("u", 0, "", gpus=16, duration_s=5000), job("g", 10, "p", gpus=16, duration_s=100)]
    result = run_tiny(
        rows,
        policy="impactful",
        gpus=16,
        budgets=il.BudgetTree.flat({"p": 1}),
        policy_knobs={"interactive_reserve": 0.0},
    )
    u = result.explain("u")
    assert u.steps[2].text == f"preempted by job g (training, 16 GPUs, p): {BACKFILL_REASON}"
    g = waits(result.explain("g"))[0]
    assert why(g, Reason.NO_ROOM).startswith(
        "no room: it needed 2 whole free nodes for its 16 GPUs; 0 were free"
    )
    assert Reason.PROTECTED not in [w.reason for w in g.why]  # unallocated work has no contract
    # u, requeued, waits: as unallocated work it never preempts
    assert (
        why(waits(u)[0], Reason.NO_PREEMPTION)
        == "unallocated work only backfills: it never preempts"
    )


def test_the_interactive_reserve_and_a_borrower_preempted_by_debug_work():
    # 2 nodes, node 1 the reserve. t takes node 0 (protected 8 h); t2 finds no room off the
    # reserve and borrows node 1, unprotected; t3 (training) arrives at 10: no room, t is
    # protected and t2 is on the reserve, which t3 may not clear. Debug d preempts t2 at 20.
    rows = [
        job("t", 0, "p", duration_s=5000, min_runtime_s=28800),
        job("t2", 5, "p", duration_s=5000, min_runtime_s=28800),
        job("t3", 10, "p", duration_s=100),
        job("d", 20, "p", kind="debug", duration_s=100),
    ]
    result = run_tiny(
        rows,
        policy="impactful",
        gpus=16,
        budgets=il.BudgetTree.flat({"p": 1}),
        horizon_s=20_000,
        policy_knobs={"reserve_min_nodes": 1},
    )
    t2 = result.explain("t2")
    assert t2.steps[1].text == "started on node 1; unprotected: it borrows the interactive reserve"
    assert t2.steps[2].text == f"preempted by job d (debug, 8 GPUs, p): {RESERVE_REASON}"
    t3 = waits(result.explain("t3"))[0]
    assert why(t3, Reason.RESERVE).startswith("node 1 is the interactive reserve")
    assert why(t3, Reason.PROTECTED).startswith(
        "1 running job holding 8 GPUs could not be preempted: protected until 8.00 h"
    )
    # d itself may clear the reserve: no reserve reason for debug work
    assert Reason.RESERVE not in result.explain("d").reasons()


@pytest.mark.parametrize("b_share, preempted", [(0.7, True), (1.0, False)])
def test_a_funded_job_is_told_which_unprotected_jobs_it_may_not_take(b_share, preempted):
    # test_engine_rules' no-ping-pong case: j (A1, 8 GPUs) could take b1v (B1, unprotected) only
    # if B stays at least as served as A after the swap: with B's share 0.7 it does (b1v goes),
    # with 1.0 it does not, and j waits to the end. The other running jobs are protected.
    tree = il.BudgetTree.from_dict(
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
    rows = [
        job("a2p", 0, "A2", 4, 5000, min_runtime_s=28800),
        job("a2v", 1, "A2", 4, 5000, min_runtime_s=28800),
        job("b1v", 2, "B1", 8, 5000),
        job("b1p", 3, "B1", 8, 5000, min_runtime_s=28800),
        job("b1q", 4, "B1", 4, 5000, min_runtime_s=28800),
        job("j", 10, "A1", 8, 5000),
    ]
    knobs = {**KNOBS, "window_days": 7.0}
    story = run_tiny(
        rows, policy="impactful", gpus=32, budgets=tree, horizon_s=200, policy_knobs=knobs
    ).explain("j")
    if preempted:
        assert kinds(story) == ["submit", "start", "running"]  # no wait: it preempted b1v at once
        return
    wait = waits(story)[0]
    assert why(wait, Reason.FAIR_SHARE) == (
        "1 unprotected funded job holding 8 GPUs was not preempted for it: 1 on a side no more over-served "
        "than its own (the no-ping-pong rule), or not where freeing them would make room"
    )
    # a2p, a2v, b1p and b1q (4 + 4 + 8 + 4 GPUs) are protected for 8 h from their starts at 0-4 s
    assert (
        why(wait, Reason.PROTECTED)
        == "4 running jobs holding 20 GPUs could not be preempted: protected until 8.00 h"
    )


# ----- legacy: priorities, opt-outs, jobs ranked ahead --------------------------------------------
def test_legacy_behind_a_higher_priority_job_and_an_opted_out_squatter():
    # One node. a (priority 0, opted out) runs 0-100; b (priority 0) arrives at 10, c (priority 5)
    # at 20. Nobody may preempt a; when it ends at 100, c starts first (higher priority) and b
    # waits for c to end at 1100.
    rows = [
        job("a", 0, "p", duration_s=100, priority=0, preemptible=False),
        job("b", 10, "p", priority=0),
        job("c", 20, "q", priority=5),
    ]
    result = run_tiny(rows, policy="legacy", gpus=8, horizon_s=5000)
    b = waits(result.explain("b"))[0]
    assert b.t_s == 10 and b.span_s == 1090
    assert why(b, Reason.BEHIND) == (
        "1 job started while it waited, of project q (1): it took room it could "
        "have used (the policy ranked them ahead)"
    )
    assert why(b, Reason.PROTECTED) == (
        "1 running job holding 8 GPUs could not be preempted: 1 opted out of "
        "preemption (never preempted)"
    )
    # the node freed at 100 went to c in the same instant: b never had room for any time
    assert why(b, Reason.NO_ROOM) == (
        "no room: it needed 8 free GPUs on one node; the largest free block "
        "was 0 when it began waiting"
    )
    assert result.explain("a").steps[1].text == "started on node 0; never preempted (it opted out)"


@pytest.mark.parametrize("priority", [1, 2])
def test_legacy_cannot_preempt_a_job_of_its_priority_or_higher(priority):
    # One node. a (preemptible, priority 1 or 2) runs 0-1000; b (priority 1) arrives at 10 and
    # may not preempt it: legacy takes only strictly lower priorities.
    rows = [job("a", 0, "p", duration_s=1000, priority=priority), job("b", 10, "p", priority=1)]
    wait = waits(run_tiny(rows, policy="legacy", gpus=8, horizon_s=5000).explain("b"))[0]
    assert why(wait, Reason.PRIORITY) == (
        "1 preemptible running job holding 8 GPUs had priority 1 or higher: "
        "legacy preempts only lower priorities"
    )
    assert Reason.PROTECTED not in [w.reason for w in wait.why] and wait.span_s == 990


def test_legacy_preemption_names_the_priorities():
    rows = [job("low", 0, "p", duration_s=5000, priority=0), job("high", 10, "q", priority=3)]
    story = run_tiny(rows, policy="legacy", gpus=8, horizon_s=9000).explain("low")
    assert (
        story.steps[2].text
        == "preempted by job high (training, 8 GPUs, q): priority 3 over preemptible priority 0"
    )


# ----- no preemption, patience, failures ---------------------------------------------------------
def test_fifo_never_preempts_and_a_job_that_runs_out_of_patience():
    rows = [job("a", 0, "p", duration_s=5000), job("b", 10, "p", patience_s=600.0)]
    story = run_tiny(rows, policy="fifo", gpus=8, horizon_s=9000).explain("b")
    assert kinds(story) == ["submit", "wait", "withdraw"]
    assert why(story.steps[1], Reason.NO_PREEMPTION) == "fifo never preempts: it waits for room"
    assert (
        story.steps[1].span_s == 600
        and story.steps[2].text == "withdrew: it ran out of patience (10 min)"
    )


def test_a_job_still_waiting_at_the_end_says_so():
    rows = [job("a", 0, "p", duration_s=50_000), job("b", 10, "p")]
    story = run_tiny(rows, policy="fifo", gpus=8, horizon_s=9000).explain("b")
    assert kinds(story) == ["submit", "wait"] and story.steps[1].span_s == 9000 - 10
    assert "(still waiting at the end of the run)" in story.steps[1].text


def test_a_failed_attempt_names_the_node():
    config = il.SimConfig(
        policy="impactful", gpus=32, days=2, seed=0, health=HealthConfig(mtbf_hours=24)
    )
    result = il.simulate(config)
    fails = result.events[result.events.event == "fail"]
    assert len(fails)
    victim = fails.iloc[0]
    steps = [s for s in result.explain(victim.job_id).steps if s.kind == "fail"]
    assert steps[0].t_s == victim.t_s and steps[0].text == f"failed: {victim.detail}"


def test_an_unknown_job_is_one_clear_error(contract_run):
    with pytest.raises(ExplainError, match="no job 'nope' in this run \\(2 jobs\\)"):
        contract_run.explain("nope")


# ----- the story matches the log, on generated runs ------------------------------------------------
def check_stories(result: il.SimResult) -> None:
    """Every job's story follows its log rows, its waits add up to its time queued, every wait
    has a reason, and every preemption names its preemptor."""
    log, table = result.events, result.jobs.set_index("job_id")
    for job_id in table.index:
        story = result.explain(job_id)
        rows = log[log.job_id == job_id]
        assert [
            s.kind for s in story.steps if s.kind not in ("wait", "running")
        ] == rows.event.tolist()
        assert sum(s.span_s for s in waits(story)) == pytest.approx(
            table.queued_s[job_id], abs=1e-6
        )
        assert all(step.why for step in waits(story)), (
            f"{job_id}: a wait without a reason\n{story.text()}"
        )
        preempts = [s.text for s in story.steps if s.kind == "preempt"]
        by = rows[rows.event == "preempt"].detail.map(il.sim.events.preemptor).tolist()
        assert [text.split()[3] for text in preempts] == by


@settings(max_examples=examples(24), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=traces(capacity=32, per=8, horizon_s=DAY_S / 2),
    policy=st.sampled_from(["impactful", "legacy", "fairshare", "fifo"]),
    reserve=st.sampled_from([0.0, 0.3]),
)
def test_stories_follow_the_log_on_random_traces(trace, policy, reserve):
    """(Generated traces: ties, gangs, patience, opt-outs, unallocated work.)"""
    knobs = (
        {"interactive_reserve": reserve, "reserve_min_nodes": 1} if policy == "impactful" else {}
    )
    config = il.SimConfig(policy=policy, gpus=32, days=0.5, warmup_days=0.0, policy_knobs=knobs)
    check_stories(il.simulate(config, trace=trace, budgets=small_tree()))


@pytest.mark.parametrize("policy", ["impactful", "legacy", "fairshare", "fifo"])
def test_stories_follow_the_log_on_a_synthetic_day(policy):
    check_stories(
        il.simulate(il.SimConfig(policy=policy, gpus=24, days=1.0, seed=4, warmup_days=0.0))
    )


# ----- a plug-in policy: stories through the protocol, with no change in the package -------------
PLUGIN = "plugin_policy:NewestYields"  # tests/plugin_policy.py: preempts, has a contract


def test_a_plugin_policy_gets_stories_of_its_contract_and_its_preemptions():
    # One node. a runs from 0, protected for 1 h (its declared minimum runtime, under the
    # policy's 2 h cap); b arrives at 10 s, waits for a's protection to end, then preempts it.
    rows = [
        job("a", 0, "p", duration_s=10 * HOUR_S, min_runtime_s=HOUR_S),
        job("b", 10, "p", duration_s=10 * HOUR_S, min_runtime_s=HOUR_S),
    ]
    result = run_tiny(rows, policy=PLUGIN, gpus=8, horizon_s=1.5 * HOUR_S)
    b, a = result.explain("b"), result.explain("a")
    assert kinds(b) == ["submit", "wait", "start", "running"]
    assert "protected until 1.00 h" in why(b.steps[1], Reason.PROTECTED)
    assert b.steps[2].text == "started on node 0; protected until 2.00 h"
    assert kinds(a) == ["submit", "start", "preempt", "requeue", "wait"]
    assert a.steps[1].text == "started on node 0; protected until 1.00 h"
    assert a.steps[2].text.endswith(": the newest unprotected attempt on the node yields")
    assert "protected until 2.00 h" in why(a.steps[4], Reason.PROTECTED)


def test_a_plugin_policy_says_in_its_own_words_why_it_spared_jobs_and_never_preempts_for_gangs():
    # Two nodes of 8. Each holds a protected 6-GPU job and an unprotected 2-GPU one: freeing
    # the unprotected ones makes no 8-GPU room on either node; a 16-GPU gang never preempts.
    rows = [
        job("p1", 0, "p", gpus=6, duration_s=9 * HOUR_S, min_runtime_s=5 * HOUR_S),
        job("p2", 1, "p", gpus=6, duration_s=9 * HOUR_S, min_runtime_s=5 * HOUR_S),
        job("u1", 2, "p", gpus=2, duration_s=9 * HOUR_S),
        job("u2", 3, "p", gpus=2, duration_s=9 * HOUR_S),
        job("z", 4, "p", gpus=8),
        job("gang", 5, "p", gpus=16),
    ]
    result = run_tiny(rows, policy=PLUGIN, gpus=16, horizon_s=2 * HOUR_S)
    wait = waits(result.explain("z"))[0]
    assert wait.why[-1].reason == "one_node" and wait.why[-1].text.startswith("2 unprotected")
    assert why(waits(result.explain("gang"))[0], Reason.NO_PREEMPTION) == (
        "a gang never preempts under newest-yields: it waits for whole free nodes"
    )


# ----- CLI and Explorer ----------------------------------------------------------------------------
def test_cli_explain_tells_a_preempted_jobs_story(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            ["simulate", "--policy", "impactful", "--gpus", "32", "--days", "2", "--out", str(out)]
        )
        == 0
    )
    capsys.readouterr()
    events = il.SimResult.load(out).events
    victim, detail = events[events.event == "preempt"].iloc[0][["job_id", "detail"]]
    assert main(["explain", str(out), victim]) == 0
    text = capsys.readouterr().out
    assert (
        text.startswith(f"job {victim}\n")
        and f"preempted by job {il.sim.events.preemptor(detail)}" in text
    )
    assert main(["explain", str(out), victim, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert "preempt" in [s["kind"] for s in steps] and all(
        w["reason"] for s in steps for w in s["why"]
    )
    assert main(["explain", str(out), "nope"]) == 2
    assert "no job 'nope' in this run" in capsys.readouterr().err
    assert main(["explain", str(tmp_path), victim]) == 2
    assert (
        "not a saved run (simulate --out); it holds the runs run: give one of them"
        in capsys.readouterr().err
    )


def test_the_explorer_tells_the_story_of_a_job_picked_from_the_table():
    app = Explorer(
        config=il.SimConfig(gpus=32, days=2.0, seed=1), auto_s=60.0
    )  # every change runs at once
    stories = app.stories
    rows = story_choices(app.results[0])
    assert [value for _, value in stories.table.options] == rows.job_id.tolist()
    assert (
        rows.preempts.is_monotonic_decreasing and stories.story.value == ""
    )  # nothing replayed yet
    stories.table.value = rows.job_id.iloc[0]
    assert (
        f"job {rows.job_id.iloc[0]}" in stories.story.value
        and "preempted by job" in stories.story.value
    )
    app.compare_box.value = True  # a second run: pick it, and its jobs are listed
    assert [label for label, _ in stories.run.options] == [r.run for r in app.results]
    stories.run.value = 1
    assert [value for _, value in stories.table.options] == story_choices(
        app.results[1]
    ).job_id.tolist()


def test_latencies_are_reasons_a_cycle_and_a_grace_period():
    # one node; a training job (unallocated, so preemptible at once) runs from 0; a funded debug
    # job arrives at 1 s. The pass at the 30 s cycle preempts the trainer, which keeps its GPUs
    # for the 30 s grace period: the debug job starts at 60 s.
    from impactlab import BudgetTree, SimConfig, simulate

    rows = [
        {
            "job_id": "t",
            "submit_s": 0.0,
            "project": "",
            "gpus": 8,
            "duration_s": 7200,
            "kind": "training",
        },
        {
            "job_id": "d",
            "submit_s": 1.0,
            "project": "p",
            "gpus": 8,
            "duration_s": 60,
            "kind": "debug",
        },
    ]
    config = SimConfig(
        policy="impactful",
        gpus=8,
        days=1 / 24,
        warmup_days=0.0,
        cycle_s=30.0,
        grace_s=30.0,
        startup_s=0.0,
        policy_knobs={"interactive_reserve": 0.0},
    )
    result = simulate(config, trace=pd.DataFrame(rows), budgets=BudgetTree.flat({"p": 1}))
    story = result.explain("d")
    wait = next(step for step in story.steps if step.kind == "wait")
    assert wait.span_s == 59.0
    reasons = {w.reason: w.text for w in wait.why}
    assert "29 s of the wait was until its next cycle" in reasons["cycle"]
    assert (
        "it preempted 1 job at 0.01 h, which kept its GPUs for the 30 s grace period"
        in reasons["grace"]
    )


def test_a_story_says_when_a_job_was_evicted_for_maintenance():
    plan = il.Maintenance(name="rack", announce_h=30, down_h=40, hours=2, share=0.25)
    result = il.simulate(il.SimConfig(gpus=32, days=3, seed=1).with_maintenance(plan))
    evicts = result.events[result.events["event"] == "evict"]
    assert len(evicts) > 0
    for job_id, t_s, detail in zip(evicts["job_id"], evicts["t_s"], evicts["detail"]):
        steps = [s for s in result.explain(job_id).steps if s.kind == "evict"]
        step = next(s for s in steps if s.t_s == t_s)
        when = "at the deadline" if detail.endswith("deadline") else "when the policy let it go"
        assert step.text.startswith(f"evicted {when}: node") and "maintenance rack" in step.text
