"""Node failures, automatic drain and human repairs (issue: availability)."""

from __future__ import annotations

import heapq
import itertools
import json
import math
from dataclasses import replace
from functools import cache

import pandas as pd
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import impactlab as il
from impactlab.cli import main
from impactlab.policies import REGISTRY
from impactlab.sim.health import HealthConfig, NodeHealth

GPUS, PER, DAYS = 32, 8, 3.0


@cache
def workload(seed: int = 0) -> il.inputs.generator.Workload:
    """A small synthetic workload, built once."""
    return il.generate(il.GeneratorConfig(gpus=GPUS, days=DAYS, seed=seed))


def run(policy: str, seed: int = 0, **health) -> il.SimResult:
    """One run of the small workload with the given health knobs."""
    config = il.SimConfig(
        policy=policy,
        gpus=GPUS,
        days=DAYS,
        seed=seed,
        warmup_days=0.0,
        health=HealthConfig(**health),
    )
    work = workload(seed)
    return il.simulate(config, trace=work.trace, budgets=work.tree)


def replay(events: pd.DataFrame) -> list[tuple[float, str, dict]]:
    """Walk the log in order, yielding (time, event, state) with the GPUs in use per node and
    the set of nodes that are down (between node_down and node_up)."""
    in_use = [0] * (GPUS // PER)
    down: set[int] = set()
    held: dict[str, list[int]] = {}
    out = []
    for e in events.itertuples(index=False):
        if e.event == "start":
            nodes = [int(n) for n in e.nodes.split(",")]
            held[e.job_id] = nodes
            for n in nodes:
                in_use[n] += min(e.gpus, PER)
        elif e.event in ("preempt", "fail", "finish"):
            for n in held.pop(e.job_id):
                in_use[n] -= min(e.gpus, PER)
        elif e.event == "node_down":
            down.add(int(e.nodes))
        elif e.event == "node_up":
            down.discard(int(e.nodes))
        out.append((e.t_s, e.event, {"in_use": list(in_use), "down": set(down), "row": e}))
    return out


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_without_failures_the_health_knobs_change_nothing(policy):
    base = run(policy).events
    for knobs in ({"repair": "manual"}, {"repair": "automatic", "human_fraction": 1.0}):
        pd.testing.assert_frame_equal(run(policy, **knobs).events, base)


def instants(log: list[tuple[float, str, dict]]) -> list[tuple[float, str, dict]]:
    """The state at the end of each instant (a node going down and its jobs failing share one)."""
    return [
        step for step, after in zip(log, [*log[1:], None]) if after is None or after[0] != step[0]
    ]


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_with_automatic_repair_gpus_in_use_never_exceed_healthy_gpus(policy):
    for t, _event, state in instants(replay(run(policy, mtbf_hours=48, repair="automatic").events)):
        healthy = [n for n in range(GPUS // PER) if n not in state["down"]]
        assert sum(state["in_use"][n] for n in healthy) == sum(state["in_use"]), (
            f"t={t}: a job on a down node"
        )
        assert sum(state["in_use"]) <= PER * len(healthy), f"t={t}"


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_with_automatic_repair_no_job_starts_on_a_down_node(policy):
    for t, event, state in replay(run(policy, mtbf_hours=48, repair="automatic").events):
        if event == "start":
            nodes = {int(n) for n in state["row"].nodes.split(",")}
            assert not nodes & state["down"], f"t={t}: {state['row'].job_id} started on a down node"


def test_with_manual_repair_a_job_that_lands_on_a_failed_node_fails_within_crash_s():
    result = run("legacy", mtbf_hours=24, repair="manual", crash_s=300.0)
    log = replay(result.events)
    landed = {}
    for t, event, state in log:
        row = state["row"]
        if event == "start" and {int(n) for n in row.nodes.split(",")} & state["down"]:
            landed[row.job_id] = t
        elif row.job_id in landed and event in ("fail", "finish", "preempt"):
            began = landed.pop(row.job_id)
            assert event == "fail" or t - began <= 300.0, f"{row.job_id} survived a failed node"
            assert t - began <= 300.0 + 1e-6
    assert not landed or all(t > result.config.horizon_s - 300 for t in landed.values())


@pytest.mark.parametrize("repair", ["automatic", "manual"])
def test_every_failure_is_repaired_or_still_open_at_the_end(repair):
    events = run("impactful", mtbf_hours=24, repair=repair).events
    nodes = events[events.event.isin(["node_down", "node_up"])]
    assert len(nodes) > 0
    for node, group in nodes.groupby("nodes"):
        kinds = group.event.tolist()
        assert kinds[::2] == ["node_down"] * len(kinds[::2]), f"node {node}: {kinds}"
        assert kinds[1::2] == ["node_up"] * len(kinds[1::2]), f"node {node}: {kinds}"
        ups = group[group.event == "node_up"].detail
        if repair == "manual":
            assert (ups == "repair=human").all()


def test_jobs_on_a_failed_node_fail_even_when_protected():
    events = run("impactful", mtbf_hours=12, repair="automatic", human_fraction=0.0).events
    protected = set(workload().trace.query("min_runtime_s > 0 and project != ''").job_id)
    failed = events[events.event == "fail"]
    assert failed.job_id.isin(protected).any(), "no protected job was on a failing node"
    assert (failed.detail.str.startswith("node ")).all()


@pytest.mark.parametrize("repair", ["automatic", "manual"])
def test_repeated_runs_with_failures_give_identical_logs(repair):
    first = run("impactful", seed=1, mtbf_hours=24, repair=repair).events
    pd.testing.assert_frame_equal(
        run("impactful", seed=1, mtbf_hours=24, repair=repair).events, first
    )


def test_the_failure_seed_changes_the_failures():
    a = run("impactful", seed=0, mtbf_hours=24).events
    b = run("impactful", seed=1, mtbf_hours=24).events
    assert not a[a.event == "node_down"].t_s.equals(b[b.event == "node_down"].t_s)


def test_failure_times_do_not_depend_on_the_policy_until_the_first_repair():
    first = {}
    for policy in ("legacy", "impactful", "fifo"):
        events = run(policy, mtbf_hours=24).events
        downs = events[events.event == "node_down"].groupby("nodes").t_s.min()
        first[policy] = downs
    assert first["legacy"].equals(first["impactful"]) and first["fifo"].equals(first["impactful"])


def test_automatic_drain_beats_manual_repair_on_availability_and_human_repairs():
    config = il.SimConfig(gpus=64, days=10, seed=2, health=HealthConfig(mtbf_hours=24 * 10))
    work = il.generate(config.generator())
    legacy = il.simulate(
        replace(config, policy="legacy"), trace=work.trace, budgets=work.tree
    ).summary()
    impactful = il.simulate(
        replace(config, policy="impactful"), trace=work.trace, budgets=work.tree
    ).summary()
    assert legacy["auto_repairs"] == 0 and legacy["human_repairs"] > 0
    assert impactful["human_repairs"] < legacy["human_repairs"]
    assert impactful["availability"] > legacy["availability"]


def test_availability_is_the_healthy_share_of_capacity_by_hand():
    # One node of four down for exactly 2 h of a 10 h window: availability = 1 - 2/40.
    events = pd.DataFrame(
        [
            (3600.0, "node_down", "", 8, "2", "failure; repair=automatic", 0.0, 0.0),
            (3 * 3600.0, "node_up", "", 8, "2", "repair=automatic", 0.0, 0.0),
        ],
        columns=il.sim.events.EVENT_COLUMNS,
    )
    window = il.analysis.metrics.Window(0.0, 10 * 3600.0, 32)
    assert il.analysis.metrics.healthy_gpu_s(events, window, 8) / (
        32 * window.span_s
    ) == pytest.approx(1 - 2 / 40)
    series = il.analysis.metrics.health_series(events, 32, 8, 10 * 3600.0)
    assert series.healthy_gpus.tolist() == [32, 24, 24] + [32] * 7
    assert series.failures.sum() == 1 and series.auto_repairs.tolist()[3] == 1


def test_summary_counts_repairs_and_losses():
    result = run("legacy", mtbf_hours=24, repair="manual")
    s, log = result.summary(), result.events
    assert s["node_failures"] > 0 and s["human_repairs"] > 0 and s["auto_repairs"] == 0
    # no warm-up: every node event of the run counts, one by one
    assert s["node_failures"] == (log.event == "node_down").sum()
    assert s["human_repairs"] == ((log.event == "node_up") & (log.detail == "repair=human")).sum()
    assert s["jobs_hit"] == log[log.event == "fail"].job_id.nunique()
    assert s["jobs_hit"] > 0 and s["failure_lost_gpu_hours"] > 0
    assert 0 < s["availability"] < 1 and 0 <= s["occupancy"] <= 1


@settings(max_examples=examples(10), deadline=None)
@given(
    mtbf=st.floats(6, 200), seed=st.integers(0, 3), repair=st.sampled_from(["automatic", "manual"])
)
def test_health_series_averages_to_availability(mtbf, seed, repair):
    result = run("impactful", seed=seed, mtbf_hours=mtbf, repair=repair)
    series = result.health_series(bucket_s=1800.0)
    assert series.healthy_gpus.mean() / GPUS == pytest.approx(
        result.summary()["availability"], rel=1e-9
    )


def test_cli_reports_failures_and_repairs(capsys):
    code = main(
        [
            "simulate",
            "--policy",
            "impactful",
            "--gpus",
            "32",
            "--days",
            "3",
            "--node-mtbf-hours",
            "24",
            "--repair",
            "manual",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["auto_repairs"] == 0 and out["human_repairs"] >= 1
    # the figures of the same run through the library, in the same window
    config = il.SimConfig(
        policy="impactful", gpus=32, days=3, health=HealthConfig(mtbf_hours=24, repair="manual")
    )
    same = il.simulate(config).summary()
    for key in ("report_from_days", "node_failures", "human_repairs", "auto_repairs", "jobs_hit"):
        assert out[key] == same[key], key
    assert math.isfinite(out["failure_lost_gpu_hours"])


def test_cli_rejects_a_bad_mtbf(capsys):
    assert main(["simulate", "--policy", "fifo", "--node-mtbf-hours", "-3"]) == 2
    assert "mtbf_hours must be positive" in capsys.readouterr().err


def test_a_job_must_live_a_moment_on_a_failed_node():
    # crash_s = 0 would let a job land on a failed node and die at the same instant, forever
    with pytest.raises(ValueError, match="crash_s must be positive"):
        HealthConfig(mtbf_hours=10, crash_s=0.0)


class FakeNodes:
    """NodeOps without an engine: a heap of calls and a record of what happened to the nodes."""

    def __init__(self, node_count: int):
        self.now, self.node_count = 0.0, node_count
        self.calls: list = []
        self._order = itertools.count()  # calls at one time run in the order they were set
        self.seen: list[tuple[float, str, int]] = []

    def at(self, t, fn, *args):
        heapq.heappush(self.calls, (t, next(self._order), fn, args))

    def node_failed(self, node, detail):
        self.seen.append((self.now, "failed", node))

    def take_out(self, node):
        self.seen.append((self.now, "drain", node))

    def node_repaired(self, node, detail):
        self.seen.append((self.now, detail, node))

    def in_maintenance(self, node):
        return False

    def run(self, until: float) -> None:
        while self.calls and self.calls[0][0] < until:
            self.now, _, fn, args = heapq.heappop(self.calls)
            fn(*args)


@pytest.mark.parametrize("repair", ["automatic", "manual"])
def test_node_health_needs_only_node_ops_not_an_engine(repair):
    nodes = FakeNodes(3)
    health = NodeHealth(
        nodes, HealthConfig(mtbf_hours=10, repair=repair, human_fraction=0.0), repair, seed=4
    )
    health.start()
    nodes.run(until=500 * 3600.0)
    steps = {node: [what for _, what, n in nodes.seen if n == node] for node in range(3)}
    cycle = (
        ["failed", "drain", "repair=automatic"]
        if repair == "automatic"
        else ["failed", "drain", "repair=human"]
    )
    for node, seen in steps.items():
        assert len(seen) >= 3 * 3, f"node {node}: too few failures in 500 h at a 10 h MTBF"
        full = len(seen) // 3 * 3
        assert seen[:full] == cycle * (full // 3), f"node {node}: {seen}"


def test_a_start_undone_by_a_failure_before_it_began_keeps_the_patience_it_was_queued_with():
    """A funded job preempts backfill on the only node and waits for the victim's grace period;
    the node fails meanwhile, which undoes the start (nothing is logged: it never began). The
    job was queued all along, so it gives up at its submission plus its patience, not that
    long after the failure."""
    trace = pd.DataFrame(
        [
            {"job_id": "backfill", "submit_s": 0.0, "gpus": 1, "duration_s": 50_000.0},
            {"job_id": "funded", "submit_s": 100.0, "gpus": 1, "duration_s": 1_000.0}
            | {"project": "p", "patience_s": 20_000.0},
        ]
    )
    tree = il.BudgetTree.from_dict({"name": "root", "children": [{"name": "p"}]})
    health = HealthConfig(
        mtbf_hours=2.0, repair="automatic", human_fraction=0.0, auto_repair_hours=1_000.0
    )
    for seed in range(50):  # (the first seed whose failure falls in the grace period)
        config = il.SimConfig(
            policy="impactful",
            gpus=1,
            gpus_per_node=1,
            days=0.5,
            warmup_days=0.0,
            seed=seed,
            cycle_s=0.0,
            startup_s=0.0,
            grace_s=3_600.0,
            health=health,
        )
        events = il.simulate(config, trace=trace, budgets=tree).events
        down = events.loc[events["event"] == "node_down", "t_s"]
        if down.between(100.0, 3_700.0, inclusive="neither").any():
            break
    else:
        pytest.fail("no seed failed the node during the victim's grace period")
    funded = events[events["job_id"] == "funded"]
    assert funded["event"].tolist() == ["submit", "withdraw"]  # (its start never began)
    assert funded["t_s"].tolist() == [100.0, 20_100.0]
