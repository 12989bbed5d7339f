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
    frame = pd.DataFrame([_flatten(job) for job in data], index=pd.RangeIndex(0, len(data)))
    rows = Rows(frame, source, options)
    if frame.empty:
        raise TraceError(source, None, None, "the job list is empty")
    rows.require("jobid", "submitted_time")
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
    """One row per job: GPUs (most held by an attempt), summed run time, attempt flags."""
    attempts = job.get("attempts") or []
    starts = [_stamp(a.get("start_time")) for a in attempts]
    ends = [_stamp(a.get("end_time")) for a in attempts]
    gpus = [sum(len(d.get("gpus") or []) for d in a.get("detail") or []) for a in attempts]
    running = (
        bool(attempts)
        and attempts[-1].get("start_time") is not None
        and attempts[-1].get("end_time") is None
    )
    untimed = any(s is None or e is None for s, e in zip(starts, ends)) and not running
    run_s = sum((e - s) for s, e in zip(starts, ends) if s is not None and e is not None)
    return {
        "jobid": job.get("jobid"),
        "user": job.get("user"),
        "vc": job.get("vc"),
        "status": job.get("status"),
        "submitted_time": job.get("submitted_time"),
        "attempts": len(attempts),
        "gpus": max(gpus, default=0),
        "duration_s": float(run_s) if attempts else np.nan,
        "running": running,
        "untimed": untimed,
    }


def _stamp(value: object) -> float | None:
    """Seconds from a Philly time string (``2017-10-07 01:12:09``); None when absent or bad."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
