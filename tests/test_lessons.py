"""impactlab.notebook.lessons: the helpers behind the workshop notebooks."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import TREE_SPEC

import impactlab as il
from impactlab import BudgetTree, SimConfig, compare, metrics_frame
from impactlab.notebook import lessons

DAY_S = 86_400.0


@pytest.fixture(scope="module")
def runs():
    """A small legacy-vs-impactful comparison (16 GPUs, 2 days)."""
    config = SimConfig(gpus=16, days=2.0, seed=3)
    variants = {"legacy": {}, "impactful": {}, "cap 1 h": {"policy": "impactful", "cap_hours": 1}}
    return compare(config, variants)


def trace_of(rows: list[tuple[str, float, str, str]]) -> pd.DataFrame:
    """A tiny trace: (job_id, submit day, project, kind)."""
    return pd.DataFrame(
        {
            "job_id": [r[0] for r in rows],
            "submit_s": [r[1] * DAY_S for r in rows],
            "project": [r[2] for r in rows],
            "kind": [r[3] for r in rows],
            "gpus": 1,
            "duration_s": 7200.0,
            "min_runtime_s": 1800.0,
        }
    )


TRACE = trace_of(
    [
        ("a", 0.5, "p1", "training"),
        ("b", 1.5, "p1", "interactive"),
        ("c", 1.5, "p2", "debug"),
        ("d", 2.5, "p1", "training"),
        ("e", 2.0, "", "other"),
    ]
)


def test_tree_table_lists_every_node_with_its_entitled_fraction():
    tree = BudgetTree.from_dict(TREE_SPEC)
    table = lessons.tree_table(tree)
    assert table["node"].str.strip().tolist() == list(tree.names)
    levels = ["root", "program", "project", "project", "program", "project", "project"]
    assert table["level"].tolist() == levels
    by_name = dict(zip(table["node"].str.strip(), table["entitled"]))
    assert by_name["root"] == 1.0
    assert by_name["progA"] == pytest.approx(0.5)  # 3 of 3 + 1 + 2
    assert by_name["pa2"] == pytest.approx(0.5 * 2 / 3)
    assert table.loc[table["level"] == "project", "entitled"].sum() == pytest.approx(1.0)
    assert table.loc[2, "node"].startswith("        ")  # depth 2: indented twice


def test_budget_table_is_the_budgets_in_long_form(runs):
    table = lessons.budget_table(runs)
    assert set(table["measure"]) == {"entitled", "owed", "delivered"}
    assert table["run"].unique().tolist() == [r.run for r in runs]
    for r in runs:
        mine = table[table["run"] == r.run].pivot(
            index="node", columns="measure", values="gpu_hours"
        )
        budgets = r.budgets.set_index("node")
        assert mine["owed"].to_dict() == pytest.approx((budgets["owed_gpu_s"] / 3600).to_dict())
        assert mine["delivered"].to_dict() == pytest.approx(
            (budgets["delivered_gpu_s"] / 3600).to_dict()
        )
    assert set(table["level"]) == {"root", "program", "project"}
    leaves = {runs[0].tree.names[i] for i in runs[0].tree.leaves}
    assert set(table.loc[table["level"] == "project", "node"]) == leaves


@pytest.mark.parametrize("level", ["project", "program", "root"])
def test_budget_chart_builds(runs, level):
    spec = lessons.budget_chart(runs, level).to_dict()
    assert spec["facet"]["column"]["field"] == "run"


def test_budget_chart_names_the_levels_when_one_is_empty(runs):
    with pytest.raises(ValueError, match="levels"):
        lessons.budget_chart(runs, "team")


def test_idle_drops_the_project_jobs_in_the_window_only():
    out = lessons.idle(TRACE, "p1", 1.0, 2.0)
    assert out["job_id"].tolist() == ["a", "c", "d", "e"]
    assert len(TRACE) == 5  # the input is untouched
    assert lessons.idle(TRACE, "p1", 1.0)["job_id"].tolist() == ["a", "c", "e"]


def test_burst_copies_the_project_jobs_in_the_window():
    out = lessons.burst(TRACE, "p1", copies=3, start_days=1.0, end_days=3.0)
    assert sorted(out["job_id"]) == sorted(["a", "b", "b~2", "b~3", "c", "d", "d~2", "d~3", "e"])
    assert out["submit_s"].is_monotonic_increasing
    assert out["job_id"].is_unique
    in_order = TRACE.sort_values(["submit_s", "job_id"]).reset_index(drop=True)
    assert lessons.burst(TRACE, "p1", copies=1).equals(in_order)


@pytest.mark.parametrize(
    "call",
    [
        lambda: lessons.idle(TRACE, "nobody", 0, 1),
        lambda: lessons.idle(TRACE, "p1", 2, 1),
        lambda: lessons.burst(TRACE, "p1", copies=0),
        lambda: lessons.burst(TRACE, "p1", copies=1.5),
        lambda: lessons.ask_protection(TRACE, ["pretrain"]),
        lambda: lessons.ask_protection(TRACE, hours=-1),
    ],
)
def test_trace_helpers_refuse_what_they_cannot_do(call):
    with pytest.raises(ValueError):
        call()


def test_ask_protection_sets_the_declared_minimum_runtime_of_some_kinds():
    whole = lessons.ask_protection(TRACE)
    assert whole["min_runtime_s"].tolist() == [1800.0, 7200.0, 1800.0, 1800.0, 1800.0]
    twelve = lessons.ask_protection(TRACE, ["interactive", "training"], hours=12)
    assert twelve["min_runtime_s"].tolist() == [43200.0, 43200.0, 1800.0, 43200.0, 1800.0]
    assert TRACE["min_runtime_s"].eq(1800.0).all()


def test_ask_protection_trace_replays_and_the_cap_still_applies():
    config = SimConfig(gpus=16, days=2.0, seed=3)
    base = compare(config, ["impactful"])[0]
    kinds = ["training", "pretrain", "interactive"]
    trace = lessons.ask_protection(base.trace, kinds)
    mine = trace["kind"].isin(kinds)
    assert trace.loc[mine, "min_runtime_s"].equals(trace.loc[mine, "duration_s"])
    cap = {"cap 2 h": {"policy": "impactful", "cap_hours": 2}}
    again = compare(config, cap, trace=trace, budgets=base.tree)[0]
    assert again.metrics()["jobs"] == base.metrics()["jobs"]


def test_metric_chart_draws_lines_over_a_knob_and_bars_over_runs(runs):
    frame = metrics_frame(runs)
    lines = lessons.metric_chart(
        frame,
        "cap_hours",
        {"impact": "impact", "preemptions": "preemptions"},
        log_x=True,
        title="caps",
    ).to_dict()
    assert lines["title"] == "caps" and [p["title"] for p in lines["concat"]] == [
        "impact",
        "preemptions",
    ]
    panel = lines["concat"][0]
    assert {layer["mark"]["type"] for layer in panel["layer"]} == {"line", "point"}
    x = panel["layer"][0]["encoding"]["x"]
    assert x["scale"]["type"] == "log" and x["scale"]["domain"] == [1.0, 8.0]
    assert x["axis"]["values"] == [1.0, 8.0]  # the caps tried, not log decades
    bars = lessons.metric_chart(frame, "run", ["impact", "wait_p90_s.debug"]).to_dict()
    bar = bars["concat"][0]["layer"][0]
    assert bar["mark"]["type"] == "bar"
    assert bar["encoding"]["color"]["scale"]["domain"] == [r.run for r in runs]
    assert sum(len(rows) for rows in bars["datasets"].values()) == 2 * len(runs)


def test_a_metric_spanning_orders_of_magnitude_gets_a_log_axis():
    """02's ablation: debug p90 of 57 s, 499 s and 1,470 s beside legacy's 16,654 s."""
    frame = pd.DataFrame(
        {
            "run": ["a", "b", "c", "d"],
            "policy": ["impactful"] * 3 + ["legacy"],
            "wait": [57.0, 499.0, 1470.0, 16654.0],
            "impact": [0.97, 0.98, 0.98, 0.44],
        }
    )
    chart = lessons.metric_chart(
        frame, "run", {"wait": "debug p90 wait (s)", "impact": "impact"}
    ).to_dict()
    wait, impact = (panel["layer"][0]["encoding"]["x"] for panel in chart["concat"])
    assert wait["scale"]["type"] == "log" and wait["title"] == "debug p90 wait (s) (log scale)"
    assert impact["scale"].get("type") is None  # 0.44-0.98: linear, from zero


def test_metric_chart_names_missing_columns(runs):
    with pytest.raises(ValueError, match="no_such"):
        lessons.metric_chart(metrics_frame(runs), "run", ["no_such"])


def test_metric_chart_takes_missing_values():
    frame = pd.DataFrame(
        {"run": ["a", "b"], "policy": ["x", "y"], "k": [1.0, 2.0], "m": [math.nan, 1.0]}
    )
    assert lessons.metric_chart(frame, "k", ["m"]).to_dict()["concat"][0]["title"] == "m"


def bar_widths(spec: dict) -> list[float]:
    """The drawn widths of a chart's bars (rendered offline to SVG)."""
    import re

    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec)
    paths = re.findall(r'aria-roledescription="bar" d="M[^h]*h(-?[\d.]+)', svg)
    return [float(w) for w in paths]


def test_bars_on_a_log_axis_are_drawn():
    """02's ablation: on a log axis, bars rise from the floor, not from an impossible zero."""
    frame = pd.DataFrame(
        {
            "run": ["a", "b", "c", "d"],
            "policy": ["impactful"] * 3 + ["legacy"],
            "wait": [57.0, 499.0, 1470.0, 16654.0],
        }
    )
    spec = lessons.metric_chart(frame, "run", {"wait": "debug p90 wait (s)"}).to_dict()
    bar = spec["concat"][0]["layer"][0]["encoding"]
    assert bar["x"]["scale"]["type"] == "log" and bar["x2"] == {"datum": lessons.LOG_FLOOR}
    widths = bar_widths(spec)
    assert len(widths) == 4 and all(w > 10 for w in widths)
    assert widths == sorted(widths)  # longer waits, longer bars


def test_counts_get_whole_number_ticks_and_knobs_their_labels():
    """04: 0-2 interactive sessions preempted must not be ticked at 0.5."""
    frame = pd.DataFrame(
        {
            "run": ["cap 1 h", "cap 8 h", "cap 24 h"],
            "policy": "impactful",
            "cap_hours": [1.0, 8.0, 24.0],
            "preemptions.interactive": [2, 1, 0],
            "impact": [0.97, 0.96, 0.97],
        }
    )
    spec = lessons.metric_chart(
        frame, "cap_hours", {"preemptions.interactive": "sessions preempted", "impact": "impact"}
    ).to_dict()
    counts, impact = (panel["layer"][0]["encoding"] for panel in spec["concat"])
    assert counts["y"]["axis"]["tickMinStep"] == 1 and counts["y"]["axis"]["format"] == ",d"
    assert "tickMinStep" not in impact["y"].get("axis", {})  # a share is not a count
    assert counts["x"]["title"] == "protection cap (h)"  # the knob's label, not cap_hours
    bars = lessons.metric_chart(frame, "run", {"preemptions.interactive": "x"}).to_dict()
    assert bars["concat"][0]["layer"][0]["encoding"]["x"]["axis"]["tickMinStep"] == 1


def test_maintenance_effect_is_the_plan_beside_the_same_run_without_it():
    plan = il.Maintenance(name="rack", announce_h=30, down_h=40, hours=2, share=0.25)
    config = il.SimConfig(gpus=32, days=3, seed=1)
    planned = il.compare(config.with_maintenance(plan), ["legacy", "impactful"])
    baseline = il.compare(config, ["legacy", "impactful"])
    table = lessons.maintenance_effect(planned, baseline).set_index("run")
    for with_plan, without in zip(planned, baseline):
        m, b = with_plan.metrics(), without.metrics()
        row = table.loc[with_plan.run]
        assert m["maintenance_nodes"] == 1  # (a quarter of 4 nodes)
        assert row["free_h_max"] == m["maintenance_free_h_max"]
        assert row["evicted"] == m["maintenance_evicted"]
        assert row["impact_change"] == pytest.approx(m["impact"] - b["impact"])
        assert row["wait_p90_h_change"] == pytest.approx(
            (m["wait_p90_s.all"] - b["wait_p90_s.all"]) / 3600
        )
    assert table.loc["impactful", "free_h_max"] <= 8.0  # within the contract cap
