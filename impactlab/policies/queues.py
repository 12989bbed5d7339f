"""Incremental pending queues shared by the built-in policies (DESIGN.md section 8).

A queue keeps one heap per gang size. A pass merges the heads of the sizes that are still
worth trying, so it never sorts or scans all pending jobs: a size whose head neither fits
nor can preempt is skipped for the rest of the pass, because every job behind that head
in the same queue is no easier to place (until a preemption frees extra GPUs).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any

from .base import Scheduler

Key = tuple[Any, ...]  # ordering key; its last element is the job index


class SizeQueues:
    """Pending jobs of one queue, one heap per gang size, ordered by a key."""

    def __init__(self) -> None:
        self.heaps: dict[int, list[Key]] = {}
        self.live: set[int] = set()

    def push(self, j: int, gpus: int, key: Key) -> None:
        """Add job ``j`` (``key[-1] == j``)."""
        self.live.add(j)
        heapq.heappush(self.heaps.setdefault(gpus, []), key)

    def discard(self, j: int) -> None:
        """Remove job ``j``; its heap entry is dropped lazily."""
        self.live.discard(j)

    def __len__(self) -> int:
        return len(self.live)

    def head(self, gpus: int) -> Key | None:
        """First live key of one size, dropping withdrawn entries on the way."""
        heap = self.heaps[gpus]
        while heap and heap[0][-1] not in self.live:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def pop(self, gpus: int) -> int:
        """Remove and return the head job of one size."""
        j = heapq.heappop(self.heaps[gpus])[-1]
        self.live.discard(j)
        return j

    def best_head(self, skip: set[int]) -> tuple[Key, int] | None:
        """The smallest key among the heads of sizes not in ``skip``, with its size."""
        best: tuple[Key, int] | None = None
        for gpus in self.heaps:
            if gpus in skip:
                continue
            key = self.head(gpus)
            if key is not None and (best is None or key < best[0]):
                best = (key, gpus)
        return best


PreemptFn = Callable[[int], bool]


def drain(queue: SizeQueues, sched: Scheduler, make_room: PreemptFn | None = None) -> None:
    """Start jobs from ``queue`` in key order without head-of-line blocking.

    A job that does not fit asks ``make_room(j)`` to preempt for it (which returns True when
    the job can now be placed). Stops when no size can make progress.
    """
    cluster = sched.cluster
    skip: set[int] = set()
    while queue.live:
        if cluster.free_total == 0 and make_room is None:
            return
        found = queue.best_head(skip)
        if found is None:
            return
        key, gpus = found
        j = key[-1]
        nodes = cluster.best_fit(gpus)
        if nodes is None and make_room is not None and make_room(j):
            nodes = cluster.best_fit(gpus)
            skip.clear()  # victims may have freed more than this job takes
        if nodes is None:
            skip.add(gpus)
            continue
        queue.pop(gpus)
        sched.start(j, nodes)


def queue_for(queues: dict[Hashable, SizeQueues], name: Hashable) -> SizeQueues:
    """The queue called ``name``, created on first use."""
    queue = queues.get(name)
    if queue is None:
        queue = queues[name] = SizeQueues()
    return queue
