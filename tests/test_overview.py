"""``impactlab inspect`` and the load check: a trace summarised by hand-checkable numbers, the
cluster size it suggests, and a warning when a replay offers far too much or too little work."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

import impactlab as il
from impactlab.cli import main
from impactlab.overview import overview

DATA = Path(__file__).parent.parent / "data"


def small_trace() -> pd.DataFrame:
    """Two days, 3 jobs: 48 GPU-hours + 24 GPU-hours (12 GPUs hold 16) + 8 GPU-hours."""
    rows = [{"job_id": "a", "submit_s": 0.0, "gpus": 2, "duration_s": 24 * 3600.0, "project": "p", "kind": "training"},
            {"job_id": "b", "submit_s": 86_400.0, "gpus": 12, "duration_s": 1.5 * 3600.0, "project": "q"},
            {"job_id": "c", "submit_s": 2 * 86_400.0, "gpus": 1, "duration_s": 8 * 3600.0, "project": ""}]
    return il.validate_trace(pd.DataFrame(rows))


def test_the_overview_counts_by_hand():
    info = overview(small_trace())
    assert (info.jobs, info.span_days, info.largest_gpus) == (3, 2.0, 12)
    assert info.gpu_hours == 48 + 24 + 8  # the 12-GPU gang holds two whole nodes
    assert info.gpu_hours_per_day == 40.0
    assert (info.projects, info.unallocated_jobs) == (2, 1)
    assert info.sizes == {"1": 1, "2-8": 1, "9-64": 1, "65+": 0}


def test_the_suggested_cluster_gives_the_asked_load_and_fits_the_largest_job():
    info = overview(small_trace())
    # 40 GPU-hours a day = 1.67 GPUs busy; at 0.1x that wants 16.7 GPUs -> 3 nodes
    assert info.gpus_for(demand=0.1) == 24
    assert info.offered_load(24) == 40 / 24 / 24
    assert info.gpus_for(demand=2.5) == 16  # the largest job needs two nodes


def test_inspect_prints_the_summary_and_a_cluster_size(capsys):
    assert main(["inspect", str(DATA / "example-trace-88gpu-3d.csv"), "--demand", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    info = overview(il.load_trace(DATA / "example-trace-88gpu-3d.csv"))
    assert out["jobs"] == info.jobs == 1393 and out["suggested_gpus"] == info.gpus_for(2.0)
    assert main(["inspect", str(DATA / "example-trace-88gpu-3d.csv")]) == 0
    assert f"--gpus {info.gpus_for(2.5)}" in capsys.readouterr().out


def test_inspect_of_a_missing_file_is_one_line(capsys, tmp_path):
    assert main(["inspect", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_replay_far_outside_the_model_warns_with_a_cluster_size(caplog):
    config = il.SimConfig(policy="fifo", gpus=1024, trace_path=str(DATA / "example-trace-88gpu-3d.csv"))
    with caplog.at_level(logging.WARNING, logger="impactlab.overview"):
        il.compare(config, ["fifo", "legacy"])
    warnings = [r.message for r in caplog.records if "offers" in r.message]
    assert len(warnings) == 1 and "--gpus" in warnings[0]  # once for the whole comparison
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="impactlab.overview"):
        il.simulate(config.with_params(gpus=88))
    assert not [r for r in caplog.records if "offers" in r.message]
