"""Acme (Shanghai AI Lab, 2023) ``trace_seren.csv`` and ``trace_kalos.csv``.

Columns: ``job_id, user, node_num, gpu_num, cpu_num, type, state, submit_time, start_time,
end_time, duration, queue, gpu_time`` (Kalos adds ``mem_per_pod_GB, shared_mem_per_pod,
fail_time, stop_time``); ISO times with a zone (``2023-03-01 00:18:22+08:00``), converted to
UTC. ``type`` -> ``kind`` by ``TYPES``. Acme records no project: projects are derived from
users by the seeded rule of ``projects_from_users`` and reported as inferred. No column names the
cluster (only the file name does), so the trace gets no ``cluster`` column.
"""

from __future__ import annotations

from pathlib import Path

from .helios import jobs
from .infer import projects_from_users
from .report import Loaded, LoadOptions
from .table import finish, read_table, text_column

#: Acme workload type -> impactlab kind (SFT and multimodal training are post-training work).
TYPES = {
    "pretrain": "pretrain",
    "sft": "training",
    "mllm": "training",
    "eval": "eval",
    "debug": "debug",
    "other": "other",
}
#: The columns this loader needs in the source file (the trace it makes has ``trace.COLUMNS``).
SOURCE_COLUMNS = (
    "job_id",
    "user",
    "gpu_num",
    "type",
    "state",
    "submit_time",
    "start_time",
    "end_time",
)


def load(path: Path, options: LoadOptions) -> Loaded:
    """Load an Acme job trace (Seren or Kalos)."""
    rows = read_table(path, str(path), options)
    rows.require(*SOURCE_COLUMNS)
    raw_type = text_column(rows, "type")
    kind = raw_type.str.lower().map(TYPES)
    unknown = sorted(set(raw_type[kind.isna()]))
    notes = (f"unknown type(s) {unknown} mapped to 'other'",) if unknown else ()
    project = projects_from_users(
        text_column(rows, "user", "unknown"), options.seed, options.users_per_project
    )
    table = jobs(rows, project=project, kind=kind.fillna("other"))
    table["type"] = raw_type.loc[table.index]
    return finish(rows, "acme", table, inferred=("project",), notes=notes)
