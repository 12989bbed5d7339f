"""Invariants of every registered policy, checked on the event log (STYLE.md "Tests").

Traces are synthetic Ai2-like ones from the generator (every rule checks each of them) and
random ones in the schema (``helpers.traces``, drawn by hypothesis), replayed on clusters of
several shapes under every policy in ``REGISTRY`` (a new policy is covered automatically) and a
few knob variants. Each test name states one rule, checked by replaying ``result.events`` in
log order.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import pairwise

import helpers
import pandas as pd
import pytest
from helpers import CODES, DAY_S, examples, small_tree, traces
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from impactlab import REGISTRY, SimConfig, make_policy, simulate
from impactlab.base.gangs import held_gpus, nodes_needed
from impactlab.policies.impactful import Impactful
from impactlab.sim.events import jobs_from_trace, preemptor
from impactlab.sim.policy import DRAIN_NOTE, DRAIN_REASON

# ----- what is run ---------------------------------------------------------------------------
Knobs = tuple[tuple[str, object], ...]

#: Every registered policy with its defaults, plus knob variants that change behaviour.
VARIANTS: list[tuple[str, Knobs]] = [(name, ()) for name in sorted(REGISTRY)] + [
    ("fifo", (("backfill", True),)),
    ("fairshare", (("backfill_reservation", False),)),
    ("impactful", (("backfill_reservation", True),)),
    ("impactful", (("drain_for_gangs", False),)),
    ("impactful", (("pack_victims", False),)),
    ("impactful", (("cap_hours", 0.5), ("refresh_s", 60.0), ("interactive_reserve", 0.4))),
    ("impactful", (("boost_interactive", False),)),
    ("impactful", (("interactive_reserve", 0.4),)),
    ("impactful", (("interactive_reserve", 0.4), ("reserve_min_nodes", 1))),
    ("impactful", (("max_victim_ratio", math.inf),)),
    ("impactful", (("protect_unallocated", True),)),
    ("impactful", (("cap_hours", 0.5), ("refresh_s", 60.0))),
    ("impactful", (("half_life_days", 0.25),)),
    ("impactful", (("cap_hours", 1.0), ("cap_hours_interactive", 24.0))),
]
VARIANT_IDS = [name + "".join(f"-{k}={v}" for k, v in knobs) for name, knobs in VARIANTS]
#: Variants every profile checks: each registered policy with its defaults, and the knobs that
#: change a pass the most. The others run in the thorough profile (the oracle compares their
#: logs in every profile).
CORE_IDS = {i for i, (_, knobs) in zip(VARIANT_IDS, VARIANTS) if not knobs} | {
    "fifo-backfill=True",
    "impactful-backfill_reservation=True",
}


def variant_params(chosen: list[tuple[tuple[str, Knobs], str]]) -> list:
    """``chosen`` (variant, id) pairs as pytest params, the non-core ones marked thorough."""
    return [
        pytest.param(v, id=i, marks=() if i in CORE_IDS else pytest.mark.thorough)
        for v, i in chosen
    ]


SHAPES = [(16, 8), (32, 8), (64, 8), (16, 4)]  # (GPUs, GPUs per node)

#: Synthetic traces: (gpus, gpus_per_node, days, demand, seed).
GENERATED = [
    (16, 8, 3.0, 3.0, 1),
    (32, 8, 2.0, 2.5, 2),
    (64, 8, 1.0, 2.0, 3),
    (16, 4, 2.0, 2.5, 4),
    (16, 8, 1.0, 1.2, 5),
    (32, 8, 1.5, 3.0, 6),
    (64, 8, 1.5, 2.5, 7),
    (16, 4, 3.0, 1.5, 8),
]

# submit, then attempts interrupted by a preemption or failure (each followed at once by a
# requeue), or by a preemption that ends a session (a kill) which its user submits again, then
# optionally a last attempt (still running, finished, a killed session, or preempted and still
# in its grace period at the end) or a withdrawal from the queue. Withdrawal happens only to a
# pending job.
LIFECYCLE = re.compile(r"S(R[PF]Q|RPKB)*(RD?|W|RPK?)?")
END_EVENTS = ("finish", "preempt", "fail")
READY = ("submit", "requeue", "resubmit")  # events after which a job is pending
#: Latencies and the sessions' rule a random case runs with: (cycle_s, startup_s, grace_s,
#: preempted_sessions, session_resubmit_share).
TIMING_KEYS = ("cycle_s", "startup_s", "grace_s", "preempted_sessions", "session_resubmit_share")
TIMINGS = [
    (0.0, 0.0, 0.0, "requeue", 0.0),
    (30.0, 30.0, 30.0, "end", 0.5),
    (0.0, 20.0, 0.0, "restore", 0.0),
    (45.0, 0.0, 0.0, "end", 1.0),
    (0.0, 0.0, 40.0, "end", 0.0),
    (30.0, 0.0, 60.0, "requeue", 0.0),
]


class Releases:
    """Which event frees a job's GPUs: a finish or failure at once, a preemption at its release
    (the ``requeue`` or ``kill`` after its grace period, at once without one)."""

    def __init__(self) -> None:
        self.preempted: dict[str, list[int]] = {}

    def freed(self, e) -> list[int]:
        """Nodes whose GPUs (``e.gpus`` over them) event ``e`` gives back."""
        if e.event in ("finish", "fail"):
            return parse_nodes(e.nodes)
        if e.event == "preempt":
            self.preempted[e.job_id] = parse_nodes(e.nodes)
        elif e.event in ("requeue", "kill"):
            return self.preempted.pop(e.job_id, [])
        return []


TOL = 1e-6


def close(a: float, b: float) -> bool:
    """Equal within a relative tolerance of 1e-6 (absolute for values below 1)."""
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


@dataclass(frozen=True)
class RandomInputs:
    """A random trace and the cluster it runs on."""

    gpus: int
    per: int
    horizon_s: float
    overhead_s: float
    trace: pd.DataFrame
    timing: tuple = TIMINGS[0]

    def __repr__(self) -> str:  # printed by hypothesis on failure: enough to reproduce
        rows = self.trace.to_dict("records")
        return (
            f"RandomInputs(gpus={self.gpus}, per={self.per}, horizon_s={self.horizon_s}, "
            f"overhead_s={self.overhead_s}, trace=pd.DataFrame({rows!r}), timing={self.timing!r})"
        )

    def config(self, policy: str, knobs: Knobs) -> SimConfig:
        """The run's config; the reporting window is the whole horizon."""
        return SimConfig(
            policy=policy,
            gpus=self.gpus,
            gpus_per_node=self.per,
            days=self.horizon_s / DAY_S,
            warmup_days=0.0,
            restart_overhead_s=self.overhead_s,
            policy_knobs=dict(knobs),
            **dict(zip(TIMING_KEYS, self.timing)),
        )

    def simulate(self, policy: str, knobs: Knobs):
        """Run it."""
        return simulate(self.config(policy, knobs), trace=self.trace, budgets=small_tree())


@st.composite
def random_inputs(draw) -> RandomInputs:
    """A random trace on a random cluster shape."""
    gpus, per = draw(st.sampled_from(SHAPES))
    horizon_s = draw(st.sampled_from([6 * 3600.0, 12 * 3600.0]))
    overhead_s = draw(st.sampled_from([0.0, 60.0]))
    trace = draw(traces(gpus, per, horizon_s))
    return RandomInputs(gpus, per, horizon_s, overhead_s, trace, draw(st.sampled_from(TIMINGS)))


def generated_config(policy: str, knobs: Knobs, key: tuple) -> SimConfig:
    """Config of a run on a synthetic trace."""
    gpus, per, days, demand, seed = key
    return SimConfig(
        policy=policy,
        gpus=gpus,
        gpus_per_node=per,
        days=days,
        demand=demand,
        seed=seed,
        policy_knobs=dict(knobs),
    )


@cache
def generated_run(policy: str, knobs: Knobs, key: tuple) -> Run:
    """A run on a synthetic trace (shared by all tests; nothing mutates it)."""
    return Run(simulate(generated_config(policy, knobs, key)), policy, knobs)


def run_of(variant: tuple[str, Knobs], case: RandomInputs | tuple) -> Run:
    """Simulate ``case`` under ``variant``."""
    policy, knobs = variant
    if isinstance(case, tuple):
        return generated_run(policy, knobs, case)
    return Run(case.simulate(policy, knobs), policy, knobs)


def drift_case() -> RandomInputs:
    """Two arrivals where 2048.8 + (10241.1 - 2048.8) != 10241.1 in floating point: the second
    must still be logged at 10241.1 (a clock that adds relative delays drifts)."""
    trace = pd.DataFrame(
        [
            {"job_id": "a", "submit_s": 2048.8, "gpus": 1, "duration_s": 1.0},
            {"job_id": "b", "submit_s": 10241.1, "gpus": 1, "duration_s": 1.0},
        ]
    )
    return RandomInputs(16, 8, 6 * 3600.0, 0.0, trace)


#: Cases every rule checks first: each synthetic trace (its runs are cached), then fixed cases.
#: (the thorough profile checks all eight synthetic traces, the default one the first four,
#: which cover every cluster shape).
EXAMPLES: list[RandomInputs | tuple] = [
    *(GENERATED if helpers.THOROUGH else GENERATED[:4]),
    drift_case(),
]


def rule(
    max_examples: int = 10,
    policies: tuple[str, ...] | None = None,
    knobs: bool = True,
):
    """A rule over the synthetic traces, random traces and every variant (or those of
    ``policies``; ``knobs=False`` keeps only the default knobs)."""
    chosen = [
        (v, i)
        for v, i in zip(VARIANTS, VARIANT_IDS)
        if (policies is None or v[0] in policies) and (knobs or not v[1])
    ]

    def wrap(fn):
        fn = given(case=random_inputs())(fn)
        for case in EXAMPLES:
            fn = example(case=case)(fn)
        fn = settings(
            max_examples=examples(max_examples),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(fn)
        return pytest.mark.parametrize("variant", variant_params(chosen))(fn)

    return wrap


# ----- the log, replayed -----------------------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """One run attempt: its start event and the event that ended it (None if still running)."""

    start: tuple
    end: tuple | None

    @property
    def length_s(self) -> float:
        """Seconds from start to end (the attempt must have ended)."""
        return self.end.t_s - self.start.t_s

    @property
    def progress_s(self) -> float:
        """Work the attempt kept: time after its restart overhead (none if it was interrupted
        during the overhead), minus the progress it lost."""
        return max(0.0, self.length_s - self.start.overhead_s) - self.end.lost_s


class Run:
    """A simulation result with its log split per job."""

    def __init__(self, result, policy: str, knobs: Knobs):
        self.result, self.policy, self.knobs = result, policy, dict(knobs)
        cfg = result.config
        self.per, self.capacity, self.n_nodes = cfg.gpus_per_node, cfg.gpus, cfg.nodes
        self.horizon_s, self.overhead_s = cfg.horizon_s, cfg.restart_overhead_s
        self.cycle_s, self.startup_s, self.grace_s = cfg.cycle_s, cfg.startup_s, cfg.grace_s
        self.sessions, self.resubmit_delay_s = cfg.preempted_sessions, cfg.session_resubmit_delay_s
        self.events = list(result.events.itertuples(index=False))
        self.by_job: dict[str, list] = defaultdict(list)
        for e in self.events:
            self.by_job[e.job_id].append(e)
        self.rows = {r.job_id: r for r in result.trace.itertuples(index=False)}
        self.funded = {jid: r.project in result.tree.leaf_of for jid, r in self.rows.items()}

    def __repr__(self) -> str:
        return f"Run({self.policy}, {self.knobs}, {len(self.events)} events)"

    @cached_property
    def attempts(self) -> dict[str, list[Attempt]]:
        """Attempts per job, pairing each start with the next end event of the job."""
        out: dict[str, list[Attempt]] = defaultdict(list)
        for jid, evs in self.by_job.items():
            start = None
            for e in evs:
                if e.event == "start":
                    start = e
                elif e.event in END_EVENTS:
                    out[jid].append(Attempt(start, e))
                    start = None
            if start is not None:
                out[jid].append(Attempt(start, None))
        return out

    @cached_property
    def contract_s(self) -> dict[str, float]:
        """The policy's own contract for each job, before placement (impactful then takes it
        from a borrower of the reserve or a start on draining nodes: see ``contract_of``)."""
        policy = make_policy(self.policy, **self.knobs)
        contract = policy.contract_of if isinstance(policy, Impactful) else policy.protection_s
        tree = self.result.tree
        return {j.job_id: contract(j) for j in jobs_from_trace(self.result.trace, tree, self.per)}

    def contract_of(self, start) -> float:
        """Protection of the attempt begun by ``start``: the job's contract, none if it borrows
        the reserve or starts on nodes draining for a gang (its start note says so)."""
        if self.policy == "impactful" and (self.borrows(start) or self.drained(start)):
            return 0.0
        return self.contract_s[start.job_id]

    @staticmethod
    def drained(start) -> bool:
        """The attempt begun by ``start`` runs on nodes draining for a gang (its start note)."""
        return start.detail.startswith(DRAIN_NOTE)

    @property
    def drains(self) -> bool:
        """Whether impactful drains nodes for gangs in this run."""
        return self.policy == "impactful" and self.knobs.get(
            "drain_for_gangs", Impactful.drain_for_gangs
        )

    @cached_property
    def reserve(self) -> set[int]:
        """impactful's interactive reserve (with the boost, on at least ``reserve_min_nodes``
        nodes): the highest-numbered ceil(share x nodes) nodes, leaving at least one; no other
        policy has one."""
        min_nodes = self.knobs.get("reserve_min_nodes", Impactful.reserve_min_nodes)
        if (
            self.policy != "impactful"
            or not self.knobs.get("boost_interactive", True)
            or self.n_nodes < min_nodes
        ):
            return set()
        share = self.knobs.get("interactive_reserve", Impactful.interactive_reserve)
        kept = min(math.ceil(round(share * self.n_nodes, 9)), self.n_nodes - 1)
        return set(range(self.n_nodes - kept, self.n_nodes))

    @property
    def reserves(self) -> bool:
        """Whether the run has backfill reservations (fairshare by default, impactful if asked)."""
        defaults = {"fairshare": True, "impactful": Impactful.backfill_reservation}
        return self.knobs.get("backfill_reservation", defaults.get(self.policy, False))

    def fits_off_reserve(self, jid: str) -> bool:
        """Job ``jid`` needs no more nodes than there are outside the reserve."""
        return nodes_needed(self.rows[jid].gpus, self.per) <= self.n_nodes - len(self.reserve)

    def borrows(self, start) -> bool:
        """The attempt begun by ``start`` borrows the reserve: a funded job, neither debug nor
        interactive, that fits off the reserve, started partly on it."""
        jid = start.job_id
        return (
            self.funded[jid]
            and self.rows[jid].kind not in ("debug", "interactive")
            and self.fits_off_reserve(jid)
            and bool(set(parse_nodes(start.nodes)) & self.reserve)
        )

    def place(self, free: list[int], jid: str) -> tuple[int, ...] | None:
        """Where the rules put job ``jid`` now: best fit (docs/model.md section 1); with a reserve,
        funded jobs go off the reserve and, failing that, anywhere."""
        gpus, reserve = self.rows[jid].gpus, self.reserve
        if not reserve or not self.funded[jid]:
            return best_fit(free, gpus, self.per)
        off_reserve = [-1 if n in reserve else f for n, f in enumerate(free)]
        return best_fit(off_reserve, gpus, self.per) or best_fit(free, gpus, self.per)

    def reclaimed(self, preempt, by: str) -> bool:
        """The preemption ``preempt`` is a draining gang ``by`` reclaiming its nodes (a funded
        multi-node gang, in a run that drains)."""
        return (
            self.drains
            and preempt.detail.endswith(DRAIN_REASON)
            and self.funded[by]
            and self.rows[by].gpus > self.per
        )

    def lent(self, preempt, by: str) -> bool:
        """The attempt ended by ``preempt`` borrowed the reserve and ``by`` is a
        debug/interactive job, to which borrowers yield at once."""
        evs = self.by_job[preempt.job_id]
        start = next(e for e in reversed(evs[: evs.index(preempt)]) if e.event == "start")
        return self.rows[by].kind in ("debug", "interactive") and self.borrows(start)

    def preemptions(self) -> list[tuple]:
        """(preempt event, victim row, beneficiary row) for every preemption."""
        out = []
        for e in self.events:
            if e.event == "preempt":
                by = preemptor(e.detail)
                assert e.detail.startswith("by=") and by in self.rows, f"bad preempt detail {e}"
                out.append((e, self.rows[e.job_id], self.rows[by]))
        return out

    def in_grace(self):
        """A test of time ``t``: is some preempted job in its grace period at ``t`` (its end
        included: a start waiting for its GPUs is logged then)? GPUs in grace are free to the
        engine, held in the log."""
        opened, closed, preempted = [], [], set()
        for e in self.events:
            if e.event == "preempt":
                opened.append(e.t_s)
                preempted.add(e.job_id)
            elif e.event in ("requeue", "kill") and e.job_id in preempted:
                preempted.discard(e.job_id)
                closed.append(e.t_s)
        closed.sort()
        return lambda t: bisect.bisect_right(opened, t) > bisect.bisect_left(closed, t)

    def passes_at(self, t: float) -> bool:
        """Whether a scheduling pass may run at ``t``: always, or with a cycle at its multiples."""
        return not self.cycle_s or t == math.ceil(t / self.cycle_s) * self.cycle_s

    def session_ends(self, jid: str) -> bool:
        """Whether preempting job ``jid`` ends it: an interactive session, unless restored or requeued."""
        return self.rows[jid].kind == "interactive" and self.sessions == "end"

    def instants(self):
        """Replay: yield (t, free GPUs per node, pending job ids, events of t) at the end of
        every instant at which something happened."""
        free = [self.per] * self.n_nodes
        pending: set[str] = set()
        releases = Releases()
        k = 0
        while k < len(self.events):
            t = self.events[k].t_s
            batch = []
            while k < len(self.events) and self.events[k].t_s == t:
                e = self.events[k]
                batch.append(e)
                share = e.gpus // max(1, len(parse_nodes(e.nodes)))
                if e.event == "start":
                    for n in parse_nodes(e.nodes):
                        free[n] -= share
                    pending.discard(e.job_id)
                freed = releases.freed(e)
                for n in freed:
                    free[n] += e.gpus // len(freed)
                if e.event in READY:
                    pending.add(e.job_id)
                elif e.event == "withdraw":
                    pending.discard(e.job_id)
                k += 1
            yield t, list(free), set(pending), batch


def parse_nodes(text: str) -> list[int]:
    """Node ids of the ``nodes`` column."""
    return [int(x) for x in text.split(",")] if text else []


def best_fit(free: list[int], gpus: int, per: int) -> tuple[int, ...] | None:
    """Expected placement by the rule (docs/model.md section 1), by scanning."""
    if gpus <= per:
        fits = [(f, n) for n, f in enumerate(free) if f >= gpus]
        return (min(fits)[1],) if fits else None
    whole = [n for n, f in enumerate(free) if f == per]
    need = math.ceil(gpus / per)
    return tuple(whole[:need]) if len(whole) >= need else None


# ----- cluster ---------------------------------------------------------------------------------
@rule(max_examples=12)
def test_gpus_in_use_never_exceed_node_or_cluster_capacity(variant, case):
    run = run_of(variant, case)
    used = [0] * run.n_nodes
    down: set[int] = set()
    holding: dict[str, list[int]] = {}
    releases = Releases()
    for k, e in enumerate(run.events):
        nodes = parse_nodes(e.nodes)
        if e.event == "start":
            gpus = run.rows[e.job_id].gpus
            assert e.gpus == held_gpus(gpus, run.per), f"start holds the wrong GPU count: {e}"
            assert len(nodes) == nodes_needed(gpus, run.per) == len(set(nodes)), (
                f"bad gang placement: {e}"
            )
            assert all(0 <= n < run.n_nodes and n not in down for n in nodes), (
                f"placed on a bad node: {e}"
            )
            for n in nodes:
                used[n] += e.gpus // len(nodes)
            holding[e.job_id] = nodes
        elif e.event in END_EVENTS:
            assert nodes == holding[e.job_id], f"{e.event} on other nodes than its start: {e}"
        freed = releases.freed(e)
        if freed:
            assert freed == holding.pop(e.job_id), (
                f"{e.event} frees other nodes than its start: {e}"
            )
            for n in freed:
                used[n] -= e.gpus // len(freed)
        elif e.event in ("node_down", "node_up"):
            for n in nodes:
                (down.add if e.event == "node_down" else down.discard)(n)
        assert all(0 <= u <= run.per for u in used), f"node over capacity after {e}: {used}"
        assert sum(used) <= run.capacity
        if k + 1 == len(run.events) or run.events[k + 1].t_s != e.t_s:  # end of an instant
            assert not [n for n in down if used[n]], (
                f"t={e.t_s}: jobs still running on a node that is down"
            )


@rule(max_examples=10)
def test_every_start_is_a_best_fit_placement(variant, case):
    """(With reservations, a job may be placed off the nodes reserved for a job that waits
    and does not fit; with draining, off the nodes draining for one.)"""
    run = run_of(variant, case)
    free = [run.per] * run.n_nodes
    pending: set[str] = set()
    releases, in_grace = Releases(), run.in_grace()
    for e in run.events:
        nodes = parse_nodes(e.nodes)
        if e.event in READY:
            pending.add(e.job_id)
        elif e.event == "withdraw":
            pending.discard(e.job_id)
        elif e.event == "start":
            pending.discard(e.job_id)
            expected = run.place(free, e.job_id)
            if in_grace(e.t_s):  # placed on the engine's view, where GPUs in grace count as free
                assert all(free[n] >= e.gpus // len(nodes) for n in nodes), (
                    f"{e}: no room on {nodes}"
                )
            elif (run.reserves or run.drains) and tuple(nodes) != expected:
                # (funded work goes off the nodes draining for a gang first; the log does not
                # say which they are, so the oracle checks that)
                assert all(free[n] >= e.gpus // len(nodes) for n in nodes), (
                    f"{e}: no room on {nodes}"
                )
                if (
                    run.policy == "fairshare"
                ):  # (in impactful, victims may free the holder's room mid-pass)
                    assert any(run.place(free, j) is None for j in pending), (
                        f"{e}: off best fit, no holder"
                    )
                elif not run.reserves:  # draining only: a funded gang waits, or is the one
                    # starting (on the nodes drained for it)
                    gangs = [
                        j
                        for j in (*pending, e.job_id)
                        if run.funded[j] and run.rows[j].gpus > run.per
                    ]
                    assert gangs, f"{e}: no gang drains"
            else:
                assert tuple(nodes) == expected, (
                    f"{e}: expected nodes {expected} with free GPUs {free}"
                )
            for n in nodes:
                free[n] -= e.gpus // len(nodes)
        freed = releases.freed(e)
        for n in freed:
            free[n] += e.gpus // len(freed)


@rule(max_examples=10, policies=("impactful",))
def test_funded_work_that_fits_off_the_reserve_preempts_only_off_the_reserve(variant, case):
    run = run_of(variant, case)
    for e, _, by in run.preemptions():
        if (
            run.reserve
            and run.funded[by.job_id]
            and by.kind not in ("debug", "interactive")
            and run.fits_off_reserve(by.job_id)
        ):
            assert set(parse_nodes(e.nodes)) - run.reserve, (
                f"{e}: frees only reserved nodes for {by.job_id}"
            )


@rule(max_examples=10, policies=("impactful",))
def test_the_reserve_is_borrowed_only_when_nothing_fits_off_it_and_borrowers_are_unprotected(
    variant, case
):
    run = run_of(variant, case)
    free = [run.per] * run.n_nodes
    releases, in_grace = Releases(), run.in_grace()
    for e in run.events:
        nodes = parse_nodes(e.nodes)
        if e.event == "start":
            if run.borrows(e):
                off = [-1 if n in run.reserve else f for n, f in enumerate(free)]
                # GPUs in grace are free to the engine but held in the log; nodes a backfill
                # reservation holds for a gang look free in the log but are not free to this job
                # (the log does not record holds, so the check is left to the oracle there)
                held = run.knobs.get("backfill_reservation", run.policy == "fairshare")
                if not in_grace(e.t_s) and not held:
                    assert best_fit(off, run.rows[e.job_id].gpus, run.per) is None, (
                        f"{e} borrowed needlessly"
                    )
                assert run.contract_of(e) == 0.0
            for n in nodes:
                free[n] -= e.gpus // len(nodes)
        freed = releases.freed(e)
        for n in freed:
            free[n] += e.gpus // len(freed)


# ----- lifecycle -------------------------------------------------------------------------------
@rule(max_examples=12)
def test_each_job_follows_the_lifecycle_grammar(variant, case):
    run = run_of(variant, case)
    for jid, evs in run.by_job.items():
        word = "".join(CODES[e.event] for e in evs)
        assert LIFECYCLE.fullmatch(word), f"job {jid}: {[e.event for e in evs]}"
        if word.endswith("P"):  # its release falls after the end of the run
            assert evs[-1].t_s + run.grace_s >= run.horizon_s, f"job {jid}: never released"
        for a, b in pairwise(evs):
            assert a.t_s <= b.t_s, f"job {jid}: events out of time order"
            # a preempted job is released after its grace period (sooner if its node fails)
            released = b.t_s == a.t_s or (
                a.event == "preempt" and a.t_s < b.t_s <= a.t_s + run.grace_s + TOL
            )
            if b.event == "requeue":
                assert released, f"job {jid}: requeued later than it was interrupted"
                assert not (a.event == "preempt" and run.session_ends(jid)), (
                    f"job {jid}: a session requeued"
                )
            if b.event == "kill":
                assert released and run.session_ends(jid), f"job {jid}: killed but not a session"
            if b.event == "resubmit":
                assert close(b.t_s, a.t_s + run.resubmit_delay_s), (
                    f"job {jid}: resubmitted at {b.t_s}"
                )


@rule(max_examples=8)
def test_event_log_is_in_time_order(variant, case):
    run = run_of(variant, case)
    times = [e.t_s for e in run.events]
    assert times == sorted(times)
    assert all(0 <= t < run.horizon_s for t in times)


@rule(max_examples=10)
def test_every_submitted_job_has_exactly_one_submit_event_at_its_submit_time(variant, case):
    run = run_of(variant, case)
    submits = [e for e in run.events if e.event == "submit"]
    expected = {jid for jid, r in run.rows.items() if r.submit_s < run.horizon_s}
    assert sorted(e.job_id for e in submits) == sorted(expected)
    assert set(run.by_job) == expected, "events for a job that was never submitted"
    for e in submits:
        assert e.t_s == run.rows[e.job_id].submit_s


@rule(max_examples=10)
def test_no_job_starts_before_it_is_submitted_or_requeued(variant, case):
    run = run_of(variant, case)
    for jid, evs in run.by_job.items():
        ready = None
        for e in evs:
            if e.event in READY:
                ready = e.t_s
            elif e.event == "start":
                assert ready is not None and e.t_s >= ready >= run.rows[jid].submit_s, f"{jid}: {e}"
                ready = None


@rule(max_examples=10)
def test_withdrawn_jobs_ran_out_of_patience_while_pending(variant, case):
    run = run_of(variant, case)
    for jid, evs in run.by_job.items():
        patience = run.rows[jid].patience_s
        ready = None
        for e in evs:
            if e.event in READY:
                ready = e.t_s
            elif e.event == "start":
                # a start decided in time may begin, and be logged, up to one grace period later:
                # when the GPUs it was given are still held by the jobs it preempted
                assert e.t_s - ready <= patience + run.grace_s + TOL * max(1.0, e.t_s), (
                    f"{jid} started after giving up: {e}"
                )
            elif e.event == "withdraw":
                assert close(e.t_s, ready + patience), (
                    f"{jid} withdrawn at {e.t_s}, ready at {ready}"
                )
        if evs[-1].event in READY:  # still waiting at the horizon
            assert run.horizon_s - ready <= patience + TOL * run.horizon_s, (
                f"{jid} should have been withdrawn"
            )


# ----- work ------------------------------------------------------------------------------------
@rule(max_examples=12)
def test_finished_jobs_got_exactly_their_work(variant, case):
    run = run_of(variant, case)
    for jid, atts in run.attempts.items():
        duration = run.rows[jid].duration_s
        done = sum(a.progress_s for a in atts if a.end is not None)
        if atts and atts[-1].end is not None and atts[-1].end.event == "finish":
            assert close(done, duration), f"{jid}: got {done} s of work, needs {duration}"
            last = atts[-1]
            assert last.end.lost_s == 0.0
        else:
            assert done < duration + TOL * duration, (
                f"{jid}: more work than it needs without finishing"
            )


@rule(max_examples=10)
def test_interrupted_attempts_keep_work_up_to_their_last_checkpoint(variant, case):
    run = run_of(variant, case)
    for jid, atts in run.attempts.items():
        for a in atts:
            if a.end is None or a.end.event == "finish":
                continue
            ckpt = run.rows[jid].checkpoint_s
            if a.end.event == "preempt" and run.rows[jid].kind == "interactive":
                ckpt = {"end": math.inf, "restore": 0.0}.get(
                    run.sessions, ckpt
                )  # a session: gone, or saved whole
            done = max(0.0, a.length_s - a.start.overhead_s)
            lost = a.end.lost_s
            kept = done - lost
            assert -TOL <= lost <= done + TOL * max(1.0, done), f"{jid}: lost {lost} of {done}"
            if ckpt == 0:
                assert lost == 0.0, f"{jid}: checkpoint_s=0 keeps every second"
            elif math.isinf(ckpt):
                assert close(kept, 0.0), f"{jid}: checkpoint_s=inf loses every second"
            else:
                k = round(kept / ckpt)
                assert close(kept, k * ckpt), f"{jid}: kept {kept} s, not a multiple of {ckpt}"
                assert done - kept < ckpt + TOL * max(1.0, done), (
                    f"{jid}: lost more than one interval"
                )


@rule(max_examples=8)
def test_only_restarts_pay_the_restart_overhead(variant, case):
    """(Every start, the first included, also pays the start-up time.)"""
    run = run_of(variant, case)
    for jid, atts in run.attempts.items():
        assert atts[0].start.overhead_s == run.startup_s, (
            f"{jid}: a first attempt pays only the start-up"
        )
        for a in atts[1:]:
            assert a.start.overhead_s == run.overhead_s + run.startup_s, (
                f"{jid}: a restart pays the configured overhead"
            )
        for a in atts:
            if a.end is not None and a.end.event == "finish":
                assert a.length_s >= a.start.overhead_s


# ----- preemption ------------------------------------------------------------------------------
@rule(max_examples=12)
def test_protected_jobs_are_never_preempted(variant, case):
    run = run_of(variant, case)
    policy, knobs = run.policy, run.knobs
    for jid, atts in run.attempts.items():
        row = run.rows[jid]
        cap_h = knobs.get("cap_hours_interactive") if row.kind == "interactive" else None
        cap_s = (cap_h if cap_h is not None else knobs.get("cap_hours", 8.0)) * 3600.0
        for a in atts:
            if a.end is None or a.end.event != "preempt":
                continue
            slack = TOL * max(1.0, a.end.t_s)
            assert a.length_s >= run.contract_of(a.start) - slack, (
                f"{jid} preempted inside its contract: {a}"
            )
            if (
                policy == "impactful"
                and not run.borrows(a.start)
                and not run.drained(a.start)
                and (run.funded[jid] or knobs.get("protect_unallocated", False))
            ):
                assert a.length_s >= min(row.min_runtime_s, cap_s) - slack, (
                    f"{jid} preempted while protected"
                )


@rule(
    max_examples=15, policies=("impactful",)
)  # legacy has no budgets; fifo, fairshare never preempt
def test_unallocated_job_never_preempts_anyone(variant, case):
    run = run_of(variant, case)
    for _event, victim, by in run.preemptions():
        assert run.funded[by.job_id], f"unallocated {by.job_id} preempted {victim.job_id}"


@rule(max_examples=12, policies=("impactful",))
def test_starts_are_left_unprotected_only_for_a_funded_gang_waiting_to_start(variant, case):
    run = run_of(variant, case)
    pending: set[str] = set()
    for e in run.events:
        if e.event in READY:
            pending.add(e.job_id)
        elif e.event in ("start", "withdraw"):
            pending.discard(e.job_id)
        if e.event == "start" and e.detail:
            assert run.drains and run.drained(e), f"{e}: unexpected start note"
            holder = e.detail[len(DRAIN_NOTE) :]
            assert holder in pending and run.funded[holder] and run.rows[holder].gpus > run.per, (
                f"{e}"
            )
            assert run.contract_s[e.job_id] > 0, f"{e}: noted, yet it has no contract to lose"


@rule(max_examples=12, policies=("impactful",))
def test_impactful_never_preempts_within_the_same_project(variant, case):
    run = run_of(variant, case)
    for e, victim, by in run.preemptions():
        # a borrower yields to debug work of any project; unprotected work on nodes draining for
        # a gang yields to it, its own project's too (the oracle checks where the nodes are)
        if not run.lent(e, by.job_id) and not run.reclaimed(e, by.job_id):
            assert not (run.funded[victim.job_id] and victim.project == by.project), f"{e}"


@rule(max_examples=12, policies=("impactful",))
def test_impactful_never_breaks_up_a_funded_job_larger_than_the_ratio_allows(variant, case):
    run = run_of(variant, case)
    ratio = run.knobs.get("max_victim_ratio", 1.0)
    for e, victim, by in run.preemptions():
        # (borrowers of the reserve yield to debug work, and unprotected work on nodes draining
        # for a gang to the gang, whatever their size)
        if (
            run.funded[victim.job_id]
            and not run.lent(e, by.job_id)
            and not run.reclaimed(e, by.job_id)
        ):
            held = held_gpus(by.gpus, run.per)
            assert e.gpus <= ratio * held, (
                f"{by.job_id} ({held} GPUs) broke up {victim.job_id}: {e}"
            )


@rule(max_examples=40, policies=("legacy",))
def test_legacy_preempts_only_preemptible_jobs_of_strictly_lower_priority(variant, case):
    run = run_of(variant, case)
    for e, victim, by in run.preemptions():
        assert victim.preemptible, f"{victim.job_id} opted out of preemption: {e}"
        assert by.priority > victim.priority, (
            f"{by.job_id} (priority {by.priority}) preempted {victim.job_id} ({victim.priority})"
        )


@rule(max_examples=12, policies=("fifo", "fairshare"))
def test_fifo_and_fairshare_never_preempt(variant, case):
    run = run_of(variant, case)
    assert not [e for e in run.events if e.event == "preempt"]


@rule(max_examples=10)
def test_every_preemption_starts_the_job_it_made_room_for(variant, case):
    run = run_of(variant, case)
    for e, victim, by in run.preemptions():  # (once the victim's grace period is over)
        if (
            e.t_s + run.grace_s >= run.horizon_s
        ):  # the start would fall at or after the end of the run
            continue
        starts = [
            s
            for s in run.by_job[by.job_id]
            if s.event == "start" and e.t_s <= s.t_s <= e.t_s + run.grace_s
        ]
        assert starts, (
            f"{victim.job_id} was preempted for {by.job_id}, which did not start at t={e.t_s}"
        )


# ----- scheduling ------------------------------------------------------------------------------
@rule(max_examples=10)
def test_with_a_cycle_every_decision_falls_on_a_cycle_boundary(variant, case):
    run = run_of(variant, case)
    for e in run.events:
        if e.event in ("start", "preempt"):
            assert run.passes_at(e.t_s), f"{e.event} at {e.t_s}, between cycles of {run.cycle_s} s"


@rule(max_examples=10)
def test_no_pending_job_fits_at_the_end_of_an_instant(variant, case):
    """Policies without head-of-line blocking leave no startable job waiting; FIFO leaves no
    startable head job waiting. (A job that may not use impactful's reserve does not fit there.)"""
    run = run_of(variant, case)
    fifo = run.policy == "fifo"
    in_grace = run.in_grace()
    for t, free, pending, _ in run.instants():
        if not run.passes_at(t) or in_grace(t):  # (GPUs in grace look free in the log)
            continue
        waiting = sorted(pending, key=lambda j: (run.rows[j].submit_s, j))
        if run.reserves and (
            run.policy != "fairshare" or any(run.place(free, j) is None for j in waiting)
        ):
            continue  # a blocked job may hold a reservation that keeps the others waiting
        for jid in waiting[:1] if fifo else waiting:
            placed = run.place(free, jid)
            assert placed is None, (
                f"t={t}: {jid} ({run.rows[jid].gpus} GPUs) waits but fits on {placed}"
            )


@rule(max_examples=25)
def test_no_job_that_fits_the_cluster_waits_on_an_idle_cluster(variant, case):
    """Whatever the reserve, reservations or ordering, a cluster with nothing running and a job
    waiting that fits the cluster (every valid job does) is never left like that."""
    run = run_of(variant, case)
    in_grace = run.in_grace()
    for t, free, pending, _ in run.instants():
        if pending and all(f == run.per for f in free) and run.passes_at(t) and not in_grace(t):
            fits = [j for j in pending if run.rows[j].gpus <= run.capacity]
            assert not fits, f"t={t}: the cluster is idle and {sorted(fits)} wait"


@rule(max_examples=30, policies=("fifo",), knobs=False)
def test_fifo_without_backfill_starts_jobs_in_submit_order(variant, case):
    run = run_of(variant, case)
    started = [e.job_id for e in run.events if e.event == "start"]
    assert started == sorted(started, key=lambda j: (run.rows[j].submit_s, j))


@rule(max_examples=8)
def test_job_table_has_one_consistent_row_per_submitted_job(variant, case):
    run = run_of(variant, case)
    table = run.result.jobs
    assert table["job_id"].is_unique
    assert set(table["job_id"]) == {j for j, r in run.rows.items() if r.submit_s < run.horizon_s}
    state_of = {
        "submit": "queued",
        "requeue": "queued",
        "start": "running",
        "finish": "finished",
        "withdraw": "withdrawn",
        "kill": "killed",
        "resubmit": "queued",
        "preempt": "running",  # preempted, its grace period (holding its GPUs) not over at the end
    }
    for row in table.itertuples(index=False):
        evs = run.by_job[row.job_id]
        starts = [e.t_s for e in evs if e.event == "start"]
        assert row.state == state_of[evs[-1].event], (
            f"{row.job_id}: {row.state} after {evs[-1].event}"
        )
        assert row.attempts == len(starts)
        assert row.preempts == sum(e.event == "preempt" for e in evs)
        assert row.fails == sum(e.event == "fail" for e in evs)
        assert row.kills == sum(e.event == "kill" for e in evs)
        end = evs[-1].t_s if evs[-1].event in ("finish", "withdraw", "kill") else None
        assert (pd.isna(row.end_s) and end is None) or row.end_s == end
        first = starts[0] if starts else (end if end is not None else run.horizon_s)
        assert close(row.wait_s, first - row.submit_s), f"{row.job_id}: wait {row.wait_s}"
        assert row.wait_s >= 0 and row.queued_s >= -TOL


@rule(max_examples=8)
def test_requested_ratio_and_the_preemption_tables_agree_with_the_log(variant, case):
    """The GPUs wanted (held GPUs from submission to the end, not while a killed session's user
    is away), and the preemptions counted alike in the summary and in the per-kind and
    per-hour tables, from the log by hand."""
    run = run_of(variant, case)
    result, window = run.result, run.result.window
    wanted = 0.0
    for jid, evs in run.by_job.items():
        if not jid:
            continue
        gpus = run.rows[jid].gpus
        held = -(-gpus // run.per) * run.per if gpus > run.per else gpus
        since = None
        for e in evs:
            if e.event in ("submit", "resubmit"):
                since = e.t_s
            elif e.event in ("finish", "withdraw", "kill") and since is not None:
                wanted += held * max(0.0, min(e.t_s, window.t1) - max(since, window.t0))
                since = None
        if since is not None:
            wanted += held * max(0.0, window.t1 - max(since, window.t0))
    summary = result.summary()
    assert close(summary["requested_ratio"], wanted / (window.capacity * window.span_s))
    preempts = [e for e in run.events if e.event == "preempt" and window.t0 <= e.t_s < window.t1]
    assert summary["preemptions"] == len(preempts)
    assert result.preemptions_by_kind()["preemptions"].sum() == len(preempts)
    by_hour = result.preemption_series(bucket_s=3600.0)
    assert by_hour["preemptions"].sum() == sum(e.event == "preempt" for e in run.events)


@pytest.mark.parametrize("variant", variant_params(list(zip(VARIANTS, VARIANT_IDS))))
@settings(max_examples=examples(5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=random_inputs(), key=st.sampled_from(GENERATED[:4]))
def test_same_config_and_seed_give_an_identical_event_log(variant, case, key):
    policy, knobs = variant
    pd.testing.assert_frame_equal(
        case.simulate(policy, knobs).events, case.simulate(policy, knobs).events
    )
    # A fresh run against the one the other rules replayed (built earlier in this process).
    config = generated_config(policy, knobs, key)
    pd.testing.assert_frame_equal(
        simulate(config).events, generated_run(policy, knobs, key).result.events
    )
