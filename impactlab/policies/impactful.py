"""``impactful``: Ai2's budgets, windowed fair share, protection contract and backfill."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..events import Job
from .base import BasePolicy, Context, Scheduler
from .fair import FairQueues, FairTree
from .victims import choose_victims

DAY_S = 86_400.0


@dataclass
class Impactful(BasePolicy):
    """Funded work by Fair Tree over a sliding window; protected for a capped minimum runtime,
    then preemptible by under-served budgets; unallocated work backfills and never preempts."""

    name: ClassVar[str] = "impactful"
    window_days: float = 7.0
    cap_hours: float = 8.0
    protect_unallocated: bool = False
    half_life_days: float | None = None  # decay the window's usage instead of a hard cut-off
    refresh_s: float = 300.0
    boost_interactive: bool = False  # debug/interactive first within their tier

    def setup(self, ctx: Context) -> None:
        """Build the fair-share state and the lanes."""
        super().setup(ctx)
        half_life = None if self.half_life_days is None else self.half_life_days * DAY_S
        self.fair = FairTree(ctx, self.window_days * DAY_S, half_life, self.refresh_s)
        self.queues = FairQueues(ctx.jobs, self.boost_interactive)  # type: ignore[arg-type]

    def protection_s(self, job: Job) -> float:
        """The contract: min(declared minimum runtime, cap); none for unallocated by default."""
        if not job.funded and not self.protect_unallocated:
            return 0.0
        return min(job.min_runtime_s, self.cap_hours * 3600.0)

    def enqueue(self, j: int, now: float) -> None:
        """A pending job joins its lane."""
        self.queues.add(j)

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves its lane."""
        self.queues.remove(j)

    def on_start(self, j: int, now: float) -> None:
        """Charge a funded job's budget from now on."""
        if self.ctx.jobs[j].funded:
            self.fair.charge(self.ctx.jobs[j], now, +1)

    def on_stop(self, j: int, now: float) -> None:
        """Stop charging."""
        if self.ctx.jobs[j].funded:
            self.fair.charge(self.ctx.jobs[j], now, -1)

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Funded lanes by rank with preemption, then unallocated backfill."""
        self.fair.refresh(now)
        self.queues.run(self.fair, sched, lambda j: self.make_room(sched, j))

    def make_room(self, sched: Scheduler, j: int) -> bool:
        """Preempt eligible victims so that funded job ``j`` fits; True if it now does."""
        victims = choose_victims(sched, j, self.candidates(sched, j), self._accepts(sched, j))
        for v in victims or ():
            sched.preempt(v, j)
        return victims is not None

    def candidates(self, sched: Scheduler, j: int) -> list[int]:
        """Preemptible running jobs in preference order: unallocated newest first, then funded
        on the most over-served side of the lowest common ancestor, newest first."""
        leaf, now, jobs = sched.jobs[j].leaf, sched.now, sched.jobs
        unfunded, funded = [], []
        for v in sched.running:
            if sched.started_at[v] >= now or now < sched.protected_until[v]:
                continue  # started in this instant, or protected
            job = jobs[v]
            if not job.funded:
                unfunded.append((-sched.started_at[v], -v, v))
            elif (sides := self.fair.split(leaf, job.leaf)) is not None:
                funded.append((-self.fair.served(sides[1]), -sched.started_at[v], -v, v))
        return [t[-1] for t in sorted(unfunded)] + [t[-1] for t in sorted(funded)]

    def _accepts(self, sched: Scheduler, j: int):  # noqa: ANN202 - returns a victims.Accept
        """No ping-pong: after the swap, ``j``'s side must be no better served than the victim's."""
        jobs, fair, job = sched.jobs, self.fair, sched.jobs[j]

        def accept(v: int, chosen: list[int]) -> bool:
            victim = jobs[v]
            if not victim.funded:
                return True
            mine, theirs = fair.split(job.leaf, victim.leaf)  # type: ignore[misc]
            gone = [jobs[u] for u in (*chosen, v) if jobs[u].funded]
            mine_delta = job.held - sum(u.held for u in gone if mine in fair.paths[u.leaf])
            theirs_delta = -sum(u.held for u in gone if theirs in fair.paths[u.leaf])
            return fair.served(mine, mine_delta) <= fair.served(theirs, theirs_delta)

        return accept
