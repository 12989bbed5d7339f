"""Helios (SenseTime, 2020) ``cluster_log.csv``.

Columns: ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time,
end_time, duration, queue`` with local times without a zone. Mapping: ``vc`` -> ``project``
(each virtual cluster is a budget), ``user`` kept, ``gpu_num`` -> ``gpus``, duration = end -
start (else ``duration``), ``state`` kept as an extra column. Helios records no kind: kinds
are inferred (``KindRule``). CPU-only jobs (``gpu_num`` 0, about half the trace) are skipped.
The file does not name its cluster (only the release's folder does: ``data/Venus/...``), and a
path is not a record, so the trace gets no ``cluster`` column.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .report import Loaded, LoadOptions
from .runs import final_state, run_times
from .table import Rows, finish, numbers, read_table, text_column

#: The columns this loader needs in the source file (the trace it makes has ``trace.COLUMNS``).
SOURCE_COLUMNS = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
)


def load(path: Path, options: LoadOptions) -> Loaded:
    """Load a Helios ``cluster_log.csv``."""
    rows = read_table(path, str(path), options)
    rows.require(*SOURCE_COLUMNS)
    return finish(
        rows, "helios", jobs(rows, project=text_column(rows, "vc")), state=rows.frame["state"]
    )


def jobs(rows: Rows, project: pd.Series, kind: pd.Series | None = None) -> pd.DataFrame:
    """The job table shared by Helios and Acme (same Slurm-derived layout)."""
    state = final_state(rows, "state")
    gpus = numbers(rows, "gpu_num")
    runs = run_times(rows, "submit_time", "start_time", "end_time", "duration")
    idx = rows.frame.index
    out = runs.assign(
        job_id=text_column(rows, "job_id"),
        user=text_column(rows, "user", "unknown"),
        project=project.loc[idx],
        gpus=gpus.loc[idx],
        state=state.loc[idx],
    )
    if kind is not None:
        out["kind"] = kind.loc[idx]
    return out
