"""The reference scheduling passes: each built-in policy's rules, written plainly. They are
the specification (docs/model.md section 5): the fast policies in this package produce the
identical event log, event for event (``tests/test_oracle.py`` replays traces under both).

Every pass here sorts and scans everything, every time: it reads ``sched.pending`` and
``sched.running`` afresh, places gangs by scanning every node and chooses victims from the
written rules. Nothing is incremental, so each class is slow and obviously correct; to read
what a policy does, read its reference here, then its fast file for how it is made fast.

Each reference subclasses its fast policy only to inherit the knobs, the protection contract and
the usage charging (``on_start``/``on_stop`` and ``FairTree``, which are not the incremental
part); it replaces the queues and the pass. It does not use ``SizeQueues``, ``start_in_order`` or
``choose_victims``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial

from ..sim.cluster import best_fit_on
from ..sim.policy import (
    BACKFILL_REASON,
    DRAIN_NOTE,
    DRAIN_REASON,
    RESERVE_REASON,
    BasePolicy,
    Context,
    Scheduler,
)
from .fair import FairTree
from .fairshare import FairShare
from .fifo import Fifo
from .impactful import Impactful
from .legacy import Legacy
from .queues import BACKFILL_DEPTH

UNALLOCATED = -1
BOOSTED_KINDS = ("debug", "interactive")

Accept = Callable[[int, list[int]], bool]  # (candidate, victims accepted so far) -> accept it?
PlaceNow = Callable[[Scheduler, int], "tuple[int, ...] | None"]  # (sched, job) -> its nodes
MakeRoom = Callable[[int, set[int]], "list[int] | None"]  # (job, nodes kept off) -> victims


# ----- placement and victims, from the rules -------------------------------------------------
Place = Callable[
    [Scheduler, int, set[int]], "tuple[int, ...] | None"
]  # (sched, job, nodes to avoid)


def place(sched: Scheduler, j: int, among: list[int] | None = None) -> tuple[int, ...] | None:
    """Best fit for job ``j`` now, by scanning every node's free GPUs (or only ``among``)."""
    cluster = sched.cluster
    free = list(cluster.free)
    if among is not None:
        free = [f if n in among else -1 for n, f in enumerate(free)]
    return best_fit_on(free, sched.jobs[j].gpus, cluster.gpus_per_node)


def frees_per_node(sched: Scheduler, v: int) -> int:
    """GPUs running job ``v`` gives back on each of its nodes (whole nodes if multi-node)."""
    return min(sched.jobs[v].gpus, sched.cluster.gpus_per_node)


def choose(
    sched: Scheduler,
    j: int,
    candidates: Iterable[int],
    accept: Accept,
    approve: Callable[[list[int]], bool] | None = None,
    among: list[int] | None = None,
) -> list[int] | None:
    """Victims whose preemption lets job ``j`` be placed (on the nodes ``among``, default all,
    never on nodes cordoned for maintenance), in candidate order; None if none do."""
    per, gpus = sched.cluster.gpus_per_node, sched.jobs[j].gpus
    free = list(sched.cluster.free)
    closed = sched.cordoned
    if among is not None or closed:  # room there never counts
        free = [
            f if (among is None or n in among) and n not in closed else -per
            for n, f in enumerate(free)
        ]
    single = gpus <= per
    k = 1 if single else -(-gpus // per)
    freed = [0] * len(free)
    whole = [] if single else sorted(n for n, f in enumerate(free) if f == per)
    accepted: list[int] = []
    target: list[int] | None = None
    for v in candidates:
        if not accept(v, accepted):
            continue
        accepted.append(v)
        for n in sched.nodes[v]:
            freed[n] += frees_per_node(sched, v)
            if single and free[n] + freed[n] >= gpus:
                target = [n]
                break
            if not single and free[n] + freed[n] == per:
                whole.append(n)
        if not single and len(whole) >= k:
            target = whole[:k]
        if target is not None:
            break
    if target is None:
        return None
    kept = trim(sched, accepted, target, gpus if single else per)
    return kept if approve is None or approve(kept) else None


def trim(sched: Scheduler, accepted: list[int], target: list[int], need: int) -> list[int]:
    """Keep victims touching the target nodes, then drop, last first, those not needed."""
    free = sched.cluster.free
    kept = [v for v in accepted if any(n in target for n in sched.nodes[v])]

    def room(victims: list[int], n: int) -> int:
        return free[n] + sum(frees_per_node(sched, v) for v in victims if n in sched.nodes[v])

    for v in reversed(kept.copy()):
        rest = [u for u in kept if u != v]
        if all(room(rest, n) >= need for n in target):
            kept = rest
    return kept


Why = Callable[[int, int], str]  # (job, victim) -> the reason logged for the preemption


def preempt_and_start(
    sched: Scheduler, j: int, victims: list[int], placer: PlaceNow = place, why: Why | None = None
) -> None:
    """Preempt ``victims`` for ``j`` in order (each with ``why(j, v)``, all judged before the
    first goes), then start ``j`` where ``placer`` says."""
    reasons = [why(j, v) if why else "" for v in victims]
    for v, reason in zip(victims, reasons):
        sched.preempt(v, j, reason)
    nodes = placer(sched, j)
    if nodes is None:
        raise AssertionError(f"reference: job {j} does not fit after preempting {victims}")
    sched.start(j, nodes)


def eligible(sched: Scheduler, v: int) -> bool:
    """Running job ``v`` started before this instant and is not protected."""
    return sched.started_at[v] < sched.now and not sched.protected(v)


def scan_lane(
    lane: list[int],
    sched: Scheduler,
    make_room: MakeRoom | None,
    placer: Place | None = None,
    hold: PlainHold | None = None,
    holds_s: Callable[[int], float] | None = None,
    why: Why | None = None,
) -> None:
    """Try every job of one queue in order: start it if it fits, else (if allowed) preempt for
    it. After a preemption the scan starts again from the queue's first job, since the
    victims may have freed more than the job took.

    With a reservation (``hold``), a job that would keep the reserved nodes past the reserved
    start (``holds_s(j)`` from now) is placed, and clears victims, off them. In a queue that
    cannot preempt, once ``BACKFILL_DEPTH`` jobs were passed over that would have fitted but
    for the reservation, the reserved nodes are closed to every job but the holder for the rest
    of the scan."""
    placer = placer or place_off
    remaining = list(lane)
    i, passed, closed = 0, 0, False
    while i < len(remaining):
        j = remaining[i]
        off = (
            hold is not None
            and holds_s is not None
            and hold.keeps_off(sched, j, holds_s(j), closed)
        )
        kept_off = hold.nodes if off and hold is not None else set()

        def placed(
            sched: Scheduler, j: int, kept_off: set[int] = kept_off
        ) -> tuple[int, ...] | None:
            return placer(sched, j, kept_off)

        nodes = placed(sched, j)
        if nodes is not None:
            sched.start(j, nodes)
            del remaining[i]
            continue
        victims = make_room(j, kept_off) if make_room is not None else None
        if victims is None:
            if off and make_room is None and not closed and place(sched, j) is not None:
                passed += 1
                closed = passed >= BACKFILL_DEPTH
            i += 1
            continue
        preempt_and_start(sched, j, victims, placed, why)
        del remaining[i]
        i = 0


def place_off(sched: Scheduler, j: int, kept_off: set[int]) -> tuple[int, ...] | None:
    """Best fit anywhere but on ``kept_off``."""
    if not kept_off:
        return place(sched, j)
    return place(sched, j, [n for n in range(sched.cluster.nodes) if n not in kept_off])


def sides(fair: FairTree, a: int, b: int) -> tuple[int, int]:
    """The two sides of the split between different leaves ``a`` and ``b``."""
    split = fair.split(a, b)
    if split is None:
        raise AssertionError(f"reference: leaves {a} and {b} are one leaf, with no split")
    return split


class PlainHold:
    """The backfill reservation of the first pending job in pass order, from the written rule:
    release the running jobs by (release time, index) on a copy of the free GPUs until that job
    fits by best fit. Planned when the holder changes or a running job stopped before its
    release time; it holds while its holder waits."""

    def __init__(self) -> None:
        self.key: tuple[int, int, frozenset[int]] | None = None
        self.holder, self.start_s = -1, math.inf
        self.nodes: set[int] = set()
        self.release_at: dict[int, float] = {}  # running job -> its release time, set at start
        self.early = 0

    def started(self, j: int, release_s: float) -> None:
        """Running job ``j`` will release its nodes at ``release_s``."""
        self.release_at[j] = release_s

    def stopped(self, j: int, now: float) -> None:
        """Job ``j`` stopped; count it if before its release time."""
        if now < self.release_at.pop(j):
            self.early += 1

    def plan(self, sched: Scheduler, holder: int, release: Callable[[int], float]) -> None:
        """Plan for ``holder`` (-1: nobody) unless planned for it in this epoch already (a
        change of the nodes cordoned for maintenance starts a new one: what their jobs release
        never counts)."""
        closed = sched.cordoned
        if (holder, self.early, closed) == self.key:
            return
        self.key = (holder, self.early, closed)
        self.holder, self.start_s, self.nodes = -1, math.inf, set()
        if holder < 0 or place(sched, holder) is not None:
            return
        free = list(sched.cluster.free)
        for v in sorted(sched.running, key=lambda v: (release(v), v)):
            for n in sched.nodes[v]:
                if n not in closed:
                    free[n] += frees_per_node(sched, v)
            nodes = best_fit_on(free, sched.jobs[holder].gpus, sched.cluster.gpus_per_node)
            if nodes is not None:
                self.holder, self.start_s, self.nodes = holder, release(v), set(nodes)
                return

    def keeps_off(self, sched: Scheduler, j: int, holds_s: float, closed: bool) -> bool:
        """Job ``j`` must stay off the reserved nodes: the holder waits, ``j`` is another job,
        and it would hold them past the reserved start (or they are ``closed``)."""
        if self.holder < 0 or self.holder not in sched.pending or j == self.holder:
            return False
        return closed or sched.now + holds_s > max(self.start_s, sched.now)


class StartOrder:
    """Counts starts, so that victims can be ordered by most recent start (ties at one instant
    go to the one started last)."""

    def __init__(self) -> None:
        self.seq: dict[int, int] = {}
        self.count = 0

    def note(self, j: int) -> None:
        """Job ``j`` just started."""
        self.count += 1
        self.seq[j] = self.count


# ----- the passes ----------------------------------------------------------------------------
class FifoReference(Fifo):
    """``fifo``: heads in index order while they fit; EASY backfill around the head's
    reservation."""

    def enqueue(self, j: int, now: float) -> None:
        """No queue: the pass reads ``sched.pending``."""

    def dequeue(self, j: int, now: float) -> None:
        """No queue."""

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start the lowest-index pending job while it fits; then backfill."""
        while sched.pending:
            head = min(sched.pending)
            nodes = place(sched, head)
            if nodes is None:
                break
            sched.start(head, nodes)
        if self.backfill and len(sched.pending) >= 2:
            self.backfill_pass(now, sched)

    def backfill_pass(self, now: float, sched: Scheduler) -> None:
        """Later jobs start if they end before the head's shadow time or avoid its nodes."""
        queue = sorted(sched.pending)
        shadow_s, reserved = self.reservation(sched, queue[0])
        for j in queue[1 : 1 + self.backfill_depth]:
            if sum(sched.cluster.free) == 0:
                return
            nodes = place(sched, j)
            if nodes is None:
                continue
            if now + sched.work_left(j) <= shadow_s or not set(nodes) & reserved:
                sched.start(j, nodes)

    @staticmethod
    def reservation(sched: Scheduler, head: int) -> tuple[float, set[int]]:
        """Release running jobs by (expected end, index) on a copy until the head fits."""
        per = sched.cluster.gpus_per_node
        free = list(sched.cluster.free)
        for v in sorted(sched.running, key=lambda v: (sched.expected_end(v), v)):
            for n in sched.nodes[v]:
                free[n] += frees_per_node(sched, v)
            nodes = best_fit_on(free, sched.jobs[head].gpus, per)
            if nodes is not None:
                return sched.expected_end(v), set(nodes)
        return float("inf"), set()


class CountsStarts(BasePolicy):
    """Mixin: the fast policy's state (for its charging hooks) plus a start counter."""

    def setup(self, ctx: Context) -> None:
        """Set up the fast policy, then the counter."""
        super().setup(ctx)
        self.order = StartOrder()

    def on_start(self, j: int, now: float) -> None:
        """Remember the start order."""
        super().on_start(j, now)
        self.order.note(j)


class LegacyReference(CountsStarts, Legacy):
    """``legacy``: by (-priority, index); a blocked job preempts lower-priority preemptible work."""

    def enqueue(self, j: int, now: float) -> None:
        """No queue: the pass reads ``sched.pending``."""

    def dequeue(self, j: int, now: float) -> None:
        """No queue."""

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Scan every pending job in priority order; no head-of-line blocking."""
        jobs = sched.jobs
        lane = sorted(sched.pending, key=lambda j: (-jobs[j].priority, j))
        scan_lane(
            lane,
            sched,
            lambda j, _: choose(sched, j, self.victim_candidates(sched, j), lambda v, c: True),
            why=lambda j, v: (
                f"priority {jobs[j].priority} over preemptible priority {jobs[v].priority}"
            ),
        )

    def victim_candidates(self, sched: Scheduler, j: int) -> list[int]:
        """Preemptible running jobs below ``j``'s priority: lowest priority, then the most
        recently started first."""
        jobs, prio = sched.jobs, sched.jobs[j].priority
        found = [
            v
            for v in sched.running
            if jobs[v].preemptible and jobs[v].priority < prio and sched.started_at[v] < sched.now
        ]
        return sorted(found, key=lambda v: (jobs[v].priority, -self.order.seq[v]))


def fair_lanes(
    pending: Iterable[int], sched: Scheduler, order: list[int], boost: bool
) -> list[int]:
    """Pending jobs in pass order: funded by leaf rank then index, then unallocated by index;
    with ``boost``, debug/interactive jobs go first within the funded and unallocated tiers."""
    jobs = sched.jobs
    rank = {leaf: r for r, leaf in enumerate(order)}

    def key(j: int) -> tuple[bool, bool, int, int]:
        job = jobs[j]
        funded = job.leaf != UNALLOCATED
        boosted = boost and job.kind in BOOSTED_KINDS
        return (not funded, not boosted, rank[job.leaf] if funded else 0, j)

    return sorted(pending, key=key)


def lanes_of(ordered: list[int], sched: Scheduler, boost: bool) -> list[list[int]]:
    """Split the pass order into its queues: one per (boosted, leaf), in order."""
    lanes: dict[tuple[bool, int], list[int]] = {}
    for j in ordered:
        job = sched.jobs[j]
        lanes.setdefault((boost and job.kind in BOOSTED_KINDS, job.leaf), []).append(j)
    return list(lanes.values())


class PlainHolds(BasePolicy):
    """The plain reservation's bookkeeping for a Fair Tree reference (``release`` says when a
    running job frees its nodes for the reserved job)."""

    def release(self, sched: Scheduler, v: int) -> float:
        """When running job ``v`` frees its nodes for the reserved job (each reference says)."""
        raise NotImplementedError

    def setup(self, ctx: Context) -> None:
        """Set up the fast policy's state, then a plain reservation."""
        super().setup(ctx)
        self.plain_hold = PlainHold()

    def on_start(self, j: int, now: float) -> None:
        """Charge usage; note when the job will release its nodes."""
        super().on_start(j, now)
        self.plain_hold.started(j, self.release(self.ctx.view, j))

    def on_stop(self, j: int, now: float) -> None:
        """Stop charging; note an early stop."""
        super().on_stop(j, now)
        self.plain_hold.stopped(j, now)


class FairShareReference(PlainHolds, FairShare):
    """``fairshare``: funded jobs by Fair Tree leaf rank, then unallocated; start what fits."""

    def enqueue(self, j: int, now: float) -> None:
        """No queue: the pass reads ``sched.pending``."""

    def dequeue(self, j: int, now: float) -> None:
        """No queue."""

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Reserve for the first pending job if it does not fit; then scan every lane in order
        (never preempting), keeping long jobs off the reserved nodes."""
        self.fair.refresh(now)
        ordered = fair_lanes(sched.pending, sched, self.fair.order, boost=False)
        hold = self.plain_hold if self.backfill_reservation else None
        if hold is not None:
            hold.plan(sched, ordered[0] if ordered else -1, lambda v: self.release(sched, v))
        for lane in lanes_of(ordered, sched, boost=False):
            scan_lane(lane, sched, None, None, hold, sched.work_left)

    @staticmethod
    def release(sched: Scheduler, v: int) -> float:
        """Running job ``v`` frees its nodes for a reserved job when it ends."""
        return sched.expected_end(v)


class ImpactfulReference(PlainHolds, CountsStarts, Impactful):
    """``impactful``: lanes by Fair Tree rank; funded jobs preempt eligible victims; unallocated
    jobs only backfill. With ``drain_for_gangs``, the first funded gang in pass order that does
    not fit drains the nodes a plain reservation would give it (``plain_drain``)."""

    def setup(self, ctx: Context) -> None:
        """The fast policy's state without its drain; a plain one instead."""
        super().setup(ctx)
        self.drain = None  # (the fast policy's hooks then leave it alone)
        self.plain_drain = PlainHold()

    def on_start(self, j: int, now: float) -> None:
        """Release time for the drain's plan; the holder's start ends the drain."""
        super().on_start(j, now)
        drain = self.plain_drain
        drain.started(j, self.release(self.ctx.view, j))
        if j == drain.holder:
            drain.holder, drain.nodes = -1, set()

    def on_stop(self, j: int, now: float) -> None:
        """Forget the job in the drain's plan."""
        super().on_stop(j, now)
        self.plain_drain.stopped(j, now)

    def draining(self) -> set[int]:
        """The nodes draining for a waiting gang (none without ``drain_for_gangs``)."""
        drain = self.plain_drain if self.drain_for_gangs and hasattr(self, "plain_drain") else None
        return drain.nodes if drain is not None and drain.holder >= 0 else set()

    def on_draining(self, sched: Scheduler, j: int) -> bool:
        """Job ``j`` is neither the drain's holder nor a debug job (with the boost) and runs partly
        on its nodes."""
        if j == self.plain_drain.holder or (
            self.boost_interactive and sched.jobs[j].kind == "debug"
        ):
            return False
        return bool(self.draining() & set(sched.nodes[j]))

    def start_note(self, j: int) -> str:
        """Names the holder if the drain is what leaves this start unprotected."""
        sched, job = self.ctx.view, self.ctx.jobs[j]
        if not self.on_draining(sched, j) or self.borrowing(sched, j):
            return ""
        if (job.leaf == UNALLOCATED and not self.protect_unallocated) or min(
            job.min_runtime_s, self.cap_of(job)
        ) <= 0:
            return ""
        return DRAIN_NOTE + sched.jobs[self.plain_drain.holder].job_id

    def reclaims(self, sched: Scheduler, j: int, v: int) -> bool:
        """Victim ``v`` (unprotected, funded) runs on the nodes draining for ``j``, so it yields at
        once, whatever its project and size."""
        return j == self.plain_drain.holder and bool(self.draining() & set(sched.nodes[v]))

    def enqueue(self, j: int, now: float) -> None:
        """No queue: the pass reads ``sched.pending``."""

    def dequeue(self, j: int, now: float) -> None:
        """No queue."""

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Scan every queue in lane order; a funded job that does not fit preempts (a
        multi-node gang only in a pass that refreshes the ranking, unless told otherwise)."""
        self.refresh_pass = now >= self.fair.next_refresh
        self.fair.refresh(now)
        if self.refresh_pass:
            sched.wake_at(self.fair.next_refresh)
        ordered = fair_lanes(sched.pending, sched, self.fair.order, self.boost_interactive)
        hold = self.plain_hold if self.backfill_reservation else None
        gangs = [
            j
            for j in ordered
            if sched.jobs[j].leaf != UNALLOCATED
            and sched.jobs[j].gpus > sched.cluster.gpus_per_node
        ]
        # (release times as of each attempt's start: on draining nodes, protection depends on
        # the drain at that time)
        if hold is not None:
            hold.plan(sched, gangs[0] if gangs else -1, hold.release_at.__getitem__)
        if self.drain_for_gangs:
            self.plain_drain.plan(
                sched, gangs[0] if gangs else -1, self.plain_drain.release_at.__getitem__
            )
        holds_s = partial(self.keeps_nodes_s, sched)
        for lane in lanes_of(ordered, sched, self.boost_interactive):
            funded = sched.jobs[lane[0]].leaf != UNALLOCATED
            if funded:
                scan_lane(
                    lane,
                    sched,
                    partial(self.make_room_for, sched),
                    self.place_funded,
                    hold,
                    holds_s,
                    partial(self.reason, sched),
                )
            else:
                scan_lane(lane, sched, None, None, hold, holds_s)

    def release(self, sched: Scheduler, v: int) -> float:
        """Running job ``v`` frees its nodes for a reserved gang when it ends or its
        protection (of this attempt) ends, whichever is sooner."""
        return min(sched.expected_end(v), sched.started_at[v] + self.protection_s(sched.jobs[v]))

    def keeps_nodes_s(self, sched: Scheduler, j: int) -> float:
        """Pending job ``j`` started now would keep its nodes this long: until it ends or its
        contract (none for unallocated work unless protected) ends."""
        job = sched.jobs[j]
        unprotected = job.leaf == UNALLOCATED and not self.protect_unallocated
        return min(
            sched.work_left(j), 0.0 if unprotected else min(job.min_runtime_s, self.cap_of(job))
        )

    def reserved(self, sched: Scheduler) -> list[int]:
        """The interactive reserve: the highest-numbered ceil(share x nodes) nodes, leaving at
        least one; none without the boost or on a cluster of fewer than ``reserve_min_nodes``."""
        nodes = sched.cluster.nodes
        if not self.boost_interactive or nodes < self.reserve_min_nodes:
            return []
        kept = min(math.ceil(round(self.interactive_reserve * nodes, 9)), nodes - 1)
        return list(range(nodes - kept, nodes))

    def boosted(self, sched: Scheduler, j: int) -> bool:
        """A debug/interactive job while the boost is on."""
        return self.boost_interactive and sched.jobs[j].kind in BOOSTED_KINDS

    def fits_off_reserve(self, sched: Scheduler, j: int) -> bool:
        """Job ``j`` needs no more nodes than there are outside the reserve."""
        per, gpus = sched.cluster.gpus_per_node, sched.jobs[j].gpus
        return max(1, -(-gpus // per)) <= sched.cluster.nodes - len(self.reserved(sched))

    def borrowing(self, sched: Scheduler, v: int) -> bool:
        """Funded job ``v``, neither debug nor interactive, fits off the reserve yet runs (or
        ran last) partly on it."""
        return (
            sched.jobs[v].leaf != UNALLOCATED
            and not self.boosted(sched, v)
            and self.fits_off_reserve(sched, v)
            and bool(set(sched.nodes[v]) & set(self.reserved(sched)))
        )

    def cap_of(self, job) -> float:
        """Seconds of protection a job may ask for: the interactive cap for sessions, if set."""
        hours = self.cap_hours_interactive if job.kind == "interactive" else None
        return 3600.0 * (self.cap_hours if hours is None else hours)

    def protection_s(self, job) -> float:
        """The contract min(declared minimum runtime, the kind's cap), none for unallocated work
        unless protected, and none for an attempt borrowing the reserve."""
        if hasattr(self, "ctx") and self.borrowing(self.ctx.view, job.idx):
            return 0.0
        if job.leaf == UNALLOCATED and not self.protect_unallocated:
            return 0.0
        if hasattr(self, "ctx") and self.on_draining(self.ctx.view, job.idx):
            return 0.0
        return min(job.min_runtime_s, self.cap_of(job))

    def usable(self, sched: Scheduler, j: int) -> list[int] | None:
        """Nodes funded job ``j`` may clear by preemption: all (None) if boosted or too large
        for the nodes off the reserve, else all but the reserve; never the nodes it is kept
        off by a reservation (``self.kept_off``, set by ``make_room_for``)."""
        reserve = set(self.reserved(sched))
        if self.boosted(sched, j) or not self.fits_off_reserve(sched, j):
            reserve = set()
        avoid = reserve | self.kept_off
        return [n for n in range(sched.cluster.nodes) if n not in avoid] if avoid else None

    def place_funded(self, sched: Scheduler, j: int, kept_off: set[int]) -> tuple[int, ...] | None:
        """Best fit off the reserve and off the draining nodes; failing that, off the reserve;
        failing that, best fit anywhere (borrowing); never on ``kept_off``."""
        reserve, draining = set(self.reserved(sched)), self.draining()
        off_both = [n for n in range(sched.cluster.nodes) if n not in reserve | draining | kept_off]
        off = [n for n in range(sched.cluster.nodes) if n not in reserve | kept_off]
        return (
            (place(sched, j, off_both) if draining else None)
            or place(sched, j, off)
            or place_off(sched, j, kept_off)
        )

    def reason(self, sched: Scheduler, j: int, v: int) -> str:
        """Why ``v`` yields to ``j``: unallocated, lent from the reserve, or on the more
        over-served side of their lowest common ancestor."""
        if sched.jobs[v].leaf == UNALLOCATED:
            return BACKFILL_REASON
        if self.lent(sched, j, v):
            return RESERVE_REASON
        if self.reclaims(sched, j, v):
            return DRAIN_REASON
        return self.fair.why(*sides(self.fair, sched.jobs[j].leaf, sched.jobs[v].leaf))

    def lent(self, sched: Scheduler, j: int, v: int) -> bool:
        """Victim ``v`` borrows the reserve and ``j`` is a debug/interactive job it yields to."""
        return self.boosted(sched, j) and self.borrowing(sched, v)

    def make_room_for(self, sched: Scheduler, j: int, kept_off: set[int]) -> list[int] | None:
        """Victims for funded job ``j`` (freeing room only on nodes it may use), or None."""
        if sched.jobs[j].n_nodes > 1 and not (self.refresh_pass or self.gangs_preempt_every_pass):
            return None
        self.kept_off = kept_off
        usable = self.usable(sched, j)
        return choose(
            sched,
            j,
            self.victim_candidates(sched, j),
            self.no_ping_pong(sched, j),
            self.no_ping_pong_after_trim(sched, j),
            usable,
        )

    def victim_candidates(self, sched: Scheduler, j: int) -> list[int]:
        """Unallocated, most recently started first (for a single-node job with ``pack_victims``,
        those on the nodes with the most protected GPUs first); then funded jobs of other leaves holding at
        most ``max_victim_ratio`` x the job's GPUs, most over-served side (of the lowest common
        ancestor) first, newest first. Jobs only on nodes ``j`` may not use are left alone."""
        jobs, fair, leaf = sched.jobs, self.fair, sched.jobs[j].leaf
        largest = self.max_victim_ratio * sched.jobs[j].held
        usable = self.usable(sched, j)
        running = [
            v
            for v in sched.running
            if eligible(sched, v) and (usable is None or any(n in usable for n in sched.nodes[v]))
        ]
        unallocated = [v for v in running if jobs[v].leaf == UNALLOCATED]
        lenders = [v for v in running if jobs[v].leaf != UNALLOCATED and self.lent(sched, j, v)]
        reclaimed = [
            v
            for v in running
            if jobs[v].leaf != UNALLOCATED and v not in lenders and self.reclaims(sched, j, v)
        ]
        funded = [
            v
            for v in running
            if jobs[v].leaf not in (UNALLOCATED, leaf)
            and jobs[v].held <= largest
            and v not in lenders
            and v not in reclaimed
        ]

        def served_side(v: int) -> float:
            return fair.served(sides(fair, leaf, jobs[v].leaf)[1])

        unallocated.sort(key=lambda v: -self.order.seq[v])
        if self.pack_victims and sched.jobs[j].n_nodes == 1:
            protected = self.protected_gpus(sched)
            unallocated.sort(
                key=lambda v: (-max(protected[n] for n in sched.nodes[v]), -self.order.seq[v])
            )
        lenders.sort(key=lambda v: -self.order.seq[v])
        reclaimed.sort(key=lambda v: (-sched.started_at[v], -v))
        funded.sort(key=lambda v: (-served_side(v), -sched.started_at[v], -v))
        return unallocated + lenders + reclaimed + funded

    @staticmethod
    def protected_gpus(sched: Scheduler) -> list[int]:
        """GPUs per node held by running jobs that may not be preempted now."""
        protected = [0] * sched.cluster.nodes
        for u in sched.running:
            if sched.protected(u):
                for n in sched.nodes[u]:
                    protected[n] += frees_per_node(sched, u)
        return protected

    def no_ping_pong(self, sched: Scheduler, j: int) -> Accept:
        """After the swap, ``j``'s side must be no better served than the victim's side."""
        jobs, fair, job = sched.jobs, self.fair, sched.jobs[j]

        def accept(v: int, accepted: list[int]) -> bool:
            if jobs[v].leaf == UNALLOCATED or self.lent(sched, j, v) or self.reclaims(sched, j, v):
                return True
            mine, theirs = sides(fair, job.leaf, jobs[v].leaf)
            gone = [
                jobs[u]
                for u in [*accepted, v]
                if jobs[u].leaf != UNALLOCATED
                and not self.lent(sched, j, u)
                and not self.reclaims(sched, j, u)
            ]
            mine_held = sum(u.held for u in gone if mine in fair.paths[u.leaf])
            theirs_held = sum(u.held for u in gone if theirs in fair.paths[u.leaf])
            return fair.served(mine, job.held - mine_held) <= fair.served(theirs, -theirs_held)

        return accept

    def no_ping_pong_after_trim(self, sched: Scheduler, j: int) -> Callable[[list[int]], bool]:
        """The same rule on the victims actually kept: every funded victim's side, with all the
        kept victims gone, stays at least as served as ``j``'s side with ``j`` running."""
        jobs, fair, job = sched.jobs, self.fair, sched.jobs[j]

        def approve(victims: list[int]) -> bool:
            gone = [
                jobs[v]
                for v in victims
                if jobs[v].leaf != UNALLOCATED
                and not self.lent(sched, j, v)
                and not self.reclaims(sched, j, v)
            ]
            for victim in gone:
                mine, theirs = sides(fair, job.leaf, victim.leaf)
                mine_held = sum(u.held for u in gone if mine in fair.paths[u.leaf])
                theirs_held = sum(u.held for u in gone if theirs in fair.paths[u.leaf])
                if fair.served(mine, job.held - mine_held) > fair.served(theirs, -theirs_held):
                    return False
            return True

        return approve


#: Built-in policy name -> its reference pass (every built-in policy has one).
REFERENCES: dict[str, type] = {
    "fifo": FifoReference,
    "legacy": LegacyReference,
    "fairshare": FairShareReference,
    "impactful": ImpactfulReference,
}
