"""Run times and final states of scheduler logs (Helios, Acme, Slurm): what counts as a job run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .table import Rows, numbers, times

#: Final states of a run that held its GPUs until it ended (all are replayed; the state is kept).
FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "KILLED",
        "PASS",
        "TERMINATED",
    }
)


def final_state(rows: Rows, column: str) -> pd.Series:
    """Upper-case first word of the state (``CANCELLED by 123`` -> ``CANCELLED``); unfinished
    states (RUNNING, PENDING, ...) are skipped and reported per state."""
    state = rows.frame[column].fillna("").astype(str).str.strip().str.split(" ").str[0].str.upper()
    for name in sorted(set(state.unique()) - FINISHED):
        rows.skip((state == name).to_numpy(), f"unfinished or unknown state {name or '(blank)'}")
        state = state.loc[rows.frame.index]
    return state


def run_times(
    rows: Rows,
    submit: str,
    start: str,
    end: str,
    duration: str | None,
    duration_first: bool = False,
) -> pd.DataFrame:
    """``submit`` (s) and ``duration_s`` of each run: end - start, else the duration column
    (``duration_first``: the duration column, else end - start, for a format whose duration is
    the run time itself, such as Slurm's ``Elapsed``, which leaves out suspended time and does
    not move with the wall clock's daylight-saving changes).

    A run without a start is skipped as never started; one with a start but neither an end nor
    a duration is skipped as unfinished (censored); an end before the start is an error (unless
    the duration column, used first, gives the run's length).
    """
    sub, beg, fin = times(rows, submit), times(rows, start), times(rows, end)
    dur_col = (
        numbers(rows, duration, required=False)
        if duration is not None and duration in rows.frame.columns
        else None
    )
    idx = rows.frame.index
    sub, beg, fin = sub.loc[idx], beg.loc[idx], fin.loc[idx]
    rows.bad(sub.isna().to_numpy(), submit, "missing submit time")
    frame = pd.DataFrame({"submit": sub, "start": beg, "end": fin}).loc[rows.frame.index]
    if dur_col is not None:
        frame["given"] = dur_col.loc[frame.index]
    else:
        frame["given"] = np.nan
    no_start = frame["start"].isna() & (frame["given"].isna() | (frame["given"] == 0))
    rows.skip(no_start.to_numpy(), "never started")
    frame = frame.loc[rows.frame.index]
    rows.skip((frame["end"].isna() & frame["given"].isna()).to_numpy(), "unfinished (no end time)")
    frame = frame.loc[rows.frame.index]
    measured = frame["end"] - frame["start"]
    used = measured.isna() if not duration_first else frame["given"].notna()  # (the column's)
    rows.bad((~used & (measured < 0)).to_numpy(), end, "ends before it starts", rows.frame[end])
    frame = frame.loc[rows.frame.index]
    measured, used = measured.loc[frame.index], used.loc[frame.index]
    return pd.DataFrame(
        {"submit": frame["submit"], "duration_s": frame["given"].where(used, measured)}
    )
