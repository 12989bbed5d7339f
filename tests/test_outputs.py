"""Output paths are checked before any work: every command and ``save`` refuse a path they could
not write with one line naming it (exit status 2), fast, and leave nothing behind."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import impactlab as il
from impactlab.base.files import OutputPathError, check_output_dir, check_output_file
from impactlab.cli import main

UNWRITABLE = Path("/proc/impactlab-x")  # a pseudo-filesystem: nothing can be created there
needs_proc = pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc")


def bad_paths(tmp_path: Path) -> dict[str, Path]:
    """One path of each kind that cannot be a results folder."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    paths = {
        "a file where a folder is expected": a_file,
        "under a file": a_file / "run",
        "missing parent": tmp_path / "no" / "such" / "run",
    }
    if Path("/proc/self").exists():
        paths["unwritable"] = UNWRITABLE
    return paths


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--policy", "fifo", "--gpus", "8", "--days", "0.5"],
        ["compare", "--policies", "fifo", "legacy", "--gpus", "8", "--days", "0.5"],
        ["sweep", "--grid", "policy=fifo", "--gpus", "8", "--days", "0.5", "--backend", "serial"],
    ],
)
def test_every_command_refuses_a_bad_out_folder_in_one_line_before_running(
    command, tmp_path, capsys, monkeypatch
):
    def no_run(*args, **kwargs):
        raise AssertionError("the run started before the output path was checked")

    for module, name in (
        ("impactlab.runs.simulate", "simulate"),
        ("impactlab.runs.simulate", "compare"),
        ("impactlab.runs.sweep", "plan"),
    ):
        monkeypatch.setattr(importlib.import_module(module), name, no_run)
    for what, path in bad_paths(tmp_path).items():
        assert main([*command, "--out", str(path)]) == 2, what
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--out {path}" in err, (what, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing created


def test_report_refuses_a_bad_output_file_before_rendering(tmp_path, capsys):
    source = tmp_path / "run"
    il.simulate(il.SimConfig(policy="fifo", gpus=8, days=0.5)).save(source)
    cases = {
        "a folder": tmp_path,
        "missing parent": tmp_path / "no" / "r.html",
        "under a file": source / "config.json" / "r.html",
    }
    if Path("/proc/self").exists():
        cases["unwritable"] = UNWRITABLE / "r.html"
    for what, path in cases.items():
        assert main(["report", str(source), "-o", str(path)]) == 2, what
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"-o {path}" in err, (what, err)
    assert not (source / "report.html").exists()


def test_report_names_a_missing_source_or_a_default_output_it_cannot_write(tmp_path, capsys):
    missing = tmp_path / "no-such-run"
    assert main(["report", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"impactlab: error: {missing}: no such folder; give a sweep, simulate or compare --out "
        "folder\n"
    )
    source = tmp_path / "run"
    il.simulate(il.SimConfig(policy="fifo", gpus=8, days=0.5)).save(source)
    (source / "report.html").mkdir()  # (the default output, DIR/report.html, cannot be written)
    assert main(["report", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"impactlab: error: the report (-o) {source / 'report.html'}: is a folder"
    )


def test_save_refuses_before_writing_anything(tmp_path):
    result = il.simulate(il.SimConfig(policy="fifo", gpus=8, days=0.5))
    for path in bad_paths(tmp_path).values():
        with pytest.raises(OutputPathError, match=str(path)):
            result.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    saved = result.save(tmp_path / "run")  # a new folder in an existing one is created
    assert il.SimResult.load(saved).events.equals(result.events)


def test_sweep_refuses_a_bad_out_before_planning(tmp_path):
    for path in bad_paths(tmp_path).values():
        with pytest.raises(il.sweep.__globals__["SweepError"], match="out="):
            il.sweep(
                il.SimConfig(gpus=8, days=0.5),
                {"policy": ["fifo"]},
                backend="serial",
                progress=False,
                out=path,
            )


def test_the_checks_accept_what_can_be_written_and_create_nothing(tmp_path):
    assert check_output_dir(tmp_path) == tmp_path  # an existing folder
    assert check_output_dir(tmp_path / "new") == tmp_path / "new"
    assert check_output_file(tmp_path / "r.html") == tmp_path / "r.html"
    (tmp_path / "old.html").write_text("x")
    assert check_output_file(tmp_path / "old.html") == tmp_path / "old.html"  # overwritten later
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.html"]


@pytest.mark.skipif(
    os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root may write anywhere"
)
def test_a_read_only_folder_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(OutputPathError, match="cannot write in"):
        check_output_dir(locked / "run")


@needs_proc
@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--policy", "impactful", "--out", str(UNWRITABLE)],
        ["sweep", "--out", str(UNWRITABLE)],
        ["report", ".", "-o", str(UNWRITABLE / "r.html")],
    ],
)
def test_a_bad_output_path_is_answered_before_the_heavy_modules_load(argv):
    """What makes the answer fast (about 0.3 s for the whole process here, against about 1 s to
    import pandas and the simulator): the check runs before pandas is imported at all."""
    script = (
        "import sys\nfrom impactlab.cli import main\ncode = main(sys.argv[1:])\n"
        "print('pandas' in sys.modules, code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["False", "2"], done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and str(UNWRITABLE) in done.stderr


TINY = ["--gpus", "8", "--days", "0.5"]


def test_new_runs_replace_the_runs_saved_in_their_out_folder(tmp_path, capsys):
    """A compare into a folder that holds a simulate run (or another compare) replaces those
    runs in its report: the report read the old run alone, or mixed both compares as one
    comparison. Runs saved in other sub-folders are not deleted (they may be kept on purpose)."""
    from impactlab.notebook.report import load_results

    out = tmp_path / "out"
    out.mkdir()
    assert main(["simulate", "--policy", "fifo", *TINY, "--out", str(out / "mine")]) == 0
    assert main(["simulate", "--policy", "impactful", *TINY, "--out", str(out)]) == 0
    assert [r.run for r in load_results(out)] == ["impactful"]
    capsys.readouterr()
    assert main(["compare", "--policies", "fifo", "legacy", *TINY, "--out", str(out)]) == 0
    assert f"replaced the run saved in {out} before" in capsys.readouterr().err
    assert [r.run for r in load_results(out)] == ["fifo", "legacy"]
    assert main(["compare", "--policies", "fairshare", "--gpus", "16", "--days", "0.5",
                 "--out", str(out)]) == 0  # fmt: skip
    assert "replaced" not in capsys.readouterr().err  # (no run in the folder itself)
    assert [(r.run, r.config.gpus) for r in load_results(out)] == [("fairshare", 16)]
    assert (out / "mine" / "config.json").exists()  # (a run kept beside them, not deleted)
    assert main(["simulate", "--policy", "legacy", *TINY, "--out", str(out)]) == 0
    assert [r.run for r in load_results(out)] == ["legacy"]
    assert not (out / "compare.json").exists()


def test_single_runs_are_not_saved_into_a_sweeps_folder(tmp_path, capsys):
    """Its report would read only the sweep."""
    sweep = tmp_path / "sweep"
    grid = ["--grid", "policy=fifo", "--backend", "serial", *TINY]
    assert main(["sweep", *grid, "--out", str(sweep)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--policy", "fifo", *TINY, "--out", str(sweep)]) == 2
    assert f"--out {sweep}: holds a sweep" in capsys.readouterr().err
    assert main(["sweep", *grid, "--out", str(sweep)]) == 0  # (a sweep resumes in its own)


def test_the_saved_summary_is_strict_json_with_null_for_undefined(tmp_path):
    result = il.simulate(il.SimConfig(gpus=8, days=0.5, warmup_days=0))
    out = result.save(tmp_path / "run")
    text = (out / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    saved = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))
    undefined = [k for k, v in result.summary().items() if isinstance(v, float) and v != v]
    assert undefined and all(saved[k] is None for k in undefined)


def test_finite_replaces_every_undefined_number_by_null():
    from impactlab.analysis.results import finite

    nested = {"a": np.float32("nan"), "b": [1.0, float("inf"), np.float32(2)], "c": (np.nan,)}
    assert finite(nested) == {"a": None, "b": [1.0, None, 2.0], "c": [None]}
