"""Planned maintenance: announced nodes are emptied each policy's way, then go down a while
(docs/model.md, "Planned maintenance").

For each window of the plan (``impactlab.base.config.Maintenance``):

1. At the announcement every node of the window is *cordoned*: it takes no new work. Each
   job running there is asked of the policy (``Policy.vacate_at``): from when may it be stopped
   for the maintenance? ``impactful`` answers with the end of the job's contract, ``legacy``
   with now for preemptible jobs and never for jobs that opted out, and a policy that never
   preempts (``fifo``, ``fairshare``, the protocol's default) with never. A job is *evicted*
   (stopped and requeued from its last checkpoint, with no grace period) at that time, or at the
   next scheduling cycle with one, unless it has ended by then.
2. At the deadline (``down_h``) the jobs still there are evicted (``at_deadline="stop"``), or
   the node waits for them to end (``"wait"``).
3. A node goes down once it is empty (``early``, the default), or once it is empty and the
   deadline has come, and is back in service ``hours`` later.

A node that is failed or down for repair when announced is cordoned once repaired. While a node
is in a window, no new failure starts (it is being looked after).

The log records it all (``cordon``, ``evict``, ``vacated``, ``maintenance_down``,
``maintenance_up``), which is what the maintenance metrics read. The driver acts on the nodes
only through ``MaintenanceOps`` (the engine implements it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..base.config import Maintenance
from ..base.units import HOUR_S


class MaintenanceOps(Protocol):
    """What the maintenance plan needs from whoever runs the nodes (the engine implements it)."""

    @property
    def now(self) -> float:
        """The current simulated time in seconds."""
        ...

    def at(self, t: float, fn: Callable[..., None], *args: object) -> None:
        """Call ``fn(*args)`` at exactly time ``t``."""
        ...

    def announce(self, node: int, detail: str) -> None:
        """Log that ``node`` is announced for maintenance (a ``cordon`` row)."""
        ...

    def can_close(self, node: int) -> bool:
        """Whether ``node`` is in service and healthy, so that it can be closed to new work
        now (a failed node is closed once repaired)."""
        ...

    def close(self, node: int) -> None:
        """Close announced ``node`` to new work; its jobs run on."""
        ...

    def jobs_on(self, node: int) -> list[int]:
        """The jobs holding GPUs on ``node`` (sorted)."""
        ...

    def vacate_at(self, j: int) -> float:
        """When the policy lets running job ``j`` be stopped for maintenance (inf: never)."""
        ...

    def evict_at(self, t: float, j: int, detail: str) -> None:
        """Evict job ``j`` at ``t`` (at once if ``t`` has come) unless it has stopped by then."""
        ...

    def is_empty(self, node: int) -> bool:
        """Whether cordoned ``node`` holds no job."""
        ...

    def vacated(self, node: int, detail: str) -> None:
        """Record that cordoned ``node`` is empty."""
        ...

    def take_down(self, node: int, detail: str) -> None:
        """Take empty cordoned ``node`` out of service for maintenance."""
        ...

    def bring_up(self, node: int, detail: str) -> None:
        """Put ``node`` back into service after its maintenance."""
        ...


class NodeWork:
    """Where one node of one window stands."""

    __slots__ = ("cordoned", "deadline_s", "down", "empty", "window")

    def __init__(self, window: int, deadline_s: float):
        self.window, self.deadline_s = window, deadline_s
        self.cordoned = self.empty = self.down = False


class MaintenancePlan:
    """Drives every window of a plan through its ``MaintenanceOps``."""

    def __init__(self, ops: MaintenanceOps, plan: tuple[Maintenance, ...], node_count: int):
        self.ops, self.plan = ops, plan
        self.nodes = [w.node_list(node_count) for w in plan]
        self.work: dict[int, NodeWork] = {}  # node -> its current window, announced and not up
        self._announced: dict[int, NodeWork] = {}  # nodes announced while down for repair
        # Windows announced for a node still in an earlier one (a window that waits for its
        # jobs can outlast its announced times): each starts when the one before is over.
        self._next: dict[int, list[NodeWork]] = {}

    def start(self) -> None:
        """Schedule every announcement."""
        for i, window in enumerate(self.plan):
            self.ops.at(window.announce_h * HOUR_S, self._announce, i)

    def in_window(self, node: int) -> bool:
        """Whether ``node`` is announced, draining or down for maintenance (it does not fail)."""
        return node in self.work

    def _label(self, i: int) -> str:
        return self.plan[i].label(i)

    def _announce(self, i: int) -> None:
        window, ops = self.plan[i], self.ops
        deadline = window.down_h * HOUR_S
        for node in self.nodes[i]:
            work = NodeWork(i, deadline)
            ops.announce(node, f"maintenance={self._label(i)}; down at {window.down_h:g} h")
            if node in self.work:
                self._next.setdefault(node, []).append(work)
            else:
                self._begin(node, work)
        ops.at(deadline, self._deadline, i)

    def _begin(self, node: int, work: NodeWork) -> None:
        """Window ``work`` takes ``node``: closed to new work now, or once repaired."""
        self.work[node] = work
        if self.ops.can_close(node):
            self.ops.close(node)
            self._cordoned(node, work)
        else:
            self._announced[node] = work  # closed when its repair ends

    def repaired(self, node: int) -> bool:
        """A node down for repair is back: if a window was announced meanwhile, close it now
        (True: the engine keeps it closed)."""
        work = self._announced.pop(node, None)
        if work is None:
            return False
        self.ops.close(node)
        self._cordoned(node, work)
        return True

    def _cordoned(self, node: int, work: NodeWork) -> None:
        work.cordoned = True
        ops = self.ops
        for j in ops.jobs_on(node):
            t = ops.vacate_at(j)
            if t < work.deadline_s:
                ops.evict_at(
                    t, j, f"maintenance={self._label(work.window)}; released by the policy"
                )
        self.node_freed(node)

    def node_freed(self, node: int) -> None:
        """A job left cordoned ``node`` (or it was just cordoned): record it empty, and take it
        down if its deadline has come."""
        work = self.work.get(node)
        if work is None or not work.cordoned or work.empty or not self.ops.is_empty(node):
            return
        work.empty = True
        self.ops.vacated(node, f"maintenance={self._label(work.window)}")
        if self.plan[work.window].early or self.ops.now >= work.deadline_s:
            self._down(node, work)

    def _deadline(self, i: int) -> None:
        window, ops = self.plan[i], self.ops
        for node in self.nodes[i]:
            work = self.work.get(node)
            if work is None or work.window != i or not work.cordoned:
                continue  # (down for repair, or in an earlier window: checked once closed)
            if work.empty:
                self._down(node, work)
            elif window.at_deadline == "stop":
                for j in ops.jobs_on(node):
                    ops.evict_at(ops.now, j, f"maintenance={self._label(i)}; deadline")
                self.node_freed(node)

    def _down(self, node: int, work: NodeWork) -> None:
        if work.down:
            return
        work.down = True
        window = self.plan[work.window]
        self.ops.take_down(node, f"maintenance={self._label(work.window)}; {window.hours:g} h")
        self.ops.at(self.ops.now + window.hours * HOUR_S, self._up, node)

    def _up(self, node: int) -> None:
        work = self.work.pop(node)
        self.ops.bring_up(node, f"maintenance={self._label(work.window)}; done")
        waiting = self._next.get(node)
        if waiting:  # a later window announced meanwhile takes the node now
            self._begin(node, waiting.pop(0))
