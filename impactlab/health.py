"""Node failures, automatic drain and human repairs (DESIGN.md section 2).

Each node fails at exponential times (``mtbf_hours`` per node), counted from when it was last
in service. What happens next depends on the repair mode:

* ``automatic`` (impactful's default): the failure is detected at once; the node is drained
  (its jobs fail and are requeued) and repaired without a person in ``auto_repair_hours``,
  except for a ``human_fraction`` of failures (hardware to replace) that take a person
  ``human_repair_hours``.
* ``manual`` (legacy's default): nobody notices at first. The node stays in service and every
  job that lands on it dies after ``crash_s``, until a person notices (``detect_hours``),
  drains it and repairs it in ``human_repair_hours``. Every repair is a human repair.

In both modes the node is unhealthy from the failure to the repair (``node_down`` and
``node_up`` in the event log), which is what availability measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - only for type hints
    from .engine import Engine

from .config import REPAIR_MODES, HealthConfig, RepairMode
from .units import HOUR_S

__all__ = ["REPAIR_MODES", "HealthConfig", "NodeHealth", "RepairMode"]


class NodeHealth:
    """Drives failures and repairs of every node through the engine."""

    def __init__(self, engine: Engine, config: HealthConfig, mode: RepairMode, seed: int):
        self.engine, self.config, self.mode = engine, config, mode
        # One generator per node, so a node's failure times do not depend on the others.
        seeds = np.random.SeedSequence(seed, spawn_key=(7,)).spawn(engine.cluster.nodes)
        self.rng = [np.random.default_rng(s) for s in seeds]

    def start(self) -> None:
        """Schedule every node's first failure."""
        if self.config.mtbf_hours is None:
            return
        for node in range(self.engine.cluster.nodes):
            self._next_failure(node)

    def _next_failure(self, node: int) -> None:
        gap_s = self.rng[node].exponential(self.config.mtbf_hours * HOUR_S)  # type: ignore[operator]
        self.engine.at(self.engine.now + gap_s, self._fail, node)

    def _fail(self, node: int) -> None:
        engine, config = self.engine, self.config
        engine.node_failed(node, detail=f"failure; repair={self.mode}")
        if self.mode == "automatic":
            engine.drain(node)
            human = self.rng[node].random() < config.human_fraction
            hours = config.human_repair_hours if human else config.auto_repair_hours
            engine.at(engine.now + hours * HOUR_S, self._repair, node, human)
        else:
            engine.at(engine.now + config.detect_hours * HOUR_S, self._detect, node)

    def _detect(self, node: int) -> None:
        self.engine.drain(node)
        self.engine.at(self.engine.now + self.config.human_repair_hours * HOUR_S, self._repair, node, True)

    def _repair(self, node: int, human: bool) -> None:
        self.engine.node_repaired(node, detail="repair=human" if human else "repair=automatic")
        self._next_failure(node)
