"""``fairshare``: Slurm-style Fair Tree on decayed usage, no preemption."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..params import knob
from ..units import DAY_S
from .base import BasePolicy, Context, Scheduler
from .fair import FairQueues, FairTree
from .queues import PassGate


@dataclass
class FairShare(BasePolicy):
    """Funded jobs ranked by Fair Tree over usage decayed with a half-life; then unallocated.

    The base of ``impactful``, which adds a sliding window, the contract and preemption.
    """

    name: ClassVar[str] = "fairshare"
    half_life_days: float | None = knob(7.0, float, "usage decays with this half-life", "days", lo=0,
                                        hi=365, step=0.5, lo_open=True, nullable=True)
    refresh_s: float = knob(300.0, float, "how often the fair-share ranking is refreshed", "s", lo=1,
                            hi=86_400, step=60)

    def setup(self, ctx: Context) -> None:
        """Build the fair-share state and the queues."""
        super().setup(ctx)
        half_life = None if self.half_life_days is None else self.half_life_days * DAY_S
        self.fair = FairTree(ctx, self.window_s, half_life, self.refresh_s)
        self.queues = FairQueues(ctx.jobs, self.boost)  # type: ignore[arg-type]
        self.gate = PassGate()

    @property
    def window_s(self) -> float:
        """Usage window (only used without a half-life)."""
        return 7 * DAY_S

    @property
    def boost(self) -> bool:
        """Whether debug/interactive jobs go first within their tier."""
        return False

    def may_act(self, j: int) -> bool:
        """Whether a newly pending job could change a pass: here, only if it fits now."""
        return self.ctx.jobs[j].gpus <= self.ctx.view.cluster.largest_fit()

    def enqueue(self, j: int, now: float) -> None:
        """A pending job joins its leaf's queue."""
        if self.queues.add(j) and self.may_act(j):
            self.gate.note()

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves its queue."""
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
        """Start what fits, best-ranked leaf first; never preempt."""
        if self.gate.skip(sched, now >= self.fair.next_refresh):
            return
        self.fair.refresh(now)
        self.queues.run(self.fair, sched, None)
        self.gate.done(sched, fresh_matter=False)  # nothing is ever preempted
