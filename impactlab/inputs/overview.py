"""What a trace holds, before replaying it: span, load, kinds, projects, gang sizes, and the
cluster size that would give a chosen offered load (``impactlab inspect TRACE``)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..base.gangs import SIZE_BUCKETS, held_gpus
from ..base.units import DAY_S, HOUR_S

log = logging.getLogger(__name__)

#: Offered loads (x capacity) the model is meant for; outside them a replay warns.
SENSIBLE_LOAD = (0.3, 5.0)
#: The offered load a replay's suggested size aims at (Ai2's demand runs at 2-3x capacity).
SUGGESTED_LOAD = 2.5


@dataclass(frozen=True)
class SizeAdvice:
    """The cluster size that gives an offered load, on the jobs that fit it, and what the
    largest job would need instead (``Overview.advise``)."""

    demand: float
    gpus: int  # the fewest whole nodes offered at most ``demand`` by the jobs that fit them
    load: float  # the offered load those jobs give it (below ``demand`` by the rounding up)
    skipped_jobs: int  # jobs larger than ``gpus``: the run needs --skip-large
    skipped_share: float  # their share of the trace's GPU-hours
    largest_gpus: int
    largest_cluster: int  # whole nodes that hold the largest job
    load_at_largest: float  # the whole trace's offered load on ``largest_cluster`` GPUs

    @property
    def flags(self) -> str:
        """The command-line flags of the suggestion."""
        return f"--gpus {self.gpus}" + (" --skip-large" if self.skipped_jobs else "")

    @property
    def too_light(self) -> bool:
        """Whether even one node, the smallest cluster, is offered far less than ``demand``
        (less than half: more than rounding up to whole nodes explains)."""
        return self.load < self.demand / 2

    def gives(self) -> str:
        """What the suggested size gives, in words."""
        if self.too_light:
            return (
                f"a cluster of {self.gpus} GPUs (one node, the smallest) gives an offered load of "
                f"only {self.load:.2f}x capacity: the trace is too light for {self.demand:g}x"
            )
        return (
            f"a cluster of {self.gpus} GPUs gives an offered load of {self.load:.2f}x capacity "
            f"({self.demand:g}x rounded up to whole nodes)"
        )

    def lines(self) -> list[str]:
        """The suggestion in words; with the choice the largest job leaves, when it does not fit."""
        if not self.skipped_jobs:
            return [f"{self.gives()}: {self.flags}"]
        return [
            (
                f"{self.gives()} on the jobs that fit it: {self.flags} (skips "
                f"{_jobs(self.skipped_jobs)} larger than {self.gpus} GPUs, "
                f"{self.skipped_share:.1%} of the GPU-hours)"
            ),
            (
                f"or keep every job: the largest ({self.largest_gpus} GPUs) needs --gpus {self.largest_cluster}, "
                f"where the offered load is {self.load_at_largest:.2f}x"
            ),
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the flags."""
        return {**self.__dict__, "flags": self.flags}


@dataclass(frozen=True)
class Overview:
    """A trace at a glance (GPU-hours count held GPUs: whole nodes for multi-node gangs). The
    span is what a replay covers by default: from time 0 to the last submission, rounded up to
    the hour."""

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
    #: Per gang size, ascending: (GPUs asked, jobs, GPU-hours held); what sizing needs.
    by_gang: tuple[tuple[int, int, float], ...] = ()
    gpus_per_node: int = 8
    patience_recorded: bool = False

    @property
    def gpu_hours_per_day(self) -> float:
        """Mean GPU-hours submitted per day of the span."""
        return self.gpu_hours / self.span_days if self.span_days else 0.0

    def offered_load(self, gpus: int) -> float:
        """GPU-hours submitted per hour / capacity, on a cluster of ``gpus``."""
        return self.gpu_hours_per_day / 24.0 / gpus

    def advise(self, demand: float = SUGGESTED_LOAD) -> SizeAdvice:
        """The whole nodes that make the offered load ``demand`` on the jobs that fit them. A job
        larger than that is left out (``skip_large``) and the size worked out again without it,
        until every job left fits: a replay at the suggested size with --skip-large then offers
        ``demand``, and its own load check agrees."""
        per, fits = self.gpus_per_node, len(self.by_gang)
        while True:
            hours = sum(h for _, _, h in self.by_gang[:fits])
            nodes = max(math.ceil(hours / (demand * 24.0 * max(self.span_days, 1e-9)) / per), 1)
            now_fits = sum(1 for g, _, _ in self.by_gang if g <= nodes * per)
            if now_fits == fits:
                break
            fits = now_fits
        skipped = self.by_gang[fits:]
        largest = max(math.ceil(self.largest_gpus / per), 1) * per
        return SizeAdvice(
            demand,
            nodes * per,
            hours / (24.0 * max(self.span_days, 1e-9)) / (nodes * per),
            sum(n for _, n, _ in skipped),
            sum(h for _, _, h in skipped) / self.gpu_hours if self.gpu_hours else 0.0,
            self.largest_gpus,
            largest,
            self.offered_load(largest) if self.span_days else 0.0,
        )

    def gpus_for(self, demand: float = SUGGESTED_LOAD) -> int:
        """The suggested cluster size for ``demand`` (see ``advise``)."""
        return self.advise(demand).gpus

    def lines(self, demand: float = SUGGESTED_LOAD) -> list[str]:
        """A readable summary."""
        kinds = ", ".join(f"{k} {n}" for k, n in self.kinds.items())
        sizes = ", ".join(f"{k}: {n}" for k, n in self.sizes.items())
        out = [
            f"{self.jobs:,} jobs over {self.span_days:.2f} days ({self.jobs / max(self.span_days, 1e-9):,.0f} per day)",
            f"GPU-hours: {self.gpu_hours:,.0f} ({self.gpu_hours_per_day:,.0f} per day)",
            f"kinds: {kinds}",
            f"projects: {self.projects}, users: {self.users}, unallocated jobs: {self.unallocated_jobs}",
            f"gang sizes (GPUs): {sizes}; largest job {self.largest_gpus} GPUs",
        ]
        if self.skipped:
            out.append(
                "skipped when loading: "
                + "; ".join(f"{why}: {n:,}" for why, n in self.skipped.items())
            )
        out += self.advise(demand).lines()
        if demand > 1 and not self.patience_recorded:
            out.append(
                f"at {demand:g}x the work offered exceeds the capacity and the trace records no patience: "
                "the queue can only grow (a backlog, which every run reports); --patience-hours 24 lets a "
                "job give up after a day (and the funded jobs that do are reported in turn)"
            )
        return out

    def to_dict(self, demand: float = SUGGESTED_LOAD) -> dict[str, Any]:
        """JSON-ready form (with the derived per-day load and the size advice for ``demand``)."""
        plain = {k: v for k, v in self.__dict__.items() if k != "by_gang"}
        return {
            **plain,
            "gpu_hours_per_day": self.gpu_hours_per_day,
            "advice": self.advise(demand).to_dict(),
            "suggested_gpus": self.gpus_for(demand),
        }


@dataclass(frozen=True)
class FleetAdvice:
    """For a trace whose ``cluster`` column names clusters: the size of each that holds all its
    named jobs and gives the offered load nearest ``demand`` (``fleet_advice``)."""

    demand: float
    clusters: dict[str, tuple[int, int, float]]  # name -> (jobs naming it, GPUs, offered load)
    unnamed_jobs: int  # jobs that name no cluster: the fleet places them by its balance

    @property
    def flags(self) -> str:
        """The command-line flag of the suggestion."""
        return "--clusters " + ",".join(f"{n}:{g}" for n, (_, g, _) in self.clusters.items())

    def lines(self) -> list[str]:
        named = ", ".join(f"{n} ({_jobs(j)})" for n, (j, _, _) in self.clusters.items())
        loads = ", ".join(f"{n} {x:.2f}x" for n, (_, _, x) in self.clusters.items())
        rest = (
            f"; the {_jobs(self.unnamed_jobs)} naming none "
            f"{'adds' if self.unnamed_jobs == 1 else 'add'} to the load where the fleet places "
            f"{'it' if self.unnamed_jobs == 1 else 'them'}"
            if self.unnamed_jobs
            else ""
        )
        offers = f"{self.flags} offers {loads} of their own jobs{rest}"
        return [
            f"clusters named in the trace: {named}",
            f"as a fleet near {self.demand:g}x each: {offers}",
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the flag."""
        clusters = {n: {"jobs": j, "gpus": g, "load": x} for n, (j, g, x) in self.clusters.items()}
        return {"demand": self.demand, "clusters": clusters, "unnamed_jobs": self.unnamed_jobs,
                "flags": self.flags}  # fmt: skip


def fleet_advice(
    trace: pd.DataFrame, gpus_per_node: int = 8, demand: float = SUGGESTED_LOAD
) -> FleetAdvice | None:
    """A fleet's layout for a trace whose ``cluster`` column names clusters (None: it names
    none): each named cluster sized by ``Overview.advise`` on its own jobs over the whole
    trace's span, or, if that would leave its largest job out, to hold that job."""
    if "cluster" not in trace:
        return None
    named = trace["cluster"].fillna("").astype(str)
    names = sorted(set(named) - {""})
    if not names:
        return None
    days, clusters = span_days(trace), {}
    for name in names:
        info = overview(trace[named == name], gpus_per_node, days)
        advice = info.advise(demand)
        gpus = advice.largest_cluster if advice.skipped_jobs else advice.gpus
        clusters[name] = (info.jobs, gpus, info.offered_load(gpus))
    return FleetAdvice(demand, clusters, int((named == "").sum()))


def span_days(trace: pd.DataFrame) -> float:
    """What a replay of ``trace`` covers by default: from time 0 to its last submission, rounded
    up to the hour (at least an hour)."""
    last = float(trace["submit_s"].max()) if len(trace) else 0.0
    return max(math.ceil(last / HOUR_S + 1e-9), 1) * HOUR_S / DAY_S


def overview(trace: pd.DataFrame, gpus_per_node: int = 8, days: float | None = None) -> Overview:
    """The overview of a validated trace (its load report, if any, in ``trace.attrs``) over the
    span a replay covers (``days``; default ``span_days``: the whole trace)."""
    days = span_days(trace) if days is None else days
    trace = trace[trace["submit_s"] < days * DAY_S]
    held = trace["gpus"].map(lambda g: held_gpus(int(g), gpus_per_node))
    project = trace["project"].fillna("").astype(str)
    sizes = {
        name: int(((trace["gpus"] >= lo) & (trace["gpus"] <= hi)).sum())
        for lo, hi, name in SIZE_BUCKETS
    }
    hours = (held * trace["duration_s"] / HOUR_S).groupby(trace["gpus"]).agg(["count", "sum"])
    return Overview(
        jobs=len(trace),
        span_days=days,
        gpu_hours=float(hours["sum"].sum()),
        largest_gpus=int(trace["gpus"].max()) if len(trace) else 0,
        kinds={str(k): int(n) for k, n in trace["kind"].value_counts().items()},
        projects=int(project[project != ""].nunique()),
        users=int(trace["user"].nunique()),
        unallocated_jobs=int((project == "").sum()),
        sizes=sizes,
        skipped=dict(trace.attrs.get("load_report", {}).get("skipped", {})),
        by_gang=tuple(
            (int(g), int(row["count"]), float(row["sum"])) for g, row in hours.iterrows()
        ),
        gpus_per_node=gpus_per_node,
        patience_recorded=bool(np.isfinite(trace["patience_s"].to_numpy(float)).any()),
    )


def check_load(trace: pd.DataFrame, gpus: int, gpus_per_node: int, days: float) -> float:
    """Offered load of the part of ``trace`` a run replays (``days``); logs a warning with the
    size ``impactlab inspect`` would suggest (the same ``Overview.advise``) when it is far
    outside what the model is meant for."""
    info = overview(trace, gpus_per_node, days)
    if not info.jobs:
        return 0.0
    load = info.offered_load(gpus)
    lo, hi = SENSIBLE_LOAD
    if not lo <= load <= hi:
        advice = info.advise(SUGGESTED_LOAD)
        if advice.too_light and advice.gpus >= gpus and not advice.skipped_jobs:
            hint = f"too light for {SUGGESTED_LOAD:g}x on any cluster (one node is the smallest)"
        else:
            skipping = (
                f" (skipping {_jobs(advice.skipped_jobs)} larger than {advice.gpus} GPUs)"
                if advice.skipped_jobs
                else ""
            )
            hint = f"{advice.flags} gives {advice.load:.2f}x{skipping}"
        log.warning(
            "the trace offers %.2fx the capacity of %d GPUs (the model is meant for %g-%gx); %s",
            load,
            gpus,
            lo,
            hi,
            hint,
        )
    return load


def _jobs(n: int) -> str:
    return f"{n:,} job" if n == 1 else f"{n:,} jobs"
