"""Metrics on tiny traces and hand-written event logs, against answers computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers import examples, run_tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from impactlab import REGISTRY, BudgetTree, validate_trace
from impactlab.analysis.metrics import (
    Window,
    attempts,
    clipped,
    cumcount,
    healthy_gpu_s,
    jain,
    job_table,
    next_row,
    nth_match,
    percentiles,
    previous_row,
    size_bucket,
    summarise,
)
from impactlab.base.gangs import nodes_needed
from impactlab.sim.events import Event, events_frame

approx = pytest.approx


def job(job_id: str, submit_s: float, gpus: int, duration_s: float, **more) -> dict:
    """One trace row."""
    return {"job_id": job_id, "submit_s": submit_s, "gpus": gpus, "duration_s": duration_s, **more}


def by_id(result) -> pd.DataFrame:
    """The per-job table indexed by job id."""
    return result.jobs.set_index("job_id")


# ----- queueing cases with known answers -------------------------------------------------------
@pytest.mark.parametrize("policy", sorted(REGISTRY))
@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_a_cluster_with_room_for_everyone_gives_zero_wait(policy, data):
    # 8 nodes: jobs whose gangs need 8 nodes in all can always be placed at once
    sizes = data.draw(
        st.lists(st.sampled_from([1, 3, 8, 12, 16]), min_size=1, max_size=8).filter(
            lambda s: sum(nodes_needed(g, 8) for g in s) <= 8
        )
    )
    rows = [
        job(
            f"j{i}",
            data.draw(st.integers(0, 9000)),
            g,
            data.draw(st.integers(1, 20000)),
            project=data.draw(st.sampled_from(["a", "b", ""])),
            priority=data.draw(st.integers(0, 3)),
            preemptible=data.draw(st.booleans()),
        )
        for i, g in enumerate(sizes)
    ]
    result = run_tiny(rows, policy=policy, gpus=64, horizon_s=10_000.0)
    table = result.jobs
    assert (table["wait_s"] == 0).all()
    summary = result.summary()
    assert summary["wait_s"]["all"]["p50"] == 0 and summary["wait_s"]["all"]["p90"] == 0
    assert summary["preemptions"] == 0


def test_fifo_on_one_gpu_gives_cumulative_sum_waits():
    rows = [job("a", 0, 1, 100), job("b", 0, 1, 200), job("c", 0, 1, 300), job("d", 0, 1, 400)]
    result = run_tiny(rows, policy="fifo", gpus=1, gpus_per_node=1, horizon_s=2000.0)
    table = by_id(result)
    assert list(table.loc[["a", "b", "c", "d"], "wait_s"]) == [0, 100, 300, 600]
    assert list(table["state"]) == ["finished"] * 4
    summary = result.summary()
    assert summary["wait_s"]["all"]["p50"] == approx(200.0)  # between 100 and 300
    assert summary["wait_s"]["all"]["p90"] == approx(510.0)  # 300 + 0.7 x (600 - 300)
    assert summary["occupancy"] == approx(1000 / 2000)
    assert summary["utilization"] == approx(1000 / 2000)


def test_a_job_that_starts_on_arrival_waits_exactly_zero():
    # 10241.1 is not 2048.8 + (10241.1 - 2048.8) in floating point
    rows = [job("a", 2048.8, 1, 1), job("b", 10241.1, 1, 1)]
    result = run_tiny(rows, policy="fifo", gpus=8, horizon_s=20_000.0)
    assert result.jobs["wait_s"].tolist() == [0.0, 0.0]
    assert result.events.query("event == 'submit'")["t_s"].tolist() == [2048.8, 10241.1]


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_fifo_on_one_gpu_follows_lindleys_recursion(data):
    n = data.draw(st.integers(1, 12))
    submits = sorted(data.draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)))
    durations = data.draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    rows = [job(f"j{i:02d}", s, 1, d) for i, (s, d) in enumerate(zip(submits, durations))]
    result = run_tiny(rows, policy="fifo", gpus=1, gpus_per_node=1, horizon_s=20_000.0)
    free_at, expected = 0.0, []
    for s, d in zip(submits, durations):
        start = max(s, free_at)
        expected.append(start - s)
        free_at = start + d
    assert list(by_id(result).loc[[r["job_id"] for r in rows], "wait_s"]) == approx(expected)


# ----- occupancy, utilization, preemption cost -------------------------------------------------
def legacy_preemption():
    """L (funded, util 0.5, checkpoint every 300 s) runs on the whole node until H, of higher
    priority and unallocated, preempts it at 500: L keeps 300 s, loses 200 s, and restarts at
    600 with 60 s of overhead and 700 s to go, finishing at 1360."""
    rows = [
        job("L", 0, 8, 1000, project="p", priority=0, checkpoint_s=300, util=0.5),
        job("H", 500, 8, 100, project="", priority=1),
    ]
    return run_tiny(rows, policy="legacy", gpus=8, horizon_s=2000.0, restart_overhead_s=60.0)


def test_preempted_job_is_restarted_with_overhead_and_keeps_checkpointed_work():
    ev = legacy_preemption().events
    got = list(
        ev[["t_s", "event", "job_id", "overhead_s", "lost_s"]].itertuples(index=False, name=None)
    )
    assert got == [
        (0, "submit", "L", 0, 0),
        (0, "start", "L", 0, 0),
        (500, "submit", "H", 0, 0),
        (500, "preempt", "L", 0, 200),
        (500, "requeue", "L", 0, 0),
        (500, "start", "H", 0, 0),
        (600, "finish", "H", 0, 0),
        (600, "start", "L", 60, 0),
        (1360, "finish", "L", 0, 0),
    ]


def test_occupancy_counts_every_held_gpu_second():
    s = legacy_preemption().summary()
    assert s["availability"] == approx(1.0)
    assert s["occupancy"] == approx(8 * (500 + 100 + 760) / (8 * 2000))
    assert s["occupancy_funded"] == approx(8 * (500 + 760) / (8 * 2000))
    assert s["occupancy_unallocated"] == approx(8 * 100 / (8 * 2000))


def test_utilization_excludes_overhead_and_lost_work_and_scales_by_util():
    s = legacy_preemption().summary()
    useful = 8 * 0.5 * (300 + 700) + 8 * 1.0 * 100  # L kept 300 + 700 s at util 0.5; H 100 s
    assert s["utilization"] == approx(useful / (8 * 2000))


def test_preemption_lost_gpu_hours_are_lost_work_plus_restart_overhead():
    result = legacy_preemption()
    s = result.summary()
    assert s["preemptions"] == 1
    assert s["lost_gpu_hours"] == approx(8 * (200 + 60) / 3600)
    row = by_id(result).loc["L"]
    assert (row["attempts"], row["preempts"], row["lost_s"], row["overhead_s"]) == (2, 1, 200, 60)
    assert row["ran_s"] == approx(500 + 760)
    assert row["queued_s"] == approx(1360 - 1260)  # waited from 500 to 600
    assert row["wait_s"] == 0 and row["state"] == "finished" and row["end_s"] == 1360


def test_unallocated_share_is_unallocated_over_all_delivered_gpu_time():
    assert legacy_preemption().summary()["unallocated_share"] == approx(100 / 1360)


def test_a_restart_interrupted_during_its_overhead_loses_only_the_overhead_it_paid():
    # L restarts at 200 and is preempted at 230, 30 s into its 60 s restart overhead; its last
    # attempt pays the full 60 s. GPU time lost: 8 GPUs x (30 + 60) s.
    rows = [
        job("L", 0, 8, 1000, priority=0, checkpoint_s=0),
        job("H1", 100, 8, 100, priority=2),
        job("H2", 230, 8, 100, priority=2),
    ]
    result = run_tiny(rows, policy="legacy", gpus=8, horizon_s=2000.0, restart_overhead_s=60.0)
    ends = result.events.query("job_id == 'L' and event in ['preempt', 'finish']")["t_s"]
    assert list(ends) == [100, 230, 1290]
    s = result.summary()
    assert s["utilization"] == approx(8 * (100 + 900 + 100 + 100) / (8 * 2000))
    assert s["lost_gpu_hours"] == approx(8 * (30 + 60) / 3600)


# ----- impact and fairness ---------------------------------------------------------------------
def two_projects(extra: list[dict] = ()):
    """FIFO on one 8-GPU node: a1 (project a, 8 GPUs) runs 0-1000, b1 (b, 4 GPUs) waits and runs
    1000-2000. Owed by water-filling: 0-1000 a and b ask 8 and 4 of 8 -> 4 each; 1000-2000 b
    asks 4 -> 4. So a is owed 4000 and got 8000; b is owed 8000 and got 4000."""
    rows = [job("a1", 0, 8, 1000, project="a"), job("b1", 0, 4, 1000, project="b"), *extra]
    return run_tiny(
        rows, policy="fifo", gpus=8, horizon_s=3000.0, budgets=BudgetTree.flat({"a": 1, "b": 1})
    )


def test_impact_is_delivered_up_to_owed_over_owed():
    result = two_projects()
    budgets = result.budgets.set_index("node")
    assert budgets.loc[["a", "b"], "owed_gpu_s"].tolist() == approx([4000, 8000])
    assert budgets.loc[["a", "b"], "delivered_gpu_s"].tolist() == approx([8000, 4000])
    assert budgets.loc[["a", "b"], "entitled_gpu_s"].tolist() == approx([12000, 12000])
    assert budgets.loc[
        "root", ["owed_gpu_s", "delivered_gpu_s", "entitled_gpu_s"]
    ].tolist() == approx([12000, 12000, 24000])
    s = result.summary()
    assert s["impact"] == approx((4000 + 4000) / 12000)
    assert s["impact_strict"] == approx((8000 + 4000) / 24000)
    assert s["jain"] == approx((1 + 0.5) ** 2 / (2 * (1 + 0.25)))  # got/owed = 1 and 0.5
    assert s["occupancy"] == approx(12000 / 24000)
    assert s["requested_ratio"] == approx((8 * 1000 + 4 * 2000) / 24000)
    assert s["wait_s"]["all"]["p50"] == approx(500) and s["wait_s"]["all"]["p90"] == approx(900)


def test_unallocated_work_changes_neither_owed_nor_impact():
    # u1 (unallocated, 4 GPUs, 500 s) starts next to b1 at 1000
    result = two_projects([job("u1", 0, 4, 500, project="")])
    s = result.summary()
    assert s["unallocated_share"] == approx(4 * 500 / (8000 + 4000 + 2000))
    assert s["impact"] == approx(2 / 3)
    assert result.budgets.set_index("node").loc[["a", "b"], "owed_gpu_s"].tolist() == approx(
        [4000, 8000]
    )


# ----- queued and withdrawn jobs ---------------------------------------------------------------
def test_queued_jobs_count_their_wait_so_far_and_withdrawn_jobs_until_withdrawal():
    rows = [job("x", 0, 8, 5000), job("y", 500, 1, 10), job("z", 1000, 1, 10, patience_s=700)]
    result = run_tiny(rows, policy="fifo", gpus=8, horizon_s=3000.0)
    table = by_id(result)
    assert table.loc["x", "state"] == "running" and pd.isna(table.loc["x", "end_s"])
    assert table.loc["x", "ran_s"] == approx(3000)
    assert table.loc["y", "state"] == "queued"
    assert table.loc["y", "wait_s"] == approx(3000 - 500)
    assert table.loc["z", "state"] == "withdrawn"
    assert table.loc["z", "end_s"] == approx(1700)
    assert table.loc["z", "wait_s"] == approx(700) and table.loc["z", "queued_s"] == approx(700)
    s = result.summary()
    assert s["withdrawn"] == 1
    assert s["wait_s"]["all"]["p50"] == approx(700)  # waits 0, 700, 2500
    assert s["wait_by_size_s"]["1"]["p50"] == approx((700 + 2500) / 2)


def test_waits_count_only_jobs_submitted_in_the_window():
    rows = [job("early", 0, 8, 1500), job("late", 1200, 8, 100)]
    result = run_tiny(rows, policy="fifo", gpus=8, horizon_s=3000.0, warmup_days=1000 / 86_400)
    s = result.summary()
    assert s["wait_s"]["all"]["n"] == 1
    assert s["wait_s"]["all"]["p50"] == approx(300)  # 'late' waits for 'early' to end at 1500
    assert s["occupancy"] == approx(8 * (500 + 100) / (8 * 2000))  # window [1000, 3000]


# ----- metrics functions on a hand-written log -------------------------------------------------
def hand_log() -> tuple[pd.DataFrame, pd.DataFrame]:
    """a (2 GPUs) runs 0-50, is preempted losing 10 s, restarts at 80 with 60 s overhead and
    finishes at 200; b (4 GPUs) waits 10-50 and runs past the horizon (300); c (1 GPU) waits
    from 20 until it is withdrawn at 120; d is submitted after the horizon."""
    E = Event
    log = [
        E(0, "submit", "a", 2, "", "", 0, 0),
        E(0, "start", "a", 2, "0", "", 0, 0),
        E(10, "submit", "b", 4, "", "", 0, 0),
        E(20, "submit", "c", 1, "", "", 0, 0),
        E(50, "preempt", "a", 2, "0", "by=b", 0, 10),
        E(50, "requeue", "a", 2, "", "", 0, 0),
        E(50, "start", "b", 4, "0", "", 0, 0),
        E(80, "start", "a", 2, "0", "", 60, 0),
        E(120, "withdraw", "c", 1, "", "patience", 0, 0),
        E(200, "finish", "a", 2, "0", "", 0, 0),
    ]
    trace = validate_trace(
        pd.DataFrame(
            [
                job("a", 0, 2, 150, project="pa"),
                job("b", 10, 4, 1000, project="pb"),
                job("c", 20, 1, 10, project="pa", patience_s=100),
                job("d", 400, 1, 10, project="pb"),
            ]
        )
    )
    return events_frame(log), trace


def test_attempts_pair_each_start_with_its_end():
    events, _ = hand_log()
    att = attempts(events, horizon_s=300.0)
    got = att.sort_values(["job_id", "start_s"])[
        ["job_id", "start_s", "end_s", "ended_by", "overhead_s", "lost_s"]
    ]
    assert list(got.itertuples(index=False, name=None)) == [
        ("a", 0, 50, "preempt", 0, 10),
        ("a", 80, 200, "finish", 60, 0),
        ("b", 50, 300, "running", 0, 0),
    ]


def test_job_table_from_a_hand_written_log():
    events, trace = hand_log()
    table = job_table(events, trace, horizon_s=300.0).set_index("job_id")
    assert sorted(table.index) == ["a", "b", "c"]
    cols = [
        "state",
        "first_start_s",
        "end_s",
        "wait_s",
        "queued_s",
        "attempts",
        "preempts",
        "ran_s",
        "lost_s",
        "overhead_s",
    ]
    assert table.loc["a", cols].tolist() == ["finished", 0, 200, 0, 30, 2, 1, 170, 10, 60]
    b = table.loc["b", cols].tolist()
    assert b[:2] == ["running", 50] and pd.isna(b[2]) and b[3:] == [40, 40, 1, 0, 250, 0, 0]
    c = table.loc["c", cols].tolist()
    assert c[0] == "withdrawn" and pd.isna(c[1]) and c[2:] == [120, 100, 100, 0, 0, 0, 0, 0]


def test_summary_of_a_hand_written_log():
    events, trace = hand_log()
    tree = BudgetTree.flat({"pa": 1, "pb": 1})
    summary, _, budgets = summarise(
        events, trace, tree, Window(0.0, 300.0, 8), gpus_per_node=8, horizon_s=300.0
    )
    assert summary["jobs"] == 3
    assert summary["occupancy"] == approx((2 * 50 + 2 * 120 + 4 * 250) / 2400)
    assert summary["utilization"] == approx((2 * 40 + 2 * 60 + 4 * 250) / 2400)
    assert summary["lost_gpu_hours"] == approx((2 * 10 + 2 * 60) / 3600)
    # 7 GPUs at most are asked for, on 8: owed = demand. pa: a 2 x 200 + c 1 x 100; pb: b 4 x 290
    leaves = budgets.set_index("node").loc[["pa", "pb"]]
    assert leaves["owed_gpu_s"].tolist() == approx([500, 1160])
    assert leaves["delivered_gpu_s"].tolist() == approx([340, 1000])
    assert summary["impact"] == approx((340 + 1000) / (500 + 1160))
    assert summary["jain"] == approx(jain(np.array([340 / 500, 1000 / 1160])))
    assert summary["requested_ratio"] == approx((2 * 200 + 4 * 290 + 1 * 100) / 2400)
    assert summary["unallocated_share"] == 0
    assert (summary["preemptions"], summary["withdrawn"]) == (1, 1)
    assert summary["wait_s"]["all"]["p50"] == approx(40)  # waits 0, 40, 100
    assert summary["wait_by_size_s"]["1"]["p50"] == approx(100)
    assert summary["wait_by_size_s"]["2-8"]["p50"] == approx(20)


def test_healthy_capacity_excludes_nodes_that_are_down():
    events = events_frame(
        [Event(100, "node_down", "", 0, "1", "", 0, 0), Event(200, "node_up", "", 0, "1", "", 0, 0)]
    )
    assert healthy_gpu_s(events, Window(0, 300, 16), gpus_per_node=8) == approx(16 * 300 - 8 * 100)
    assert healthy_gpu_s(events, Window(150, 300, 16), gpus_per_node=8) == approx(16 * 150 - 8 * 50)


# ----- small helpers ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "values, expected",
    [
        ([1, 1, 1], 1.0),
        ([1, 0, 0], 1 / 3),
        ([1, 0.5], 0.9),
        ([2, 2], 1.0),
        ([], math.nan),  # undefined: nobody was owed anything
        ([0, 0], 1.0),  # equal, at nothing
    ],
)
def test_jains_index(values, expected):
    assert jain(np.array(values, dtype=float)) == approx(expected, nan_ok=True)


def test_percentiles_interpolate_linearly():
    assert percentiles(pd.Series([0, 100, 300, 600])) == approx(
        {"p50": 200, "p90": 510, "p99": 591, "n": 4}
    )
    assert percentiles(pd.Series([], dtype=float)) == {
        "p50": None,
        "p90": None,
        "p99": None,
        "n": 0,
    }


def test_size_buckets():
    assert size_bucket(pd.Series([1, 2, 8, 9, 64, 65, 1024])).tolist() == [
        "1",
        "2-8",
        "2-8",
        "9-64",
        "9-64",
        "65+",
        "65+",
    ]


def test_clipped_keeps_the_part_inside_the_window():
    w = Window(100, 200, 8)
    got = clipped(np.array([0, 150, 50, 250, 120]), np.array([150, 400, 90, 300, 130]), w)
    assert got.tolist() == [50, 50, 0, 0, 10]


def test_a_run_without_budgets_reports_impact_as_undefined_not_perfect():
    # nothing is funded, so nothing is owed or entitled: impact has nothing to measure
    result = run_tiny(
        [job("a", 0, 1, 100), job("b", 0, 1, 100)], policy="fifo", gpus=8, horizon_s=1000.0
    )
    s = result.summary()
    assert math.isnan(s["impact"]) and math.isnan(s["impact_strict"]) and math.isnan(s["jain"])
    assert s["unallocated_share"] == 1.0


# ----- the integer-code helpers of the per-job tables, against pandas' own ---------------------------
codes_lists = st.lists(st.integers(0, 6), max_size=40).map(lambda xs: np.array(xs, dtype=np.int64))


@settings(max_examples=examples(200), deadline=None)
@given(codes=codes_lists)
def test_cumcount_and_neighbour_rows_match_pandas_groupby(codes):
    rows = pd.Series(np.arange(len(codes)))
    groups = rows.groupby(codes)
    assert cumcount(codes).tolist() == groups.cumcount().tolist()
    assert next_row(codes).tolist() == groups.shift(-1).fillna(-1).astype(int).tolist()
    assert previous_row(codes).tolist() == groups.shift(1).fillna(-1).astype(int).tolist()


def numbered(codes: np.ndarray) -> pd.DataFrame:
    """Each row's code, its position among its code's rows, and its row number."""
    return pd.DataFrame(
        {
            "code": codes,
            "k": pd.Series(codes).groupby(codes).cumcount(),
            "row": np.arange(len(codes)),
        }
    )


@settings(max_examples=examples(200), deadline=None)
@given(left=codes_lists, right=codes_lists)
def test_nth_match_pairs_the_kth_row_of_a_code_with_the_kth_as_a_merge_does(left, right):
    merged = numbered(left).merge(
        numbered(right), on=["code", "k"], how="left", suffixes=("", "_right")
    )
    assert nth_match(left, right).tolist() == merged["row_right"].fillna(-1).astype(int).tolist()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(0, 30), min_size=0, max_size=40), st.integers(1, 6), st.data())
def test_running_sums_of_picked_rows_are_fancy_indexing_of_the_grid_sums(steps, block, data):
    """The running sums down a grid that is zero but for one change per row (what
    ``interval_steps`` and the owed rates are made of), without the grid and block by block:
    all rows equal ``np.cumsum(grid, axis=0)``, and picked rows equal its ``[rows]``."""
    from impactlab.analysis.metrics import _running_sum

    n_rows, groups = len(steps) + 1, 3
    col = np.array([s % groups for s in steps], dtype=int)
    delta = np.array(steps, dtype=float) - 7.5
    grid = np.zeros((n_rows, groups))
    grid[np.arange(1, n_rows), col] = delta
    values = np.cumsum(grid, axis=0)
    rows = np.array(
        sorted(data.draw(st.lists(st.integers(0, n_rows - 1), max_size=n_rows))), dtype=int
    )
    want = values[rows]
    got = _running_sum(n_rows, groups, col, delta, keep=rows, block=block)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_running_sum(n_rows, groups, col, delta, block=block), values)
