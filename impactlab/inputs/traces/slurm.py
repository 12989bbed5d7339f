"""Slurm accounting: ``sacct --parsable2`` output (``|``-separated, header line).

Suggested dump::

    sacct -a -X --parsable2 --starttime 2024-01-01 --endtime 2024-02-01 \\
          --format JobID,JobName,User,Account,Partition,Submit,Start,End,Elapsed,AllocTRES,State

Mapping: ``JobID`` -> ``job_id`` (array tasks ``123_4`` are jobs; step rows ``123.batch``,
``123.0`` are skipped and reported), ``User`` kept, ``Account`` -> ``project``, GPUs from
``AllocTRES`` (``gres/gpu=N``, else the sum of typed ``gres/gpu:TYPE=N``), else from
``AllocGRES`` when the dump has it (``gpu:N`` or ``gpu:TYPE:N``, summed: a Slurm whose
accounting does not list ``gres/gpu`` in ``AccountingStorageTRES`` records GPUs only there;
one of the two columns is required), duration =
``Elapsed`` (``[D-]HH:MM:SS``, else End - Start), ``State`` first word kept as ``state``
(RUNNING / PENDING / REQUEUED ... are skipped as unfinished), ``Cluster`` (when the dump has
it: add it to ``--format``) -> ``cluster``. Kinds are inferred, except that
interactive shells (``JobName`` bash, sh, zsh, interactive, jupyter...) are ``interactive``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..trace import TraceError
from .infer import infer_kinds
from .report import Loaded, LoadOptions
from .runs import final_state, run_times
from .table import Rows, blank, finish, read_table, text_column

#: The columns this loader needs in the source file (the trace it makes has ``trace.COLUMNS``).
SOURCE_COLUMNS = ("JobID", "User", "Account", "Submit", "Start", "End", "State")
#: Where the GPUs of a job are read, in order: at least one of them is required.
GPU_COLUMNS = ("AllocTRES", "AllocGRES")
SHELLS = frozenset(
    {
        "bash",
        "sh",
        "zsh",
        "fish",
        "interactive",
        "jupyter",
        "jupyter-lab",
        "jupyterlab",
        "code-server",
        "vscode",
        "srun",
        "salloc",
    }
)
_ELAPSED = r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$"


def load(path: Path, options: LoadOptions) -> Loaded:
    """Load ``sacct --parsable2`` output."""
    rows = read_table(path, str(path), options)
    rows.require(*SOURCE_COLUMNS)
    if not any(c in rows.frame.columns for c in GPU_COLUMNS):
        rows.require(GPU_COLUMNS[0])  # (the error names it, and the columns the file has)
    job_id = text_column(rows, "JobID")
    rows.skip(job_id.str.contains(".", regex=False).to_numpy(), "job step (not a job)")
    state = final_state(rows, "State")
    if "Elapsed" in rows.frame.columns:
        elapsed = elapsed_seconds(rows)  # (first: it may skip rows, so read the frame after)
        rows.frame = rows.frame.assign(elapsed_s=elapsed)
    runs = run_times(
        rows,
        "Submit",
        "Start",
        "End",
        "elapsed_s" if "Elapsed" in rows.frame.columns else None,
        duration_first=True,
    )
    idx = rows.frame.index
    jobs = runs.assign(
        job_id=text_column(rows, "JobID"),
        user=text_column(rows, "User", "unknown"),
        project=text_column(rows, "Account"),
        gpus=allocated_gpus(rows.frame),
        state=state.loc[idx],
    )
    if len(jobs) and not (jobs["gpus"] > 0).any():
        raise TraceError(rows.source, None, None, _no_gpus(rows.frame.columns))
    if "Cluster" in rows.frame.columns:  # the cluster the job ran on (sacct -M / -L dumps)
        jobs["cluster"] = text_column(rows, "Cluster")
    if "JobName" in rows.frame.columns:
        shell = text_column(rows, "JobName").str.lower().isin(SHELLS)
        if shell.any():
            jobs["kind"] = _kinds_with_shells(rows, jobs, shell)
            jobs["kind_inferred"] = ~shell.loc[jobs.index]
    return finish(
        rows,
        "slurm",
        jobs,
        state=jobs["state"],
        inferred=("kind",) if "kind" in jobs.columns else (),
    )


def elapsed_seconds(rows: Rows) -> pd.Series:
    """``Elapsed`` as seconds; blank stays NaN, anything else unparseable is bad."""
    raw = rows.frame["Elapsed"]
    parts = raw.fillna("").astype(str).str.strip().str.extract(_ELAPSED)
    seconds = (
        parts["d"].astype(float).fillna(0) * 86_400
        + parts["h"].astype(float).fillna(0) * 3600
        + parts["m"].astype(float) * 60
        + parts["s"].astype(float)
    )
    rows.bad((seconds.isna() & ~blank(raw)).to_numpy(), "Elapsed", "not a [D-]HH:MM:SS duration")
    return seconds.loc[rows.frame.index]


def _no_gpus(columns: pd.Index) -> str:
    """Why a dump in which no job has a GPU cannot be replayed, and what to dump instead."""
    read = " or ".join(c for c in GPU_COLUMNS if c in columns)
    advice = (
        ""
        if "AllocGRES" in columns
        else "; if this Slurm does not account GPUs as TRES (AccountingStorageTRES without "
        "gres/gpu), dump AllocGRES too (add it to sacct's --format)"
    )
    return f"no job has a GPU in {read} (every job is CPU-only){advice}"


def allocated_gpus(frame: pd.DataFrame) -> pd.Series:
    """Each job's GPUs: from ``AllocTRES``, else (no GPU there, or no such column) from
    ``AllocGRES``."""
    none = pd.Series(0.0, index=frame.index)
    tres = tres_gpus(frame["AllocTRES"]) if "AllocTRES" in frame.columns else none
    if "AllocGRES" not in frame.columns:
        return tres
    return tres.where(tres > 0, gres_gpus(frame["AllocGRES"]))


def gres_gpus(gres: pd.Series) -> pd.Series:
    """GPUs in an ``AllocGRES`` string: the sum of its ``gpu:N`` and ``gpu:TYPE:N`` entries
    (an index list such as ``(IDX:0-3)`` after one is ignored)."""
    text = gres.fillna("").astype(str)
    found = text.str.extractall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")[0].astype(float)
    return found.groupby(level=0).sum().reindex(text.index).fillna(0.0)


def tres_gpus(tres: pd.Series) -> pd.Series:
    """GPUs in an ``AllocTRES`` string: ``gres/gpu=N``, else the sum of ``gres/gpu:TYPE=N``."""
    text = tres.fillna("").astype(str)
    total = text.str.extract(r"(?:^|,)gres/gpu=(\d+)", expand=False).astype(float)
    typed = (
        text.str.extractall(r"(?:^|,)gres/gpu:[^=,]+=(\d+)")[0].astype(float).groupby(level=0).sum()
    )
    return total.fillna(typed.reindex(text.index)).fillna(0.0)


def _kinds_with_shells(rows: Rows, jobs: pd.DataFrame, shell: pd.Series) -> pd.Series:
    guessed = infer_kinds(jobs["gpus"], jobs["duration_s"], jobs["state"], rows.options.kind_rule)
    return pd.Series(np.where(shell.loc[jobs.index], "interactive", guessed), index=jobs.index)
