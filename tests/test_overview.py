"""``impactlab inspect`` and the load check: a trace summarised by hand-checkable numbers, the
cluster size it suggests, and a warning when a replay offers far too much or too little work."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

import impactlab as il
from impactlab.cli import main
from impactlab.inputs.overview import overview

DATA = Path(__file__).resolve().parent.parent / "impactlab" / "data"


def small_trace() -> pd.DataFrame:
    """Two days (the last job submitted at 47.5 h: a replay covers 48 h), 3 jobs: 48 GPU-hours +
    24 GPU-hours (12 GPUs hold 16) + 8 GPU-hours."""
    rows = [
        {
            "job_id": "a",
            "submit_s": 0.0,
            "gpus": 2,
            "duration_s": 24 * 3600.0,
            "project": "p",
            "kind": "training",
        },
        {
            "job_id": "b",
            "submit_s": 86_400.0,
            "gpus": 12,
            "duration_s": 1.5 * 3600.0,
            "project": "q",
        },
        {
            "job_id": "c",
            "submit_s": 2 * 86_400.0 - 1800,
            "gpus": 1,
            "duration_s": 8 * 3600.0,
            "project": "",
        },
    ]
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


def test_a_job_larger_than_the_suggestion_is_skipped_and_the_size_worked_out_again():
    """At 2.5x: 40 GPU-h a day wants 0.67 GPUs, one node; the 12-GPU job does not fit it, so
    without it (56 GPU-h, 28 a day) one node again, now with every job left fitting."""
    advice = overview(small_trace()).advise(2.5)
    assert (advice.gpus, advice.skipped_jobs, advice.flags) == (8, 1, "--gpus 8 --skip-large")
    assert advice.skipped_share == 24 / 80
    assert (advice.largest_cluster, advice.load_at_largest) == (16, 40 / 24 / 16)
    assert advice.load == 28 / 24 / 8 and advice.too_light  # (one node is the smallest cluster)
    lines = advice.lines()
    assert "(one node, the smallest) gives an offered load of only 0.15x capacity" in lines[0]
    assert "skips 1 job larger than 8 GPUs, 30.0% of the GPU-hours" in lines[0]
    assert "the largest (12 GPUs) needs --gpus 16, where the offered load is 0.10x" in lines[1]


def test_the_advice_states_the_load_its_size_gives_not_the_one_asked(caplog):
    """Rounding up to whole nodes gives a little less than the load asked; a trace too light
    for it even on one node is said to be so, and the warning does not suggest the very size
    the run was given (it once said "--gpus 8 gives 2.5x" of a run offered 0.02x on 8 GPUs)."""
    advice = overview(small_trace()).advise(0.1)  # 40 GPU-h a day on 3 nodes
    assert (advice.gpus, advice.load, advice.too_light) == (24, 40 / 24 / 24, False)
    expected = "a cluster of 24 GPUs gives an offered load of 0.07x capacity (0.1x rounded up"
    assert advice.lines() == [f"{expected} to whole nodes): --gpus 24"]
    light = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "submit_s": [0.0, 10.0],
            "gpus": [1, 2],
            "duration_s": [100.0, 200.0],
        }
    )
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        il.simulate(il.SimConfig(policy="fifo", gpus=8), trace=light)
    warned = [r.message for r in caplog.records if "offers" in r.message]
    assert len(warned) == 1 and warned[0].endswith(
        "too light for 2.5x on any cluster (one node is the smallest)"
    )


def test_an_acme_like_trace_gets_a_size_whose_replay_does_not_warn(tmp_path, caplog):
    """One 1,024-GPU job among small ones: the suggestion leaves it out, and a replay at the
    suggested size (with --skip-large) offers the asked load, so its load check is quiet."""
    n = 400
    rows = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "submit_s": np.arange(n) * 1800.0,
            "gpus": np.tile([1, 2, 4, 8], n // 4),
            "duration_s": 3 * 3600.0,
            "project": "p",
        }
    )
    rows.loc[7, ["gpus", "duration_s"]] = (1024, 10 * 3600.0)
    path = tmp_path / "acme-like.csv"
    rows.to_csv(path, index=False)
    advice = overview(il.load_trace(path)).advise(2.5)
    assert advice.skipped_jobs == 1 and advice.gpus < 1024 and advice.largest_cluster == 1024
    config = il.SimConfig(policy="fifo", gpus=advice.gpus, skip_large=True, trace_path=str(path))
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        il.simulate(config)
    assert not [r for r in caplog.records if "offers" in r.message]
    replayed = overview(il.load_trace(path, max_gpus=advice.gpus, oversize="skip")).offered_load(
        advice.gpus
    )
    assert (
        2.5 * (advice.gpus - 8) / advice.gpus < replayed <= 2.5
    )  # 2.5x up to rounding to whole nodes
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="impactlab"):
        il.simulate(config.with_params(gpus=1024, skip_large=False))
    warned = [r.message for r in caplog.records if "offers" in r.message]
    assert (
        len(warned) == 1
        and f"{advice.flags} gives {advice.load:.2f}x (skipping 1 job larger than {advice.gpus} GPUs)"
        in warned[0]
    )


def test_inspect_prints_the_summary_and_a_cluster_size(capsys):
    assert (
        main(["inspect", str(DATA / "example-trace-88gpu-3d.csv"), "--demand", "2", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    info = overview(il.load_trace(DATA / "example-trace-88gpu-3d.csv"))
    assert out["jobs"] == info.jobs == 1393 and out["suggested_gpus"] == info.gpus_for(2.0)
    assert main(["inspect", str(DATA / "example-trace-88gpu-3d.csv")]) == 0
    assert f"--gpus {info.gpus_for(2.5)}" in capsys.readouterr().out


def test_inspect_of_a_missing_file_is_one_line(capsys, tmp_path):
    assert main(["inspect", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_replay_far_outside_the_model_warns_with_a_cluster_size(caplog):
    config = il.SimConfig(
        policy="fifo", gpus=1024, trace_path=str(DATA / "example-trace-88gpu-3d.csv")
    )
    with caplog.at_level(logging.WARNING, logger="impactlab.inputs.overview"):
        il.compare(config, ["fifo", "legacy"])
    warnings = [r.message for r in caplog.records if "offers" in r.message]
    assert len(warnings) == 1 and "--gpus" in warnings[0]  # once for the whole comparison
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="impactlab.inputs.overview"):
        il.simulate(config.with_params(gpus=88))
    assert not [r for r in caplog.records if "offers" in r.message]
