"""Long-form tables for charts (docs/model.md section 7), pure functions of the event log and inputs.

Each table is small whatever the run size: time series use adaptive buckets of a nice size so a
chart carries hundreds of rows, not a million events. Times people read are in hours (``_h``).
Time series cover the whole simulated span [0, horizon] (the warm-up included, so a chart can
show it); per-job statistics cover jobs submitted in the reporting window, as ``summary()`` does.
Everything is vectorised over the log; loops run over a handful of kinds or quantiles only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..base.gangs import held_of
from ..base.units import DAY_S, HOUR_S
from ..inputs.budgets import ROOT, BudgetTree
from ..sim.events import Ev
from .metrics import (
    QUEUE_DELTA,
    SIZE_BUCKETS,
    Window,
    capacity_steps,
    clipped,
    down_overlaps,
    interval_steps,
    lost_to,
    owed_steps,
    step_integral,
    submitted_in,
    wait_stats,
)

#: Bucket sizes a person reads at a glance, smallest first.
NICE_BUCKETS_S = (
    HOUR_S,
    2 * HOUR_S,
    3 * HOUR_S,
    6 * HOUR_S,
    12 * HOUR_S,
    DAY_S,
    2 * DAY_S,
    7 * DAY_S,
)
MAX_BUCKETS = 200  # per time series
MAX_SHARE_ROWS = 4000  # share_series: nodes x buckets
QUANTILES = (("p50", 50), ("p90", 90), ("p99", 99))
PYRAMID = ("availability", "occupancy", "occupancy_funded", "occupancy_unallocated", "utilization")


# ----- time buckets -------------------------------------------------------------------------------
def bucket_size(horizon_s: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The smallest nice bucket giving at most ``max_buckets`` buckets over the horizon (beyond
    7-day buckets, whole weeks)."""
    for size in NICE_BUCKETS_S:
        if np.ceil(horizon_s / size) <= max_buckets:
            return size
    return 7 * DAY_S * np.ceil(horizon_s / (7 * DAY_S * max(max_buckets, 1)))


def bucket_edges(horizon_s: float, bucket_s: float) -> np.ndarray:
    """Bucket edges from 0 to the horizon; the last bucket may be shorter."""
    return np.append(np.arange(0.0, horizon_s, bucket_s), horizon_s)


def _bucket(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index of the bucket holding each time (the horizon itself goes to the last bucket)."""
    return np.clip(np.searchsorted(edges, times, side="right") - 1, 0, len(edges) - 2)


def per_bucket(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral of a step function over each bucket ([B] or [B, n])."""
    return np.diff(step_integral(times, values, edges), axis=0)


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """``part / whole`` per bucket (broadcast over columns), 0 where ``whole`` is 0."""
    whole = whole.reshape((-1,) + (1,) * (part.ndim - 1))
    return np.divide(part, whole, out=np.zeros(part.shape), where=whole > 0)


def _long(edges: np.ndarray, columns: dict[str, np.ndarray], key: str, values: str) -> pd.DataFrame:
    """Long form of per-bucket arrays: t_h, ``key`` (the dict's keys), ``values``."""
    n = len(edges) - 1
    return pd.DataFrame(
        {
            "t_h": np.tile(edges[:-1] / HOUR_S, len(columns)),
            key: np.repeat(list(columns), n),
            values: np.concatenate(list(columns.values())) if columns else np.zeros(0),
        }
    )


def _kinds(trace: pd.DataFrame) -> list[str]:
    """Kinds of job in the trace, sorted."""
    return sorted(trace["kind"].unique().tolist())


# ----- waits ---------------------------------------------------------------------------------------
def wait_quantiles(jobs: pd.DataFrame, window: Window) -> pd.DataFrame:
    """First-start wait quantiles of jobs submitted in the window, by kind (and "all") and by
    gang-size bucket: by, group, quantile, wait_s, wait_h, n (the numbers of ``summary()``)."""
    by_kind, by_size = wait_stats(jobs, window)
    order = {name: i for i, (_, _, name) in enumerate(SIZE_BUCKETS)}
    groups = [("kind", g, s) for g, s in by_kind.items()] + [
        ("size", g, by_size[g]) for g in sorted(by_size, key=order.__getitem__)
    ]
    rows = [
        (by, group, q, stats[q], stats["n"]) for by, group, stats in groups for q, _ in QUANTILES
    ]
    out = pd.DataFrame(rows, columns=["by", "group", "quantile", "wait_s", "n"])
    out["wait_s"] = out["wait_s"].astype(float)
    out.insert(4, "wait_h", out["wait_s"] / HOUR_S)
    return out


def wait_cdf(jobs: pd.DataFrame, window: Window, points: int = 60) -> pd.DataFrame:
    """Empirical CDF of first-start waits per kind and "all" at up to ``points`` waits each:
    kind, wait_h, fraction (of the kind's jobs that waited at most wait_h)."""
    inside = submitted_in(jobs, window)
    groups = [("all", inside["wait_s"])] + [
        (k, g["wait_s"]) for k, g in inside.groupby("kind", sort=True)
    ]
    return pd.concat(
        [_cdf(kind, waits.to_numpy(float), points) for kind, waits in groups], ignore_index=True
    )


def _cdf(kind: str, waits: np.ndarray, points: int) -> pd.DataFrame:
    """CDF points of one sample, evenly spaced in rank, duplicates of a wait dropped."""
    ranked = np.sort(waits)
    at = (
        np.unique(ranked[np.linspace(0, len(ranked) - 1, max(points, 1)).round().astype(int)])
        if len(ranked)
        else np.zeros(0)
    )
    fraction = np.searchsorted(ranked, at, side="right") / max(len(ranked), 1)
    return pd.DataFrame({"kind": kind, "wait_h": at / HOUR_S, "fraction": fraction})


WORK = ("all", "funded", "unallocated")  # which jobs a per-size table covers


def _work(jobs: pd.DataFrame, work: str) -> pd.DataFrame:
    """Funded jobs, unallocated jobs, or all of them."""
    if work not in WORK:
        raise ValueError(f"work={work!r}: expected one of {', '.join(WORK)}")
    return jobs if work == "all" else jobs[(jobs["leaf"] >= 0) == (work == "funded")]


def wait_by_size(
    jobs: pd.DataFrame, window: Window, gpus_per_node: int, work: str = "all"
) -> pd.DataFrame:
    """First-start waits per exact gang size, jobs submitted in the window (``work``: all, funded
    or unallocated jobs): gpus, bucket (power-of-two size bucket), jobs, p50_h, p90_h, mean_h,
    queued_gpu_hours (held GPUs x total queued time, requeues included)."""
    inside = _work(submitted_in(jobs, window), work)
    held = held_of(inside["gpus"].to_numpy(int), gpus_per_node)
    waits = inside.groupby("gpus")["wait_s"]
    out = pd.DataFrame(
        {
            "jobs": waits.size(),
            "p50_h": waits.quantile(0.5),
            "p90_h": waits.quantile(0.9),
            "mean_h": waits.mean(),
            "queued_gpu_hours": (held * inside["queued_s"]).groupby(inside["gpus"]).sum(),
        }
    )
    out["queued_gpu_hours"] /= HOUR_S
    out[["p50_h", "p90_h", "mean_h"]] /= HOUR_S
    out = out.reset_index().astype({"gpus": int, "jobs": int})
    out.insert(1, "bucket", gang_bucket(out["gpus"]))
    return out


def gang_bucket(gpus: pd.Series) -> pd.Series:
    """Power-of-two size buckets of requested GPUs: 1, 2, 3-4, 5-8, 9-16, ... (``bucket_order``)."""
    hi = 2 ** np.ceil(np.log2(np.maximum(gpus.to_numpy(float), 1))).astype(int)
    lo = hi // 2 + 1
    labels = np.where(lo < hi, [f"{a}-{b}" for a, b in zip(lo, hi)], hi.astype(str))
    return pd.Series(labels, index=gpus.index)


def bucket_order(labels: pd.Series) -> list[str]:
    """Distinct ``gang_bucket`` labels, smallest first."""
    return sorted(set(labels), key=lambda label: int(label.split("-")[-1]))


# ----- preemptions ---------------------------------------------------------------------------------
def preemption_costs(att: pd.DataFrame, kind_of: pd.Series) -> pd.DataFrame:
    """One row per preemption: t_s (its ``preempt`` row's, as the summary counts it), job_id,
    kind, lost GPU-seconds (work lost plus the restart overhead the next attempt paid, as in
    ``metrics.lost_to``)."""
    gpus = att["gpus"].to_numpy(float)
    overhead = np.minimum(att["overhead_s"].to_numpy(), (att["end_s"] - att["start_s"]).to_numpy())
    # the overhead of the attempt after a preemption belongs to that preemption
    paid_next = (
        pd.Series(overhead * gpus, index=att.index).groupby(att["job_id"]).shift(-1).fillna(0.0)
    )
    hit = (att["ended_by"] == Ev.PREEMPT).to_numpy()
    return pd.DataFrame(
        {
            "t_s": att["stopped_s"].to_numpy()[hit],
            "job_id": att["job_id"].to_numpy()[hit],
            "kind": att["job_id"].map(kind_of).to_numpy()[hit],
            "lost_gpu_s": (att["lost_s"].to_numpy() * gpus + paid_next.to_numpy())[hit],
        }
    )


def preemption_series(att: pd.DataFrame, trace: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """Preemptions and GPU-hours they cost per time bucket and kind (every kind in the trace,
    zeros included): t_h, kind, preemptions, lost_gpu_hours."""
    cost = preemption_costs(att, trace.set_index("job_id")["kind"])
    kinds = _kinds(trace)
    cell = (
        _bucket(cost["t_s"].to_numpy(), edges) * len(kinds)
        + pd.Categorical(cost["kind"], categories=kinds).codes
    )
    n = (len(edges) - 1) * len(kinds)
    lost = np.bincount(cell, weights=cost["lost_gpu_s"], minlength=n) / HOUR_S
    return pd.DataFrame(
        {
            "t_h": np.repeat(edges[:-1] / HOUR_S, len(kinds)),
            "kind": np.tile(kinds, len(edges) - 1),
            "preemptions": np.bincount(cell, minlength=n).astype(int),
            "lost_gpu_hours": lost,
        }
    )


def preemptions_by_kind(att: pd.DataFrame, trace: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Preemptions in the reporting window per kind (every kind in the trace): kind,
    preemptions, jobs_preempted, lost_gpu_hours (their sum is ``summary()["lost_gpu_hours"]``)."""
    kind_of = trace.set_index("job_id")["kind"]
    cost = preemption_costs(att, kind_of)
    cost = cost[(cost["t_s"] >= window.t0) & (cost["t_s"] < window.t1)]
    att_kind = att["job_id"].map(kind_of)
    kinds = _kinds(trace)
    grouped = cost.groupby("kind")
    return pd.DataFrame(
        {
            "kind": kinds,
            "preemptions": grouped.size().reindex(kinds, fill_value=0).to_numpy(int),
            "jobs_preempted": grouped["job_id"]
            .nunique()
            .reindex(kinds, fill_value=0)
            .to_numpy(int),
            "lost_gpu_hours": [
                lost_to(att[att_kind == k], Ev.PREEMPT, window) / HOUR_S for k in kinds
            ],
        }
    )


# ----- capacity: the pyramid and the shares -------------------------------------------------------
def healthy_per_bucket(
    events: pd.DataFrame, capacity: int, gpus_per_node: int, edges: np.ndarray
) -> np.ndarray:
    """Healthy GPU-seconds in each bucket."""
    t, a = capacity_steps(events, capacity, gpus_per_node)
    return per_bucket(t, a.astype(float), edges)


def held_per_bucket(
    att: pd.DataFrame,
    down: pd.DataFrame,
    group: np.ndarray,
    n_groups: int,
    gpus_per_node: int,
    edges: np.ndarray,
) -> np.ndarray:
    """GPU-seconds held on healthy nodes per bucket and group of attempts ([B, n_groups]),
    as ``metrics.held_gpu_s`` counts them; attempts in group -1 are left out."""
    return per_bucket(*held_steps(att, down, group, n_groups, gpus_per_node), edges)


def held_steps(
    att: pd.DataFrame,
    down: pd.DataFrame,
    group: np.ndarray,
    n_groups: int,
    gpus_per_node: int,
    until_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """GPUs held on healthy nodes per group of attempts (-1: left out), as a step function:
    times [T] and values [T, n_groups]; each attempt from its start to its end, or to
    ``until_s`` if sooner. (The log's ``gpus`` are the GPUs a job holds.)"""
    end = att["end_s"].to_numpy(float)
    end = (
        end
        if until_s is None
        else np.maximum(np.minimum(until_s, end), att["start_s"].to_numpy(float))
    )
    pairs = down_overlaps(att, down, gpus_per_node)
    at = pairs["attempt"].to_numpy(int)
    # time on a node that is down counts against the attempt that sat there (up to its end here)
    down_end = np.minimum(pairs["end_s"].to_numpy(), end[at])
    start = np.concatenate(
        [att["start_s"].to_numpy(), np.minimum(pairs["start_s"].to_numpy(), down_end)]
    )
    weight = np.concatenate([att["gpus"].to_numpy(float), -pairs["gpus"].to_numpy()])
    groups = np.concatenate([group, group[at]])
    keep = groups >= 0
    return interval_steps(
        start[keep], np.concatenate([end, down_end])[keep], weight[keep], groups[keep], n_groups
    )


def attempt_leaves(att: pd.DataFrame, jobs: pd.DataFrame) -> np.ndarray:
    """The budget leaf each attempt is charged to (-1: unallocated)."""
    return att["job_id"].map(jobs.set_index("job_id")["leaf"]).to_numpy(int)


def pyramid_series(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    capacity: int,
    gpus_per_node: int,
    edges: np.ndarray,
) -> pd.DataFrame:
    """Ai2's pyramid per time bucket, as fractions defined as in ``summary()``: t_h, metric
    (availability, occupancy, occupancy_funded, occupancy_unallocated, utilization), value."""
    healthy = healthy_per_bucket(events, capacity, gpus_per_node, edges)
    info = jobs.set_index("job_id")
    funded = (att["job_id"].map(info["leaf"]).to_numpy(int) >= 0).astype(
        int
    )  # 0 unallocated, 1 funded
    held = held_per_bucket(att, down, funded, 2, gpus_per_node, edges)
    start = att["start_s"].to_numpy() + att["overhead_s"].to_numpy()
    end = np.maximum(start, att["end_s"].to_numpy() - att["lost_s"].to_numpy())
    useful_rate = (att["job_id"].map(info["gpus"]) * att["job_id"].map(info["util"])).to_numpy(
        float
    )
    useful = per_bucket(*interval_steps(start, end, useful_rate), edges)[:, 0]
    values = {
        "availability": healthy / (capacity * np.diff(edges)),
        "occupancy": _share(held.sum(axis=1), healthy),
        "occupancy_funded": _share(held[:, 1], healthy),
        "occupancy_unallocated": _share(held[:, 0], healthy),
        "utilization": _share(useful, healthy),
    }
    return _long(edges, values, "metric", "value")


def share_edges(tree: BudgetTree, horizon_s: float) -> np.ndarray:
    """Buckets for ``share_series``: at most ``MAX_SHARE_ROWS`` rows over every node but the root."""
    most = min(MAX_BUCKETS, MAX_SHARE_ROWS // max(tree.size - 1, 1))
    return bucket_edges(horizon_s, bucket_size(horizon_s, most))


def share_series(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    tree: BudgetTree,
    capacity: int,
    gpus_per_node: int,
    horizon_s: float,
    edges: np.ndarray,
) -> pd.DataFrame:
    """Per time bucket and budget node below the root (projects and programs): shares of healthy
    capacity delivered to its funded jobs, entitled and owed (demand-capped water-filling):
    t_h, level ("project"|"program"), node, delivered_share, entitled_share, owed_share."""
    healthy = healthy_per_bucket(events, capacity, gpus_per_node, edges)
    leaf = attempt_leaves(att, jobs)
    delivered = tree.subtree_sum(held_per_bucket(att, down, leaf, tree.size, gpus_per_node, edges))
    times, _, rates = owed_steps(
        events, jobs, tree, Window(0.0, horizon_s, capacity), gpus_per_node
    )
    owed = per_bucket(times, rates, edges)
    nodes = np.array([i for i in range(tree.size) if i != ROOT], dtype=int)
    n = len(edges) - 1
    leaves = set(tree.leaves)
    return pd.DataFrame(
        {
            "t_h": np.tile(edges[:-1] / HOUR_S, len(nodes)),
            "level": np.repeat(["project" if i in leaves else "program" for i in nodes], n),
            "node": np.repeat([tree.names[i] for i in nodes], n),
            "delivered_share": _share(delivered, healthy)[:, nodes].T.ravel(),
            "entitled_share": np.repeat(tree.fraction[nodes], n),
            "owed_share": _share(owed, healthy)[:, nodes].T.ravel(),
        }
    )


# ----- queue ---------------------------------------------------------------------------------------


def queue_series(events: pd.DataFrame, trace: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """Time-averaged queued jobs and the GPUs they hold once running, per bucket and kind (every
    kind in the trace): t_h, kind, queued_jobs, queued_gpus."""
    moves = events[events["event"].isin(list(QUEUE_DELTA))]
    sign = moves["event"].map(QUEUE_DELTA).to_numpy(float)
    kinds = _kinds(trace)
    code = pd.Categorical(
        moves["job_id"].map(trace.set_index("job_id")["kind"]), categories=kinds
    ).codes
    width = np.diff(edges)[:, None]
    out = {}
    for name, weight in (("queued_jobs", sign), ("queued_gpus", sign * moves["gpus"].to_numpy())):
        grid = np.zeros((len(moves) + 1, len(kinds)))
        grid[np.arange(1, len(moves) + 1), code] = weight  # the log is in time order
        t = np.concatenate([[0.0], moves["t_s"].to_numpy()])
        out[name] = (per_bucket(t, np.cumsum(grid, axis=0), edges) / width).T.ravel()
    n = len(edges) - 1
    return pd.DataFrame(
        {"t_h": np.tile(edges[:-1] / HOUR_S, len(kinds)), "kind": np.repeat(kinds, n), **out}
    )


# ----- fleets --------------------------------------------------------------------------------------
#: The columns of ``cluster_series`` after t_h and cluster.
CLUSTER_SERIES = (
    "gpus",
    "healthy_gpus",
    "running_gpus",
    "occupancy",
    "queued_jobs",
    "queued_gpus",
)


def cluster_series(pyramid: pd.DataFrame, queue: pd.DataFrame, gpus: int) -> pd.DataFrame:
    """One cluster's (or the organisation's) numbers per time bucket, from its ``pyramid_series``
    and ``queue_series`` (on the same buckets): t_h, gpus (its GPUs), healthy_gpus and
    running_gpus (time-averaged: healthy GPUs, and GPUs held on healthy nodes), occupancy (held
    over healthy GPU-time, as in ``summary()``), queued_jobs and queued_gpus (time-averaged, every
    kind of job)."""
    wide = pyramid.pivot(index="t_h", columns="metric", values="value").sort_index()
    queued = (
        queue.groupby("t_h")[["queued_jobs", "queued_gpus"]]
        .sum()
        .reindex(wide.index, fill_value=0.0)  # a cluster without jobs has no kinds
    )
    healthy = wide["availability"].to_numpy(float) * gpus
    occupancy = wide["occupancy"].to_numpy(float)
    return pd.DataFrame(
        {
            "t_h": wide.index.to_numpy(float),
            "gpus": int(gpus),
            "healthy_gpus": healthy,
            "running_gpus": occupancy * healthy,
            "occupancy": occupancy,
            "queued_jobs": queued["queued_jobs"].to_numpy(float),
            "queued_gpus": queued["queued_gpus"].to_numpy(float),
        }
    )


def stack_clusters(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-cluster tables as one, in the dict's order, each row tagged by a first column
    ``cluster`` (its key)."""
    out = pd.concat(
        [frame.assign(cluster=name) for name, frame in frames.items()], ignore_index=True
    )
    return out[["cluster", *(c for c in out.columns if c != "cluster")]]


# ----- gantt ---------------------------------------------------------------------------------------
def gantt(
    att: pd.DataFrame, jobs: pd.DataFrame, t0_s: float, t1_s: float, max_rows: int = 3000
) -> pd.DataFrame:
    """Attempts per node clipped to [t0_s, t1_s]: node, job_id, kind, funded, gpus_on_node,
    start_h, end_h. Keeps the lowest-numbered nodes whose rows fit in ``max_rows``."""
    live = att[(att["start_s"] < t1_s) & (att["end_s"] > t0_s)]
    per_node = live.assign(node=live["nodes"].str.split(",")).explode("node")
    n_nodes = live["nodes"].str.count(",").to_numpy() + 1
    info = jobs.set_index("job_id")
    rows = pd.DataFrame(
        {
            "node": per_node["node"].astype(int).to_numpy(),
            "job_id": per_node["job_id"].to_numpy(),
            "kind": per_node["job_id"].map(info["kind"]).to_numpy(),
            "funded": (per_node["job_id"].map(info["leaf"]) >= 0).to_numpy(),
            "gpus_on_node": np.repeat(live["gpus"].to_numpy() // n_nodes, n_nodes),
            "start_h": np.maximum(per_node["start_s"].to_numpy(), t0_s) / HOUR_S,
            "end_h": np.minimum(per_node["end_s"].to_numpy(), t1_s) / HOUR_S,
        }
    ).sort_values(["node", "start_h", "job_id"], kind="stable", ignore_index=True)
    counts = rows.groupby("node").size()
    fits = counts.index[counts.cumsum() <= max_rows]
    if len(counts) and not len(fits):
        raise ValueError(
            f"node {counts.index[0]} alone has {counts.iloc[0]} attempts between "
            f"{t0_s / HOUR_S:g} h and {t1_s / HOUR_S:g} h, more than max_rows={max_rows}: "
            "pass a shorter span (t0_h, t1_h) or a larger max_rows"
        )
    return rows[rows["node"].isin(fits)].reset_index(drop=True)


# ----- fragmentation -------------------------------------------------------------------------------
def _attempt_nodes(nodes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each attempt's nodes in order, flattened, and how many each attempt has. Only gangs'
    lists are split: splitting every string took most of the time at 1024 GPUs."""
    gang = nodes.str.contains(",", regex=False).to_numpy(bool)
    n_on = np.ones(len(nodes), int)
    split = nodes[gang].str.split(",")
    n_on[gang] = split.str.len().to_numpy(int)
    out = np.repeat(np.zeros(len(nodes), int), n_on)
    starts = np.cumsum(n_on) - n_on
    out[starts[~gang]] = nodes[~gang].astype(int).to_numpy()
    if gang.any():
        out[np.repeat(starts[gang], n_on[gang]) + _ranks(n_on[gang])] = (
            split.explode().astype(int).to_numpy()
        )
    return out, n_on


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0..k-1 for each count k, concatenated."""
    return np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)


def free_steps(
    att: pd.DataFrame, down: pd.DataFrame, n_nodes: int, gpus_per_node: int
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes with at least k free GPUs, k = 1..gpus_per_node, replayed from the attempts and the
    failures: change times [T] (from 0) and counts [T, gpus_per_node]. A node that is down has
    no free GPUs (jobs may still sit there until a person drains it)."""
    on, n_on = _attempt_nodes(att["nodes"])
    node = np.concatenate([on, down["node"].to_numpy(int)])
    weight = np.concatenate(
        [np.repeat(att["gpus"].to_numpy(int) // n_on, n_on), np.full(len(down), gpus_per_node)]
    )
    start = np.concatenate(
        [np.repeat(att["start_s"].to_numpy(float), n_on), down["down_s"].to_numpy(float)]
    )
    end = np.concatenate(
        [np.repeat(att["end_s"].to_numpy(float), n_on), down["up_s"].to_numpy(float)]
    )
    times, nodes = np.concatenate([start, end]), np.concatenate([node, node])
    order = np.lexsort((times, nodes))  # by node, then time
    times, nodes = times[order], nodes[order]
    used = np.concatenate([weight, -weight])[order]
    used = pd.Series(used).groupby(nodes).cumsum().to_numpy()
    free = np.clip(gpus_per_node - used, 0, gpus_per_node)
    first = np.r_[True, nodes[1:] != nodes[:-1]]
    before = np.where(first, gpus_per_node, np.roll(free, 1))
    levels = np.arange(1, gpus_per_node + 1)
    delta = (free[:, None] >= levels).astype(np.int32) - (before[:, None] >= levels)
    by_time = np.argsort(times, kind="stable")
    counts = n_nodes + np.cumsum(
        np.vstack([np.zeros((1, gpus_per_node), np.int32), delta[by_time]]), axis=0
    )
    return np.concatenate([[0.0], times[by_time]]), counts


def free_block_series(
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    n_nodes: int,
    gpus_per_node: int,
    edges: np.ndarray,
) -> pd.DataFrame:
    """The largest block of GPUs a single job could get (whole nodes x GPUs per node, or the most
    on one node), time-averaged per bucket, counting free GPUs only, and free GPUs or GPUs lent
    to unallocated work (a funded job may preempt it): t_h, free_gpus, largest_free_gpus,
    open_gpus, largest_open_gpus."""
    funded = attempt_leaves(att, jobs) >= 0
    columns = []
    for held in (att, att[funded]):
        times, counts = free_steps(held, down, n_nodes, gpus_per_node)
        whole = counts[:, -1] * gpus_per_node
        largest = np.maximum(whole, (counts > 0).sum(axis=1))
        columns += list(
            (
                per_bucket(times, np.column_stack([counts.sum(axis=1), largest]), edges)
                / np.diff(edges)[:, None]
            ).T
        )
    return pd.DataFrame(
        {
            "t_h": edges[:-1] / HOUR_S,
            **dict(
                zip(("free_gpus", "largest_free_gpus", "open_gpus", "largest_open_gpus"), columns)
            ),
        }
    )


def gang_jobs(jobs: pd.DataFrame, gpus_per_node: int, min_gpus: int | None = None) -> pd.DataFrame:
    """Funded gangs: multi-node jobs, or jobs of at least ``min_gpus`` GPUs when given."""
    least = gpus_per_node + 1 if min_gpus is None else min_gpus
    return jobs[(jobs["leaf"] >= 0) & (jobs["gpus"] >= least)]


def _queued_steps(
    events: pd.DataFrame, group: pd.Series, weight: pd.Series, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of ``weight`` over queued jobs per group (``group``/``weight`` indexed by job_id; jobs
    not in it are left out), as a step function: times [T], values [T, n_groups]."""
    moves = events[events["event"].isin(list(QUEUE_DELTA)) & events["job_id"].isin(group.index)]
    sign = moves["event"].map(QUEUE_DELTA).to_numpy(float)
    grid = np.zeros((len(moves) + 1, n_groups))
    grid[np.arange(1, len(moves) + 1), moves["job_id"].map(group).to_numpy(int)] = sign * moves[
        "job_id"
    ].map(weight).to_numpy(float)  # the log is in time order
    return np.concatenate([[0.0], moves["t_s"].to_numpy(float)]), np.cumsum(grid, axis=0)


def _lent_steps(
    att: pd.DataFrame, down: pd.DataFrame, jobs: pd.DataFrame, gpus_per_node: int
) -> tuple[np.ndarray, np.ndarray]:
    """GPUs held by unallocated work on healthy nodes, as a step function: times [T], values [T]."""
    unallocated = np.where(attempt_leaves(att, jobs) < 0, 0, -1)
    t, held = held_steps(att, down, unallocated, 1, gpus_per_node)
    return t, held[:, 0]


def _at(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """A step function's values at the times ``at``."""
    return values[np.searchsorted(times, at, side="right") - 1]


def _while_waiting(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    n_nodes: int,
    gpus_per_node: int,
    gangs: pd.DataFrame,
    labels: list[str],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Step functions on one time grid [T]: per gang bucket (columns in ``labels`` order, then
    "all") the gangs queued, their held GPUs, whether any is queued, and the idle and lent GPUs
    while any is; and (one column) the held GPUs of the smallest gang queued, 0 while none is."""
    code = pd.Series(
        pd.Categorical(gang_bucket(gangs["gpus"]), categories=labels).codes,
        index=gangs["job_id"].to_numpy(),
    )
    held = pd.Series(held_of(gangs["gpus"].to_numpy(int), gpus_per_node), index=code.index)
    t_q, n_q = _queued_steps(events, code, pd.Series(1.0, index=code.index), len(labels))
    _, g_q = _queued_steps(events, code, held, len(labels))
    sizes = np.unique(held.to_numpy())
    by_size = pd.Series(np.searchsorted(sizes, held.to_numpy()), index=held.index)
    _, s_q = _queued_steps(events, by_size, pd.Series(1.0, index=held.index), len(sizes))
    t_f, counts = free_steps(att, down, n_nodes, gpus_per_node)
    t_l, lent = _lent_steps(att, down, jobs, gpus_per_node)
    times = np.union1d(np.union1d(t_q, t_f), t_l)
    queued = _at(t_q, np.column_stack([n_q, n_q.sum(axis=1)]), times)
    waiting = (queued > 0.5).astype(float)  # counts are whole numbers
    smallest = np.where(s_q > 0.5, sizes, np.inf).min(axis=1, initial=np.inf)
    return times, {
        "gangs": queued,
        "queued_gpus": _at(t_q, np.column_stack([g_q, g_q.sum(axis=1)]), times),
        "idle_gpus": waiting * _at(t_f, counts.sum(axis=1), times)[:, None],
        "lent_gpus": waiting * _at(t_l, lent, times)[:, None],
        "waiting": waiting,
        "smallest": _at(t_q, np.where(np.isfinite(smallest), smallest, 0.0), times)[:, None],
    }


def gang_idle(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    n_nodes: int,
    gpus_per_node: int,
    window: Window,
    min_gpus: int | None = None,
) -> pd.DataFrame:
    """Per size bucket of funded gangs (``gang_jobs``) and "all": while at least one of them was
    queued, inside the window, the GPU-hours left idle and lent to unallocated work: bucket,
    gangs (submitted in the window), waiting_h (hours with one queued), queued_gpu_hours (the
    GPUs they would hold), idle_gpu_hours, lent_gpu_hours."""
    gangs = gang_jobs(jobs, gpus_per_node, min_gpus)
    labels = bucket_order(gang_bucket(gangs["gpus"]))
    times, steps = _while_waiting(events, att, jobs, down, n_nodes, gpus_per_node, gangs, labels)
    edges = np.array([window.t0, window.t1])
    total = {
        name: np.diff(step_integral(times, values, edges), axis=0)[0] / HOUR_S
        for name, values in steps.items()
    }
    inside = gang_bucket(submitted_in(gangs, window)["gpus"]).value_counts()
    return pd.DataFrame(
        {
            "bucket": [*labels, "all"],
            "gangs": [int(inside.get(b, 0)) for b in labels] + [int(inside.sum())],
            "waiting_h": total["waiting"],
            "queued_gpu_hours": total["queued_gpus"],
            "idle_gpu_hours": total["idle_gpus"],
            "lent_gpu_hours": total["lent_gpus"],
        }
    )


def gang_wait_series(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    n_nodes: int,
    gpus_per_node: int,
    edges: np.ndarray,
    min_gpus: int | None = None,
) -> pd.DataFrame:
    """Per time bucket, for funded gangs (``gang_jobs``) of any size: gangs_waiting (time-averaged
    count queued), queued_gpus (time-averaged GPUs they would hold), smallest_waiting_gpus (held
    GPUs of the smallest one queued, averaged over the time one was; NaN if none was), and the
    GPU-hours left idle and lent to unallocated work while at least one waited: t_h,
    gangs_waiting, queued_gpus, smallest_waiting_gpus, idle_gpu_hours, lent_gpu_hours."""
    gangs = gang_jobs(jobs, gpus_per_node, min_gpus)
    labels = bucket_order(gang_bucket(gangs["gpus"]))
    times, steps = _while_waiting(events, att, jobs, down, n_nodes, gpus_per_node, gangs, labels)
    width = np.diff(edges)
    per = {name: per_bucket(times, values[:, -1], edges) for name, values in steps.items()}
    smallest = np.divide(
        per["smallest"], per["waiting"], out=np.full(len(width), np.nan), where=per["waiting"] > 0
    )
    return pd.DataFrame(
        {
            "t_h": edges[:-1] / HOUR_S,
            "gangs_waiting": per["gangs"] / width,
            "queued_gpus": per["queued_gpus"] / width,
            "smallest_waiting_gpus": smallest,
            "idle_gpu_hours": per["idle_gpus"] / HOUR_S,
            "lent_gpu_hours": per["lent_gpus"] / HOUR_S,
        }
    )


# ----- where the owed GPUs were -------------------------------------------------------------------
#: What held the GPUs a short project was owed, in the order ``owed_split`` charges them.
OWED_HOLDERS = (
    "projects above their owed rate, under contract",
    "projects above their owed rate, not under contract",
    "unallocated work",
    "idle",
)


def owed_split(
    events: pd.DataFrame,
    att: pd.DataFrame,
    jobs: pd.DataFrame,
    down: pd.DataFrame,
    tree: BudgetTree,
    window: Window,
    gpus_per_node: int,
    protected_until_s: np.ndarray,
) -> pd.DataFrame:
    """Why impact is below 1, instant by instant: the owed GPUs that projects short of their owed
    rate did not hold, in the window, by what held them then (``OWED_HOLDERS``): first projects
    above their owed rate (their surplus split in proportion between their attempts still under
    contract, per ``protected_until_s`` (one per attempt), and the others), then unallocated
    work, then nothing. GPUs count as held on healthy nodes only, as delivered GPU-hours do.
    held_by, gpu_hours, share (of the window's healthy GPU-hours), with a last row "all".

    Over the window a project's surplus at one time makes up for its shortfall at another, so
    "all" is at least the shortfall behind ``impact`` (owed minus delivered up to owed)."""
    if len(protected_until_s) != len(att):
        raise ValueError(f"{len(protected_until_s)} contract ends for {len(att)} attempts")
    times, healthy, rates = owed_steps(events, jobs, tree, window, gpus_per_node)
    leaf = attempt_leaves(att, jobs)
    funded = np.where(leaf >= 0, leaf, -1)
    steps = {
        "have": held_steps(att, down, funded, tree.size, gpus_per_node),
        "contract": held_steps(att, down, funded, tree.size, gpus_per_node, protected_until_s),
        "unallocated": held_steps(att, down, np.where(leaf < 0, 0, -1), 1, gpus_per_node),
    }
    grid = np.unique(np.concatenate([times, *(t for t, _ in steps.values())]))
    leaves = list(tree.leaves)
    owed = _at(times, rates, grid)[:, leaves]
    have, contract = (_at(*steps[k], grid)[:, leaves] for k in ("have", "contract"))
    unallocated, capacity = _at(*steps["unallocated"], grid)[:, 0], _at(times, healthy, grid)
    short = np.maximum(owed - have, 0).sum(axis=1)
    surplus = np.maximum(have - owed, 0)
    total = surplus.sum(axis=1)
    over = np.minimum(total, short)  # what projects above their owed rate held of it
    protected = np.divide(contract, have, out=np.zeros_like(have), where=have > 0)
    under = over * np.divide(
        (surplus * protected).sum(axis=1), total, out=np.zeros_like(total), where=total > 0
    )
    lent = np.minimum(short - over, unallocated)
    idle = (
        short - over - lent
    )  # at most the idle GPUs: the short projects' owed fits in the healthy ones
    width = clipped(grid, np.append(grid[1:], np.inf), window)
    parts = np.array([under, over - under, lent, idle, short]) @ width
    healthy_s = float(capacity @ width)
    return pd.DataFrame(
        {
            "held_by": [*OWED_HOLDERS, "all"],
            "gpu_hours": parts / HOUR_S,
            "share": parts / healthy_s if healthy_s > 0 else np.nan,
        }
    )
