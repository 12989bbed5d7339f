"""Long-form tables on tiny traces with hand-computed answers, and their size on a big run."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import run_tiny

import impactlab as il
from impactlab import BudgetTree
from impactlab.tables import NICE_BUCKETS_S, bucket_edges, bucket_size

approx = pytest.approx
H = 3600.0

TABLES = ("wait_quantiles", "wait_cdf", "wait_by_size", "preemption_series", "preemptions_by_kind",
          "share_series", "pyramid_series", "queue_series", "gantt")
COLUMNS = {
    "wait_quantiles": ["by", "group", "quantile", "wait_s", "wait_h", "n"],
    "wait_cdf": ["kind", "wait_h", "fraction"],
    "wait_by_size": ["gpus", "jobs", "p50_h", "p90_h", "mean_h"],
    "preemption_series": ["t_h", "kind", "preemptions", "lost_gpu_hours"],
    "preemptions_by_kind": ["kind", "preemptions", "jobs_preempted", "lost_gpu_hours"],
    "share_series": ["t_h", "level", "node", "delivered_share", "entitled_share", "owed_share"],
    "pyramid_series": ["t_h", "metric", "value"],
    "queue_series": ["t_h", "kind", "queued_jobs", "queued_gpus"],
    "gantt": ["node", "job_id", "kind", "funded", "gpus_on_node", "start_h", "end_h"],
}

#: root -> prog (p, q) and r, all shares equal: prog 1/2, p 1/4, q 1/4, r 1/2.
PROG_TREE = {"name": "root", "children": [
    {"name": "prog", "children": [{"name": "p"}, {"name": "q"}]}, {"name": "r"}]}


def job(job_id: str, submit_s: float, gpus: int, duration_s: float, **more) -> dict:
    """One trace row."""
    return {"job_id": job_id, "submit_s": submit_s, "gpus": gpus, "duration_s": duration_s, **more}


@pytest.fixture(scope="module")
def fifo_node():
    """FIFO on one 8-GPU node for 2 h (buckets of 1 h). a (p, training, 8 GPUs) runs 0-1800;
    b (q, debug, 4 GPUs) waits 1800 s and runs 1800-3600; c (unallocated, debug, 4 GPUs) arrives
    at 600, waits 1200 s and runs 1800-5400."""
    rows = [job("a", 0, 8, 1800, project="p", kind="training"),
            job("b", 0, 4, 1800, project="q", kind="debug"),
            job("c", 600, 4, 3600, project="", kind="debug")]
    result = run_tiny(rows, policy="fifo", gpus=8, horizon_s=2 * H, budgets=BudgetTree.from_dict(PROG_TREE))
    return replace(result, label="tiny")


def legacy_preemption():
    """L (training, 8 GPUs, checkpoint every 300 s) is preempted at 500 by H (debug), loses 200 s,
    waits until 600 and restarts with 60 s of overhead (horizon 2000: one bucket)."""
    rows = [job("L", 0, 8, 1000, project="p", priority=0, checkpoint_s=300, kind="training"),
            job("H", 500, 8, 100, project="", priority=1, kind="debug")]
    return run_tiny(rows, policy="legacy", gpus=8, horizon_s=2000.0, restart_overhead_s=60.0)


# ----- buckets ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("horizon_h, expected_h", [(2, 1), (200, 1), (201, 2), (720, 6), (24 * 90, 12),
                                                    (24 * 365, 48), (24 * 7 * 199, 168)])
def test_bucket_size_is_the_smallest_nice_size_giving_at_most_200_buckets(horizon_h, expected_h):
    assert bucket_size(horizon_h * H) == expected_h * H


def test_bucket_size_beyond_weekly_buckets_takes_whole_weeks():
    size = bucket_size(5 * 365 * 86_400.0)
    assert size % NICE_BUCKETS_S[-1] == 0 and 5 * 365 * 86_400.0 / size <= 200


def test_bucket_edges_end_at_the_horizon():
    assert bucket_edges(2.5 * H, H).tolist() == [0, H, 2 * H, 2.5 * H]


# ----- every table ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TABLES)
def test_every_table_has_its_columns_with_run_and_policy_first(fifo_node, name):
    table = getattr(fifo_node, name)()
    assert list(table.columns) == ["run", "policy", *COLUMNS[name]]
    assert len(table) > 0
    assert (table["run"] == "tiny").all() and (table["policy"] == "fifo").all()


# ----- waits ------------------------------------------------------------------------------------------
def test_wait_quantiles_by_hand(fifo_node):
    table = fifo_node.wait_quantiles().set_index(["by", "group", "quantile"])
    assert table.loc[("kind", "all", "p50"), "wait_s"] == approx(1200)  # waits 0, 1200, 1800
    assert table.loc[("kind", "debug", "p50"), "wait_s"] == approx(1500)
    assert table.loc[("kind", "debug", "p90"), "wait_s"] == approx(1200 + 0.9 * 600)
    assert table.loc[("kind", "debug", "p90"), "wait_h"] == approx(1740 / H)
    assert table.loc[("kind", "training", "p99"), "wait_s"] == 0
    assert table.loc[("kind", "debug", "p50"), "n"] == 2
    assert table.loc[("size", "2-8", "p50"), "n"] == 3  # 8, 4 and 4 GPUs
    assert sorted(set(table.loc["size"].index.get_level_values(0))) == ["2-8"]


def test_wait_quantiles_match_the_summary(fifo_node):
    s = fifo_node.summary()
    table = fifo_node.wait_quantiles().set_index(["by", "group", "quantile"])["wait_s"]
    for kind, stats in s["wait_s"].items():
        quantiles = ("p50", "p90", "p99")
        assert [table[("kind", kind, q)] for q in quantiles] == [stats[q] for q in quantiles]


def test_wait_cdf_by_hand(fifo_node):
    cdf = fifo_node.wait_cdf()
    every = cdf[cdf["kind"] == "all"]
    assert every["wait_h"].tolist() == approx([0, 1200 / H, 1800 / H])
    assert every["fraction"].tolist() == approx([1 / 3, 2 / 3, 1])
    debug = cdf[cdf["kind"] == "debug"]
    assert debug["fraction"].tolist() == approx([0.5, 1.0])
    assert set(cdf["kind"]) == {"all", "debug", "training"}


def test_wait_cdf_keeps_at_most_points_rows_per_kind():
    rows = [job(f"j{i:02d}", i, 1, 100) for i in range(50)]  # FIFO on one GPU: job i waits 99 i s
    result = run_tiny(rows, policy="fifo", gpus=1, gpus_per_node=1, horizon_s=20_000.0)
    cdf = result.wait_cdf(points=10)
    every = cdf[cdf["kind"] == "all"]
    assert len(every) == 10 and len(cdf) == 20  # "all" and "other"
    assert every["wait_h"].iloc[[0, -1]].tolist() == approx([0, 99 * 49 / H])
    assert every["fraction"].iloc[[0, -1]].tolist() == approx([1 / 50, 1])
    assert every["wait_h"].is_monotonic_increasing and every["fraction"].is_monotonic_increasing


def test_wait_by_size_by_hand(fifo_node):
    table = fifo_node.wait_by_size().set_index("gpus")
    assert table.loc[4, ["jobs", "p50_h", "mean_h"]].tolist() == approx([2, 1500 / H, 1500 / H])
    assert table.loc[4, "p90_h"] == approx(1740 / H)
    assert table.loc[8, ["jobs", "p50_h"]].tolist() == [1, 0]


# ----- preemptions ------------------------------------------------------------------------------------
def test_preemption_tables_by_hand():
    result = legacy_preemption()
    series = result.preemption_series().set_index("kind")
    assert series.loc["training", ["t_h", "preemptions"]].tolist() == [0, 1]
    assert series.loc["training", "lost_gpu_hours"] == approx(8 * (200 + 60) / H)  # lost work + overhead
    assert series.loc["debug", ["preemptions", "lost_gpu_hours"]].tolist() == [0, 0]
    by_kind = result.preemptions_by_kind().set_index("kind")
    assert by_kind.loc["training", ["preemptions", "jobs_preempted"]].tolist() == [1, 1]
    assert by_kind["lost_gpu_hours"].sum() == approx(result.summary()["lost_gpu_hours"])


def test_two_preemptions_of_one_job_count_once_as_a_job_preempted():
    # L restarts at 200 and is preempted at 230, 30 s into its 60 s overhead; it keeps all work
    rows = [job("L", 0, 8, 1000, priority=0, checkpoint_s=0, kind="training"),
            job("H1", 100, 8, 100, priority=2, kind="eval"), job("H2", 230, 8, 100, priority=2, kind="eval")]
    result = run_tiny(rows, policy="legacy", gpus=8, horizon_s=2000.0, restart_overhead_s=60.0)
    by_kind = result.preemptions_by_kind().set_index("kind")
    assert by_kind.loc["training", ["preemptions", "jobs_preempted"]].tolist() == [2, 1]
    assert by_kind.loc["training", "lost_gpu_hours"] == approx(8 * (30 + 60) / H)
    assert result.preemption_series()["lost_gpu_hours"].sum() == approx(8 * (30 + 60) / H)


def test_preemption_series_counts_each_preemption_in_its_bucket():
    rows = [job("L", 0, 8, 4 * H, priority=0, checkpoint_s=0, kind="training"),
            job("H1", 1800, 8, 100, priority=2, kind="eval"),
            job("H2", 2 * H + 10, 8, 100, priority=2, kind="eval")]
    result = run_tiny(rows, policy="legacy", gpus=8, horizon_s=5 * H)
    series = result.preemption_series(bucket_s=H)
    assert series[series["kind"] == "training"]["preemptions"].tolist() == [1, 0, 1, 0, 0]
    assert len(series) == 5 * 2  # every bucket x every kind in the trace


# ----- queue ------------------------------------------------------------------------------------------
def test_queue_series_by_hand(fifo_node):
    q = fifo_node.queue_series().set_index(["kind", "t_h"])
    # b queued 0-1800 and c 600-1800: 3000 job-seconds of 4 GPUs each in the first hour
    assert q.loc[("debug", 0.0), ["queued_jobs", "queued_gpus"]].tolist() == approx([3000 / H, 4 * 3000 / H])
    assert q.loc[("debug", 1.0), "queued_jobs"] == 0
    assert (q.loc["training", "queued_jobs"] == 0).all()


def test_a_requeued_job_is_queued_again_until_its_restart():
    q = legacy_preemption().queue_series().set_index("kind")
    assert q.loc["training", "queued_jobs"] == approx(100 / 2000)  # requeued at 500, restarted at 600
    assert q.loc["training", "queued_gpus"] == approx(8 * 100 / 2000)


# ----- capacity: pyramid and shares -------------------------------------------------------------------
def test_pyramid_series_by_hand(fifo_node):
    p = fifo_node.pyramid_series().pivot(index="t_h", columns="metric", values="value")
    assert p.loc[0.0].to_dict() == approx({"availability": 1, "occupancy": 1, "occupancy_funded": 0.75,
                                           "occupancy_unallocated": 0.25, "utilization": 1})
    assert p.loc[1.0].to_dict() == approx({"availability": 1, "occupancy": 0.25, "occupancy_funded": 0,
                                           "occupancy_unallocated": 0.25, "utilization": 0.25})


def test_pyramid_utilization_leaves_out_overhead_and_lost_work():
    p = legacy_preemption().pyramid_series().set_index("metric")["value"]
    # L held 8 GPUs 0-500 and 600-1360, H 500-600; L lost 200 s and paid 60 s of overhead
    assert p["occupancy"] == approx(8 * (500 + 760 + 100) / (8 * 2000))
    assert p["utilization"] == approx(8 * (300 + 700 + 100) / (8 * 2000))
    assert p["occupancy_unallocated"] == approx(8 * 100 / (8 * 2000))


def test_share_series_by_hand(fifo_node):
    s = fifo_node.share_series().set_index(["node", "t_h"])
    # first hour: p ran 8 GPUs for 1800 s, q 4 GPUs for 1800 s (of 8 x 3600 healthy GPU-seconds)
    assert s.loc[("p", 0.0), "delivered_share"] == approx(0.5)
    assert s.loc[("q", 0.0), "delivered_share"] == approx(0.25)
    assert s.loc[("prog", 0.0), "delivered_share"] == approx(0.75)
    # owed: p and q split the node 4/4 while both ask (0-1800), then q alone asks 4 (1800-3600)
    assert s.loc[("p", 0.0), "owed_share"] == approx(4 * 1800 / (8 * H))
    assert s.loc[("q", 0.0), "owed_share"] == approx(4 * 3600 / (8 * H))
    assert s.loc[("prog", 0.0), "owed_share"] == approx(0.75)
    assert s.loc[("r", 0.0), "owed_share"] == 0
    assert (s.xs(1.0, level="t_h")[["delivered_share", "owed_share"]] == 0).all().all()
    entitled = s.xs(0.0, level="t_h")["entitled_share"].to_dict()
    assert entitled == approx({"prog": 0.5, "p": 0.25, "q": 0.25, "r": 0.5})
    assert s.xs(0.0, level="t_h")["level"].to_dict() == {"prog": "program", "p": "project", "q": "project",
                                                         "r": "project"}


def test_budget_impact_at_a_program_is_over_its_leaves(fifo_node):
    # p: owed 7200, got 14400 -> counts 7200; q: owed 14400, got 7200. prog and root: 14400 / 21600;
    # r was owed nothing: its impact is undefined, not a perfect 1
    budgets = fifo_node.budgets.set_index("node")
    assert budgets.loc[["p", "q"], "impact"].tolist() == approx([1.0, 0.5])
    assert budgets.loc["r", "owed_gpu_s"] == 0 and np.isnan(budgets.loc["r", "impact"])
    assert budgets.loc["prog", "impact"] == approx(2 / 3)
    assert budgets.loc["root", "impact"] == fifo_node.summary()["impact"] == approx(2 / 3)


# ----- gantt ------------------------------------------------------------------------------------------
def test_gantt_by_hand(fifo_node):
    g = fifo_node.gantt()
    cols = ["node", "job_id", "funded", "gpus_on_node", "start_h", "end_h"]
    got = list(g[cols].itertuples(index=False, name=None))
    assert got == [(0, "a", True, 8, 0, 0.5), (0, "b", True, 4, 0.5, 1.0), (0, "c", False, 4, 0.5, 1.5)]


def test_gantt_clips_attempts_to_the_span(fifo_node):
    g = fifo_node.gantt(t0_h=0.25, t1_h=1.0).set_index("job_id")
    assert g.loc["a", ["start_h", "end_h"]].tolist() == [0.25, 0.5]
    assert g.loc["c", ["start_h", "end_h"]].tolist() == [0.5, 1.0]
    assert fifo_node.gantt(t0_h=1.0, t1_h=2.0)["job_id"].tolist() == ["c"]


def test_gantt_shows_a_gang_on_each_of_its_nodes_and_drops_nodes_beyond_max_rows():
    # g (12 GPUs) holds nodes 0 and 1 (8 each); then x and y share node 0... and node 1
    rows = [job("g", 0, 12, 100), job("x", 100, 4, 100), job("y", 100, 4, 100), job("z", 100, 8, 100)]
    result = run_tiny(rows, policy="fifo", gpus=16, horizon_s=1000.0)
    g = result.gantt()
    assert g[g["job_id"] == "g"][["node", "gpus_on_node"]].values.tolist() == [[0, 8], [1, 8]]
    per_node = g.groupby("node").size()
    assert per_node.sum() == 5
    few = result.gantt(max_rows=int(per_node.iloc[0]))
    assert set(few["node"]) == {per_node.index[0]}
    with pytest.raises(ValueError, match="max_rows"):
        result.gantt(max_rows=1)


# ----- a real run at scale ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big():
    """fifo on 1024 GPUs for 30 days (some seconds), with every table built once and timed in
    CPU seconds of this process (wall time swings with whatever else the machine runs)."""
    result = il.simulate(il.SimConfig(policy="fifo", gpus=1024, days=30))
    result.summary()
    began = time.process_time()
    built = {name: getattr(result, name)() for name in TABLES}
    return result, built, time.process_time() - began


@pytest.mark.parametrize("name", TABLES)
def test_every_table_stays_small_at_1024_gpus_and_30_days(big, name):
    _, built, _ = big
    table = built[name]
    assert 0 < len(table) < 5000
    assert list(table.columns) == ["run", "policy", *COLUMNS[name]]
    if "t_h" in table:
        assert table["t_h"].nunique() <= 200
    if name == "share_series":
        assert len(table) <= 4000
        assert set(table["level"]) == {"project", "program"}


def test_tables_build_fast_at_1024_gpus_and_30_days(big):
    _, _, seconds = big
    assert seconds < 15  # about 1.6 s when measured; a loop over events would take minutes


def test_root_impact_is_the_headline_impact_on_a_real_run(big):
    result, _, _ = big
    root = result.budgets.iloc[0]
    assert root["node"] == "root"
    assert root["impact"] == result.summary()["impact"]
    assert 0 < root["impact"] < 1


def test_pyramid_series_averages_to_the_summary_over_the_window(big):
    result, built, _ = big
    p = built["pyramid_series"]
    inside = p[p["t_h"] * H >= result.window.t0].pivot(index="t_h", columns="metric", values="value")
    s = result.summary()
    # no failures: every bucket has the same healthy capacity, and window.t0 is a bucket edge
    for metric in ("occupancy", "occupancy_funded", "utilization"):
        assert inside[metric].mean() == approx(s[metric], rel=1e-9)


def test_share_series_integrates_to_the_budget_table_over_the_window(big):
    result, built, _ = big
    s = built["share_series"]
    edges = np.append(s["t_h"].unique() * H, result.config.horizon_s)
    assert result.window.t0 in edges  # buckets align with the window
    width = pd.Series(np.diff(edges), index=edges[:-1] / H)
    inside = s[s["t_h"] * H >= result.window.t0]
    gpu_s = inside.assign(w=inside["t_h"].map(width) * result.config.gpus)
    owed = (gpu_s["owed_share"] * gpu_s["w"]).groupby(gpu_s["node"]).sum()
    delivered = (gpu_s["delivered_share"] * gpu_s["w"]).groupby(gpu_s["node"]).sum()
    budgets = result.budgets.set_index("node")
    assert owed.to_dict() == approx(budgets.loc[owed.index, "owed_gpu_s"].to_dict(), rel=1e-6)
    assert delivered.to_dict() == approx(budgets.loc[delivered.index, "delivered_gpu_s"].to_dict(), rel=1e-6)
