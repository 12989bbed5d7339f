"""Metrics derived from the event log and the inputs (docs/model.md section 7).

Everything here is vectorised over the log; nothing is counted inside the simulator.
Time-integrals are clipped to the reporting window [t0, t1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .budgets import ROOT, BudgetTree
from .cluster import held_gpus

END_EVENTS = ("preempt", "finish", "fail")
QUEUE_DELTA = {"submit": 1, "requeue": 1, "resubmit": 1, "start": -1, "withdraw": -1}  # how events move the queue
#: The backlog "grows through the run" when the queue is longer at the end of each quarter of the
#: window than at the end of the one before, and at the end at least this many times (and this
#: many jobs) longer than at the start: waits then grow with the run's length and mean little.
BACKLOG_GROWTH, BACKLOG_MIN_JOBS = 2.0, 20
TERMINAL = {"finish": "finished", "withdraw": "withdrawn", "kill": "killed"}  # last event -> state
SESSION = "interactive"  # the kind whose preemption may end it (a kill)
SIZE_BUCKETS = ((1, 1, "1"), (2, 8, "2-8"), (9, 64, "9-64"), (65, 1 << 30, "65+"))


@dataclass(frozen=True)
class Window:
    """The reporting window and the cluster it is measured on."""

    t0: float
    t1: float
    capacity: int

    @property
    def span_s(self) -> float:
        """Length of the window."""
        return self.t1 - self.t0


def attempts(events: pd.DataFrame, horizon_s: float) -> pd.DataFrame:
    """One row per run attempt: job, GPUs, nodes, start, end (horizon if still running), how it
    ended, the restart overhead it paid (and after what) and the progress it lost.

    A preempted attempt holds its GPUs until their release (the ``requeue`` or ``kill`` after its
    grace period), and its grace period counts as lost: it holds GPUs and makes no progress."""
    starts = events[events["event"] == "start"]
    ends = released(events, horizon_s)
    left = pd.DataFrame({"job_id": starts["job_id"].to_numpy(), "n": starts.groupby("job_id").cumcount().to_numpy(),
                         "gpus": starts["gpus"].to_numpy(), "nodes": starts["nodes"].to_numpy(),
                         "start_s": starts["t_s"].to_numpy(), "overhead_s": starts["overhead_s"].to_numpy()})
    right = pd.DataFrame({"job_id": ends["job_id"].to_numpy(), "n": ends.groupby("job_id").cumcount().to_numpy(),
                          "end_s": ends["t_s"].to_numpy(), "ended_by": ends["event"].to_numpy(),
                          "lost_s": ends["lost_s"].to_numpy()})
    out = left.merge(right, on=["job_id", "n"], how="left")
    out["end_s"] = out["end_s"].fillna(horizon_s)
    out["ended_by"] = out["ended_by"].fillna("running")
    out["lost_s"] = out["lost_s"].fillna(0.0)
    out["restart_after"] = out.groupby("job_id")["ended_by"].shift(1).fillna("")  # what the overhead pays for
    return out


def released(events: pd.DataFrame, horizon_s: float) -> pd.DataFrame:
    """The rows that end attempts, a preemption's ``t_s`` moved to its release (the job's next
    row, a ``requeue`` or ``kill``; the horizon if still in grace) and its grace added to ``lost_s``."""
    nxt = events.groupby("job_id")["t_s"].shift(-1)
    nxt_event = events.groupby("job_id")["event"].shift(-1)
    mask = events["event"].isin(END_EVENTS)
    ends = events[mask]
    preempt = (ends["event"] == "preempt").to_numpy()
    if not preempt.any():
        return ends
    release = np.where(nxt_event[mask].isin(["requeue", "kill"]), nxt[mask], horizon_s)
    end_s = np.where(preempt, release, ends["t_s"].to_numpy())
    return ends.assign(t_s=end_s, lost_s=ends["lost_s"].to_numpy() + (end_s - ends["t_s"].to_numpy()))


def job_table(events: pd.DataFrame, trace: pd.DataFrame, horizon_s: float,
              att: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-job outcome: first start, end, state, first-start wait, total queued time, attempts,
    preemptions, failures, kills, resubmissions, lost and overhead seconds. Jobs never started
    count their wait so far; a killed session's time away before its resubmission is not queued.
    ``att`` is ``attempts(events, horizon_s)`` when the caller has it already."""
    submitted = trace[trace["submit_s"] < horizon_s]
    att = (attempts(events, horizon_s) if att is None else att).assign()
    att["ran_s"] = att["end_s"] - att["start_s"]
    per_attempt = att.groupby("job_id").agg(
        first_start_s=("start_s", "min"), attempts=("start_s", "size"), ran_s=("ran_s", "sum"),
        lost_s=("lost_s", "sum"), overhead_s=("overhead_s", "sum"))
    counts = events.pivot_table(index="job_id", columns="event", values="t_s", aggfunc="size", fill_value=0)
    marks = events[events["event"].isin([*TERMINAL, "resubmit"])].drop_duplicates("job_id", keep="last")
    last = marks[marks["event"] != "resubmit"].set_index("job_id")  # a resubmission reopens a job
    out = submitted[["job_id", "submit_s", "user", "project", "kind", "gpus", "util"]].set_index("job_id")
    out = out.join(per_attempt)
    out["attempts"] = out["attempts"].fillna(0).astype(int)
    for col in ("ran_s", "lost_s", "overhead_s"):
        out[col] = out[col].fillna(0.0)
    for ev in ("preempt", "fail", "kill", "resubmit"):
        out[f"{ev}s"] = counts[ev].reindex(out.index).fillna(0).astype(int) if ev in counts else 0
    out["end_s"] = last["t_s"].reindex(out.index)
    out["state"] = last["event"].reindex(out.index).map(TERMINAL)
    running = out["state"].isna() & (out["attempts"] > 0) & _running_at_end(att, out.index)
    out["state"] = out["state"].fillna(pd.Series(np.where(running, "running", "queued"), index=out.index))
    stop = out["end_s"].fillna(horizon_s)
    out["wait_s"] = out["first_start_s"].fillna(stop) - out["submit_s"]
    out["queued_s"] = stop - out["submit_s"] - out["ran_s"] - _away_s(events).reindex(out.index).fillna(0.0)
    return out.reset_index()


def _away_s(events: pd.DataFrame) -> pd.Series:
    """Per job: seconds between each kill and the resubmission that followed it."""
    rows = events[events["event"].isin(["kill", "resubmit"])]
    back = (rows["event"] == "resubmit").to_numpy()
    gap = rows["t_s"] - rows.groupby("job_id")["t_s"].shift(1)
    return gap[back].groupby(rows["job_id"][back]).sum()


def _running_at_end(att: pd.DataFrame, index: pd.Index) -> pd.Series:
    open_attempt = att.groupby("job_id")["ended_by"].last() == "running"
    return open_attempt.reindex(index).fillna(False).astype(bool)


def clipped(start: np.ndarray, end: np.ndarray, window: Window) -> np.ndarray:
    """Seconds of each [start, end) interval inside the window."""
    return np.clip(np.minimum(end, window.t1) - np.maximum(start, window.t0), 0.0, None)


def healthy_gpu_s(events: pd.DataFrame, window: Window, gpus_per_node: int) -> float:
    """Integral of healthy capacity A(t) over the window (nodes down are not available)."""
    t, a = capacity_steps(events, window.capacity, gpus_per_node)
    seg_end = np.append(t[1:], np.inf)
    return float((a * clipped(t, seg_end, window)).sum())


def capacity_steps(events: pd.DataFrame, capacity: int, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """Healthy GPUs as a step function: change times and the value from each time on."""
    nodes = events[events["event"].isin(["node_down", "node_up"])]
    delta = np.where(nodes["event"] == "node_down", -gpus_per_node, gpus_per_node)
    t = np.concatenate([[0.0], nodes["t_s"].to_numpy()])
    return t, capacity + np.concatenate([[0], np.cumsum(delta)])


def demand_steps(jobs: pd.DataFrame, n_nodes: int, gpus_per_node: int,
                 window: Window) -> tuple[np.ndarray, np.ndarray]:
    """GPUs wanted (pending or running) per budget node at each change time; [T], [T, nodes].

    A job wants its held GPUs from submit until it finishes or is withdrawn."""
    funded = jobs[jobs["leaf"] >= 0]
    held = np.array([held_gpus(int(g), gpus_per_node) for g in funded["gpus"]], dtype=float)
    stop = funded["end_s"].fillna(window.t1).to_numpy()
    return interval_steps(funded["submit_s"].to_numpy(), stop, held, funded["leaf"].to_numpy(int), n_nodes)


def interval_steps(start: np.ndarray, end: np.ndarray, weight: np.ndarray, group: np.ndarray | None = None,
                   n_groups: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Sum of ``weight`` over the intervals [start, end) open at each time, per group, as a step
    function: change times [T] (starting at 0) and the value from each time on [T, n_groups]."""
    group = np.zeros(len(start), int) if group is None else np.asarray(group, int)
    times = np.concatenate([start, end]).astype(float)
    cols = np.concatenate([group, group])
    deltas = np.concatenate([weight, -np.asarray(weight)]).astype(float)
    order = np.argsort(times, kind="stable")
    grid = np.zeros((len(times) + 1, n_groups))
    grid[np.arange(1, len(times) + 1), cols[order]] = deltas[order]
    return np.concatenate([[0.0], times[order]]), np.cumsum(grid, axis=0)


def step_integral(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral from ``times[0]`` up to each edge of a step function (``values[k]`` from
    ``times[k]`` on; [T] or [T, n]); edges are not before ``times[0]``."""
    values = np.asarray(values, dtype=float)
    shape = (-1,) + (1,) * (values.ndim - 1)
    cum = np.cumsum(values[:-1] * np.diff(times).reshape(shape), axis=0)
    cum = np.concatenate([np.zeros((1,) + values.shape[1:]), cum])
    k = np.searchsorted(times, edges, side="right") - 1
    return cum[k] + values[k] * (np.asarray(edges) - times[k]).reshape(shape)


def owed_steps(events: pd.DataFrame, jobs: pd.DataFrame, tree: BudgetTree, window: Window,
               gpus_per_node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Owed GPUs per budget node as a step function: change times [T], healthy GPUs [T] and
    owed rates [T, nodes] (demand-capped water-filling of healthy capacity down the tree)."""
    t_d, demand = demand_steps(jobs, tree.size, gpus_per_node, window)
    t_c, cap = capacity_steps(events, window.capacity, gpus_per_node)
    times = np.union1d(t_d, t_c)
    d = demand[np.searchsorted(t_d, times, side="right") - 1]
    a = cap[np.searchsorted(t_c, times, side="right") - 1].astype(float)
    return times, a, tree.owed_rates(a, d)


def owed_and_delivered(events: pd.DataFrame, jobs: pd.DataFrame, att: pd.DataFrame, held_s: np.ndarray,
                       tree: BudgetTree, window: Window, gpus_per_node: int) -> pd.DataFrame:
    """Per budget node: entitlement, owed and delivered GPU-seconds over the window, and impact:
    over the leaves beneath a node (the node itself if a leaf), delivered up to owed over owed
    (1 where nothing was owed), so the root's impact is the headline one. ``held_s`` is per attempt."""
    times, a, rates = owed_steps(events, jobs, tree, window, gpus_per_node)
    dur = clipped(times, np.append(times[1:], np.inf), window)
    owed = (rates * dur[:, None]).sum(axis=0)
    att_leaf = att["job_id"].map(jobs.set_index("job_id")["leaf"]).to_numpy(int)
    funded = att_leaf >= 0
    per_leaf = np.bincount(att_leaf[funded], weights=held_s[funded], minlength=tree.size)
    delivered = tree.subtree_sum(per_leaf)
    entitled = tree.fraction * float((a * dur).sum())
    return pd.DataFrame({"node": list(tree.names), "leaf": [i in set(tree.leaves) for i in range(tree.size)],
                         "fraction": tree.fraction, "entitled_gpu_s": entitled, "owed_gpu_s": owed,
                         "delivered_gpu_s": delivered, "impact": subtree_impact(tree, delivered, owed)})


def subtree_impact(tree: BudgetTree, delivered: np.ndarray, owed: np.ndarray) -> np.ndarray:
    """Per node: sum over the leaves beneath of min(delivered, owed) / sum of their owed (NaN,
    undefined, where nothing was owed). One definition at every level: the root's value is the
    headline impact."""
    at_leaves = np.zeros(tree.size)
    at_leaves[list(tree.leaves)] = 1.0
    got = tree.subtree_sum(np.minimum(delivered, owed) * at_leaves)
    due = tree.subtree_sum(owed * at_leaves)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(due > 0, got / due, np.nan)


def percentiles(values: pd.Series) -> dict[str, float | int | None]:
    """p50/p90/p99 and count of a sample (None when empty)."""
    if len(values) == 0:
        return {"p50": None, "p90": None, "p99": None, "n": 0}
    p50, p90, p99 = np.percentile(values.to_numpy(dtype=float), [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "n": len(values)}


def size_bucket(gpus: pd.Series) -> pd.Series:
    """Gang-size bucket labels: 1, 2-8, 9-64, 65+."""
    labels = pd.Series("", index=gpus.index, dtype=object)
    for lo, hi, name in SIZE_BUCKETS:
        labels[(gpus >= lo) & (gpus <= hi)] = name
    return labels


def wait_stats(table: pd.DataFrame, window: Window,
               column: str = "wait_s") -> tuple[dict[str, object], dict[str, object]]:
    """Waits of jobs submitted in the window (first-start ``wait_s``, or total ``queued_s``
    including requeues): overall, by kind and by size bucket."""
    inside = submitted_in(table, window)
    by_kind = {k: percentiles(g[column]) for k, g in inside.groupby("kind", sort=True)}
    by_size = {b: percentiles(g[column]) for b, g in inside.groupby(size_bucket(inside["gpus"]), sort=False)}
    return {"all": percentiles(inside[column]), **by_kind}, by_size


def submitted_in(table: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Rows of the per-job table submitted in the reporting window (whose waits are reported)."""
    return table[(table["submit_s"] >= window.t0) & (table["submit_s"] < window.t1)]


def queue_lengths(events: pd.DataFrame, at_s: np.ndarray) -> np.ndarray:
    """Queued jobs (submitted or requeued, not yet started or withdrawn) just after each time
    ``at_s`` (events at that very time counted)."""
    moves = events[events["event"].isin(list(QUEUE_DELTA))]
    level = np.cumsum(moves["event"].map(QUEUE_DELTA).to_numpy(int))
    seen = np.searchsorted(moves["t_s"].to_numpy(float), at_s, side="right")  # the log is in time order
    return np.where(seen > 0, level[np.maximum(seen - 1, 0)] if len(level) else 0, 0)


def backlog(events: pd.DataFrame, window: Window) -> dict[str, object]:
    """The queue at the start of the window, at the end of each quarter of it, and whether it
    grew through the whole window (see ``BACKLOG_GROWTH``)."""
    quarters = queue_lengths(events, window.t0 + window.span_s * np.arange(5) / 4)
    rising = bool(np.all(np.diff(quarters) > 0))
    end, start = int(quarters[-1]), int(quarters[0])
    growing = rising and end >= max(BACKLOG_GROWTH * start, BACKLOG_MIN_JOBS)
    return {"queued_at_start": start, "queued_at_end": end, "backlog_growing": growing}


def jain(x: np.ndarray) -> float:
    """Jain's fairness index: 1 when all equal (all zero included), 1/n when one takes
    everything; NaN (undefined) over nothing."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return math.nan
    if not (x**2).sum():
        return 1.0
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def summarise(events: pd.DataFrame, trace: pd.DataFrame, tree: BudgetTree, window: Window,
              gpus_per_node: int, horizon_s: float) -> tuple[dict[str, object], pd.DataFrame, pd.DataFrame]:
    """The run's headline metrics, its per-job table and its per-budget-node table."""
    att = attempts(events, horizon_s)
    table = job_table(events, trace, horizon_s, att)
    table["leaf"] = tree.leaves_for(table["project"], table["user"])  # -1: unallocated
    healthy = healthy_gpu_s(events, window, gpus_per_node)
    held_s = held_gpu_s(att, down_intervals(events, horizon_s), window, gpus_per_node)
    funded = att["job_id"].map(table.set_index("job_id")["leaf"]).to_numpy(int) >= 0
    budget = owed_and_delivered(events, table, att, held_s, tree, window, gpus_per_node)
    leaves = budget[budget["leaf"]]
    owed = leaves["owed_gpu_s"].to_numpy()
    got = np.minimum(leaves["delivered_gpu_s"].to_numpy(), owed)
    waits, by_size = wait_stats(table, window)
    preempts = events[(events["event"] == "preempt") & (events["t_s"] >= window.t0) & (events["t_s"] < window.t1)]
    entitled = leaves["entitled_gpu_s"].sum()
    strict = _ratio(np.minimum(leaves["delivered_gpu_s"], leaves["entitled_gpu_s"]).sum(), entitled)
    summary = {
        "jobs": len(table),
        "availability": _ratio(healthy, window.capacity * window.span_s),
        "occupancy": _ratio(held_s.sum(), healthy),
        "occupancy_funded": _ratio(held_s[funded].sum(), healthy),
        "occupancy_unallocated": _ratio(held_s[~funded].sum(), healthy),
        "utilization": _ratio(_useful_gpu_s(att, table, window), healthy),
        "impact": float(budget["impact"].iloc[ROOT]),  # the root row: one definition of impact
        "impact_strict": float(strict),
        "unallocated_share": _ratio(held_s[~funded].sum(), held_s.sum()),
        "preemptions": len(preempts),
        "lost_gpu_hours": lost_to(att, "preempt", window) / 3600.0,
        "jain": jain(got[owed > 0] / owed[owed > 0]),
        "requested_ratio": _requested_ratio(table, window, gpus_per_node),
        "withdrawn": int((table["state"] == "withdrawn").sum()),
        **backlog(events, window),
        **session_summary(events, att, table, window),
        **health_summary(events, att, window, horizon_s),
        "preemptions_by_kind": {str(k): int(n) for k, n in
                                preempts["job_id"].map(table.set_index("job_id")["kind"]).value_counts().sort_index().items()},
        "wait_s": waits,
        "wait_by_size_s": by_size,
        "by_kind": {row.pop("kind"): row for row in by_kind(events, att, table, held_s, window).to_dict("records")},
        "queued_s": wait_stats(table, window, "queued_s")[0],
    }
    return {k: (float(v) if isinstance(v, np.floating) else v) for k, v in summary.items()}, table, budget


def _ratio(part: float, whole: float) -> float:
    """``part / whole``, or NaN (undefined) when there is nothing to divide by: a window with no
    healthy GPU, nothing owed or nothing delivered has no occupancy, impact or share, and
    reporting 0 or 1 would read as a result."""
    return float(part / whole) if whole else math.nan


def _useful_gpu_s(att: pd.DataFrame, table: pd.DataFrame, window: Window) -> float:
    """GPU-seconds of real progress: no restart overhead, no lost work, scaled by util."""
    info = table.set_index("job_id")
    util = att["job_id"].map(info["util"])
    gpus = att["job_id"].map(info["gpus"]).to_numpy()
    start = att["start_s"].to_numpy() + att["overhead_s"].to_numpy()
    end = att["end_s"].to_numpy() - att["lost_s"].to_numpy()
    return float((clipped(start, end, window) * gpus * util.to_numpy()).sum())


def _requested_ratio(table: pd.DataFrame, window: Window, gpus_per_node: int) -> float:
    """Time-averaged GPUs wanted by queued + running jobs / capacity (policy-dependent)."""
    held = np.array([held_gpus(int(g), gpus_per_node) for g in table["gpus"]], dtype=float)
    start = table["submit_s"].to_numpy()
    stop = table["end_s"].fillna(window.t1).to_numpy()
    return float((held * clipped(start, stop, window)).sum() / (window.capacity * window.span_s))


# ----- sessions: kills and resubmissions -----------------------------------------------------
def in_window(rows: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Event rows with ``t_s`` inside the window."""
    return rows[(rows["t_s"] >= window.t0) & (rows["t_s"] < window.t1)]


def session_summary(events: pd.DataFrame, att: pd.DataFrame, table: pd.DataFrame,
                    window: Window) -> dict[str, object]:
    """Interactive sessions in the window: kills (count, and share of the sessions that ran),
    GPU-hours lost to their preemptions and cut by kills never resubmitted, and the wait after
    a resubmission."""
    kind = table.set_index("job_id")["kind"]
    session_att = att[att["job_id"].map(kind).to_numpy() == SESSION]
    ran = session_att.loc[(session_att["end_s"] > window.t0) & (session_att["start_s"] < window.t1), "job_id"]
    kills = in_window(events[events["event"] == "kill"], window)
    return {
        "sessions_killed": len(kills),
        "sessions_killed_share": _ratio(kills["job_id"].nunique(), ran.nunique()),
        "session_lost_gpu_hours": lost_to(session_att, "preempt", window) / 3600.0,
        "session_cut_gpu_hours": cut_gpu_s(events, kills) / 3600.0,
        "resubmits": len(in_window(events[events["event"] == "resubmit"], window)),
        "resubmit_wait_s": percentiles(resubmit_waits(events, window)),
    }


def cut_gpu_s(events: pd.DataFrame, kills: pd.DataFrame) -> float:
    """GPU-seconds of session time cut by ``kills`` (rows of the log) and never had: the
    sessions their users did not submit again."""
    return float((kills["gpus"] * kills["lost_s"])[~_resubmitted(events, kills)].sum())


def _resubmitted(events: pd.DataFrame, kills: pd.DataFrame) -> np.ndarray:
    """For each kill row, whether its session was submitted again later (before the end)."""
    rows = events[events["event"].isin(["kill", "resubmit"])]
    following = rows.groupby("job_id")["event"].shift(-1) == "resubmit"
    return following.reindex(kills.index).fillna(False).to_numpy(bool)


def resubmit_waits(events: pd.DataFrame, window: Window) -> pd.Series:
    """Seconds from each resubmission in the window to the session's next start (or its
    withdrawal, or the end of the run)."""
    rows = events[events["event"].isin(["resubmit", "start", "withdraw"])]
    nxt = rows.groupby("job_id")["t_s"].shift(-1).fillna(window.t1)
    back = (rows["event"] == "resubmit") & (rows["t_s"] >= window.t0) & (rows["t_s"] < window.t1)
    return (nxt - rows["t_s"])[back]


def by_kind(events: pd.DataFrame, att: pd.DataFrame, table: pd.DataFrame, held_s: np.ndarray,
            window: Window) -> pd.DataFrame:
    """One row per kind of job: jobs submitted in the window and how they ended, preemptions and
    kills in the window (counts, and shares of the jobs that ran in it), GPU-hours held, lost to
    preemption and cut by kills, and first-start and queued waits."""
    kind = table.set_index("job_id")["kind"]
    att_kind = att["job_id"].map(kind).to_numpy()
    ran = att[(att["end_s"] > window.t0) & (att["start_s"] < window.t1)]
    ev = in_window(events[events["event"].isin(["preempt", "kill"])], window)
    ev = ev.assign(kind=ev["job_id"].map(kind).to_numpy())
    inside = submitted_in(table, window)
    rows = []
    for k in sorted(kind.unique()):
        mine, hits = inside[inside["kind"] == k], ev[ev["kind"] == k]
        ran_jobs = ran.loc[ran["job_id"].map(kind).to_numpy() == k, "job_id"].nunique()
        kills = hits[hits["event"] == "kill"]
        waits, queued = percentiles(mine["wait_s"]), percentiles(mine["queued_s"])
        rows.append({
            "kind": k, "jobs": len(mine), "finished": int((mine["state"] == "finished").sum()),
            "withdrawn": int((mine["state"] == "withdrawn").sum()), "ran": ran_jobs,
            "preemptions": int((hits["event"] == "preempt").sum()),
            "preempted_share": _ratio(hits.loc[hits["event"] == "preempt", "job_id"].nunique(), ran_jobs),
            "killed": len(kills), "killed_share": _ratio(kills["job_id"].nunique(), ran_jobs),
            "gpu_hours": float(held_s[att_kind == k].sum()) / 3600.0,
            "lost_gpu_hours": lost_to(att[att_kind == k], "preempt", window) / 3600.0,
            "cut_gpu_hours": cut_gpu_s(events, kills) / 3600.0,
            "wait_p50_s": waits["p50"], "wait_p90_s": waits["p90"], "queued_p90_s": queued["p90"],
        })
    return pd.DataFrame(rows, columns=KIND_COLUMNS)


KIND_COLUMNS = ["kind", "jobs", "finished", "withdrawn", "ran", "preemptions", "preempted_share", "killed",
                "killed_share", "gpu_hours", "lost_gpu_hours", "cut_gpu_hours", "wait_p50_s", "wait_p90_s",
                "queued_p90_s"]


# ----- availability: the node events ---------------------------------------------------------
def down_intervals(events: pd.DataFrame, horizon_s: float) -> pd.DataFrame:
    """One row per failure: node, down_s, up_s (the horizon if still under repair), repair."""
    nodes = events[events["event"].isin(["node_down", "node_up"])]
    downs, ups = nodes[nodes["event"] == "node_down"], nodes[nodes["event"] == "node_up"]
    left = pd.DataFrame({"node": downs["nodes"].astype(int).to_numpy(), "k": downs.groupby("nodes").cumcount().to_numpy(),
                         "down_s": downs["t_s"].to_numpy()})
    right = pd.DataFrame({"node": ups["nodes"].astype(int).to_numpy(), "k": ups.groupby("nodes").cumcount().to_numpy(),
                          "up_s": ups["t_s"].to_numpy(), "repair": ups["detail"].str.removeprefix("repair=").to_numpy()})
    out = left.merge(right, on=["node", "k"], how="left").drop(columns="k")
    out["up_s"] = out["up_s"].fillna(horizon_s)
    out["repair"] = out["repair"].fillna("open")
    return out


def held_gpu_s(att: pd.DataFrame, down: pd.DataFrame, window: Window, gpus_per_node: int) -> np.ndarray:
    """GPU-seconds each attempt held inside the window on healthy nodes. Time on a failed node
    (manual repair: jobs land there until a person drains it) is not occupancy."""
    held = att["gpus"].to_numpy() * clipped(att["start_s"].to_numpy(), att["end_s"].to_numpy(), window)
    pairs = down_overlaps(att, down, gpus_per_node)
    lost = pairs["gpus"].to_numpy() * clipped(pairs["start_s"].to_numpy(), pairs["end_s"].to_numpy(), window)
    return held - np.bincount(pairs["attempt"].to_numpy(int), weights=lost, minlength=len(att))


def down_overlaps(att: pd.DataFrame, down: pd.DataFrame, gpus_per_node: int) -> pd.DataFrame:
    """Where attempts ran on a node while it was down: attempt (position in ``att``), start_s,
    end_s (end >= start) and the GPUs the attempt held on that node."""
    if down.empty or att.empty:
        return pd.DataFrame({"attempt": np.zeros(0, int), "start_s": np.zeros(0), "end_s": np.zeros(0),
                             "gpus": np.zeros(0)})
    rows = att.assign(attempt=np.arange(len(att)), share=np.minimum(att["gpus"].to_numpy(), gpus_per_node))
    rows = rows.assign(node=rows["nodes"].str.split(",")).explode("node")
    rows["node"] = rows["node"].astype(int)
    pairs = rows.merge(down, on="node")
    start = np.maximum(pairs["start_s"].to_numpy(), pairs["down_s"].to_numpy())
    end = np.minimum(pairs["end_s"].to_numpy(), pairs["up_s"].to_numpy())
    return pd.DataFrame({"attempt": pairs["attempt"].to_numpy(), "start_s": start,
                         "end_s": np.maximum(start, end), "gpus": pairs["share"].to_numpy(dtype=float)})


def health_summary(events: pd.DataFrame, att: pd.DataFrame, window: Window, horizon_s: float) -> dict[str, object]:
    """Failures, repairs by kind, jobs hit and GPU-hours lost to failures, inside the window."""
    down = down_intervals(events, horizon_s)
    began = down[(down["down_s"] >= window.t0) & (down["down_s"] < window.t1)]
    done = down[(down["up_s"] >= window.t0) & (down["up_s"] < window.t1) & (down["repair"] != "open")]
    fails = events[(events["event"] == "fail") & (events["t_s"] >= window.t0) & (events["t_s"] < window.t1)]
    return {
        "node_failures": len(began),
        "human_repairs": int((done["repair"] == "human").sum()),
        "auto_repairs": int((done["repair"] == "automatic").sum()),
        "jobs_hit": int(fails["job_id"].nunique()),
        "failure_lost_gpu_hours": lost_to(att, "fail", window) / 3600.0,
    }


def lost_to(att: pd.DataFrame, cause: str, window: Window) -> float:
    """GPU-seconds lost to one cause: progress lost by attempts it ended, and the restart
    overhead paid by the attempts that followed them."""
    start, end = att["start_s"].to_numpy(), att["end_s"].to_numpy()
    lost = np.where(att["ended_by"] == cause, att["lost_s"].to_numpy(), 0.0)
    overhead = np.where(att["restart_after"] == cause, np.minimum(att["overhead_s"].to_numpy(), end - start), 0.0)
    seconds = clipped(end - lost, end, window) + clipped(start, start + overhead, window)
    return float((seconds * att["gpus"].to_numpy()).sum())


def health_series(events: pd.DataFrame, capacity: int, gpus_per_node: int, horizon_s: float,
                  bucket_s: float = 3600.0) -> pd.DataFrame:
    """Per time bucket: mean healthy GPUs, failures, and repairs by kind (for charts)."""
    edges = np.arange(0.0, horizon_s + bucket_s, bucket_s)
    edges[-1] = min(edges[-1], horizon_s) if len(edges) > 1 else horizon_s
    down = down_intervals(events, horizon_s)
    lost = np.zeros(len(edges) - 1)
    for d, u in zip(down["down_s"], down["up_s"]):
        lost += gpus_per_node * np.clip(np.minimum(edges[1:], u) - np.maximum(edges[:-1], d), 0, None)
    width = np.diff(edges)
    bucket = lambda t: np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(width) - 1)
    count = lambda t: np.bincount(bucket(t), minlength=len(width)) if len(t) else np.zeros(len(width), int)
    return pd.DataFrame({
        "t_s": edges[:-1],
        "healthy_gpus": capacity - lost / width,
        "failures": count(down["down_s"].to_numpy()),
        "auto_repairs": count(down.loc[down["repair"] == "automatic", "up_s"].to_numpy()),
        "human_repairs": count(down.loc[down["repair"] == "human", "up_s"].to_numpy()),
    })
