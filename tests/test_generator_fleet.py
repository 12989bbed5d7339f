"""The synthetic workload of a fleet of clusters (impactlab/inputs/generator.py, generate_fleet)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pandas as pd
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impactlab.base.config import GeneratorConfig
from impactlab.inputs.generator import generate, generate_fleet

#: Clusters of 88, 256 and 1,024 GPUs, declared in this order.
CLUSTERS = (("small", 88), ("mid", 256), ("big", 1024))
FLEET = GeneratorConfig(gpus=1368, days=7, seed=0)


@pytest.fixture(scope="module")
def fleet():
    """The seven-day workload of the three-cluster fleet."""
    return generate_fleet(FLEET, CLUSTERS)


def check_fleet_trace(trace: pd.DataFrame, clusters) -> None:
    """What every fleet trace satisfies, whatever the clusters."""
    sizes = dict(clusters)
    names = list(sizes)
    # The schema's columns, as generate gives them, then the cluster's name.
    single = generate(GeneratorConfig(gpus=8, days=0.1)).trace
    assert list(trace.columns) == [*single.columns, "cluster"]
    assert set(trace["cluster"]) == set(names)
    # No job is larger than its cluster.
    assert (trace["gpus"] <= trace["cluster"].map(sizes)).all()
    # Job ids are unique across the fleet, and numbered in order within each cluster.
    assert trace["job_id"].is_unique
    for name, rows in trace.groupby("cluster", sort=False):
        assert rows["job_id"].tolist() == [f"{name}.j{i:06d}" for i in range(len(rows))]
    # Ordered by submit time, ties by declared cluster order (then within-cluster order, above).
    rank = trace["cluster"].map({name: k for k, name in enumerate(names)})
    key = list(zip(trace["submit_s"], rank))
    assert key == sorted(key)


def test_the_fleet_trace_has_the_schema_a_cluster_column_and_its_order(fleet):
    check_fleet_trace(fleet.trace, CLUSTERS)
    assert fleet.trace["cluster"].unique().tolist()[:1] == ["small"]  # ties at 0 go to the first


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    days=st.sampled_from([0.5, 1.0, 1.5]),
)
def test_any_fleet_keeps_its_jobs_in_their_clusters(nodes, seed, days):
    clusters = [(f"c{k}", 8 * n) for k, n in enumerate(nodes)]
    config = GeneratorConfig(gpus=8 * sum(nodes), days=days, seed=seed)
    check_fleet_trace(generate_fleet(config, clusters).trace, clusters)


def test_same_seed_same_trace_other_seed_other_trace(fleet):
    again = generate_fleet(FLEET, CLUSTERS)
    pd.testing.assert_frame_equal(again.trace, fleet.trace)
    pd.testing.assert_frame_equal(again.users, fleet.users)
    other = generate_fleet(GeneratorConfig(gpus=1368, days=7, seed=1), CLUSTERS)
    assert not other.trace.equals(fleet.trace)


def test_one_organisation_the_one_generate_builds_for_the_fleet_total(fleet):
    single = generate(FLEET)
    assert fleet.tree.to_dict() == single.tree.to_dict()
    pd.testing.assert_frame_equal(fleet.users, single.users)
    # Every cluster draws from that organisation: its users and its projects (or unallocated).
    assert set(fleet.trace["user"]) <= set(fleet.users["user"])
    assert set(fleet.trace["project"]) <= {*fleet.users["project"], ""}
    for _name, rows in fleet.trace.groupby("cluster"):
        assert rows["project"].nunique() > 5


@pytest.mark.parametrize("seed", [0, 3])
def test_each_cluster_is_offered_gpu_time_in_proportion_to_its_size(seed):
    trace = generate_fleet(replace(FLEET, seed=seed), CLUSTERS).trace
    gpu_s = (trace["gpus"] * trace["duration_s"]).groupby(trace["cluster"]).sum()
    per_gpu = {name: gpu_s[name] / gpus for name, gpus in CLUSTERS}
    mean = gpu_s.sum() / FLEET.gpus
    for name, value in per_gpu.items():
        assert value == pytest.approx(mean, rel=0.25), (name, per_gpu)


def test_a_big_cluster_gets_bigger_pretraining_gangs(fleet):
    pretrain = fleet.trace[fleet.trace["kind"] == "pretrain"]
    gangs = pretrain.groupby("cluster")["gpus"]
    assert gangs.min()["big"] > gangs.max()["small"]
    assert gangs.max()["big"] > gangs.max()["mid"] > gangs.max()["small"]


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ([("a", 88), ("b", 256)], r"add up to the fleet's 1368, got 344 \(88 \+ 256\)"),
        ([("a", 88), ("b", 256), ("c", 1032)], r"add up to the fleet's 1368, got 1376"),
        ([("a", 88), ("a", 256), ("b", 1024)], r"cluster names must be unique, got \['a'\]"),
        ([("a", 88), ("", 1280)], r"cluster names must be non-empty strings, got ''"),
        ([("a", 88), (None, 1280)], r"cluster names must be non-empty strings, got None"),
        ([], r"a fleet needs at least one cluster"),
        ([("a", 84), ("b", 1284)], r"cluster 'a': gpus must be a positive multiple"),
        ([("a", 0), ("b", 1368)], r"cluster 'a': gpus must be in \[1, "),
    ],
)
def test_a_fleet_that_cannot_be_built_is_refused_with_the_reason(clusters, message):
    with pytest.raises(ValueError, match=message):
        generate_fleet(GeneratorConfig(gpus=1368, days=1), clusters)


def test_generate_is_unchanged():
    # This digest pins the synthetic workload: generate() for this config has given these exact
    # rows since before generate_fleet shared its per-cluster code. A change to it changes every
    # generated trace (and every result built on one); update it only on purpose.
    trace = generate(GeneratorConfig(gpus=88, days=3, seed=5)).trace
    assert len(trace) == 1325
    digest = hashlib.sha256(trace.to_csv().encode()).hexdigest()
    assert digest == "4794c1424720867b22b0299077cd4691fd9ef07f97a72b9eaca9caf7b29094e2"
