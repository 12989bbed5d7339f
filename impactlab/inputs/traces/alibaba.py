"""Alibaba traces: PAI 2020 job + task tables, and the 2026 spot-GPU trace.

PAI 2020 (``cluster-trace-gpu-v2020``): ``pai_job_table.csv`` (``job_name, inst_id, user,
status, start_time, end_time``; start = submission) and ``pai_task_table.csv`` (``job_name,
task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``),
headerless as released; times in seconds. A job's GPUs = sum over its tasks of ``inst_num`` x
``ceil(plan_gpu / 100)`` (``plan_gpu`` is a percentage; each instance needs whole GPUs, so a
fraction rounds up); its run spans the earliest task start to the latest task end. Projects
are derived from users (seeded rule), kinds inferred, ``status`` kept as ``state``.

Spot 2026 (``cluster-trace-v2026-spot-gpu/job_info_df.csv``): ``job_name, organization,
gpu_model, cpu_request, gpu_request, worker_num, submit_time, duration, job_type``; times in
seconds from the first submission. GPUs = ``ceil(gpu_request)`` x ``worker_num``.
``job_type`` HP -> funded by ``org<organization>``, not preemptible under the legacy policy,
priority 1; Spot -> unallocated (empty project), preemptible, priority 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..trace import TraceError
from .infer import projects_from_users
from .report import Loaded, LoadOptions
from .table import Rows, finish, numbers, read_table, text_column, times

JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]
TASK_COLUMNS = [
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
]
PAI_FINISHED = {"Terminated", "Failed"}
SPOT_TYPES = {"hp": ("HP", False, 1), "spot": ("Spot", True, 0)}


def pai_paths(path: Path) -> tuple[Path, Path]:
    """The job and task tables: ``path`` is their directory or either table (the other one is
    beside it under its released name)."""
    folder = path if path.is_dir() else path.parent
    if path.is_file() and path.name != "pai_task_table.csv":
        return path, folder / "pai_task_table.csv"
    return folder / "pai_job_table.csv", folder / "pai_task_table.csv"


def load_pai(path: Path, options: LoadOptions) -> Loaded:
    """Load PAI 2020 from a directory (or job table) with ``pai_task_table.csv`` next to it."""
    job_path, task_path = pai_paths(path)
    for p in (job_path, task_path):
        if not p.is_file():
            raise TraceError(
                str(p), None, None, "PAI 2020 needs pai_job_table.csv and pai_task_table.csv"
            )
    rows = _read_headerless(job_path, JOB_COLUMNS, options)
    tasks = _task_runs(_read_headerless(task_path, TASK_COLUMNS, options))
    status = text_column(rows, "status")
    for name in sorted(set(status.unique()) - PAI_FINISHED):
        rows.skip(
            (status.loc[rows.frame.index] == name).to_numpy(),
            f"unfinished or unknown status {name or '(blank)'}",
        )
    submit = times(rows, "start_time")
    rows.bad(submit.isna().to_numpy(), "start_time", "missing submit time")
    joined = rows.frame[["job_name"]].join(tasks, on="job_name")
    rows.skip(joined["first"].isna().to_numpy(), "no task rows for the job")
    idx = rows.frame.index
    joined, submit = joined.loc[idx], submit.loc[idx]
    project = projects_from_users(
        text_column(rows, "user", "unknown"), options.seed, options.users_per_project
    )
    jobs = pd.DataFrame(
        {
            "job_id": text_column(rows, "job_name"),
            "submit": submit,
            "gpus": joined["gpus"],
            "duration_s": joined["last"] - joined["first"],
            "user": text_column(rows, "user", "unknown"),
            "project": project,
            "state": text_column(rows, "status"),
        },
        index=idx,
    )
    notes = tuple(tasks.attrs.get("notes", ()))
    return finish(rows, "pai2020", jobs, inferred=("project",), notes=notes, state=jobs["state"])


def _read_headerless(path: Path, columns: list[str], options: LoadOptions) -> Rows:
    """The released tables have no header; a file that starts with one is read by its header."""
    with path.open(encoding="utf-8-sig", errors="replace") as text:  # (-sig: a BOM is no data)
        first = text.readline()
    has_header = first.split(",")[0].strip() == "job_name"
    return read_table(path, str(path), options, names=None if has_header else columns)


def _task_runs(tasks: Rows) -> pd.DataFrame:
    """Per job: whole GPUs over its tasks and the span of its task runs."""
    tasks.require("job_name", "inst_num", "plan_gpu", "start_time", "end_time")
    inst = numbers(tasks, "inst_num", required=False).fillna(1.0)
    plan = numbers(tasks, "plan_gpu", required=False).fillna(0.0)
    start, end = times(tasks, "start_time"), times(tasks, "end_time")
    idx = tasks.frame.index
    table = pd.DataFrame(
        {
            "job_name": tasks.frame["job_name"],
            "gpus": inst.loc[idx] * np.ceil(plan.loc[idx] / 100.0),
            "first": start.loc[idx],
            "last": end.loc[idx],
        }
    )
    tasks.bad((table["last"] < table["first"]).to_numpy(), "end_time", "ends before it starts")
    per_job = (
        table.loc[tasks.frame.index]
        .groupby("job_name")
        .agg(gpus=("gpus", "sum"), first=("first", "min"), last=("last", "max"))
    )
    fractional = int(((plan % 100) != 0).loc[tasks.frame.index].sum())
    if fractional:
        per_job.attrs["notes"] = (
            f"{fractional} task(s) with a fractional plan_gpu rounded up to whole GPUs",
        )
    if tasks.skipped:
        per_job.attrs["notes"] = (
            *per_job.attrs.get("notes", ()),
            f"task table rows skipped: {dict(tasks.skipped)}",
        )
    return per_job


def load_spot(path: Path, options: LoadOptions) -> Loaded:
    """Load the 2026 spot-GPU trace ``job_info_df.csv``."""
    rows = read_table(path, str(path), options)
    rows.require(
        "job_name",
        "organization",
        "gpu_request",
        "worker_num",
        "submit_time",
        "duration",
        "job_type",
    )
    kind = text_column(rows, "job_type").str.lower()
    rows.bad((~kind.isin(list(SPOT_TYPES))).to_numpy(), "job_type", "job_type must be HP or Spot")
    per_worker, workers = numbers(rows, "gpu_request"), numbers(rows, "worker_num")
    submit, duration = times(rows, "submit_time"), numbers(rows, "duration")
    idx = rows.frame.index
    spot = kind.loc[idx] == "spot"
    org = "org" + text_column(rows, "organization")
    jobs = pd.DataFrame(
        {
            "job_id": text_column(rows, "job_name"),
            "submit": submit.loc[idx],
            "gpus": np.ceil(per_worker.loc[idx]) * workers.loc[idx],
            "duration_s": duration.loc[idx],
            "user": org,
            "project": org.where(~spot, ""),
            "preemptible": spot,
            "priority": (~spot).astype(int),
            "organization": org,
            "job_type": text_column(rows, "job_type"),
        },
        index=idx,
    )
    fractional = int((per_worker.loc[idx] % 1 != 0).sum())
    notes = (
        (f"{fractional} fractional gpu_request(s) rounded up to whole GPUs per worker",)
        if fractional
        else ()
    )
    return finish(rows, "spot2026", jobs, notes=notes)
