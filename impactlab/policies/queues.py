"""Incremental pending queues shared by the built-in policies (docs/model.md section 8).

A queue keeps one heap per gang size. A pass merges the heads of the sizes that are still
worth trying, so it never sorts or scans all pending jobs. Once a job of g GPUs neither fits
nor can preempt, the rest of its size is skipped for the rest of the pass: a later job of the
same queue and size is no easier to place. Where victims do not depend on the size (legacy),
every size >= g is skipped too, since a larger gang needs more room; and where the policy
knows a bound on the gangs every later job could place (legacy's ``reach``), every size above
it. These hold until a preemption frees more GPUs than it uses.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Hashable
from enum import Enum
from typing import Any, TypeVar

from ..sim.policy import Scheduler
from .reservation import NOTHING, Hold

Key = tuple[Any, ...]  # ordering key; its last element is the job index


class SizeQueues:
    """Pending jobs of one queue, one heap per gang size, ordered by a key."""

    def __init__(self) -> None:
        self.heaps: dict[int, list[Key]] = {}  # withdrawn jobs are dropped lazily
        self.live: dict[int, int] = {}  # pending job -> its size
        self.waiting: dict[int, int] = {}  # size -> pending jobs of that size
        self.sizes: list[int] = []  # sorted sizes with pending jobs
        # The state in which a scan of this queue started nothing, as ((epoch, version, hold
        # version), the refresh count if that mattered, else None, the instant it holds at
        # only, else None); cleared when a job arrives at the head of a size. See
        # ``FairQueues.run``.
        self.stuck: tuple[tuple[int, int, int], int | None, float | None] | None = None

    def push(self, j: int, gpus: int, key: Key) -> bool:
        """Add job ``j`` (``key[-1] == j``); True if it is now the first of its size.

        A job behind another of its size cannot change a pass: the first one is tried before
        it with the same room and the same victims, and a failure skips the rest of the size.
        """
        live = self.live
        live[j] = gpus
        heap = self.heaps.get(gpus)
        if heap is None:
            heap = self.heaps[gpus] = []
        waiting = self.waiting.get(gpus, 0)
        if not waiting:
            bisect.insort(self.sizes, gpus)
        self.waiting[gpus] = waiting + 1
        heapq.heappush(heap, key)
        while heap[0][-1] not in live:  # j itself is live, so this stops
            heapq.heappop(heap)
        if heap[0][-1] != j:
            return False
        self.stuck = None
        return True

    def discard(self, j: int) -> None:
        """Remove job ``j``; its heap entry is dropped lazily."""
        gpus = self.live.pop(j, None)
        if gpus is not None:
            self._gone(gpus)

    def pop(self, gpus: int) -> int:
        """Remove and return the head job of one size."""
        j = heapq.heappop(self.heaps[gpus])[-1]
        del self.live[j]
        self._gone(gpus)
        return j

    def _gone(self, gpus: int) -> None:
        left = self.waiting[gpus] - 1
        self.waiting[gpus] = left
        if not left:
            self.sizes.remove(gpus)

    def best_head(
        self, limit: int, skip: set[int] | frozenset[int] = frozenset(), above: int = 0
    ) -> tuple[Key, int] | None:
        """The smallest key among the heads of sizes above ``above``, below ``limit`` and not in
        ``skip``."""
        best: tuple[Key, int] | None = None
        live, heaps = self.live, self.heaps
        for gpus in self.sizes:
            if gpus >= limit:
                break
            if gpus in skip or gpus <= above:
                continue
            heap = heaps[gpus]
            while heap[0][-1] not in live:  # drop withdrawn entries; a live one is left
                heapq.heappop(heap)
            if best is None or heap[0] < best[0]:
                best = (heap[0], gpus)
        return best


class Room(Enum):
    """What a search for victims (``PreemptFn``) found for a job that does not fit. Only
    ``MADE`` is true, so a policy's search may also return a plain bool (True: ``MADE``,
    False: ``NONE``)."""

    MADE = "made"  # victims were preempted: the job can now be placed
    NONE = "none"  # no room; the same search in the same state would fail the same way
    # No room, by a verdict that judged fair shares (or the search waits for a refresh): after
    # the next fair-share ranking refresh, the same search may end differently.
    NONE_UNTIL_REFRESH = "none until refresh"

    def __bool__(self) -> bool:
        return self is Room.MADE


# The members as module globals for the passes, which read them at every search: reading a
# member off its enum class takes several times as long as reading a global (Python 3.11).
_MADE, _NONE, _UNTIL_REFRESH = Room.MADE, Room.NONE, Room.NONE_UNTIL_REFRESH

PreemptFn = Callable[[int], "Room | bool"]
Place = Callable[
    [int, frozenset[int]], "tuple[int, ...] | None"
]  # (gang size, nodes to avoid) -> nodes
NO_LIMIT = 1 << 62
#: In a lane that cannot preempt, how many jobs that fit only on reserved nodes a scan passes
#: over (looking for one short enough to use them) before closing those nodes for the rest of
#: the scan, like Slurm's bf_max_job_test. It bounds the scan of long queues of long jobs.
BACKFILL_DEPTH = 16


def start_in_order(
    queue: SizeQueues,
    sched: Scheduler,
    make_room: PreemptFn | None = None,
    larger_no_easier: bool = True,
    place: Place | None = None,
    hold: Hold | None = None,
    search_max: int = NO_LIMIT,
    reach: Callable[[int], int] | None = None,
) -> bool:
    """Start jobs from ``queue`` in key order without head-of-line blocking; True if a search
    of the scan failed by a verdict that a fair-share ranking refresh may change
    (``Room.NONE_UNTIL_REFRESH``).

    A job that does not fit asks ``make_room(j)`` to preempt for it (which returns
    ``Room.MADE``, or True, when the job can now be placed with best fit). After a preemption
    the scan starts again from the queue's first job, since the victims may have freed more
    than the job took. Stops when no size can make progress. When a larger job may find victims a smaller one cannot
    (``larger_no_easier=False``), a failure only skips jobs of the same size. ``place(gpus,
    avoid)`` chooses the nodes (default: best fit on the whole cluster).

    With a reservation (``hold``), a job it keeps off the reserved nodes that still cannot
    start is passed over without skipping its size: a shorter job of the same size may use
    those nodes. Without preemption, only jobs that would fit but for the reservation are
    passed over, at most ``BACKFILL_DEPTH`` of them; then the nodes close for the rest of the
    scan.

    ``make_room`` refuses jobs of more than ``search_max`` GPUs (the caller says so), so such
    a size is tried only while it could fit. ``reach(j)``, if given, bounds the gangs that the
    jobs from ``j`` on (in key order) could place, victims and all: a job beyond it is not
    searched, and larger sizes are skipped until a preemption, as if each had failed in turn.
    The caller vouches for the bound: no later job of the scan may have more victims than
    ``j`` (legacy: keys by priority, no reservation).
    """
    cluster = sched.cluster
    place = place or cluster.best_fit
    scan = _Scan(queue)
    until_refresh = False
    searchable = search_max if make_room else 0  # sizes up to this may preempt for room
    live, best_head, largest_fit = queue.live, queue.best_head, cluster.largest_fit
    while live:
        largest = largest_fit()  # (nothing below changes the cluster before a start)
        limit = min(scan.cap, max(largest, searchable) + 1)
        found = best_head(limit, scan.failed)
        if found is None:
            break
        key, gpus = found
        j = key[-1]
        avoid = hold.nodes if hold is not None and hold.constrains(sched, j, scan.closed) else None
        if avoid is None and gpus in scan.free_failed:  # its search is the one that failed
            scan.set_aside(key, gpus)
            continue
        # (every placement is a best fit, which cannot succeed above the largest free block)
        blocked = (avoid is not None and gpus in scan.kept_out) or gpus > largest
        nodes = None if blocked else place(gpus, avoid or NOTHING)
        restart = False
        bound = NO_LIMIT
        if nodes is None and make_room is not None:
            if reach is not None:
                bound = reach(j)
            room = make_room(j) if gpus <= bound else _NONE
            if room is _MADE or room is True:
                restart = True
                nodes = place(gpus, avoid or NOTHING)
                scan.restart()
            elif room is _UNTIL_REFRESH:
                until_refresh = True
        if nodes is None:
            scan.no_start(
                key, gpus, avoid is not None, make_room is not None, larger_no_easier, hold, bound
            )
            continue
        queue.pop(gpus)
        sched.start(j, nodes)
        if hold is not None:
            hold.started(j)
        if restart:  # (only now: a job put back could be the head of j's size)
            _put_back(queue, scan.aside)
    _put_back(queue, scan.aside)
    return until_refresh


class _Scan:
    """What one ``start_in_order`` scan has learnt: the sizes to skip, the jobs set aside and
    the reservation's backfill count. A preemption may free more than its job took, so it
    forgets the sizes (``restart``)."""

    __slots__ = ("aside", "cap", "closed", "failed", "free_failed", "kept_out", "passed", "queue")

    def __init__(self, queue: SizeQueues):
        self.queue = queue
        self.cap = NO_LIMIT  # sizes from here up cannot start (larger_no_easier, or reach)
        self.failed: set[int] = set()  # sizes that cannot start
        self.kept_out: set[int] = set()  # sizes that failed while kept off the reserved nodes
        self.free_failed: set[int] = set()  # sizes whose search failed off the reservation
        self.aside: list[tuple[Key, int]] = []  # jobs passed over, put back at the end
        self.passed, self.closed = 0, False

    def restart(self) -> None:
        """After a preemption: every size may start again."""
        self.cap = NO_LIMIT
        self.failed.clear()
        self.kept_out.clear()
        self.free_failed.clear()

    def set_aside(self, key: Key, gpus: int) -> None:
        """Pass over the head of size ``gpus`` (it returns to the queue when the scan ends)."""
        self.queue.pop(gpus)
        self.aside.append((key, gpus))

    def no_start(
        self,
        key: Key,
        gpus: int,
        held: bool,
        preempts: bool,
        larger_no_easier: bool,
        hold: Hold | None,
        bound: int = NO_LIMIT,
    ) -> None:
        """The head of size ``gpus`` could not start: what the scan skips from now on
        (``bound``: the ``reach`` of the jobs from it on, if the caller knows one)."""
        if held and not self.closed:  # (without preemption, the limit says it would fit)
            self.kept_out.add(gpus)
            self.set_aside(key, gpus)
            if not preempts:
                self.passed += 1
                self.closed = self.passed >= BACKFILL_DEPTH
        elif larger_no_easier:
            self.cap = gpus
        elif preempts and hold is not None and hold.holder >= 0:
            # A job of this size kept off the reserved nodes walks the victims in another
            # order (it passes over those there), so it may still succeed: only the jobs
            # free to use them are passed over from now on.
            self.free_failed.add(gpus)
            self.set_aside(key, gpus)
        else:
            self.failed.add(gpus)
        if bound < gpus:
            self.cap = min(self.cap, bound + 1)


Name = TypeVar("Name", bound=Hashable)  # what a policy names its queues by


def _put_back(queue: SizeQueues, aside: list[tuple[Key, int]]) -> None:
    for key, gpus in aside:
        queue.push(key[-1], gpus, key)
    aside.clear()


def queue_for(queues: dict[Name, SizeQueues], name: Name) -> SizeQueues:
    """The queue called ``name``, created on first use."""
    queue = queues.get(name)
    if queue is None:
        queue = queues[name] = SizeQueues()
    return queue


class Searches:
    """What the policy's preemption searches depend on, beyond ``sched.epoch``.

    ``version`` moves when a possible victim starts (a funded start also changes fair-share
    inputs) and when jobs started in one pass become preemptible in the next. ``refreshes``
    counts fair-share ranking refreshes: only a search that judged fair shares (or that waited
    for a refresh) can end differently after one, and the policy's search says so by its result
    (``Room.NONE_UNTIL_REFRESH``). A pass that found nothing to do in some state would find
    nothing again in the same state. ``missed_fresh`` says whether a search of this pass failed
    while jobs started at this instant were not yet victims.

    (Failed searches are not remembered one by one: the skipped lanes and sizes already keep
    a pass from repeating a search in an unchanged state.)
    """

    def __init__(self) -> None:
        self.version = 0
        self.refreshes = 0
        self._started = False
        self._last_pass_s = -1.0  # (simulated time starts at 0)
        self.missed_fresh = False

    def changed(self) -> None:
        """A possible victim started, or the fair-share inputs changed."""
        self.version += 1
        self._started = True

    def begin_pass(self, now: float) -> None:
        """Jobs started in an earlier pass can be victims from now on, if time has moved
        since (at the same instant they are no victims yet, so nothing changed)."""
        if self._started and now > self._last_pass_s:
            self.version += 1
            self._started = False
        self._last_pass_s = now
        self.missed_fresh = False

    def preempt(
        self,
        sched: Scheduler,
        j: int,
        victims: list[int] | None,
        why: Callable[[int], str] | None = None,
        until_refresh: bool = False,
    ) -> Room:
        """Preempt ``victims`` for job ``j``, or note a failed search (None); what the search
        found: ``Room.MADE`` if ``j`` can now be placed, else ``Room.NONE_UNTIL_REFRESH`` if
        the failed search judged fair shares (``until_refresh``: a ranking refresh may change
        its verdict), else ``Room.NONE``. ``why(v)`` is the reason logged for victim ``v``,
        asked for every victim before the first is preempted (so each sees the state the
        decision saw)."""
        if victims is None:
            if sched.last_start_s >= sched.now:
                self.missed_fresh = True  # jobs started at this instant become victims later
            return _UNTIL_REFRESH if until_refresh else _NONE
        reasons = [why(v) for v in victims] if why is not None else [""] * len(victims)
        for v, reason in zip(victims, reasons):
            sched.preempt(v, j, reason)
        return _MADE


class PassGate:
    """Skips a pass that provably changes nothing, so full clusters cost little per event.

    The previous pass tried every pending job. If no job started at its instant, no GPU was
    freed and no protection ended since (``sched.epoch``), and no job that could start or
    preempt has joined the queue (``note``), the next pass would only repeat the same failed
    placements and searches, so it may be skipped.
    """

    def __init__(self) -> None:
        self.epoch = -1
        self.news = True

    def note(self) -> None:
        """A job that may fit or preempt has become pending."""
        self.news = True

    def skip(self, sched: Scheduler, refresh_due: bool = False) -> bool:
        """True if this pass cannot change anything."""
        return not (self.news or refresh_due or sched.epoch != self.epoch)

    def done(self, sched: Scheduler, fresh_matter: bool = True) -> None:
        """Record the state a pass left. It is not settled if jobs started at this instant
        and ``fresh_matter``: they become possible victims as soon as time moves on. A policy
        passes False when they cannot change the next pass (no preemption, or no search
        failed for want of them)."""
        self.epoch = -1 if fresh_matter and sched.last_start_s >= sched.now else sched.epoch
        self.news = False
