"""Several clusters in one run (a fleet): engines of several clusters on one clock
(``impactlab.sim.fleet``), fair share charged organisation-wide or per cluster
(``policies.fair.SharedUsage``), the static rule that sends each job to a cluster
(``inputs.fleet.assign_clusters``), the organisation's log and per-cluster results
(``analysis.fleet``, ``SimResult.per_cluster``), the config's fleet and its what-ifs, the CLI and
the shipped fleet scenario.

The rules are checked on the organisation's event log of every registered policy (the plug-in
one ``conftest`` registers included), under both fair-share scopes, on generated fleets and on
random small traces whose rows name a cluster or none (hypothesis). Hand-computed cases pin the
assignment rule and a case where the scope decides who goes first; the fast passes are replayed
against the reference passes in fleets.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import replace
from functools import cache

import helpers
import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import DAY_S, INSTANT, examples, gang_tree, small_tree, traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from impactlab import (
    REGISTRY,
    BudgetTree,
    ClusterSpec,
    Maintenance,
    ParamError,
    SimConfig,
    compare_fleets,
    load_scenario,
    policy_names,
    prepare,
    simulate,
    validate_trace,
)
from impactlab.analysis.fleet import cluster_events, combine_events, first_nodes
from impactlab.analysis.results import SimResult, metrics_frame
from impactlab.base.config import ORGANISATION, fleet_from, fleet_text
from impactlab.base.gangs import held_gpus, nodes_needed
from impactlab.cli import main
from impactlab.inputs.fleet import assign_clusters
from impactlab.inputs.scenario import scenario_dict
from impactlab.inputs.trace import TraceError
from impactlab.policies.reference import REFERENCES
from impactlab.sim.events import EVENT_DTYPES

INF = math.inf
H = 3600.0
POLICIES = policy_names()  # (with the plug-in policy conftest registers)
SCOPES = ("organisation", "cluster")


def thorough(*values, id: str | None = None):
    """A parameter that only the thorough profile runs."""
    return pytest.param(*values, id=id, marks=pytest.mark.thorough)


# ----- the organisation's log, replayed ------------------------------------------------------
def parse_nodes(text: str) -> list[int]:
    """Node ids of the ``nodes`` column."""
    return [int(x) for x in text.split(",")] if text else []


class FleetLog:
    """A fleet's result with what the rules need: each cluster's range of fleet node numbers."""

    def __init__(self, result: SimResult, named: pd.Series | None = None):
        self.result, self.config = result, result.config
        self.names = [c.name for c in self.config.clusters]
        self.per = self.config.gpus_per_node
        self.first = first_nodes(self.config)
        self.count = [c.gpus // self.per for c in self.config.clusters]
        self.cluster_of_node = {
            n: name
            for name, first, count in zip(self.names, self.first, self.count)
            for n in range(first, first + count)
        }
        self.events = list(result.events.itertuples(index=False))
        #: The cluster each job was sent to (the run's trace, after the rule).
        self.sent = dict(zip(result.trace["job_id"], result.trace["cluster"]))
        #: The cluster each job's row named in the input trace ("" for none), if known.
        self.named = named

    def __repr__(self) -> str:
        return (
            f"FleetLog({self.config.policy}, {self.config.fair_share}, {len(self.events)} events)"
        )


def check_jobs_stay_on_one_cluster(log: FleetLog) -> None:
    """A job's events all carry the cluster the rule sent it to, and every node an event names
    lies in that cluster's range of fleet node numbers (so no gang spans two clusters)."""
    assert log.result.events["cluster"].astype(str).isin(log.names).all()
    seen: dict[str, str] = {}
    for e in log.events:
        cluster = str(e.cluster)
        for n in parse_nodes(e.nodes):
            assert log.cluster_of_node.get(n) == cluster, f"node {n} is not in {cluster}: {e}"
        if not e.job_id:
            continue  # a node event
        assert seen.setdefault(e.job_id, cluster) == cluster, f"job on two clusters: {e}"
        assert log.sent[e.job_id] == cluster, f"not on the cluster the rule chose: {e}"


def check_rows_run_where_they_name(log: FleetLog) -> None:
    """A row that names a cluster runs on the cluster of that name or one that takes it; a row
    that names none runs on a cluster it fits."""
    assert log.named is not None
    specs = {c.name: c for c in log.config.clusters}
    trace = log.result.trace.set_index("job_id")
    for job_id, name in log.named.items():
        sent = specs[trace.at[job_id, "cluster"]]
        assert sent.gpus >= trace.at[job_id, "gpus"], job_id
        assert not name or name in sent.names, job_id


def check_no_gpu_double_booked(log: FleetLog) -> None:
    """Replay the organisation's log: a node never holds more GPUs than it has, each cluster
    never more than its own, and nothing starts on a node down for maintenance. A preempted
    job holds its GPUs until its ``requeue`` or ``kill`` (its grace period), as in
    ``test_invariants``."""
    used: dict[int, int] = defaultdict(int)
    on: dict[str, tuple[str, list[int], int]] = {}  # job -> (cluster, nodes, GPUs per node)
    grace: dict[str, tuple[str, list[int], int]] = {}  # preempted, still holding its GPUs
    held_by: dict[str, int] = defaultdict(int)
    closed: set[int] = set()
    gpus = dict(zip(log.result.trace["job_id"], log.result.trace["gpus"]))
    sizes = {c.name: c.gpus for c in log.config.clusters}
    for e in log.events:
        nodes, cluster = parse_nodes(e.nodes), str(e.cluster)
        freed = None
        if e.event == "start":
            assert e.gpus == held_gpus(gpus[e.job_id], log.per), e
            assert len(nodes) == len(set(nodes)) == nodes_needed(gpus[e.job_id], log.per), e
            assert not closed.intersection(nodes), f"started on a node down: {e}"
            share = e.gpus // len(nodes)
            for n in nodes:
                used[n] += share
            held_by[cluster] += e.gpus
            on[e.job_id] = (cluster, nodes, share)
        elif e.event in ("finish", "fail", "evict", "preempt"):
            held = on.pop(e.job_id)
            assert held[:2] == (cluster, nodes), f"ends elsewhere than it started: {e}"
            if e.event == "preempt":
                grace[e.job_id] = held
            else:
                freed = held
        elif e.event in ("requeue", "kill") and e.job_id in grace:
            freed = grace.pop(e.job_id)
        elif e.event == "maintenance_down":
            closed.update(nodes)
        elif e.event == "maintenance_up":
            closed.difference_update(nodes)
        if freed is not None:
            for n in freed[1]:
                used[n] -= freed[2]
            held_by[freed[0]] -= freed[2] * len(freed[1])
        assert all(0 <= used[n] <= log.per for n in nodes), f"node over capacity after {e}"
        assert 0 <= held_by[cluster] <= sizes[cluster], f"{cluster} over capacity after {e}"
        if e.event == "maintenance_down":
            assert all(used[n] == 0 for n in nodes), f"down while holding jobs: {e}"


def check_every_job_accounted_for(log: FleetLog) -> None:
    """The per-cluster traces split the run's trace; each job submitted before the end is
    submitted once, in its cluster; the per-cluster logs are the organisation's cut by cluster
    (``cluster_events``), add up to it and put it back together (``combine_events``)."""
    result, config = log.result, log.config
    parts = result.per_cluster
    assert list(parts) == log.names
    assert sum(len(p.trace) for p in parts.values()) == len(result.trace)
    ids = [set(p.trace["job_id"]) for p in parts.values()]
    assert set().union(*ids) == set(result.trace["job_id"])
    assert sum(len(s) for s in ids) == len(result.trace)
    submits = result.events[result.events["event"] == "submit"]
    due = result.trace[result.trace["submit_s"] < config.horizon_s]
    assert sorted(submits["job_id"]) == sorted(due["job_id"])
    assert dict(zip(submits["job_id"], submits["cluster"].astype(str))) == dict(
        zip(due["job_id"], due["cluster"])
    )
    assert sum(len(p.events) for p in parts.values()) == len(result.events)
    for k, (name, part) in enumerate(parts.items()):
        assert_frame_equal(part.events, cluster_events(result.events, config, k))
        mine = result.events[result.events["cluster"] == name].drop(columns="cluster")
        shift = lambda text: ",".join(str(n - log.first[k]) for n in parse_nodes(text))  # noqa: B023, E731
        mine = mine.assign(nodes=mine["nodes"].map(shift)).reset_index(drop=True)
        assert_frame_equal(part.events, mine, check_dtype=False)  # (dtypes: a test of its own)
        assert part.config == config.cluster_config(k)
        assert part.config.gpus == config.clusters[k].gpus
        local = {n for text in part.events["nodes"] for n in parse_nodes(text)}
        assert local <= set(range(log.count[k])), name
    assert_frame_equal(combine_events([p.events for p in parts.values()], config), result.events)


CHECKS = (
    check_jobs_stay_on_one_cluster,
    check_no_gpu_double_booked,
    check_every_job_accounted_for,
)


# ----- generated fleets ----------------------------------------------------------------------
#: Synthetic fleets: (clusters, GPUs per node, days, demand, seed).
GENERATED = [
    ("a:16,b:40", 8, 2.0, 3.0, 1),
    ("x:24,y:8,z:16", 4, 2.0, 2.5, 2),
    thorough(("a:64,b:16,c:32", 8, 3.0, 3.0, 3), id="a:64,b:16,c:32-8-3-3-3"),
    thorough(("big:128,small:24", 8, 2.0, 2.0, 4), id="big:128,small:24-8-2-2-4"),
]


def generated_config(policy: str, scope: str, key: tuple, **more) -> SimConfig:
    clusters, per, days, demand, seed = key
    config = SimConfig(
        policy=policy, gpus_per_node=per, days=days, demand=demand, seed=seed, fair_share=scope
    )
    return config.with_params(clusters=clusters, **more)


@cache
def generated_log(policy: str, scope: str, key: tuple) -> FleetLog:
    """A run on a generated fleet (shared by the rules; nothing mutates it)."""
    config = generated_config(policy, scope, key)
    inputs = prepare(config)
    return FleetLog(simulate(config, inputs=inputs), inputs.trace.set_index("job_id")["cluster"])


@pytest.mark.parametrize(
    "check", [*CHECKS, check_rows_run_where_they_name], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("key", GENERATED, ids=lambda k: "-".join(map(str, k)))
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_the_fleet_rules_on_generated_fleets(policy, scope, key, check):
    log = generated_log(policy, scope, key)
    assert (log.result.events["event"] == "start").sum() > 50  # (the clusters do work)
    check(log)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_organisation_log(policy, scope):
    key = GENERATED[0]
    again = simulate(generated_config(policy, scope, key))
    assert_frame_equal(again.events, generated_log(policy, scope, key).result.events)
    other = simulate(generated_config(policy, scope, (*key[:4], key[4] + 1)))
    assert not other.events.equals(again.events)


def test_the_scope_changes_the_log_of_a_fair_share_policy():
    """(So that the scope tests above run two different things.)"""
    for policy in ("fairshare", "impactful"):
        org, own = (generated_log(policy, scope, GENERATED[0]).result.events for scope in SCOPES)
        assert not org.equals(own), policy


# ----- random traces whose rows name a cluster or none ---------------------------------------
#: (cycle_s, startup_s, grace_s, preempted_sessions): instant, and latencies with grace periods.
TIMINGS = [(0.0, 0.0, 0.0, "requeue"), (30.0, 30.0, 30.0, "end"), (0.0, 0.0, 60.0, "requeue")]
HORIZON_S = 12 * H


@st.composite
def fleet_cases(draw) -> tuple:
    """A fleet of two or three small clusters and a random trace on it, each row naming a
    cluster it fits or none; latencies; sometimes failing nodes, a maintenance window (on
    every cluster, or on listed nodes of one) and the first two clusters merged (their rows
    then run on the merged one)."""
    per = draw(st.sampled_from([4, 8]))
    nodes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=3))
    sizes = {f"c{k}": n * per for k, n in enumerate(nodes)}
    trace = draw(traces(max(sizes.values()), per, HORIZON_S))
    names = draw(
        st.lists(st.sampled_from(["", "", *sizes]), min_size=len(trace), max_size=len(trace))
    )
    trace["cluster"] = [n if n and sizes[n] >= g else "" for n, g in zip(names, trace["gpus"])]
    announce_h = draw(st.integers(1, 8))
    window = draw(
        st.sampled_from(
            [
                None,
                None,
                Maintenance(announce_h, announce_h + 1, hours=1, share=0.5, name="half"),
                Maintenance(announce_h, announce_h, hours=2, nodes=(0,), cluster="c1", name="c1"),
            ]
        )
    )
    return {
        "per": per,
        "clusters": ",".join(f"{n}:{g}" for n, g in sizes.items()),
        "trace": trace,
        "timing": draw(st.sampled_from(TIMINGS)),
        "fails": draw(st.sampled_from([None, None, 6.0])),
        "window": window,
        "merge": draw(st.sampled_from([False, False, True])),
    }


def case_config(policy: str, scope: str, case: dict) -> SimConfig:
    cycle_s, startup_s, grace_s, sessions = case["timing"]
    config = SimConfig(
        policy=policy,
        gpus_per_node=case["per"],
        days=HORIZON_S / DAY_S,
        warmup_days=0.0,
        cycle_s=cycle_s,
        startup_s=startup_s,
        grace_s=grace_s,
        preempted_sessions=sessions,
        fair_share=scope,
    ).with_params(clusters=case["clusters"], mtbf_hours=case["fails"])
    if case["window"] is not None:
        config = config.with_maintenance(case["window"])
    return config.merge_clusters("c0", "c1") if case["merge"] else config


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("policy", POLICIES)
@settings(
    max_examples=examples(16),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=fleet_cases())
def test_random_fleet_traces_keep_every_fleet_rule(policy, scope, case):
    trace = case["trace"]
    result = simulate(case_config(policy, scope, case), trace=trace, budgets=small_tree())
    log = FleetLog(result, trace.set_index("job_id")["cluster"])
    for check in (*CHECKS, check_rows_run_where_they_name):
        check(log)


# ----- a fleet of one cluster is the plain run -----------------------------------------------
ONE_GPUS = 256 if helpers.THOROUGH else 64
ONE_CLUSTER_EXTRAS = {
    "plain": {},
    "failures": {"mtbf_hours": 48.0},
    "maintenance": {
        "maintenance": (
            Maintenance(announce_h=10, down_h=14, hours=3, share=0.25, name="share"),
            Maintenance(announce_h=20, down_h=22, hours=2, nodes=(1, 2), name="nodes"),
        )
    },
}


@pytest.mark.parametrize("extra", list(ONE_CLUSTER_EXTRAS))
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_fleet_of_one_cluster_logs_exactly_what_the_plain_run_logs(policy, scope, extra):
    """The same trace and tree: the fleet's log, without its cluster column, is the plain run's
    (nodes unchanged, the same failure draws, the same maintenance)."""
    more = dict(ONE_CLUSTER_EXTRAS[extra])
    plan = more.pop("maintenance", ())
    plain = SimConfig(
        policy=policy, gpus=ONE_GPUS, days=2.0, seed=3, demand=3.0, fair_share=scope
    ).with_params(more)
    fleet = plain.with_params(clusters=f"a:{ONE_GPUS}")
    # The fleet's windows name their cluster (listed nodes must); the plain run's name none.
    plain = plain.with_maintenance(*plan)
    fleet = fleet.with_maintenance(*(replace(w, cluster="a") for w in plan))
    inputs = prepare(fleet)
    one = simulate(fleet, inputs=inputs)
    alone = simulate(plain, trace=inputs.trace.drop(columns="cluster"), budgets=inputs.tree)
    assert (one.events["cluster"] == "a").all()
    assert_frame_equal(one.events.drop(columns="cluster"), alone.events)
    if extra == "failures":
        assert (alone.events["event"] == "node_down").any()
    if extra == "maintenance":
        assert (alone.events["event"] == "maintenance_down").sum() >= 3


def test_nodes_fail_as_the_same_nodes_of_one_cluster_of_the_fleets_size_would():
    """Failures draw from one random stream per fleet node: a fleet's failures and automatic
    repairs are those of one cluster of its total size, node for node (fleet numbers)."""
    config = SimConfig(days=4.0, policy="fifo", seed=7).with_params(
        mtbf_hours=48.0, repair="automatic"
    )
    fleet = simulate(config.with_params(clusters="a:32,b:16,c:16")).events
    alone = simulate(config.with_params(gpus=64)).events
    health = ["node_down", "node_up"]
    ours, theirs = (e[e["event"].isin(health)].reset_index(drop=True) for e in (fleet, alone))
    assert len(ours) >= 10 and set(ours["cluster"].astype(str)) == {"a", "b", "c"}
    cols = ["t_s", "event", "nodes", "detail"]
    assert_frame_equal(ours[cols], theirs[cols])


def test_a_cluster_no_job_is_sent_to_idles_and_is_reported():
    trace = rows(*[(f"j{i}", 100.0 * i, 4, 500.0, "a") for i in range(10)])
    config = SimConfig(days=0.1, warmup_days=0.0).with_params(clusters="a:8,b:8")
    for policy in POLICIES:
        result = simulate(replace(config, policy=policy), trace=trace)
        table = result.by_cluster().set_index("cluster")
        assert list(table["jobs"]) == [10, 0, 10]
        assert table.loc["b", "occupancy"] == 0.0
        assert table.loc[ORGANISATION, "occupancy"] == pytest.approx(
            table.loc["a", "occupancy"] / 2
        )
        assert not result.events["cluster"].eq("b").any()


# ----- hand-computed: the scope decides who goes first ---------------------------------------
def scope_case(policy: str, scope: str) -> SimResult:
    """Two one-node clusters c1 and c2; projects A and B of equal share.

    A1 (A) holds c1 from 0 on. B0 (B) holds c2 from 500 to 1000. A2 (A) and B2 (B) arrive on
    c2 at 600 and wait for it. Every job takes 8 GPUs (a whole node); no latencies; each job is
    protected for its whole length (impactful preempts nothing), so only the fair-share order
    at t=1000 decides who gets c2 when B0 finishes.
    """
    tree = BudgetTree.from_dict(
        {"name": "root", "children": [{"name": "A", "share": 1}, {"name": "B", "share": 1}]}
    )

    def row(job_id: str, submit_s: float, cluster: str, project: str, duration_s: float):
        return {
            "job_id": job_id,
            "submit_s": submit_s,
            "cluster": cluster,
            "project": project,
            "gpus": 8,
            "duration_s": duration_s,
            "min_runtime_s": INF,
            "checkpoint_s": INF,
        }

    trace = pd.DataFrame(
        [
            row("A1", 0.0, "c1", "A", 10_000.0),
            row("B0", 500.0, "c2", "B", 500.0),
            row("A2", 600.0, "c2", "A", 1000.0),
            row("B2", 600.0, "c2", "B", 1000.0),
        ]
    )
    config = SimConfig(
        policy=policy,
        days=5000.0 / DAY_S,
        fair_share=scope,
        policy_knobs={"refresh_s": 60.0},
        cycle_s=0.0,
        startup_s=0.0,
        grace_s=0.0,
        warmup_days=0.0,
    ).with_params(clusters="c1:8,c2:8")
    return simulate(config, trace=trace, budgets=tree)


@pytest.mark.parametrize("policy", ["fairshare", "impactful"])
@pytest.mark.parametrize(
    ("scope", "order"),
    [
        # At t=1000 A has used 8 GPUs x 1000 s (A1, on c1) and B 8 GPUs x 500 s (B0, on c2):
        # charged organisation-wide, B is the less served project and B2 goes first.
        ("organisation", [("B2", 1000.0), ("A2", 2000.0)]),
        # Charged per cluster, c2 has seen B's 8 x 500 GPU-s and nothing of A: A2 goes first.
        ("cluster", [("A2", 1000.0), ("B2", 2000.0)]),
    ],
)
def test_charged_organisation_wide_usage_on_one_cluster_counts_on_another(policy, scope, order):
    events = scope_case(policy, scope).events
    starts = events[events["event"] == "start"]
    got = list(zip(starts["job_id"], starts["t_s"], starts["nodes"], starts["cluster"].astype(str)))
    # (fleet node numbers: c1's node is 0, c2's is 1)
    expected = [("A1", 0.0, "0", "c1"), ("B0", 500.0, "1", "c2")]
    expected += [(job, t, "1", "c2") for job, t in order]
    assert got == expected
    assert not events["event"].isin(["preempt", "fail", "withdraw"]).any()


# ----- fast and reference passes agree in fleets ---------------------------------------------
ORACLE_POLICIES = sorted(REFERENCES)
#: Synthetic fleets: (clusters, GPUs per node, days, demand, seed, extra parameters).
ORACLE_FLEETS = [
    ("a:32,b:16,c:24", 8, 2.0, 2.5, 0, {}),
    thorough(("a:88,b:128,c:40", 8, 3.0, 2.5, 1, {}), id="ai2-like-seed1"),
    thorough(("a:24,b:16", 4, 2.0, 3.0, 2, {}), id="4-per-node"),
    thorough(("a:32,b:48", 8, 2.0, 3.0, 3, {"mtbf_hours": 24.0}), id="failures"),
    thorough(("a:32,b:48", 8, 2.0, 3.0, 4, dict(INSTANT)), id="instant"),
    thorough(
        (
            "a:32,b:48",
            8,
            2.0,
            3.0,
            5,
            {
                "maintenance": (
                    Maintenance(announce_h=10, down_h=16, hours=4, share=0.5, cluster="b"),
                    Maintenance(announce_h=30, down_h=30, hours=2, nodes=(1, 2), cluster="a"),
                )
            },
        ),
        id="maintenance",
    ),
]
#: Knob variants compared in the thorough profile.
ORACLE_KNOBS = [
    ("fifo", {}),
    ("legacy", {}),
    ("fairshare", {}),
    ("impactful", {}),
    thorough("fifo", {"backfill": True}, id="fifo-backfill"),
    thorough("fairshare", {"half_life_days": 0.5, "refresh_s": 60.0}, id="fairshare-halflife"),
    thorough("fairshare", {"backfill_reservation": False}, id="fairshare-noreservation"),
    thorough("impactful", {"backfill_reservation": True}, id="impactful-reservation"),
    thorough("impactful", {"cap_hours": 0.5, "refresh_s": 60.0}, id="impactful-cap"),
    thorough("impactful", {"half_life_days": 1.0, "window_days": 2.0}, id="impactful-halflife"),
    thorough(
        "impactful",
        {"max_victim_ratio": INF, "gangs_preempt_every_pass": True},
        id="impactful-greedy",
    ),
]


def assert_fleet_oracle(config: SimConfig, policy: str, knobs: dict, **inputs) -> pd.DataFrame:
    """The fast policy and its reference pass write the identical organisation's log."""
    config = replace(config, policy=policy, policy_knobs=knobs)
    built = prepare(config, **inputs)
    fast = simulate(config, inputs=built, policy=REGISTRY[policy](**knobs)).events
    ref = simulate(config, inputs=built, policy=REFERENCES[policy](**knobs)).events
    if not fast.equals(ref):
        n = min(len(fast), len(ref))
        row = next((i for i in range(n) if not fast.iloc[i].equals(ref.iloc[i])), n)
        pytest.fail(
            f"logs differ from row {row}\nfast:\n{fast.iloc[row - 3 : row + 3]}\n"
            f"reference:\n{ref.iloc[row - 3 : row + 3]}"
        )
    return fast


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize(("policy", "knobs"), ORACLE_KNOBS)
@pytest.mark.parametrize("key", ORACLE_FLEETS, ids=lambda k: "-".join(map(str, k[:5])))
def test_fast_pass_logs_exactly_what_the_reference_pass_logs_in_a_generated_fleet(
    key, policy, knobs, scope
):
    clusters, per, days, demand, seed, extra = key
    extra = dict(extra)
    plan = extra.pop("maintenance", ())
    config = SimConfig(gpus_per_node=per, days=days, demand=demand, seed=seed, fair_share=scope)
    config = config.with_params(clusters=clusters, **extra).with_maintenance(*plan)
    log = assert_fleet_oracle(config, policy, knobs)
    assert log["cluster"].nunique() == len(clusters.split(","))
    if plan:
        assert (log["event"] == "maintenance_down").any()


def busy_fleet(seed: int) -> tuple[pd.DataFrame, str, int]:
    """90 jobs in half a day on two or three clusters of one to three nodes of 4 or 8 GPUs,
    arriving on a 1000 s grid, rows naming a cluster they fit or none, short protections:
    many passes per instant on every cluster, each charging the organisation's usage."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per, k, n = int(rng.choice([4, 8])), int(rng.integers(2, 4)), 90
    sizes = {f"c{i}": int(rng.integers(1, 4)) * per for i in range(k)}
    gpus = np.minimum(rng.choice([1, 2, per // 2, per, 2 * per], n), max(sizes.values()))
    named = rng.choice([*sizes, "", ""], n)
    trace = pd.DataFrame(
        {
            "job_id": [f"b{i:03d}" for i in range(n)],
            "submit_s": np.round(rng.uniform(0, 0.5 * DAY_S, n), -3),
            "project": rng.choice(["a1", "a2", "b1", ""], n),
            "gpus": gpus,
            "duration_s": np.round(np.clip(rng.lognormal(np.log(3000), 1.0, n), 60, DAY_S)),
            "kind": rng.choice(["debug", "interactive", "training", "other"], n),
            "min_runtime_s": rng.choice([0.0, 1000.0, 5000.0], n),
            "priority": rng.integers(0, 3, n),
            "preemptible": rng.random(n) < 0.9,
            "checkpoint_s": rng.choice([0.0, 600.0, INF], n),
            "patience_s": rng.choice([INF, 3000.0, 10_000.0], n),
            "cluster": [c if c and sizes[c] >= g else "" for c, g in zip(named, gpus)],
        }
    )
    return trace, ",".join(f"{c}:{g}" for c, g in sizes.items()), per


BUSY_SEEDS = [0, 5, *(thorough(s, id=str(s)) for s in (1, 2, 3, 4, 6, 7, 8, 9))]


@pytest.mark.parametrize(
    "timing", [pytest.param({}, id="latencies"), thorough(dict(INSTANT), id="instant")]
)
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize(("policy", "knobs"), ORACLE_KNOBS)
@pytest.mark.parametrize("seed", BUSY_SEEDS)
def test_fast_pass_logs_exactly_what_the_reference_pass_logs_in_a_busy_small_fleet(
    seed, policy, knobs, scope, timing
):
    trace, clusters, per = busy_fleet(seed)
    config = SimConfig(gpus_per_node=per, days=0.8, fair_share=scope, **timing)
    config = config.with_params(clusters=clusters)
    log = assert_fleet_oracle(config, policy, knobs, trace=trace, budgets=gang_tree())
    assert log["cluster"].nunique() >= 2


# ----- the assignment rule -------------------------------------------------------------------
def rows(*jobs: tuple) -> pd.DataFrame:
    """Trace rows (job_id, submit_s, gpus, duration_s, cluster)."""
    columns = ["job_id", "submit_s", "gpus", "duration_s", "cluster"]
    return pd.DataFrame([dict(zip(columns, j)) for j in jobs])


def test_unnamed_rows_go_to_the_least_work_per_gpu_in_submit_order_ties_to_the_first():
    # a: 8 GPUs, b: 16. Work per GPU assigned so far, jobs in submit order (not row order):
    # j1 (t=0, 8x100=800): a 0, b 0 -> tie, a (first declared); a=800 (100/GPU)
    # j2 (t=1, 4x100=400): a 100, b 0 -> b; b=400 (25/GPU)
    # j3 (t=2, 16 GPUs, 16x10=160): only b is large enough -> b; b=560 (35/GPU)
    # j4 (t=3, 1x1000): a 100, b 35 -> b; b=1560 (97.5/GPU)
    # j5 (t=4, 2x50=100, row before j6 at the same time): a 100, b 97.5 -> b; b=1660 (103.75)
    # j6 (t=4, 2x100=200): a 100, b 103.75 -> a; a=1000 (125/GPU)
    # j7 (t=5, names a, 8x1000): a, whatever the load; a=9000 (1125/GPU)
    # j8 (t=6, 1x10): a 1125, b 103.75 -> b
    trace = rows(
        ("j8", 6.0, 1, 10.0, ""),
        ("j3", 2.0, 16, 10.0, ""),
        ("j1", 0.0, 8, 100.0, None),
        ("j2", 1.0, 4, 100.0, ""),
        ("j4", 3.0, 1, 1000.0, ""),
        ("j5", 4.0, 2, 50.0, ""),
        ("j6", 4.0, 2, 100.0, ""),
        ("j7", 5.0, 8, 1000.0, "a"),
    )
    fleet = fleet_from("a:8,b:16")
    out = assign_clusters(trace, fleet)
    assert dict(zip(out["job_id"], out["cluster"])) == {
        "j1": "a",
        "j2": "b",
        "j3": "b",
        "j4": "b",
        "j5": "b",
        "j6": "a",
        "j7": "a",
        "j8": "b",
    }
    assert_frame_equal(out.drop(columns="cluster"), trace.drop(columns="cluster"))
    without = assign_clusters(trace.drop(columns="cluster"), fleet)  # no column: none named
    assert without.loc[without["job_id"] == "j7", "cluster"].item() == "b"  # (a: 125, b: 103.75)


def test_a_name_runs_on_the_cluster_that_takes_it():
    trace = rows(("m", 0.0, 8, 10.0, "b"), ("n", 1.0, 8, 10.0, "a"), ("o", 2.0, 8, 10.0, "c"))
    merged = (ClusterSpec("ab", 16, ("a", "b")), ClusterSpec("c", 8))
    out = assign_clusters(trace, merged)
    assert list(out["cluster"]) == ["ab", "ab", "c"]
    # Split clusters all take the old name: "b" rows go to the least loaded of them.
    split = SimConfig(days=1).with_params(clusters="a:8,b:16").split_cluster("b")
    out = assign_clusters(
        rows(*[(f"s{i}", float(i), 8, 10.0, "b") for i in range(4)]), split.clusters
    )
    assert list(out["cluster"]) == ["b-1", "b-2", "b-1", "b-2"]


@pytest.mark.parametrize(
    ("jobs", "row", "job_id"),
    [
        ([("x", 0.0, 8, 1.0, ""), ("big", 1.0, 24, 1.0, "")], 1, "big"),
        ([("x", 0.0, 8, 1.0, ""), ("y", 5.0, 8, 1.0, "a"), ("z", 2.0, 16, 1.0, "a")], 2, "z"),
    ],
    ids=["larger-than-every-cluster", "larger-than-its-named-cluster"],
)
def test_a_job_larger_than_every_cluster_it_may_use_is_refused_naming_row_job_and_gpus(
    jobs, row, job_id
):
    with pytest.raises(TraceError) as info:
        assign_clusters(rows(*jobs), fleet_from("a:8,b:16"), "jobs.csv")
    err = info.value
    assert (err.source, err.row, err.column) == ("jobs.csv", row, "gpus")
    assert job_id in str(err) and "larger than every cluster" in str(err)


def test_a_name_no_cluster_takes_is_refused_naming_the_column_and_the_fleet():
    trace = rows(("x", 0.0, 1, 1.0, "a"), ("y", 1.0, 1, 1.0, "nowhere"))
    with pytest.raises(TraceError) as info:
        assign_clusters(trace, fleet_from("a:8,b:16"))
    err = info.value
    assert (err.row, err.column) == (1, "cluster")
    assert "'nowhere'" in str(err) and "a, b" in str(err) and "job y" in str(err)


def test_simulate_sends_a_job_between_the_largest_cluster_and_the_fleet_to_the_error():
    config = SimConfig(days=0.1).with_params(clusters="a:8,b:16")
    trace = rows(("ok", 0.0, 8, 10.0, ""), ("wide", 1.0, 24, 10.0, ""))
    with pytest.raises(TraceError, match=r"row 1, column 'gpus'.*job wide \(24 GPUs\)"):
        simulate(config, trace=trace)


def test_simulate_names_the_job_larger_than_every_cluster_even_beyond_the_fleet():
    config = SimConfig(days=0.1).with_params(clusters="a:8,b:16")
    trace = rows(("ok", 0.0, 8, 10.0, ""), ("huge", 1.0, 32, 10.0, ""))
    with pytest.raises(TraceError, match=r"column 'gpus'.*job huge.*larger than every cluster"):
        simulate(config, trace=trace)


def test_skip_large_skips_a_job_no_cluster_of_the_fleet_can_run(tmp_path):
    path = tmp_path / "trace.csv"
    rows(("a", 0.0, 8, 100.0, ""), ("wide", 10.0, 20, 100.0, ""), ("b", 20.0, 4, 100.0, "")).to_csv(
        path, index=False
    )
    config = SimConfig(days=0.1).with_params(
        clusters="a:8,b:16", trace_path=str(path), skip_large=True, days=0.1
    )
    result = simulate(config)
    assert sorted(result.trace["job_id"]) == ["a", "b"]


# ----- the config of a fleet -----------------------------------------------------------------
NAME = st.text(
    st.characters(codec="ascii", exclude_characters=",:+= "), min_size=1, max_size=6
).filter(lambda s: not any(ch.isspace() for ch in s))
SPECS = st.lists(
    st.builds(
        ClusterSpec,
        name=NAME,
        gpus=st.integers(1, 64).map(lambda n: 8 * n),
        takes=st.lists(NAME, max_size=2).map(tuple),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda c: c.name,
)


@settings(max_examples=examples(200), deadline=None)
@given(fleet=SPECS)
def test_the_text_of_a_fleet_reads_back_as_the_same_fleet(fleet):
    fleet = tuple(fleet)
    assert fleet_from(fleet_text(fleet)) == fleet
    config = SimConfig(days=1).with_params(clusters=fleet_text(fleet))
    assert config.clusters == fleet
    assert config.gpus == sum(c.gpus for c in fleet)


@pytest.mark.parametrize("name", ["a\t", "b\n", "\tc"])
def test_a_name_with_other_whitespace_is_refused_or_reads_back(name):
    try:
        fleet = (ClusterSpec(name, 8),)
    except ParamError:
        return
    assert fleet_from(fleet_text(fleet)) == fleet


def test_a_fleet_round_trips_through_json_and_a_scenario(tmp_path):
    config = (
        SimConfig(days=3.0, demand=2.0, seed=4, gpus_per_node=8, fair_share="cluster")
        .with_params(clusters="a:32,b:16,c:24")
        .merge_clusters("b", "c", into="bc")
        .with_maintenance(
            Maintenance(announce_h=5, down_h=6, nodes=(1,), cluster="a", name="one"),
            Maintenance(announce_h=7, down_h=8, share=0.5, name="all"),
        )
    )
    assert config.clusters == (ClusterSpec("a", 32), ClusterSpec("bc", 40, ("b", "c")))
    again = SimConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and hash(again) == hash(config)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(scenario_dict("fleet", config, small_tree(), "a test")))
    loaded = load_scenario(path).config
    for field in ("clusters", "gpus", "gpus_per_node", "fair_share", "maintenance", "days"):
        assert getattr(loaded, field) == getattr(config, field), field
    assert (loaded.demand, loaded.seed) == (2.0, 4)


def test_a_fleet_round_trips_through_its_flat_form():
    config = SimConfig(days=2).with_params(clusters="a:32,b:16")
    back = SimConfig.from_flat(config.flat())
    assert back.flat() == config.flat()
    assert back.clusters == config.clusters and back.gpus == 48


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: SimConfig(clusters="a:8,a:16"), "'a' is used twice"),
        (lambda: SimConfig(clusters="a:12,b:16"), "cluster a: gpus must be a positive multiple"),
        (lambda: SimConfig(clusters="a:4"), "cluster a: gpus must be a positive multiple"),
        (lambda: fleet_from("a88"), "'a88' is not name:gpus"),
        (lambda: fleet_from("a:88,"), "'' is not name:gpus"),
        (lambda: fleet_from("a:x"), "'a:x' is not name:gpus"),
        (lambda: fleet_from("a:88:b:c"), "is not name:gpus or name:gpus:a\\+b"),
        (lambda: fleet_from("a b:8"), "a cluster's name is a word without spaces"),
        (lambda: fleet_from("a:0"), "gpus must be a whole number >= 1"),
        (lambda: fleet_from([{"name": "a"}]), "cluster 1: give its gpus"),
        (lambda: fleet_from([{"name": "a", "gpus": 8, "size": 1}]), "unknown key"),
        (lambda: fleet_from([3]), "cluster 1: expected a mapping"),
        (
            lambda: SimConfig().with_params(clusters="a:8").with_params(gpus=64),
            "a fleet's GPUs are its clusters'",
        ),
        (lambda: SimConfig(fair_share="everyone"), "fair_share"),
    ],
    ids=[
        "duplicate",
        "not-a-multiple",
        "below-a-node",
        "no-colon",
        "empty-part",
        "not-a-number",
        "too-many-parts",
        "space",
        "zero",
        "no-gpus",
        "unknown-key",
        "not-a-mapping",
        "gpus-of-a-fleet",
        "scope",
    ],
)
def test_a_bad_fleet_is_refused_in_clear_words(make, words):
    with pytest.raises(ParamError, match=words):
        make()


@pytest.mark.parametrize(
    ("windows", "words"),
    [
        ([Maintenance(1, 2, share=0.5, cluster="z")], r"no cluster 'z'; the fleet's: a, b"),
        ([Maintenance(1, 2, nodes=(0,))], r"lists nodes; name their cluster"),
        ([Maintenance(1, 2, nodes=(2,), cluster="a")], r"node 2 is not in a cluster of 2 nodes"),
        (
            [Maintenance(1, 4, nodes=(0,), cluster="b", name="x"), Maintenance(2, 3, share=1.0)],
            r"maintenance .* and .* both take node 0",
        ),
    ],
    ids=["unknown-cluster", "nodes-without-cluster", "node-beyond-cluster", "overlap"],
)
def test_a_maintenance_plan_that_does_not_fit_the_fleet_is_refused(windows, words):
    fleet = SimConfig(days=1).with_params(clusters="a:16,b:32")
    with pytest.raises(ParamError, match=words):
        fleet.with_maintenance(*windows)


def test_a_window_naming_a_cluster_needs_a_fleet():
    with pytest.raises(ParamError, match="names cluster 'a', but the run has one cluster"):
        SimConfig(gpus=16).with_maintenance(Maintenance(1, 2, share=0.5, cluster="a"))


def test_each_cluster_gets_its_windows_and_its_own_config():
    config = (
        SimConfig(days=2, fair_share="cluster")
        .with_params(clusters="a:16,b:32")
        .with_maintenance(
            Maintenance(1, 2, nodes=(3,), cluster="b", name="b3"),
            Maintenance(5, 6, share=0.5, name="all"),
        )
    )
    a, b = config.cluster_config(0), config.cluster_config(1)
    assert (a.gpus, a.clusters, b.gpus, b.nodes) == (16, (), 32, 4)
    assert [w.name for w in a.maintenance] == ["all"]
    assert [(w.name, w.cluster) for w in b.maintenance] == [("b3", ""), ("all", "")]
    assert (a.policy, a.days, a.fair_share) == (config.policy, 2.0, "cluster")
    assert first_nodes(config) == [0, 2]


# ----- what-ifs on the layout ----------------------------------------------------------------
BASE = SimConfig(days=2.0, policy="fifo", seed=2).with_params(clusters="a:32,b:48,c:16")


def test_merging_joins_sizes_and_names_in_the_first_ones_place():
    merged = BASE.merge_clusters("b", "c")
    assert merged.clusters == (ClusterSpec("a", 32), ClusterSpec("b", 64, ("b", "c")))
    assert merged.gpus == BASE.gpus
    named = BASE.merge_clusters("c", "a", into="ac")
    assert named.clusters == (ClusterSpec("ac", 48, ("a", "c")), ClusterSpec("b", 48))
    again = named.merge_clusters("ac", "b")  # a merged cluster keeps every name it took
    assert again.clusters == (ClusterSpec("ac", 96, ("ac", "a", "c", "b")),)


def test_merging_says_which_maintenance_windows_it_drops(caplog):
    """Windows naming a merged cluster are dropped (their node numbers would mean other nodes
    of the merged one); that was silent."""
    planned = BASE.with_maintenance(
        {"announce_h": 1, "down_h": 2, "nodes": [0], "cluster": "c"},
        {"announce_h": 9, "down_h": 10, "share": 0.25, "name": "all"},
        {"announce_h": 1, "down_h": 2, "nodes": [1], "cluster": "a"},
    )
    with caplog.at_level("WARNING", logger="impactlab"):
        merged = planned.merge_clusters("b", "c")
    # (the unnamed window kept keeps its name: its place in the plan it came from)
    assert [w.label(i) for i, w in enumerate(merged.maintenance)] == ["all", "window 3"]
    assert caplog.messages == [
        "merging b+c drops maintenance window 1, which named a merged cluster"
    ]


def test_splitting_makes_equal_parts_or_the_given_ones_that_take_the_old_name():
    assert BASE.split_cluster("b").clusters[1:3] == (
        ClusterSpec("b-1", 24, ("b",)),
        ClusterSpec("b-2", 24, ("b",)),
    )
    uneven = BASE.split_cluster("b", 4).clusters  # 6 nodes in 4: the first two get a node more
    assert [c.gpus for c in uneven] == [32, 16, 16, 8, 8, 16]
    assert [c.gpus for c in BASE.split_cluster("b", [8, 40]).clusters] == [32, 8, 40, 16]
    assert BASE.split_cluster("b").gpus == BASE.gpus


def test_moving_and_resizing_keep_whole_nodes():
    moved = BASE.move_gpus("b", "a", 16)
    assert [(c.name, c.gpus) for c in moved.clusters] == [("a", 48), ("b", 32), ("c", 16)]
    assert moved.gpus == BASE.gpus
    grown = BASE.resize_cluster("c", 64)
    assert [c.gpus for c in grown.clusters] == [32, 48, 64] and grown.gpus == 144


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda c: c.merge_clusters("a"), "name at least two clusters"),
        (lambda c: c.merge_clusters("a", "x"), "no cluster 'x'; the fleet's: a, b, c"),
        (lambda c: c.merge_clusters("a", "b", into="c"), "'c' is used twice"),
        (lambda c: c.split_cluster("c", 3), "c has 2 nodes; split it in 2..2"),
        (lambda c: c.split_cluster("b", [16, 16]), "add up to b's 48 GPUs"),
        (lambda c: c.split_cluster("b", [48]), "two or more"),
        (lambda c: c.move_gpus("a", "a", 8), "move whole nodes"),
        (lambda c: c.move_gpus("a", "b", 4), "move whole nodes"),
        (lambda c: c.move_gpus("a", "b", 32), "leaving a at least one node"),
        (lambda c: c.resize_cluster("a", 12), "positive multiple of gpus_per_node"),
        (lambda c: c.resize_cluster("z", 8), "no cluster 'z'"),
        (lambda c: SimConfig(gpus=64).split_cluster("a"), "this run has one cluster"),
    ],
)
def test_a_what_if_that_cannot_be_is_refused_in_clear_words(change, words):
    with pytest.raises(ParamError, match=words):
        change(BASE)


def test_merging_a_cluster_with_itself_is_refused():
    with pytest.raises(ParamError):
        BASE.merge_clusters("a", "a")


def test_merging_drops_the_windows_of_every_merged_cluster():
    planned = BASE.with_maintenance(
        Maintenance(1, 2, share=0.5, cluster="a", name="wa"),
        Maintenance(1, 2, share=0.5, cluster="b", name="wb"),
        Maintenance(1, 2, share=0.5, cluster="c", name="wc"),
        Maintenance(20, 21, share=0.5, name="all"),
    )
    for names, kept in [(("a", "b"), ["wc", "all"]), (("b", "a"), ["wc", "all"])]:
        assert [w.name for w in planned.merge_clusters(*names).maintenance] == kept
    assert [w.name for w in planned.merge_clusters("a", "c", into="z").maintenance] == ["wb", "all"]


def test_splitting_drops_the_windows_of_the_split_cluster():
    planned = BASE.with_maintenance(
        Maintenance(1, 2, share=0.5, cluster="b", name="wb"),
        Maintenance(1, 2, share=0.5, cluster="c", name="wc"),
    )
    assert [w.name for w in planned.split_cluster("b").maintenance] == ["wc"]


@cache
def layouts() -> list[SimResult]:
    return compare_fleets(
        BASE,
        {
            "today": BASE,
            "merged": BASE.merge_clusters("a", "b"),
            "split": "a:32,b-1:24:b,b-2:24:b,c:16",
        },
    )


def test_compare_fleets_replays_one_workload_on_every_layout_labelled():
    results = layouts()
    assert [r.run for r in results] == ["today", "merged", "split"]
    jobs = [
        r.trace.drop(columns="cluster").sort_values("job_id").reset_index(drop=True)
        for r in results
    ]
    for other in jobs[1:]:
        assert_frame_equal(other, jobs[0])
    submitted = [set(r.events.loc[r.events["event"] == "submit", "job_id"]) for r in results]
    assert submitted[0] == submitted[1] == submitted[2]
    assert [r.config.policy for r in results] == ["fifo"] * 3
    assert len({r.config.warmup_days for r in results}) == 1  # one reporting window
    today, merged, split = (dict(zip(r.trace["job_id"], r.trace["cluster"])) for r in results)
    assert {merged[j] for j, c in today.items() if c in ("a", "b")} == {"a"}
    assert {split[j] for j, c in today.items() if c == "b"} == {"b-1", "b-2"}
    assert all(split[j] == c for j, c in today.items() if c in ("a", "c"))


def test_a_merged_layout_has_one_cluster_row_fewer():
    today, merged, split = (r.by_cluster() for r in layouts())
    assert list(today["cluster"]) == ["a", "b", "c", ORGANISATION]
    assert list(merged["cluster"]) == ["a", "c", ORGANISATION]
    assert len(split) == len(today) + 1
    assert list(merged["gpus"]) == [80, 16, 96]
    assert list(merged["run"].unique()) == ["merged"]


def test_compare_fleets_keeps_each_layouts_own_plan():
    """A layout given as a config runs with its own plan (a merged cluster's windows dropped);
    one given as text keeps the windows that name none of its clusters or one it has."""
    wb = Maintenance(5, 6, share=0.5, cluster="b", name="wb")
    wc = Maintenance(7, 8, share=0.5, cluster="c", name="wc")
    planned = BASE.with_maintenance(wb, wc)
    merged, text = compare_fleets(
        planned, {"merged": planned.merge_clusters("a", "b"), "text": "a:32,bb:48:b,c:16"}
    )
    assert merged.config.maintenance == (wc,)
    assert text.config.maintenance == (wc,)
    assert (merged.events["event"] == "cordon").sum() == 1


def test_compare_fleets_refuses_a_layout_without_clusters():
    with pytest.raises(ParamError, match="layout 'one' has no clusters"):
        compare_fleets(BASE, {"one": SimConfig(gpus=96)})


# ----- results -------------------------------------------------------------------------------
@cache
def fleet_result() -> SimResult:
    """Three small clusters, nodes failing, a window on one of them; half the run reported."""
    config = (
        SimConfig(days=2.0, seed=5, demand=2.5, warmup_days=0.5)
        .with_params(clusters="a:24,b:48,c:16", mtbf_hours=24.0)
        .with_maintenance(Maintenance(20, 24, hours=4, share=0.5, cluster="b"))
    )
    return simulate(config)


def same_numbers(a: dict, b: dict) -> bool:
    """Equal dicts of numbers, NaN equal to NaN."""
    return a.keys() == b.keys() and all(
        x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in ((a[k], b[k]) for k in a)
    )


def test_the_organisation_row_of_by_cluster_is_the_runs_own_metrics():
    result = fleet_result()
    table = result.by_cluster()
    assert list(table["cluster"]) == ["a", "b", "c", ORGANISATION]
    assert list(table["gpus"]) == [24, 48, 16, 88]
    org = table.iloc[-1].drop(["run", "policy", "cluster", "gpus"]).to_dict()
    assert same_numbers(org, result.metrics())
    for name, part in result.per_cluster.items():
        row = table[table["cluster"] == name].iloc[0].drop(["run", "policy", "cluster", "gpus"])
        assert same_numbers(row.to_dict(), part.metrics())


def test_organisation_ratios_are_ratios_of_the_clusters_sums_not_means_of_ratios():
    """Occupancy is held GPU-seconds over healthy GPU-seconds and availability healthy over all:
    the organisation's weigh each cluster's by its healthy GPU-seconds (gpus x availability)."""
    table = fleet_result().by_cluster().set_index("cluster")
    parts, org = table.drop(ORGANISATION), table.loc[ORGANISATION]
    healthy = parts["gpus"] * parts["availability"]
    assert org["availability"] == pytest.approx(healthy.sum() / parts["gpus"].sum(), rel=1e-9)
    for metric in ("occupancy", "occupancy_funded", "occupancy_unallocated", "utilization"):
        weighted = (parts[metric] * healthy).sum() / healthy.sum()
        assert org[metric] == pytest.approx(weighted, rel=1e-9), metric
    assert parts["availability"].nunique() > 1  # (failures and the window differ per cluster)
    assert org["occupancy"] != pytest.approx(parts["occupancy"].mean(), rel=1e-9)
    for count in ("jobs", "preemptions", "node_failures", "maintenance_nodes", "withdrawn"):
        assert org[count] == parts[count].sum(), count


def test_a_saved_fleet_loads_back_with_equal_per_cluster_results(tmp_path):
    result = fleet_result()
    loaded = SimResult.load(result.save(tmp_path / "run"))
    assert loaded.config == result.config
    assert_frame_equal(loaded.events, result.events)
    assert list(loaded.per_cluster) == list(result.per_cluster)
    for name, part in result.per_cluster.items():
        again = loaded.per_cluster[name]
        assert again.config == part.config and again.run == part.run
        assert_frame_equal(again.events, part.events)
        assert_frame_equal(again.trace, part.trace)
        assert same_numbers(again.metrics(), part.metrics())
    assert_frame_equal(loaded.by_cluster(), result.by_cluster())


def test_the_story_of_a_fleet_job_is_told_on_its_cluster_with_its_nodes():
    """A job's story comes from its cluster's own log: it names the node by that cluster's
    number (the organisation's log numbers it after the clusters declared before)."""
    result = fleet_result()
    events, config = result.events, result.config
    single = events["gpus"] <= config.gpus_per_node
    starts = events[(events["event"] == "start") & (events["cluster"] == "b") & single]
    start = starts.iloc[len(starts) // 2]
    fleet_node = int(start["nodes"])
    local = fleet_node - first_nodes(config)[1]
    assert first_nodes(config)[1] == 3 and 0 <= local < 6
    own = result.per_cluster["b"].events
    mine = own[(own["job_id"] == start["job_id"]) & (own["event"] == "start")]
    assert str(local) in set(mine["nodes"])
    story = result.explain(start["job_id"])
    assert story.job_id == start["job_id"] and story.cluster == "b"
    assert story.text().startswith(f"job {start['job_id']} on cluster b\n"), story.text()
    assert f"started on node {local}" in story.text(), story.text()


def test_a_backlog_on_one_cluster_is_warned_naming_the_cluster():
    """Cluster a gets 30 day-long whole-node jobs on one node; b gets short ones."""
    long = [(f"a{i}", float(i), 8, DAY_S, "a") for i in range(30)]
    short = [(f"b{i}", 60.0 * i, 1, 60.0, "b") for i in range(30)]
    config = SimConfig(policy="fifo", days=2.0, warmup_days=0.0).with_params(clusters="a:8,b:8")
    result = simulate(config, trace=rows(*long, *short))
    warnings = result.warnings
    assert any(w.startswith("fifo on a: a backlog") for w in warnings), warnings
    assert not any(w.startswith("fifo on b:") for w in warnings), warnings
    assert result.per_cluster["a"].warnings and not result.per_cluster["b"].warnings
    assert result.summary()["warnings"] == warnings
    codes = result.warning_codes  # the organisation's, then each cluster's, sentence by sentence
    assert len(codes) == len(warnings)
    assert (
        codes[warnings.index(next(w for w in warnings if w.startswith("fifo on a: a backlog")))]
        == "backlog"
    )


def test_every_clusters_own_log_has_the_event_logs_dtypes():
    result = fleet_result()
    for name, part in result.per_cluster.items():
        assert part.events.dtypes.to_dict() == {**EVENT_DTYPES}, name


def test_one_cluster_results_have_no_clusters():
    result = simulate(SimConfig(gpus=16, days=0.5, policy="fifo"))
    assert result.per_cluster == {}
    with pytest.raises(ValueError, match="one cluster"):
        result.by_cluster()


def test_metrics_frame_of_layouts_keeps_the_layout_labels():
    frame = metrics_frame(layouts())
    assert list(frame["run"]) == ["today", "merged", "split"]
    assert frame["jobs"].nunique() == 1  # one workload


# ----- the command line ----------------------------------------------------------------------
def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_simulate_of_a_fleet_prints_a_row_per_cluster_and_the_organisation(capsys):
    common = ("simulate", "--policy", "fifo", "--clusters", "a:88,b:128", "--days", "2")
    code, out, _ = cli(capsys, *common, "--json")
    assert code == 0
    data = json.loads(out)
    rows_ = data["clusters"]
    assert [r["cluster"] for r in rows_] == ["a", "b", ORGANISATION]
    assert [r["gpus"] for r in rows_] == [88, 128, 216]
    assert rows_[-1]["jobs"] == data["jobs"] == rows_[0]["jobs"] + rows_[1]["jobs"]
    assert rows_[-1]["occupancy"] == pytest.approx(data["occupancy"])
    code, out, _ = cli(capsys, *common, "--fair-share", "cluster")
    assert code == 0
    table = out[out.index("  cluster ") :].splitlines()
    assert [line.split()[0] for line in table] == ["cluster", "a", "b", ORGANISATION]


def test_cli_compare_layouts_runs_one_policy_on_each_layout(capsys):
    code, out, err = cli(
        capsys,
        "compare",
        "--clusters",
        "a:32,b:48",
        "--days",
        "1",
        "--policies",
        "fifo",
        "--layouts",
        "today=as-is",
        "one=merge:a+b",
        "two=move:b:a:16",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert [d["policy"] for d in data] == ["fifo"] * 3
    assert [[r["cluster"] for r in d["clusters"]] for d in data] == [
        ["a", "b", ORGANISATION],
        ["a", ORGANISATION],
        ["a", "b", ORGANISATION],
    ]
    assert [d["clusters"][0]["run"] for d in data] == ["today", "one", "two"]
    assert [d["run"] for d in data] == ["today", "one", "two"]
    assert [d["clusters"][0]["gpus"] for d in data] == [32, 80, 48]
    assert len({d["jobs"] for d in data}) == 1


def test_cli_compare_of_layouts_of_different_sizes_gives_each_its_gpus(capsys):
    """The title once said every layout had the first one's GPUs."""
    code, out, err = cli(
        capsys, "compare", "--clusters", "a:32,b:48", "--days", "1", "--policies", "fifo",
        "--layouts", "today=as-is", "less=resize:b:16",
    )  # fmt: skip
    assert code == 0, err
    title, head, gpus = out.splitlines()[:3]
    assert "GPUs" not in title and title.split(",")[0].endswith(" jobs")
    assert head.split() == ["today", "less"] and gpus.split() == ["gpus", "80", "48"]


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        ("one=merge:a+x", "no cluster 'x'"),
        ("one=split:a:x", "--layouts split:a:x"),
        ("one=frob", "'frob' is not name:gpus"),
        ("one=move:a:b:3", "move whole nodes"),
        ("noequals", "expected LABEL=LAYOUT"),
    ],
)
def test_cli_refuses_a_bad_layout_with_status_2_and_one_line(capsys, layout, words):
    code, out, err = cli(
        capsys, "compare", "--clusters", "a:32,b:48", "--days", "1", "--layouts", "x=as-is", layout
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err, err


def test_cli_refuses_layouts_of_one_cluster_and_gpus_of_a_fleet(capsys):
    code, _, err = cli(capsys, "compare", "--days", "1", "--layouts", "x=as-is")
    assert code == 2 and "the run has one cluster" in err and err.count("\n") == 1
    code, _, err = cli(
        capsys, "simulate", "--policy", "fifo", "--clusters", "a:8", "--gpus", "64", "--days", "1"
    )
    assert code == 2 and "a fleet's GPUs are its clusters'" in err and err.count("\n") == 1


# ----- the shipped fleet scenario ------------------------------------------------------------
def test_the_shipped_fleet_scenario_is_ai2_shaped():
    scenario = load_scenario("scenario-fleet-ai2.yaml")
    config = scenario.config
    sizes = [c.gpus for c in config.clusters]
    assert min(sizes) == 88 and max(sizes) == 1024 and len(sizes) >= 3
    assert config.gpus == sum(sizes) and config.fair_share == "organisation"
    trace = prepare(replace(config, days=2.0), budgets=scenario.budgets).trace
    assert 140 <= trace["user"].nunique() <= 160
    assert set(trace["cluster"]) == {c.name for c in config.clusters}
    assert set(trace["project"]) - {""} <= set(scenario.budgets.leaf_of)


@pytest.mark.thorough
def test_a_short_run_of_the_shipped_fleet_scenario_reports_every_cluster():
    scenario = load_scenario("scenario-fleet-ai2.yaml")
    result = simulate(replace(scenario.config, days=2.0), budgets=scenario.budgets)
    table = result.by_cluster()
    assert list(table["cluster"]) == [*(c.name for c in scenario.config.clusters), ORGANISATION]
    assert (table["jobs"] > 0).all() and (table["occupancy"] > 0.5).all()
    assert table["jobs"].iloc[-1] == table["jobs"].iloc[:-1].sum()


# ----- fixes after review --------------------------------------------------------------------
def test_no_cluster_may_take_the_name_of_the_organisations_row():
    with pytest.raises(ParamError, match="organisation"):
        SimConfig(clusters="organisation:16,b:8")


def test_clusters_are_checked_against_the_node_size_given_with_them():
    config = SimConfig().with_params(gpus_per_node=4, clusters="a:12,b:8")
    assert config.gpus_per_node == 4 and config.gpus == 20
    assert SimConfig.from_flat(config.flat()).clusters == config.clusters


def test_cli_layouts_refuse_twice_the_same_label_and_unsafe_folder_names(capsys):
    common = ("compare", "--clusters", "a:16,b:8", "--days", "1", "--layouts")
    code, _, err = cli(capsys, *common, "x=as-is", "x=merge:a+b")
    assert code == 2 and "given twice" in err
    code, _, err = cli(capsys, *common, "..=as-is")
    assert code == 2 and "'..'" in err


def test_cli_layouts_apply_the_policys_knobs(capsys):
    argv = ("compare", "--clusters", "a:16,b:8", "--days", "1", "--layouts", "x=as-is")
    code, out, _ = cli(capsys, *argv, "--policies", "impactful", "--cap-hours", "2", "--json")
    assert code == 0
    code, out2, _ = cli(capsys, *argv, "--policies", "impactful", "--json")
    assert json.loads(out)[0]["preemptions"] != json.loads(out2)[0]["preemptions"]
    code, _, err = cli(capsys, *argv, "--policies", "fifo", "--cap-hours", "2")
    assert code == 2 and "cap_hours: not a knob of fifo" in err


def test_a_fleets_backlog_advice_names_its_clusters_not_gpus():
    long = [(f"a{i}", float(i), 8, DAY_S, "a") for i in range(30)]
    config = SimConfig(policy="fifo", days=2.0, warmup_days=0.0).with_params(clusters="a:8,b:8")
    result = simulate(config, trace=rows(*long))
    backlog = [w for w in result.warnings if "a backlog" in w]
    assert backlog and all("resize_cluster" in w and "(gpus)" not in w for w in backlog)


def test_unnamed_windows_keep_their_place_in_the_fleets_plan_as_their_name():
    config = SimConfig(days=2).with_params(clusters="a:64,b:32")
    config = config.with_maintenance(
        {"announce_h": 10, "down_h": 12, "share": 0.25, "cluster": "a"},
        {"announce_h": 20, "down_h": 22, "share": 0.25, "cluster": "b"},
        {"announce_h": 30, "down_h": 32, "share": 0.25},
    )
    assert [w.name for w in config.cluster_maintenance(0)] == ["window 1", "window 3"]
    assert [w.name for w in config.cluster_maintenance(1)] == ["window 2", "window 3"]


def test_a_fleets_layout_is_a_sweep_axis_from_a_grid_file_or_the_command_line(tmp_path, capsys):
    """It was refused as "not a knob of any of the sweep's policies"; on the command line its
    layouts are parted by semicolons (a layout has commas)."""
    from impactlab.runs.sweep import sweep

    layouts = ["a:32,b:16", "a:16,b:32"]
    frame = sweep(SimConfig(days=0.5), {"clusters": layouts}, [0], backend="serial")
    assert frame["clusters"].tolist() == layouts and frame["gpus"].tolist() == [48, 48]
    assert frame["impact"].nunique() == 2  # (two fleets, two results)
    code, out, err = cli(
        capsys, "sweep", "--grid", "clusters=" + ";".join(layouts), "--days", "0.5",
        "--backend", "serial", "--no-progress", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert [row["clusters"] for row in json.loads(out)] == layouts


def test_a_cluster_offered_far_more_or_less_than_it_can_take_is_warned_of(caplog):
    """The load check looked at the whole fleet only: here the fleet as a whole is offered a
    sensible load, yet one cluster takes every job and the other none."""
    rng = np.random.default_rng(1)
    n = 1200  # one-hour jobs over two days: 25 GPUs busy, 0.62x the fleet's 40
    trace = validate_trace(
        pd.DataFrame(
            {
                "job_id": [f"j{i}" for i in range(n)],
                "submit_s": np.sort(rng.uniform(0, 2 * DAY_S, n)).round(),
                "gpus": 1,
                "duration_s": 3600.0,
                "project": "p",
                "cluster": "small",
            }
        )
    )
    fleet = SimConfig(days=2, warmup_days=0).with_params(clusters="small:8,big:32")
    with caplog.at_level("WARNING", logger="impactlab"):
        simulate(fleet, trace=trace)
    text = caplog.text
    assert "capacity of 40 GPUs" not in text and "cluster small" not in text  # (3.1x: fine)
    assert "cluster big: the trace offers it 0.00x the capacity of its 32 GPUs" in text
    caplog.clear()
    with caplog.at_level("WARNING", logger="impactlab"):
        simulate(SimConfig(gpus=40, days=2, warmup_days=0), trace=trace)
    assert "the trace names clusters (small) in its cluster column; one cluster of 40 GPUs" in (
        caplog.text
    )
