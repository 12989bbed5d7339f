"""Philly (Microsoft, 2017): the derived CSV and the raw ``cluster_job_log`` JSON.

Derived CSV: ``timestamp`` (submit; seconds or a datetime), ``duration`` (s), ``num_gpus``,
``cluster`` (virtual cluster -> ``project``: it names a VC, not the physical cluster, so the
trace gets no ``cluster`` column); optional ``job_id``/``jobid``, ``user``, ``status``. Raw
JSON: a list of jobs with ``jobid, user, vc, submitted_time, status`` and
``attempts[].start_time/end_time/detail[].gpus``. A job's GPUs are the most any attempt held;
its duration is the run time summed over its attempts (the GPU time it held, retries
included); ``status`` (Pass / Killed / Failed) is kept as ``state``. Kinds are inferred.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace import TraceError
from .report import Loaded, LoadOptions
from .table import Rows, finish, numbers, read_table, read_text, text_column, times


def load_csv(path: Path, options: LoadOptions) -> Loaded:
    """Load the derived Philly CSV."""
    rows = read_table(path, str(path), options)
    rows.require("timestamp", "duration", "num_gpus")
    ids = next((c for c in ("job_id", "jobid") if c in rows.frame.columns), None)
    submit = times(rows, "timestamp")
    gpus = numbers(rows, "num_gpus")
    duration = numbers(rows, "duration")
    idx = rows.frame.index
    jobs = pd.DataFrame(
        {
            "job_id": text_column(rows, ids)
            if ids
            else pd.Series(idx.map(lambda i: f"philly-{i}"), index=idx),
            "submit": submit.loc[idx],
            "gpus": gpus.loc[idx],
            "duration_s": duration.loc[idx],
            "user": text_column(rows, "user", "unknown"),
            "project": text_column(rows, "cluster"),
        },
        index=idx,
    )
    state = text_column(rows, "status") if "status" in rows.frame.columns else None
    if state is not None:
        jobs["state"] = state
    return finish(rows, "philly", jobs, state=state)


def load_json(path: Path, options: LoadOptions) -> Loaded:
    """Load the raw Philly ``cluster_job_log`` (a JSON list of jobs)."""
    source = str(path)
    try:
        data = json.loads(read_text(path, source))
    except json.JSONDecodeError as err:
        raise TraceError(source, err.lineno, None, f"not valid JSON: {err.msg}") from None
    if not isinstance(data, list) or not all(isinstance(job, dict) for job in data):
        raise TraceError(source, None, None, "expected a JSON list of job objects")
    flat = [_flatten(job) for job in data]
    frame = pd.DataFrame(flat, index=pd.RangeIndex(0, len(data)))
    # (as given: a column of None and 4 would read 4.0)
    frame["bad_value"] = pd.Series([r["bad_value"] for r in flat], frame.index, dtype=object)
    rows = Rows(frame, source, options)
    if frame.empty:
        raise TraceError(source, None, None, "the job list is empty")
    rows.require("jobid", "submitted_time")
    for field, problem in frame["bad"].dropna().unique():  # (in the order they first occur)
        mask = (rows.frame["bad"] == (field, problem)).to_numpy()
        rows.bad(mask, field, problem, rows.frame["bad_value"])
    rows.skip((rows.frame["attempts"] == 0).to_numpy(), "never started (no attempts)")
    rows.skip(rows.frame["running"].to_numpy(), "unfinished (running at the snapshot)")
    rows.skip(rows.frame["untimed"].to_numpy(), "attempt without start or end time (logging error)")
    submit = times(rows, "submitted_time")
    rows.bad(submit.isna().to_numpy(), "submitted_time", "missing submit time")
    idx = rows.frame.index
    state = text_column(rows, "status")
    jobs = pd.DataFrame(
        {
            "job_id": text_column(rows, "jobid"),
            "submit": submit.loc[idx],
            "gpus": rows.frame["gpus"].astype(float),
            "duration_s": rows.frame["duration_s"],
            "user": text_column(rows, "user", "unknown"),
            "project": text_column(rows, "vc"),
            "state": state,
            "attempts": rows.frame["attempts"],
        },
        index=idx,
    )
    return finish(rows, "philly-json", jobs, state=state)


def _flatten(job: dict) -> dict:
    """One row per job: GPUs (most held by an attempt), summed run time, attempt flags; and
    ``bad``, (field, problem) where the nesting or a time is not what the log holds (else
    None), with no attempts counted."""
    row = {k: job.get(k) for k in ("jobid", "user", "vc", "status", "submitted_time")}
    try:
        return {**row, **_attempts(job), "bad": None, "bad_value": None}
    except _Malformed as err:
        field, problem, value = err.args
        none = {"attempts": 0, "gpus": 0, "duration_s": np.nan, "running": False}
        return {**row, **none, "untimed": False, "bad": (field, problem), "bad_value": value}


class _Malformed(Exception):
    """(field, problem, value) of a job whose attempts cannot be read."""


def _attempts(job: dict) -> dict:
    """The attempt fields of ``_flatten``'s row (``_Malformed`` if they cannot be read)."""
    attempts = _objects(job.get("attempts"), "attempts")
    for a in attempts:
        for field in ("start_time", "end_time"):
            value = a.get(field)
            if value not in (None, "") and _stamp(value) is None:
                raise _Malformed(f"attempts[].{field}", "not a time", value)
    starts = [_stamp(a.get("start_time")) for a in attempts]
    ends = [_stamp(a.get("end_time")) for a in attempts]
    gpus = []
    for a in attempts:
        held = 0
        for d in _objects(a.get("detail"), "attempts[].detail"):
            names = d.get("gpus") or []
            if not isinstance(names, list):
                raise _Malformed("attempts[].detail[].gpus", "not a list of GPU names", names)
            held += len(names)
        gpus.append(held)
    running = (
        bool(attempts)
        and attempts[-1].get("start_time") is not None
        and attempts[-1].get("end_time") is None
    )
    untimed = any(s is None or e is None for s, e in zip(starts, ends)) and not running
    run_s = sum((e - s) for s, e in zip(starts, ends) if s is not None and e is not None)
    return {
        "attempts": len(attempts),
        "gpus": max(gpus, default=0),
        "duration_s": float(run_s) if attempts else np.nan,
        "running": running,
        "untimed": untimed,
    }


def _objects(value: object, field: str) -> list[dict]:
    """``value`` as a list of JSON objects (None or empty: none), else ``_Malformed``."""
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _Malformed(field, "not a list of objects", value)
    return value


def _stamp(value: object) -> float | None:
    """Seconds from a Philly time string (``2017-10-07 01:12:09``); None when absent or bad."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
