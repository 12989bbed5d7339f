"""The trace schema: defaults for optional columns, and clear errors naming row and column."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

import impactlab as il
from impactlab.inputs.trace import COLUMNS, DEFAULTS, TraceError, validate_trace


def minimal(**override) -> pd.DataFrame:
    """Three jobs with only the required columns (``override`` replaces or adds columns)."""
    data = {
        "job_id": ["a", "b", "c"],
        "submit_s": [0, 10, 20],
        "gpus": [1, 2, 8],
        "duration_s": [5, 6, 7],
    }
    data.update(override)
    return pd.DataFrame(data)


def error(df: pd.DataFrame, **kwargs) -> TraceError:
    """The TraceError ``validate_trace`` raises for ``df``."""
    with pytest.raises(TraceError) as info:
        validate_trace(df, source="jobs.csv", **kwargs)
    return info.value


# ----- defaults and types ----------------------------------------------------------------------
def test_missing_optional_columns_get_the_documented_defaults():
    out = validate_trace(minimal())
    assert list(out.columns) == list(COLUMNS)
    for row in out.itertuples(index=False):
        assert row.user == "unknown"
        assert row.project == ""  # unallocated
        assert row.kind == "other"
        assert row.min_runtime_s == 0.0
        assert row.priority == 0
        assert row.preemptible is True or row.preemptible == np.True_
        assert row.checkpoint_s == 1800.0
        assert row.util == 1.0
        assert math.isinf(row.patience_s)
    assert DEFAULTS["project"] == ""


def test_columns_get_their_types():
    out = validate_trace(
        minimal(job_id=[1, 2, 3], preemptible=["yes", "No", "TRUE"], priority=["2", 0, "-1"])
    )
    assert list(out["job_id"]) == ["1", "2", "3"]
    assert out["gpus"].dtype == np.int64 and out["priority"].dtype == np.int64
    assert out["submit_s"].dtype == float and out["duration_s"].dtype == float
    assert list(out["preemptible"]) == [True, False, True]
    assert list(out["priority"]) == [2, 0, -1]


def test_blank_cells_get_the_defaults():
    out = validate_trace(
        minimal(
            project=["p", None, np.nan],
            min_runtime_s=[np.nan, 60, None],
            preemptible=[None, False, ""],
            patience_s=[np.nan, 100, np.inf],
        )
    )
    assert list(out["project"]) == ["p", "", ""]
    assert list(out["min_runtime_s"]) == [0.0, 60.0, 0.0]
    assert list(out["preemptible"]) == [True, False, True]
    assert list(out["patience_s"]) == [np.inf, 100.0, np.inf]


def test_checkpoint_and_patience_may_be_infinite():
    out = validate_trace(minimal(checkpoint_s=[0, np.inf, 60], patience_s=[np.inf, 1, 2]))
    assert list(out["checkpoint_s"]) == [0.0, np.inf, 60.0]


def test_extra_columns_are_kept_after_the_schema():
    out = validate_trace(minimal(team=["x", "y", "z"], cost=[1.5, 2.5, 3.5]))
    assert list(out.columns) == [*COLUMNS, "team", "cost"]
    assert list(out["team"]) == ["x", "y", "z"]
    assert list(out["cost"]) == [1.5, 2.5, 3.5]


def test_the_input_is_not_modified():
    df = minimal(preemptible=["yes", "no", "yes"])
    before = df.copy()
    validate_trace(df)
    pd.testing.assert_frame_equal(df, before)


def test_boolean_column_of_ones_and_zeros_with_blanks_is_accepted():
    # pandas reads a 0/1 column with a blank cell as floats: 1.0, NaN, 0.0
    df = pd.read_csv(
        io.StringIO("job_id,submit_s,gpus,duration_s,preemptible\na,0,1,5,1\nb,1,1,5,\nc,2,1,5,0\n")
    )
    out = validate_trace(df)
    assert list(out["preemptible"]) == [True, True, False]


# ----- errors name the row and column ----------------------------------------------------------
@pytest.mark.parametrize(
    "override, row, column",
    [
        ({"duration_s": [5, -1, 7]}, 1, "duration_s"),
        ({"duration_s": [5, 6, 0]}, 2, "duration_s"),
        ({"gpus": [1, 0, 2]}, 1, "gpus"),
        ({"gpus": [1, 2, 1.5]}, 2, "gpus"),
        ({"job_id": ["a", "b", "a"]}, 2, "job_id"),
        ({"job_id": ["a", None, "c"]}, 1, "job_id"),
        ({"job_id": ["a", "b;1", "c"]}, 1, "job_id"),
        ({"submit_s": [0, "yesterday", 3]}, 1, "submit_s"),
        ({"submit_s": [0, 1, np.nan]}, 2, "submit_s"),
        ({"submit_s": [-5, 1, 2]}, 0, "submit_s"),
        ({"submit_s": [0, np.inf, 2]}, 1, "submit_s"),
        ({"kind": ["debug", "training", "party"]}, 2, "kind"),
        ({"preemptible": ["yes", "maybe", "no"]}, 1, "preemptible"),
        ({"util": [0.5, 1.5, 1.0]}, 1, "util"),
        ({"min_runtime_s": [0, 0, -60]}, 2, "min_runtime_s"),
        ({"priority": [1, "high", 2]}, 1, "priority"),
        ({"checkpoint_s": [0, -1, 2]}, 1, "checkpoint_s"),
        ({"patience_s": [10, 0, 2]}, 1, "patience_s"),
    ],
)
def test_bad_values_raise_trace_error_naming_row_and_column(override, row, column):
    err = error(minimal(**override))
    assert (err.row, err.column) == (row, column)
    assert str(err).startswith(f"jobs.csv, row {row}, column '{column}': ")


@pytest.mark.parametrize("column", ["gpus", "priority"])
def test_a_whole_number_too_large_to_read_exactly_is_an_error_not_a_wrapped_value(column):
    """Integer columns are read as floats: beyond 2**53 a value is neither exact nor in int64's
    range (1e19 once became the lowest priority of all, and 1e30 GPUs a negative count)."""
    assert validate_trace(minimal(**{column: [1, 2**53, 2]}))[column].iloc[1] == 2**53
    err = error(minimal(**{column: [1, 1e19, 2]}))
    assert (err.row, err.column) == (1, column)
    assert str(err).endswith("(got 1e+19)")  # the number, not numpy's repr of it


def test_a_job_larger_than_the_cluster_is_rejected():
    assert validate_trace(minimal(), max_gpus=8)["gpus"].max() == 8
    err = error(minimal(gpus=[1, 16, 2]), max_gpus=8)
    assert (err.row, err.column) == (1, "gpus")
    assert "larger than the cluster" in str(err)


def test_error_rows_count_from_row_base_and_ignore_the_index():
    df = minimal(duration_s=[5, -1, 7])
    df.index = [10, 11, 12]
    err = error(df, row_base=2)
    assert err.row == 3  # position 1, on line 3 of a CSV file with a header
    assert "row 3" in str(err)


def test_an_empty_trace_is_rejected():
    err = error(minimal().iloc[:0])
    assert err.row is None and "no jobs" in str(err)
    assert "no jobs" in str(error(pd.DataFrame()))


@pytest.mark.parametrize("column", ["job_id", "submit_s", "gpus", "duration_s"])
def test_a_missing_required_column_is_named(column):
    err = error(minimal().drop(columns=[column]))
    assert err.column == column and err.row is None
    assert "required column missing" in str(err)


def test_timestamps_are_refused_naming_the_column_and_durations_become_seconds():
    """A datetime column (a Parquet trace's timestamps) once passed as nanoseconds since 1970;
    a timedelta column is seconds in another type."""
    when = pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])
    err = error(minimal(submit_s=when))
    assert (err.row, err.column) == (None, "submit_s")
    assert "holds dates and times, not seconds" in str(err)
    out = validate_trace(
        minimal(submit_s=when - when.min(), duration_s=pd.to_timedelta([5, 6, 7], "s"))
    )
    assert out["submit_s"].tolist() == [0.0, 86_400.0, 172_800.0]
    assert out["duration_s"].tolist() == [5.0, 6.0, 7.0]


def test_a_trace_whose_span_exceeds_a_run_names_its_last_job_not_the_days_knob():
    """Replayed whole, a trace covers time 0 to its last submission: one job at 1e12 s (a
    column in milliseconds, say) would need 11 million days. The error names the column and
    the job, not ``days``, which no one gave."""
    trace = minimal(submit_s=[0, 1e12, 5])
    with pytest.raises(TraceError, match=r"column 'submit_s': job b is submitted 1e\+12 s"):
        il.simulate(il.SimConfig(policy="fifo", gpus=8), trace=trace)
    run = il.simulate(il.SimConfig(policy="fifo", gpus=8, days=1.0), trace=trace)
    assert set(run.events["job_id"]) == {"a", "c"}  # (given days, its start is replayed)
