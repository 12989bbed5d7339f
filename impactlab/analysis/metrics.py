"""Metrics derived from the event log and the inputs (docs/model.md section 7).

Everything here is vectorised over the log; nothing is counted inside the simulator.
Time-integrals are clipped to the reporting window [t0, t1].
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..base.gangs import SIZE_BUCKETS, held_of
from ..inputs.budgets import ROOT, BudgetTree
from ..sim.events import SESSION, Ev, preempt_reason
from ..sim.policy import BACKFILL_REASON, DRAIN_NOTE, DRAIN_REASON, RESERVE_REASON
from .findings import DRAINED_STARTS

END_EVENTS = (Ev.PREEMPT, Ev.FINISH, Ev.FAIL, Ev.EVICT)
QUEUE_DELTA = {
    Ev.SUBMIT: 1,
    Ev.REQUEUE: 1,
    Ev.RESUBMIT: 1,
    Ev.START: -1,
    Ev.WITHDRAW: -1,
}  # how events move the queue
#: The backlog "grows through the run" when the queue is longer at the end of each quarter of the
#: window than at the end of the one before, and at the end at least this many times (and this
#: many jobs) longer than at the start: waits then grow with the run's length and mean little.
BACKLOG_GROWTH, BACKLOG_MIN_JOBS = 2.0, 20
TERMINAL = {
    Ev.FINISH: "finished",
    Ev.WITHDRAW: "withdrawn",
    Ev.KILL: "killed",
}  # last event -> state


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


# ----- jobs as integer codes ----------------------------------------------------------------
def job_codes(job_ids: pd.Series, known: pd.Series | None = None) -> np.ndarray:
    """An integer per job id, to group and join rows by job on integers rather than strings.
    With ``known`` (unique ids: the per-job table's), an id's code is its position there and
    other ids (node events' "") are numbered after them: factorisation numbers ids in order of
    first appearance."""
    ids = job_ids.to_numpy(object)
    if known is None:
        return pd.factorize(ids)[0]
    first = known.to_numpy(object)
    codes, seen = pd.factorize(ids)  # ids in order of first appearance
    n = len(first)
    if len(seen) >= n and (seen[:n] == first).all():  # the log met the jobs in the table's order
        return codes
    table = pd.Index(first)
    if not table.is_unique:
        return pd.factorize(np.concatenate([first, ids]))[0][n:]
    where = table.get_indexer(seen)
    other = where < 0
    where[other] = n + np.arange(int(other.sum()))
    return where[codes]


@dataclass(frozen=True)
class EventKinds:
    """The log's ``event`` column as integer codes (factorised once), so that picking rows by
    event compares integers rather than 760,000 Python strings per pass."""

    codes: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, events: pd.DataFrame) -> EventKinds:
        """The codes of a log's events."""
        codes, names = pd.factorize(events["event"].to_numpy(object))
        return cls(codes, tuple(names))

    def code(self, event: str) -> int:
        """The code of an event (one no row has when the log has none: never -1, ``_take``'s
        fill)."""
        return self.names.index(event) if event in self.names else len(self.names)

    def mask(self, *events: str) -> np.ndarray:
        """Rows of the log that are any of ``events``."""
        present = [self.names.index(e) for e in events if e in self.names]
        if len(present) == 1:
            return self.codes == present[0]
        return np.isin(self.codes, present)


def _event_kinds(events: pd.DataFrame, kinds: EventKinds | None) -> EventKinds:
    """``kinds`` if the caller has them, else the log's."""
    return EventKinds.of(events) if kinds is None else kinds


@dataclass(frozen=True)
class Keys:
    """Jobs as rows of the per-job table (``job_codes`` over its ids): of each row of the log and
    of each attempt, and the kind of each job; and the log's ``EventKinds`` (None: taken from
    the log when needed)."""

    job: np.ndarray
    att_job: np.ndarray
    kind: np.ndarray
    event: EventKinds | None = None


def _grouped(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by code (each code's rows in their order), and whether each sorted row is the
    first and the last of its code."""
    order = np.argsort(codes, kind="stable")
    change = codes[order][1:] != codes[order][:-1]
    first, last = np.ones(len(codes), bool), np.ones(len(codes), bool)
    first[1:], last[:-1] = change, change
    return order, first, last


def cumcount(
    codes: np.ndarray, grouped: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Position of each row among the rows of its code (``groupby(...).cumcount()``);
    ``grouped`` is ``_grouped(codes)`` when the caller has it."""
    order, first, _ = _grouped(codes) if grouped is None else grouped
    at = np.arange(len(codes))
    out = np.empty(len(codes), np.int64)
    out[order] = at - np.maximum.accumulate(np.where(first, at, 0))
    return out


def next_row(codes: np.ndarray) -> np.ndarray:
    """Index of the next row of the same code, -1 after its last (``groupby(...).shift(-1)``)."""
    order, _, last = _grouped(codes)
    out = np.full(len(codes), -1)
    out[order[~last]] = order[np.flatnonzero(~last) + 1]
    return out


def previous_row(
    codes: np.ndarray, grouped: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Index of the previous row of the same code, -1 before its first (``shift(1)``);
    ``grouped`` is ``_grouped(codes)`` when the caller has it."""
    order, first, _ = _grouped(codes) if grouped is None else grouped
    out = np.full(len(codes), -1)
    out[order[~first]] = order[np.flatnonzero(~first) - 1]
    return out


def nth_match(
    left: np.ndarray, right: np.ndarray, left_count: np.ndarray | None = None
) -> np.ndarray:
    """For each row of ``left`` (codes), the row of ``right`` with the same code and as many
    earlier rows of that code (the k-th with the k-th), -1 if none. ``left_count`` is
    ``cumcount(left)`` when the caller has it."""
    width = max(len(left), len(right)) + 1  # more rows than any code has: one key per (code, k)
    k = cumcount(left) if left_count is None else left_count
    return pd.Index(right * width + cumcount(right)).get_indexer(left * width + k)


def _take(values: np.ndarray, at: np.ndarray, fill: object) -> np.ndarray:
    """``values[at]``, ``fill`` where ``at`` is -1."""
    out = np.full(len(at), fill, dtype=values.dtype)
    found = at >= 0
    out[found] = values[at[found]]
    return out


def _per_job(codes: np.ndarray, n_jobs: int) -> np.ndarray:
    """Rows whose code is a row of the per-job table (``job_codes`` with the table's ids)."""
    return codes < n_jobs


# ----- attempts and the per-job table ------------------------------------------------------------
def attempts(
    events: pd.DataFrame,
    horizon_s: float,
    job: np.ndarray | None = None,
    kinds: EventKinds | None = None,
) -> pd.DataFrame:
    """One row per run attempt: job, GPUs, nodes, start, end (horizon if still running), the
    time of the row that ended it (``stopped_s``: a preemption's, before its grace period), how
    it ended, the restart overhead it paid (and after what) and the progress it lost. The k-th
    end of a job (``released``) closes its k-th start. ``job`` is ``job_codes`` of the log's rows,
    ``kinds`` its ``EventKinds`` (when the caller has them).

    A preempted attempt holds its GPUs until their release (the ``requeue`` or ``kill`` after its
    grace period), and its grace period counts as lost: it holds GPUs and makes no progress."""
    job = job_codes(events["job_id"]) if job is None else job
    kinds = _event_kinds(events, kinds)
    starts = np.flatnonzero(kinds.mask(Ev.START))
    ends, end_s, lost_s = _releases(events, horizon_s, job, kinds)
    stopped_s = events["t_s"].to_numpy()[ends]  # (a preemption's row: before its grace period)
    start_job = job[starts]
    grouped = _grouped(start_job)
    n = cumcount(start_job, grouped)
    match = nth_match(start_job, job[ends], n)
    ended_by = _take(events["event"].to_numpy()[ends], match, "running")
    at_start = {
        col: events[col].to_numpy()[starts]
        for col in ("job_id", "gpus", "nodes", "t_s", "overhead_s")
    }
    return pd.DataFrame(
        {
            "job_id": at_start["job_id"],
            "n": n,
            "gpus": at_start["gpus"],
            "nodes": at_start["nodes"],
            "start_s": at_start["t_s"],
            "overhead_s": at_start["overhead_s"],
            "end_s": _take(end_s, match, horizon_s),
            "stopped_s": _take(stopped_s, match, horizon_s),
            "ended_by": ended_by,
            "lost_s": _take(lost_s, match, 0.0),
            "restart_after": _take(
                ended_by, previous_row(start_job, grouped), ""
            ),  # what the overhead pays for
        }
    )


def released(events: pd.DataFrame, horizon_s: float, job: np.ndarray | None = None) -> pd.DataFrame:
    """The rows that end attempts, a preemption's ``t_s`` moved to its release (the job's next
    row, a ``requeue`` or ``kill``; the horizon if still in grace) and its grace added to ``lost_s``."""
    rows, end_s, lost_s = _releases(
        events,
        horizon_s,
        job_codes(events["job_id"]) if job is None else job,
        EventKinds.of(events),
    )
    return events.iloc[rows].assign(t_s=end_s, lost_s=lost_s)


def _releases(
    events: pd.DataFrame, horizon_s: float, job: np.ndarray, kinds: EventKinds
) -> tuple[np.ndarray, ...]:
    """``released`` as arrays: positions of the rows, their ends and their lost seconds."""
    event, t = kinds.codes, events["t_s"].to_numpy()
    rows = np.flatnonzero(kinds.mask(*END_EVENTS))
    end_s, lost_s = t[rows], events["lost_s"].to_numpy()[rows]
    preempt = event[rows] == kinds.code(Ev.PREEMPT)
    if not preempt.any():
        return rows, end_s, lost_s
    pre = rows[preempt]
    # A preemption's next row of its job: among the rows of the jobs ever preempted (all of
    # each such job's rows, in order), so that only those are sorted by job.
    hit = np.zeros(int(job.max()) + 1, bool)
    hit[job[pre]] = True
    theirs = np.flatnonzero(hit[job])
    nxt = _take(theirs, next_row(job[theirs])[np.searchsorted(theirs, pre)], -1)
    nxt_event = _take(event, nxt, -1)
    release = np.where(
        (nxt_event == kinds.code(Ev.REQUEUE)) | (nxt_event == kinds.code(Ev.KILL)),
        _take(t, nxt, np.nan),
        horizon_s,
    )
    end_s = end_s.copy()
    end_s[preempt] = release
    return rows, end_s, lost_s + (end_s - t[rows])


def job_table(
    events: pd.DataFrame, trace: pd.DataFrame, horizon_s: float, att: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per-job outcome: first start, end, state, first-start wait, total queued time, attempts,
    preemptions, failures, kills, resubmissions, lost and overhead seconds. Jobs never started
    count their wait so far; a killed session's time away before its resubmission is not queued.
    ``att`` is ``attempts(events, horizon_s)`` when the caller has it already."""
    submitted = _submitted(trace, horizon_s)
    job = job_codes(events["job_id"], submitted["job_id"])
    kinds = EventKinds.of(events)
    att = attempts(events, horizon_s, job, kinds) if att is None else att
    return _job_table(events, submitted, job, att, horizon_s, kinds)


def _submitted(trace: pd.DataFrame, horizon_s: float) -> pd.DataFrame:
    """The jobs submitted before the horizon: the rows of the per-job table."""
    return trace[trace["submit_s"] < horizon_s]


def run_job_codes(events: pd.DataFrame, trace: pd.DataFrame, horizon_s: float) -> np.ndarray:
    """``job_codes`` of the log's rows over the ids of the per-job table (the jobs submitted
    before the horizon): what ``summarise`` groups by, and ``attempts`` may share."""
    return job_codes(events["job_id"], _submitted(trace, horizon_s)["job_id"])


def _job_table(
    events: pd.DataFrame,
    submitted: pd.DataFrame,
    job: np.ndarray,
    att: pd.DataFrame,
    horizon_s: float,
    kinds: EventKinds,
    away: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """``job_table`` given the jobs submitted before the horizon, ``job_codes`` of the log's
    rows over their ids, the log's ``EventKinds`` and (when the caller has it)
    ``away_intervals`` over them."""
    n_jobs = len(submitted)
    event, t = kinds.codes, events["t_s"].to_numpy()
    att_job = job[kinds.mask(Ev.START)]
    out = submitted[["job_id", "submit_s", "user", "project", "kind", "gpus", "util"]].reset_index(
        drop=True
    )
    out = out.join(_attempt_totals(att, att_job, n_jobs))
    for ev in (Ev.PREEMPT, Ev.FAIL, Ev.KILL, Ev.RESUBMIT, Ev.EVICT):
        out[f"{ev}s"] = _count(job[kinds.mask(ev)], n_jobs)
    last = _last_row(job, kinds.mask(*TERMINAL, Ev.RESUBMIT), n_jobs)
    last_event = _take(event, last, -1)
    ended = (last >= 0) & (last_event != kinds.code(Ev.RESUBMIT))  # a resubmission reopens a job
    out["end_s"] = np.where(ended, _take(t, last, np.nan), np.nan)
    # a job holds its GPUs at the horizon when its last attempt runs or is in its grace period
    holding = _equals(att["ended_by"], "running") | (
        _equals(att["ended_by"], "preempt") & (att["end_s"].to_numpy() >= horizon_s)
    )  # (compared as they are: the column's strings are not made again)
    open_attempt = _take(holding, _last_row(att_job, True, n_jobs), False)
    state = np.where(open_attempt & (out["attempts"].to_numpy() > 0), "running", "queued").astype(
        object
    )
    for ev, name in TERMINAL.items():
        state[ended & (last_event == kinds.code(ev))] = name
    out["state"] = state
    stop = out["end_s"].fillna(horizon_s)
    out["wait_s"] = out["first_start_s"].fillna(stop) - out["submit_s"]
    row, kill, back = away_intervals(events, submitted, kinds, job) if away is None else away
    out["queued_s"] = (
        stop - out["submit_s"] - out["ran_s"] - np.bincount(row, back - kill, minlength=n_jobs)
    )
    return out


def _attempt_totals(att: pd.DataFrame, att_job: np.ndarray, n_jobs: int) -> pd.DataFrame:
    """Per job (table row): first start, attempts, and seconds run, lost and paid as overhead (0
    without attempts). Summed by pandas on the codes, so that sums are its (compensated) sums."""
    mine = _per_job(att_job, n_jobs)
    rows = pd.DataFrame(
        {
            "first_start_s": att["start_s"].to_numpy()[mine],
            "ran_s": (att["end_s"] - att["start_s"]).to_numpy()[mine],
            "lost_s": att["lost_s"].to_numpy()[mine],
            "overhead_s": att["overhead_s"].to_numpy()[mine],
        }
    )
    totals = (
        rows.groupby(att_job[mine])
        .agg({"first_start_s": "min", "ran_s": "sum", "lost_s": "sum", "overhead_s": "sum"})
        .reindex(range(n_jobs))
    )
    totals.insert(1, "attempts", _count(att_job, n_jobs))
    return totals.fillna({"ran_s": 0.0, "lost_s": 0.0, "overhead_s": 0.0})


def _count(codes: np.ndarray, n_jobs: int) -> np.ndarray:
    """Rows per job (table row)."""
    return np.bincount(codes[_per_job(codes, n_jobs)], minlength=n_jobs)


def _last_row(codes: np.ndarray, mask: np.ndarray | bool, n_jobs: int) -> np.ndarray:
    """Per job (table row): the last of the rows in ``mask`` with its code, -1 if none."""
    rows = np.flatnonzero(mask & _per_job(codes, n_jobs))
    last = np.full(n_jobs, -1)
    np.maximum.at(last, codes[rows], rows)
    return last


def away_intervals(
    events: pd.DataFrame,
    jobs: pd.DataFrame,
    kinds: EventKinds | None = None,
    job: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each time a killed session was away, from the kill to the resubmission that followed it:
    its row of ``jobs`` (a per-job table), the kill's time and the resubmission's. ``job``:
    ``job_codes`` of the log's rows over the table's ids, when the caller has them."""
    kinds = _event_kinds(events, kinds)
    rows = np.flatnonzero(kinds.mask(Ev.KILL, Ev.RESUBMIT))
    code = job_codes(events["job_id"].iloc[rows], jobs["job_id"]) if job is None else job[rows]
    t = events["t_s"].to_numpy()[rows]
    before = previous_row(code)
    back = (
        (kinds.codes[rows] == kinds.code(Ev.RESUBMIT)) & (before >= 0) & _per_job(code, len(jobs))
    )
    return code[back], t[before[back]], t[back]


def _wanting(
    jobs: pd.DataFrame, away: tuple[np.ndarray, np.ndarray, np.ndarray], window: Window
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """When each job of a per-job table wanted its GPUs, as signed intervals: from its
    submission to its end (or the window's), less each time it was away (``away_intervals``),
    whose intervals have the sign -1: start, stop, sign, row of the table."""
    rows, kill, back = away
    n = len(jobs)
    return (
        np.concatenate([jobs["submit_s"].to_numpy(float), kill]),
        np.concatenate([jobs["end_s"].fillna(window.t1).to_numpy(float), back]),
        np.concatenate([np.ones(n), -np.ones(len(rows))]),
        np.concatenate([np.arange(n), rows]),
    )


def _equals(column: pd.Series, value: str) -> np.ndarray:
    """Rows of a text column equal to ``value``, compared in the column's own storage (an Arrow
    string column is not turned into Python strings first); missing values are not equal."""
    return (column == value).to_numpy(dtype=bool, na_value=False)


def clipped(start: np.ndarray, end: np.ndarray, window: Window) -> np.ndarray:
    """Seconds of each [start, end) interval inside the window."""
    return np.clip(np.minimum(end, window.t1) - np.maximum(start, window.t0), 0.0, None)


def healthy_gpu_s(
    events: pd.DataFrame, window: Window, gpus_per_node: int, kinds: EventKinds | None = None
) -> float:
    """Integral of healthy capacity A(t) over the window (nodes down are not available)."""
    t, a = capacity_steps(events, window.capacity, gpus_per_node, kinds)
    seg_end = np.append(t[1:], np.inf)
    return float((a * clipped(t, seg_end, window)).sum())


def capacity_steps(
    events: pd.DataFrame, capacity: int, gpus_per_node: int, kinds: EventKinds | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Healthy GPUs in service as a step function: change times and the value from each time
    on (a node down for repair or for planned maintenance is not available)."""
    kinds = _event_kinds(events, kinds)
    rows = np.flatnonzero(kinds.mask(Ev.NODE_DOWN, Ev.NODE_UP, Ev.MAINT_DOWN, Ev.MAINT_UP))
    down = kinds.mask(Ev.NODE_DOWN, Ev.MAINT_DOWN)[rows]
    delta = np.where(down, -gpus_per_node, gpus_per_node)
    t = np.concatenate([[0.0], events["t_s"].to_numpy()[rows]])
    return t, capacity + np.concatenate([[0], np.cumsum(delta)])


def _demand_intervals(
    jobs: pd.DataFrame,
    gpus_per_node: int,
    window: Window,
    away: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The intervals of demand: start, end, GPUs held (negative for the time a killed session
    was away) and leaf of every funded job (a job wants its held GPUs from submit until it
    finishes or is withdrawn, but not while its user is away after a kill)."""
    start, stop, sign, row = _wanting(jobs, away, window)
    leaf = jobs["leaf"].to_numpy(int)[row]
    funded = leaf >= 0
    held = sign * held_of(jobs["gpus"].to_numpy()[row], gpus_per_node)
    return start[funded], stop[funded], held[funded], leaf[funded]


def interval_steps(
    start: np.ndarray,
    end: np.ndarray,
    weight: np.ndarray,
    group: np.ndarray | None = None,
    n_groups: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of ``weight`` over the intervals [start, end) open at each time, per group, as a step
    function: change times [T] (starting at 0) and the value from each time on [T, n_groups]."""
    times, col, delta = _interval_changes(start, end, weight, group)
    return times, _running_sum(len(times), n_groups, col, delta)


def _interval_changes(
    start: np.ndarray, end: np.ndarray, weight: np.ndarray, group: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``interval_steps``'s change times [T] (starting at 0) and, for each after the first, the
    group it changes and by how much."""
    group = np.zeros(len(start), int) if group is None else np.asarray(group, int)
    times = np.concatenate([start, end]).astype(float)
    cols = np.concatenate([group, group])
    deltas = np.concatenate([weight, -np.asarray(weight)]).astype(float)
    order = np.argsort(times, kind="stable")
    return np.concatenate([[0.0], times[order]]), cols[order], deltas[order]


def _running_sum(
    n_rows: int,
    n_groups: int,
    col: np.ndarray,
    delta: np.ndarray,
    keep: np.ndarray | None = None,
    block: int = 1 << 11,
) -> np.ndarray:
    """The cumulative sum down the rows of a [n_rows, n_groups] grid that is zero but for row
    r >= 1 holding ``delta[r - 1]`` in column ``col[r - 1]`` (``np.cumsum(grid, axis=0)``);
    with ``keep`` (row numbers >= 0, not decreasing), only those rows of it (``[keep]``).
    The grid is never made: a block of its rows at a time is scattered into a small buffer that
    stays in cache, the block's first row adds the previous block's last sum, and the block's
    sums go to the output (the same additions in the same order; [T, groups] is large, and
    zeroing it was most of the time)."""
    out = np.empty((n_rows if keep is None else len(keep), n_groups))
    buf = np.zeros((block, n_groups))
    carry = np.zeros(n_groups)
    for lo in range(0, n_rows, block):
        hi = min(lo + block, n_rows)
        r = np.arange(max(lo, 1), hi)
        buf[r - lo, col[r - 1]] = delta[r - 1]
        rows = buf[: hi - lo]
        if lo:
            rows[0] += carry
        if keep is None:
            np.cumsum(rows, axis=0, out=out[lo:hi])
            carry = out[hi - 1]
        else:
            np.cumsum(rows, axis=0, out=rows)
            first, last = np.searchsorted(keep, [lo, hi])
            out[first:last] = rows[keep[first:last] - lo]
            carry = rows[-1].copy()
        rows.fill(0.0)
    return out


def step_integral(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Integral from ``times[0]`` up to each edge of a step function (``values[k]`` from
    ``times[k]`` on; [T] or [T, n]); edges are not before ``times[0]``."""
    values = np.asarray(values, dtype=float)
    shape = (-1,) + (1,) * (values.ndim - 1)
    cum = np.cumsum(values[:-1] * np.diff(times).reshape(shape), axis=0)
    cum = np.concatenate([np.zeros((1, *values.shape[1:])), cum])
    k = np.searchsorted(times, edges, side="right") - 1
    return cum[k] + values[k] * (np.asarray(edges) - times[k]).reshape(shape)


def owed_steps(
    events: pd.DataFrame,
    jobs: pd.DataFrame,
    tree: BudgetTree,
    window: Window,
    gpus_per_node: int,
    kinds: EventKinds | None = None,
    away: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Owed GPUs per budget node as a step function: change times [T], healthy GPUs [T] and
    owed rates [T, nodes] (demand-capped water-filling of healthy capacity down the tree).
    ``away``: ``away_intervals(events, jobs)`` when the caller has it."""
    away = away_intervals(events, jobs, kinds) if away is None else away
    t_d, col, delta = _interval_changes(*_demand_intervals(jobs, gpus_per_node, window, away))
    t_c, cap = capacity_steps(events, window.capacity, gpus_per_node, kinds)
    times = np.union1d(t_d, t_c)
    # The demand per node at the merged change times, made only there (no [T, nodes] array of
    # every change time): the water-filling then writes the rates over it.
    d = _running_sum(
        len(t_d), tree.size, col, delta, keep=np.searchsorted(t_d, times, side="right") - 1
    )
    a = cap[np.searchsorted(t_c, times, side="right") - 1].astype(float)
    return times, a, tree.owed_rates(a, d, out=d)


def owed_and_delivered(
    events: pd.DataFrame,
    jobs: pd.DataFrame,
    att_leaf: np.ndarray,
    held_s: np.ndarray,
    tree: BudgetTree,
    window: Window,
    gpus_per_node: int,
    useful_s: np.ndarray | None = None,
    kinds: EventKinds | None = None,
    away: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Per budget node: entitlement, owed, delivered and useful GPU-seconds over the window, and
    impact: over the leaves beneath a node (the node itself if a leaf), delivered up to owed over
    owed (NaN where nothing was owed), so the root's impact is the headline one; ``impact_useful``
    the same with useful GPU-seconds for delivered. ``att_leaf`` (the leaf charged, -1
    unallocated), ``held_s`` and ``useful_s`` (``useful_held_gpu_s``; default ``held_s``) are per
    attempt; ``kinds`` the log's ``EventKinds`` when the caller has them."""
    times, a, rates = owed_steps(events, jobs, tree, window, gpus_per_node, kinds, away)
    dur = clipped(times, np.append(times[1:], np.inf), window)
    owed = np.multiply(rates, dur[:, None], out=rates).sum(
        axis=0
    )  # rates are ours: no [T, nodes] copy
    funded = att_leaf >= 0

    def per_leaf(weights: np.ndarray) -> np.ndarray:
        return tree.subtree_sum(
            np.bincount(att_leaf[funded], weights=weights[funded], minlength=tree.size)
        )

    delivered = per_leaf(held_s)
    useful = per_leaf(held_s if useful_s is None else useful_s)
    entitled = tree.fraction * float((a * dur).sum())
    return pd.DataFrame(
        {
            "node": list(tree.names),
            "leaf": [i in set(tree.leaves) for i in range(tree.size)],
            "fraction": tree.fraction,
            "entitled_gpu_s": entitled,
            "owed_gpu_s": owed,
            "delivered_gpu_s": delivered,
            "useful_gpu_s": useful,
            "impact": subtree_impact(tree, delivered, owed),
            "impact_useful": subtree_impact(tree, useful, owed),
        }
    )


def useful_held_gpu_s(att: pd.DataFrame, held_s: np.ndarray, window: Window) -> np.ndarray:
    """Per attempt: the GPU-seconds it held in the window (``held_s``) that moved its job
    forward, that is less its start-up and restart overhead and less the progress it lost when
    it ended (to a preemption and its grace period, a node failure or a kill). Not scaled by the
    job's ``util``: that is how well the job uses its GPUs, not whether the scheduler wasted them."""
    return np.maximum(held_s - wasted_gpu_s(att, window), 0.0)


def wasted_gpu_s(att: pd.DataFrame, window: Window, cause: str | None = None) -> np.ndarray:
    """Per attempt: GPU-seconds in the window spent on overhead at its start and on progress it
    lost at its end, counting each second once (an attempt preempted during its start-up loses
    no progress). With ``cause`` ("preempt", "fail"), only what that cause made: the overhead
    after it and the progress lost to it (a grace period during a start-up the cause did not
    make is the cause's)."""
    start, end = att["start_s"].to_numpy(), att["end_s"].to_numpy()
    overhead = np.minimum(att["overhead_s"].to_numpy(), end - start)
    if cause is not None:
        overhead = np.where(_equals(att["restart_after"], cause), overhead, 0.0)
    lost = np.minimum(att["lost_s"].to_numpy(), end - start - overhead)
    if cause is not None:
        lost = np.where(_equals(att["ended_by"], cause), lost, 0.0)
    return (clipped(start, start + overhead, window) + clipped(end - lost, end, window)) * att[
        "gpus"
    ].to_numpy()


def preemption_spread(
    job: np.ndarray,
    att: pd.DataFrame,
    att_job: np.ndarray,
    table: pd.DataFrame,
    window: Window,
    preempts: np.ndarray,
    detail: pd.Series | None = None,
    starts: np.ndarray | None = None,
) -> dict[str, object]:
    """How preemptions in the window spread over the jobs that ran in it (held GPUs in it): the
    most any job had, the 99th percentile and the share preempted more than once; and the most
    any funded job had, which, and (with the log's ``detail`` column) why, by kind of reason
    (``preempt_reason_kind``; with ``starts``, the log's start rows in the window, also how
    many of its starts were unprotected because they landed on nodes drained for a gang:
    "started on draining nodes"). Unallocated work is preemptible backfill by design, and its
    losses count in ``preemption_lost_share``. A total alone hides thrashing: 1,000
    preemptions of 1,000 jobs are not 1,000 of one job. ``preempts`` marks the log's preempt
    rows in the window, ``job`` the job of each row; ``att_job`` each attempt's job."""
    counts = np.bincount(job[preempts], minlength=len(table))[: len(table)]
    ran_here = clipped(att["start_s"].to_numpy(), att["end_s"].to_numpy(), window) > 0
    ran = np.zeros(len(table), bool)
    ran[att_job[ran_here]] = True
    per_job = counts[ran]
    funded = np.where(table["leaf"].to_numpy() >= 0, counts, 0)
    worst = int(np.argmax(funded)) if len(funded) else 0
    reasons: dict[str, int] = {}
    if detail is not None and len(funded) and funded[worst]:
        texts, mine = detail.to_numpy(object), job == worst
        for text in texts[preempts & mine]:
            kind = preempt_reason_kind(preempt_reason(text))
            reasons[kind] = reasons.get(kind, 0) + 1
        if starts is not None:
            drained = sum(text.startswith(DRAIN_NOTE) for text in texts[starts & mine])
            if drained:
                reasons[DRAINED_STARTS] = drained
    return {
        "preemptions_per_job_max": int(per_job.max()) if len(per_job) else 0,
        "preemptions_per_job_p99": float(np.percentile(per_job, 99)) if len(per_job) else math.nan,
        "preempted_repeatedly_share": float((per_job > 1).mean()) if len(per_job) else math.nan,
        "funded_preemptions_per_job_max": int(funded[worst]) if len(funded) else 0,
        "most_preempted_funded_job": str(table["job_id"].iloc[worst])
        if len(funded) and funded[worst]
        else None,
        "most_preempted_funded_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
    }


def preempt_reason_kind(reason: str) -> str:
    """The kind of a preemption's reason, as the policies word them: "fair share" (impactful's
    no ping-pong swap), "interactive reserve" (a borrower of the reserve yields to debug work),
    "drain" (unprotected work on nodes drained for a gang), "backfill" (unallocated work),
    "priority" (legacy), or "other" (a plug-in's own words)."""
    if reason.startswith("fair share"):
        return "fair share"
    if reason == RESERVE_REASON:
        return "interactive reserve"
    if reason == DRAIN_REASON:
        return "drain"
    if reason == BACKFILL_REASON:
        return "backfill"
    if reason.startswith("priority"):
        return "priority"
    return "other"


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


#: p50/p90/p99 (None when the sample is empty) and "n", the size of the sample.
Percentiles = dict[str, float | int | None]


def percentiles(values: pd.Series) -> Percentiles:
    """p50/p90/p99 and count of a sample (None when empty)."""
    return _percentiles(values.to_numpy(dtype=float))


def _percentiles(values: np.ndarray) -> Percentiles:
    """``percentiles`` of an array of floats."""
    if len(values) == 0:
        return {"p50": None, "p90": None, "p99": None, "n": 0}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "n": len(values)}


def size_bucket(gpus: pd.Series) -> pd.Series:
    """Gang-size bucket labels: 1, 2-8, 9-64, 65+."""
    labels = pd.Series("", index=gpus.index, dtype=object)
    for lo, hi, name in SIZE_BUCKETS:
        labels[(gpus >= lo) & (gpus <= hi)] = name
    return labels


def wait_stats(
    table: pd.DataFrame, window: Window, column: str = "wait_s"
) -> tuple[dict[str, Percentiles], dict[str, Percentiles]]:
    """Waits of jobs submitted in the window (first-start ``wait_s``, or total ``queued_s``
    including requeues): overall, by kind and by size bucket."""
    return _wait_stats(table, window, (column,))[column]


def _wait_stats(
    table: pd.DataFrame, window: Window, columns: tuple[str, ...]
) -> dict[str, tuple[dict[str, Percentiles], dict[str, Percentiles]]]:
    """``wait_stats`` of several columns, the jobs grouped once: kinds in sorted order, size
    buckets in order of first appearance (as ``groupby`` orders them)."""
    inside = _submitted_in(table, window)
    kind, kinds = pd.factorize(table["kind"].to_numpy(object)[inside], sort=True)
    gpus = table["gpus"].to_numpy()[inside]
    labels = np.full(len(gpus), "", dtype=object)
    for lo, hi, name in SIZE_BUCKETS:
        labels[(gpus >= lo) & (gpus <= hi)] = name
    size, sizes = pd.factorize(labels)
    out = {}
    for column in columns:
        values = table[column].to_numpy(dtype=float)[inside]
        by_kind = {str(k): _percentiles(values[kind == i]) for i, k in enumerate(kinds)}
        by_size = {str(b): _percentiles(values[size == i]) for i, b in enumerate(sizes)}
        out[column] = ({"all": _percentiles(values), **by_kind}, by_size)
    return out


def submitted_in(table: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Rows of the per-job table submitted in the reporting window (whose waits are reported)."""
    return table[_submitted_in(table, window)]


def _submitted_in(table: pd.DataFrame, window: Window) -> np.ndarray:
    """``submitted_in`` as a mask."""
    submit = table["submit_s"].to_numpy()
    return (submit >= window.t0) & (submit < window.t1)


def queue_lengths(
    events: pd.DataFrame, at_s: np.ndarray, kinds: EventKinds | None = None
) -> np.ndarray:
    """Queued jobs (submitted or requeued, not yet started or withdrawn) just after each time
    ``at_s`` (events at that very time counted)."""
    kinds = _event_kinds(events, kinds)
    step_of = np.zeros(len(kinds.names) + 1, int)  # per code (and one for events not logged)
    for name, step in QUEUE_DELTA.items():
        step_of[kinds.code(name)] = step
    delta = step_of[kinds.codes]
    moves = delta != 0
    level = np.cumsum(delta[moves])
    seen = np.searchsorted(
        events["t_s"].to_numpy(float)[moves], at_s, side="right"
    )  # the log is in time order
    return np.where(seen > 0, level[np.maximum(seen - 1, 0)] if len(level) else 0, 0)


def backlog(
    events: pd.DataFrame, window: Window, jobs: int, kinds: EventKinds | None = None
) -> dict[str, object]:
    """The queue at the start of the window and at the end of each quarter of it
    (``queue_quarters``), the share of the run's ``jobs`` still queued at its end, and whether it
    grew through the whole window (see ``BACKLOG_GROWTH``)."""
    quarters = queue_lengths(events, window.t0 + window.span_s * np.arange(5) / 4, kinds)
    rising = bool(np.all(np.diff(quarters) > 0))
    end, start = int(quarters[-1]), int(quarters[0])
    growing = rising and end >= max(BACKLOG_GROWTH * start, BACKLOG_MIN_JOBS)
    return {
        "queued_at_start": start,
        "queued_at_end": end,
        "queued_at_end_share": _ratio(end, jobs),
        "queue_quarters": [int(q) for q in quarters],
        "backlog_growing": growing,
    }


def withdrawals(table: pd.DataFrame, duration_s: np.ndarray) -> dict[str, object]:
    """Jobs that gave up waiting (withdrawn when their patience ran out): how many, and of the
    funded jobs (whose owed demand leaves with them) how many, their share of the funded jobs
    and their share of the funded work asked for (GPUs x run time, ``duration_s`` per row of
    ``table``)."""
    withdrawn = _equals(table["state"], "withdrawn")
    funded = table["leaf"].to_numpy(int) >= 0
    work = table["gpus"].to_numpy(float) * duration_s
    return {
        "withdrawn": int(withdrawn.sum()),
        "withdrawn_funded": int((withdrawn & funded).sum()),
        "withdrawn_funded_share": _ratio((withdrawn & funded).sum(), funded.sum()),
        "withdrawn_funded_work_share": _ratio(work[withdrawn & funded].sum(), work[funded].sum()),
    }


def jain(x: np.ndarray) -> float:
    """Jain's fairness index: 1 when all equal (all zero included), 1/n when one takes
    everything; NaN (undefined) over nothing."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return math.nan
    if not (x**2).sum():
        return 1.0
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def summarise(
    events: pd.DataFrame,
    trace: pd.DataFrame,
    tree: BudgetTree,
    window: Window,
    gpus_per_node: int,
    horizon_s: float,
    att: pd.DataFrame | None = None,
    down: pd.DataFrame | None = None,
    kinds: EventKinds | None = None,
    job: np.ndarray | None = None,
) -> tuple[dict[str, object], pd.DataFrame, pd.DataFrame]:
    """The run's headline metrics, its per-job table and its per-budget-node table. ``att``,
    ``down``, ``kinds`` and ``job`` are ``attempts(events, horizon_s)``,
    ``down_intervals(events, horizon_s)``, ``EventKinds.of(events)`` and ``run_job_codes(events,
    trace, horizon_s)`` when the caller has them already.

    Jobs are integer codes throughout (``job_codes``: rows of the per-job table), so that joins
    and groupings by job are array lookups rather than searches of string ids."""
    submitted = _submitted(trace, horizon_s)
    job = job_codes(events["job_id"], submitted["job_id"]) if job is None else job
    kinds = _event_kinds(events, kinds)
    att = attempts(events, horizon_s, job, kinds) if att is None else att
    down = down_intervals(events, horizon_s, kinds) if down is None else down
    away = away_intervals(events, submitted, kinds, job)
    table = _job_table(events, submitted, job, att, horizon_s, kinds, away)
    table["leaf"] = tree.leaves_for(table["project"], table["user"])  # -1: unallocated
    keys = Keys(job, job[kinds.mask(Ev.START)], table["kind"].to_numpy(object), kinds)
    att_leaf = table["leaf"].to_numpy(int)[keys.att_job]
    healthy = healthy_gpu_s(events, window, gpus_per_node, kinds)
    held_s = held_gpu_s(att, down, window, gpus_per_node)
    funded = att_leaf >= 0
    budget = owed_and_delivered(
        events,
        table,
        att_leaf,
        held_s,
        tree,
        window,
        gpus_per_node,
        useful_held_gpu_s(att, held_s, window),
        kinds,
        away,
    )
    leaves = budget[budget["leaf"]]
    owed = leaves["owed_gpu_s"].to_numpy()
    got = np.minimum(leaves["delivered_gpu_s"].to_numpy(), owed)
    stats = _wait_stats(table, window, ("wait_s", "queued_s"))
    (waits, by_size), queued = stats["wait_s"], stats["queued_s"][0]
    preempts = _in_window(events, window) & kinds.mask(Ev.PREEMPT)
    entitled = leaves["entitled_gpu_s"].sum()
    strict = _ratio(np.minimum(leaves["delivered_gpu_s"], leaves["entitled_gpu_s"]).sum(), entitled)
    resubmitted = _resubmitted(events, job, kinds)
    summary = {
        "jobs": len(table),
        "availability": _ratio(healthy, window.capacity * window.span_s),
        "occupancy": _ratio(held_s.sum(), healthy),
        "occupancy_funded": _ratio(held_s[funded].sum(), healthy),
        "occupancy_unallocated": _ratio(held_s[~funded].sum(), healthy),
        "utilization": _ratio(_useful_gpu_s(att, table, keys.att_job, window), healthy),
        "impact": float(budget["impact"].iloc[ROOT]),  # the root row: one definition of impact
        "impact_useful": float(budget["impact_useful"].iloc[ROOT]),
        "impact_strict": float(strict),
        "unallocated_share": _ratio(held_s[~funded].sum(), held_s.sum()),
        "preemptions": int(preempts.sum()),
        "lost_gpu_hours": lost_to(att, Ev.PREEMPT, window) / 3600.0,
        "preemption_lost_share": _ratio(wasted_gpu_s(att, window, Ev.PREEMPT).sum(), held_s.sum()),
        **preemption_spread(
            job,
            att,
            keys.att_job,
            table,
            window,
            preempts,
            events["detail"],
            _in_window(events, window) & kinds.mask(Ev.START),
        ),
        "jain": jain(got[owed > 0] / owed[owed > 0]),
        "requested_ratio": _requested_ratio(table, away, window, gpus_per_node),
        **withdrawals(table, submitted["duration_s"].to_numpy(float)),
        **backlog(events, window, len(table), kinds),
        **session_summary(events, keys, att, resubmitted, window),
        **health_summary(events, att, window, horizon_s, down, kinds),
        **maintenance_summary(events, gpus_per_node, horizon_s, kinds, att, down),
        "preemptions_by_kind": {
            str(k): int(n)
            for k, n in pd.Series(keys.kind[job[preempts]]).value_counts().sort_index().items()
        },
        "wait_s": waits,
        "wait_by_size_s": by_size,
        "by_kind": {
            row.pop("kind"): row
            for row in by_kind(
                events, keys, att, table, held_s, resubmitted, window, waits, queued
            ).to_dict("records")
        },
        "queued_s": queued,
    }
    return (
        {k: (float(v) if isinstance(v, np.floating) else v) for k, v in summary.items()},
        table,
        budget,
    )


def _ratio(part: float, whole: float) -> float:
    """``part / whole``, or NaN (undefined) when there is nothing to divide by: a window with no
    healthy GPU, nothing owed or nothing delivered has no occupancy, impact or share, and
    reporting 0 or 1 would read as a result."""
    return float(part / whole) if whole else math.nan


def _useful_gpu_s(
    att: pd.DataFrame, table: pd.DataFrame, att_job: np.ndarray, window: Window
) -> float:
    """GPU-seconds of real progress: no restart overhead, no lost work, scaled by util (the
    requested GPUs and util of each attempt's job, ``att_job`` its row in ``table``)."""
    util = table["util"].to_numpy()[att_job]
    gpus = table["gpus"].to_numpy()[att_job]
    start = att["start_s"].to_numpy() + att["overhead_s"].to_numpy()
    end = att["end_s"].to_numpy() - att["lost_s"].to_numpy()
    return float((clipped(start, end, window) * gpus * util).sum())


def _requested_ratio(
    table: pd.DataFrame,
    away: tuple[np.ndarray, np.ndarray, np.ndarray],
    window: Window,
    gpus_per_node: int,
) -> float:
    """Time-averaged GPUs wanted by queued + running jobs / capacity (policy-dependent); a
    killed session wants none while its user is away (``away``: ``away_intervals``)."""
    start, stop, sign, row = _wanting(table, away, window)
    held = sign * held_of(table["gpus"].to_numpy()[row], gpus_per_node)
    return float((held * clipped(start, stop, window)).sum() / (window.capacity * window.span_s))


# ----- sessions: kills and resubmissions -----------------------------------------------------
def session_summary(
    events: pd.DataFrame, keys: Keys, att: pd.DataFrame, resubmitted: np.ndarray, window: Window
) -> dict[str, object]:
    """Interactive sessions in the window: kills (count, and share of the sessions that ran),
    GPU-hours lost to their preemptions and cut by kills never resubmitted, and the wait after
    a resubmission (``resubmitted``: ``_resubmitted(events, keys.job)``)."""
    session = keys.kind[keys.att_job] == SESSION
    inside = _in_window(events, window)
    kinds = _event_kinds(events, keys.event)
    kills = inside & kinds.mask(Ev.KILL)
    return {
        "sessions_killed": int(kills.sum()),
        "sessions_killed_share": _ratio(
            _distinct(keys.job[kills]), _distinct(keys.att_job[session & _ran_in(att, window)])
        ),
        "session_lost_gpu_hours": float(_lost_gpu_s(att, Ev.PREEMPT, window)[session].sum())
        / 3600.0,
        "session_cut_gpu_hours": cut_gpu_s(events, np.flatnonzero(kills), resubmitted) / 3600.0,
        "resubmits": int((inside & kinds.mask(Ev.RESUBMIT)).sum()),
        "resubmit_wait_s": percentiles(resubmit_waits(events, window, keys.job, kinds)),
    }


def _in_window(events: pd.DataFrame, window: Window) -> np.ndarray:
    """Rows of the log inside the window."""
    t = events["t_s"].to_numpy()
    return (t >= window.t0) & (t < window.t1)


def _ran_in(att: pd.DataFrame, window: Window) -> np.ndarray:
    """Attempts that ran some time inside the window."""
    return ((att["end_s"] > window.t0) & (att["start_s"] < window.t1)).to_numpy()


def _distinct(codes: np.ndarray) -> int:
    """How many different jobs."""
    return len(np.unique(codes))


def cut_gpu_s(events: pd.DataFrame, kills: np.ndarray, resubmitted: np.ndarray) -> float:
    """GPU-seconds of session time cut by the kills (``kills``: positions of rows of the log, in
    order) and never had: the sessions their users did not submit again (``resubmitted``, per row)."""
    cut = kills[~resubmitted[kills]]
    return float((events["gpus"].to_numpy()[cut] * events["lost_s"].to_numpy()[cut]).sum())


def _resubmitted(events: pd.DataFrame, job: np.ndarray, kinds: EventKinds) -> np.ndarray:
    """Per row of the log: a kill whose session was submitted again later (before the end)."""
    rows = np.flatnonzero(kinds.mask(Ev.KILL, Ev.RESUBMIT))
    following = _take(kinds.codes[rows], next_row(job[rows]), -1) == kinds.code(Ev.RESUBMIT)
    out = np.zeros(len(events), bool)
    out[rows] = following
    return out


def resubmit_waits(
    events: pd.DataFrame,
    window: Window,
    job: np.ndarray | None = None,
    kinds: EventKinds | None = None,
) -> pd.Series:
    """Seconds from each resubmission in the window to the session's next start (or its
    withdrawal, or the end of the run), indexed by the resubmission's row of the log. ``job``
    is ``job_codes`` of the log's rows, ``kinds`` its ``EventKinds``."""
    job = job_codes(events["job_id"]) if job is None else job
    kinds = _event_kinds(events, kinds)
    rows = np.flatnonzero(kinds.mask(Ev.RESUBMIT, Ev.START, Ev.WITHDRAW))
    t = events["t_s"].to_numpy()[rows]
    nxt = _take(t, next_row(job[rows]), window.t1)
    back = (kinds.codes[rows] == kinds.code(Ev.RESUBMIT)) & (t >= window.t0) & (t < window.t1)
    return pd.Series((nxt - t)[back], index=events.index[rows[back]])


def by_kind(
    events: pd.DataFrame,
    keys: Keys,
    att: pd.DataFrame,
    table: pd.DataFrame,
    held_s: np.ndarray,
    resubmitted: np.ndarray,
    window: Window,
    waits: dict[str, Percentiles] | None = None,
    queued: dict[str, Percentiles] | None = None,
) -> pd.DataFrame:
    """One row per kind of job: jobs submitted in the window and how they ended, preemptions and
    kills in the window (counts, and shares of the jobs that ran in it), GPU-hours held, lost to
    preemption and cut by kills, and first-start and queued waits (``waits`` and ``queued``:
    ``wait_stats`` by kind of ``wait_s`` and ``queued_s`` when the caller has them)."""
    waits = wait_stats(table, window)[0] if waits is None else waits
    queued = wait_stats(table, window, "queued_s")[0] if queued is None else queued
    code, kinds = pd.factorize(keys.kind, sort=True)
    att_code, ran, lost = (
        code[keys.att_job],
        _ran_in(att, window),
        _lost_gpu_s(att, Ev.PREEMPT, window),
    )
    event = _event_kinds(events, keys.event)
    hit = np.flatnonzero(_in_window(events, window) & event.mask(Ev.PREEMPT, Ev.KILL))
    hit_job, hit_event = keys.job[hit], event.codes[hit]
    hit_code = code[hit_job]
    mine = _submitted_in(table, window)
    state = table["state"].to_numpy(object)
    finished, withdrawn = mine & (state == "finished"), mine & (state == "withdrawn")
    none = percentiles(pd.Series([], dtype=float))
    rows = []
    for i, k in enumerate(kinds):
        jobs, ran_jobs = mine & (code == i), _distinct(keys.att_job[ran & (att_code == i)])
        preempts, kills = (
            (hit_code == i) & (hit_event == event.code(Ev.PREEMPT)),
            (hit_code == i) & (hit_event == event.code(Ev.KILL)),
        )
        rows.append(
            {
                "kind": k,
                "jobs": int(jobs.sum()),
                "finished": int((finished & (code == i)).sum()),
                "withdrawn": int((withdrawn & (code == i)).sum()),
                "ran": ran_jobs,
                "preemptions": int(preempts.sum()),
                "preempted_share": _ratio(_distinct(hit_job[preempts]), ran_jobs),
                "killed": int(kills.sum()),
                "killed_share": _ratio(_distinct(hit_job[kills]), ran_jobs),
                "gpu_hours": float(held_s[att_code == i].sum()) / 3600.0,
                "lost_gpu_hours": float(lost[att_code == i].sum()) / 3600.0,
                "cut_gpu_hours": cut_gpu_s(events, hit[kills], resubmitted) / 3600.0,
                "wait_p50_s": waits.get(k, none)["p50"],
                "wait_p90_s": waits.get(k, none)["p90"],
                "queued_p90_s": queued.get(k, none)["p90"],
            }
        )
    return pd.DataFrame(rows, columns=KIND_COLUMNS)


KIND_COLUMNS = [
    "kind",
    "jobs",
    "finished",
    "withdrawn",
    "ran",
    "preemptions",
    "preempted_share",
    "killed",
    "killed_share",
    "gpu_hours",
    "lost_gpu_hours",
    "cut_gpu_hours",
    "wait_p50_s",
    "wait_p90_s",
    "queued_p90_s",
]


# ----- availability: the node events ---------------------------------------------------------
def down_intervals(
    events: pd.DataFrame, horizon_s: float, kinds: EventKinds | None = None
) -> pd.DataFrame:
    """One row per failure: node, down_s, up_s (the horizon if still under repair), repair."""
    return _intervals(events, horizon_s, _event_kinds(events, kinds), Ev.NODE_DOWN, Ev.NODE_UP)


def out_of_service(
    events: pd.DataFrame,
    horizon_s: float,
    kinds: EventKinds | None = None,
    down: pd.DataFrame | None = None,
    closed: bool = False,
) -> pd.DataFrame:
    """When each node was out of service: node, down_s, up_s, sorted by node and time, the spans
    of one node disjoint. A node is out while it is down for a repair (``down_intervals``) or
    for planned maintenance (up_s the horizon if not back by then); a node that fails while it
    is taken for maintenance is out once, not twice. ``closed``: planned maintenance counts from
    its announcement on (a cordoned node takes no new job), as for the GPUs a job could be
    given. ``down``: ``down_intervals(events, horizon_s)`` when the caller has it."""
    kinds = _event_kinds(events, kinds)
    down = down_intervals(events, horizon_s, kinds) if down is None else down
    went = Ev.CORDON if closed else Ev.MAINT_DOWN
    planned = _intervals(events, horizon_s, kinds, went, Ev.MAINT_UP)
    return merged_spans(pd.concat([down, planned], ignore_index=True))


def merged_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """``spans`` (node, down_s, up_s) with the spans of each node that overlap or touch merged
    into one: node, down_s, up_s, sorted by node and time."""
    spans = spans.sort_values(["node", "down_s"], kind="stable")
    node, down_s = spans["node"].to_numpy(int), spans["down_s"].to_numpy(float)
    up_s = spans["up_s"].to_numpy(float)
    reach = spans.groupby("node", sort=False)["up_s"].cummax().to_numpy(float)  # latest end so far
    new = np.ones(len(spans), bool)
    new[1:] = (node[1:] != node[:-1]) | (down_s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    return pd.DataFrame(
        {
            "node": node[first],
            "down_s": down_s[first],
            "up_s": np.maximum.reduceat(up_s, first) if len(first) else up_s[:0],
        }
    )


def _intervals(
    events: pd.DataFrame, horizon_s: float, kinds: EventKinds, went: str, back: str
) -> pd.DataFrame:
    """One row per ``went`` row of one node: node, down_s, up_s (its matching ``back`` row, or
    the horizon) and repair (that row's ``repair=`` detail, "open" if none)."""
    downs, ups = events[kinds.mask(went)], events[kinds.mask(back)]
    node = downs["nodes"].to_numpy().astype(int)
    match = nth_match(
        node, ups["nodes"].to_numpy().astype(int)
    )  # a node's k-th return ends its k-th time down
    repair = np.array([detail.removeprefix("repair=") for detail in ups["detail"]], dtype=object)
    return pd.DataFrame(
        {
            "node": node,
            "down_s": downs["t_s"].to_numpy(),
            "up_s": _take(ups["t_s"].to_numpy(), match, horizon_s),
            "repair": _take(repair, match, "open"),
        }
    )


def held_gpu_s(
    att: pd.DataFrame, down: pd.DataFrame, window: Window, gpus_per_node: int
) -> np.ndarray:
    """GPU-seconds each attempt held inside the window on healthy nodes. Time on a failed node
    (manual repair: jobs land there until a person drains it) is not occupancy."""
    held = att["gpus"].to_numpy() * clipped(
        att["start_s"].to_numpy(), att["end_s"].to_numpy(), window
    )
    pairs = down_overlaps(att, down, gpus_per_node)
    lost = pairs["gpus"].to_numpy() * clipped(
        pairs["start_s"].to_numpy(), pairs["end_s"].to_numpy(), window
    )
    return held - np.bincount(pairs["attempt"].to_numpy(int), weights=lost, minlength=len(att))


def down_overlaps(att: pd.DataFrame, down: pd.DataFrame, gpus_per_node: int) -> pd.DataFrame:
    """Where attempts ran on a node while it was down: attempt (position in ``att``), row
    (position in ``down``), start_s, end_s (end >= start) and the GPUs the attempt held on that
    node. ``down`` may be any intervals of nodes: node, down_s, up_s. Only the attempts that ran
    while some node was down are split into their nodes (most attempts never meet one)."""
    down_s, up_s = down["down_s"].to_numpy(float), down["up_s"].to_numpy(float)
    start, end = att["start_s"].to_numpy(float), att["end_s"].to_numpy(float)
    met = np.zeros(len(att), bool)
    if len(down):  # the union of all spans, whichever node: [lo[k], hi[k]] sorted and disjoint
        union = merged_spans(pd.DataFrame({"node": 0, "down_s": down_s, "up_s": up_s}))
        lo, hi = union["down_s"].to_numpy(), union["up_s"].to_numpy()
        k = np.searchsorted(hi, start)  # the first span that ends at or after the start
        met = k < len(hi)
        met[met] = lo[k[met]] <= end[met]
    near = np.flatnonzero(met)
    rows = pd.DataFrame(
        {
            "attempt": near,
            "node": att["nodes"].to_numpy(object)[near],
            "start_s": start[near],
            "end_s": end[near],
            "share": np.minimum(att["gpus"].to_numpy()[near], gpus_per_node),
        }
    )
    rows = rows.assign(node=rows["node"].str.split(",")).explode("node")
    rows["node"] = rows["node"].astype(int)
    spans = pd.DataFrame(
        {
            "node": down["node"].to_numpy(int),
            "down_s": down_s,
            "up_s": up_s,
            "row": range(len(down)),
        }
    )
    pairs = rows.merge(spans, on="node")
    start = np.maximum(pairs["start_s"].to_numpy(float), pairs["down_s"].to_numpy(float))
    end = np.minimum(pairs["end_s"].to_numpy(float), pairs["up_s"].to_numpy(float))
    met = end >= start
    return pd.DataFrame(
        {
            "attempt": pairs["attempt"].to_numpy(int)[met],
            "row": pairs["row"].to_numpy(int)[met],
            "start_s": start[met],
            "end_s": end[met],
            "gpus": pairs["share"].to_numpy(dtype=float)[met],
        }
    )


def health_summary(
    events: pd.DataFrame,
    att: pd.DataFrame,
    window: Window,
    horizon_s: float,
    down: pd.DataFrame | None = None,
    kinds: EventKinds | None = None,
) -> dict[str, object]:
    """Failures, repairs by kind, jobs hit and GPU-hours lost to failures, inside the window
    (``down``: ``down_intervals(events, horizon_s)`` when the caller has it)."""
    kinds = _event_kinds(events, kinds)
    down = down_intervals(events, horizon_s, kinds) if down is None else down
    began = down[(down["down_s"] >= window.t0) & (down["down_s"] < window.t1)]
    done = down[
        (down["up_s"] >= window.t0) & (down["up_s"] < window.t1) & (down["repair"] != "open")
    ]
    fails = events[kinds.mask(Ev.FAIL) & _in_window(events, window)]
    return {
        "node_failures": len(began),
        "human_repairs": int((done["repair"] == "human").sum()),
        "auto_repairs": int((done["repair"] == "automatic").sum()),
        "jobs_hit": int(fails["job_id"].nunique()),
        "failure_lost_gpu_hours": lost_to(att, Ev.FAIL, window) / 3600.0,
    }


def lost_to(att: pd.DataFrame, cause: str, window: Window) -> float:
    """GPU-seconds lost to one cause: progress lost by attempts it ended, and the restart
    overhead paid by the attempts that followed them."""
    return float(_lost_gpu_s(att, cause, window).sum())


def _lost_gpu_s(att: pd.DataFrame, cause: str, window: Window) -> np.ndarray:
    """``lost_to`` per attempt."""
    start, end = att["start_s"].to_numpy(), att["end_s"].to_numpy()
    lost = np.where(att["ended_by"] == cause, att["lost_s"].to_numpy(), 0.0)
    overhead = np.where(
        att["restart_after"] == cause, np.minimum(att["overhead_s"].to_numpy(), end - start), 0.0
    )
    seconds = clipped(end - lost, end, window) + clipped(start, start + overhead, window)
    return seconds * att["gpus"].to_numpy()


def health_series(
    events: pd.DataFrame,
    capacity: int,
    gpus_per_node: int,
    horizon_s: float,
    bucket_s: float = 3600.0,
) -> pd.DataFrame:
    """Per time bucket: mean healthy GPUs in service (nodes down for repair or for planned
    maintenance are not), failures, and repairs by kind (for charts)."""
    edges = np.arange(0.0, horizon_s + bucket_s, bucket_s)
    edges[-1] = min(edges[-1], horizon_s) if len(edges) > 1 else horizon_s
    down = down_intervals(events, horizon_s)
    lost = np.zeros(len(edges) - 1)
    gone = out_of_service(events, horizon_s, down=down)
    for d, u in zip(gone["down_s"], gone["up_s"]):
        lost += gpus_per_node * np.clip(
            np.minimum(edges[1:], u) - np.maximum(edges[:-1], d), 0, None
        )
    width = np.diff(edges)

    def count(t: np.ndarray) -> np.ndarray:
        bucket = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(width) - 1)
        return np.bincount(bucket, minlength=len(width)) if len(t) else np.zeros(len(width), int)

    return pd.DataFrame(
        {
            "t_s": edges[:-1],
            "healthy_gpus": capacity - lost / width,
            "failures": count(down["down_s"].to_numpy()),
            "auto_repairs": count(down.loc[down["repair"] == "automatic", "up_s"].to_numpy()),
            "human_repairs": count(down.loc[down["repair"] == "human", "up_s"].to_numpy()),
        }
    )


# ----- planned maintenance ---------------------------------------------------------------------
def window_name(detail: str) -> str:
    """The maintenance window a node or eviction row belongs to (``maintenance=<name>; ...``)."""
    return detail.removeprefix("maintenance=").partition(";")[0]


def maintenance_table(
    events: pd.DataFrame,
    gpus_per_node: int,
    horizon_s: float,
    kinds: EventKinds | None = None,
    att: pd.DataFrame | None = None,
    down: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per node and maintenance window: when it was announced (``cordon``), when its
    last job left (``vacated``), when it went down and came back (NaN if not by the horizon),
    hours from announcement to free (``free_h``; NaN while not free), the jobs evicted from it
    and the work they lost, and the GPU-hours it stood idle but closed, from the announcement
    until it went down (or the horizon): its GPUs no job held while it drained, and all of them
    once empty (``idle_gpu_hours``; time it was down meanwhile, for a repair or an earlier
    window, is not idle). Whole run: maintenance is planned for given times, so it is reported
    whether or not it falls in the reporting window. ``att``: ``attempts(events, horizon_s)``
    and ``down``: ``down_intervals(events, horizon_s)`` when the caller has them."""
    kinds = _event_kinds(events, kinds)
    columns = [
        "window", "node", "announced_s", "vacated_s", "down_s", "up_s", "free_h",
        "evicted", "evicted_lost_gpu_hours", "idle_gpu_hours",
    ]  # fmt: skip
    cordons = events[kinds.mask(Ev.CORDON)]
    if cordons.empty:
        return pd.DataFrame({c: [] for c in columns})
    rows = []
    # Each node event's times by (node, window), in log (time) order; each eviction's lost
    # GPU-seconds by (window, node), for every node it left
    steps = {ev: _times_by_node_and_window(events, kinds, ev) for ev in _NODE_STEPS}
    evicts = events[kinds.mask(Ev.EVICT)]
    lost_by: dict[tuple[str, int], list[float]] = defaultdict(list)
    for nodes, detail, lost_s, gpus in zip(
        evicts["nodes"], evicts["detail"], evicts["lost_s"], evicts["gpus"]
    ):
        for n in {int(x) for x in str(nodes).split(",")}:
            lost_by[window_name(detail), n].append(float(lost_s) * float(gpus))
    for t0, node_text, detail in zip(cordons["t_s"], cordons["nodes"], cordons["detail"]):
        node, name = int(node_text), window_name(detail)
        times = {}
        for ev, by in steps.items():  # the window's first of each on the node
            seen = by.get((node_text, name), [])
            k = bisect.bisect_left(seen, t0)
            times[ev] = seen[k] if k < len(seen) else math.nan
        lost = lost_by.get((name, node), [])
        vacated, went_down = times[Ev.VACATED], times[Ev.MAINT_DOWN]
        rows.append(
            {
                "window": name,
                "node": node,
                "announced_s": float(t0),
                "vacated_s": vacated,
                "down_s": went_down,
                "up_s": times[Ev.MAINT_UP],
                "free_h": (vacated - t0) / 3600.0,
                "evicted": len(lost),
                "evicted_lost_gpu_hours": float(np.sum(np.asarray(lost, float))) / 3600.0,
            }
        )
    table = pd.DataFrame(rows, columns=columns)
    table["idle_gpu_hours"] = (
        _closed_idle_gpu_s(events, table, gpus_per_node, horizon_s, kinds, att, down) / 3600.0
    )
    return table


#: The node events of a maintenance window after its announcement, in the order they happen.
_NODE_STEPS = (Ev.VACATED, Ev.MAINT_DOWN, Ev.MAINT_UP)


def _times_by_node_and_window(
    events: pd.DataFrame, kinds: EventKinds, event: str
) -> dict[tuple[str, str], list[float]]:
    """The times of the ``event`` rows of nodes, by (node as logged, window), in log order."""
    rows = events[kinds.mask(event)]
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for t, node, detail in zip(rows["t_s"], rows["nodes"], rows["detail"]):
        by[node, window_name(detail)].append(float(t))
    return by


def _closed_idle_gpu_s(
    events: pd.DataFrame,
    table: pd.DataFrame,
    gpus_per_node: int,
    horizon_s: float,
    kinds: EventKinds,
    att: pd.DataFrame | None,
    down: pd.DataFrame | None,
) -> np.ndarray:
    """Per row of a ``maintenance_table``: GPU-seconds its node stood closed and idle, from the
    announcement until it went down (or the horizon), while it was in service (not down for a
    repair or for an earlier window) and no job held them."""
    closed = pd.DataFrame(
        {
            "node": table["node"].to_numpy(int),
            "down_s": table["announced_s"].to_numpy(float),
            "up_s": table["down_s"].fillna(horizon_s).to_numpy(float),
            "row": np.arange(len(table)),
        }
    )
    gone = out_of_service(events, horizon_s, kinds, down)  # disjoint spans per node
    pairs = closed.merge(gone, on="node", suffixes=("", "_out"))
    start = np.maximum(pairs["down_s"].to_numpy(), pairs["down_s_out"].to_numpy())
    end = np.minimum(pairs["up_s"].to_numpy(), pairs["up_s_out"].to_numpy())
    met = end > start
    out = pd.DataFrame(  # the closed time each row's node was out of service
        {
            "node": pairs["node"].to_numpy(int)[met],
            "down_s": start[met],
            "up_s": end[met],
            "row": pairs["row"].to_numpy(int)[met],
        }
    )
    out_s = np.bincount(out["row"], (out["up_s"] - out["down_s"]).to_numpy(), len(closed))
    in_service_s = (closed["up_s"] - closed["down_s"]).to_numpy() - out_s
    # GPU-seconds jobs held on the node while closed, less while it was out of service: one pass
    spans = pd.concat([closed, out], ignore_index=True)
    sign = np.r_[np.ones(len(closed)), -np.ones(len(out))]
    att = attempts(events, horizon_s, kinds=kinds) if att is None else att
    held = down_overlaps(att, spans, gpus_per_node)
    span = held["row"].to_numpy(int)
    gpu_s = (held["end_s"] - held["start_s"]).to_numpy() * held["gpus"].to_numpy() * sign[span]
    held_s = np.bincount(spans["row"].to_numpy(int)[span], gpu_s, len(closed))
    return np.maximum(gpus_per_node * in_service_s - held_s, 0.0)  # (rounding: never below 0)


def maintenance_summary(
    events: pd.DataFrame,
    gpus_per_node: int,
    horizon_s: float,
    kinds: EventKinds | None = None,
    att: pd.DataFrame | None = None,
    down: pd.DataFrame | None = None,
) -> dict[str, object]:
    """What planned maintenance cost (``maintenance_table`` summed): nodes taken, the longest
    and mean hours from announcement to a free node (a node still not free at the horizon counts
    until the horizon, and ``maintenance_unfreed`` says how many), jobs evicted and the work
    they lost, GPU-hours idle on closed nodes. Zero and NaN without a plan."""
    kinds = _event_kinds(events, kinds)
    table = maintenance_table(events, gpus_per_node, horizon_s, kinds, att, down)
    free_h = table["free_h"].fillna((horizon_s - table["announced_s"]) / 3600.0)
    evicts = events[kinds.mask(Ev.EVICT)]
    return {
        "maintenance_nodes": len(table),
        "maintenance_free_h_max": float(free_h.max()) if len(table) else math.nan,
        "maintenance_free_h_mean": float(free_h.mean()) if len(table) else math.nan,
        "maintenance_unfreed": int(table["vacated_s"].isna().sum()),
        "maintenance_evicted": len(evicts),
        "maintenance_lost_gpu_hours": float((evicts["lost_s"] * evicts["gpus"]).sum()) / 3600.0,
        "maintenance_idle_gpu_hours": float(table["idle_gpu_hours"].sum()),
    }
