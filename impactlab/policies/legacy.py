"""``legacy``: Ai2's old scheduler. Strict priority levels, FIFO inside a level; a job may
preempt preemptible jobs of lower priority; opted-out jobs are never preempted (squatting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import BasePolicy, Context, Scheduler
from .queues import SizeQueues, drain
from .victims import choose_victims


@dataclass
class Legacy(BasePolicy):
    """Priority scheduling without budgets, as Ai2 ran it before impactful scheduling."""

    name: ClassVar[str] = "legacy"

    def setup(self, ctx: Context) -> None:
        """One queue ordered by (-priority, submit, id)."""
        super().setup(ctx)
        self.queue = SizeQueues()

    def enqueue(self, j: int, now: float) -> None:
        """A pending job joins the queue at its priority."""
        job = self.ctx.jobs[j]
        self.queue.push(j, job.gpus, (-job.priority, j))

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves the queue."""
        self.queue.discard(j)

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start jobs by priority; a blocked job preempts lower-priority preemptible work."""
        drain(self.queue, sched, lambda j: self.make_room(sched, j))

    def make_room(self, sched: Scheduler, j: int) -> bool:
        """Preempt the lowest-priority, newest preemptible jobs below ``j``'s priority."""
        prio = sched.jobs[j].priority
        ranked = sorted(
            (sched.jobs[v].priority, -sched.started_at[v], -v, v)
            for v in sched.running
            if sched.jobs[v].preemptible and sched.jobs[v].priority < prio and sched.started_at[v] < sched.now
        )
        victims = choose_victims(sched, j, [t[-1] for t in ranked], lambda v, chosen: True)
        for v in victims or ():
            sched.preempt(v, j)
        return victims is not None
