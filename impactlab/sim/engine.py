"""The simulation engine: the clock calls it, the policy decides, the engine acts and logs.

Events are calls on the clock (``impactlab.sim.clock``, simpy underneath; a simpy process per job
costs about 5x as much). Every state change appends one ``Event`` to the log; nothing else
is counted here.

A job's timers (finish, patience, end of protection, crash) go stale when the job changes
state first, which happens to about half of them. They wait in the engine's own agenda, and
only its earliest live entry is on the clock's queue, so stale ones are dropped for the cost
of a heap pop. Every timer keeps the sequence number it was given when set, so events fire
in exactly the order they would if each were its own call on the clock.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from ..base.config import HealthConfig, Maintenance
from ..base.rng import stream
from ..inputs.budgets import BudgetTree
from .clock import Call, Clock
from .cluster import Cluster
from .events import SESSION, Ev, EventLog, Job
from .fleet import FleetSeat
from .grace import GraceBook
from .health import NodeHealth, repair_mode
from .maintenance import MaintenancePlan
from .policy import Context, Policy, PolicyError

# QUEUED = not yet submitted; LEAVING = preempted, holding its GPUs for the grace period
QUEUED, PENDING, RUNNING, DONE, WITHDRAWN, KILLED, LEAVING = range(7)
# Event names as plain strings (an enum's ``.value`` is a Python call on every log row).
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
CORDON, EVICT, VACATED, MAINT_DOWN, MAINT_UP = (
    Ev.CORDON.value,
    Ev.EVICT.value,
    Ev.VACATED.value,
    Ev.MAINT_DOWN.value,
    Ev.MAINT_UP.value,
)
NO_FAILURES = HealthConfig()  # the do-nothing health model


@dataclass(frozen=True)
class Timing:
    """Latencies of a real scheduler (docs/model.md section 8); zeros = decisions act at once.

    ``cycle_s``: passes run only at multiples of it; ``startup_s``: every start holds its GPUs
    this long before making progress; ``grace_s``: a preempted job keeps its GPUs this long
    after the decision, and the job that takes them starts once they are released.
    """

    cycle_s: float = 0.0
    startup_s: float = 0.0
    grace_s: float = 0.0


@dataclass(frozen=True)
class Sessions:
    """What preempting an interactive session does (``mode``): "requeue" (the do-nothing
    default) treats it as any job, rerun from its last checkpoint; "restore" saves it whole and
    requeues it; "end" ends it (``kill``), and its user submits it again with probability
    ``resubmit_share`` after ``resubmit_delay_s``."""

    mode: str = "requeue"
    resubmit_share: float = 0.0
    resubmit_delay_s: float = 0.0


NO_LATENCY, AS_JOBS = Timing(), Sessions()


def kept_progress(done_s: float, checkpoint_s: float) -> float:
    """Work an interrupted attempt keeps: up to its last checkpoint (0 = every second kept)."""
    if checkpoint_s <= 0:
        return done_s
    if math.isinf(checkpoint_s):
        return 0.0
    return math.floor(done_s / checkpoint_s) * checkpoint_s


class Engine:
    """Replays jobs on a cluster under a policy; ``run()`` returns the event log.

    It also serves as the ``Scheduler`` a policy's pass reads and acts through.
    """

    def __init__(
        self,
        jobs: Sequence[Job],
        tree: BudgetTree,
        cluster: Cluster,
        policy: Policy,
        restart_overhead_s: float,
        horizon_s: float,
        health: HealthConfig = NO_FAILURES,
        seed: int = 0,
        timing: Timing = NO_LATENCY,
        sessions: Sessions = AS_JOBS,
        maintenance: tuple[Maintenance, ...] = (),
        fleet: FleetSeat | None = None,
    ):
        # One of several clusters (``fleet``): its calls go on the fleet's clock, and the fleet
        # runs each cluster's pass once an instant's events are all done.
        self.clock = fleet.clock.sibling(fleet.fire(self)) if fleet else Clock(self._fire)
        self.now = 0.0  # simulated seconds; set from the clock as each event fires
        self._report_at = math.inf  # next progress report (simulated time); none by default
        self.jobs, self.cluster, self.policy = jobs, cluster, policy
        self.node_count = cluster.nodes
        self.restart_overhead_s, self.horizon_s = restart_overhead_s, horizon_s
        n = len(jobs)
        self.state = [QUEUED] * n
        self.remaining = [j.duration_s for j in jobs]
        self.started_at = [math.nan] * n
        self.nodes: list[tuple[int, ...]] = [()] * n
        self.timing, self.sessions = timing, sessions
        self._cycle_s, self._tick_at = timing.cycle_s, -math.inf  # next cycle with a pass due
        self._resubmits = stream(seed, "sessions", *(fleet.streams if fleet else ()))
        self.leaving: dict[int, bool] = {}  # preempted jobs in their grace period -> whether killed
        self.grace = GraceBook(cluster.nodes)
        # paid by the current attempt, or due on the next start: start-up (+ restart overhead)
        self._overhead = [timing.startup_s] * n
        self._start_notes: dict[int, str] = {}  # a policy's note on a start still waiting to begin
        # Protection as events see it: set at start, cleared when the protection timer fires,
        # so that it changes only with an event (and counted in cluster.shielded).
        self.shielded = [False] * n
        self._token = [0] * n  # bumped on every state change; stale timers compare it
        self._gives_up_at: dict[int, float] = {}  # when a job of finite patience is withdrawn
        self._next_seq = self.clock.next_seq
        self._agenda: list[tuple[float, int, Callable[[int], None], int, int]] = []  # job timers
        self._armed: set[int] = set()  # sequence numbers of agenda entries on simpy's queue
        self.pending: set[int] = set()
        self.epoch = 0  # bumped whenever GPUs are freed or protection ends (room may appear)
        self.last_start_s = (
            -math.inf
        )  # latest start: jobs starting at or after now are not yet preemptible
        self.running: set[int] = set()
        self.on_node: list[set[int]] = [set() for _ in range(cluster.nodes)]
        self.log = EventLog()
        self._where: dict[tuple[int, ...], str] = {}  # "nodes" column text per placement
        self._pass_due = False
        self._in_pass = False
        self._requeued: list[int] = []
        self._wakes: set[float] = set()
        self.crash_s = health.crash_s
        self.broken: set[int] = set()  # failed nodes still in service (manual repair)
        self.doomed = [False] * n  # the current attempt runs on a failed node
        self.health = NodeHealth(
            self,
            health,
            health.repair or repair_mode(policy.repair),
            seed,
            fleet.first_node if fleet else 0,
        )
        # Planned maintenance: nodes closed to new work (policies' searches leave them alone)
        # and the end of each running attempt's protection (when the policy may let it go).
        self.cordoned: frozenset[int] = frozenset()
        self.protected_until = [0.0] * n
        self.maintenance = MaintenancePlan(self, maintenance, cluster.nodes)
        policy.setup(
            Context(
                jobs,
                tree,
                cluster.capacity,
                cluster.gpus_per_node,
                self,
                fleet.org if fleet else None,
            )
        )

    def run(self, progress: Callable[[float], None] | None = None, reports: int = 200) -> EventLog:
        """Run to the horizon and return the event log. ``progress(t_s)`` is called about
        ``reports`` times, in simulated time, as the run goes (it observes; it never changes
        what happens, since it is called from events that fire anyway)."""
        if progress is not None:
            self._progress, self._report_step = progress, self.horizon_s / reports
            self._report_at = 0.0
        self.begin()
        self.clock.run(until=self.horizon_s)
        if progress is not None:
            progress(self.horizon_s)
        return self.log

    def begin(self) -> None:
        """Set the first arrival, failures and maintenance on the clock (``run`` calls it; a
        fleet calls it for each cluster before running the shared clock)."""
        first = next((k for k, j in enumerate(self.jobs) if j.submit_s < self.horizon_s), None)
        if first is not None:
            self.at(self.jobs[first].submit_s, self._arrive, first)
        self.health.start()
        self.maintenance.start()

    def _report(self) -> None:
        self._progress(self.now)
        self._report_at = (self.now // self._report_step + 1) * self._report_step

    # ----- timers ----------------------------------------------------------------------------
    def at(self, t: float, fn: Callable[..., None], *args: object) -> None:
        """Call ``fn(*args)`` at exactly time ``t`` (a timeout's now + delay could be 1 ulp off)."""
        self.clock.call_at(max(t, self.now), fn, args)

    def _job_timer(self, t: float, fn: Callable[[int], None], j: int) -> None:
        """Call ``fn(j)`` at time ``t`` unless job ``j`` changes state first."""
        entry = (max(t, self.now), self._next_seq(), fn, j, self._token[j])
        heapq.heappush(self._agenda, entry)
        if self._agenda[0] is entry:
            self._arm()

    def _arm(self) -> None:
        """Put the earliest live agenda entry on the clock's queue (once), dropping stale ones."""
        agenda, token = self._agenda, self._token
        while agenda and token[agenda[0][3]] != agenda[0][4]:
            heapq.heappop(agenda)
        if agenda and agenda[0][1] not in self._armed:
            t, eid = agenda[0][0], agenda[0][1]
            self._armed.add(eid)
            self.clock.call_at_seq(t, eid, self._due, (eid,))

    def _due(self, eid: int) -> None:
        self._armed.discard(eid)
        agenda = self._agenda
        if agenda and agenda[0][1] == eid:  # else it was dropped as stale meanwhile
            _, _, fn, j, token = heapq.heappop(agenda)
            if self._token[j] == token:
                fn(j)
        self._arm()

    def _fire(self, call: Call) -> None:
        self.now = self.clock.now
        if self.now >= self._report_at:
            self._report()
        call.fn(*call.args)
        # The pass runs after the last event of this instant (and again if it requeued jobs),
        # inline rather than as one more simpy event: the same order, a third fewer events.
        while self._pass_due and not self.clock.due_at(self.now):
            self._pass()

    def passes(self, now: float) -> None:
        """Run this cluster's due passes at ``now`` until a call is due at this instant (a
        fleet's turn for this cluster; a lone engine does the same in ``_fire``)."""
        self.now = now
        while self._pass_due and not self.clock.due_at(now):
            self._pass()

    def _touch(self) -> None:
        """Something changed: a scheduling pass runs once this instant's events are done, or
        with a cycle, at the next cycle boundary (at most one tick is armed at a time)."""
        if not self._cycle_s:
            self._pass_due = True
            return
        t = self._boundary(self.now)
        if t <= self.now:
            self._pass_due = True
        elif t != self._tick_at and t < self.horizon_s:
            self._tick_at = t
            self.at(t, self._tick)

    def _tick(self) -> None:
        self._pass_due = True

    def _boundary(self, t: float) -> float:
        """The first cycle boundary (a multiple of ``cycle_s``) at or after ``t``."""
        k = math.ceil(t / self._cycle_s)
        return k * self._cycle_s if k * self._cycle_s >= t else (k + 1) * self._cycle_s

    def wake_at(self, t: float) -> None:
        """Schedule a pass at ``t`` (policy request; with a cycle, at the boundary at or after
        it); duplicates are merged."""
        if self._cycle_s:
            t = self._boundary(t)
        if t <= self.now:
            self._touch()
        elif t < self.horizon_s and t not in self._wakes:
            self._wakes.add(t)
            self.at(t, self._wake, t)

    def _wake(self, t: float) -> None:
        self._wakes.discard(t)
        self._touch()

    def _pass(self) -> None:
        self._pass_due = False
        self._in_pass = True
        try:
            self.policy.schedule(self.now, self)
        finally:
            self._in_pass = False
        requeued, self._requeued = self._requeued, []
        for j in requeued:
            self._enqueue(j)

    # ----- job lifecycle ---------------------------------------------------------------------
    def _arrive(self, k: int) -> None:
        t = self.jobs[k].submit_s
        while k < len(self.jobs) and self.jobs[k].submit_s == t:
            job = self.jobs[k]
            self._log(SUBMIT, job)
            self._enqueue(k)
            k += 1
        if k < len(self.jobs) and self.jobs[k].submit_s < self.horizon_s:
            self.at(self.jobs[k].submit_s, self._arrive, k)

    def _enqueue(self, j: int, again: bool = False) -> None:
        """Job ``j`` joins the queue: its patience runs from now, or (``again``: a start undone
        before it began) from when it last joined."""
        self.state[j] = PENDING
        self._token[j] += 1
        self.pending.add(j)
        self.policy.enqueue(j, self.now)
        patience = self.jobs[j].patience_s
        if not math.isinf(patience):
            if not again:
                self._gives_up_at[j] = self.now + patience
            self._job_timer(self._gives_up_at[j], self._withdraw, j)
        self._touch()

    def _withdraw(self, j: int) -> None:
        self.state[j] = WITHDRAWN
        self._token[j] += 1
        self.pending.discard(j)
        self.policy.dequeue(j, self.now)
        self._log(WITHDRAW, self.jobs[j], detail="patience")
        self._touch()

    def start(self, j: int, nodes: tuple[int, ...]) -> None:
        """Start pending job ``j`` on ``nodes`` (a policy decision, validated here)."""
        job = self.jobs[j]
        if j not in self.pending:  # a job preempted in this pass is requeued only after it
            raise PolicyError(
                f"{self.policy.name}: cannot start job {job.job_id}: it is not pending"
            )
        try:
            self.cluster.take(nodes, job.gpus)
        except RuntimeError as err:
            raise PolicyError(f"{self.policy.name}: cannot start job {job.job_id}: {err}") from None
        now = self.now
        # GPUs still in a victim's grace period: the job holds them from the decision on (no one
        # else may take them) but begins, and is logged, once they are released.
        begin = max(now, self.grace.claim(j, nodes, self.cluster.free)) if self.leaving else now
        self.state[j] = RUNNING
        self._token[j] += 1
        self.pending.discard(j)
        self.running.add(j)
        for n in nodes:
            self.on_node[n].add(j)
        self.nodes[j], self.started_at[j], self.last_start_s = (
            nodes,
            begin,
            max(self.last_start_s, begin),
        )
        protected_until = begin + self.policy.protection_s(job)
        note = self.policy.start_note(j)  # (asked with the same state as the protection)
        if (
            begin > now
        ):  # not a victim before it begins (started_at is ahead) and shielded meanwhile
            if note:
                self._start_notes[j] = note
            self._job_timer(begin, self._begin, j)
        else:
            self._log(START, job, nodes=nodes, detail=note, overhead_s=self._overhead[j])
        end = begin + self._overhead[j] + self.remaining[j]
        self.doomed[j] = bool(self.broken.intersection(nodes))
        if self.doomed[j]:  # landed on a failed node nobody has noticed: it fails, never finishes
            self._job_timer(min(begin + self.crash_s, end), self._crash, j)
        self._job_timer(end, self._finish, j)
        self.protected_until[j] = protected_until
        if now < protected_until:
            self._shield(j, +1)
            if protected_until < end:
                self._job_timer(protected_until, self._unshield, j)
        self.policy.on_start(j, now)

    def _begin(self, j: int) -> None:
        """A start that waited for GPUs in grace begins: they are all released now."""
        self.grace.began(j)
        self._log(
            START,
            self.jobs[j],
            nodes=self.nodes[j],
            detail=self._start_notes.pop(j, ""),
            overhead_s=self._overhead[j],
        )

    def waiting_to_begin(self, j: int) -> bool:
        """True while started job ``j`` waits for GPUs still in a victim's grace period."""
        return self.state[j] == RUNNING and self.started_at[j] > self.now

    def _crash(self, j: int) -> None:
        bad = sorted(self.broken.intersection(self.nodes[j]))
        self.interrupt(j, FAIL, f"node {bad[0]} failed")

    # ----- node health -------------------------------------------------------------------------
    def node_failed(self, node: int, detail: str) -> None:
        """A node fails: its jobs fail (protection does not help); it stays in service, broken,
        until taken out."""
        self._log_node(NODE_DOWN, node, detail)
        self.broken.add(node)
        self._fail_jobs_on(node)

    def take_out(self, node: int) -> None:
        """Take a failed node out of service; jobs that landed on it since fail now."""
        self._fail_jobs_on(node)
        self.broken.discard(node)
        self.cluster.take_out(node)

    def _fail_jobs_on(self, node: int) -> None:
        """Jobs on a failed node fail; one still waiting to begin there goes back to the queue,
        and victims in their grace period there release their GPUs at once."""
        for j in sorted(self.on_node[node]):
            if self.waiting_to_begin(j):
                self._unclaim(j)
            else:
                self.interrupt(j, FAIL, f"node {node} failed")
        for j in sorted(v for v in self.leaving if node in self.nodes[v]):
            self._release(j)

    def _unclaim(self, j: int) -> None:
        """A start that has not begun is undone (nothing was logged): the job is pending again."""
        self.grace.unclaim(j, self.leaving)
        self._stop(j, PENDING)
        self._enqueue(j, again=True)  # (it never left the queue, as the log tells it)

    def node_repaired(self, node: int, detail: str) -> None:
        """A repaired node is back in service (closed to new work at once if maintenance was
        announced for it meanwhile)."""
        self.cluster.restore(node)
        self._log_node(NODE_UP, node, detail)
        self.maintenance.repaired(node)
        self.epoch += 1
        self._touch()

    def in_maintenance(self, node: int) -> bool:
        """Whether ``node`` is announced, draining or down for planned maintenance."""
        return self.maintenance.in_window(node)

    # ----- planned maintenance (``MaintenanceOps``) ------------------------------------------
    def announce(self, node: int, detail: str) -> None:
        """Log that ``node`` is announced for maintenance."""
        self._log_node(CORDON, node, detail)

    def can_close(self, node: int) -> bool:
        """Whether ``node`` is in service and healthy: a failure runs its course first."""
        return node not in self.cluster.down and node not in self.broken

    def close(self, node: int) -> None:
        """Close announced ``node`` to new work (at its announcement, once repaired, or once
        an earlier window is over)."""
        self.cluster.cordon(node)
        self.cordoned = frozenset(self.cluster.cordoned)
        self.epoch += 1  # (reservations and searches see less room)
        self._touch()

    def jobs_on(self, node: int) -> list[int]:
        """The jobs running (or waiting to begin) on ``node``, in index order."""
        return sorted(self.on_node[node])

    def vacate_at(self, j: int) -> float:
        """When the policy lets running job ``j`` go for maintenance (``Policy.vacate_at``; a
        policy without the hook never does)."""
        ask = getattr(self.policy, "vacate_at", None)
        return math.inf if ask is None else ask(j, self)

    def evict_at(self, t: float, j: int, detail: str) -> None:
        """Evict job ``j`` at ``t`` (with a cycle, at the boundary at or after it) unless its
        attempt ends first."""
        t = max(t, self.now)
        if self._cycle_s:
            t = self._boundary(t)
        if t <= self.now:
            self._evict(j, detail)
        else:
            self._job_timer(t, partial(self._evict, detail=detail), j)

    def _evict(self, j: int, detail: str) -> None:
        """Stop job ``j`` so that its node can go down: requeued from its last checkpoint (one
        still waiting to begin goes back to the queue with nothing logged)."""
        if self.waiting_to_begin(j):
            self._unclaim(j)
        else:
            self.interrupt(j, EVICT, detail)  # (``_stop`` tells the plan the node may be empty)

    def is_empty(self, node: int) -> bool:
        """Whether cordoned ``node`` holds no job (nor a victim still in its grace period)."""
        return self.cluster.idle(node) and not any(node in self.nodes[v] for v in self.leaving)

    def vacated(self, node: int, detail: str) -> None:
        """Log that cordoned ``node`` is empty."""
        self._log_node(VACATED, node, detail)

    def take_down(self, node: int, detail: str) -> None:
        """Take empty cordoned ``node`` out of service for its maintenance."""
        self.cluster.close(node)
        self.cordoned = frozenset(self.cluster.cordoned)
        self._log_node(MAINT_DOWN, node, detail)

    def bring_up(self, node: int, detail: str) -> None:
        """Put ``node`` back into service after its maintenance (room may appear)."""
        self.cluster.restore(node)
        self._log_node(MAINT_UP, node, detail)
        self.epoch += 1
        self._touch()

    def _log_node(self, event: str, node: int, detail: str) -> None:
        for append, value in zip(
            self.log.appends,
            (self.now, event, "", self.cluster.gpus_per_node, str(node), detail, 0.0, 0.0),
        ):
            append(value)

    def _unshield(self, j: int) -> None:
        """Job ``j``'s protection ran out: it may now be preempted (the timer is live only
        while the attempt that set it runs, which is shielded until now)."""
        self._shield(j, -1)
        self.epoch += 1
        self._touch()

    def _shield(self, j: int, sign: int) -> None:
        self.shielded[j] = sign > 0
        self.cluster.shield(self.nodes[j], self.jobs[j].gpus, sign)

    def expected_end(self, j: int) -> float:
        """When running job ``j`` finishes if nothing interrupts it."""
        return self.started_at[j] + self._overhead[j] + self.remaining[j]

    def work_left(self, j: int) -> float:
        """Seconds pending job ``j`` needs once started (restart overhead included)."""
        return self._overhead[j] + self.remaining[j]

    def protected(self, j: int) -> bool:
        """True while the current attempt of job ``j`` may not be preempted."""
        return self.shielded[j]

    def _finish(self, j: int) -> None:
        self._log(FINISH, self.jobs[j], nodes=self.nodes[j])
        self.remaining[j] = 0.0
        self._stop(j, DONE)

    def preempt(self, j: int, by: int, reason: str = "") -> None:
        """Preempt running job ``j`` for job ``by`` (a policy decision, validated here); the
        policy's ``reason`` follows ``by=<job_id>`` in the log's detail."""
        job = self.jobs[j]
        if self.state[j] != RUNNING or self.waiting_to_begin(j):
            raise PolicyError(
                f"{self.policy.name}: cannot preempt job {job.job_id}: it is not running"
            )
        if self.protected(j):
            raise PolicyError(
                f"{self.policy.name}: cannot preempt job {job.job_id}: it is protected"
            )
        detail = f"by={self.jobs[by].job_id}"
        self.interrupt(j, PREEMPT, f"{detail}; {reason}" if reason else detail)

    def interrupt(self, j: int, why: str, detail: str) -> None:
        """Stop a running job early (preemption or failure): keep checkpointed work, requeue it;
        a preempted session that is not restorable ends instead (``kill``)."""
        job = self.jobs[j]
        done = min(max(0.0, self.now - self.started_at[j] - self._overhead[j]), self.remaining[j])
        mode = self.sessions.mode if why == PREEMPT and job.kind == SESSION else "requeue"
        if self.doomed[j] or mode == "end":  # failed hardware, or a session gone, keeps nothing
            kept = 0.0
        elif mode == "restore":  # saved whole as it is preempted
            kept = done
        else:
            kept = kept_progress(done, job.checkpoint_s)
        self._log(why, job, nodes=self.nodes[j], detail=detail, lost_s=done - kept)
        self.remaining[j] -= kept
        self._overhead[j] = self.restart_overhead_s + self.timing.startup_s
        grace = self.timing.grace_s if why == PREEMPT else 0.0
        self._stop(j, LEAVING if grace else PENDING)
        if grace:  # it keeps its GPUs (in the log) until the grace period ends
            self.leaving[j] = mode == "end"
            self.grace.grant(j, self.nodes[j], job.per_node, self.now + grace)
            self._job_timer(self.now + grace, self._release, j)
        else:
            self._settle(j, mode == "end")

    def _release(self, j: int) -> None:
        """A preempted job's grace period is over (or cut short by a failure): its GPUs are free."""
        self._token[j] += 1  # (its release timer is stale if cut short)
        self.grace.release(j, self.nodes[j])
        self._settle(j, self.leaving.pop(j))
        if self.cordoned:
            for n in self.nodes[j]:
                if n in self.cordoned:
                    self.maintenance.node_freed(n)

    def _settle(self, j: int, killed: bool) -> None:
        """After an interruption has released the GPUs: requeue the job, or end the session."""
        if killed:
            self._kill(j)
            return
        self.state[j] = PENDING
        self._log(REQUEUE, self.jobs[j])
        if self._in_pass:
            self._requeued.append(j)  # not restarted in the pass that preempted it
        else:
            self._enqueue(j)

    def _kill(self, j: int) -> None:
        """A preempted session ends; its user may submit it again later (one draw per kill)."""
        self.state[j] = KILLED
        self._log(KILL, self.jobs[j], lost_s=self.remaining[j])  # the session time not had
        rules = self.sessions
        if self._resubmits.random() < rules.resubmit_share:
            self._job_timer(self.now + rules.resubmit_delay_s, self._resubmit, j)

    def _resubmit(self, j: int) -> None:
        self._log(RESUBMIT, self.jobs[j])
        self._enqueue(j)

    def _stop(self, j: int, state: int) -> None:
        self.state[j] = state
        self._token[j] += 1
        self.running.discard(j)
        if self.shielded[j]:
            self._shield(j, -1)
        for n in self.nodes[j]:
            self.on_node[n].discard(j)
        self.cluster.give_back(self.nodes[j], self.jobs[j].gpus)
        self.epoch += 1
        self.policy.on_stop(j, self.now)
        self._touch()
        if self.cordoned and state != LEAVING:
            for n in self.nodes[j]:
                if n in self.cordoned:
                    self.maintenance.node_freed(n)

    def _log(
        self,
        event: str,
        job: Job,
        nodes: tuple[int, ...] = (),
        detail: str = "",
        overhead_s: float = 0.0,
        lost_s: float = 0.0,
    ) -> None:
        where = self._where.get(nodes)
        if where is None:
            where = self._where[nodes] = ",".join(map(str, nodes))
        t, ev, job_id, gpus, on, why, overhead, lost = self.log.appends
        t(self.now)
        ev(event)
        job_id(job.job_id)
        gpus(job.held)
        on(where)
        why(detail)
        overhead(overhead_s)
        lost(lost_s)
