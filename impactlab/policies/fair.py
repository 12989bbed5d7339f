"""Fair Tree ordering shared by ``fairshare`` and ``impactful`` (DESIGN.md section 5).

Leaves are ranked by Slurm's Fair Tree over charged usage. As in Slurm (PriorityCalcPeriod),
the ranking is refreshed at most every ``refresh_s`` seconds, at the first pass after that
period, so a pass ranks a handful of leaves instead of sorting pending jobs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..events import UNALLOCATED, Job
from ..usage import DecayedUsage, WindowUsage
from .base import Context, Scheduler
from .queues import FailMemo, Place, SizeQueues, drain, queue_for

BOOSTED_KINDS = frozenset({"debug", "interactive"})


class FairTree:
    """Charged usage, current allocation and the Fair Tree rank of every leaf."""

    def __init__(self, ctx: Context, window_s: float, half_life_s: float | None, refresh_s: float):
        self.tree, self.capacity, self.refresh_s = ctx.tree, ctx.capacity, refresh_s
        size = ctx.tree.size
        if half_life_s is None:
            self.meter: WindowUsage | DecayedUsage = WindowUsage(size, window_s)
            self.norm_s = window_s
        else:
            self.meter = DecayedUsage(size, half_life_s)
            self.norm_s = half_life_s / np.log(2)  # the decayed integral of a constant rate
        # Plain lists, not arrays: they are read and updated one element at a time.
        self.alloc = [0] * size  # funded GPUs held now, per node (subtree sums)
        self._used = [0.0] * size  # charged usage per node at the last refresh / window capacity
        self.fraction = ctx.tree.fraction.tolist()
        self.paths = {leaf: ctx.tree.path(leaf) for leaf in ctx.tree.leaves}
        self.order: list[int] = list(ctx.tree.leaves)
        self._splits: dict[tuple[int, int], tuple[int, int] | None] = {}
        self.next_refresh = 0.0

    def charge(self, job: Job, now: float, sign: int) -> None:
        """A funded job starts (+1) or stops (-1) holding its GPUs."""
        self.meter.change(job.leaf, now, sign * job.held)
        for node in self.paths[job.leaf]:
            self.alloc[node] += sign * job.held

    def refresh(self, now: float) -> None:
        """Recompute usage and the leaf ranking if the refresh period has passed."""
        if now < self.next_refresh:
            return
        self.next_refresh = now + self.refresh_s
        usage = self.tree.subtree_sum(self.meter.usage(now))
        self._used = (usage / (self.capacity * self.norm_s)).tolist()
        self.order = self.tree.fair_tree_order(usage)

    def served(self, node: int, alloc_delta: float = 0.0) -> float:
        """How well served a node is: (usage share of the window + allocation share) / entitlement."""
        held = (self.alloc[node] + alloc_delta) / self.capacity
        return (self._used[node] + held) / self.fraction[node]

    def split(self, a: int, b: int) -> tuple[int, int] | None:
        """The children of the lowest common ancestor of leaves ``a`` and ``b`` on each side."""
        key = (a, b)
        if key not in self._splits:
            pairs = zip(self.paths[a], self.paths[b])
            self._splits[key] = next(((x, y) for x, y in pairs if x != y), None)  # None: same leaf
        return self._splits[key]


class FairQueues:
    """Pending jobs in lanes: funded per leaf, then unallocated; optionally debug first."""

    def __init__(self, jobs: list[Job] | tuple[Job, ...], boost: bool):
        self.jobs, self.boost = jobs, boost
        self.queues: dict[tuple[bool, int], SizeQueues] = {}

    def _lane(self, j: int) -> tuple[bool, int]:
        job = self.jobs[j]
        return (self.boost and job.kind in BOOSTED_KINDS, job.leaf)

    def add(self, j: int) -> bool:
        """Job ``j`` joins its lane, in FIFO (submit, id) order; True if it is the first of
        its size there (see ``SizeQueues.push``)."""
        return queue_for(self.queues, self._lane(j)).push(j, self.jobs[j].gpus, (j,))  # type: ignore[arg-type]

    def remove(self, j: int) -> None:
        """Job ``j`` leaves the queue without starting."""
        self.queues[self._lane(j)].discard(j)

    def run(self, fair: FairTree, sched: Scheduler, make_room: Callable[[int], bool] | None,
            place: tuple[Place | None, Place | None] = (None, None), memo: FailMemo | None = None) -> None:
        """One pass: funded lanes by Fair Tree rank (preempting if allowed), then unallocated.
        ``place[boosted]`` chooses the nodes of funded jobs (default: best fit).

        A lane whose scan started nothing is skipped until GPUs are freed or a protection ends
        (``sched.epoch``), the ``memo`` version of the victims and fair-share inputs moves, or
        a job arrives at the head of one of its sizes: until then the scan would fail the same
        way. The state is read again before each lane, since an earlier lane may have changed
        it. With preemption, only a scan with no job started at this instant counts (those
        jobs are no victims yet)."""
        lanes = (True, False) if self.boost else (False,)
        queues, cluster = self.queues, sched.cluster
        for boosted in lanes:
            for leaf in fair.order:
                queue = queues.get((boosted, leaf))
                if queue is None or not queue.live:
                    continue
                token = (sched.epoch, memo.version if memo else 0)
                if queue.stuck != token and (make_room or queue.sizes[0] <= cluster.largest_fit()):
                    self._scan(queue, sched, make_room, place[boosted], token)
        for boosted in lanes:
            queue = queues.get((boosted, UNALLOCATED))
            if queue is None or not queue.live:
                continue
            token = (sched.epoch, memo.version if memo else 0)
            if queue.stuck != token and queue.sizes[0] <= cluster.largest_fit():
                self._scan(queue, sched, None, None, token, funded=False)

    @staticmethod
    def _scan(queue: SizeQueues, sched: Scheduler, make_room: Callable[[int], bool] | None,
              place: Place | None, token: tuple[int, int], funded: bool = True) -> None:
        waiting = len(queue.live)
        drain(queue, sched, make_room, larger_no_easier=not funded, place=place)
        if len(queue.live) == waiting and (make_room is None or sched.last_start_s < sched.now):
            queue.stuck = token
