"""What a trace holds, before replaying it: span, load, kinds, projects, gang sizes, and the
cluster size that would give a chosen offered load (``impactlab inspect TRACE``)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .cluster import held_gpus
from .metrics import SIZE_BUCKETS
from .units import DAY_S, HOUR_S

log = logging.getLogger(__name__)

#: Offered loads (x capacity) the model is meant for; outside them a replay warns.
SENSIBLE_LOAD = (0.3, 5.0)


@dataclass(frozen=True)
class Overview:
    """A trace at a glance (GPU-hours count held GPUs: whole nodes for multi-node gangs)."""

    jobs: int
    span_days: float
    gpu_hours: float
    largest_gpus: int
    kinds: dict[str, int]
    projects: int
    users: int
    unallocated_jobs: int
    sizes: dict[str, int]
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def gpu_hours_per_day(self) -> float:
        """Mean GPU-hours submitted per day of the span."""
        return self.gpu_hours / self.span_days if self.span_days else 0.0

    def offered_load(self, gpus: int) -> float:
        """GPU-hours submitted per hour / capacity, on a cluster of ``gpus``."""
        return self.gpu_hours_per_day / 24.0 / gpus

    def gpus_for(self, demand: float = 2.5, gpus_per_node: int = 8) -> int:
        """The cluster size (whole nodes) that makes the offered load ``demand``, and fits the
        largest job."""
        wanted = self.gpu_hours_per_day / 24.0 / demand
        nodes = max(math.ceil(wanted / gpus_per_node), math.ceil(self.largest_gpus / gpus_per_node), 1)
        return nodes * gpus_per_node

    def lines(self, demand: float = 2.5, gpus_per_node: int = 8) -> list[str]:
        """A readable summary."""
        kinds = ", ".join(f"{k} {n}" for k, n in self.kinds.items())
        sizes = ", ".join(f"{k}: {n}" for k, n in self.sizes.items())
        out = [f"{self.jobs:,} jobs over {self.span_days:.2f} days ({self.jobs / max(self.span_days, 1e-9):,.0f} per day)",
               f"GPU-hours: {self.gpu_hours:,.0f} ({self.gpu_hours_per_day:,.0f} per day)",
               f"kinds: {kinds}",
               f"projects: {self.projects}, users: {self.users}, unallocated jobs: {self.unallocated_jobs}",
               f"gang sizes (GPUs): {sizes}; largest job {self.largest_gpus} GPUs"]
        if self.skipped:
            out.append("skipped when loading: " + "; ".join(f"{n} {why}" for why, n in self.skipped.items()))
        out.append(f"a cluster of {self.gpus_for(demand, gpus_per_node)} GPUs gives an offered load of "
                   f"{demand:g}x capacity (--gpus {self.gpus_for(demand, gpus_per_node)})")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (with the derived per-day load)."""
        return {**self.__dict__, "gpu_hours_per_day": self.gpu_hours_per_day}


def overview(trace: pd.DataFrame, gpus_per_node: int = 8) -> Overview:
    """The overview of a validated trace (its load report, if any, in ``trace.attrs``)."""
    held = trace["gpus"].map(lambda g: held_gpus(int(g), gpus_per_node))
    span = _span_days(trace)
    project = trace["project"].fillna("").astype(str)
    sizes = {name: int(((trace["gpus"] >= lo) & (trace["gpus"] <= hi)).sum()) for lo, hi, name in SIZE_BUCKETS}
    return Overview(
        jobs=len(trace), span_days=span, gpu_hours=float((held * trace["duration_s"]).sum() / HOUR_S),
        largest_gpus=int(trace["gpus"].max()) if len(trace) else 0,
        kinds={str(k): int(n) for k, n in trace["kind"].value_counts().items()},
        projects=int(project[project != ""].nunique()), users=int(trace["user"].nunique()),
        unallocated_jobs=int((project == "").sum()), sizes=sizes,
        skipped=dict(trace.attrs.get("load_report", {}).get("skipped", {})))


def warn_about_load(trace: pd.DataFrame, gpus: int, gpus_per_node: int, days: float) -> float:
    """Offered load of the part of ``trace`` a run replays; logs a warning with a suggested
    cluster size when it is far outside what the model is meant for."""
    inside = trace[trace["submit_s"] < days * DAY_S]
    if inside.empty:
        return 0.0
    held = inside["gpus"].map(lambda g: held_gpus(int(g), gpus_per_node))
    load = float((held * inside["duration_s"]).sum() / (gpus * days * DAY_S))
    lo, hi = SENSIBLE_LOAD
    if not lo <= load <= hi:
        suggested = overview(inside, gpus_per_node).gpus_for(2.5, gpus_per_node)
        log.warning("the trace offers %.2fx the capacity of %d GPUs (the model is meant for %g-%gx); "
                    "--gpus %d gives 2.5x", load, gpus, lo, hi, suggested)
    return load


def _span_days(trace: pd.DataFrame) -> float:
    if trace.empty:
        return 0.0
    return max(float(trace["submit_s"].max() - trace["submit_s"].min()), HOUR_S) / DAY_S
