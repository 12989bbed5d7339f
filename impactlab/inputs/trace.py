"""The trace schema: one row per job, validated into typed columns (docs/model.md section 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..base.params import FALSE_WORDS, TRUE_WORDS

KINDS = ("debug", "interactive", "eval", "training", "pretrain", "other")

REQUIRED = ("job_id", "submit_s", "gpus", "duration_s")

#: Optional columns and the value a missing column (or an empty cell) gets.
DEFAULTS: dict[str, str | float | int | bool] = {
    "user": "unknown",
    "project": "",  # empty = unallocated: no budget funds it
    "kind": "other",
    "min_runtime_s": 0.0,
    "priority": 0,
    "preemptible": True,
    "checkpoint_s": 1800.0,  # a checkpoint every 30 min unless the trace says otherwise
    "util": 1.0,
    "patience_s": float("inf"),  # never withdrawn
}

COLUMNS = (*REQUIRED, *DEFAULTS)

#: Optional columns that are checked and kept when a trace has them but never added to one
#: that does not (so a trace without them is unchanged), with the value an empty cell gets.
#: ``cluster``: the cluster the job ran on, by name; "" = none named (a fleet run picks one).
IF_PRESENT: dict[str, str] = {"cluster": ""}


class TraceError(ValueError):
    """Input that cannot be used; the message names the source, row and column."""

    def __init__(self, source: str, row: int | None, column: str | None, problem: str):
        where = source
        if row is not None:
            where += f", row {row}"
        if column is not None:
            where += f", column '{column}'"
        super().__init__(f"{where}: {problem}")
        self.source, self.row, self.column, self.problem = source, row, column, problem


@dataclass(frozen=True)
class _Check:
    column: str
    source: str
    row_base: int

    def fail(self, df: pd.DataFrame, bad: np.ndarray, problem: str) -> None:
        """Raise for the first row flagged in ``bad``, if any."""
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise TraceError(
                self.source,
                pos + self.row_base,
                self.column,
                f"{problem} (got {shown(df[self.column].iloc[pos])!r})",
            )


def shown(value: Any) -> Any:
    """A cell as an error message shows it: a number as the number, not numpy's repr of it,
    and a whole count read as a float (Slurm's GPUs) without its ".0"."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return value


def validate_trace(
    data: pd.DataFrame, source: str = "trace", row_base: int = 0, max_gpus: int | None = None
) -> pd.DataFrame:
    """Return a typed copy of ``data`` in the trace schema, or raise TraceError.

    ``row_base`` is added to a row's position in error messages (a CSV loader passes 2, so the
    number is the file's line). ``max_gpus``, when given, rejects jobs larger than the cluster.
    """
    if len(data) == 0:
        raise TraceError(source, None, None, "the trace has no jobs")
    missing = [c for c in REQUIRED if c not in data.columns]
    if missing:
        raise TraceError(
            source, None, missing[0], f"required column missing (have {list(data.columns)})"
        )
    df = data.reset_index(drop=True).copy()
    for col, default in DEFAULTS.items():
        if col not in df.columns:
            df[col] = default
    out = df.copy()

    def check(column: str) -> _Check:
        return _Check(column, source, row_base)

    out["job_id"] = _ids(df, check("job_id"))
    for col in ("user", "project", "kind"):
        out[col] = _text(df, col)
    present = [c for c in IF_PRESENT if c in df.columns]
    for col in present:
        raw = df[col].astype(object)  # (a categorical or nullable column takes "" as any text)
        check(col).fail(df, ~_names(raw), "must be text (a name)")
        out[col] = _as_text(raw, IF_PRESENT[col])
    check("kind").fail(df, ~out["kind"].isin(KINDS).to_numpy(), f"kind must be one of {KINDS}")
    out["submit_s"] = _number(df, check("submit_s"), low=0.0, allow_inf=False)
    out["duration_s"] = _number(df, check("duration_s"), low=0.0, allow_inf=False, strict=True)
    out["gpus"] = _integer(df, check("gpus"), low=1)
    out["min_runtime_s"] = _number(df, check("min_runtime_s"), low=0.0)
    out["priority"] = _integer(df, check("priority"), low=None)
    out["preemptible"] = _boolean(df, check("preemptible"))
    out["checkpoint_s"] = _number(df, check("checkpoint_s"), low=0.0)
    out["util"] = _number(df, check("util"), low=0.0, high=1.0, allow_inf=False)
    out["patience_s"] = _number(df, check("patience_s"), low=0.0, strict=True)
    if max_gpus is not None:
        check("gpus").fail(
            df,
            (out["gpus"] > max_gpus).to_numpy(),
            f"job larger than the cluster ({max_gpus} GPUs)",
        )
    known = (*COLUMNS, *present)
    return out[[*known, *[c for c in df.columns if c not in known]]]


def _ids(df: pd.DataFrame, check: _Check) -> pd.Series:
    ids = df["job_id"].astype(str).str.strip()
    check.fail(df, (ids == "").to_numpy() | df["job_id"].isna().to_numpy(), "empty job id")
    check.fail(df, ids.duplicated().to_numpy(), "duplicate job id")
    check.fail(
        df,
        ids.str.contains(";", regex=False).to_numpy(),
        "a job id may not contain ';' (the event log's preemptions name the preempting job "
        "before one: by=<job_id>; <reason>)",
    )
    return ids


def _text(df: pd.DataFrame, col: str) -> pd.Series:
    """A text column as Python strings, one object per distinct value: names repeat (a
    million jobs of 150 users held a million copies of their names, about 50 bytes each)."""
    return _as_text(df[col], str(DEFAULTS[col]))


def _as_text(raw: pd.Series, blank: str) -> pd.Series:
    """``raw`` as stripped Python strings (a missing cell -> ``blank``), one object per
    distinct value (see ``_text``)."""
    text = raw.fillna(blank).astype(str).str.strip()
    codes, names = pd.factorize(text)  # (no missing values are left to code as -1)
    return pd.Series(np.asarray(names, dtype=object)[codes], index=raw.index, dtype=object)


def _names(raw: pd.Series) -> np.ndarray:
    """Cells that can be a name: text, a number (written as text, like a job id) or missing.
    A flag (true/false), bytes, a list or another object is not."""
    if pd.api.types.infer_dtype(raw, skipna=True) in _NAME_TYPES:
        return np.ones(len(raw), dtype=bool)
    return raw.map(_is_name).to_numpy(dtype=bool)


#: The largest whole number a trace's integer columns take (gpus, priority): every whole number
#: up to it is exact as a float, which is how a column is read.
LARGEST_WHOLE = 2**53

#: ``infer_dtype`` answers for a column whose every cell can be a name.
_NAME_TYPES = frozenset({"string", "empty", "integer", "floating", "mixed-integer-float"})


def _is_name(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        return True
    return value is None or value is pd.NA


def _number(
    df: pd.DataFrame,
    check: _Check,
    low: float,
    high: float = np.inf,
    allow_inf: bool = True,
    strict: bool = False,
) -> pd.Series:
    raw = df[check.column]
    if pd.api.types.is_datetime64_any_dtype(raw):  # (to_numeric would read them as nanoseconds)
        raise TraceError(
            check.source,
            None,
            check.column,
            "holds dates and times, not seconds: give seconds from the trace's start "
            "(for example (t - t.min()).dt.total_seconds() in pandas)",
        )
    if pd.api.types.is_timedelta64_dtype(raw):
        raw = raw.dt.total_seconds()
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    blank = raw.isna().to_numpy()
    values = values.where(~blank, float(DEFAULTS.get(check.column, np.nan)))
    arr = values.to_numpy()
    check.fail(df, np.isnan(arr), "not a number")
    if not allow_inf:
        check.fail(df, np.isinf(arr), "must be finite")
    check.fail(
        df, arr <= low if strict else arr < low, f"must be {'>' if strict else '>='} {low:g}"
    )
    check.fail(df, arr > high, f"must be <= {high:g}")
    return values


def _integer(df: pd.DataFrame, check: _Check, low: int | None) -> pd.Series:
    values = _number(df, check, low=-np.inf, allow_inf=False)
    arr = values.to_numpy()
    check.fail(df, arr != np.round(arr), "must be a whole number")
    # (read as floats, exact up to 2**53; beyond it a value would also wrap round as int64)
    check.fail(
        df, np.abs(arr) > LARGEST_WHOLE, f"must be between -{LARGEST_WHOLE:,} and {LARGEST_WHOLE:,}"
    )
    if low is not None:
        check.fail(df, arr < low, f"must be >= {low}")
    return values.astype(np.int64)


def _boolean(df: pd.DataFrame, check: _Check) -> pd.Series:
    raw = df[check.column]
    if pd.api.types.is_bool_dtype(raw):
        return raw.astype(bool)
    if pd.api.types.is_numeric_dtype(raw):  # 1/0, possibly read as floats because of blanks
        raw = raw.map(lambda v: v if pd.isna(v) or v not in (0, 1) else str(int(v)))
    text = raw.astype(str).str.strip().str.lower()
    blank = raw.isna().to_numpy() | (text == "").to_numpy()
    true, false = text.isin(TRUE_WORDS).to_numpy(), text.isin(FALSE_WORDS).to_numpy()
    check.fail(df, ~(true | false | blank), "must be true or false")
    return pd.Series(np.where(blank, bool(DEFAULTS[check.column]), true), index=df.index)
