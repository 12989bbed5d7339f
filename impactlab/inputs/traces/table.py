"""Shared steps of the loaders: read a delimited file safely, parse times and numbers, skip and
report rows, and finish a source table into the validated schema."""

from __future__ import annotations

import csv
import io
import logging
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...base.files import InputFileError, decode_text, read_bytes
from ..trace import TraceError, shown, validate_trace
from .infer import infer_kinds
from .report import Loaded, LoadOptions, LoadReport

log = logging.getLogger(__name__)

SEPARATORS = (",", "|", "\t", ";")
BLANK_WORDS = ("", "none", "unknown", "nan", "nat", "null", "n/a", "na")
_ZONE = r"(?:Z|[+-]\d\d:?\d\d)$"


@dataclass
class Rows:
    """A source table being mapped to the schema; its index is the source's row (line) number.

    ``skip`` drops rows and counts them under a reason; ``bad`` raises a TraceError naming the
    first bad row and column, or skips those rows when the options say so.
    """

    frame: pd.DataFrame
    source: str
    options: LoadOptions
    skipped: Counter = field(default_factory=Counter)
    read: int = 0

    def __post_init__(self) -> None:
        self.read = len(self.frame)

    def skip(self, mask: pd.Series | np.ndarray, reason: str) -> None:
        """Drop the rows flagged in ``mask``, counted under ``reason``."""
        mask = np.asarray(mask, dtype=bool)
        if mask.any():
            self.skipped[reason] += int(mask.sum())
            self.frame = self.frame[~mask]

    def bad(
        self,
        mask: pd.Series | np.ndarray,
        column: str,
        problem: str,
        values: pd.Series | None = None,
    ) -> None:
        """Rows whose ``column`` cannot be used: raise for the first, or skip them all."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        if self.options.on_bad == "skip":
            self.skip(mask, f"{problem} ({column})")
            return
        self.fail(mask, column, problem, values)

    def fail(
        self, mask: np.ndarray, column: str, problem: str, values: pd.Series | None = None
    ) -> None:
        """Raise a TraceError for the first row flagged in ``mask``, if any."""
        if not mask.any():
            return
        pos = int(np.flatnonzero(mask)[0])
        value = shown((values if values is not None else self.frame[column]).iloc[pos])
        raise TraceError(
            self.source, int(self.frame.index[pos]), column, f"{problem} (got {value!r})"
        )

    def require(self, *columns: str) -> None:
        """Raise if a column the format needs is missing."""
        for col in columns:
            if col not in self.frame.columns:
                have = [c for c in self.frame.columns if not c.startswith("_")]
                raise TraceError(self.source, None, col, f"required column missing (have {have})")


# ----- reading ------------------------------------------------------------------------------
def read_text(path: Path, source: str) -> str:
    """The file's text; a clear error for a directory, a missing, unreadable, empty, binary or
    non-UTF-8 file."""
    try:
        data = read_bytes(path)
        if not data.strip():
            raise InputFileError("the file is empty")
        return decode_text(data)
    except InputFileError as err:
        raise TraceError(source, err.line, None, err.problem) from None


def sniff_separator(header: str) -> str:
    """The candidate delimiter that occurs most often in the header line (comma on a tie)."""
    counts = [header.count(s) for s in SEPARATORS]
    return SEPARATORS[int(np.argmax(counts))] if max(counts) else ","


def read_table(
    path: Path, source: str, options: LoadOptions, names: list[str] | None = None
) -> Rows:
    """Read a delimited file as text cells; the index is the file's line number.

    Without ``names`` the first line is the header. Blank lines are skipped and reported;
    ragged rows, a quote left open and a wrong delimiter raise a TraceError.
    """
    text = read_text(path, source)
    if "\n" not in text and "\r" in text:  # (lines ended by CR alone, as classic Mac OS wrote)
        text = text.replace("\r", "\n")
    first = text.split("\n", 1)[0].rstrip("\r")
    sep = options.sep or sniff_separator(first)
    if names is None and first.endswith(sep):  # (sacct --parsable ends every line with one)
        text = _without_trailing_separator(text, sep)
        first = text.split("\n", 1)[0].rstrip("\r")
    if names is None:
        _check_header(first, sep, source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "error", pd.errors.ParserWarning
            )  # pandas would drop extra fields
            frame = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                skip_blank_lines=False,
                header=None if names else 0,
                names=names,
                index_col=False,
                engine="c",
            )
    except pd.errors.ParserWarning:
        line, fields, width = _first_long_row(text, sep, len(names) if names else None)
        where = "the header's" if names is None else "the format's"
        problem = (
            f"{fields} fields, more than {where} {width} columns"
            if line is not None
            else f"some rows have more fields than {where} columns"
        )
        raise TraceError(source, line, None, problem) from None
    except (pd.errors.ParserError, ValueError, csv.Error) as err:
        raise _parser_error(err, source) from None
    first_line = 1 if names else 2
    if frame.empty:
        raise TraceError(source, None, None, "the file has a header but no rows")
    frame.index = pd.RangeIndex(first_line, first_line + len(frame))
    _check_complete(frame, text, first_line, source)
    frame.columns = [str(c).strip() for c in frame.columns]
    _check_short_rows(frame, text, sep, source)
    rows = Rows(frame, source, options)
    rows.skip(frame.isna().all(axis=1).to_numpy(), "blank line")
    _check_delimiter(rows, sep)
    return rows


def _first_long_row(text: str, sep: str, width: int | None) -> tuple[int | None, int, int]:
    """(line, fields, columns) of the first row with more fields than ``width`` columns
    (default: the header's), read again with Python's csv module on this error only (line
    None: not found that way)."""
    if len(sep) == 1:
        reader = csv.reader(io.StringIO(text), delimiter=sep)
        for row in reader:
            if width is None:
                width = len(row)
            elif len(row) > width:
                return reader.line_num, len(row), width
    return None, 0, width or 0


def _without_trailing_separator(text: str, sep: str) -> str:
    """``text`` whose every line ends with ``sep`` (``sacct --parsable``, not ``--parsable2``)
    with each line without it; else ``text`` as it is (the header check then names the empty
    column)."""
    lines = text.splitlines()
    if not all(line.endswith(sep) for line in lines if line.strip()):
        return text
    return "\n".join(line[: -len(sep)] if line.strip() else line for line in lines) + "\n"


def _check_header(header: str, sep: str, source: str) -> None:
    cells = [c.strip().strip('"') for c in header.split(sep)]
    seen: set[str] = set()
    for cell in cells:
        if cell in seen:
            raise TraceError(source, 1, cell, "column appears twice in the header")
        seen.add(cell)
    if "" in cells:
        raise TraceError(source, 1, None, f"the header has an empty column name ({header!r})")


def _parser_error(err: Exception, source: str) -> TraceError:
    text = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    found = re.search(r"line (\d+)", text)
    if found:
        return TraceError(source, int(found.group(1)), None, f"malformed row: {text}")
    if "EOF inside string" in text:
        return TraceError(source, None, None, "a quote is never closed")
    return TraceError(source, None, None, f"cannot parse: {text}")


def _check_complete(frame: pd.DataFrame, text: str, first_line: int, source: str) -> None:
    """Every line is one row: a quoted field spanning lines would silently merge rows."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    expected = lines - (first_line - 1)
    if len(frame) != expected:
        merged = frame.apply(lambda col: col.str.contains("\n", regex=False, na=False)).any(axis=1)
        row = int(merged.idxmax()) if merged.any() else None
        raise TraceError(
            source,
            row,
            None,
            f"{expected} data lines but {len(frame)} rows: a quoted field spans lines",
        )


def _check_short_rows(frame: pd.DataFrame, text: str, sep: str, source: str) -> None:
    """A row with fewer fields than there are columns (a field left out, not left blank)
    would read as blanks in its last columns, which could then pass for a job with no state or
    no team: the first such line is an error. Only the lines whose last cell is blank are read
    again (with Python's csv module, which counts a row's fields)."""
    width = frame.shape[1]
    if width < 2:
        return
    cells = frame.isna()
    suspects = frame.index[(cells.iloc[:, -1] & ~cells.all(axis=1)).to_numpy()]
    if not len(suspects):
        return
    lines = text.split("\n")
    for line in suspects:  # (the index is the line number: one row per line, checked above)
        raw = lines[int(line) - 1].rstrip("\r")
        fields = (
            len(next(csv.reader([raw], delimiter=sep))) if len(sep) == 1 else len(raw.split(sep))
        )
        if fields == 1 and any(other in raw for other in SEPARATORS if other != sep):
            continue  # (written with another delimiter: ``_check_delimiter`` says so)
        if fields < width:
            raise TraceError(
                source,
                int(line),
                str(frame.columns[fields]),
                f"{fields} fields, fewer than the {width} columns (this one and those after it "
                "are missing; leave a field empty, not out)",
            )


def _check_delimiter(rows: Rows, sep: str) -> None:
    """A row whose fields all landed in the first column was written with another delimiter."""
    frame = rows.frame
    if frame.shape[1] < 2 or frame.empty:
        return
    first, rest_blank = frame.iloc[:, 0].fillna(""), frame.iloc[:, 1:].isna().all(axis=1)
    for other in SEPARATORS:
        if other != sep:
            wrong = rest_blank & first.str.contains(re.escape(other), regex=True)
            rows.bad(
                wrong.to_numpy(),
                str(frame.columns[0]),
                f"fields separated by {other!r}, not {sep!r}",
            )


# ----- values -------------------------------------------------------------------------------
def blank(values: pd.Series) -> pd.Series:
    """Cells that hold no value (empty, 'None', 'Unknown', ...)."""
    text = values.astype(str).str.strip().str.lower()
    return values.isna() | text.isin(BLANK_WORDS)


def numbers(rows: Rows, column: str, required: bool = True) -> pd.Series:
    """A numeric column; blanks are NaN (an error if ``required``), text is an error."""
    raw = rows.frame[column]
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    empty = blank(raw)
    rows.bad((values.isna() & ~empty).to_numpy(), column, "not a number")
    if required:
        rows.bad(empty.loc[rows.frame.index].to_numpy(), column, "missing value")
    return values.loc[rows.frame.index]


def times(rows: Rows, column: str) -> pd.Series:
    """Seconds since the epoch (or the trace's own clock) from numbers or ISO times; NaN = blank.

    Times with a zone are converted to UTC; times without one are taken as they are. A column
    mixing both is an error, as is a value that is not a time.
    """
    raw = rows.frame[column]
    empty = blank(raw)
    text = raw.where(~empty).astype(str).str.strip()
    as_number = pd.to_numeric(text.where(~empty), errors="coerce")
    if as_number[~empty].notna().all():
        return as_number.astype(float)
    zoned = text.str.contains(_ZONE, regex=True) & ~empty
    if zoned.any() and (~zoned & ~empty).any():
        first_zoned = bool(zoned[~empty].iloc[0])
        rows.bad(
            ((zoned != first_zoned) & ~empty).to_numpy(),
            column,
            "mixed time zones: some times carry a zone, others do not",
        )
        return times(rows, column)
    parsed = pd.to_datetime(
        text.where(~empty), format="ISO8601", errors="coerce", utc=bool(zoned.any())
    )
    rows.bad((parsed.isna() & ~empty).to_numpy(), column, "not a time")
    return _epoch_seconds(parsed.loc[rows.frame.index])


def _epoch_seconds(parsed: pd.Series) -> pd.Series:
    if isinstance(parsed.dtype, pd.DatetimeTZDtype):
        parsed = parsed.dt.tz_convert(None)
    stamps = parsed.to_numpy(dtype="datetime64[ns]")
    out = stamps.astype(np.int64) / 1e9
    out[np.isnat(stamps)] = np.nan
    return pd.Series(out, index=parsed.index)


def text_column(rows: Rows, column: str, default: str = "") -> pd.Series:
    """A text column (blank -> ``default``), or ``default`` everywhere when absent."""
    if column not in rows.frame.columns:
        return pd.Series(default, index=rows.frame.index, dtype=object)
    return rows.frame[column].fillna(default).astype(str).str.strip()


# ----- finishing ----------------------------------------------------------------------------
def finish(
    rows: Rows,
    fmt: str,
    jobs: pd.DataFrame,
    inferred: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
    state: pd.Series | None = None,
) -> Loaded:
    """Common last steps: GPUs, durations, submit_s, kinds; validate; report.

    ``jobs`` is indexed like ``rows.frame`` and holds ``job_id, submit (s), gpus, duration_s``
    and optional schema or extra columns. ``submit_s`` counts from the first kept submit.
    """
    opts = rows.options
    rows.frame = jobs
    rows.bad((jobs["gpus"] < 0).to_numpy(), "gpus", "a negative GPU count", jobs["gpus"])
    gpus = rows.frame["gpus"]
    rows.skip((gpus.isna() | (gpus == 0)).to_numpy(), "no GPUs (CPU-only job)")
    rows.bad((rows.frame["gpus"] > 1_000_000).to_numpy(), "gpus", "absurd GPU count")
    fractional = rows.frame["gpus"] != np.ceil(rows.frame["gpus"])
    if fractional.any():
        notes = (*notes, f"{int(fractional.sum())} fractional GPU requests rounded up")
        rows.frame = rows.frame.assign(gpus=np.ceil(rows.frame["gpus"]))
    if opts.max_gpus is not None:
        large = (rows.frame["gpus"] > opts.max_gpus).to_numpy()
        problem = f"job larger than the target cluster ({opts.max_gpus} GPUs)"
        if opts.oversize == "skip":
            rows.skip(large, problem)
        rows.fail(large if opts.oversize == "error" else np.zeros(0, bool), "gpus", problem)
    _durations(rows)
    return _validated(rows, fmt, inferred, notes, state)


def _durations(rows: Rows) -> None:
    dur = rows.frame["duration_s"]
    rows.bad(dur.isna().to_numpy(), "duration_s", "no duration")
    rows.bad((rows.frame["duration_s"] < 0).to_numpy(), "duration_s", "negative duration")
    rows.skip((rows.frame["duration_s"] == 0).to_numpy(), "zero runtime (never ran)")
    limit = rows.options.max_duration_s
    rows.bad(
        (rows.frame["duration_s"] > limit).to_numpy(),
        "duration_s",
        f"absurd duration (over {limit:g} s)",
    )


def _validated(
    rows: Rows, fmt: str, inferred: tuple[str, ...], notes: tuple[str, ...], state: pd.Series | None
) -> Loaded:
    frame = rows.frame
    if frame.empty:
        why = "; ".join(f"{r}: {n:,}" for r, n in rows.skipped.items()) or "no rows"
        raise TraceError(rows.source, None, None, f"no jobs left to load ({why})")
    frame = frame.assign(submit_s=frame["submit"] - frame["submit"].min()).drop(columns="submit")
    if "kind" not in frame.columns:
        st = state.reindex(frame.index) if state is not None else None
        frame = frame.assign(
            kind=infer_kinds(frame["gpus"], frame["duration_s"], st, rows.options.kind_rule),
            kind_inferred=True,
        )
        inferred = ("kind", *inferred)
    elif "kind_inferred" not in frame.columns:
        frame = frame.assign(kind_inferred=False)
    lines = frame.index.to_numpy()
    try:
        trace = validate_trace(
            frame.reset_index(drop=True), source=rows.source, max_gpus=rows.options.max_gpus
        )
    except TraceError as err:  # name the source's line, not the position after skips
        row = int(lines[err.row]) if err.row is not None else None
        raise TraceError(rows.source, row, err.column, err.problem) from None
    report = LoadReport(
        rows.source, fmt, rows.read, len(trace), dict(rows.skipped), tuple(inferred), tuple(notes)
    )
    for line in report.lines():
        log.info(line)
    return Loaded(trace, report)
