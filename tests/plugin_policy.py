"""A researcher's policy, written outside the package against the documented protocol.

Shortest job first: every pass starts pending jobs in order of the work they need (ties by
submit order), each where it fits best; no preemption. ``conftest`` registers it, so every
invariant test runs it; the CLI reaches it by its spec ``plugin_policy:ShortestFirst``.

Newest yields: a preempting policy with a contract, whose own ``Explainer`` gives job stories
in its terms (``tests/test_explain.py``), with no change anywhere in the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from impactlab import Attempt, BasePolicy, Explainer, Job, Scheduler, knob


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


@dataclass
class NewestYields(BasePolicy):
    """First come, first served with preemption: a pending single-node job that does not fit
    takes a node from the newest unprotected attempts there; every attempt is protected for its
    declared minimum runtime, up to ``cap_hours``. Its ``explainer`` tells stories in its terms."""

    name: ClassVar[str] = "newest-yields"
    cap_hours: float = knob(2.0, float, "protection cap", "h", lo=0.0, hi=24.0)

    def protection_s(self, job: Job) -> float:
        """The declared minimum runtime, up to the cap (a contract that reads the job only)."""
        return min(job.min_runtime_s, self.cap_hours * 3600.0)

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Start pending jobs in submit order, making room for single-node ones."""
        for j in sorted(sched.pending):
            job = sched.jobs[j]
            nodes = sched.cluster.best_fit(job.gpus)
            if nodes is None and job.n_nodes == 1:
                nodes = self._make_room(sched, j)
            if nodes is not None:
                sched.start(j, nodes)

    def _make_room(self, sched: Scheduler, j: int) -> tuple[int, ...] | None:
        """Preempt the newest unprotected attempts on the first node where that makes room."""
        need = sched.jobs[j].gpus
        for n, running in enumerate(sched.on_node):
            if n in sched.cluster.down:
                continue
            victims = sorted(
                (v for v in running if not sched.protected(v) and sched.started_at[v] < sched.now),
                key=lambda v: (-sched.started_at[v], -v),
            )
            if sched.cluster.free[n] + sum(sched.jobs[v].held for v in victims) < need:
                continue
            for v in victims:
                if sched.cluster.free[n] >= need:
                    break
                sched.preempt(v, j, "the newest unprotected attempt on the node yields")
            return (n,)
        return None

    def explainer(self, nodes: int) -> Explainer:
        """Stories under this policy."""
        return NewestYieldsExplainer(self, nodes)


class NewestYieldsExplainer(Explainer):
    """This policy preempts for every single-node job, on one node at a time."""

    def preempts_for(self, job: Job) -> bool:
        """Single-node jobs make room; gangs wait for it."""
        return job.n_nodes == 1

    def no_preemption(self, job: Job) -> str:
        """Gangs never preempt."""
        return "a gang never preempts under newest-yields: it waits for whole free nodes"

    def spared(
        self, job: Job, unprotected: Sequence[Attempt], had_room: bool
    ) -> list[tuple[str, str]]:
        """Unprotected attempts spread over nodes none of which could be cleared enough."""
        if had_room or not unprotected or job.n_nodes > 1:
            return []
        return [
            (
                "one_node",
                (
                    f"{len(unprotected)} unprotected running jobs were spread over nodes where "
                    "freeing them would not have made room"
                ),
            )
        ]
