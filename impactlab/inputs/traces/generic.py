"""Generic CSV or Parquet in the impactlab schema (docs/model.md section 3).

Required columns ``job_id, submit_s, gpus, duration_s``; every optional column that is
missing (or blank in a row) gets the default in ``impactlab.inputs.trace.DEFAULTS``. A ``cluster``
column (``trace.IF_PRESENT``) is kept when the file has one (a blank cell -> ""), never added.
``submit_s`` is kept as written (not shifted); jobs with 0 GPUs are reported and skipped like in
every format.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..trace import REQUIRED, TraceError, validate_trace
from .report import Loaded, LoadOptions, LoadReport
from .table import Rows, numbers, read_table

PARQUET_SUFFIXES = (".parquet", ".pq")


def load(path: Path, options: LoadOptions) -> Loaded:
    """Load a CSV (any delimiter sniffed from the header) or Parquet trace in the schema."""
    source = str(path)
    rows = (
        _read_parquet(path, options)
        if path.suffix.lower() in PARQUET_SUFFIXES
        else read_table(path, source, options)
    )
    rows.require(*REQUIRED)
    gpus = numbers(rows, "gpus")
    cpu_only = (gpus == 0).to_numpy()
    rows.skip(cpu_only, "no GPUs (CPU-only job)")
    if rows.frame.empty:
        raise TraceError(source, None, None, f"no jobs left to load ({dict(rows.skipped)})")
    if options.oversize == "skip" and options.max_gpus is not None:
        large = (gpus.loc[rows.frame.index] > options.max_gpus).to_numpy()
        rows.skip(large, f"job larger than the target cluster ({options.max_gpus} GPUs)")
    lines = rows.frame.index.to_numpy()
    try:
        trace = validate_trace(
            rows.frame.reset_index(drop=True), source=source, max_gpus=options.max_gpus
        )
    except TraceError as err:
        raise TraceError(
            source, int(lines[err.row]) if err.row is not None else None, err.column, err.problem
        ) from None
    report = LoadReport(source, "generic", rows.read, len(trace), dict(rows.skipped))
    return Loaded(trace, report)


def _read_parquet(path: Path, options: LoadOptions) -> Rows:
    try:
        frame = pd.read_parquet(path)
    except (
        OSError,
        ValueError,
        pa.ArrowException,
    ) as err:  # pyarrow has its own errors for corrupt files
        message = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise TraceError(str(path), None, None, f"cannot read Parquet: {message}") from None
    frame.index = pd.RangeIndex(0, len(frame))  # Parquet rows are counted from 0
    if frame.empty:
        raise TraceError(str(path), None, None, "the file has no rows")
    return Rows(frame, str(path), options)
