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

from .budgets import ROOT, BudgetTree
from .metrics import (
    QUEUE_DELTA,
    SIZE_BUCKETS,
    Window,
    capacity_steps,
    down_overlaps,
    interval_steps,
    lost_to,
    owed_steps,
    step_integral,
    submitted_in,
    wait_stats,
)
from .units import DAY_S, HOUR_S

#: Bucket sizes a person reads at a glance, smallest first.
NICE_BUCKETS_S = (HOUR_S, 2 * HOUR_S, 3 * HOUR_S, 6 * HOUR_S, 12 * HOUR_S, DAY_S, 2 * DAY_S, 7 * DAY_S)
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
    return pd.DataFrame({"t_h": np.tile(edges[:-1] / HOUR_S, len(columns)),
                         key: np.repeat(list(columns), n),
                         values: np.concatenate(list(columns.values())) if columns else np.zeros(0)})


def _kinds(trace: pd.DataFrame) -> list[str]:
    """Kinds of job in the trace, sorted."""
    return sorted(trace["kind"].unique().tolist())


# ----- waits ---------------------------------------------------------------------------------------
def wait_quantiles(jobs: pd.DataFrame, window: Window) -> pd.DataFrame:
    """First-start wait quantiles of jobs submitted in the window, by kind (and "all") and by
    gang-size bucket: by, group, quantile, wait_s, wait_h, n (the numbers of ``summary()``)."""
    by_kind, by_size = wait_stats(jobs, window)
    order = {name: i for i, (_, _, name) in enumerate(SIZE_BUCKETS)}
    groups = [("kind", g, s) for g, s in by_kind.items()] + \
             [("size", g, by_size[g]) for g in sorted(by_size, key=order.__getitem__)]
    rows = [(by, group, q, stats[q], stats["n"]) for by, group, stats in groups for q, _ in QUANTILES]
    out = pd.DataFrame(rows, columns=["by", "group", "quantile", "wait_s", "n"])
    out["wait_s"] = out["wait_s"].astype(float)
    out.insert(4, "wait_h", out["wait_s"] / HOUR_S)
    return out


def wait_cdf(jobs: pd.DataFrame, window: Window, points: int = 60) -> pd.DataFrame:
    """Empirical CDF of first-start waits per kind and "all" at up to ``points`` waits each:
    kind, wait_h, fraction (of the kind's jobs that waited at most wait_h)."""
    inside = submitted_in(jobs, window)
    groups = [("all", inside["wait_s"])] + [(k, g["wait_s"]) for k, g in inside.groupby("kind", sort=True)]
    return pd.concat([_cdf(kind, waits.to_numpy(float), points) for kind, waits in groups], ignore_index=True)


def _cdf(kind: str, waits: np.ndarray, points: int) -> pd.DataFrame:
    """CDF points of one sample, evenly spaced in rank, duplicates of a wait dropped."""
    ranked = np.sort(waits)
    at = np.unique(ranked[np.linspace(0, len(ranked) - 1, max(points, 1)).round().astype(int)]) \
        if len(ranked) else np.zeros(0)
    fraction = np.searchsorted(ranked, at, side="right") / max(len(ranked), 1)
    return pd.DataFrame({"kind": kind, "wait_h": at / HOUR_S, "fraction": fraction})


def wait_by_size(jobs: pd.DataFrame, window: Window) -> pd.DataFrame:
    """First-start waits per exact gang size, jobs submitted in the window: gpus, jobs, p50_h,
    p90_h, mean_h."""
    waits = submitted_in(jobs, window).groupby("gpus")["wait_s"]
    out = pd.DataFrame({"jobs": waits.size(), "p50_h": waits.quantile(0.5), "p90_h": waits.quantile(0.9),
                        "mean_h": waits.mean()})
    out[["p50_h", "p90_h", "mean_h"]] /= HOUR_S
    return out.reset_index().astype({"gpus": int, "jobs": int})


# ----- preemptions ---------------------------------------------------------------------------------
def preemption_costs(att: pd.DataFrame, kind_of: pd.Series) -> pd.DataFrame:
    """One row per preemption: t_s, job_id, kind, lost GPU-seconds (work lost plus the restart
    overhead the next attempt paid, as in ``metrics.lost_to``)."""
    gpus = att["gpus"].to_numpy(float)
    overhead = np.minimum(att["overhead_s"].to_numpy(), (att["end_s"] - att["start_s"]).to_numpy())
    # the overhead of the attempt after a preemption belongs to that preemption
    paid_next = pd.Series(overhead * gpus, index=att.index).groupby(att["job_id"]).shift(-1).fillna(0.0)
    hit = (att["ended_by"] == "preempt").to_numpy()
    return pd.DataFrame({"t_s": att["end_s"].to_numpy()[hit], "job_id": att["job_id"].to_numpy()[hit],
                         "kind": att["job_id"].map(kind_of).to_numpy()[hit],
                         "lost_gpu_s": (att["lost_s"].to_numpy() * gpus + paid_next.to_numpy())[hit]})


def preemption_series(att: pd.DataFrame, trace: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """Preemptions and GPU-hours they cost per time bucket and kind (every kind in the trace,
    zeros included): t_h, kind, preemptions, lost_gpu_hours."""
    cost = preemption_costs(att, trace.set_index("job_id")["kind"])
    kinds = _kinds(trace)
    cell = _bucket(cost["t_s"].to_numpy(), edges) * len(kinds) + \
        pd.Categorical(cost["kind"], categories=kinds).codes
    n = (len(edges) - 1) * len(kinds)
    lost = np.bincount(cell, weights=cost["lost_gpu_s"], minlength=n) / HOUR_S
    return pd.DataFrame({"t_h": np.repeat(edges[:-1] / HOUR_S, len(kinds)),
                         "kind": np.tile(kinds, len(edges) - 1),
                         "preemptions": np.bincount(cell, minlength=n).astype(int), "lost_gpu_hours": lost})


def preemptions_by_kind(att: pd.DataFrame, trace: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Preemptions in the reporting window per kind (every kind in the trace): kind,
    preemptions, jobs_preempted, lost_gpu_hours (their sum is ``summary()["lost_gpu_hours"]``)."""
    kind_of = trace.set_index("job_id")["kind"]
    cost = preemption_costs(att, kind_of)
    cost = cost[(cost["t_s"] >= window.t0) & (cost["t_s"] < window.t1)]
    att_kind = att["job_id"].map(kind_of)
    kinds = _kinds(trace)
    grouped = cost.groupby("kind")
    return pd.DataFrame({
        "kind": kinds,
        "preemptions": grouped.size().reindex(kinds, fill_value=0).to_numpy(int),
        "jobs_preempted": grouped["job_id"].nunique().reindex(kinds, fill_value=0).to_numpy(int),
        "lost_gpu_hours": [lost_to(att[att_kind == k], "preempt", window) / HOUR_S for k in kinds],
    })


# ----- capacity: the pyramid and the shares -------------------------------------------------------
def healthy_per_bucket(events: pd.DataFrame, capacity: int, gpus_per_node: int,
                       edges: np.ndarray) -> np.ndarray:
    """Healthy GPU-seconds in each bucket."""
    t, a = capacity_steps(events, capacity, gpus_per_node)
    return per_bucket(t, a.astype(float), edges)


def held_per_bucket(att: pd.DataFrame, down: pd.DataFrame, group: np.ndarray, n_groups: int,
                    gpus_per_node: int, edges: np.ndarray) -> np.ndarray:
    """GPU-seconds held on healthy nodes per bucket and group of attempts ([B, n_groups]),
    as ``metrics.held_gpu_s`` counts them; attempts in group -1 are left out."""
    pairs = down_overlaps(att, down, gpus_per_node)
    at = pairs["attempt"].to_numpy(int)
    start = np.concatenate([att["start_s"].to_numpy(), pairs["start_s"].to_numpy()])
    end = np.concatenate([att["end_s"].to_numpy(), pairs["end_s"].to_numpy()])
    # time on a node that is down counts against the attempt that sat there
    weight = np.concatenate([att["gpus"].to_numpy(float), -pairs["gpus"].to_numpy()])
    groups = np.concatenate([group, group[at]])
    keep = groups >= 0
    t, held = interval_steps(start[keep], end[keep], weight[keep], groups[keep], n_groups)
    return per_bucket(t, held, edges)


def pyramid_series(events: pd.DataFrame, att: pd.DataFrame, jobs: pd.DataFrame, down: pd.DataFrame,
                   capacity: int, gpus_per_node: int, edges: np.ndarray) -> pd.DataFrame:
    """Ai2's pyramid per time bucket, as fractions defined as in ``summary()``: t_h, metric
    (availability, occupancy, occupancy_funded, occupancy_unallocated, utilization), value."""
    healthy = healthy_per_bucket(events, capacity, gpus_per_node, edges)
    info = jobs.set_index("job_id")
    funded = (att["job_id"].map(info["leaf"]).to_numpy(int) >= 0).astype(int)  # 0 unallocated, 1 funded
    held = held_per_bucket(att, down, funded, 2, gpus_per_node, edges)
    start = att["start_s"].to_numpy() + att["overhead_s"].to_numpy()
    end = np.maximum(start, att["end_s"].to_numpy() - att["lost_s"].to_numpy())
    useful_rate = (att["job_id"].map(info["gpus"]) * att["job_id"].map(info["util"])).to_numpy(float)
    useful = per_bucket(*interval_steps(start, end, useful_rate), edges)[:, 0]
    values = {"availability": healthy / (capacity * np.diff(edges)),
              "occupancy": _share(held.sum(axis=1), healthy), "occupancy_funded": _share(held[:, 1], healthy),
              "occupancy_unallocated": _share(held[:, 0], healthy), "utilization": _share(useful, healthy)}
    return _long(edges, values, "metric", "value")


def share_edges(tree: BudgetTree, horizon_s: float) -> np.ndarray:
    """Buckets for ``share_series``: at most ``MAX_SHARE_ROWS`` rows over every node but the root."""
    most = min(MAX_BUCKETS, MAX_SHARE_ROWS // max(tree.size - 1, 1))
    return bucket_edges(horizon_s, bucket_size(horizon_s, most))


def share_series(events: pd.DataFrame, att: pd.DataFrame, jobs: pd.DataFrame, down: pd.DataFrame,
                 tree: BudgetTree, capacity: int, gpus_per_node: int, horizon_s: float,
                 edges: np.ndarray) -> pd.DataFrame:
    """Per time bucket and budget node below the root (projects and programs): shares of healthy
    capacity delivered to its funded jobs, entitled and owed (demand-capped water-filling):
    t_h, level ("project"|"program"), node, delivered_share, entitled_share, owed_share."""
    healthy = healthy_per_bucket(events, capacity, gpus_per_node, edges)
    leaf = att["job_id"].map(jobs.set_index("job_id")["leaf"]).to_numpy(int)
    delivered = tree.subtree_sum(held_per_bucket(att, down, leaf, tree.size, gpus_per_node, edges))
    times, _, rates = owed_steps(events, jobs, tree, Window(0.0, horizon_s, capacity), gpus_per_node)
    owed = per_bucket(times, rates, edges)
    nodes = np.array([i for i in range(tree.size) if i != ROOT], dtype=int)
    n = len(edges) - 1
    leaves = set(tree.leaves)
    return pd.DataFrame({
        "t_h": np.tile(edges[:-1] / HOUR_S, len(nodes)),
        "level": np.repeat(["project" if i in leaves else "program" for i in nodes], n),
        "node": np.repeat([tree.names[i] for i in nodes], n),
        "delivered_share": _share(delivered, healthy)[:, nodes].T.ravel(),
        "entitled_share": np.repeat(tree.fraction[nodes], n),
        "owed_share": _share(owed, healthy)[:, nodes].T.ravel(),
    })


# ----- queue ---------------------------------------------------------------------------------------


def queue_series(events: pd.DataFrame, trace: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """Time-averaged queued jobs and the GPUs they hold once running, per bucket and kind (every
    kind in the trace): t_h, kind, queued_jobs, queued_gpus."""
    moves = events[events["event"].isin(list(QUEUE_DELTA))]
    sign = moves["event"].map(QUEUE_DELTA).to_numpy(float)
    kinds = _kinds(trace)
    code = pd.Categorical(moves["job_id"].map(trace.set_index("job_id")["kind"]), categories=kinds).codes
    width = np.diff(edges)[:, None]
    out = {}
    for name, weight in (("queued_jobs", sign), ("queued_gpus", sign * moves["gpus"].to_numpy())):
        grid = np.zeros((len(moves) + 1, len(kinds)))
        grid[np.arange(1, len(moves) + 1), code] = weight  # the log is in time order
        t = np.concatenate([[0.0], moves["t_s"].to_numpy()])
        out[name] = (per_bucket(t, np.cumsum(grid, axis=0), edges) / width).T.ravel()
    n = len(edges) - 1
    return pd.DataFrame({"t_h": np.tile(edges[:-1] / HOUR_S, len(kinds)), "kind": np.repeat(kinds, n), **out})


# ----- gantt ---------------------------------------------------------------------------------------
def gantt(att: pd.DataFrame, jobs: pd.DataFrame, t0_s: float, t1_s: float,
          max_rows: int = 3000) -> pd.DataFrame:
    """Attempts per node clipped to [t0_s, t1_s]: node, job_id, kind, funded, gpus_on_node,
    start_h, end_h. Keeps the lowest-numbered nodes whose rows fit in ``max_rows``."""
    live = att[(att["start_s"] < t1_s) & (att["end_s"] > t0_s)]
    per_node = live.assign(node=live["nodes"].str.split(",")).explode("node")
    n_nodes = live["nodes"].str.count(",").to_numpy() + 1
    info = jobs.set_index("job_id")
    rows = pd.DataFrame({
        "node": per_node["node"].astype(int).to_numpy(),
        "job_id": per_node["job_id"].to_numpy(),
        "kind": per_node["job_id"].map(info["kind"]).to_numpy(),
        "funded": (per_node["job_id"].map(info["leaf"]) >= 0).to_numpy(),
        "gpus_on_node": np.repeat(live["gpus"].to_numpy() // n_nodes, n_nodes),
        "start_h": np.maximum(per_node["start_s"].to_numpy(), t0_s) / HOUR_S,
        "end_h": np.minimum(per_node["end_s"].to_numpy(), t1_s) / HOUR_S,
    }).sort_values(["node", "start_h", "job_id"], kind="stable", ignore_index=True)
    counts = rows.groupby("node").size()
    fits = counts.index[counts.cumsum() <= max_rows]
    if len(counts) and not len(fits):
        raise ValueError(f"node {counts.index[0]} alone has {counts.iloc[0]} attempts between "
                         f"{t0_s / HOUR_S:g} h and {t1_s / HOUR_S:g} h, more than max_rows={max_rows}: "
                         "pass a shorter span (t0_h, t1_h) or a larger max_rows")
    return rows[rows["node"].isin(fits)].reset_index(drop=True)

