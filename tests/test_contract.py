"""impactful's protection contract (docs/model.md section 5): a funded attempt is protected
for min(min_runtime_s, cap) from its start and for no longer; unallocated attempts are not
protected unless ``protect_unallocated``. The expectations here are computed from the trace,
never from the policy's own ``protection_s``."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import DAY_S, examples, run_tiny, small_tree, traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import impactlab as il
from impactlab.policies.impactful import Impactful
from impactlab.sim.events import preemptor
from impactlab.sim.policy import DRAIN_NOTE

HOUR_S = 3600.0

#: The knobs these cases rely on, written out (defaults may be tuned elsewhere).
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


# ----- a hand case: the cap ends a long declared protection -------------------------------------
@pytest.mark.parametrize("declared_h, protected_h", [(24.0, 8.0), (2.0, 2.0)])
def test_a_funded_job_is_preempted_once_min_of_its_declared_minimum_and_the_cap_has_passed(
    declared_h, protected_h
):
    # One 8-GPU node. p (share 1 of 8) runs `long` from 0; q (share 7 of 8) submits `q1` at 1 h.
    # With a 12 h window, once protection ends p is over-served enough that the swap is fair:
    # after it q is at (0 + 8/8) / (7/8) = 1.14, p at (t/12 h) / (1/8) >= 1.33 from t = 2 h on.
    rows = [
        {
            "job_id": "long",
            "submit_s": 0.0,
            "project": "p",
            "gpus": 8,
            "duration_s": 48 * HOUR_S,
            "kind": "training",
            "min_runtime_s": declared_h * HOUR_S,
            "checkpoint_s": 0.0,
        },
        {
            "job_id": "q1",
            "submit_s": HOUR_S,
            "project": "q",
            "gpus": 8,
            "duration_s": 1000.0,
            "kind": "training",
            "min_runtime_s": 0.0,
            "checkpoint_s": 0.0,
        },
    ]
    log = run_tiny(
        rows,
        policy="impactful",
        gpus=8,
        horizon_s=12 * HOUR_S,
        budgets=il.BudgetTree.flat({"p": 1, "q": 7}),
        policy_knobs=KNOBS,
    ).events
    preempts = log[log.event == "preempt"]
    assert preempts.job_id.tolist() == ["long"] and preempts.detail.map(preemptor).tolist() == [
        "q1"
    ]
    assert preempts.detail.iloc[0].startswith("by=q1; fair share under root: p served")
    t = preempts.t_s.iloc[0]
    # protected until the contract ends, preempted at the latest one ranking refresh later
    assert protected_h * HOUR_S <= t <= protected_h * HOUR_S + KNOBS["refresh_s"]
    starts = log[(log.event == "start") & (log.job_id == "q1")]
    assert starts.t_s.tolist() == [t]


def test_the_cap_knob_moves_the_end_of_protection():
    # The same 24 h declaration under a 10 h cap: still protected at 8 h, preempted at 10 h.
    rows = [
        {
            "job_id": "long",
            "submit_s": 0.0,
            "project": "p",
            "gpus": 8,
            "duration_s": 48 * HOUR_S,
            "kind": "training",
            "min_runtime_s": 24 * HOUR_S,
            "checkpoint_s": 0.0,
        },
        {
            "job_id": "q1",
            "submit_s": HOUR_S,
            "project": "q",
            "gpus": 8,
            "duration_s": 1000.0,
            "kind": "training",
            "min_runtime_s": 0.0,
            "checkpoint_s": 0.0,
        },
    ]
    log = run_tiny(
        rows,
        policy="impactful",
        gpus=8,
        horizon_s=12 * HOUR_S,
        budgets=il.BudgetTree.flat({"p": 1, "q": 7}),
        policy_knobs={**KNOBS, "cap_hours": 10.0},
    ).events
    assert log[log.event == "preempt"].t_s.tolist() == [10 * HOUR_S]


# ----- the invariant: protection ends exactly when the contract says -----------------------------
class ContractChecked(Impactful):
    """impactful, checking at every pass that each running job is protected exactly while the
    contract computed from the trace says so (``contract_s``: job id -> seconds). An attempt
    found unprotected early is kept in ``early`` (job id, start): the run's log must show that
    the drain for a gang left that start unprotected."""

    contract_s: dict[str, float]
    seen: dict[str, int]
    early: set[tuple[str, float]]

    def schedule(self, now, sched):
        for j in sched.running:
            job_id = sched.jobs[j].job_id
            until = sched.started_at[j] + self.contract_s[job_id]
            expected = now < until
            if expected and not sched.protected(j):
                self.early.add((job_id, sched.started_at[j]))
                continue
            assert sched.protected(j) == expected, (
                f"t={now}: {job_id} started at {sched.started_at[j]} with a contract of "
                f"{self.contract_s[job_id]} s is {'' if sched.protected(j) else 'un'}protected"
            )
            declared = sched.started_at[j] + sched.jobs[j].min_runtime_s
            self.seen["protected" if expected else "capped" if now < declared else "free"] += 1
        super().schedule(now, sched)


def contract_from_trace(
    trace: pd.DataFrame, tree: il.BudgetTree, cap_hours: float, protect_unallocated: bool
) -> dict[str, float]:
    """The written contract, from the trace rows: min(min_runtime_s, cap) for a job whose project
    is a leaf of the tree (or for every job with ``protect_unallocated``), else 0."""
    leaves = {tree.names[i] for i in tree.leaves}
    min_runtime = trace.get("min_runtime_s", pd.Series(0.0, index=trace.index)).fillna(0.0)
    return {
        str(jid): min(float(m), cap_hours * HOUR_S) if (p in leaves or protect_unallocated) else 0.0
        for jid, p, m in zip(trace.job_id, trace.get("project", ""), min_runtime)
    }


def run_checked(
    trace: pd.DataFrame,
    tree: il.BudgetTree,
    gpus: int,
    days: float,
    cap_hours: float,
    protect_unallocated: bool = False,
    **knobs,
) -> dict[str, int]:
    """Run the checked policy; return how many (pass, running job) pairs were protected, past a
    capped declaration ("capped") or past the declaration ("free")."""
    policy = ContractChecked(cap_hours=cap_hours, protect_unallocated=protect_unallocated, **knobs)
    policy.contract_s = contract_from_trace(trace, tree, cap_hours, protect_unallocated)
    policy.seen = {"protected": 0, "capped": 0, "free": 0}
    policy.early = set()
    config = il.SimConfig(policy="impactful", gpus=gpus, days=days, warmup_days=0.0)
    log = il.simulate(config, trace=trace, budgets=tree, policy=policy).events
    starts = log[log.event == "start"]
    drained = {(r.job_id, r.t_s) for r in starts.itertuples() if r.detail.startswith(DRAIN_NOTE)}
    assert policy.early <= drained, (
        f"unprotected before their contract ended: {policy.early - drained}"
    )
    if not policy.drain_for_gangs:
        assert not drained
    return policy.seen


#: Caps: below every non-zero declared minimum (60 s), between them, the default, above 8 h.
CAPS = (0.01, 1.0, 8.0, 30.0)


@pytest.mark.parametrize("cap_hours", CAPS)
@pytest.mark.parametrize("seed", [0, 1])
def test_an_attempt_is_protected_exactly_until_min_of_min_runtime_and_the_cap_on_generated_traces(
    cap_hours, seed
):
    work = il.generate(il.GeneratorConfig(gpus=32, days=2.0, seed=seed))
    seen = run_checked(work.trace, work.tree, gpus=32, days=2.0, cap_hours=cap_hours)
    assert seen["protected"] > 0 and seen["free"] > 0
    if cap_hours < 8:  # the generator declares up to 8 h: the cap cut some of them short
        assert seen["capped"] > 0


@pytest.mark.parametrize("drain", [True, False])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=traces(capacity=32, per=8, horizon_s=2 * DAY_S),
    cap_hours=st.sampled_from(CAPS),
    protect_unallocated=st.booleans(),
    boost=st.booleans(),
)
def test_an_attempt_is_protected_exactly_until_min_of_min_runtime_and_the_cap_on_random_traces(
    trace, cap_hours, protect_unallocated, boost, drain
):
    # with the drain for gangs (the default), a start on draining nodes is unprotected, and the
    # log says so; without it, every attempt keeps its whole contract
    run_checked(
        trace,
        small_tree(),
        gpus=32,
        days=2.0,
        cap_hours=cap_hours,
        protect_unallocated=protect_unallocated,
        boost_interactive=boost,
        drain_for_gangs=drain,
    )


def test_a_cap_above_8_hours_ends_an_infinite_declaration():
    # Two 8-GPU jobs of pa1 declaring inf, one node each: with a 30 h cap the checked policy
    # sees them protected, then past the cap (unprotected), within the 2-day run.
    rows = [
        {
            "job_id": f"p{i}",
            "submit_s": 0.0,
            "project": "pa1",
            "gpus": 8,
            "duration_s": 3 * DAY_S,
            "min_runtime_s": math.inf,
        }
        for i in range(2)
    ]
    seen = run_checked(pd.DataFrame(rows), small_tree(), gpus=16, days=2.0, cap_hours=30.0)
    assert seen["protected"] > 0 and seen["capped"] > 0
