"""The one frozen configuration of a run; vary it with ``dataclasses.replace``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .generator import GeneratorConfig
from .health import HealthConfig
from .policies import REGISTRY
from .units import DAY_S


@dataclass(frozen=True)
class SimConfig:
    """Everything a run needs besides its inputs (trace and budget tree).

    Without a trace, the synthetic generator builds one from ``gpus``, ``days``, ``demand``,
    ``funded_load`` and ``seed``. ``policy_knobs`` override the policy's defaults (e.g.
    ``{"window_days": 3}``). ``warmup_days`` (default: the policy's window, or 7 days) is
    left out of the metrics so that the sliding window is full. ``health`` turns on node
    failures (``HealthConfig(mtbf_hours=...)``); failures are drawn from ``seed`` too.
    """

    policy: str = "impactful"
    gpus: int = 256
    gpus_per_node: int = 8
    days: float = 14.0
    demand: float = 2.5
    funded_load: float = 0.8
    seed: int = 0
    restart_overhead_s: float = 60.0
    warmup_days: float | None = None
    policy_knobs: dict[str, Any] = field(default_factory=dict)
    health: HealthConfig = field(default_factory=HealthConfig)  # node failures and repairs; off by default

    def __post_init__(self) -> None:
        if self.policy not in REGISTRY:
            raise ValueError(f"unknown policy {self.policy!r}; choose from {sorted(REGISTRY)}")
        if self.gpus < self.gpus_per_node or self.gpus % self.gpus_per_node:
            raise ValueError(f"gpus must be a positive multiple of gpus_per_node ({self.gpus_per_node}), got {self.gpus}")
        if self.days <= 0:
            raise ValueError(f"days must be positive, got {self.days}")
        if self.warmup_days is not None and not 0 <= self.warmup_days < self.days:
            raise ValueError(f"warmup_days must be in [0, days), got {self.warmup_days}")

    @property
    def nodes(self) -> int:
        """Nodes in the cluster."""
        return self.gpus // self.gpus_per_node

    @property
    def horizon_s(self) -> float:
        """Simulated time span."""
        return self.days * DAY_S

    @property
    def warmup_s(self) -> float:
        """Start of the reporting window."""
        if self.warmup_days is not None:
            return self.warmup_days * DAY_S
        window = self.policy_knobs.get("window_days", 7.0)
        return min(window, self.days / 2) * DAY_S

    def generator(self) -> GeneratorConfig:
        """The synthetic workload this config asks for."""
        return GeneratorConfig(gpus=self.gpus, days=self.days, demand=self.demand,
                               funded_load=self.funded_load, seed=self.seed,
                               gpus_per_node=self.gpus_per_node)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, saved next to every result."""
        return asdict(self)
