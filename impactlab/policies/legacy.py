"""``legacy``: Ai2's old scheduler. Strict priority levels, FIFO inside a level; a job may
preempt preemptible jobs of lower priority; opted-out jobs are never preempted (squatting).

The rule, written plainly, is ``reference.LegacyReference``; this pass makes the identical event log,
faster (``tests/test_oracle.py`` replays traces under both).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from ..base.units import plural
from ..sim.events import Job
from ..sim.policy import Attempt, BasePolicy, Context, Explainer, Scheduler
from .queues import PassGate, Room, Searches, SizeQueues, start_in_order
from .victims import choose_victims, reach

#: Up to this many distinct priorities, ``Legacy`` keeps each level's victims per node up to
#: date at every start and stop; above it, it sums them when a search asks.
DENSE_LEVELS = 64


@dataclass
class Legacy(BasePolicy):
    """Priority scheduling without budgets, as Ai2 ran it before impactful scheduling."""

    name: ClassVar[str] = "legacy"
    repair: ClassVar[str] = "manual"  # a failing node keeps failing jobs until a person steps in

    def setup(self, ctx: Context) -> None:
        """One queue ordered by (-priority, submit, id)."""
        super().setup(ctx)
        self.queue = SizeQueues()
        self.gate = PassGate()
        # Priorities as levels 0, 1, ... in the order of the distinct values the trace uses
        # (only their order matters), so that a site's priorities in the millions, or all
        # distinct, cost no more than their number.
        ranks = sorted({job.priority for job in ctx.jobs})
        level_of = {priority: level for level, priority in enumerate(ranks)}
        self.level = [level_of[job.priority] for job in ctx.jobs]  # by job index
        levels = max(len(ranks), 1)
        # Running preemptible jobs per level, in start order: the only possible victims; and,
        # with many levels, those that have some, ascending (a search walks those below).
        self.victims_at: list[dict[int, None]] = [{} for _ in range(levels)]
        self.occupied: list[int] = []
        # below[L][n]: GPUs on node n of preemptible jobs of a level lower than L (their victims),
        # kept up to date as jobs start and stop while there are few levels; with many, each
        # start would update them all, so ``_summed_below`` sums the victims when asked.
        nodes = ctx.capacity // ctx.gpus_per_node
        self.below: list[list[int]] | None = (
            [[0] * nodes for _ in range(levels)] if levels <= DENSE_LEVELS else None
        )
        self.searches = Searches()
        self._starts = 0
        self._reaches: dict[int, int] = {}  # level -> victims.reach for its jobs, while valid
        self._reaches_key = (-1, -1)

    def protection_s(self, job: Job) -> float:
        """Jobs that opted out of preemption are never preempted; the rest have no contract."""
        return 0.0 if job.preemptible else math.inf

    def vacate_at(self, j: int, sched: Scheduler) -> float:
        """Preemptible jobs may be stopped for maintenance at once; a job that opted out is
        never stopped early (the on-call engineer waits for it, or stops it at the deadline)."""
        return sched.now if self.ctx.jobs[j].preemptible else math.inf

    def explainer(self, nodes: int) -> Explainer:
        """Stories under legacy: it preempts for anyone, lower priorities only."""
        return LegacyExplainer(self, nodes)

    def enqueue(self, j: int, now: float) -> None:
        """A pending job joins the queue at its priority. It is news for the next pass only
        if it is the first of its size and could be placed, with or without victims."""
        job = self.ctx.jobs[j]
        if self.queue.push(j, job.gpus, (-job.priority, j)) and self._could_place(job):
            self.gate.note()

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves the queue."""
        self.queue.discard(j)

    def on_start(self, j: int, now: float) -> None:
        """Track preemptible running jobs by level."""
        self._starts += 1
        job = self.ctx.jobs[j]
        if job.preemptible:
            level = self.level[j]
            if self.below is not None:
                self._count(j, +1)
            elif not self.victims_at[level]:
                bisect.insort(self.occupied, level)
            self.victims_at[level][j] = None

    def on_stop(self, j: int, now: float) -> None:
        """Forget a stopped job."""
        job = self.ctx.jobs[j]
        if job.preemptible:
            level = self.level[j]
            del self.victims_at[level][j]
            if self.below is not None:
                self._count(j, -1)
            elif not self.victims_at[level]:
                del self.occupied[bisect.bisect_left(self.occupied, level)]

    def _count(self, j: int, sign: int) -> None:
        per_node, nodes = sign * self.ctx.jobs[j].per_node, self.ctx.view.nodes[j]
        for counts in self.below[self.level[j] + 1 :]:  # type: ignore[index]
            for n in nodes:
                counts[n] += per_node

    def _lower(self, level: int) -> list[dict[int, None]]:
        """The running preemptible jobs of each level below ``level`` that has some, lowest
        first (with many levels; with few, ``victims_at[:level]`` is as quick)."""
        occupied = self.occupied
        return [self.victims_at[k] for k in occupied[: bisect.bisect_left(occupied, level)]]

    def _summed_below(self, sched: Scheduler, level: int) -> list[int]:
        """``below[level]`` with many levels: summed from the victims below ``level``."""
        counts = [0] * sched.cluster.nodes
        jobs, nodes = sched.jobs, sched.nodes
        for lower in self._lower(level):
            for v in lower:
                share = jobs[v].per_node
                for n in nodes[v]:
                    counts[n] += share
        return counts

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start jobs by priority; a blocked job preempts lower-priority preemptible work."""
        if self.gate.skip(sched):
            return
        self.searches.begin_pass(now)
        start_in_order(
            self.queue, sched, partial(self.make_room, sched), reach=partial(self.reach, sched)
        )
        # A search fails only if the reach (fresh jobs included) says it could work
        # and the walk (fresh jobs left out) does not: only then do fresh jobs matter.
        self.gate.done(sched, fresh_matter=self.searches.missed_fresh)

    def reach(self, sched: Scheduler, j: int) -> int:
        """The largest gang job ``j``, or any job after it in the queue (of its priority or
        lower, so with no more victims), could place by preempting (``victims.reach``). Reused
        until a start or a change of epoch: only these change the free GPUs and the victims."""
        level = self.level[j]
        key = (sched.epoch, self._starts)
        if key != self._reaches_key:
            self._reaches, self._reaches_key = {}, key
        found = self._reaches.get(level)
        if found is None:
            below = (
                self.below[level] if self.below is not None else self._summed_below(sched, level)
            )
            found = self._reaches[level] = reach(
                sched.cluster.free, below, sched.cluster.gpus_per_node
            )
        return found

    def _could_place(self, job: Job) -> bool:
        return job.gpus <= self.ctx.view.cluster.largest_fit() or job.gpus <= self.reach(
            self.ctx.view, job.idx
        )

    def make_room(self, sched: Scheduler, j: int) -> Room:
        """Preempt preemptible jobs below ``j``'s priority: lowest level first, and within a
        level the most recently started first; never a job started at this very instant.
        (Priorities do not move, so a failed search never waits for anything but room.) The
        scan asks only for a job within ``reach``."""
        now, started, level = sched.now, sched.started_at, self.level[j]
        lower = self.victims_at[:level] if self.below is not None else self._lower(level)
        ranked = (v for victims in lower for v in reversed(victims) if started[v] < now)
        victims = choose_victims(sched, j, ranked)
        return self.searches.preempt(sched, j, victims, partial(self.why, sched, j))

    def why(self, sched: Scheduler, j: int, v: int) -> str:
        """Why victim ``v`` yields to job ``j``: a preemptible job of lower priority."""
        return (
            f"priority {sched.jobs[j].priority} over preemptible priority {sched.jobs[v].priority}"
        )


class LegacyExplainer(Explainer):
    """legacy's answers to a story's questions: it preempts for every job, but only running
    preemptible jobs of a lower priority."""

    def preempts_for(self, job: Job) -> bool:
        """Any job may preempt lower priorities."""
        return True

    def spared(
        self, job: Job, unprotected: Sequence[Attempt], had_room: bool
    ) -> list[tuple[str, str]]:
        """Running preemptible jobs of ``job``'s priority or higher are no victims of it."""
        peers = [other for other, _ in unprotected if other.priority >= job.priority]
        if not peers:
            return []
        gpus = sum(other.held for other in peers)
        return [
            (
                "priority",
                (
                    f"{len(peers)} preemptible running job{plural(len(peers))} holding {gpus} GPUs "
                    f"had priority {job.priority} or higher: legacy preempts only lower priorities"
                ),
            )
        ]
