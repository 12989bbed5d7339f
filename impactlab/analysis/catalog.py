"""The one list of a run's scalar metrics: name, words, unit, format and which way is better.

The command line's tables and ``--json``, ``SimResult.metrics()``, sweeps, the report and the
charts all read it, so a metric is named, labelled and formatted in one place. docs/model.md
defines each one from the event log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["up", "down", ""]  # which way is better; "" when it depends on the question


@dataclass(frozen=True)
class Metric:
    """One scalar metric of a run."""

    name: str
    label: str  # in words, for axis titles and table rows
    unit: str  # "share" (of 1), "GPU-hours", "jobs", "count", "index" or "flag"
    fmt: str  # format spec of a readable table, for a float value (an int is shown whole)
    better: Better
    kind: Literal["fraction", "count"]  # a headline fraction, or a count or amount


def _fraction(name: str, label: str, better: Better, unit: str = "share") -> Metric:
    return Metric(name, label, unit, ".3f", better, "fraction")


def _count(name: str, label: str, better: Better, unit: str = "count", fmt: str = ".1f") -> Metric:
    return Metric(name, label, unit, fmt, better, "count")


#: Every scalar metric of ``SimResult.summary()``, in the order people read them.
METRICS: tuple[Metric, ...] = (
    _count("jobs", "jobs submitted", "", "jobs"),
    _fraction("availability", "availability (healthy share of GPU time)", "up"),
    _fraction("occupancy", "occupancy (healthy GPUs held)", "up"),
    _fraction("occupancy_funded", "occupancy by funded work", ""),
    _fraction("occupancy_unallocated", "occupancy by unallocated work", ""),
    _fraction("utilization", "utilization (useful work)", "up"),
    _fraction("impact", "impact (owed GPU time delivered)", "up"),
    _fraction("impact_useful", "impact on useful work", "up"),
    _fraction("impact_strict", "impact against strict entitlement", "up"),
    _fraction("unallocated_share", "unallocated share of GPU time", ""),
    _fraction("jain", "Jain's fairness over projects", "up", "index"),
    _fraction("requested_ratio", "GPUs requested over capacity", "", "ratio"),
    _count("preemptions", "preemptions", "down"),
    _count("lost_gpu_hours", "GPU-hours lost to preemption", "down", "GPU-hours", ".1f"),
    _fraction("preemption_lost_share", "share of GPU time lost to preemption", "down"),
    _count("preemptions_per_job_max", "most preemptions of one job", "down"),
    _count("preemptions_per_job_p99", "p99 preemptions per job", "down", fmt=".1f"),
    _fraction("preempted_repeatedly_share", "share of jobs preempted more than once", "down"),
    _count("funded_preemptions_per_job_max", "most preemptions of one funded job", "down"),
    _count("withdrawn", "jobs withdrawn (out of patience)", "down", "jobs"),
    _count("withdrawn_funded", "funded jobs withdrawn (out of patience)", "down", "jobs"),
    _fraction("withdrawn_funded_share", "share of funded jobs withdrawn", "down"),
    _fraction(
        "withdrawn_funded_work_share", "share of funded work withdrawn (GPUs x run time)", "down"
    ),
    _count("queued_at_start", "jobs queued at the window's start", "", "jobs"),
    _count("queued_at_end", "jobs still queued at the end", "down", "jobs"),
    _fraction("queued_at_end_share", "share of jobs still queued at the end", "down"),
    _count("backlog_growing", "backlog growing through the window", "down", "flag"),
    _count("sessions_killed", "interactive sessions killed", "down"),
    _fraction("sessions_killed_share", "share of sessions killed", "down"),
    _count(
        "session_lost_gpu_hours",
        "GPU-hours of work lost by killed sessions",
        "down",
        "GPU-hours",
        ".1f",
    ),
    _count("session_cut_gpu_hours", "GPU-hours of sessions cut short", "down", "GPU-hours", ".1f"),
    _count("resubmits", "sessions resubmitted", ""),
    _count("node_failures", "node failures", "down"),
    _count("human_repairs", "repairs by a person", "down"),
    _count("auto_repairs", "automatic repairs", ""),
    _count("jobs_hit", "jobs hit by a node failure", "down", "jobs"),
    _count("failure_lost_gpu_hours", "GPU-hours lost to node failures", "down", "GPU-hours", ".1f"),
    _count("maintenance_nodes", "nodes taken down for maintenance", "", "count", ".0f"),
    _count("maintenance_free_h_max", "longest time to free a node (h)", "down", "hours", ".2f"),
    _count("maintenance_free_h_mean", "mean time to free a node (h)", "down", "hours", ".2f"),
    _count("maintenance_unfreed", "nodes not free by the end", "down", "count", ".0f"),
    _count("maintenance_evicted", "jobs evicted for maintenance", "down", "jobs"),
    _count(
        "maintenance_lost_gpu_hours",
        "GPU-hours lost to maintenance evictions",
        "down",
        "GPU-hours",
        ".1f",
    ),
    _count(
        "maintenance_idle_gpu_hours",
        "GPU-hours idle on closed nodes (announced, not yet down)",
        "down",
        "GPU-hours",
        ".1f",
    ),
)
BY_NAME = {metric.name: metric for metric in METRICS}
#: Every scalar metric's name, in order.
SCALAR = tuple(metric.name for metric in METRICS)
#: The headline fractions of a run's summary (the pyramid and what it hides).
FRACTIONS = tuple(m.name for m in METRICS if m.kind == "fraction")
#: The counts and amounts of a run's summary.
COUNTS = tuple(m.name for m in METRICS if m.kind == "count" and m.name != "jobs")
#: The metrics of planned maintenance (tables show them only for a run with a plan).
MAINTENANCE = tuple(m.name for m in METRICS if m.name.startswith("maintenance_"))


def shown(summaries: list[dict]) -> tuple[str, ...]:
    """The fractions and counts a table of ``summaries`` shows: maintenance's only if one of
    the runs had a plan."""
    planned = any(s.get("maintenance_nodes") for s in summaries)
    return tuple(name for name in (*FRACTIONS, *COUNTS) if planned or name not in MAINTENANCE)


#: What a sweep's headline table shows, in order (a wait of the debug jobs among them).
SWEEP_HEADLINE = (
    "impact",
    "impact_useful",
    "occupancy",
    "utilization",
    "unallocated_share",
    "wait_p90_s.debug",
    "preemptions",
    "lost_gpu_hours",
)


#: A fleet's per-cluster table, as the CLI and the HTML report show it: (metric, heading,
#: divisor to the unit shown, number format); ``gpus`` is the cluster's size.
CLUSTER_TABLE = (
    ("gpus", "GPUs", 1.0, "d"),
    ("occupancy", "occupancy", 1.0, ".3f"),
    ("utilization", "utilization", 1.0, ".3f"),
    ("impact", "impact", 1.0, ".3f"),
    ("impact_useful", "impact useful", 1.0, ".3f"),
    ("preemptions", "preemptions", 1.0, "d"),
    ("wait_p90_s.all", "wait p90 (h)", 3600.0, ".1f"),
    ("queued_at_end", "queued at end", 1.0, "d"),
)


def label(name: str) -> str:
    """A scalar metric in words (its name, if it is not one)."""
    metric = BY_NAME.get(name)
    return metric.label if metric is not None else name.replace("_", " ")
