"""impactful's shortcuts for victim searches that cannot succeed never rule out one that can.

``Impactful._too_few_clearable`` decides, without walking the candidates, that a job needing
whole nodes (a multi-node gang, or a single-node job of a whole node) cannot find enough of
them. Here every such search is also walked in full: whenever the shortcut says "cannot",
the walk must find no victims. The oracle tests show the same for the event logs; this test
looks at each search, and checks that the shortcut does rule some out. Likewise every
single-node search (``Impactful._search_one_node``, which fails at once or walks only the
unallocated and lent candidates when it can) must choose exactly what the full walk chooses,
and a lane that ``Impactful.lane_blocked`` keeps from its scan must hold no head that fits or
whose full walk finds victims.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pandas as pd
import pytest
from helpers import DAY_S, INSTANT, run_tiny

import impactlab as il
from impactlab.policies.impactful import Impactful, Verdicts
from impactlab.policies.victims import choose_victims


@dataclass
class WalkedToo(Impactful):
    """impactful that walks every whole-node search the shortcut decides and records
    (shortcut says it cannot succeed, the walk found victims)."""

    name: ClassVar[str] = "walked-too"
    seen: list[tuple[bool, bool]] = field(default_factory=list)

    def _too_few_clearable(self, sched, job, avoid, boosted, reclaim):
        ruled_out = super()._too_few_clearable(sched, job, avoid, boosted, reclaim)
        scratch = Verdicts()  # (the walk's verdicts stay out of the search's own)
        walked = choose_victims(
            sched,
            job.idx,
            self.candidates(sched, job.idx, avoid, scratch),
            self._approves(sched, job.idx, scratch),
            avoid,
        )
        self.seen.append((ruled_out, walked is not None))
        return ruled_out


@dataclass
class SearchedToo(Impactful):
    """impactful that also walks every single-node search in full and records (what the
    search with its shortcuts chose, what the walk chose)."""

    name: ClassVar[str] = "searched-too"
    seen: list[tuple[list[int] | None, list[int] | None]] = field(default_factory=list)

    def _search_one_node(self, sched, j, avoid, boosted, verdicts):
        chosen = super()._search_one_node(sched, j, avoid, boosted, verdicts)
        scratch = Verdicts()  # (the walk's verdicts stay out of the search's own)
        walked = choose_victims(
            sched,
            j,
            self.candidates(sched, j, avoid, scratch),
            self._approves(sched, j, scratch),
            avoid,
        )
        self.seen.append((chosen, walked))
        return chosen


@dataclass
class BlockedToo(Impactful):
    """impactful that, for every lane its quick test keeps from a scan, also tries the head of
    each size as the scan would (placement, then the full walk) and records (the test said
    blocked, some head could start)."""

    name: ClassVar[str] = "blocked-too"
    seen: list[tuple[bool, bool]] = field(default_factory=list)

    def lane_blocked(self, sched, queue, boosted):
        blocked = super().lane_blocked(sched, queue, boosted)
        if blocked or self.hold is None:
            self.seen.append((blocked, self._some_head_starts(sched, queue, boosted)))
        return blocked

    def _some_head_starts(self, sched, queue, boosted):
        gangs_search = self._refresh_pass or self.gangs_preempt_every_pass
        for gpus in list(queue.sizes):
            j = queue.best_head(gpus + 1, above=gpus - 1)[0][-1]
            job = sched.jobs[j]
            if gpus <= sched.cluster.largest_fit():
                return True  # (the placement itself is the scan's, tested elsewhere)
            if job.n_nodes > 1 and not gangs_search:
                continue  # a gang searches only at a refresh
            avoid = self._kept_off(boosted, job.n_nodes)
            scratch = Verdicts()
            approve = self._approves(sched, j, scratch)
            if choose_victims(sched, j, self.candidates(sched, j, avoid, scratch), approve, avoid):
                return True
        return False


CASES = pytest.mark.parametrize(
    ("gpus", "per", "demand", "seed", "knobs"),
    [
        (64, 8, 3.0, 0, {}),
        (64, 4, 3.0, 1, {}),  # 8-GPU jobs are two-node gangs here
        (128, 8, 2.5, 2, {"gangs_preempt_every_pass": True, "max_victim_ratio": 2.0}),
        (64, 8, 3.0, 3, {"boost_interactive": False}),
        (64, 8, 3.0, 4, {"protect_unallocated": True}),
        (64, 8, 3.0, 5, {"backfill_reservation": True}),  # nodes kept out by the reservation
        (64, 8, 3.0, 6, {"interactive_reserve": 0.3, "reserve_min_nodes": 1}),  # lent borrowers
        (64, 8, 3.0, 7, {"pack_victims": False}),  # the first candidates in the walk's own order
    ],
    ids=[
        "64x8",
        "64x4",
        "128x8-every-pass",
        "64x8-no-boost",
        "64x8-protected-unallocated",
        "64x8-reservation",
        "64x8-large-reserve",
        "64x8-no-packing",
    ],
)


def probe_run(probe, gpus, per, demand, seed, knobs):
    """Run a three-day synthetic workload of ``gpus`` GPUs (``per`` a node) under the impactful
    subclass ``probe`` with ``knobs``; the policy, with what it recorded."""
    config = il.SimConfig(
        policy="impactful",
        gpus=gpus,
        gpus_per_node=per,
        days=3.0,
        demand=demand,
        seed=seed,
        policy_knobs=knobs,
    )
    work = il.generate(config.generator())
    policy = probe(**knobs)
    il.simulate(config, trace=work.trace, budgets=work.tree, policy=policy)
    return policy


@CASES
def test_a_ruled_out_search_finds_no_victims_when_walked(gpus, per, demand, seed, knobs):
    policy = probe_run(WalkedToo, gpus, per, demand, seed, knobs)
    wrong = [k for k, (ruled_out, found) in enumerate(policy.seen) if ruled_out and found]
    assert not wrong, f"searches {wrong[:5]} were ruled out but the walk found victims"
    assert any(ruled_out for ruled_out, _ in policy.seen), "the shortcut never ruled a search out"
    assert any(found for _, found in policy.seen), (
        "no whole-node search succeeded: the case proves little"
    )


@CASES
def test_a_single_node_search_chooses_what_the_full_walk_chooses(gpus, per, demand, seed, knobs):
    """Single-node searches decided without the full walk (failing at once, or walking only
    the unallocated and lent candidates when they make room) choose the walk's victims."""
    policy = probe_run(SearchedToo, gpus, per, demand, seed, knobs)
    wrong = [k for k, (chosen, walked) in enumerate(policy.seen) if chosen != walked]
    assert not wrong, (
        f"searches {wrong[:5]} chose {[policy.seen[k] for k in wrong[:3]]} (chosen, walked)"
    )
    assert any(chosen for chosen, _ in policy.seen), (
        "no single-node search succeeded: the case proves little"
    )


def test_a_gang_takes_a_far_victim_that_passes_only_with_a_cousin_gone():
    # Tree: A (share 4: 0.8) over a1 (0.7 of the root) and a2 (0.1); B (share 1: 0.2) over b1.
    # Two nodes of 8; window 10,000 s, ranking refreshed every 100 s; no drain, so only the
    # fair-share rules decide. v_b1 (b1) runs 8 GPUs from 0, v_a2 (a2) 8 GPUs from 3600; the
    # gang j (a1, 16 GPUs) arrives at 6600. Usage then: b1 8 x 6600 / (16 x 10,000) = 0.33,
    # a2 8 x 3000 / 160,000 = 0.15. Sides, most over-served first:
    #   a2: (0.15 + 8/16) / 0.1 = 6.5; with j running a1 would be (0 + 16/16) / 0.7 = 1.43: v_a2 goes.
    #   B: (0.33 + 8/16) / 0.2 = 4.15. After the swap B is at 0.33 / 0.2 = 1.65, and A at
    #      (0.15 + (8 + 16 - 8) / 16) / 0.8 = 1.44 with v_a2 gone: v_b1 goes too. Counted
    #      without v_a2 gone, A would be at (0.15 + (8 + 16) / 16) / 0.8 = 2.06 > 1.65.
    # So the gang starts at 6600 only if the shortcut allows for the cousin's GPUs.
    tree = il.BudgetTree.from_dict(
        {
            "name": "root",
            "children": [
                {
                    "name": "A",
                    "share": 4,
                    "children": [{"name": "a1", "share": 7}, {"name": "a2", "share": 1}],
                },
                {"name": "B", "share": 1, "children": [{"name": "b1", "share": 1}]},
            ],
        }
    )

    def job(job_id, submit_s, project, gpus):
        return {
            "job_id": job_id,
            "submit_s": submit_s,
            "project": project,
            "gpus": gpus,
            "duration_s": 100_000.0,
            "kind": "training",
            "min_runtime_s": 0.0,
            "checkpoint_s": 0.0,
        }

    rows = [job("v_b1", 0.0, "b1", 8), job("v_a2", 3600.0, "a2", 8), job("j", 6600.0, "a1", 16)]
    knobs = {
        "window_days": 10_000 / DAY_S,
        "refresh_s": 100.0,
        "drain_for_gangs": False,
        "interactive_reserve": 0.0,
    }
    log = run_tiny(
        rows, policy="impactful", gpus=16, horizon_s=8000.0, budgets=tree, policy_knobs=knobs
    ).events
    preempted = log[log.event == "preempt"]
    assert preempted[["t_s", "job_id"]].values.tolist() == [[6600.0, "v_a2"], [6600.0, "v_b1"]]
    assert log[(log.event == "start") & (log.job_id == "j")].t_s.tolist() == [6600.0]


#: The knobs of the cousin cases below: a 10,000 s window, refreshes every 100 s, no drain and
#: no reserve, so only the fair-share rules decide; protection up to 48 h.
COUSIN_KNOBS = {
    "window_days": 10_000 / DAY_S,
    "refresh_s": 100.0,
    "drain_for_gangs": False,
    "interactive_reserve": 0.0,
    "cap_hours": 48.0,
}


def run_cousins(shares, rows, gpus, until_s, policy):
    """Run ``policy`` (built with ``COUSIN_KNOBS``) on the tree A (share 4) over a1 and a2
    (``shares``), B (share 1) over b1, with ``rows`` as (job, submit, project, GPUs, declared
    minimum runtime), each running 100,000 s; the event log."""
    tree = il.BudgetTree.from_dict(
        {
            "name": "root",
            "children": [
                {
                    "name": "A",
                    "share": 4,
                    "children": [
                        {"name": "a1", "share": shares[0]},
                        {"name": "a2", "share": shares[1]},
                    ],
                },
                {"name": "B", "share": 1, "children": [{"name": "b1", "share": 1}]},
            ],
        }
    )
    trace = pd.DataFrame(
        [
            {
                "job_id": job_id,
                "submit_s": submit_s,
                "project": project,
                "gpus": size,
                "duration_s": 100_000.0,
                "kind": "training",
                "min_runtime_s": min_runtime_s,
                "checkpoint_s": 0.0,
            }
            for job_id, submit_s, project, size, min_runtime_s in rows
        ]
    )
    config = il.SimConfig(
        policy="impactful",
        gpus=gpus,
        days=until_s / DAY_S,
        warmup_days=0.0,
        policy_knobs=COUSIN_KNOBS,
        **INSTANT,
    )
    return il.simulate(config, trace=trace, budgets=tree, policy=policy).events


def test_a_protected_cousin_gives_the_gang_no_relief_so_its_search_is_ruled_out():
    # The tree above on four nodes of 8 (32 GPUs). w_a1 (a1) and v_a2 (a2) run protected (a
    # declared minimum runtime of 100,000 s) from 0 and 3600; v_b1 and v_b2 (b1) unprotected
    # from 8000; the gang j (a1, 16 GPUs) arrives at 9000. Usage then, over 32 GPUs x 10,000 s:
    # A 8 x (9000 + 5400) / 320,000 = 0.36, B 16 x 1000 / 320,000 = 0.05. The two b1 nodes are
    # the only ones that could be cleared; for each b1 victim:
    #   B after the swap: (0.05 + (16 - 8) / 32) / 0.2 = 1.5;
    #   A with j running: (0.36 + (16 + 16) / 32) / 0.8 = 1.7 > 1.5, so the walk takes neither.
    # Counting v_a2's GPUs as relief, A would be at (0.36 + 24 / 32) / 0.8 = 1.39 and the
    # shortcut would have walked; v_a2 is protected, no walk can free it, so the shortcut
    # (which counts only open GPUs under A) rules the search out.
    rows = [
        ("w_a1", 0.0, "a1", 8, 100_000.0),
        ("v_a2", 3600.0, "a2", 8, 100_000.0),
        ("v_b1", 8000.0, "b1", 8, 0.0),
        ("v_b2", 8000.0, "b1", 8, 0.0),
        ("j", 9000.0, "a1", 16, 0.0),
    ]
    policy = WalkedToo(**COUSIN_KNOBS)
    log = run_cousins((7, 1), rows, 32, 9500.0, policy)
    assert not (log.event == "preempt").any()
    assert policy.seen and all(ruled_out and not found for ruled_out, found in policy.seen)


def test_a_cousin_that_cannot_pass_its_own_swap_gives_the_gang_no_relief():
    # A (share 4: 0.8) over a1 (share 1: 0.1 of the root) and a2 (share 7: 0.7); B (share 1:
    # 0.2) over b1. Four nodes of 8 (32 GPUs), window 10,000 s, ranking refreshed every 100 s,
    # no drain. w_a1 (a1, protected) and v_a2 (a2) run 8 GPUs from 0; v_b1 and v_b2 (b1) 8 GPUs
    # from 7000; the gang j (a1, 16 GPUs) arrives at 9000 and searches at 9000 and 9100. At
    # 9000, over 32 GPUs x 10,000 s: a1 and a2 used 0.225 each, A 0.45, B 0.1. The nodes that
    # could be cleared hold v_a2, v_b1 and v_b2, one each:
    #   v_a2 (split a1 | a2): a1 with j (0.225 + 24/32) / 0.1 = 9.75 > a2 after (0.225 + 0) / 0.7
    #   = 0.32, so v_a2 is never taken, and it frees nothing under A;
    #   v_b1, v_b2 (split A | B): A with j (0.45 + 32/32) / 0.8 = 1.81 > B after (0.1 + 8/32) /
    #   0.2 = 1.75 (at 9100, 1.82 > 1.78): neither is taken, and the gang cannot start.
    # Counting v_a2's open GPUs as relief, A would be at (0.45 + 24/32) / 0.8 = 1.5 <= 1.75 and
    # the shortcut would walk. But a2 can lose nothing and still pass a1's swap (a1 at 9.75
    # against a2's 0.32 before it loses any), so it gives no relief, and the shortcut rules
    # every search out.
    rows = [
        ("w_a1", 0.0, "a1", 8, 100_000.0),
        ("v_a2", 0.0, "a2", 8, 0.0),
        ("v_b1", 7000.0, "b1", 8, 0.0),
        ("v_b2", 7000.0, "b1", 8, 0.0),
        ("j", 9000.0, "a1", 16, 0.0),
    ]
    policy = WalkedToo(**COUSIN_KNOBS)
    log = run_cousins((1, 7), rows, 32, 9150.0, policy)
    assert not (log.event == "preempt").any()
    assert len(policy.seen) == 2 and all(
        ruled_out and not found for ruled_out, found in policy.seen
    )


@dataclass
class RoomProbe(Impactful):
    """impactful that records, at the first search of job "j" at each instant,
    ``FairTree.most_taken`` for it by side name: {time: {side: GPUs}}."""

    name: ClassVar[str] = "room-probe"
    rooms: dict[float, dict[str, float]] = field(default_factory=dict)

    def make_room(self, sched, j):
        job = sched.jobs[j]
        if job.job_id == "j" and sched.now not in self.rooms:
            self.open.refresh(sched.now, sched.shielded)
            names = self.ctx.tree.names
            self.rooms[sched.now] = {
                names[side]: gpus
                for side, gpus in self.fair.most_taken(job.leaf, job.held, self.open.gpus).items()
            }
        return super().make_room(sched, j)


@pytest.mark.parametrize(
    ("shares", "rows", "gpus", "at", "expected"),
    [
        # The case above: a1 (0.1) with j is served (0.225 + 24/32) / 0.1 = 9.75, so a2 (0.7, used
        # 0.225, 8 GPUs held) can lose 8 + 32 x (0.225 - 9.75 x 0.7) < 0: no relief for A. A with j
        # is then served (0.45 + 32/32) / 0.8 = 1.8125, and B (0.2, used 0.1, 16 held) can lose
        # 16 + 32 x (0.1 - 1.8125 x 0.2) = 7.6 GPUs: not one 8-GPU victim.
        (
            (1, 7),
            [
                ("w_a1", 0.0, "a1", 8, 100_000.0),
                ("v_a2", 0.0, "a2", 8, 0.0),
                ("v_b1", 7000.0, "b1", 8, 0.0),
                ("v_b2", 7000.0, "b1", 8, 0.0),
                ("j", 9000.0, "a1", 16, 0.0),
            ],
            32,
            9000.0,
            {"a2": 8 + 32 * (0.225 - 9.75 * 0.7), "B": 7.6},
        ),
        # The far-victim case above (16 GPUs): a1 (0.7, nothing used) with j is served 1 / 0.7, so
        # a2 (0.1, used 8 x 3000 / 160,000 = 0.15, 8 held) can lose 8 + 16 x (0.15 - 0.1 / 0.7) =
        # 8.11 GPUs: all its 8 open ones are relief for A. A with j, less those 8, is served (0.15 +
        # 16/16) / 0.8 = 1.4375, and B (used 8 x 6600 / 160,000 = 0.33, 8 held) can lose 8 + 16 x
        # (0.33 - 1.4375 x 0.2) = 8.68: one 8-GPU victim.
        (
            (7, 1),
            [
                ("v_b1", 0.0, "b1", 8, 0.0),
                ("v_a2", 3600.0, "a2", 8, 0.0),
                ("j", 6600.0, "a1", 16, 0.0),
            ],
            16,
            6600.0,
            {"a2": 8 + 16 * (0.15 - 0.1 / 0.7), "B": 8.68},
        ),
    ],
    ids=["cousin-gives-nothing", "cousin-gives-all"],
)
def test_what_a_walk_could_take_from_each_side_by_hand(shares, rows, gpus, at, expected):
    policy = RoomProbe(**COUSIN_KNOBS)
    run_cousins(shares, rows, gpus, at + 50.0, policy)
    assert policy.rooms[at] == pytest.approx(expected, abs=1e-6)


@CASES
def test_a_lane_kept_from_its_scan_holds_no_head_that_could_start(gpus, per, demand, seed, knobs):
    """Every lane ``lane_blocked`` keeps from its scan would have started nothing: no head of
    any size fits, and none finds victims by the full walk. The quick test must also keep some
    lanes out (where it is made at all: not with a reservation)."""
    policy = probe_run(BlockedToo, gpus, per, demand, seed, knobs)
    wrong = [k for k, (blocked, starts) in enumerate(policy.seen) if blocked and starts]
    assert not wrong, f"lane tests {wrong[:5]} said blocked, but a head could start"
    if not knobs.get("backfill_reservation"):
        assert any(blocked for blocked, _ in policy.seen), "the test never kept a lane out"
        assert any(starts for _, starts in policy.seen), (
            "no lane could start: the case proves little"
        )
