"""Backfill reservations: the top-ranked blocked job holds the nodes that free soonest
(docs/model.md section 5, "Backfill reservation").

As in EASY backfill, one job (the *holder*) gets a reserved start: running jobs release their
GPUs at their *release* time (their expected end; in ``impactful`` the end of their protection
if sooner, after which they may be preempted), and the holder's reserved start is the first
release after which it could be placed by best fit, on the nodes it would then get. Until the
holder starts, any other job may start on those nodes only if it would release them by the
reserved start (or at once, once that time has passed); otherwise it is placed elsewhere.

The plan is made when a job becomes the holder, and made again only when a running job stops
before its release time (a failure, or a preemption in ``impactful``), since only then can
room appear sooner than planned: starts that respect the plan do not move it, and a job that
ends at its release does what the plan expected, so replanning at every freed GPU would only
cost time. Running jobs are kept sorted by release time as they start
and stop, so planning never sorts them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

from ..sim.policy import Scheduler

NOTHING: frozenset[int] = frozenset()


class Hold:
    """The current reservation: holder, reserved start and nodes; ``version`` moves with it."""

    def __init__(self, release_if_started: Callable[[int], float]):
        self.release_if_started = release_if_started  # job -> seconds it would hold its nodes
        self.by_release: list[tuple[float, int]] = []  # running jobs by (release time, index)
        self._release: dict[int, float] = {}
        self.holder = -1  # -1: no reservation
        self.start_s = math.inf
        self.nodes: frozenset[int] = NOTHING
        self._key: tuple[int, int, frozenset[int]] | None = None
        self.early = 0  # running jobs stopped before their release time
        self.version = 0

    def running(self, j: int, release_s: float) -> None:
        """Job ``j`` started and releases its GPUs at ``release_s``."""
        self._release[j] = release_s
        bisect.insort(self.by_release, (release_s, j))

    def stopped(self, j: int, now: float) -> None:
        """Job ``j`` stopped running at ``now``."""
        entry = (self._release.pop(j), j)
        del self.by_release[bisect.bisect_left(self.by_release, entry)]
        if now < entry[0]:
            self.early += 1

    def plan(self, sched: Scheduler, holder: int) -> None:
        """Make the reservation of ``holder`` (-1: none) unless it is already made for this
        holder and no running job stopped early since."""
        key = (holder, self.early, sched.cordoned)  # (cordoned nodes free nothing for it)
        if key == self._key:
            return
        self._key = key
        self.version += 1
        self.holder, self.start_s, self.nodes = -1, math.inf, NOTHING
        if holder >= 0 and sched.jobs[holder].gpus > sched.cluster.largest_fit():
            found = self._soonest(sched, sched.jobs[holder].gpus)
            if found is not None:
                self.holder, (self.start_s, self.nodes) = holder, found

    def planned_for(self, j: int) -> bool:
        """Whether the current plan was made for job ``j``, nodes found or not (if ``j``
        leaves the queue, the next plan is made for another job)."""
        return self._key is not None and self._key[0] == j

    def _soonest(self, sched: Scheduler, gpus: int) -> tuple[float, frozenset[int]] | None:
        """The first release after which a gang of ``gpus`` fits by best fit, and its nodes."""
        cluster, jobs, nodes_of = sched.cluster, sched.jobs, sched.nodes
        per, free = cluster.gpus_per_node, cluster.free
        room: dict[int, int] = {}
        whole = set(cluster.by_free[per])
        need = -(-gpus // per)
        cordoned = sched.cordoned
        for release_s, v in self.by_release:
            share = jobs[v].per_node
            fits = []
            for n in nodes_of[v]:
                if cordoned and n in cordoned:
                    continue  # (what its jobs free goes to the maintenance)
                left = room[n] = room.get(n, free[n]) + share
                if gpus <= per and left >= gpus:
                    fits.append((left, n))
                elif left == per:
                    whole.add(n)
            if fits:  # nothing fitted before this release, so only these nodes can
                return release_s, frozenset({min(fits)[1]})
            if gpus > per and len(whole) >= need:
                return release_s, frozenset(sorted(whole)[:need])
        return None

    def started(self, j: int) -> None:
        """Job ``j`` started in a pass. If it is the holder, the reservation has served its
        purpose; else, while a reservation holds, the start counts as news: with less room, a
        scan passes over fewer jobs that would fit but for the reservation (``BACKFILL_DEPTH``)
        and so may reach one further on."""
        if self.holder < 0:
            return
        if j == self.holder:
            self.holder, self.start_s, self.nodes = -1, math.inf, NOTHING
        self.version += 1

    def constrains(self, sched: Scheduler, j: int, closed: bool) -> bool:
        """Whether job ``j`` must stay off the reserved nodes: it is not the holder and would
        hold them past the reserved start (or the nodes are ``closed`` to all but the holder)."""
        if self.holder < 0 or j == self.holder:
            return False
        return closed or sched.now + self.release_if_started(j) > max(self.start_s, sched.now)
