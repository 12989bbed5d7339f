"""``fairshare``: Slurm-style Fair Tree on decayed usage, no preemption.

The rule, written plainly, is ``reference.FairShareReference``; this pass makes the identical event log,
faster (``tests/test_oracle.py`` replays traces under both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..base.params import knob
from ..base.units import DAY_S
from ..sim.policy import BasePolicy, Context, Scheduler
from .fair import FairQueues, FairTree
from .queues import PassGate
from .reservation import Hold


@dataclass
class FairShare(BasePolicy):
    """Funded jobs ranked by Fair Tree over usage decayed with a half-life; then unallocated.

    The base of ``impactful``, which adds a sliding window, the contract and preemption.
    """

    name: ClassVar[str] = "fairshare"
    half_life_days: float | None = knob(
        7.0,
        float,
        "usage decays with this half-life",
        "days",
        lo=0,
        hi=365,
        step=0.5,
        lo_open=True,
        nullable=True,
    )
    refresh_s: float = knob(
        300.0, float, "how often the fair-share ranking is refreshed", "s", lo=1, hi=86_400, step=60
    )
    # As Slurm's backfill scheduler does: without it a large gang waits until enough GPUs free
    # at once, which smaller jobs starting all the time prevent.
    backfill_reservation: bool = knob(
        True,
        bool,
        "the top-ranked blocked job reserves the nodes "
        "that free soonest; other jobs start there only if they end "
        "before its reserved start",
    )
    reserve_for_unallocated: ClassVar[bool] = (
        True  # whether an unallocated job may hold the reservation
    )
    reserve_for_gangs_only: ClassVar[bool] = False  # whether only multi-node gangs may hold it

    def setup(self, ctx: Context) -> None:
        """Build the fair-share state and the queues."""
        super().setup(ctx)
        half_life = None if self.half_life_days is None else self.half_life_days * DAY_S
        self.fair = FairTree(ctx, self.window_s, half_life, self.refresh_s)
        self.queues = FairQueues(ctx.jobs, self.boost)  # type: ignore[arg-type]
        self.gate = PassGate()
        # (another cluster's usage counts here: the next pass runs, even if nothing else changed)
        self.fair.outside_change = self.gate.note
        view = ctx.view
        self.hold = Hold(lambda j: self.holds_for_s(view, j)) if self.backfill_reservation else None

    def holds_for_s(self, sched: Scheduler, j: int) -> float:
        """How long pending job ``j`` would keep its nodes from a reserved gang if started now:
        until it ends."""
        return sched.work_left(j)

    def release_s(self, sched: Scheduler, j: int) -> float:
        """When running job ``j`` gives its nodes to a reserved gang: when it ends."""
        return sched.expected_end(j)

    def plan(self, sched: Scheduler) -> None:
        """Reserve nodes for the first pending job in pass order, if it does not fit."""
        if self.hold is not None:
            above = sched.cluster.gpus_per_node if self.reserve_for_gangs_only else 0
            self.hold.plan(
                sched, self.queues.top(self.fair, not self.reserve_for_unallocated, above)
            )

    def _outranks_holder(self, j: int) -> bool:
        holder = self.hold.holder if self.hold is not None else -1
        if self.reserve_for_gangs_only and self.ctx.jobs[j].n_nodes == 1:
            return False
        return holder >= 0 and self.queues.position(j) < self.queues.position(holder)

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
        first = self.queues.add(j)
        if not first and self._may_backfill(j):
            self.queues.unstick(j)
            first = True
        if (first and self.may_act(j)) or self._outranks_holder(j):
            self.gate.note()  # (a new holder may free the nodes reserved for the old one)

    def _may_backfill(self, j: int) -> bool:
        """Whether job ``j`` may use the reserved nodes: then, unlike the jobs of its size
        before it, which may have been kept off them, it may start."""
        hold = self.hold
        return (
            hold is not None and hold.holder >= 0 and not hold.constrains(self.ctx.view, j, False)
        )

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves its queue."""
        self.queues.remove(j)
        if self.hold is not None and self.hold.holder >= 0:
            # The holder's nodes are free for others; another job's place among those passed
            # over for the reservation (at most BACKFILL_DEPTH) goes to the next one.
            self.queues.unstick(j)
            self.gate.note()
        elif self.hold is not None and self.hold.planned_for(j):
            self.gate.note()  # the plan made for j found no nodes; one for the next job may

    def on_start(self, j: int, now: float) -> None:
        """Charge a funded job's budget from now on."""
        if self.ctx.jobs[j].funded:
            self.fair.charge(self.ctx.jobs[j], now, +1)
        if self.hold is not None:
            self.hold.running(j, self.release_s(self.ctx.view, j))

    def on_stop(self, j: int, now: float) -> None:
        """Stop charging."""
        if self.ctx.jobs[j].funded:
            self.fair.charge(self.ctx.jobs[j], now, -1)
        if self.hold is not None:
            self.hold.stopped(j, now)

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start what fits, best-ranked leaf first; never preempt."""
        if self.gate.skip(sched, now >= self.fair.next_refresh):
            return
        self.fair.refresh(now)
        self.plan(sched)
        self.queues.run(self.fair, sched, None, hold=self.hold)
        # Nothing is ever preempted, but while a reservation holds, jobs started at this
        # instant leave less room, which lets a scan pass over fewer jobs (see Hold.started).
        self.gate.done(sched, fresh_matter=self.hold is not None and self.hold.holder >= 0)
