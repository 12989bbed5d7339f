"""The optional ``cluster`` column: kept (and checked) when a trace names one, never added."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from impactlab.inputs.trace import COLUMNS, IF_PRESENT, TraceError, validate_trace
from impactlab.inputs.traces import load_trace
from impactlab.inputs.traces.reshape import window

FIXTURES = Path(__file__).parent / "fixtures"


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def jobs(**extra) -> pd.DataFrame:
    data = {"job_id": ["a", "b", "c"], "submit_s": [0, 1, 2], "gpus": [1, 2, 4]}
    data["duration_s"] = [5, 6, 7]
    return pd.DataFrame({**data, **extra})


# ----- the schema ---------------------------------------------------------------------------
def test_cluster_is_an_optional_column_that_is_never_added():
    assert IF_PRESENT == {"cluster": ""}
    assert "cluster" not in COLUMNS
    out = validate_trace(jobs())
    assert list(out.columns) == list(COLUMNS)


def test_cluster_is_kept_as_text_after_the_schema_and_before_other_extras():
    out = validate_trace(jobs(team=["x", "y", "z"], cluster=[" east ", None, np.nan]))
    assert list(out.columns) == [*COLUMNS, "cluster", "team"]
    assert list(out["cluster"]) == ["east", "", ""]
    assert out["cluster"].dtype == object


def test_a_numeric_cluster_becomes_its_text():
    assert list(validate_trace(jobs(cluster=[1, 2, 2]))["cluster"]) == ["1", "2", "2"]
    mixed = validate_trace(jobs(cluster=["a", 7, None]))
    assert list(mixed["cluster"]) == ["a", "7", ""]


def test_categorical_and_nullable_clusters_with_blanks_are_read():
    named = validate_trace(jobs(cluster=pd.Categorical(["x", None, "y"])))
    assert list(named["cluster"]) == ["x", "", "y"]
    numbered = validate_trace(jobs(cluster=pd.array([1, None, 3], dtype="Int64")))
    assert list(numbered["cluster"]) == ["1", "", "3"]


@pytest.mark.parametrize(
    ("values", "row"),
    [
        ([True, False, True], 0),
        (["east", ["west"], "east"], 1),
        (["east", "west", b"north"], 2),
        (["east", None, np.True_], 2),
    ],
)
def test_a_cluster_that_is_not_text_names_source_row_and_column(values, row):
    with pytest.raises(TraceError) as info:
        validate_trace(jobs(cluster=values), source="jobs.csv", row_base=2)
    err = info.value
    assert (err.source, err.row, err.column) == ("jobs.csv", row + 2, "cluster")
    assert str(err).startswith(f"jobs.csv, row {row + 2}, column 'cluster': must be text")


def test_reshaping_keeps_the_cluster():
    trace = validate_trace(jobs(cluster=["east", "", "west"]))
    assert list(window(trace, 0.0, 1.0)["cluster"]) == ["east", "", "west"]
    assert "cluster" not in window(validate_trace(jobs()), 0.0, 1.0).columns


# ----- the generic layout -------------------------------------------------------------------
def test_generic_csv_keeps_its_cluster_column_and_a_blank_cell_becomes_empty(tmp_path):
    path = write(
        tmp_path,
        "job_id,submit_s,gpus,duration_s,cluster,note\n"
        "a,0,1,5,east,x\n"
        "b,1,2,6,,y\n"
        "c,2,1,7, west ,z\n"
        "d,3,1,8,42,w\n",
    )
    trace = load_trace(path)
    assert list(trace["cluster"]) == ["east", "", "west", "42"]
    assert list(trace.columns) == [*COLUMNS, "cluster", "note"]


def test_generic_csv_without_a_cluster_column_has_none(tmp_path):
    path = write(tmp_path, "job_id,submit_s,gpus,duration_s\na,0,1,5\nb,1,2,6\n")
    trace = load_trace(path)
    assert "cluster" not in trace.columns
    assert list(trace.columns) == list(COLUMNS)


def test_the_shipped_generic_fixture_is_unchanged():
    trace = load_trace(FIXTURES / "generic_trace.csv")
    assert "cluster" not in trace.columns


def test_generic_parquet_keeps_the_cluster_and_missing_becomes_empty(tmp_path):
    jobs(cluster=["east", None, "west"]).to_parquet(tmp_path / "t.parquet")
    trace = load_trace(tmp_path / "t.parquet")
    assert list(trace["cluster"]) == ["east", "", "west"]


def test_generic_parquet_with_a_flag_for_cluster_names_the_file_row_and_column(tmp_path):
    path = tmp_path / "t.parquet"
    jobs(cluster=[True, False, True]).to_parquet(path)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    err = info.value
    assert (err.source, err.row, err.column) == (str(path), 0, "cluster")


def test_a_cluster_error_names_the_files_row_after_skipped_rows(tmp_path):
    path = tmp_path / "t.parquet"
    jobs(gpus=[0, 1, 1], cluster=[True, True, False]).to_parquet(path)  # row 0: CPU-only
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert (info.value.row, info.value.column) == (1, "cluster")


# ----- Slurm --------------------------------------------------------------------------------
def sacct_with_cluster(tmp_path: Path, values: dict[str, str]) -> Path:
    """The sacct fixture with a ``Cluster`` field (``values`` by JobID; others ``gpu-a``)."""
    lines = (FIXTURES / "sacct_parsable2.txt").read_text().splitlines()
    out = [lines[0] + "|Cluster"]
    for line in lines[1:]:
        job = line.split("|", 1)[0]
        out.append(f"{line}|{values.get(job, 'gpu-a')}")
    return write(tmp_path, "\n".join(out) + "\n", "sacct.txt")


def test_sacct_cluster_field_becomes_the_cluster(tmp_path):
    path = sacct_with_cluster(tmp_path, {"1002": "gpu-b", "1003_2": ""})
    trace = load_trace(path).set_index("job_id")
    assert trace.attrs["load_report"]["format"] == "slurm"
    assert trace["cluster"].to_dict() == {
        "1001": "gpu-a",
        "1002": "gpu-b",
        "1003_1": "gpu-a",
        "1003_2": "",
        "1008": "gpu-a",
    }
    plain = load_trace(FIXTURES / "sacct_parsable2.txt").set_index("job_id")
    pd.testing.assert_frame_equal(trace.drop(columns="cluster"), plain)


def test_sacct_without_cluster_has_no_cluster_column():
    assert "cluster" not in load_trace(FIXTURES / "sacct_parsable2.txt").columns


# ----- formats whose source names no physical cluster ---------------------------------------
def test_philly_derived_csv_cluster_is_the_virtual_cluster_not_the_cluster():
    trace = load_trace(FIXTURES / "philly_derived.csv")
    assert "cluster" not in trace.columns
    source = pd.read_csv(FIXTURES / "philly_derived.csv", dtype=str, keep_default_na=False)
    assert set(trace["project"]) <= set(source["cluster"])


def test_helios_in_a_folder_named_by_its_cluster_gets_no_cluster(tmp_path):
    folder = tmp_path / "Venus"
    folder.mkdir()
    shutil.copy(FIXTURES / "helios_cluster_log.csv", folder / "cluster_log.csv")
    trace = load_trace(folder / "cluster_log.csv")
    assert trace.attrs["load_report"]["format"] == "helios"
    assert "cluster" not in trace.columns


@pytest.mark.parametrize(
    "name", ["philly_cluster_job_log.json", "acme_trace_seren.csv", "spot_job_info_df.csv"]
)
def test_other_public_formats_get_no_cluster(name):
    assert "cluster" not in load_trace(FIXTURES / name).columns


def test_inspect_sizes_each_cluster_a_trace_names(tmp_path, capsys):
    """By hand, over the trace's 2-day span: cluster a's jobs hold 192 GPU-hours (4 GPUs busy:
    one node, 0.50x); b's hold 616 (12.8 GPUs busy): one node at 2.5x would leave its 16-GPU
    job out, so b gets the 2 nodes that hold it (0.80x)."""
    from impactlab.cli import main

    rows = ["job_id,submit_s,gpus,duration_s,project,cluster"]
    rows += [f"a{i},{i * 3600},8,10800,p,a" for i in range(8)]  # 8 x 8 GPUs x 3 h = 192 h
    rows += [f"b{i},{i * 600},1,36000,p,b" for i in range(60)]  # 60 x 10 h = 600 h
    rows += ["big,100,16,3600,p,b", "free,172799,1,60,p,"]  # (the last sets a 2-day span)
    path = write(tmp_path, "\n".join(rows) + "\n")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "clusters named in the trace: a (8 jobs), b (61 jobs)"
    # a: 192 GPU-h / 48 h = 4 GPUs busy -> 1 node, 0.50x; b: 616 GPU-h / 48 h on 16 GPUs
    assert out[-1] == (
        "as a fleet near 2.5x each: --clusters a:8,b:16 offers a 0.50x, b 0.80x of their own "
        "jobs; the 1 job naming none adds to the load where the fleet places it"
    )
