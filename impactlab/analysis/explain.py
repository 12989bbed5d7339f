"""Why is my job waiting? A job's story in words, from the event log and the run's inputs.

``explain(result, job_id)`` replays the log: the cluster's free GPUs per node (from start and
stop events, and node failures), which jobs ran and when their protection ended, and which
jobs started while this one waited. Each wait gets the reasons the replay supports:

* ``no_room``: no block of the job's size was free (for a gang: too few whole nodes), with the
  largest free block, and for how much of the wait it would have fitted;
* ``behind``: jobs that started while it waited, by project (the policy ranked them first);
* ``protected``: running jobs it could not preempt (contract, opt-out), and when the first
  protection ended;
* the policy's own reasons for sparing running jobs that were unprotected: ``priority``
  (legacy: of its priority or higher), ``fair_share`` (impactful: of its own project, too large
  to break up, or on sides no more over-served than its own; a gang searches only at
  refreshes), ``reserve`` (impactful's interactive reserve, which other funded work may use
  when free but not clear), or a plug-in policy's own;
* ``no_preemption``: the policy (or the job's standing under it) never preempts for it;
* ``cycle``: the scheduler decides only every ``cycle_s``: the part of the wait until its next
  decision;
* ``grace``: the jobs it preempted kept their GPUs through their grace period (``grace_s``).

What depends on the policy (how long an attempt was protected, whether it preempts for a
job, why it spared a job) is asked of the policy's ``Explainer`` (``Policy.explainer``,
``impactlab.sim.policy``), so a plug-in policy's jobs get stories too. A preemption's reason is
the one the policy logged (``by=<job_id>; <reason>``). The replay
counts what a pass could see; it does not rerun the policy, so it states facts that explain a
wait, not the policy's every consideration (a backfill reservation, for one, leaves no trace).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
import pandas as pd

from ..base.config import SimConfig
from ..base.units import HOUR_S, hours, plural, span
from ..inputs.budgets import BudgetTree
from ..policies import make_policy
from ..sim.events import Ev, Job, jobs_from_trace, preempt_reason, preemptor
from ..sim.policy import Explainer

# Event names as plain strings (an enum's ``.value`` is a Python call on every row replayed).
SUBMIT, START, PREEMPT, REQUEUE, FINISH, FAIL, WITHDRAW, NODE_DOWN, NODE_UP, KILL, RESUBMIT = (
    Ev.SUBMIT.value,
    Ev.START.value,
    Ev.PREEMPT.value,
    Ev.REQUEUE.value,
    Ev.FINISH.value,
    Ev.FAIL.value,
    Ev.WITHDRAW.value,
    Ev.NODE_DOWN.value,
    Ev.NODE_UP.value,
    Ev.KILL.value,
    Ev.RESUBMIT.value,
)
#: Rows that give an attempt's GPUs back. A preempted attempt keeps them through its grace
#: period, until its ``requeue`` or ``kill``; a failed or evicted one gives them back at once.
STOPS = frozenset({FINISH, FAIL, REQUEUE, KILL, Ev.EVICT.value})
#: A node closed to new work from its ``cordon`` (maintenance announced) until its
#: ``maintenance_up``; a job's story counts it with the nodes down (failed, until ``node_up``).
CORDON, MAINT_UP = Ev.CORDON.value, Ev.MAINT_UP.value
NODE_EVENTS = frozenset({NODE_DOWN, NODE_UP, CORDON, MAINT_UP})


class LoggedRun(Protocol):
    """What a story is told from (``impactlab.analysis.results.SimResult`` is one)."""

    @property
    def config(self) -> SimConfig: ...
    @property
    def trace(self) -> pd.DataFrame: ...
    @property
    def tree(self) -> BudgetTree: ...
    @property
    def events(self) -> pd.DataFrame: ...

    @property
    def jobs(self) -> pd.DataFrame:
        """Per-job table derived from the event log."""
        ...


class Reason(StrEnum):
    """Why a job waited (see the module docstring)."""

    NO_ROOM = "no_room"
    BEHIND = "behind"
    PROTECTED = "protected"
    PRIORITY = "priority"
    FAIR_SHARE = "fair_share"
    RESERVE = "reserve"
    NO_PREEMPTION = "no_preemption"
    CYCLE = "cycle"
    GRACE = "grace"


@dataclass(frozen=True)
class Why:
    """One reason for a wait, in words."""

    reason: Reason | str  # a plug-in policy may name its own reasons
    text: str


@dataclass(frozen=True)
class Step:
    """One step of a job's story: when, what kind (an event name, ``wait`` or ``running``), in
    words; a wait also has its length and its reasons."""

    t_s: float
    kind: str
    text: str
    why: tuple[Why, ...] = ()
    span_s: float = 0.0


@dataclass(frozen=True)
class Story:
    """A job's story: its steps in time order."""

    job_id: str
    steps: tuple[Step, ...]
    #: In a fleet, the cluster the job ran on (its node numbers are that cluster's).
    cluster: str = ""

    def text(self) -> str:
        """The story as lines of text, one per step (reasons indented below their wait)."""
        lines = [f"job {self.job_id}" + (f" on cluster {self.cluster}" if self.cluster else "")]
        for step in self.steps:
            lines.append(f"  {hours(step.t_s):>10}  {step.text}")
            lines += [f"  {'':>10}    - {why.text}" for why in step.why]
        return "\n".join(lines)

    def frame(self) -> pd.DataFrame:
        """The steps as a table: t_h, kind, text (reasons joined in the text)."""
        rows = [
            (s.t_s / HOUR_S, s.kind, "; ".join([s.text, *(w.text for w in s.why)]))
            for s in self.steps
        ]
        return pd.DataFrame(rows, columns=["t_h", "kind", "text"])

    def reasons(self) -> list[Reason | str]:
        """Every wait reason of the story, in order."""
        return [why.reason for step in self.steps for why in step.why]


class ExplainError(KeyError):
    """The job is not in the run."""

    def __str__(self) -> str:
        return str(self.args[0])


# ----- the replay ------------------------------------------------------------------------------
@dataclass
class RunningAttempt:
    """A running attempt as the replay sees it."""

    job: Job
    nodes: tuple[int, ...]
    protected_until_s: float


@dataclass
class Occupancy:
    """Free GPUs per node, nodes down and running attempts, as of the rows replayed so far."""

    per_node: int
    free: list[int]
    down: set[int] = field(default_factory=set)
    running: dict[str, RunningAttempt] = field(default_factory=dict)

    def fits(self, job: Job) -> bool:
        """Whether ``job`` could be placed now."""
        return self.block(job) >= (job.n_nodes if job.n_nodes > 1 else job.gpus)

    def block(self, job: Job) -> int:
        """The largest free block for ``job``: whole free nodes for a gang, else the most free
        GPUs on one node (healthy nodes only)."""
        free, down = self.free, self.down
        if job.n_nodes > 1:  # (a story replays the whole log: list methods, not a loop, per row)
            return free.count(self.per_node) - sum(free[n] == self.per_node for n in down)
        if not down:
            return max(free)
        return max((f for n, f in enumerate(free) if n not in down), default=0)


def node_list(nodes: str) -> tuple[int, ...]:
    """The nodes of a log row's ``nodes`` field ("3,4,5")."""
    return tuple(int(n) for n in nodes.split(","))


class Replay:
    """Walks the event log once, keeping the occupancy (``Occupancy``) up to date."""

    def __init__(self, result: LoggedRun, jobs: dict[str, Job], policy: Explainer):
        c = result.config
        self.state = Occupancy(c.gpus_per_node, [c.gpus_per_node] * c.nodes)
        self.rows = list(
            result.events[["t_s", "event", "job_id", "nodes", "detail"]].itertuples(index=False)
        )
        self.jobs, self.policy, self.pos = jobs, policy, 0
        self.failed: set[int] = set()  # nodes down for repair
        self.closed: set[int] = set()  # nodes announced for maintenance, until back in service
        self.cycle_s, self.grace_s = c.cycle_s, c.grace_s
        kills = result.events[result.events["event"] == KILL]
        self.lost_at = dict(zip(zip(kills["job_id"], kills["t_s"]), kills["lost_s"]))

    def advance(self, until: int) -> None:
        """Apply rows up to (not including) position ``until``."""
        while self.pos < until:
            self.apply(self.rows[self.pos])
            self.pos += 1

    def apply(self, row: tuple) -> None:
        """Apply one event row to the cluster state."""
        t, event, job_id, nodes, detail = row
        state = self.state
        if event == START:
            job, where = self.jobs[job_id], node_list(nodes)
            for n in where:
                state.free[n] -= job.per_node
            state.running[job_id] = RunningAttempt(
                job, where, t + self.policy.protection_s(job, where, detail)
            )
        elif event in STOPS:
            attempt = state.running.pop(
                job_id, None
            )  # (a failed attempt is gone before its requeue)
            if attempt is not None:
                for n in attempt.nodes:
                    state.free[n] += attempt.job.per_node
        elif event in NODE_EVENTS:
            node = int(nodes)
            if event == NODE_DOWN:
                self.failed.add(node)
            elif event == NODE_UP:
                self.failed.discard(node)
            elif event == CORDON:
                self.closed.add(node)
            elif event == MAINT_UP:
                self.closed.discard(node)
            state.down = self.failed | self.closed


def explainer(result: LoggedRun) -> Explainer:
    """The run's policy's answers to a story's questions (``Policy.explainer``)."""
    policy = make_policy(result.config.policy, **result.config.policy_knobs)
    ask = getattr(policy, "explainer", None)  # a policy written to the protocol without BasePolicy
    return ask(result.config.nodes) if ask is not None else Explainer(policy, result.config.nodes)


def protection_ends(result: LoggedRun, records: Sequence[Job]) -> np.ndarray:
    """When the contract of each attempt ends, per ``start`` row of the log in order (its start
    where it had none), by the run's policy (``explainer``); ``records``: the run's job records."""
    policy, jobs = explainer(result), {job.job_id: job for job in records}
    starts = result.events[result.events["event"] == START]
    return np.array(
        [
            t + policy.protection_s(jobs[j], node_list(nodes), detail)
            for t, j, nodes, detail in zip(
                starts["t_s"], starts["job_id"], starts["nodes"], starts["detail"]
            )
        ],
        dtype=float,
    )


# ----- the story -------------------------------------------------------------------------------
def explain(result: LoggedRun, job_id: str, records: Sequence[Job] | None = None) -> Story:
    """The story of ``job_id`` in ``result``: its steps, each wait with its reasons
    (``records``: the run's job records, if already built)."""
    records = records or jobs_from_trace(result.trace, result.tree, result.config.gpus_per_node)
    jobs = {job.job_id: job for job in records}
    if job_id not in jobs:
        raise ExplainError(f"no job {job_id!r} in this run ({len(jobs)} jobs)")
    job = jobs[job_id]
    replay = Replay(result, jobs, explainer(result))
    steps: list[Step] = []
    waiting_since: int | None = None
    for p in np.flatnonzero(result.events["job_id"].to_numpy() == job_id).tolist():
        t, event, _, nodes, detail = replay.rows[p]
        if event in (SUBMIT, REQUEUE, RESUBMIT):
            steps.append(_queued(job, t, event))
            waiting_since = p
            continue
        if waiting_since is not None and event in (START, WITHDRAW):
            if t > replay.rows[waiting_since].t_s:  # (started in the instant it arrived: no wait)
                steps.append(_wait(job, replay, waiting_since, p))
            waiting_since = None
        replay.advance(p)
        steps.append(_event_step(job, t, event, nodes, detail, jobs, replay))
    if waiting_since is not None:
        steps.append(_wait(job, replay, waiting_since, len(replay.rows), result.config.horizon_s))
    elif steps and steps[-1].kind == START:
        steps.append(
            Step(result.config.horizon_s, "running", "still running at the end of the run")
        )
    return Story(job_id, tuple(steps))


def _queued(job: Job, t: float, event: str) -> Step:
    if event == REQUEUE:
        return Step(t, event, "requeued: waits to start again")
    if event == RESUBMIT:
        return Step(t, event, "resubmitted by its user: waits to start again")
    project = (
        f"project {job.project}" if job.funded else f"{job.project or 'no project'} (unallocated)"
    )
    return Step(
        t,
        event,
        f"submitted: {job.kind}, {job.gpus} GPU{plural(job.gpus)}, {project}, user {job.user}, "
        f"{span(job.duration_s)} of work",
    )


def _event_step(
    job: Job, t: float, event: str, nodes: str, detail: str, jobs: dict[str, Job], replay: Replay
) -> Step:
    if event == START:
        where = node_list(nodes)
        until = t + replay.policy.protection_s(job, where, detail)
        text = f"started on node{'s' if len(where) > 1 else ''} {nodes}"
        if math.isinf(until):
            text += "; never preempted (it opted out)"
        elif until > t:
            text += f"; protected until {hours(until)}"
        elif because := replay.policy.unprotected_because(job, where, detail):
            text += f"; unprotected: {because}"
        return Step(t, event, text)
    if event == PREEMPT:
        by = jobs.get(preemptor(detail))
        who = f"job {preemptor(detail)}"
        if by is not None:
            who += f" ({by.kind}, {by.gpus} GPU{plural(by.gpus)}, {by.project or 'no project'})"
        reason = preempt_reason(detail)
        return Step(t, event, f"preempted by {who}" + (f": {reason}" if reason else ""))
    if event == FAIL:
        return Step(t, event, f"failed: {detail}")
    if event == FINISH:
        return Step(t, event, "finished")
    if event == Ev.EVICT:
        window, _, why = detail.removeprefix("maintenance=").partition("; ")
        when = "at the deadline" if why == "deadline" else "when the policy let it go"
        return Step(t, event, f"evicted {when}: node {nodes} goes down for maintenance {window}")
    if event == KILL:
        return Step(
            t,
            event,
            f"ended: a preempted session is not requeued ({span(detail_loss(replay, t, job))} "
            "of it not had)",
        )
    return Step(t, event, f"withdrew: it ran out of patience ({span(job.patience_s)})")


def _wait(job: Job, replay: Replay, begin: int, end: int, horizon_s: float | None = None) -> Step:
    """The wait from row ``begin`` (the job's submit/requeue) to row ``end``, with its reasons."""
    t0 = replay.rows[begin].t_s
    t1 = horizon_s if horizon_s is not None else replay.rows[end].t_s
    replay.advance(begin + 1)
    walk = _walk(job, replay, end, t0, t1)
    why = [
        w
        for w in (
            _no_room(job, walk, t1 - t0, replay),
            _behind(walk.ahead),
            _protected(job, walk.protected(t0), replay),
            *_spared(job, walk, t0, replay),
            _no_preemption(job, replay),
            _cycle(replay, t0, t1),
            _grace(job, replay, t0, t1),
        )
        if w is not None
    ]
    text = f"waited {span(t1 - t0)}" + (
        " (still waiting at the end of the run)" if horizon_s is not None else ""
    )
    return Step(t0, "wait", text, tuple(why), t1 - t0)


@dataclass
class Walk:
    """What the replay saw during one wait."""

    block: int = 0  # the largest free block once the pass of the first instant had run
    down: int = 0  # nodes down then
    running: list[RunningAttempt] = field(default_factory=list)  # running attempts then

    def protected(self, t0: float) -> list[RunningAttempt]:
        """The attempts still protected when the wait began at ``t0``."""
        return [a for a in self.running if a.protected_until_s > t0]

    fit_s: float = 0.0  # seconds of the wait during which the job would have fitted
    ahead: list[tuple[Job, bool]] = field(
        default_factory=list
    )  # jobs started, and whether it fitted then


def _walk(job: Job, replay: Replay, end: int, t0: float, t1: float) -> Walk:
    """Replay the rows of the wait up to row ``end``; the first instant's pass included."""
    walk, state, last, first = Walk(), replay.state, t0, True
    for p in range(replay.pos, end + 1):
        t = replay.rows[p].t_s if p < end else t1
        if first and t > t0:  # the pass of the instant the wait began has run
            first = False
            walk.block, walk.down = state.block(job), len(state.down)
            walk.running = list(state.running.values())
        fits = state.fits(job)
        if fits:
            walk.fit_s += t - last
        last = t
        if p == end:
            break
        row = replay.rows[p]
        if row.event == START:
            walk.ahead.append((replay.jobs[row.job_id], fits))
        replay.advance(p + 1)
    if first:  # the wait ended at the instant it began
        walk.block, walk.down = state.block(job), len(state.down)
        walk.running = list(state.running.values())
    return walk


def _no_room(job: Job, walk: Walk, wait_s: float, replay: Replay) -> Why | None:
    if job.n_nodes > 1:
        have = f"{job.n_nodes} whole free nodes for its {job.gpus} GPUs; {walk.block} were free"
    else:
        have = f"{job.gpus} free GPU{plural(job.gpus)} on one node; the largest free block was {walk.block}"
    share = walk.fit_s / wait_s if wait_s > 0 else 1.0
    if share >= 0.999 and walk.block >= (job.n_nodes if job.n_nodes > 1 else job.gpus):
        return None  # room enough all along: other reasons held it back
    later = f"; it would have fitted for {share:.0%} of the wait" if walk.fit_s > 0 else ""
    down = f" ({walk.down} node{plural(walk.down)} down)" if walk.down else ""
    return Why(Reason.NO_ROOM, f"no room: it needed {have} when it began waiting{down}{later}")


def _behind(ahead: list[tuple[Job, bool]]) -> Why | None:
    """Jobs that started while it waited; those that started while it would have fitted too
    were ranked ahead of it (or kept it off the room by a reservation)."""
    if not ahead:
        return None
    ranked = [j for j, fitted in ahead if fitted]
    n = len(ahead)
    text = f"{n} job{plural(n)} started while it waited, of {projects_of([j for j, _ in ahead])}"
    if len(ranked) == n:
        return Why(
            Reason.BEHIND,
            f"{text}: {'each' if n > 1 else 'it'} took room it could have used "
            "(the policy ranked them ahead)",
        )
    if ranked:
        text += (
            f"; {len(ranked)} of them took room it could have used (the policy ranked them ahead), of "
            f"{projects_of(ranked)}; the others fitted where it did not"
        )
    else:
        text += ", all where it did not fit"
    return Why(Reason.BEHIND, text)


def projects_of(jobs: list[Job]) -> str:
    """Job counts by project, the five largest first."""
    counts = Counter(
        j.project if j.funded else f"{j.project} (unallocated)" if j.project else "unallocated"
        for j in jobs
    )
    named = ", ".join(f"{p} ({n})" for p, n in counts.most_common(5))
    more = f" and {len(counts) - 5} more" if len(counts) > 5 else ""
    return f"project{plural(len(counts))} {named}{more}"


def _protected(job: Job, protected: list[RunningAttempt], replay: Replay) -> Why | None:
    if not protected or not replay.policy.preempts_for(job):
        return None
    gpus = sum(a.job.held for a in protected)
    ends = [a.protected_until_s for a in protected if not math.isinf(a.protected_until_s)]
    never = len(protected) - len(ends)
    parts = []
    if ends and hours(min(ends)) == hours(max(ends)):
        parts.append(f"protected until {hours(ends[0])}")
    elif ends:
        parts.append(
            f"protected, the first until {hours(min(ends))}, the last until {hours(max(ends))}"
        )
    if never:
        parts.append(f"{never} opted out of preemption (never preempted)")
    n = len(protected)
    return Why(
        Reason.PROTECTED,
        f"{n} running job{plural(n)} holding {gpus} GPUs could not be preempted: "
        + "; ".join(parts),
    )


def _need(job: Job) -> int:
    """The block a job needs: whole nodes for a gang, else GPUs on one node."""
    return job.n_nodes if job.n_nodes > 1 else job.gpus


def _spared(job: Job, walk: Walk, t0: float, replay: Replay) -> list[Why]:
    """The policy's own reasons for sparing the running jobs that were unprotected when the
    wait began (legacy: priorities; impactful: fair share and the reserve)."""
    unprotected = [(a.job, a.nodes) for a in walk.running if a.protected_until_s <= t0]
    had_room = walk.block >= _need(job)
    return [
        Why(_reason(kind), text) for kind, text in replay.policy.spared(job, unprotected, had_room)
    ]


def _reason(kind: str) -> Reason | str:
    """A known reason as its ``Reason``; a plug-in policy's own kind as it named it."""
    return Reason(kind) if kind in Reason.__members__.values() else kind


def _no_preemption(job: Job, replay: Replay) -> Why | None:
    if replay.policy.preempts_for(job):
        return None
    return Why(Reason.NO_PREEMPTION, replay.policy.no_preemption(job))


# ----- a table to pick a job from ---------------------------------------------------------------
def _cycle(replay: Replay, t0: float, t1: float) -> Why | None:
    """The scheduler decides only at multiples of its cycle: the part of the wait before the
    first decision it could take part in."""
    cycle = replay.cycle_s
    if cycle <= 0:
        return None
    first = min(math.ceil(t0 / cycle) * cycle, t1)
    if first <= t0:
        return None
    return Why(
        Reason.CYCLE,
        f"the scheduler decides every {span(cycle)}: {span(first - t0)} of the wait was "
        "until its next cycle",
    )


def _grace(job: Job, replay: Replay, t0: float, t1: float) -> Why | None:
    """Jobs this one preempted kept their GPUs through their grace period before it started."""
    made_room = [
        r
        for r in replay.rows
        if r.event == PREEMPT and t0 <= r.t_s <= t1 and preemptor(r.detail) == job.job_id
    ]
    if not made_room or replay.grace_s <= 0:
        return None
    n = len(made_room)
    return Why(
        Reason.GRACE,
        f"it preempted {n} job{plural(n)} at {hours(made_room[0].t_s)}, which kept "
        f"{'their' if n > 1 else 'its'} GPUs for the {span(replay.grace_s)} grace period",
    )


def detail_loss(replay: Replay, t: float, job: Job) -> float:
    """The session time a kill at ``t`` took away (the kill row's ``lost_s``)."""
    return replay.lost_at.get((job.job_id, t), 0.0)


def story_choices(result: LoggedRun, limit: int = 200) -> pd.DataFrame:
    """The jobs most worth a question, for a picker: the most preempted, then the longest
    waiting first (job_id, kind, gpus, project, wait_h, preempts, state), at most ``limit``."""
    jobs = result.jobs
    waited = jobs["wait_s"].fillna(result.config.horizon_s - jobs["submit_s"])
    table = pd.DataFrame(
        {
            "job_id": jobs["job_id"],
            "kind": jobs["kind"],
            "gpus": jobs["gpus"],
            "project": jobs["project"],
            "wait_h": (waited / HOUR_S).round(2),
            "preempts": jobs["preempts"],
            "state": jobs["state"],
        }
    )
    return table.sort_values(["preempts", "wait_h", "job_id"], ascending=[False, False, True]).head(
        limit
    )
