"""SimResult: identity, flat metrics, metrics_frame and the save/load round trip."""

from __future__ import annotations

import gc
import importlib
import json
import math
import weakref
from dataclasses import replace

import pandas as pd
import pytest
from helpers import run_tiny

import impactlab as il
from impactlab import BudgetTree
from impactlab.analysis.catalog import SCALAR
from impactlab.analysis.results import SimResult, metrics_frame
from impactlab.sim.health import HealthConfig

approx = pytest.approx


def job(job_id: str, submit_s: float, gpus: int, duration_s: float, **more) -> dict:
    """One trace row."""
    return {"job_id": job_id, "submit_s": submit_s, "gpus": gpus, "duration_s": duration_s, **more}


def preemption_run(policy: str = "legacy"):
    """L (training, 8 GPUs) preempted at 500 by H (debug, unallocated); L restarts at 600."""
    rows = [
        job("L", 0, 8, 1000, project="p", priority=0, checkpoint_s=300, kind="training"),
        job("H", 500, 8, 100, project="", priority=1, kind="debug"),
    ]
    return run_tiny(
        rows,
        policy=policy,
        gpus=8,
        horizon_s=2000.0,
        restart_overhead_s=60.0,
        budgets=BudgetTree.flat({"p": 1}),
    )


def test_simresult_lives_in_results_and_simulate_re_exports_it():
    # the package's ``simulate`` attribute is the function, not the module
    simulate_module = importlib.import_module("impactlab.runs.simulate")
    assert simulate_module.SimResult is SimResult and il.SimResult is SimResult
    assert isinstance(preemption_run(), SimResult)


def test_run_is_the_label_or_else_the_policy():
    result = preemption_run()
    assert (result.label, result.run) == ("", "legacy")
    assert replace(result, label="old days").run == "old days"


def test_simulate_records_where_the_trace_came_from():
    assert preemption_run().provenance == {"source": "dataframe", "rows": 2}
    synthetic = il.simulate(il.SimConfig(policy="fifo", gpus=32, days=1, seed=3))
    assert synthetic.provenance["source"] == "synthetic" and synthetic.provenance["seed"] == 3


# ----- metrics() -----------------------------------------------------------------------------------
def expected_keys(kinds: list[str]) -> set[str]:
    """Every key the contract lists for a trace of these kinds."""
    groups = ["all", *kinds]
    sizes = [f"size_{b}" for b in ("1", "2-8", "9-64", "65+")]
    keys = set(SCALAR) | {f"preemptions.{k}" for k in kinds}
    for q in ("p50", "p90", "p99"):
        keys |= {f"wait_{q}_s.{g}" for g in groups + sizes} | {f"queued_{q}_s.{g}" for g in groups}
    return keys


def test_metrics_are_one_flat_dict_of_numbers_with_the_listed_keys():
    m = preemption_run().metrics()
    assert set(m) == expected_keys(["debug", "training"])
    assert "sim_wall_s" not in m and "policy" not in m
    assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in m.values())


def test_metrics_by_hand():
    m = preemption_run().metrics()
    assert (m["preemptions"], m["preemptions.training"], m["preemptions.debug"]) == (1, 1, 0)
    assert m["lost_gpu_hours"] == approx(8 * (200 + 60) / 3600)
    assert m["jobs"] == 2
    assert m["wait_p50_s.all"] == 0 and m["wait_p90_s.debug"] == 0  # both started on arrival
    assert m["queued_p50_s.training"] == approx(100)  # requeued at 500, restarted at 600
    assert m["wait_p90_s.size_2-8"] == 0


def test_metrics_are_nan_where_there_are_no_jobs():
    m = preemption_run().metrics()
    assert math.isnan(m["wait_p90_s.size_1"]) and math.isnan(m["wait_p99_s.size_65+"])
    empty = run_tiny(
        [job("late", 5000, 1, 10)], horizon_s=1000.0
    ).metrics()  # submitted after the horizon
    assert empty["jobs"] == 0
    assert math.isnan(empty["wait_p50_s.all"]) and math.isnan(empty["queued_p90_s.other"])


def test_metrics_agree_with_the_summary():
    result = preemption_run()
    m, s = result.metrics(), result.summary()
    assert {k: m[k] for k in SCALAR} == {k: s[k] for k in SCALAR}
    assert m["wait_p90_s.all"] == s["wait_s"]["all"]["p90"]


# ----- metrics_frame ---------------------------------------------------------------------------------
def test_metrics_frame_has_one_row_per_run():
    runs = [preemption_run("legacy"), replace(preemption_run("impactful"), label="new")]
    frame = metrics_frame(runs)
    assert len(frame) == 2
    assert list(frame.columns[:2]) == ["run", "policy"] and frame.columns[-1] == "sim_wall_s"
    assert frame["run"].tolist() == ["legacy", "new"]
    assert frame["policy"].tolist() == ["legacy", "impactful"]
    assert frame["sim_wall_s"].tolist() == [r.sim_wall_s for r in runs]
    assert set(expected_keys(["debug", "training"])) <= set(frame.columns)
    assert {"gpus", "gpus_per_node", "days", "seed", "mtbf_hours"} <= set(frame.columns)
    assert frame["preemptions"].tolist() == [1, runs[1].metrics()["preemptions"]]
    assert not frame.columns.duplicated().any()


def test_config_columns_are_the_flat_parameters():
    config = il.SimConfig(
        gpus=64, policy_knobs={"window_days": 3.0}, health=HealthConfig(mtbf_hours=50.0)
    )
    frame = metrics_frame([il.simulate(config.with_params(days=1.0, warmup_days=0.0))])
    assert (frame.loc[0, "gpus"], frame.loc[0, "window_days"], frame.loc[0, "mtbf_hours"]) == (
        64,
        3.0,
        50.0,
    )


# ----- save and load -----------------------------------------------------------------------------------
def assert_same_run(a: SimResult, b: SimResult) -> None:
    """Two results hold the same run: inputs, log, identity, and so the same numbers."""
    pd.testing.assert_frame_equal(a.events, b.events)
    pd.testing.assert_frame_equal(a.trace, b.trace)
    assert a.tree == b.tree and a.config == b.config
    assert (a.label, a.provenance, a.unknown_projects, a.sim_wall_s) == (
        b.label,
        b.provenance,
        b.unknown_projects,
        b.sim_wall_s,
    )
    assert a.summary() == b.summary()
    pd.testing.assert_frame_equal(a.budgets, b.budgets)


def test_load_reads_back_what_save_wrote(tmp_path):
    provenance = {"source": "test", "rows": 2, "skipped": {}}
    result = replace(preemption_run(), label="before", provenance=provenance)
    out = result.save(tmp_path / "run")
    written = {p.name for p in out.iterdir()}
    assert written >= {"events.parquet", "trace.parquet", "config.json", "summary.json"}
    saved = json.loads((out / "config.json").read_text())
    assert saved["label"] == "before" and saved["provenance"]["source"] == "test"
    assert_same_run(result, SimResult.load(out))


def test_a_synthetic_run_with_failures_round_trips(tmp_path):
    config = il.SimConfig(
        policy="impactful",
        gpus=64,
        days=3,
        health=HealthConfig(mtbf_hours=100.0),
        policy_knobs={"window_days": 1.0},
    )
    result = il.simulate(config)
    assert (result.events["event"] == "node_down").any()
    loaded = SimResult.load(result.save(tmp_path))
    assert isinstance(loaded.config.health, HealthConfig)
    assert_same_run(result, loaded)
    assert loaded.metrics() == approx(result.metrics(), nan_ok=True)


@pytest.mark.parametrize("above, freed", [(0, True), (10**9, False)])
def test_a_large_run_frees_its_engine_before_returning(monkeypatch, above, freed):
    """The engine, its policy and simpy's processes form reference cycles; above
    COLLECT_ABOVE_JOBS jobs, ``simulate`` collects them before the metrics can peak on top of
    them. (The other case shows the cycles exist, so that the first can fail.)"""
    simulate_module = importlib.import_module("impactlab.runs.simulate")
    engines = []

    class Tracked(simulate_module.Engine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(weakref.ref(self))

    monkeypatch.setattr(simulate_module, "Engine", Tracked)
    monkeypatch.setattr(simulate_module, "COLLECT_ABOVE_JOBS", above)
    gc.collect()
    gc.disable()  # (only simulate's own collection may free it)
    try:
        result = il.simulate(il.SimConfig(policy="impactful", gpus=32, days=1, seed=3))
        assert (engines[0]() is None) == freed
    finally:
        gc.enable()
    assert len(result.events) > 0


def test_the_metric_catalog_names_every_scalar_of_a_summary_once_with_words_and_a_format():
    from impactlab.analysis.catalog import METRICS, label

    summary = il.simulate(il.SimConfig(policy="fifo", gpus=16, days=0.5)).summary()
    echoes = {"days", "gpus", "report_from_days", "human_fraction"}  # the run's config, echoed
    scalars = {k for k, v in summary.items() if isinstance(v, int | float) and not k.endswith("_s")}
    assert scalars - echoes <= set(SCALAR), f"not in the catalog: {scalars - echoes - set(SCALAR)}"
    assert set(SCALAR) <= set(summary), (
        f"in the catalog, not in a summary: {set(SCALAR) - set(summary)}"
    )
    assert len(set(SCALAR)) == len(SCALAR) and len({m.label for m in METRICS}) == len(METRICS)
    for metric in METRICS:
        format(1.0 if "f" in metric.fmt else 1, metric.fmt)  # a valid format of a number
        assert metric.better in ("up", "down", "") and label(metric.name) == metric.label
