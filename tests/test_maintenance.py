"""Planned maintenance (docs/model.md, "Planned maintenance"): hand-computed cases of each
policy's way of emptying announced nodes, the rules of the log under a plan for every
registered policy (synthetic and random traces), the acceptance comparison of the issue, the
plan's loader, config and scenario forms, and the CLI's ``--maintenance``.

The rules: at ``announce_h`` a window's nodes are cordoned (no job starts there); a job running
there is evicted when ``Policy.vacate_at`` says, if before the deadline (at the next cycle
boundary with a cycle); at ``down_h`` the jobs left are evicted ("stop") or waited for ("wait");
a node goes down once empty (``early``), or once empty and ``down_h`` has come, and is back
``hours`` later.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from functools import cache, cached_property
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import CODES, DAY_S, examples, run_tiny, small_tree, traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impactlab import (
    REGISTRY,
    GeneratorConfig,
    HealthConfig,
    Maintenance,
    MaintenanceError,
    ParamError,
    SimConfig,
    generate,
    load_maintenance,
    load_scenario,
    make_policy,
    simulate,
)
from impactlab.analysis.metrics import merged_spans, window_name
from impactlab.analysis.tables import held_steps
from impactlab.base.config import check_maintenance
from impactlab.cli import main
from impactlab.inputs.scenario import ScenarioError, scenario_dict
from impactlab.policies.impactful import Impactful
from impactlab.sim.engine import kept_progress
from impactlab.sim.events import jobs_from_trace
from impactlab.sim.maintenance import MaintenancePlan
from impactlab.sim.policy import DRAIN_NOTE

H = 3600.0
POLICIES = sorted(REGISTRY)  # (with the plug-in policy conftest registers)
NEVER_VACATE = ("fifo", "fairshare", "shortest")  # no preemption: the protocol's default


# ----- hand-computed cases -------------------------------------------------------------------
def job(job_id: str, duration_h: float, submit_h: float = 0.0, gpus: int = 8, **extra) -> dict:
    """A trace row (times in hours)."""
    return {
        "job_id": job_id,
        "submit_s": submit_h * H,
        "gpus": gpus,
        "duration_s": duration_h * H,
        **extra,
    }


def planned(rows: list[dict], policy: str, *windows: Maintenance, **config):
    """A hand-written trace under a plan: decisions at once (``helpers.INSTANT``) unless the
    case sets a latency, one day, the small budget tree."""
    config.setdefault("horizon_s", DAY_S)
    return run_tiny(rows, policy=policy, budgets=small_tree(), maintenance=windows, **config)


def at(events: pd.DataFrame, event: str, job_id: str = "", node: int | None = None) -> list:
    """Times of the ``event`` rows of a job (or of the node rows, ``job_id=""``)."""
    rows = events[(events["event"] == event) & (events["job_id"] == job_id)]
    if node is not None:
        rows = rows[rows["nodes"] == str(node)]
    return rows["t_s"].tolist()


def row_of(events: pd.DataFrame, event: str, job_id: str):
    """The one ``event`` row of ``job_id``."""
    rows = events[(events["event"] == event) & (events["job_id"] == job_id)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.mark.parametrize("early", [True, False])
def test_legacy_stops_an_opted_out_squatter_at_the_deadline_and_the_node_goes_down_then(early):
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=early)
    result = planned([job("sq", 10, preemptible=False)], "legacy", window)
    ev = result.events
    assert at(ev, "cordon", node=0) == [1 * H]
    evict = row_of(ev, "evict", "sq")
    assert evict.t_s == 5 * H and evict.detail.endswith("deadline") and evict.lost_s == 0.0
    assert at(ev, "requeue", "sq") == [5 * H]
    assert at(ev, "vacated", node=0) == at(ev, "maintenance_down", node=0) == [5 * H]
    assert at(ev, "maintenance_up", node=0) == [7 * H]
    # back from the maintenance, it goes on from its last checkpoint (every 30 min: all kept)
    assert at(ev, "start", "sq") == [0.0, 7 * H]
    assert at(ev, "finish", "sq") == [7 * H + 60 + 5 * H]
    assert result.maintenance()["free_h"].tolist() == [4.0]
    summary = result.summary()
    assert summary["maintenance_free_h_max"] == 4.0 and summary["maintenance_evicted"] == 1


def test_legacy_waits_for_an_opted_out_squatter_when_the_window_waits():
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), at_deadline="wait")
    result = planned([job("sq", 10, preemptible=False)], "legacy", window)
    ev = result.events
    assert at(ev, "evict", "sq") == []
    assert at(ev, "finish", "sq") == [10 * H]
    assert at(ev, "vacated", node=0) == at(ev, "maintenance_down", node=0) == [10 * H]
    assert at(ev, "maintenance_up", node=0) == [12 * H]
    assert result.maintenance()["free_h"].tolist() == [9.0]


@pytest.mark.parametrize("early, down_h", [(True, 1), (False, 5)])
def test_legacy_evicts_a_preemptible_job_at_the_announcement_with_no_grace_period(early, down_h):
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=early)
    rows = [job("p", 10, checkpoint_s=1000.0)]
    result = planned(rows, "legacy", window, grace_s=300.0)
    ev = result.events
    evict = row_of(ev, "evict", "p")
    assert evict.t_s == 1 * H and evict.detail.endswith("released by the policy")
    assert evict.lost_s == 600.0  # 3600 s done, checkpoints every 1000 s
    assert at(ev, "requeue", "p") == [1 * H]  # (a preemption would hold its GPUs 300 s)
    assert at(ev, "vacated", node=0) == [1 * H]
    assert at(ev, "maintenance_down", node=0) == [down_h * H]
    assert at(ev, "maintenance_up", node=0) == [(down_h + 2) * H]
    assert at(ev, "start", "p") == [0.0, (down_h + 2) * H]  # (33,000 s of work left)
    assert at(ev, "finish", "p") == [(down_h + 2) * H + 60 + 33_000]
    table = result.maintenance()
    assert table["free_h"].tolist() == [0.0]
    assert table["idle_gpu_hours"].tolist() == [(down_h - 1) * 8.0]
    assert table["evicted_lost_gpu_hours"].tolist() == pytest.approx([600 * 8 / H])


@pytest.mark.parametrize("checkpoint_s, lost_s", [(0.0, 0.0), (1000.0, 200.0), (math.inf, 7200.0)])
def test_impactful_evicts_a_funded_job_at_the_end_of_its_contract(checkpoint_s, lost_s):
    window = Maintenance(announce_h=1, down_h=10, hours=3, nodes=(0,), early=False)
    rows = [job("f", 20, project="pa1", min_runtime_s=math.inf, checkpoint_s=checkpoint_s)]
    result = planned(rows, "impactful", window, policy_knobs={"cap_hours": 2})
    ev = result.events
    evict = row_of(ev, "evict", "f")
    assert evict.t_s == 2 * H and evict.detail.endswith("released by the policy")
    assert evict.lost_s == lost_s
    assert at(ev, "requeue", "f") == [2 * H]
    assert at(ev, "vacated", node=0) == [2 * H]
    assert at(ev, "maintenance_down", node=0) == [10 * H]
    assert at(ev, "maintenance_up", node=0) == [13 * H]
    assert at(ev, "start", "f") == [0.0, 13 * H]
    table = result.maintenance()
    assert table["free_h"].tolist() == [1.0]
    assert table["evicted_lost_gpu_hours"].tolist() == pytest.approx([lost_s * 8 / H])


def test_impactful_stops_a_job_protected_past_the_deadline_at_the_deadline():
    window = Maintenance(announce_h=1, down_h=5, hours=3, nodes=(0,))
    rows = [job("f", 20, project="pa1", min_runtime_s=math.inf)]
    ev = planned(rows, "impactful", window).events  # (protected for 8 h)
    evict = row_of(ev, "evict", "f")
    assert evict.t_s == 5 * H and evict.detail.endswith("deadline")
    assert at(ev, "maintenance_down", node=0) == [5 * H]


@pytest.mark.parametrize("project, protect", [("", False), ("pa1", None)])
def test_impactful_evicts_an_unprotected_job_at_the_announcement(project, protect):
    """Unallocated work has no contract; nor has a funded job that declares no minimum
    runtime."""
    window = Maintenance(announce_h=1.25, down_h=10, hours=3, nodes=(0,))
    extra = {"min_runtime_s": 0.0} if protect is None else {}
    ev = planned([job("u", 20, project=project, **extra)], "impactful", window).events
    evict = row_of(ev, "evict", "u")
    assert evict.t_s == 1.25 * H and evict.detail.endswith("released by the policy")
    assert evict.lost_s == 900.0  # 4500 s done, checkpoints every 30 min
    assert at(ev, "vacated", node=0) == at(ev, "maintenance_down", node=0) == [1.25 * H]


@pytest.mark.parametrize("policy", NEVER_VACATE)
@pytest.mark.parametrize("early", [True, False])
def test_a_policy_that_never_preempts_lets_a_job_end_before_the_deadline(policy, early):
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=early)
    result = planned([job("a", 3)], policy, window)
    ev = result.events
    assert at(ev, "evict", "a") == []
    assert at(ev, "finish", "a") == [3 * H]
    assert at(ev, "vacated", node=0) == [3 * H]
    down = 3 * H if early else 5 * H  # (not before the deadline unless early)
    assert at(ev, "maintenance_down", node=0) == [down]
    assert at(ev, "maintenance_up", node=0) == [down + 2 * H]
    table = result.maintenance()
    assert table["free_h"].tolist() == [2.0]  # its end minus the announcement
    assert table["idle_gpu_hours"].tolist() == [(down - 3 * H) * 8 / H]


@pytest.mark.parametrize("policy", NEVER_VACATE)
def test_a_policy_that_never_preempts_stops_a_job_at_the_deadline(policy):
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,))
    ev = planned([job("a", 10)], policy, window).events
    evict = row_of(ev, "evict", "a")
    assert evict.t_s == 5 * H and evict.detail.endswith("deadline")
    assert at(ev, "maintenance_down", node=0) == [5 * H]


def test_with_a_cycle_impactful_evicts_at_the_boundary_after_the_contract_ends():
    window = Maintenance(announce_h=1, down_h=10, hours=3, nodes=(0,))
    rows = [job("f", 20, project="pa1", min_runtime_s=math.inf, checkpoint_s=1000.0)]
    result = planned(rows, "impactful", window, cycle_s=600.0, policy_knobs={"cap_hours": 1.9})
    ev = result.events
    assert at(ev, "start", "f")[0] == 0.0
    evict = row_of(ev, "evict", "f")
    assert evict.t_s == 7200.0  # the contract ends at 6840 s; the next boundary of 600 s
    assert evict.lost_s == 200.0


def test_with_a_cycle_legacy_evicts_at_the_boundary_after_the_announcement():
    window = Maintenance(announce_h=1.05, down_h=10, hours=3, nodes=(0,))  # at 3780 s
    ev = planned([job("p", 20)], "legacy", window, cycle_s=600.0).events
    assert at(ev, "cordon", node=0) == [3780.0]
    assert row_of(ev, "evict", "p").t_s == 4200.0


@pytest.mark.parametrize("early", [True, False])
def test_no_job_starts_on_a_cordoned_node_until_it_is_back(early):
    """Without the plan, ``c`` would start on node 0 when ``a`` ends at 2 h."""
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=early)
    rows = [job("a", 2), job("b", 10), job("c", 4, submit_h=0.5)]
    ev = planned(rows, "fifo", window, gpus=16).events
    assert at(ev, "start", "a") == at(ev, "start", "b") == [0.0]
    assert row_of(ev, "start", "a").nodes == "0"
    up = (2 if early else 5) * H + 2 * H
    assert at(ev, "maintenance_up", node=0) == [up]
    start = row_of(ev, "start", "c")
    assert (start.t_s, start.nodes) == (up, "0")
    without = run_tiny(rows, policy="fifo", gpus=16, horizon_s=DAY_S).events
    assert at(without, "start", "c") == [2 * H]


def test_a_start_decided_before_the_announcement_begins_there_after_its_victims_grace():
    """The one start a cordoned node sees: decided before the announcement, it waits for the
    GPUs of the job it preempted (grace period) and begins after it. (The invariants below allow
    a start up to one grace period after a cordon for this reason.)"""
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,))
    rows = [job("a", 10, priority=0), job("b", 10, submit_h=0.95, priority=1, preemptible=False)]
    ev = planned(rows, "legacy", window, grace_s=300.0).events
    assert at(ev, "preempt", "a") == [3420.0]
    assert at(ev, "cordon", node=0) == [3600.0]
    assert at(ev, "start", "b")[0] == 3720.0  # (b opted out: it stays until the deadline)
    evict = row_of(ev, "evict", "b")
    assert (evict.t_s, evict.lost_s) == (5 * H, 1680.0)  # 14,280 s done, checkpoints of 1800 s


def test_free_gpus_of_a_cordoned_node_take_no_new_job():
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=False)
    rows = [job("a", 3, gpus=4), job("b", 1, submit_h=2, gpus=4)]
    ev = planned(rows, "fifo", window).events
    assert at(ev, "start", "b") == [7 * H]  # 4 GPUs free from 2 h, but closed until 7 h


def test_a_closed_node_has_no_free_gpus_and_a_node_down_for_maintenance_is_not_healthy():
    """The same plan by the hour: a holds 4 GPUs until 3 h; the node is closed from 1 h, down
    from 5 h to 7 h; b holds 4 GPUs from 7 h to 8 h."""
    window = Maintenance(announce_h=1, down_h=5, hours=2, nodes=(0,), early=False)
    rows = [job("a", 3, gpus=4), job("b", 1, submit_h=2, gpus=4)]
    result = planned(rows, "fifo", window, horizon_s=10 * H)
    free = result.free_block_series(bucket_s=H)
    assert free["free_gpus"].tolist() == [4, 0, 0, 0, 0, 0, 0, 4, 8, 8]
    assert free["largest_free_gpus"].tolist() == free["free_gpus"].tolist()
    healthy = result.health_series(bucket_s=H)["healthy_gpus"]
    assert healthy.tolist() == [8, 8, 8, 8, 8, 0, 0, 8, 8, 8]
    assert healthy.mean() == result.summary()["availability"] * 8  # no warm-up here
    assert result.health_series(bucket_s=H)["failures"].sum() == 0
    # closed from 1 h to 5 h, 8 GPUs, of which a held 4 until 3 h: 32 - 8 GPU-hours idle
    assert result.maintenance()["idle_gpu_hours"].tolist() == [24.0]
    assert result.summary()["maintenance_idle_gpu_hours"] == 24.0


def _first_failure(policy: str, repair: str, **config) -> tuple[int, float, pd.DataFrame]:
    """A small cluster with node failures and no plan: the first node to fail, when, and its
    node rows (failures before an announcement do not depend on the plan)."""
    health = HealthConfig(mtbf_hours=20, repair=repair, human_fraction=0.0)
    ev = run_tiny([job("a", 0.1, gpus=1)], policy, gpus=16, horizon_s=2 * DAY_S, health=health)
    ev = ev.events
    first = ev[ev["event"] == "node_down"].iloc[0]
    node = int(first.nodes)
    return node, float(first.t_s), ev[(ev["job_id"] == "") & (ev["nodes"] == first.nodes)]


BUSY = [job(f"q{k}", 3, submit_h=0.1 * k) for k in range(12)]  # (a queue all day)


def test_a_node_down_for_repair_at_the_announcement_is_closed_when_repaired():
    node, failed, rows = _first_failure("fifo", "automatic")
    repaired = float(rows[rows["event"] == "node_up"]["t_s"].iloc[0])
    announce_h, down_h = (failed + 600) / H, repaired / H + 1
    assert announce_h < repaired / H
    health = HealthConfig(mtbf_hours=20, repair="automatic", human_fraction=0.0)
    window = Maintenance(announce_h=announce_h, down_h=down_h, hours=2, nodes=(node,), early=False)
    result = planned(BUSY, "fifo", window, gpus=16, horizon_s=2 * DAY_S, health=health)
    ev = result.events
    mine = ev[(ev["job_id"] == "") & (ev["nodes"] == str(node))]
    assert mine["event"].tolist()[:6] == [
        "node_down",
        "cordon",
        "node_up",
        "vacated",
        "maintenance_down",
        "maintenance_up",
    ]
    assert at(ev, "cordon", node=node) == [announce_h * H]  # (announced, closed once repaired)
    assert at(ev, "vacated", node=node) == [repaired]
    assert at(ev, "maintenance_down", node=node) == [down_h * H]
    assert at(ev, "maintenance_up", node=node) == [down_h * H + 2 * H]
    starts = ev[(ev["event"] == "start") & ev["nodes"].str.split(",").map(lambda n: str(node) in n)]
    assert not starts["t_s"].between(announce_h * H, (down_h + 2) * H, inclusive="left").any()
    log = Log(result)
    for check in CHECKS:
        check(log)


@pytest.mark.parametrize("early", [True, False])
def test_a_failed_node_announced_before_it_is_noticed_goes_down_once_repaired(early):
    """Manual repair: the failure is noticed ``detect_hours`` after it, the node repaired by a
    person a day later; the maintenance waits for the repair."""
    node, failed, rows = _first_failure("fifo", "manual")
    repaired = float(rows[rows["event"] == "node_up"]["t_s"].iloc[0])
    health = HealthConfig(mtbf_hours=20, repair="manual", human_fraction=0.0)
    announce_h = failed / H + 1  # (noticed at failed + 4 h)
    window = Maintenance(
        announce_h=announce_h, down_h=announce_h + 6, hours=5, nodes=(node,), early=early
    )
    result = planned(BUSY, "fifo", window, gpus=16, horizon_s=2 * DAY_S, health=health)
    ev = result.events
    assert at(ev, "cordon", node=node) == [announce_h * H]
    assert at(ev, "node_up", node=node)[0] == repaired
    assert at(ev, "vacated", node=node) == at(ev, "maintenance_down", node=node) == [repaired]
    assert at(ev, "maintenance_up", node=node) == [repaired + 5 * H]
    assert result.maintenance()["free_h"].tolist() == pytest.approx([(repaired / H - announce_h)])
    # out of service once, from the failure until back from maintenance (not twice while both)
    closed = result._closed[result._closed["node"] == node]
    assert closed[["down_s", "up_s"]].to_numpy().tolist()[0] == [failed, repaired + 5 * H]
    # so the GPUs jobs hold on healthy nodes, once all changes at a time are in, never go below 0
    att = result._attempts
    t, held = held_steps(att, result._closed, np.zeros(len(att), int), 1, 8)
    assert held[np.r_[t[1:] != t[:-1], True]].min() >= 0


def test_spans_of_a_node_that_overlap_or_touch_are_merged():
    spans = pd.DataFrame(
        {
            "node": [2, 1, 1, 1, 2, 1],
            "down_s": [0.0, 10.0, 0.0, 30.0, 5.0, 40.0],
            "up_s": [5.0, 20.0, 12.0, 35.0, 6.0, 45.0],
        }
    )
    merged = merged_spans(spans)
    assert merged.to_numpy().tolist() == [[1, 0, 20], [1, 30, 35], [1, 40, 45], [2, 0, 6]]
    assert merged_spans(spans.iloc[:0]).empty


def test_a_node_in_a_maintenance_window_does_not_fail():
    health = HealthConfig(mtbf_hours=1, repair="automatic", human_fraction=0.0)
    window = Maintenance(announce_h=2, down_h=20, hours=2, nodes=(1,), early=False)
    ev = planned(
        [job("a", 0.1, gpus=1)], "fifo", window, gpus=16, horizon_s=DAY_S, health=health
    ).events
    down = ev[(ev["event"] == "node_down") & (ev["nodes"] == "1")]["t_s"]
    assert not down.between(2 * H, 22 * H, inclusive="left").any(), down.tolist()
    other = ev[(ev["event"] == "node_down") & (ev["nodes"] == "0")]["t_s"]
    assert other.between(2 * H, 22 * H).sum() >= 3  # (a 1 h MTBF fails the other node often)


def test_a_window_announced_while_the_last_one_still_waits_for_its_node():
    plan = (
        Maintenance(announce_h=1, down_h=2, hours=1, nodes=(0,), at_deadline="wait", name="A"),
        Maintenance(announce_h=3.5, down_h=5, hours=1, nodes=(0,), name="B"),
    )
    ev = planned([job("sq", 4)], "fifo", *plan).events  # A waits for sq until 4 h
    assert [window_name(d) for d in ev[ev["event"] == "cordon"]["detail"]] == ["A", "B"]


def test_a_window_announced_while_the_node_is_down_for_the_last_one():
    plan = (
        Maintenance(announce_h=1, down_h=2, hours=1, nodes=(0,), at_deadline="wait", name="A"),
        Maintenance(announce_h=3.5, down_h=5, hours=1, nodes=(0,), name="B"),
    )
    ev = planned([job("sq", 3.2)], "fifo", *plan).events  # A down from 3.2 h to 4.2 h
    node_rows = ev[ev["job_id"] == ""]
    ups = node_rows[node_rows["event"] == "maintenance_up"]
    assert [window_name(d) for d in ups["detail"]] == ["A", "B"]
    # B takes the node when A gives it back, empty: down at once (early), back 1 h later
    assert at(ev, "maintenance_down", node=0) == [3.2 * H, pytest.approx(4.2 * H)]
    assert at(ev, "maintenance_up", node=0) == [pytest.approx(4.2 * H), pytest.approx(5.2 * H)]


class FakeOps:
    """MaintenanceOps without an engine: jobs per node, a heap of calls, a record."""

    def __init__(self, jobs_on: dict[int, list[int]], vacate: dict[int, float], repair: set[int]):
        self.now, self.calls, self.seen = 0.0, [], []
        self.jobs, self.vacate, self.in_repair = jobs_on, vacate, repair
        self.plan: MaintenancePlan | None = None

    def at(self, t, fn, *args):
        self.calls.append((t, len(self.calls), fn, args))
        self.calls.sort(key=lambda c: c[:2])

    def announce(self, node, detail):
        self.seen.append((self.now, "cordon", node))

    def can_close(self, node):
        return node not in self.in_repair

    def close(self, node):
        self.seen.append((self.now, "close", node))

    def jobs_on(self, node):
        return sorted(self.jobs.get(node, []))

    def vacate_at(self, j):
        return self.vacate[j]

    def evict_at(self, t, j, detail):
        self.at(t, self._evict, j, detail)

    def _evict(self, j, detail):
        for node, jobs in self.jobs.items():
            if j in jobs:
                jobs.remove(j)
                self.seen.append((self.now, f"evict {j}: {detail.partition('; ')[2]}", node))
                self.plan.node_freed(node)

    def is_empty(self, node):
        return not self.jobs.get(node)

    def vacated(self, node, detail):
        self.seen.append((self.now, "vacated", node))

    def take_down(self, node, detail):
        self.seen.append((self.now, "down", node))

    def bring_up(self, node, detail):
        self.seen.append((self.now, "up", node))

    def repair(self, node):
        self.in_repair.discard(node)
        self.seen.append((self.now, "repaired", node))
        self.plan.repaired(node)

    def run(self, until: float) -> None:
        while self.calls and self.calls[0][0] < until:
            self.now, _, fn, args = self.calls.pop(0)
            fn(*args)


def test_the_plan_needs_only_maintenance_ops_not_an_engine():
    # node 0 runs job 7 (the policy lets it go at 2 h) and job 8 (never); node 1 is down for
    # repair until 4 h; node 2 runs job 9, which the policy would let go after the deadline
    ops = FakeOps({0: [7, 8], 2: [9]}, {7: 2 * H, 8: math.inf, 9: 4 * H}, {1})
    window = Maintenance(announce_h=1, down_h=3, hours=2, nodes=(0, 1, 2), early=False)
    plan = ops.plan = MaintenancePlan(ops, (window,), node_count=3)
    plan.start()
    ops.at(1.5 * H, lambda: ops.seen.append((ops.now, "in window", int(plan.in_window(1)))))
    ops.at(4 * H, ops.repair, 1)
    ops.run(until=10 * H)
    assert ops.seen == [
        (1 * H, "cordon", 0),
        (1 * H, "close", 0),
        (1 * H, "cordon", 1),
        (1 * H, "cordon", 2),
        (1 * H, "close", 2),
        (1.5 * H, "in window", 1),
        (2 * H, "evict 7: released by the policy", 0),
        (3 * H, "evict 8: deadline", 0),
        (3 * H, "vacated", 0),
        (3 * H, "down", 0),
        (3 * H, "evict 9: deadline", 2),
        (3 * H, "vacated", 2),
        (3 * H, "down", 2),
        (4 * H, "repaired", 1),
        (4 * H, "close", 1),
        (4 * H, "vacated", 1),
        (4 * H, "down", 1),
        (5 * H, "up", 0),
        (5 * H, "up", 2),
        (6 * H, "up", 1),
    ]
    assert not plan.in_window(0) and not plan.in_window(1)


# ----- the log under a plan, replayed ----------------------------------------------------------
# test_invariants.LIFECYCLE with evictions: an eviction is followed at once by a requeue.
LIFECYCLE = re.compile(r"S(R[PF]Q|RPKB|REQ)*(RD?|W|RPK?)?")
NODE_EVENTS = ("cordon", "vacated", "maintenance_down", "maintenance_up")
TOL = 1e-6


def close(a: float, b: float) -> bool:
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def nodes_of(text: str) -> list[int]:
    return [int(n) for n in text.split(",")] if text else []


def boundary(t: float, cycle_s: float) -> float:
    """The first multiple of ``cycle_s`` at or after ``t`` (``t`` itself without a cycle)."""
    if not cycle_s:
        return t
    k = math.ceil(t / cycle_s)
    return k * cycle_s if k * cycle_s >= t else (k + 1) * cycle_s


class Log:
    """A run under a plan, its log split per job and per window and node."""

    def __init__(self, result):
        self.result, cfg = result, result.config
        self.cfg, self.per, self.n_nodes = cfg, cfg.gpus_per_node, cfg.nodes
        self.horizon_s, self.cycle_s, self.grace_s = cfg.horizon_s, cfg.cycle_s, cfg.grace_s
        self.events = list(result.events.itertuples(index=False))
        self.by_job: dict[str, list] = defaultdict(list)
        self.by_node: dict[tuple[str, int], list] = defaultdict(list)  # (window, node) -> rows
        for e in self.events:
            if e.job_id:
                self.by_job[e.job_id].append(e)
            elif e.event in NODE_EVENTS:
                self.by_node[window_name(e.detail), int(e.nodes)].append(e)
        self.rows = {r.job_id: r for r in result.trace.itertuples(index=False)}
        self.windows = {w.label(i): w for i, w in enumerate(cfg.maintenance)}  # label -> window

    def __repr__(self) -> str:
        return f"Log({self.cfg.policy}, {self.cfg.maintenance}, {len(self.events)} events)"

    @cached_property
    def repairs(self) -> dict[int, list[tuple[float, float]]]:
        """Per node, its failures: (node_down, node_up or inf)."""
        out: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for e in self.events:
            if e.event == "node_down":
                out[int(e.nodes)].append((e.t_s, math.inf))
            elif e.event == "node_up":
                out[int(e.nodes)][-1] = (out[int(e.nodes)][-1][0], e.t_s)
        return out

    def repaired_s(self, node: int, t: float) -> float:
        """When ``node``, failed at ``t``, is repaired (``t`` if it is not failed then)."""
        return next((up for down, up in self.repairs[node] if down <= t < up), t)

    def cordon_s(self, label: str, nodes: list[int]) -> float:
        """When window ``label`` first cordoned one of ``nodes``."""
        rows = (e for n in nodes for e in self.by_node.get((label, n), []))
        return min(e.t_s for e in rows if e.event == "cordon")

    @cached_property
    def contract_s(self) -> dict[str, float]:
        """impactful's contract of each job before placement (none on draining nodes or for
        a borrower of the reserve: see ``exempt``)."""
        policy = make_policy(self.cfg.policy, **self.cfg.policy_knobs)
        assert isinstance(policy, Impactful)
        jobs = jobs_from_trace(self.result.trace, self.result.tree, self.per)
        return {j.job_id: policy.contract_of(j) for j in jobs}

    @cached_property
    def reserve(self) -> set[int]:
        """impactful's interactive reserve: the highest-numbered nodes."""
        policy = make_policy(self.cfg.policy, **self.cfg.policy_knobs)
        k = policy.reserved_nodes(self.n_nodes)
        return set(range(self.n_nodes - k, self.n_nodes))

    def protection_s(self, start) -> float | None:
        """impactful's protection of the attempt begun by ``start``: none on nodes draining
        for a gang, unknown (None) on the reserve (a borrower has none), else the contract."""
        if start.detail.startswith(DRAIN_NOTE):
            return 0.0
        if set(nodes_of(start.nodes)) & self.reserve:
            return None
        return self.contract_s[start.job_id]


def evicts_with_starts(log: Log):
    """(evict row, the start row of its attempt) for every eviction."""
    for evs in log.by_job.values():
        start = None
        for e in evs:
            if e.event == "start":
                start = e
            elif e.event == "evict":
                yield e, start


def check_capacity_and_closed_nodes(log: Log) -> None:
    """(a) no node holds more GPUs than it has; (b) none holds any when it goes down for
    maintenance, nor while down; (c) no job starts on a cordoned node before it is back (a start
    decided before the cordon may begin within a grace period after it)."""
    used = [0] * log.n_nodes
    holding: dict[str, list[int]] = {}
    preempted: dict[str, list[int]] = {}
    cordoned: dict[int, list[float]] = {}  # node -> its announcements not yet over, in order
    down: set[int] = set()
    for e in log.events:
        nodes = nodes_of(e.nodes)
        if e.event == "start":
            for n in nodes:
                assert n not in down, f"{e}: started on a node down for maintenance"
                assert n not in cordoned or e.t_s <= cordoned[n][0] + log.grace_s, (
                    f"{e}: started on node {n}, cordoned at {cordoned[n][0]}"
                )
                used[n] += e.gpus // len(nodes)
            holding[e.job_id] = nodes
        freed: list[int] = []
        if e.event in ("finish", "fail", "evict"):
            freed = holding.pop(e.job_id)
            assert freed == nodes, f"{e}: other nodes than its start"
        elif e.event == "preempt":  # released after the grace period (its requeue or kill)
            preempted[e.job_id] = holding.pop(e.job_id)
            if not log.grace_s:  # at once without one: the node may be vacated before the requeue
                freed = preempted.pop(e.job_id)
        elif e.event in ("requeue", "kill"):
            freed = preempted.pop(e.job_id, [])
        for n in freed:
            used[n] -= e.gpus // len(freed)
        if e.event == "cordon":  # (a later window's waits for the one before to be over)
            cordoned.setdefault(nodes[0], []).append(e.t_s)
        elif e.event in ("vacated", "maintenance_down"):
            assert used[nodes[0]] == 0, f"{e}: {used[nodes[0]]} GPUs still held there"
            if e.event == "maintenance_down":
                down.add(nodes[0])
        elif e.event == "maintenance_up":
            down.discard(nodes[0])
            cordoned[nodes[0]].pop(0)
            if not cordoned[nodes[0]]:
                del cordoned[nodes[0]]
        assert all(0 <= u <= log.per for u in used), f"over capacity after {e}: {used}"
        assert not [n for n in down if used[n]], f"after {e}: a job holds GPUs on a down node"


def check_lifecycle(log: Log) -> None:
    """(d) each job follows the lifecycle with evictions, each requeued at once; an eviction
    keeps the progress up to the last checkpoint (a session's too: nothing is killed)."""
    for jid, evs in log.by_job.items():
        word = "".join(CODES[e.event] for e in evs)
        assert LIFECYCLE.fullmatch(word), f"job {jid}: {[e.event for e in evs]}"
        for a, b in pairwise(evs):
            if a.event == "evict":
                assert b.event == "requeue" and b.t_s == a.t_s, f"job {jid}: {a} then {b}"
        remaining, start = log.rows[jid].duration_s, None
        for e in evs:
            if e.event == "start":
                start = e
            elif e.event in ("preempt", "fail", "evict"):
                done = min(max(0.0, e.t_s - start.t_s - start.overhead_s), remaining)
                if e.event == "evict":
                    expected = done - kept_progress(done, log.rows[jid].checkpoint_s)
                    assert close(e.lost_s, expected), f"{e}: lost {e.lost_s}, not {expected}"
                remaining -= done - e.lost_s
    table = log.result.jobs.set_index("job_id")
    for jid, evs in log.by_job.items():
        assert table.loc[jid, "evicts"] == sum(e.event == "evict" for e in evs), jid


def check_evictions(log: Log) -> None:
    """(e) Who is evicted when: at the deadline only in a window that stops; before it only as
    the policy allows: never for a policy that does not preempt, at the announcement for a
    preemptible job under legacy, at the end of its protection (or the announcement) under
    impactful; each at the next cycle boundary."""
    policy = log.cfg.policy
    for e, start in evicts_with_starts(log):
        label, _, why = e.detail.removeprefix("maintenance=").partition("; ")
        window = log.windows[label]
        cordon_s = log.cordon_s(label, nodes_of(e.nodes))
        assert e.t_s >= cordon_s, f"{e}: before its node was cordoned"
        if why == "deadline":
            assert window.at_deadline == "stop", f"{e}: the window waits"
            assert e.t_s == boundary(window.down_h * H, log.cycle_s), f"{e}: not at the deadline"
            continue
        assert why == "released by the policy", e
        assert policy not in NEVER_VACATE, f"{e}: {policy} released a job"
        if policy == "legacy":
            assert log.rows[e.job_id].preemptible, f"{e}: the job opted out"
            assert e.t_s == boundary(cordon_s, log.cycle_s), f"{e}: not at the announcement"
        elif policy == "impactful":
            protection = log.protection_s(start)
            if protection is not None:
                end = start.t_s + protection
                assert e.t_s >= end - TOL * end, f"{e}: within its protection (to {end})"
                expected = boundary(max(cordon_s, end), log.cycle_s)
                assert close(e.t_s, expected), f"{e}: expected at {expected}"


def check_windows(log: Log) -> None:
    """(f) Each node of each window announced within the run: one cordon (at the announcement,
    or when repaired), then at most one vacated, down and up, in order, at the times the rules
    give; no row for a window announced after the run."""
    for label, w in log.windows.items():
        for node in w.node_list(log.n_nodes):
            rows = log.by_node.get((label, node), [])
            if w.announce_h * H >= log.horizon_s:
                assert not rows, f"{label}: announced after the run, yet {rows}"
                continue
            kinds = [e.event for e in rows]
            assert kinds == list(NODE_EVENTS[: len(kinds)]), f"{label}, node {node}: {kinds}"
            t = {e.event: e.t_s for e in rows}
            assert t["cordon"] == w.announce_h * H, rows[0]
            assert [e.t_s for e in rows] == sorted(e.t_s for e in rows)
            # closed once repaired, and once an earlier window on the node is over
            earlier_up = max(
                (
                    e.t_s
                    for (other, n), others in log.by_node.items()
                    if n == node and other != label and others[0].t_s < t["cordon"]
                    for e in others
                    if e.event == "maintenance_up" and e.t_s >= t["cordon"]
                ),
                default=-math.inf,
            )
            earlier_open = any(  # an earlier window that still holds the node at the end
                n == node
                and other != label
                and others[0].t_s < t["cordon"]
                and all(e.event != "maintenance_up" for e in others)
                for (other, n), others in log.by_node.items()
            )
            if earlier_open:
                assert kinds == ["cordon"], f"{label}, node {node}: {kinds} before its turn"
                continue
            repaired = max(log.repaired_s(node, t["cordon"]), earlier_up)
            deadline = w.down_h * H
            if "vacated" not in t:
                stop_by = max(boundary(deadline, log.cycle_s) + log.grace_s, repaired)
                assert w.at_deadline == "wait" or stop_by >= log.horizon_s, (
                    f"{label}, node {node}: not free after the deadline"
                )
                continue
            if repaired > t["cordon"]:
                assert t["vacated"] == repaired, f"{label}, node {node}: free before repaired"
            due = t["vacated"] if w.early else max(t["vacated"], deadline)
            if "maintenance_down" not in t:
                assert due >= log.horizon_s, f"{label}, node {node}: not down at {due}"
                continue
            assert close(t["maintenance_down"], due), f"{label}, node {node}: down, due {due}"
            back = t["maintenance_down"] + w.hours * H
            if "maintenance_up" in t:
                assert close(t["maintenance_up"], back), f"{label}, node {node}: up"
            else:
                assert back >= log.horizon_s - TOL * back, f"{label}, node {node}: never up"
    table = log.result.maintenance()
    for row in table.itertuples(index=False):
        assert close(row.free_h * H, row.vacated_s - row.announced_s) or math.isnan(row.free_h)


def check_no_failure_in_a_window(log: Log) -> None:
    """A node fails neither while announced nor while down for maintenance."""
    spans = defaultdict(list)
    for (_, node), rows in log.by_node.items():
        if not rows:
            continue
        t = {e.event: e.t_s for e in rows}
        spans[node].append((t["cordon"], t.get("maintenance_up", math.inf)))
    for e in log.events:
        if e.event == "node_down":
            node = int(e.nodes)
            assert not [s for s in spans[node] if s[0] <= e.t_s < s[1]], f"{e}: in a window"


def check_metrics_see_the_plan(log: Log) -> None:
    """(i) per hour, healthy GPUs count no node down for a repair or for maintenance, and free
    GPUs none on a node failed or closed (from its announcement until it is back); (j) a
    closed node's idle GPU-hours are its GPUs no job held while it was in service, from the
    announcement until it went down. Worked out from the log, node by node."""
    held: dict[int, list[tuple[float, float, float]]] = defaultdict(list)  # node -> (t0, t1, gpus)
    for rows in log.by_job.values():
        start = None
        for e in rows:
            if e.event == "start":
                start = e
            elif start is not None and e.event in ("finish", "fail", "evict", "requeue", "kill"):
                for n in nodes_of(start.nodes):
                    held[n].append((start.t_s, e.t_s, start.gpus / len(nodes_of(start.nodes))))
                start = None
        if start is not None:  # running (or in its grace period) at the horizon
            for n in nodes_of(start.nodes):
                held[n].append((start.t_s, log.horizon_s, start.gpus / len(nodes_of(start.nodes))))
    end = log.horizon_s
    out: dict[int, list[tuple[float, float]]] = defaultdict(list)  # down: repair or maintenance
    closed: dict[int, list[tuple[float, float]]] = defaultdict(list)  # announced until back
    for node, spans in log.repairs.items():
        out[node] += [(t0, min(t1, end)) for t0, t1 in spans]
    for (_, node), rows in log.by_node.items():
        at = {e.event: e.t_s for e in rows}
        if "cordon" in at:
            closed[node].append((at["cordon"], at.get("maintenance_up", end)))
        if "maintenance_down" in at:
            out[node].append((at["maintenance_down"], at.get("maintenance_up", end)))

    def inside(t: float, spans: list[tuple[float, float]]) -> bool:
        return any(t0 <= t < t1 for t0, t1 in spans)

    def integral(node: int, t0: float, t1: float, value) -> float:
        """The integral over [t0, t1) of ``value(t)``, a step function of the node's events."""
        cuts = {t0, t1} | {t for a, b, _ in held[node] for t in (a, b)}
        cuts |= {t for a, b in out[node] + closed[node] for t in (a, b)}
        points = sorted(t for t in cuts if t0 <= t <= t1)
        return sum((b - a) * value((a + b) / 2) for a, b in pairwise(points) if b > a)

    def used(node: int, t: float) -> float:
        return sum(g for a, b, g in held[node] if a <= t < b)

    def healthy(n: int, t: float) -> float:
        return 0.0 if inside(t, out[n]) else log.per

    def free(n: int, t: float) -> float:
        return 0.0 if inside(t, out[n] + closed[n]) else log.per - used(n, t)

    hours = [(k * H, min((k + 1) * H, end)) for k in range(math.ceil(end / H))]
    health = log.result.health_series(bucket_s=H)["healthy_gpus"].tolist()
    blocks = log.result.free_block_series(bucket_s=H)["free_gpus"].tolist()
    for k, (t0, t1) in enumerate(hours):
        nodes = range(log.n_nodes)
        by_hand = sum(integral(n, t0, t1, lambda t, n=n: healthy(n, t)) for n in nodes)
        assert health[k] == pytest.approx(by_hand / (t1 - t0), abs=1e-6), (k, log)
        by_hand = sum(integral(n, t0, t1, lambda t, n=n: free(n, t)) for n in nodes)
        assert blocks[k] == pytest.approx(by_hand / (t1 - t0), abs=1e-6), (k, log)
    for row in log.result.maintenance().itertuples():
        down = row.down_s if not math.isnan(row.down_s) else end
        idle = integral(
            row.node,
            row.announced_s,
            down,
            lambda t, n=row.node: 0.0 if inside(t, out[n]) else log.per - used(n, t),
        )
        assert row.idle_gpu_hours == pytest.approx(idle / H, abs=1e-6), (row, log)


CHECKS = (
    check_capacity_and_closed_nodes,
    check_lifecycle,
    check_evictions,
    check_windows,
    check_no_failure_in_a_window,
    check_metrics_see_the_plan,
)


# ----- synthetic workloads under a plan ------------------------------------------------------
WORKLOADS = {"32gpu-3d": (32, 3.0, 1), "64gpu-2d": (64, 2.0, 2)}  # gpus, days, seed


def plans(kind: str, mode: str) -> tuple[Maintenance, ...]:
    """A share of the cluster, or two windows on listed nodes (the first stops at its deadline,
    so node 1 is back before the second window is announced)."""
    if kind == "share":
        return (
            Maintenance(
                announce_h=18,
                down_h=24,
                hours=3,
                share=0.25,
                at_deadline=mode,
                early=mode == "wait",
            ),
        )
    return (
        Maintenance(announce_h=6, down_h=10, hours=2, nodes=(0, 1), early=mode == "stop"),
        Maintenance(
            announce_h=13, down_h=16, hours=2, nodes=(1, 3), at_deadline=mode, name="second"
        ),
    )


CASES = [(w, p, m) for w in WORKLOADS for p in ("share", "nodes") for m in ("stop", "wait")]
CASE_IDS = ["-".join(c) for c in CASES]
HEALTHY = HealthConfig(mtbf_hours=24, repair="automatic")


@cache
def workload(key: str):
    gpus, days, seed = WORKLOADS[key]
    return generate(GeneratorConfig(gpus=gpus, days=days, seed=seed))


def generated_config(policy: str, case: tuple[str, str, str], health: bool = False) -> SimConfig:
    key, kind, mode = case
    gpus, days, seed = WORKLOADS[key]
    return SimConfig(
        policy=policy,
        gpus=gpus,
        days=days,
        seed=seed,
        warmup_days=0.0,
        maintenance=plans(kind, mode),
        health=HEALTHY if health else HealthConfig(),
    )


def generated_run(policy: str, case: tuple[str, str, str], health: bool = False):
    work = workload(case[0])
    config = generated_config(policy, case, health)
    return simulate(config, trace=work.trace, budgets=work.tree)


@cache
def generated_log(policy: str, case: tuple[str, str, str], health: bool = False) -> Log:
    """A run shared by the rules (nothing mutates it)."""
    return Log(generated_run(policy, case, health))


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_the_maintenance_rules_on_synthetic_workloads(policy, case, check):
    check(generated_log(policy, case))


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_the_maintenance_rules_with_node_failures(policy, check):
    log = generated_log(policy, ("32gpu-3d", "share", "stop"), True)
    assert any(e.event == "node_down" for e in log.events)  # (failures do happen)
    check(log)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_plan_takes_every_listed_node_and_the_policies_differ_only_in_how(policy):
    log = generated_log(policy, ("64gpu-2d", "nodes", "stop"))
    cordons = sorted((label, n) for (label, n), rows in log.by_node.items() if rows)
    assert cordons == [("second", 1), ("second", 3), ("window 1", 0), ("window 1", 1)]
    summary = log.result.summary()
    assert summary["maintenance_nodes"] == 4 and summary["maintenance_unfreed"] == 0
    evicts = summary["maintenance_evicted"]
    assert evicts == sum(e.event == "evict" for e in log.events)


@pytest.mark.parametrize("policy", POLICIES)
def test_same_config_with_a_plan_gives_an_identical_event_log(policy):
    case = ("32gpu-3d", "nodes", "wait")
    pd.testing.assert_frame_equal(
        generated_run(policy, case).events, generated_log(policy, case).result.events
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_without_a_plan_or_with_one_after_the_run_nothing_changes(policy):
    work = workload("32gpu-3d")
    base = SimConfig(policy=policy, gpus=32, days=3.0, seed=1, warmup_days=0.0)
    log = simulate(base, trace=work.trace, budgets=work.tree).events
    assert (
        SimConfig(policy=policy, gpus=32, days=3.0, seed=1, warmup_days=0.0, maintenance=()) == base
    )
    late = base.with_maintenance(Maintenance(announce_h=72, down_h=80, share=0.5))
    late_log = simulate(late, trace=work.trace, budgets=work.tree).events
    pd.testing.assert_frame_equal(late_log, log)
    for frame in (log, late_log):
        assert not frame["event"].isin([*NODE_EVENTS, "evict"]).any()


# ----- random traces under a random plan -----------------------------------------------------
SHAPES = [(16, 8), (32, 8), (16, 4), (64, 8)]
#: (cycle_s, startup_s, grace_s, preempted_sessions)
TIMINGS = [
    (0.0, 0.0, 0.0, "requeue"),
    (30.0, 30.0, 30.0, "end"),
    (600.0, 0.0, 0.0, "requeue"),
    (45.0, 0.0, 60.0, "restore"),
]
HORIZON_H = 12.0


@st.composite
def random_window(draw, node_count: int, lo_h: float = 0.0, **fixed) -> Maintenance:
    """A window announced on a half hour from ``lo_h`` (maybe after the run)."""
    lo = math.ceil(lo_h * 2)
    announce = draw(st.integers(lo, max(lo, int(HORIZON_H * 2)))) / 2
    if draw(st.booleans()):
        where = {"share": draw(st.sampled_from([0.1, 0.25, 0.5, 1.0]))}
    else:
        nodes = draw(st.sets(st.integers(0, node_count - 1), min_size=1, max_size=node_count))
        where = {"nodes": tuple(sorted(nodes))}
    values = {
        "announce_h": announce,
        "down_h": announce + draw(st.integers(0, 8)) / 2,
        "hours": draw(st.sampled_from([0.5, 1.0, 3.0])),
        "at_deadline": draw(st.sampled_from(["stop", "wait"])),
        "early": draw(st.booleans()),
        **where,
    }
    return Maintenance(**{**values, **fixed})


@st.composite
def random_cases(draw):
    """A random trace on a random cluster, latencies and a plan of one or two windows. Two
    windows that share a node do not overlap in their announced times (``check_maintenance``),
    but the first may still wait for its jobs when the second is announced."""
    gpus, per = draw(st.sampled_from(SHAPES))
    nodes = gpus // per
    trace = draw(traces(gpus, per, HORIZON_H * H))
    first = draw(random_window(nodes))
    plan = [first]
    if draw(st.booleans()):
        second = draw(random_window(nodes, name="second"))
        if set(first.node_list(nodes)) & set(second.node_list(nodes)):
            lo_h = first.down_h + first.hours
            second = draw(random_window(nodes, lo_h=lo_h, name="second"))
        plan.append(second)
    return gpus, per, trace, tuple(plan), draw(st.sampled_from(TIMINGS))


@pytest.mark.parametrize("policy", POLICIES)
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=random_cases())
def test_random_traces_under_a_random_plan_keep_every_maintenance_rule(policy, case):
    gpus, per, trace, plan, (cycle_s, startup_s, grace_s, sessions) = case
    config = SimConfig(
        policy=policy,
        gpus=gpus,
        gpus_per_node=per,
        days=HORIZON_H * H / DAY_S,
        warmup_days=0.0,
        cycle_s=cycle_s,
        startup_s=startup_s,
        grace_s=grace_s,
        preempted_sessions=sessions,
        maintenance=plan,
    )
    log = Log(simulate(config, trace=trace, budgets=small_tree()))
    for check in CHECKS:
        check(log)


# ----- the acceptance: legacy's squatters against impactful's contracts --------------
def free_hours(policy: str, gpus: int, days: float, announce_h: float) -> tuple[dict, SimConfig]:
    window = Maintenance(announce_h=announce_h, down_h=announce_h + 24, hours=4, share=0.25)
    config = SimConfig(policy=policy, gpus=gpus, days=days, maintenance=(window,))
    return simulate(config).summary(), config


def check_acceptance(gpus: int, days: float, announce_h: float) -> None:
    summaries = {}
    for policy in POLICIES:
        summary, config = free_hours(policy, gpus, days, announce_h)
        nodes = len(config.maintenance[0].node_list(config.nodes))
        assert summary["maintenance_nodes"] == nodes
        assert math.isfinite(summary["maintenance_free_h_max"]), policy
        assert summary["maintenance_free_h_max"] <= 24 + (config.cycle_s + config.grace_s) / H
        summaries[policy] = summary
    legacy, impactful = summaries["legacy"], summaries["impactful"]
    assert legacy["maintenance_free_h_max"] > impactful["maintenance_free_h_max"]
    knobs = SimConfig(policy="impactful").knobs()
    cap_h = max(knobs["cap_hours"], knobs["cap_hours_interactive"] or 0.0)
    # A start that waited for a victim's grace period is protected from when it begins.
    slack_h = (config.cycle_s + config.grace_s) / H
    assert impactful["maintenance_free_h_max"] <= cap_h + slack_h


def test_legacy_frees_nodes_later_than_impactful_on_a_small_cluster():
    check_acceptance(gpus=64, days=8, announce_h=100)


@pytest.mark.thorough
def test_legacy_frees_nodes_later_than_impactful_on_the_default_workload():
    check_acceptance(gpus=256, days=14, announce_h=200)


# ----- plans from files, configs and scenarios -----------------------------------------------
WINDOWS = [
    {"name": "rack", "announce_h": 24, "down_h": 30, "hours": 6, "nodes": [0, 2, 3]},
    {"announce_h": 40, "down_h": 40, "hours": 2, "share": 0.5, "at_deadline": "wait"},
]
EXPECTED = (
    Maintenance(announce_h=24, down_h=30, hours=6, nodes=(0, 2, 3), name="rack"),
    Maintenance(announce_h=40, down_h=40, hours=2, share=0.5, at_deadline="wait"),
)


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_yaml_plan_is_a_list_of_windows_or_a_maintenance_section(tmp_path, wrapped):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"maintenance": WINDOWS} if wrapped else WINDOWS))
    assert load_maintenance(path) == EXPECTED


def test_a_csv_plan_has_one_window_per_row_and_nodes_separated_by_spaces(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_text(
        "name,announce_h,down_h,hours,nodes,share,at_deadline,early\n"
        "rack,24,30,6,0 2 3,,,\n"
        ",40,40,2,,0.5,wait,no\n"
        "semi,50,51,,4;5,,stop,yes\n"
    )
    assert load_maintenance(path) == (
        EXPECTED[0],
        Maintenance(announce_h=40, down_h=40, hours=2, share=0.5, at_deadline="wait", early=False),
        Maintenance(announce_h=50, down_h=51, nodes=(4, 5), name="semi"),
    )


@pytest.mark.parametrize(
    "window, field, problem",
    [
        ({"announce_h": "soon", "down_h": 5, "share": 0.5}, "announce_h", "soon"),
        ({"down_h": 5, "share": 0.5}, "announce_h", "missing"),
        ({"announce_h": 1, "down_h": 5, "share": 0.5, "rack": 3}, "rack", "unknown field"),
        ({"announce_h": 1, "down_h": 5, "nodes": [1.5]}, "nodes", "whole numbers"),
        ({"announce_h": 1, "down_h": 5, "share": 0.5, "early": "maybe"}, "early", "true or false"),
        ({"announce_h": 5, "down_h": 1, "share": 0.5}, "down_h", "at or after announce_h"),
        ({"announce_h": 1, "down_h": 5, "share": 0.5, "nodes": [1]}, "nodes", "not both"),
        ({"announce_h": 1, "down_h": 5, "share": 0}, "share", "got nodes [] and share 0"),
        ({"announce_h": 1, "down_h": 5, "nodes": []}, "nodes", "got nodes [] and share 0"),
        ({"announce_h": 1, "down_h": 5, "share": 1.5}, "share", "(0, 1]"),
        ({"announce_h": 1, "down_h": 5, "hours": 0, "share": 0.5}, "hours", "> 0"),
    ],
)
def test_a_bad_yaml_window_is_named_with_its_file_number_and_field(
    tmp_path, window, field, problem
):
    path = tmp_path / "plan.yaml"
    good = {"announce_h": 100, "down_h": 101, "share": 0.1}
    path.write_text(yaml.safe_dump([good, window]))
    with pytest.raises(MaintenanceError) as err:
        load_maintenance(path)
    message = str(err.value)
    assert str(path) in message and "window 2" in message, message
    assert field in message and problem in message, message


def test_a_bad_csv_row_is_named_with_its_line(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_text("announce_h,down_h,share\n1,2,0.5\n3,four,0.5\n")
    with pytest.raises(MaintenanceError, match=r"plan\.csv, row 3, field 'down_h'"):
        load_maintenance(path)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[]", "no window"),
        ("", "list of windows"),
        ("{announce_h: 1}", "list of windows"),
        ("[1, 2]", "list of windows"),
    ],
)
def test_a_yaml_file_that_is_no_plan_is_refused(tmp_path, text, problem):
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(MaintenanceError, match=problem):
        load_maintenance(path)


def test_nodes_beyond_the_cluster_are_refused_when_the_config_is_built(tmp_path):
    window = Maintenance(announce_h=1, down_h=2, nodes=(3, 9))
    with pytest.raises(ParamError, match="node 9 is not in a cluster of 8 nodes"):
        SimConfig(gpus=64, maintenance=(window,))
    SimConfig(gpus=80, maintenance=(window,))  # 10 nodes: fine
    path = tmp_path / "scenario.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster": {"gpus": 64},
                "maintenance": [{"announce_h": 1, "down_h": 2, "nodes": [3, 9]}],
            }
        )
    )
    with pytest.raises(ScenarioError, match=r"scenario\.yaml.*node 9"):
        load_scenario(path)


def test_windows_that_take_one_node_at_overlapping_times_are_refused():
    a = Maintenance(announce_h=10, down_h=20, hours=4, nodes=(1, 2), name="a")
    b = Maintenance(announce_h=23, down_h=30, hours=1, nodes=(2, 3), name="b")
    with pytest.raises(ParamError, match="b and a both take node 2 between 23 h and 24 h"):
        check_maintenance((a, b), 8)
    with pytest.raises(ParamError, match="both take node 2"):
        SimConfig(gpus=64, maintenance=(b, a))
    touching = Maintenance(announce_h=24, down_h=30, hours=1, nodes=(2, 3))
    check_maintenance((a, touching), 8)
    disjoint = Maintenance(announce_h=12, down_h=13, nodes=(0, 3))
    check_maintenance((a, disjoint), 8)
    # a share spread over the nodes takes node 0 (and node 4) of 8
    half = Maintenance(announce_h=12, down_h=13, share=0.25)
    with pytest.raises(ParamError, match="take node 0"):
        check_maintenance((disjoint, half), 8)


@pytest.mark.parametrize(
    "share, nodes, expected",
    [
        (0.25, 8, (0, 4)),
        (0.3, 8, (0, 2, 5)),  # ceil(2.4) = 3
        (0.01, 8, (0,)),
        (1.0, 5, (0, 1, 2, 3, 4)),
        (0.5, 5, (0, 1, 3)),
        (0.25, 32, (0, 4, 8, 12, 16, 20, 24, 28)),
        (0.1, 30, (0, 10, 20)),  # (0.1 x 30 is 3.0000000000000004 in floating point)
    ],
)
def test_a_share_takes_its_nodes_rounded_up_and_spread_evenly(share, nodes, expected):
    assert Maintenance(announce_h=0, down_h=1, share=share).node_list(nodes) == expected


def test_listed_nodes_are_taken_in_order():
    assert Maintenance(announce_h=0, down_h=1, nodes=(5, 1, 3)).node_list(8) == (1, 3, 5)


def test_a_config_takes_a_plan_as_mappings_and_round_trips_through_json():
    config = SimConfig(gpus=64, maintenance=WINDOWS)
    assert config.maintenance == EXPECTED
    assert config.with_maintenance(*WINDOWS) == config
    assert config.with_maintenance() == SimConfig(gpus=64)
    assert SimConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert hash(config) != hash(SimConfig(gpus=64))
    with pytest.raises(ParamError, match=r"unknown key\(s\) \['rack'\]"):
        SimConfig(maintenance=[{"announce_h": 1, "down_h": 2, "share": 0.5, "rack": 1}])


def test_a_scenario_with_a_maintenance_section_round_trips(tmp_path):
    config = SimConfig(gpus=64, days=3, demand=2.0, maintenance=WINDOWS)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario_dict("planned", config, small_tree(), "a test")))
    scenario = load_scenario(path)
    assert scenario.name == "planned" and scenario.config.maintenance == EXPECTED
    assert scenario.config.gpus == 64 and scenario.config.days == 3
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(scenario_dict("planned", scenario.config, scenario.budgets)))
    assert load_scenario(again).config.maintenance == EXPECTED
    assert "maintenance" not in scenario_dict("plain", SimConfig(), None)


def test_a_bad_window_in_a_scenario_names_the_file_the_window_and_the_field(tmp_path):
    path = tmp_path / "scenario.yaml"
    bad = [{"announce_h": 1, "down_h": 2, "share": 0.5}, {"announce_h": 1, "down_h": "x"}]
    path.write_text(yaml.safe_dump({"cluster": {"gpus": 64}, "maintenance": bad}))
    with pytest.raises(ScenarioError, match=r"scenario\.yaml.*window 2.*'down_h'"):
        load_scenario(path)


# ----- the CLI -------------------------------------------------------------------------------
def simulate_argv(*extra: str) -> list[str]:
    return ["simulate", "--policy", "impactful", "--gpus", "64", "--days", "3", *extra]


@pytest.mark.parametrize("suffix", [".yaml", ".csv"])
def test_cli_simulates_with_a_plan_from_a_file(tmp_path, capsys, suffix):
    path = tmp_path / f"plan{suffix}"
    if suffix == ".csv":
        path.write_text("announce_h,down_h,hours,share\n24,30,2,0.25\n")
    else:
        path.write_text(
            yaml.safe_dump([{"announce_h": 24, "down_h": 30, "hours": 2, "share": 0.25}])
        )
    assert main(simulate_argv("--maintenance", str(path), "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["maintenance_nodes"] == 2 and out["maintenance_unfreed"] == 0
    assert 0 <= out["maintenance_free_h_max"] <= 8 + 60 / H
    assert main(simulate_argv("--maintenance", str(path))) == 0
    assert "maintenance_free_h_max" in capsys.readouterr().out


def test_cli_table_shows_no_maintenance_rows_without_a_plan(capsys):
    assert main(simulate_argv()) == 0
    out = capsys.readouterr().out
    assert "occupancy" in out and "maintenance_" not in out


@pytest.mark.parametrize(
    "text, expected",
    [
        ("- {announce_h: 24, down_h: soon, share: 0.25}\n", ["window 1", "'down_h'", "soon"]),
        ("- {announce_h: 24, down_h: 30, nodes: [2, 20]}\n", ["node 20", "8 nodes"]),
    ],
)
def test_cli_rejects_a_bad_plan_with_status_2_naming_the_file_and_field(
    tmp_path, capsys, text, expected
):
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    assert main(simulate_argv("--maintenance", str(path), "--json")) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert "impactlab: error:" in err
    for part in expected:
        assert part in err, err
    if "soon" in text:
        assert str(path) in err


def test_cli_checks_a_plan_against_the_cluster_the_flags_ask_for(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump([{"announce_h": 24, "down_h": 30, "nodes": [40]}]))
    argv = ["simulate", "--policy", "fifo", "--gpus", "512", "--days", "2"]
    assert main([*argv, "--maintenance", str(path), "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["maintenance_nodes"] == 1
    smaller = ["simulate", "--policy", "fifo", "--gpus", "16", "--days", "2"]
    assert main([*smaller, "--maintenance", str(path)]) == 2
    err = capsys.readouterr().err  # (the plan's file named too: the check is the cluster's)
    assert err.startswith(f"impactlab: error: {path}: maintenance (unnamed): node 40 is not in")


def test_cli_rejects_a_missing_plan_file(tmp_path, capsys):
    missing = tmp_path / "nowhere.yaml"
    assert main(simulate_argv("--maintenance", str(missing))) == 2
    assert "nowhere.yaml" in capsys.readouterr().err


def test_an_unnamed_window_has_one_name_in_errors_warnings_and_the_log(tmp_path, caplog):
    """An unnamed window is "window N", its place in the plan from 1, wherever it is named."""
    path = tmp_path / "plan.yaml"
    path.write_text(
        "- {name: first, announce_h: 1, down_h: 2, hours: 1, nodes: [0]}\n"
        "- {announce_h: 3, down_h: 4, hours: 1, nodes: [1]}\n"
        "- {announce_h: 999, down_h: 999, hours: 1, nodes: [2]}\n"
    )
    plan = load_maintenance(path)
    config = SimConfig(gpus=32, days=1, warmup_days=0, maintenance=plan)
    with caplog.at_level("WARNING", logger="impactlab"):
        result = simulate(config)
    assert "maintenance window 3: announced after the run ends" in caplog.text
    labels = {window_name(d) for d in result.events["detail"] if d.startswith("maintenance=")}
    assert labels == {"first", "window 2"}
    clash = Maintenance(announce_h=3, down_h=4, hours=1, nodes=(1,), name="clash")
    with pytest.raises(ParamError, match="maintenance clash and window 2 both take node 1"):
        check_maintenance((*plan, clash), 4)
    path.write_text("- {announce_h: 1, down_h: 2, nodes: [0]}\n- {announce_h: 3, down_h: 1}\n")
    with pytest.raises(MaintenanceError, match="window 2"):
        load_maintenance(path)
    with pytest.raises(ParamError, match="maintenance window 2: give its"):
        SimConfig(maintenance=[{"announce_h": 1, "down_h": 2, "nodes": [0]}, {"down_h": 3}])


def test_a_share_rounded_up_to_much_more_of_a_cluster_is_warned_of(caplog):
    """A share is rounded up to whole nodes: 0.1 of a one-node cluster takes all of it; that
    was silent (documented, but a surprise)."""
    window = {"announce_h": 1, "down_h": 2, "hours": 1, "share": 0.1}
    with caplog.at_level("WARNING", logger="impactlab"):
        simulate(SimConfig(gpus=8, days=0.5, warmup_days=0, maintenance=[window]))
    assert (
        "maintenance window 1: a share of 0.1 takes 1 of the cluster's 1 node (100%): a share is "
        "rounded up to whole nodes" in caplog.messages
    )
    caplog.clear()
    fleet = SimConfig(days=0.5, warmup_days=0).with_params(clusters="big:80,small:16")
    with caplog.at_level("WARNING", logger="impactlab"):
        simulate(fleet.with_maintenance(window))
    shares = [m for m in caplog.messages if "rounded up to whole nodes" in m]
    small = "maintenance window 1: a share of 0.1 takes 1 of cluster small's 2 nodes (50%)"
    assert shares == [f"{small}: a share is rounded up to whole nodes"]  # (big's 1 of 10: 0.1)
