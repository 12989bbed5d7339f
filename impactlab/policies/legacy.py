"""``legacy``: Ai2's old scheduler. Strict priority levels, FIFO inside a level; a job may
preempt preemptible jobs of lower priority; opted-out jobs are never preempted (squatting)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..events import Job
from .base import BasePolicy, Context, Scheduler
from .queues import PassGate, SizeQueues, drain
from .victims import choose_victims


@dataclass
class Legacy(BasePolicy):
    """Priority scheduling without budgets, as Ai2 ran it before impactful scheduling."""

    name: ClassVar[str] = "legacy"

    def setup(self, ctx: Context) -> None:
        """One queue ordered by (-priority, submit, id)."""
        super().setup(ctx)
        self.queue = SizeQueues()
        self.gate = PassGate()
        levels = max((job.priority for job in ctx.jobs), default=0) - min((job.priority for job in ctx.jobs), default=0)
        self.low = min((job.priority for job in ctx.jobs), default=0)
        # Running preemptible jobs per priority level: the only possible victims.
        self.victims_at: list[set[int]] = [set() for _ in range(levels + 1)]
        self.gpus_at = [0] * (levels + 1)

    def protection_s(self, job: Job) -> float:
        """Jobs that opted out of preemption are never preempted; the rest have no contract."""
        return 0.0 if job.preemptible else math.inf

    def enqueue(self, j: int, now: float) -> None:
        """A pending job joins the queue at its priority."""
        job = self.ctx.jobs[j]
        self.queue.push(j, job.gpus, (-job.priority, j))
        self.gate.note()

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves the queue."""
        self.queue.discard(j)

    def on_start(self, j: int, now: float) -> None:
        """Track preemptible running jobs by level."""
        job = self.ctx.jobs[j]
        if job.preemptible:
            self.victims_at[job.priority - self.low].add(j)
            self.gpus_at[job.priority - self.low] += job.held

    def on_stop(self, j: int, now: float) -> None:
        """Forget a stopped job."""
        job = self.ctx.jobs[j]
        if job.preemptible:
            self.victims_at[job.priority - self.low].discard(j)
            self.gpus_at[job.priority - self.low] -= job.held

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start jobs by priority; a blocked job preempts lower-priority preemptible work."""
        if self.gate.skip(sched):
            return
        drain(self.queue, sched, lambda j: self.make_room(sched, j))
        self.gate.done(sched)

    def make_room(self, sched: Scheduler, j: int) -> bool:
        """Preempt the lowest-priority, newest preemptible jobs below ``j``'s priority."""
        job, level = sched.jobs[j], sched.jobs[j].priority - self.low
        if sum(self.gpus_at[:level]) + sched.cluster.free_total < job.gpus:
            return False
        ranked = sorted(
            (sched.jobs[v].priority, -sched.started_at[v], -v, v)
            for lower in self.victims_at[:level]
            for v in lower
            if v not in sched.fresh
        )
        victims = choose_victims(sched, j, [t[-1] for t in ranked], lambda v, chosen: True)
        for v in victims or ():
            sched.preempt(v, j)
        return victims is not None
