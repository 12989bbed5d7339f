"""Every bad input named in one line with exit status 2, before any long work: binary,
compressed and undecodable files, directories, YAML that refers to itself, runs too long to be
meant. (Bad rows and columns of each trace format are in test_loaders and test_cli_traces.)"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from impactlab.base.files import InputFileError, read_yaml
from impactlab.cli import LONG_RUN_JOBS, main
from impactlab.inputs.budget_io import load_budgets
from impactlab.inputs.budgets import BudgetError
from impactlab.inputs.scenario import ScenarioError, load_scenario
from impactlab.inputs.workload import estimate_size

DATA = Path(__file__).resolve().parent.parent / "impactlab" / "data"
EXAMPLE = DATA / "example-trace-88gpu-3d.csv"
CYCLE = "name: root\nchildren: &kids\n  - name: a\n    share: 1\n    children: *kids\n"


def one_error_line(capsys, argv: list[str]) -> str:
    """Run the CLI, expect status 2 and one line on stderr without a traceback; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("impactlab") and "\n" not in err and "Traceback" not in err
    return err


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(
    "data, words",
    [
        (bytes(range(256)) * 4, "a binary file, not a text trace"),
        (
            gzip.compress(EXAMPLE.read_bytes(), mtime=0),
            "a gzip-compressed file (decompress it first: gunzip)",
        ),
        (b"PAR1" + bytes(100), "a Parquet file (give it a .parquet name"),
        (
            b"job_id,submit_s,gpus,duration_s\na,0,1,5\n\xe9t\xe9,0,1,5\n",
            "not UTF-8 text (byte 0xe9 on line 3)",
        ),
    ],
    ids=["binary", "gzip", "parquet", "latin-1"],
)
def test_a_file_that_is_not_text_is_named_as_such(tmp_path, capsys, data, words):
    trace = write(tmp_path / "trace.csv", data)
    err = one_error_line(
        capsys, ["simulate", "--policy", "fifo", "--gpus", "8", "--trace", str(trace)]
    )
    assert str(trace) in err and words in err
    assert len(err) < 200  # no raw bytes echoed back


def test_inspect_names_a_binary_file_too(tmp_path, capsys):
    trace = write(tmp_path / "t.csv", bytes(range(256)))
    assert "a binary file" in one_error_line(capsys, ["inspect", str(trace)])


def test_a_directory_as_trace_says_it_is_a_directory(tmp_path, capsys):
    err = one_error_line(
        capsys, ["simulate", "--policy", "fifo", "--gpus", "8", "--trace", str(tmp_path)]
    )
    assert f"{tmp_path}: is a directory; give a trace file" in err and "PAI" in err


@pytest.mark.parametrize("flag", ["--budgets", "--scenario"])
@pytest.mark.parametrize(
    "data, words",
    [
        (b"\x89\xff\xfe garbage\n\x00\x01", "a binary file, not a text file"),
        (b"name: caf\xe9\n", "not UTF-8 text (byte 0xe9 on line 1)"),
        (CYCLE, "a YAML alias (*name) refers to a node that contains it"),
        ("name: [unclosed\n", "not valid YAML (line 2)"),
    ],
    ids=["binary", "latin-1", "alias-cycle", "unclosed"],
)
def test_bad_yaml_files_name_the_file_and_the_problem(tmp_path, capsys, flag, data, words):
    path = write(tmp_path / "input.yaml", data)
    err = one_error_line(capsys, ["simulate", "--policy", "fifo", "--days", "1", flag, str(path)])
    assert f"{path}: cannot read" in err and words in err


def test_a_directory_as_budgets_or_scenario(tmp_path):
    with pytest.raises(BudgetError, match="is a directory, not a file"):
        load_budgets(tmp_path)
    with pytest.raises(ScenarioError, match="is a directory, not a file"):
        load_scenario(tmp_path)


def test_an_alias_cycle_in_a_sweep_grid(tmp_path, capsys):
    grid = write(tmp_path / "grid.yaml", "grid: &g\n  cap_hours: [1, 2]\n  again: *g\n")
    err = one_error_line(capsys, ["sweep", str(grid), "--seeds", "0"])
    assert "grid.yaml: cannot read the grid: a YAML alias" in err


def test_shared_aliases_that_are_not_cycles_are_fine(tmp_path):
    spec = read_yaml(write(tmp_path / "ok.yaml", "base: &b {share: 2}\nchildren: [*b, *b]\n"))
    assert spec["children"] == [{"share": 2}, {"share": 2}]
    with pytest.raises(InputFileError, match="contains it"):
        read_yaml(write(tmp_path / "list.yaml", "&l [1, *l]\n"))


def test_a_run_too_long_to_be_meant_stops_with_an_estimate(capsys, tmp_path):
    argv = ["compare", "--gpus", "1024", "--days", "2000", "--out", str(tmp_path / "out")]
    err = one_error_line(capsys, argv)
    assert "about 12,288,000 jobs per policy" in err and "--long-run" in err
    assert not (tmp_path / "out").exists()  # nothing was written, nothing was run


def test_the_size_estimate_bounds_the_generator_from_above():
    from impactlab.base.config import SimConfig
    from impactlab.inputs.generator import generate

    for gpus, demand in ((88, 1.5), (256, 2.5), (512, 4.0)):
        config = SimConfig(gpus=gpus, days=3, demand=demand)
        jobs = len(generate(config.generator()).trace)
        assert 0.7 * estimate_size(config).jobs <= jobs <= estimate_size(config).jobs
    assert estimate_size(SimConfig(trace_path=str(EXAMPLE))) is None  # a trace's rows bound it
    assert LONG_RUN_JOBS < estimate_size(SimConfig(gpus=1024, days=2000)).jobs


def test_undefined_metrics_are_null_in_json_and_dashes_in_the_table(tmp_path, capsys):
    # one unallocated job: nothing is owed, so impact, impact_strict and jain are undefined
    trace = write(tmp_path / "t.csv", "job_id,submit_s,gpus,duration_s,project\na,0,1,600,\n")
    argv = [
        "simulate",
        "--policy",
        "impactful",
        "--gpus",
        "8",
        "--trace",
        str(trace),
        "--days",
        "1",
    ]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        summary["impact"] is None and summary["impact_strict"] is None and summary["jain"] is None
    )
    assert summary["occupancy"] == 0 and summary["availability"] == 1  # defined, and truly 0 and 1
    assert main(argv) == 0
    table = capsys.readouterr().out
    impact_line = next(line for line in table.splitlines() if line.split()[:1] == ["impact"])
    assert impact_line.split() == ["impact", "-"]
