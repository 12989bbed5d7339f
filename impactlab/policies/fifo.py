"""``fifo``: first come, first served with gangs; optional EASY backfill.

The rule, written plainly, is ``reference.FifoReference``; this pass makes the identical event log,
faster (``tests/test_oracle.py`` replays traces under both).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import ClassVar

from ..base.params import knob
from ..sim.cluster import best_fit_on
from ..sim.policy import BasePolicy, Context, Scheduler


@dataclass
class Fifo(BasePolicy):
    """Start jobs strictly in submit order. With ``backfill``, a later job (among the next
    ``backfill_depth``) may start early if it cannot delay the head job's reserved start.
    Runtimes are known exactly (real users overestimate them)."""

    name: ClassVar[str] = "fifo"
    backfill: bool = knob(
        False,
        bool,
        "EASY backfill: a later job may start early if it cannot "
        "delay the head job's reserved start",
    )
    backfill_depth: int = knob(
        100, int, "how many queued jobs behind the head backfill looks at", "jobs", lo=1, hi=100_000
    )

    def setup(self, ctx: Context) -> None:
        """Pending jobs kept sorted by (submit, id), which is their index."""
        super().setup(ctx)
        self.queue: list[int] = []

    def enqueue(self, j: int, now: float) -> None:
        """Insert in submit order (a requeued job keeps its place)."""
        bisect.insort(self.queue, j)

    def dequeue(self, j: int, now: float) -> None:
        """Remove a withdrawn job."""
        del self.queue[bisect.bisect_left(self.queue, j)]

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start the head while it fits; then backfill around its reservation."""
        while self.queue:
            nodes = sched.cluster.best_fit(sched.jobs[self.queue[0]].gpus)
            if nodes is None:
                break
            sched.start(self.queue.pop(0), nodes)
        if self.backfill and len(self.queue) > 1:
            self._backfill(sched)

    def _backfill(self, sched: Scheduler) -> None:
        shadow_s, reserved = self._reservation(sched, self.queue[0])
        for j in list(self.queue[1 : 1 + self.backfill_depth]):
            if sched.cluster.free_total == 0:
                return
            nodes = sched.cluster.best_fit(sched.jobs[j].gpus)
            if nodes is None:
                continue
            if sched.now + sched.work_left(j) <= shadow_s or not reserved.intersection(nodes):
                self.queue.remove(j)
                sched.start(j, nodes)

    def _reservation(self, sched: Scheduler, head: int) -> tuple[float, set[int]]:
        """When and where the head job can start as running jobs end (EASY's shadow time)."""
        free = list(sched.cluster.free)
        per = sched.cluster.gpus_per_node
        for end, v in sorted((sched.expected_end(v), v) for v in sched.running):
            share = sched.jobs[v].per_node
            for n in sched.nodes[v]:
                free[n] += share
            nodes = best_fit_on(free, sched.jobs[head].gpus, per)
            if nodes is not None:
                return end, set(nodes)
        return float("inf"), set()
