"""What a sweep is given: seeds written as text, a call from a script without the ``__main__``
guard, and the number of local workers on a machine smaller than its host."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from impactlab import cli
from impactlab.runs.machine import PARENT_BYTES, WORKER_BYTES, Resources, resources
from impactlab.runs.sweep import SweepError, parse_seeds

GIB = 2**30


# ----- seeds ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("0-5", [0, 1, 2, 3, 4, 5]),
        ("3", [3]),
        ("0,3,7", [0, 3, 7]),
        ("0-2,7", [0, 1, 2, 7]),
        (" 4 - 5 ", [4, 5]),
        ("3-3", [3]),
        (2, [2]),
    ],
)
def test_seeds_written_as_text(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("5-0", "runs backwards (did you mean 0-5?)"),
        ("3-3x", "bad part '3-3x'"),
        ("", "bad part ''"),
        ("0,,2", "bad part ''"),
        ("-1", "bad part '-1'"),
        ("1-", "bad part '1-'"),
        ("0-2,1", "seed 1 is given more than once"),
        ("a", "bad part 'a'"),
    ],
)
def test_bad_seeds_are_refused_never_read_as_fewer(text, says):
    with pytest.raises(
        SweepError, match=f"{says.replace('(', '[(]').replace(')', '[)]').replace('?', '[?]')}"
    ):
        parse_seeds(text)


@pytest.mark.parametrize("text", ["5-0", "3-3x", ""])
def test_the_cli_refuses_bad_seeds_in_one_line(text, capsys):
    assert cli.main(["sweep", "--seeds", text]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seeds" in err and "seeds are written like 0-5" in err


def test_a_grid_file_with_bad_seeds_is_refused(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("grid:\n  cap_hours: [1, 8]\nseeds: 5-0\n")
    assert cli.main(["sweep", str(grid), "--backend", "serial", "--no-progress"]) == 2
    assert "runs backwards" in capsys.readouterr().err


def test_a_slip_in_a_grid_files_base_names_the_file(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("grid:\n  cap_hours: [1, 8]\nbase: {gpu: 88, days: 1}\n")
    assert cli.main(["sweep", str(grid), "--backend", "serial", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == f"impactlab: error: {grid}: base: unknown parameter 'gpu'; did you mean gpus?\n"


# ----- a script without the __main__ guard ------------------------------------------------------
SCRIPT = """
import warnings
import impactlab as il

warnings.simplefilter("always")
{body}
"""
CALL = (
    'frame = il.sweep(il.SimConfig(gpus=8, days=0.25), {"policy": ["fifo", "legacy"]}, '
    'backend="processes", workers=2, progress=False)\nprint("runs", len(frame), set(frame["status"]))'
)


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "my_sweep.py"
    path.write_text(SCRIPT.format(body=body))
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


def test_a_sweep_at_a_scripts_top_level_runs_serially_and_says_why(tmp_path):
    done = run_script(tmp_path, CALL)
    assert done.returncode == 0, done.stderr
    assert "runs 2 {'ok'}" in done.stdout
    warning = [line for line in done.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warning) == 1 and 'outside `if __name__ == "__main__":`' in warning[0]
    assert "running serially instead" in warning[0] and "my_sweep.py" in warning[0]


def test_a_sweep_under_the_guard_or_in_a_function_called_from_it_is_not_warned(tmp_path):
    body = (
        "def main():\n"
        + textwrap.indent(CALL, "    ")
        + "\n\nif __name__ == '__main__':\n    main()\n"
    )
    done = run_script(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert "runs 2 {'ok'}" in done.stdout and "RuntimeWarning" not in done.stderr


def test_a_function_called_from_unguarded_top_level_code_is_caught(tmp_path):
    body = "def main():\n" + textwrap.indent(CALL, "    ") + "\n\nmain()\n"
    done = run_script(tmp_path, body.replace('backend="processes"', 'backend="dask"'))
    assert done.returncode == 0, done.stderr
    assert "running serially instead" in done.stderr


def test_python_dash_m_impactlab_sweeps_in_worker_processes(tmp_path):
    """``python -m impactlab sweep`` ran serially, warned that impactlab's own __main__.py
    called the sweep outside the guard; the console script did not."""
    argv = ["sweep", "--gpus", "8", "--days", "0.25", "--grid", "policy=fifo,legacy"]
    done = subprocess.run(
        [sys.executable, "-m", "impactlab", "-v", *argv, "--out", "o", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr and "running serially" not in done.stderr


# ----- workers that fit the machine -------------------------------------------------------------
def fake_cgroup(root: Path, cpu_max: str | None = None, memory_max: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if cpu_max is not None:
        (root / "cpu.max").write_text(cpu_max + "\n")
    if memory_max is not None:
        (root / "memory.max").write_text(memory_max + "\n")
    return root


def test_a_binder_pod_of_one_cpu_and_2_gb_gets_one_worker(tmp_path):
    """The host may have 64 cores; the pod's quota and limit decide."""
    found = resources(fake_cgroup(tmp_path, "100000 100000", str(2 * GIB)), environ={})
    assert (found.cpus, found.memory_bytes) == (1.0, 2 * GIB)
    assert found.workers(40) == 1
    assert (
        "1 CPUs (cgroup cpu.max)" in found.describe()
        and "2.0 GiB (cgroup memory.max)" in found.describe()
    )


def test_jupyterhub_limits_from_the_environment_count_too(tmp_path):
    found = resources(
        fake_cgroup(tmp_path, "max 100000", "max"),
        environ={"CPU_LIMIT": "1.0", "MEM_LIMIT": str(2 * GIB)},
    )
    assert found.cpus == min(1.0, len(os.sched_getaffinity(0))) and found.cpus_from in (
        "CPU_LIMIT",
        "CPU affinity",
    )
    assert found.memory_bytes == 2 * GIB and found.memory_from == "MEM_LIMIT"
    assert found.workers(40) == 1


def test_memory_bounds_the_workers_when_cpus_are_plenty():
    roomy_cpus = Resources(
        cpus=16, memory_bytes=PARENT_BYTES + 3 * WORKER_BYTES + 1, cpus_from="t", memory_from="t"
    )
    assert roomy_cpus.workers(40) == 3
    assert roomy_cpus.workers(2) == 2  # never more workers than runs
    assert Resources(2.5, None, "t", "t").workers(40) == 2  # a fractional quota rounds down
    assert Resources(0.5, 100, "t", "t").workers(40) == 1  # at least one


def test_no_limits_means_the_cpus_this_process_may_run_on(tmp_path):
    found = resources(fake_cgroup(tmp_path / "empty"), environ={"CPU_LIMIT": "junk"})
    assert found.cpus == len(os.sched_getaffinity(0)) and found.cpus_from == "CPU affinity"
    assert found.memory_from == "physical memory"
