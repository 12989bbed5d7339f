"""Node failures, automatic removal from service and human repairs (docs/model.md, "Node health").

Each node fails at exponential times (``mtbf_hours`` per node), counted from when it was last
in service. What happens next depends on the repair mode:

* ``automatic`` (impactful's default): the failure is detected at once; the node is taken out of service
  (its jobs fail and are requeued) and repaired without a person in ``auto_repair_hours``,
  except for a ``human_fraction`` of failures (hardware to replace) that take a person
  ``human_repair_hours``.
* ``manual`` (legacy's default): nobody notices at first. The node stays in service and every
  job that lands on it dies after ``crash_s``, until a person notices (``detect_hours``),
  takes it out and repairs it in ``human_repair_hours``. Every repair is a human repair.

In both modes the node is unhealthy from the failure to the repair (``node_down`` and
``node_up`` in the event log), which is what availability measures. A node in a planned
maintenance window does not fail: a failure drawn for it then is skipped, and the next drawn.

The model acts on the nodes only through ``NodeOps`` (the engine implements it), so this module
depends on nothing that runs a simulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..base.config import REPAIR_MODES, HealthConfig, RepairMode
from ..base.rng import stream
from ..base.units import HOUR_S

__all__ = ["REPAIR_MODES", "HealthConfig", "NodeHealth", "RepairMode", "repair_mode"]


def repair_mode(value: str) -> RepairMode:
    """``value`` (a policy's default ``repair``, declared as text) as a repair mode."""
    if value in REPAIR_MODES:
        return value
    raise ValueError(f"repair mode must be one of {', '.join(REPAIR_MODES)}, got {value!r}")


class NodeOps(Protocol):
    """What the failure model needs from whoever runs the nodes (the engine implements it)."""

    @property
    def now(self) -> float:
        """The current simulated time in seconds."""
        ...

    @property
    def node_count(self) -> int:
        """Nodes in the cluster, numbered from 0."""
        ...

    def at(self, t: float, fn: Callable[..., None], *args: object) -> None:
        """Call ``fn(*args)`` at exactly time ``t``."""
        ...

    def node_failed(self, node: int, detail: str) -> None:
        """``node`` has just failed; its jobs fail, and it stays in service until taken out."""
        ...

    def take_out(self, node: int) -> None:
        """Take failed ``node`` out of service; jobs still on it fail."""
        ...

    def node_repaired(self, node: int, detail: str) -> None:
        """``node`` is repaired and back in service."""
        ...

    def in_maintenance(self, node: int) -> bool:
        """Whether ``node`` is in a planned maintenance window (it does not fail meanwhile)."""
        ...


class NodeHealth:
    """Drives failures and repairs of every node through its ``NodeOps``."""

    def __init__(
        self, ops: NodeOps, config: HealthConfig, mode: RepairMode, seed: int, first_node: int = 0
    ):
        self.ops, self.config, self.mode = ops, config, mode
        # One stream per node, so a node's failure times do not depend on the others.
        # (``first_node``: the node's number in the fleet when this cluster is one of several)
        self.rng = [stream(seed, "health", first_node + i) for i in range(ops.node_count)]

    def start(self) -> None:
        """Schedule every node's first failure."""
        if self.config.mtbf_hours is None:
            return
        for node in range(self.ops.node_count):
            self._next_failure(node)

    def _next_failure(self, node: int) -> None:
        mtbf_hours = self.config.mtbf_hours
        if mtbf_hours is None:  # (never: without an MTBF no node fails, so none is repaired)
            return
        gap_s = self.rng[node].exponential(mtbf_hours * HOUR_S)
        self.ops.at(self.ops.now + gap_s, self._fail, node)

    def _fail(self, node: int) -> None:
        ops, config = self.ops, self.config
        if ops.in_maintenance(node):  # looked after already: its next failure comes later
            self._next_failure(node)
            return
        ops.node_failed(node, detail=f"failure; repair={self.mode}")
        if self.mode == "automatic":
            ops.take_out(node)
            human = self.rng[node].random() < config.human_fraction
            hours = config.human_repair_hours if human else config.auto_repair_hours
            ops.at(ops.now + hours * HOUR_S, self._repair, node, human)
        else:
            ops.at(ops.now + config.detect_hours * HOUR_S, self._detect, node)

    def _detect(self, node: int) -> None:
        self.ops.take_out(node)
        self.ops.at(
            self.ops.now + self.config.human_repair_hours * HOUR_S, self._repair, node, True
        )

    def _repair(self, node: int, human: bool) -> None:
        self.ops.node_repaired(node, detail="repair=human" if human else "repair=automatic")
        self._next_failure(node)
