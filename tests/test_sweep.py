"""Sweeps: the same metrics from every backend, resume after a kill, failures recorded, statistics,
sweep charts, the offline report and the CLI end to end. Small runs (16 GPUs, 1 day)."""

from __future__ import annotations

import html
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import impactlab as il
from impactlab import charts, cli
from impactlab.analysis import findings as f
from impactlab.notebook.report import build_report
from impactlab.runs.sweep import (
    SweepError,
    headline_table,
    load_sweep,
    plan,
    summarise_sweep,
    sweep,
    t975,
    worker_policies,
)

sweep_module = importlib.import_module("impactlab.runs.sweep")
ROOT = Path(__file__).resolve().parent.parent
BASE = il.SimConfig(gpus=16, days=1)
# "shortest" is registered by conftest as "plugin_policy:ShortestFirst": workers must load it too
GRID = {"policy": ["legacy", "impactful", "shortest"], "cap_hours": [1, 8]}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> tuple[pd.DataFrame, Path]:
    out = tmp_path_factory.mktemp("sweep")
    return sweep(BASE, GRID, SEEDS, backend="serial", progress=False, out=out), out


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="wall_s").reset_index(drop=True)


def missing_as_none(frame: pd.DataFrame) -> pd.DataFrame:
    """A knob's None (impactful's half_life_days) reads as NaN once rows of other policies join it."""
    return comparable(frame).astype(object).map(lambda v: None if pd.isna(v) else v)


# ----- planning ---------------------------------------------------------------------------------
def test_a_knob_applies_only_to_the_policies_that_declare_it(serial):
    frame, _ = serial
    assert len(frame) == 8  # legacy and shortest once per seed, impactful per cap and seed
    assert frame.groupby("policy").size().to_dict() == {"legacy": 2, "impactful": 4, "shortest": 2}
    assert frame.loc[frame["policy"] == "legacy", "cap_hours"].isna().all()
    assert sorted(frame.loc[frame["policy"] == "impactful", "cap_hours"]) == [1, 1, 8, 8]
    assert (frame["status"] == "ok").all() and frame["run_key"].is_unique


def test_a_typo_or_a_bad_value_fails_before_any_run(tmp_path):
    with pytest.raises(SweepError, match="did you mean cap_hours"):
        sweep(BASE, {"cap_hour": [1, 4]}, out=tmp_path / "a")
    with pytest.raises(SweepError, match="cap_hours"):
        sweep(BASE, {"cap_hours": [4, -1]}, out=tmp_path / "b")
    with pytest.raises(SweepError, match="not a knob of any"):
        plan(BASE, {"policy": ["legacy"], "cap_hours": [4]})
    with pytest.raises(SweepError, match="seeds="):
        plan(BASE, {"seed": [1, 2]})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_run_keys_are_stable_and_depend_on_the_config_only():
    again = plan(BASE, {"cap_hours": ["1", 8.0]}, [0])  # text and floats parse to the same configs
    assert [r.key for r in plan(BASE, {"cap_hours": [1, 8]}, [0])] == [r.key for r in again]
    assert len({r.point for r in plan(BASE, {"cap_hours": [1]}, [0, 1, 2])}) == 1


# ----- backends ---------------------------------------------------------------------------------
def test_processes_match_serial_exactly(serial):
    frame, _ = serial
    processes = sweep(BASE, GRID, SEEDS, backend="processes", workers=2, progress=False)
    pd.testing.assert_frame_equal(comparable(processes), comparable(frame))


@pytest.mark.thorough  # a local dask cluster takes seconds to start
def test_a_dask_local_cluster_matches_serial_exactly(serial):
    frame, _ = serial
    dask = sweep(BASE, GRID, SEEDS, backend="dask", workers=2, progress=False)
    pd.testing.assert_frame_equal(comparable(dask), comparable(frame))


@dataclass
class LocalPolicy(
    il.BasePolicy
):  # stands for a class typed into a notebook: not importable by name
    name = "local"

    def schedule(self, now, sched):
        """Nothing to do."""


def test_a_policy_workers_cannot_import_is_explained_before_the_sweep(monkeypatch):
    monkeypatch.setattr(LocalPolicy, "__module__", "__main__")
    il.register_policy("local", LocalPolicy)
    try:
        runs = plan(BASE, {"policy": ["local"]})
        with pytest.raises(SweepError, match="spawned worker processes cannot import"):
            worker_policies(runs, "processes")
        assert worker_policies(runs, "dask") == {"local": LocalPolicy}  # shipped by value
        assert worker_policies(plan(BASE, {"policy": ["shortest"]}), "processes") == {
            "shortest": "plugin_policy:ShortestFirst"
        }
    finally:
        importlib.import_module("impactlab.base.registry").unregister_policy("local")


# ----- files, resume, failures ------------------------------------------------------------------
def test_each_run_is_filed_and_loads_back(serial):
    frame, out = serial
    assert (
        len(list((out / "runs").glob("*.parquet"))) == len(list((out / "runs").glob("*.json"))) == 8
    )
    record = json.loads((out / "runs" / f"{frame['run_key'][0]}.json").read_text())
    row = frame.iloc[0]
    for name, value in il.SimConfig.from_dict(record["config"]).flat().items():
        assert row[name] == value or (value is None and pd.isna(row[name])), name
    assert record["status"] == "ok" and record["impactlab"]["version"] == il.__version__
    pd.testing.assert_frame_equal(comparable(load_sweep(out)), comparable(frame), check_dtype=False)


RESUMABLE = """
import impactlab as il
il.sweep(il.SimConfig(gpus=16, days=1), {"cap_hours": [1, 8]}, seeds=range(10), backend="serial",
         progress=False, out=OUT)
"""


def test_a_killed_sweep_resumes_without_redoing_finished_runs(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = RESUMABLE.replace("OUT", repr(str(out)))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while (
        len(list(out.glob("runs/*.json"))) < 3
        and time.monotonic() < deadline
        and child.poll() is None
    ):
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    finished = {p: p.stat().st_mtime_ns for p in out.glob("runs/*.json")}
    assert 3 <= len(finished) < 20, "the sweep should be killed midway"
    ran = []
    real = sweep_module.run_one
    monkeypatch.setattr(sweep_module, "run_one", lambda *a: ran.append(a) or real(*a))
    frame = sweep(
        il.SimConfig(gpus=16, days=1),
        {"cap_hours": [1, 8]},
        seeds=range(10),
        backend="serial",
        progress=False,
        out=out,
    )
    assert len(frame) == 20 and (frame["status"] == "ok").all()
    assert len(ran) == 20 - len(finished)
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in finished.items())
    fresh = sweep(
        il.SimConfig(gpus=16, days=1),
        {"cap_hours": [1, 8]},
        seeds=range(10),
        backend="serial",
        progress=False,
    )
    pd.testing.assert_frame_equal(comparable(frame), comparable(fresh), check_dtype=False)


def test_a_failing_run_is_recorded_and_the_others_run(tmp_path):
    missing = str(tmp_path / "no-such-trace.csv")
    frame = sweep(
        BASE, {"trace_path": [None, missing]}, backend="serial", progress=False, out=tmp_path / "s"
    )
    bad = frame[frame["status"] == "error"]
    assert list(frame["status"]) == ["ok", "error"] and frame.loc[0, "impact"] > 0
    assert "no-such-trace.csv" in bad["error"].iloc[0] and math.isnan(bad["impact"].iloc[0])
    record = json.loads((tmp_path / "s" / "runs" / f"{bad['run_key'].iloc[0]}.json").read_text())
    assert record["config"]["trace_path"] == missing and "Traceback" in record["traceback"]
    again = sweep(
        BASE, {"trace_path": [None, missing]}, backend="serial", progress=False, out=tmp_path / "s"
    )
    assert list(again["status"]) == [
        "ok",
        "error",
    ]  # failed runs are retried, finished ones are not
    assert "no-such-trace.csv" in build_report(tmp_path / "s")
    # a finished run's label says which trace it ran, though the axis's other value failed
    given = str(Path(__file__).parent / "fixtures" / "generic_trace.csv")
    frame = sweep(
        il.SimConfig(gpus=64, days=1),
        {"trace_path": [given, missing]},
        backend="serial",
        progress=False,
    )
    assert summarise_sweep(frame)["label"].unique().tolist() == [f"trace_path={given}"]


# ----- statistics and charts --------------------------------------------------------------------
def test_mean_and_t_interval_across_seeds_by_hand():
    frame = pd.DataFrame(
        {
            "policy": ["a"] * 3 + ["b"],
            "seed": [0, 1, 2, 0],
            "point_key": ["p"] * 3 + ["q"],
            "status": "ok",
            "impact": [1.0, 2.0, 3.0, 5.0],
        }
    )
    stats = summarise_sweep(frame).set_index("point_key")
    assert stats.loc["p", "mean"] == 2.0 and stats.loc["p", "n"] == 3
    assert stats.loc["p", "ci_high"] - 2.0 == pytest.approx(4.3027 / math.sqrt(3), abs=1e-9)
    assert math.isnan(stats.loc["q", "ci_low"])  # one seed: no interval
    assert list(stats["label"]) == ["policy=a", "policy=b"]


def test_the_headline_counts_the_runs_that_warned_per_config():
    frame = pd.DataFrame(
        {
            "policy": ["a"] * 3 + ["b"] * 2,
            "seed": [0, 1, 2, 0, 1],
            "point_key": ["p"] * 3 + ["q"] * 2,
            "status": ["ok", "ok", "ok", "ok", "error"],
            "warnings": ["a: a backlog", "", None, "", "b: a backlog"],  # q's warned run failed
            "impact": [1.0, 2.0, 3.0, 5.0, math.nan],
        }
    )
    stats = summarise_sweep(frame)
    assert stats.set_index("point_key")["warned"].to_dict() == {"p": 1, "q": 0}
    table = headline_table(stats, ["impact"])
    assert table[["config", "seeds", "warned"]].values.tolist() == [
        ["policy=a", 3, "1 of 3"],
        ["policy=b", 1, "0 of 1"],
    ]
    # a metric undefined in a run (no debug job that week) counts fewer seeds, not fewer runs
    gaps = frame.assign(impact=[1.0, math.nan, 3.0, 5.0, math.nan])
    table = headline_table(summarise_sweep(gaps), ["impact"])
    assert table[["seeds", "warned"]].values.tolist() == [[2, "1 of 3"], [1, "0 of 1"]]


def test_the_sweep_says_once_how_many_finished_runs_warned_and_of_what(caplog):
    frame = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok", "error"],  # (a failed run neither warned nor not)
            "warnings": ["a: a backlog | a: 9 funded jobs gave up", "", "b: a backlog", ""],
            "warning_codes": ["backlog,gave_up", "", "backlog", ""],
        }
    )
    with caplog.at_level("WARNING", logger="impactlab"):
        sweep_module._say_warnings(frame)
    assert "2 of 3 finished runs warned (backlog 2, gave_up 1)" in caplog.text


def test_the_sweep_report_says_each_warned_runs_sentences(serial):
    frame, out = serial
    warned = frame[frame["warnings"].fillna("") != ""]
    assert not warned.empty  # 16 GPUs for a day of the default workload: a backlog
    assert (warned["warning_codes"].str.len() > 0).all()  # e.g. "backlog", for a script
    assert set(",".join(warned["warning_codes"]).split(",")) <= set(f.WARNING_CODES)
    page = build_report(out)
    assert "<h2>Warnings</h2>" in page
    assert f"{len(warned)} of {len(frame)} runs warned" in page
    first = warned.iloc[0]
    assert f"seed {first['seed']}: " + html.escape(first["warnings"].split(" | ")[0]) in page


def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 29, 30, 31, 45, 100, 1000):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=2e-4)


def test_sweep_charts_build_and_serialise(serial):
    stats = summarise_sweep(serial[0])
    for chart in (
        charts.sweep_lines(stats, "cap_hours", "impact"),
        charts.tradeoff(stats, "impact", "wait_p90_s.all"),
    ):
        spec = chart.to_dict()
        assert spec["layer"] and len(json.dumps(spec)) < 100_000
    with pytest.raises(ValueError, match="no metric"):
        charts.sweep_lines(stats, "cap_hours", "nope")


# ----- report and CLI ---------------------------------------------------------------------------
def assert_offline(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert "<svg" in page and "<script" not in page


def test_the_report_is_offline_and_holds_charts_configs_and_version(serial):
    page = build_report(serial[1])
    assert_offline(page)
    assert page.count("<svg") >= 4 and "policy=impactful cap_hours=8" in page
    assert f"impactlab {il.__version__}" in page and "&quot;gpus&quot;: 16" in page


def test_the_report_reads_simulate_and_compare_folders(tmp_path):
    results = il.compare(BASE, ["legacy", "impactful"])
    results[0].save(tmp_path / "one")
    for r in results:
        (tmp_path / "both").mkdir(exist_ok=True)
        r.save(tmp_path / "both" / r.config.policy)
    for folder in ("one", "both"):
        page = build_report(tmp_path / folder)
        assert_offline(page)
        assert "impact" in page
        assert "Where the owed GPUs were" in page  # read back from the saved runs


def test_the_report_shows_maintenance_only_for_runs_with_a_plan(tmp_path):
    plan = il.Maintenance(name="rack", announce_h=6, down_h=10, hours=2, nodes=(0,))
    for name, config in (("planned", BASE.with_maintenance(plan)), ("plain", BASE)):
        (tmp_path / name).mkdir()
        for r in il.compare(config, ["legacy", "impactful"]):
            r.save(tmp_path / name / r.config.policy)
    planned, plain = build_report(tmp_path / "planned"), build_report(tmp_path / "plain")
    assert_offline(planned)
    assert "Planned maintenance" in planned and "maintenance_free_h_max" in planned
    assert "Planned maintenance" not in plain and "maintenance_free_h_max" not in plain


def test_a_truncated_run_table_is_run_again_and_named_by_the_report(tmp_path, capsys, caplog):
    """A run whose JSON says finished but whose table is empty or garbage (a full disk, a
    crash) is run again on resume; the report of such a folder names the file (status 2), and
    explain names a saved run's unreadable log, instead of a traceback."""
    argv = ["sweep", "--gpus", "16", "--days", "0.5", "--grid", "policy=fifo,legacy"]
    argv += ["--backend", "serial", "--no-progress", "--out", str(tmp_path / "sw")]
    assert cli.main(argv) == 0
    first = load_sweep(tmp_path / "sw")
    table = sorted((tmp_path / "sw" / "runs").glob("*.parquet"))[0]
    table.write_bytes(b"")
    assert cli.main(["report", str(tmp_path / "sw"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"impactlab: error: {table}: cannot be read") and err.count("\n") == 1
    assert cli.main(argv) == 0
    assert "running it again" in caplog.text
    assert_frame_equal(comparable(load_sweep(tmp_path / "sw")), comparable(first))
    run = tmp_path / "run"
    assert (
        cli.main(
            ["simulate", "--policy", "fifo", "--gpus", "16", "--days", "0.5", "--out", str(run)]
        )
        == 0
    )
    (run / "events.parquet").write_text("garbage")
    assert cli.main(["explain", str(run), "j000001"]) == 2
    assert "events.parquet: cannot be read as a saved table" in capsys.readouterr().err


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path):
    def interrupted(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep_module._atomic(tmp_path / "run.json", interrupted)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "sweep", interrupted)
    out = tmp_path / "sw"
    assert cli.main(["sweep", "--gpus", "16", "--days", "0.5", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert (
        err
        == f"impactlab: interrupted; the runs that finished are kept in {out} (the same command resumes)\n"
    )
    monkeypatch.setattr(cli, "run", interrupted)
    assert cli.main(["simulate", "--policy", "fifo", "--gpus", "16"]) == 130
    assert capsys.readouterr().err == "impactlab: interrupted\n"


def test_a_notice_about_the_trace_is_said_once_per_sweep_not_once_per_run(tmp_path, caplog):
    trace = pd.read_csv(Path(__file__).parent / "fixtures" / "generic_trace.csv")
    path = tmp_path / "t.csv"
    trace.assign(min_runtime_s=0).to_csv(path, index=False)  # (declares no contract)
    config = il.SimConfig(gpus=64, days=1, trace_path=str(path))
    with caplog.at_level("WARNING", logger="impactlab"):
        frame = sweep(config, {"cap_hours": [1, 8]}, seeds=[0, 1], backend="serial", progress=False)
    assert (frame["status"] == "ok").all() and len(frame) == 4
    assert caplog.text.count("the trace declares no minimum runtimes") == 1


def test_cli_names_each_failed_run_once_and_counts_them(tmp_path, capsys, caplog):
    missing = str(tmp_path / "no-such-trace.csv")
    args = ["sweep", "--gpus", "16", "--days", "0.5", "--grid", f"trace_path={missing}"]
    args += ["--backend", "serial", "--no-progress", "--out", str(tmp_path / "s")]
    with caplog.at_level("WARNING", logger="impactlab"):
        assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert caplog.text.count(") failed: TraceError") == 1  # the run, its config and its error
    assert "no-such-trace.csv" not in err
    assert (
        "impactlab: 1 of 1 runs failed (each named above with its error; the same command "
        "retries only them)" in err
    )


def test_cli_sweep_then_report(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("grid:\n  cap_hours: [1, 8]\nseeds: 0-1\nbase: {gpus: 16}\n")
    out, html = tmp_path / "sweep", tmp_path / "report.html"
    args = [
        "sweep",
        str(grid),
        "--days",
        "1",
        "--grid",
        "policy=legacy,impactful",
        "--backend",
        "serial",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert cli.main(args) == 0
    table = capsys.readouterr().out
    assert "policy=impactful cap_hours=8" in table and "policy=legacy" in table
    assert len(list(out.glob("runs/*.parquet"))) == 6
    assert cli.main(["report", str(out), "-o", str(html)]) == 0
    assert_offline(html.read_text())
    assert cli.main(["sweep", "--grid", "cap_hour=1,4", "--backend", "serial"]) == 2
    assert "did you mean cap_hours" in capsys.readouterr().err


def test_a_given_dask_client_is_used_and_left_open(serial):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        frame = sweep(
            BASE, {"cap_hours": [1, 8]}, SEEDS, backend="dask", client=client, progress=False
        )
        assert client.status == "running"
    mine = serial[0].loc[
        serial[0]["policy"] == "impactful", list(frame.columns)
    ]  # no other policy's knobs
    # values, not dtypes: a knob column is int in a frame of one policy, float beside others
    pd.testing.assert_frame_equal(missing_as_none(frame), missing_as_none(mine), check_dtype=False)
