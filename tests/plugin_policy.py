"""A researcher's policy, written outside the package against the documented protocol.

Shortest job first: every pass starts pending jobs in order of the work they need (ties by
submit order), each where it fits best; no preemption. ``conftest`` registers it, so every
invariant test runs it; the CLI reaches it by its spec ``plugin_policy:ShortestFirst``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from impactlab import BasePolicy, Scheduler, knob


@dataclass
class ShortestFirst(BasePolicy):
    """Start the shortest pending jobs first, wherever they fit."""

    name: ClassVar[str] = "shortest"
    scan: int = knob(10_000, int, "pending jobs looked at per pass", "jobs", lo=1, hi=1_000_000)

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start pending jobs by increasing work while GPUs are free."""
        for j in sorted(sched.pending, key=lambda j: (sched.work_left(j), j))[: self.scan]:
            if sched.cluster.free_total == 0:
                return
            nodes = sched.cluster.best_fit(sched.jobs[j].gpus)
            if nodes is not None:
                sched.start(j, nodes)
