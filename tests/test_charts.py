"""Every chart builds for one run and for two, validates against the Vega-Lite schema, exports
offline, and embeds a bounded number of rows."""

from __future__ import annotations

import base64
import dataclasses
import re

import altair as alt
import pandas as pd
import pytest

import impactlab as il
from impactlab import charts

MAX_EMBEDDED_ROWS = 3000  # "a few thousand rows" per chart, whatever the run size

CHARTS = {
    "waits": charts.waits,
    "preemptions": charts.preemptions,
    "shares": charts.shares,
    "shares_program": lambda r: charts.shares(r, level="program"),
    "pyramid": charts.pyramid,
    "fragmentation": charts.fragmentation,
    "fragmentation_funded": lambda r: charts.fragmentation(r, work="funded"),
    "gang_idle": charts.gang_idle,
    "free_blocks": charts.free_blocks,
    "owed_split": charts.owed_split,
    "queue": charts.queue,
    "queue_gpus": lambda r: charts.queue(r, measure="gpus"),
    "gantt": lambda r: charts.gantt(r, t0_h=30, t1_h=42),
    "gantt_tier": lambda r: charts.gantt(r, t0_h=30, t1_h=42, color="tier"),
    "headline": charts.headline,
}
TITLES = {
    "waits": "Queue wait before first start",
    "preemptions": "Preemptions per",
    "shares": "Share of healthy GPUs delivered",
    "pyramid": "Availability, occupancy and utilization",
    "fragmentation": "Queue wait by gang size",
    "gang_idle": "GPUs idle or lent while large gangs waited",
    "free_blocks": "The largest block one job could get",
    "owed_split": "Where the owed GPUs were",
    "queue": "Jobs waiting in the queue",
    "gantt": "GPU assignments per node",
    "headline": "Headline metrics",
}


@pytest.fixture(scope="module")
def runs() -> list[il.SimResult]:
    """legacy and impactful on a small cluster, simulated once for the module."""
    config = il.SimConfig(gpus=32, days=3, seed=1)
    return [il.simulate(dataclasses.replace(config, policy=p)) for p in ("legacy", "impactful")]


def datasets(chart: alt.TopLevelMixin) -> dict[str, list[dict]]:
    """The rows a chart embeds (Altair gathers every inline data set under ``datasets``)."""
    return chart.to_dict()["datasets"]


def rows_of(chart: alt.TopLevelMixin) -> list[dict]:
    return [row for rows in datasets(chart).values() for row in rows]


@pytest.mark.parametrize("name", CHARTS)
@pytest.mark.parametrize("count", [1, 2])
def test_every_chart_builds_validates_and_stays_small(runs, name, count):
    arg = runs[1] if count == 1 else runs
    chart = CHARTS[name](arg)
    spec = chart.to_dict(validate=True)  # raises on a spec the Vega-Lite schema rejects
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
    rows = rows_of(chart)
    assert 0 < len(rows) <= MAX_EMBEDDED_ROWS
    named = {row.get("run") for row in rows}
    assert {r.run for r in runs[2 - count :]} <= named  # every run is drawn


@pytest.mark.parametrize("name", list(TITLES))
def test_svg_export_is_offline_stable_and_titled(runs, name, tmp_path):
    chart = CHARTS[name](runs)
    first = charts.save_chart(chart, tmp_path / "a.svg").read_text()
    second = charts.save_chart(chart, tmp_path / "b.svg").read_text()
    assert first.startswith("<svg") and first == second
    assert TITLES[name] in first
    assert "legacy" in first and "impactful" in first


def test_html_export_is_self_contained(runs, tmp_path):
    html = charts.save_chart(charts.headline(runs), tmp_path / "h.html").read_text()
    assert not re.search(r"<script[^>]+src=", html), "HTML must not load scripts from anywhere"
    assert "cdn.jsdelivr" not in html and "unpkg" not in html
    assert "Headline metrics" in html


def test_png_export(runs, tmp_path):
    png = charts.save_chart(charts.fragmentation(runs), tmp_path / "f.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_save_chart_refuses_unknown_formats(runs, tmp_path):
    with pytest.raises(ValueError, match=r"\.svg"):
        charts.save_chart(charts.fragmentation(runs), tmp_path / "f.gif")


def test_theme_is_registered_but_left_as_it_was(runs, tmp_path):
    before = alt.theme.active
    assert charts.THEME in alt.theme.names()
    charts.save_chart(charts.queue(runs), tmp_path / "q.svg")
    assert alt.theme.active == before


def test_enable_offline_shows_the_widget_with_a_picture_of_itself(runs):
    """Offline, interactive, and a PNG plus a readable title for viewers that cannot run it."""
    renderer, theme = alt.renderers.active, alt.theme.active
    try:
        charts.enable_offline()
        assert alt.renderers.active == charts.RENDERER
        assert alt.JupyterChart._is_offline and alt.theme.active == charts.THEME
        bundle = charts.queue(runs)._repr_mimebundle_()
        bundle = bundle[0] if isinstance(bundle, tuple) else bundle
        assert "application/vnd.jupyter.widget-view+json" in bundle
        png = base64.b64decode(bundle["image/png"])
        assert png.startswith(b"\x89PNG") and len(png) < 200_000
        assert (
            bundle["text/plain"].startswith("<chart: ")
            and "object at 0x" not in bundle["text/plain"]
        )
    finally:
        alt.renderers.enable(renderer)
        alt.theme.enable(theme)


def test_runs_with_the_same_name_are_refused(runs):
    with pytest.raises(ValueError, match="label them"):
        charts.waits([runs[0], runs[0]])
    with pytest.raises(ValueError, match="no results"):
        charts.waits([])


def test_labelled_runs_of_one_policy_get_distinct_colours(runs):
    again = dataclasses.replace(runs[1], label="impactful-2")
    colors = charts.run_colors([runs[1], again, runs[0]])
    assert colors == {
        "impactful": charts.POLICY_COLORS["impactful"],
        "impactful-2": charts.FALLBACK_COLORS[0],
        "legacy": charts.POLICY_COLORS["legacy"],
    }


def test_kind_colours_do_not_depend_on_which_kinds_are_present():
    full = charts.kind_scale(list(charts.KIND_ORDER)).to_dict()
    some = charts.kind_scale(["other", "debug", "custom"]).to_dict()
    assert full["domain"] == list(charts.KIND_ORDER)
    assert some["domain"] == ["debug", "other", "custom"]
    assert some["range"][:2] == [charts.KIND_COLORS["debug"], charts.KIND_COLORS["other"]]


def test_project_colour_depends_on_the_name_only(runs):
    names = [f"p{i:02d}" for i in range(12)]
    colors = [charts.project_color(n) for n in names]
    assert set(colors) <= set(charts.PROJECT_COLORS) and len(set(colors)) > 6
    spec = charts.shares(runs, top=2).to_dict()
    fill = spec["spec"]["layer"][1]["encoding"]["fill"]["scale"]
    assert fill["range"] == [charts.project_color(n) for n in fill["domain"]]


def test_waits_draw_zero_waits_at_the_floor_and_mark_p50_p90(runs):
    rows = pd.DataFrame(rows_of(charts.waits(runs)))
    assert rows["wait_s"].min() == charts.WAIT_FLOOR_S  # impactful debug p50 is 0 s
    marks = rows[rows["layer"] == "quantile"]
    assert set(marks["quantile"]) == {"p50", "p90"}
    debug = marks[
        (marks["run"] == "impactful") & (marks["kind"] == "debug") & (marks["quantile"] == "p90")
    ]
    assert debug["wait"].item() == charts.fmt_duration(runs[1].metrics()["wait_p90_s.debug"])


@pytest.mark.parametrize("name", ["preemptions", "shares", "pyramid", "queue", "free_blocks"])
def test_time_series_mark_the_warm_up(runs, name):
    rows = pd.DataFrame(rows_of(CHARTS[name](runs)))
    warm = rows[rows["layer"] == "warmup"]
    assert len(warm) and (warm["day_end"] == runs[0].window.t0 / 86400).all()


def test_shares_keep_the_top_nodes_by_entitlement(runs):
    table = runs[0].share_series()
    table = table[table["level"] == "project"]
    top2 = table.groupby("node")["entitled_share"].mean().nlargest(2).index
    rows = pd.DataFrame(rows_of(charts.shares(runs, top=2)))
    assert set(rows["node"].dropna()) == set(top2)
    with pytest.raises(ValueError, match="level"):
        charts.shares(runs, level="user")


def test_headline_marks_ai2_reference_values(runs):
    rows = pd.DataFrame(rows_of(charts.headline(runs)))
    assert {0.98, 0.18} <= set(rows["ref"].dropna())
    assert 30.0 in set(rows["ref"].dropna())
    impact = rows[(rows.get("metric") == "impact") & (rows["run"] == "legacy")]["value"]
    assert impact.item() == pytest.approx(runs[0].metrics()["impact"])


def test_gantt_packs_bars_so_concurrent_jobs_do_not_overlap():
    table = pd.DataFrame(
        {
            "node": [0, 0, 0, 0],
            "job_id": list("abcd"),
            "gpus_on_node": [4, 2, 2, 8],
            "start_h": [0.0, 0.0, 1.0, 5.0],
            "end_h": [4.0, 2.0, 3.0, 6.0],
        }
    )
    packed = charts._pack(table, 8).set_index("job_id")
    assert packed["slot"].to_dict() == {
        "b": 0,
        "a": 2,
        "c": 6,
        "d": 0,
    }  # shortest first at equal start
    for x in packed.itertuples():
        for y in packed.itertuples():
            concurrent = x.Index < y.Index and x.start_h < y.end_h and y.start_h < x.end_h
            assert (
                not concurrent
                or x.slot + x.gpus_on_node <= y.slot
                or y.slot + y.gpus_on_node <= x.slot
            )


def test_gantt_respects_its_window_and_row_budget(runs):
    rows = pd.DataFrame(rows_of(charts.gantt(runs, t0_h=30, t1_h=42, max_rows=100)))
    bars = rows.dropna(subset=["job_id"])
    assert bars["start_h"].min() >= 30 and bars["end_h"].max() <= 42
    assert len(bars) <= 100


def test_fmt_duration_reads_like_a_person():
    assert [charts.fmt_duration(s) for s in (0, 35, 720, 9000, 3 * 86400)] == [
        "0 s",
        "35 s",
        "12 min",
        "2.5 h",
        "3 days",
    ]
    assert charts.fmt_duration(float("nan")) == "n/a"


def test_coarsen_merges_nice_multiples_of_buckets_and_keeps_totals():
    table = pd.DataFrame(
        {"run": "r", "kind": "debug", "t_h": [float(h) for h in range(1000)], "preemptions": 1}
    )
    merged = charts._coarsen(table, ["run", "kind"], {"preemptions": "sum"}, budget=300)
    assert len(merged) <= 300 and merged["preemptions"].sum() == 1000
    assert set(merged["t_h"].diff().dropna()) == {4.0}  # 1 h -> 4 h: the first multiple that fits
    assert charts._coarsen(table, ["run", "kind"], {"preemptions": "sum"}, budget=1000) is table


def test_gantt_says_when_max_rows_dropped_nodes(runs):
    spec = charts.gantt(runs[1], t0_h=30, t1_h=42, max_rows=40).to_dict()
    assert (
        spec["vconcat"][0]["title"].startswith("impactful: ")
        and "of 4 nodes" in spec["vconcat"][0]["title"]
    )


@pytest.fixture(scope="module")
def gangs() -> list[il.SimResult]:
    """fifo and impactful on 256 GPUs for 4 days: multi-node gangs wait under fifo."""
    config = il.SimConfig(gpus=256, days=4, seed=0)
    return [il.simulate(dataclasses.replace(config, policy=p)) for p in ("fifo", "impactful")]


def test_gang_idle_chart_draws_the_tables_hours(gangs):
    rows = pd.DataFrame(rows_of(charts.gang_idle(gangs)))
    drawn = rows.groupby(["run", "bucket", "what"])["gpu_hours"].sum()
    for result in gangs:
        table = result.gang_idle().set_index("bucket")
        assert len(table) > 1  # some gang sizes, and "all"
        for bucket, row in table.iterrows():
            assert drawn[(result.run, bucket, "idle")] == pytest.approx(row["idle_gpu_hours"])
            assert drawn[(result.run, bucket, "lent to unallocated work")] == pytest.approx(
                row["lent_gpu_hours"]
            )


def test_owed_split_chart_draws_the_tables_shares_in_the_holders_order(gangs):
    rows = pd.DataFrame(rows_of(charts.owed_split(gangs)))
    assert set(rows["held_by"]) <= set(charts.OWED_COLORS)
    for result in gangs:
        table = result.owed_split().set_index("held_by")
        drawn = rows[rows["run"] == result.run].set_index("held_by")["share"]
        assert drawn.sum() == pytest.approx(table.loc["all", "share"])
        for holder in charts.OWED_COLORS:
            assert drawn[holder] == pytest.approx(table.loc[holder, "share"])


def test_free_blocks_chart_draws_the_smallest_waiting_gang(gangs):
    rows = pd.DataFrame(rows_of(charts.free_blocks(gangs)))
    lines = rows[rows["layer"] == "line"]
    assert set(lines["series"]) == set(charts.BLOCK_COLORS)
    fifo = lines[(lines["run"] == "fifo") & (lines["series"] == "smallest waiting gang")][
        "gpus"
    ].dropna()
    assert len(fifo) and (fifo > 8).all()  # multi-node gangs hold whole nodes of 8


def test_fragmentation_of_funded_work_says_so(gangs):
    chart = charts.fragmentation(gangs, work="funded")
    assert "funded jobs of each exact size" in chart.to_dict()["title"]["subtitle"]
    drawn = {row["gpus"] for row in rows_of(chart)}
    assert drawn == {
        g for r in gangs for g in r.wait_by_size("funded").dropna(subset=["p50_h"])["gpus"]
    }
