"""Reshaping a trace: time window, scaling to a cluster size, contract defaults."""

from __future__ import annotations

import pandas as pd
import pytest

from impactlab import GeneratorConfig, TraceError, generate
from impactlab.inputs.traces.reshape import (
    KIND_CONTRACTS,
    fill_contract,
    pick_projects,
    thin,
    window,
)

DAY_S = 86_400.0


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return generate(GeneratorConfig(gpus=256, days=6, seed=3)).trace


def test_window_keeps_jobs_submitted_inside_and_restarts_the_clock(trace):
    out = window(trace, start_days=2, days=1.5)
    inside = trace[(trace["submit_s"] >= 2 * DAY_S) & (trace["submit_s"] < 3.5 * DAY_S)]
    assert list(out["job_id"]) == list(inside["job_id"])
    assert list(out["submit_s"]) == list(inside["submit_s"] - 2 * DAY_S)
    assert out["submit_s"].min() >= 0 and "window" in out.attrs["reshape"][0]


def test_window_rejects_bad_bounds_and_empty_results(trace):
    with pytest.raises(ValueError):
        window(trace, start_days=-1)
    with pytest.raises(TraceError):
        window(trace, start_days=100, days=1)


def test_thinning_keeps_load_per_gpu_and_drops_jobs_too_large(trace):
    out = thin(trace, target_gpus=64, source_gpus=256, seed=1)
    assert out["gpus"].max() <= 64
    assert abs(len(out) / len(trace) - 0.25) < 0.03  # Bernoulli(1/4) per job
    assert out.equals(thin(trace, 64, 256, seed=1))  # seeded
    assert set(out["job_id"]) <= set(trace["job_id"])


def test_pick_projects_keeps_whole_projects_within_the_target():
    rows = [
        {"job_id": f"{p}{i}", "submit_s": i, "gpus": 1, "duration_s": 10, "project": p}
        for p in ("a", "b", "c", "")
        for i in range(4)
    ]
    trace = pd.DataFrame(rows)
    out = pick_projects(trace, target_gpus=60, quotas={"a": 40, "b": 30, "c": 20})
    assert set(out["project"]) - {""} == {"a", "c"}  # 40 + 20; b would overshoot after a
    assert len(out[out["project"] == "a"]) == 4
    with pytest.raises(ValueError, match=r"no jobs of project\(s\) \['zzz'\] in the trace"):
        pick_projects(trace, target_gpus=60, quotas={"a": 40, "zzz": 5})
    with pytest.raises(ValueError, match=r"quotas are positive numbers of GPUs, got \{'b': 0\}"):
        pick_projects(trace, target_gpus=60, quotas={"a": 40, "b": 0})


def test_fill_contract_sets_per_kind_defaults_with_overrides(trace):
    out = fill_contract(trace, overrides={"debug": {"min_runtime_s": 600.0}})
    for kind, group in out.groupby("kind"):
        want = KIND_CONTRACTS[kind]
        assert (group["checkpoint_s"] == want.checkpoint_s).all()
        assert (group["util"] == want.util).all()
        expect = 600.0 if kind == "debug" else want.min_runtime_s
        assert (group["min_runtime_s"] == expect).all()
    with pytest.raises(ValueError):
        fill_contract(trace, overrides={"party": {"util": 1.0}})
