"""Every chart builds for one run and for two, validates against the Vega-Lite schema, exports
offline, and embeds a bounded number of rows."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re

import altair as alt
import pandas as pd
import pytest

import impactlab as il
from impactlab import charts
from impactlab.inputs.trace import KINDS

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


@pytest.fixture
def fresh_kernel(monkeypatch, tmp_path):
    """The chart widget as a new kernel finds it (online), a cache folder of the test's own, and
    the renderer and theme put back afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)
    monkeypatch.setattr(alt.JupyterChart, "_esm", alt.JupyterChart._esm)
    renderer, theme = alt.renderers.active, alt.theme.active
    yield tmp_path / "cache"
    alt.renderers.enable(renderer)
    alt.theme.enable(theme)


def test_the_offline_bundle_is_kept_and_read_back_by_the_next_kernel(fresh_kernel, monkeypatch):
    import vl_convert

    path = charts.offline_bundle_path()
    assert path is not None and path.is_relative_to(fresh_kernel) and not path.exists()
    charts.enable_offline()  # the first kernel: vl-convert bundles, the bundle is kept
    made = alt.JupyterChart._esm
    assert alt.JupyterChart._is_offline and len(made) > 100_000
    assert path.read_bytes().decode("utf-8") == made
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # (no temporary file left)

    def never(*args, **kwargs):
        raise AssertionError("vl-convert bundled again")

    monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)
    monkeypatch.setattr(alt.JupyterChart, "_esm", "")
    monkeypatch.setattr(vl_convert, "javascript_bundle", never)
    charts.enable_offline()  # a later kernel: the same text, read back
    assert alt.JupyterChart._is_offline and alt.JupyterChart._esm == made


def test_another_altair_or_vl_convert_keeps_another_bundle(fresh_kernel, monkeypatch):
    path = charts.offline_bundle_path()
    monkeypatch.setattr(charts.importlib.metadata, "version", lambda name: "0.0.1")
    other = charts.offline_bundle_path()
    assert path is not None and other is not None
    assert other.parent == path.parent and other.name != path.name


def test_with_nowhere_to_keep_the_bundle_charts_are_still_offline(fresh_kernel):
    fresh_kernel.write_text("a file where the cache folder would be")
    charts.enable_offline()
    assert alt.JupyterChart._is_offline and len(alt.JupyterChart._esm) > 100_000
    assert fresh_kernel.read_text() == "a file where the cache folder would be"


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


def test_every_kind_has_a_colour_and_only_kinds_have_one():
    assert set(charts.KIND_COLORS) == set(charts.KIND_ORDER) == set(KINDS)


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


# ----- charts that teach (issue #31 item 7) ---------------------------------------------------


def layers_of(spec: dict) -> list[dict]:
    """The layers of a layered spec, or of the layered spec inside a facet."""
    return spec.get("layer") or spec["spec"]["layer"]


def sweep_stats(policies: tuple[str, ...] = ("impactful",)) -> pd.DataFrame:
    """A ``summarise_sweep`` table: windows x caps (legacy: no cap), two metrics, one wait
    interval reaching below zero as a t interval of a skewed wait does."""
    rows = []
    for policy in policies:
        caps = [math.nan] if policy == "legacy" else [1.0, 8.0]
        for window in (1.0, 7.0):
            for cap in caps:
                key = f"{policy}-{window}-{cap}"
                lost = 900.0 - 50 * window - 10 * (cap if cap == cap else 0)
                wait = 3600.0 * (cap if cap == cap else 0.5)
                for metric, mean, half in (
                    ("lost_gpu_hours", lost, 40.0),
                    ("wait_p90_s.size_9-64", wait, 2.5 * wait),
                ):
                    rows.append(
                        {
                            "label": key,
                            "policy": policy,
                            "window_days": window,
                            "cap_hours": cap,
                            "point_key": key,
                            "metric": metric,
                            "n": 5,
                            "mean": mean,
                            "std": half,
                            "ci_low": mean - half,
                            "ci_high": mean + half,
                        }
                    )
    return pd.DataFrame(rows)


def axis_titles(spec: dict) -> set[str]:
    return {
        enc[ch]["title"]
        for layer in layers_of(spec)
        for enc in [layer["encoding"]]
        for ch in ("x", "y")
        if "title" in enc.get(ch, {})
    }


def test_tradeoff_axes_are_in_words_and_hours():
    spec = charts.tradeoff(sweep_stats(), "lost_gpu_hours", "wait_p90_s.size_9-64").to_dict()
    titles = axis_titles(spec)
    assert titles == {"GPU-hours lost to preemption", "p90 wait, jobs of 9-64 GPUs (h)"}
    assert not any("_" in t for t in titles) and "_" not in spec["title"]["text"]
    rows = pd.DataFrame(
        rows_of(charts.tradeoff(sweep_stats(), "lost_gpu_hours", "wait_p90_s.size_9-64"))
    )
    assert sorted(rows["mean_y"]) == [1.0, 1.0, 8.0, 8.0]  # hours, not seconds


def test_tradeoff_intervals_stop_at_zero():
    chart = charts.tradeoff(sweep_stats(), "lost_gpu_hours", "wait_p90_s.size_9-64")
    rows = pd.DataFrame(rows_of(chart))
    assert (rows["ci_low_y"] >= 0).all() and (rows["ci_low_x"] >= 0).all()
    assert rows["ci_high_y"].max() == pytest.approx(8 * 3.5)  # the upper end is left alone


def test_tradeoff_colours_one_knob_and_shapes_another():
    spec = charts.tradeoff(sweep_stats(), "lost_gpu_hours", "wait_p90_s.size_9-64").to_dict()
    points = next(layer for layer in layers_of(spec) if layer["mark"]["type"] == "point")
    color, shape = points["encoding"]["color"], points["encoding"]["shape"]
    assert color["field"] != shape["field"]
    assert color["title"] == "window (days)" and shape["title"] == "protection cap (h)"
    assert color["scale"]["domain"] == ["1", "7"] and len(set(color["scale"]["range"])) == 2
    assert shape["scale"]["domain"] == ["1", "8"] and len(set(shape["scale"]["range"])) == 2
    assert "impactful" not in {color["title"], shape["title"]}


def test_tradeoff_over_policies_colours_them_in_their_colours():
    stats = sweep_stats(("legacy", "impactful"))
    chart = charts.tradeoff(stats, "lost_gpu_hours", "wait_p90_s.size_9-64", shape="cap_hours")
    layer = layers_of(chart.to_dict())[-1]  # the window, said by neither colour nor shape
    assert layer["mark"]["type"] == "text" and layer["encoding"]["text"]["field"] == "others"
    color = next(
        lay["encoding"]["color"] for lay in layers_of(chart.to_dict()) if "color" in lay["encoding"]
    )
    assert color["title"] == "policy"
    assert dict(zip(color["scale"]["domain"], color["scale"]["range"])) == {
        p: charts.POLICY_COLORS[p] for p in ("impactful", "legacy")
    }
    rows = pd.DataFrame(rows_of(chart))
    assert set(rows.loc[rows["policy"] == "legacy", "shape"]) == {"n/a"}
    assert set(rows["others"]) == {"window (days) 1", "window (days) 7"}
    with pytest.raises(ValueError, match="nope"):
        charts.tradeoff(stats, "lost_gpu_hours", "wait_p90_s.size_9-64", color="nope")


def test_tradeoff_takes_a_log_axis_when_means_span_orders_of_magnitude():
    stats = sweep_stats()
    waits = stats["metric"] == "wait_p90_s.size_9-64"
    stats.loc[waits, ["mean", "ci_low", "ci_high"]] = [[30.0, 0, 60], [40.0, 0, 80]] * 2
    stats.loc[waits & (stats["cap_hours"] == 8.0), ["mean", "ci_low", "ci_high"]] = [
        20_000.0,
        -5000.0,
        45_000.0,
    ]
    spec = charts.tradeoff(stats, "lost_gpu_hours", "wait_p90_s.size_9-64").to_dict()
    y = next(lay["encoding"]["y"] for lay in layers_of(spec) if lay["mark"]["type"] == "point")
    assert y["scale"]["type"] == "log" and y["title"].endswith("log scale")
    rows = pd.DataFrame(rows_of(charts.tradeoff(stats, "lost_gpu_hours", "wait_p90_s.size_9-64")))
    assert (rows["ci_low_y"] > 0).all()  # a log axis has no zero: drawn at a floor


def test_sweep_lines_are_titled_in_words_with_a_band_above_zero():
    chart = charts.sweep_lines(sweep_stats(), "cap_hours", "wait_p90_s.size_9-64")
    spec = chart.to_dict()
    line = next(lay for lay in layers_of(spec) if lay["mark"]["type"] == "line")
    assert line["encoding"]["x"]["title"] == "protection cap (h)"
    assert line["encoding"]["color"]["title"] == "window (days)"
    assert "p90 wait, jobs of 9-64 GPUs (h)" in axis_titles(spec)
    assert min(row["ci_low"] for row in rows_of(chart)) >= 0


@pytest.mark.parametrize(
    ("metric", "unit", "words"),
    [
        ("wait_p90_s.size_9-64", "h", "p90 wait, jobs of 9-64 GPUs (h)"),
        ("wait_p50_s.size_1", "", "p50 wait, 1-GPU jobs"),
        ("wait_p90_s.debug", "min", "p90 wait, debug jobs (min)"),
        ("queued_p99_s.all", "s", "p99 time queued, all jobs (s)"),
        ("preemptions.interactive", "", "preemptions, interactive jobs"),
        ("lost_gpu_hours", "", "GPU-hours lost to preemption"),
        ("impact", "", "impact (owed GPU time delivered)"),
        ("sessions_killed", "", "interactive sessions killed"),
    ],
)
def test_metric_titles_read_like_a_person(metric, unit, words):
    assert charts.metric_title(metric, unit) == words


def test_knob_titles_are_words_with_the_declared_unit():
    assert charts.knob_title("cap_hours") == "protection cap (h)"
    assert charts.knob_title("window_days") == "window (days)"
    assert charts.knob_title("demand") == "demand (\u00d7 capacity)"
    assert charts.knob_title("gpus") == "GPUs"
    assert charts.knob_title("not_a_knob") == "not a knob"


def is_count_axis(axis: dict) -> bool:
    return axis.get("tickMinStep") == 1 and axis.get("format") == ",d"


def test_counts_are_drawn_on_whole_number_ticks(runs):
    spec = charts.headline(runs).to_dict()
    preempt = spec["vconcat"][1]["hconcat"][1]["encoding"]["x"]
    assert preempt["field"] == "preemptions" and is_count_axis(preempt["axis"])
    spec = charts.preemptions(runs).to_dict()
    bars = next(
        lay
        for lay in spec["vconcat"][0]["spec"]["layer"]
        if lay["mark"]["type"] == "rect" and "y" in lay["encoding"]
    )
    assert is_count_axis(bars["encoding"]["y"]["axis"])
    by_kind = spec["vconcat"][1]["hconcat"][0]["encoding"]["x"]
    assert by_kind["field"] == "preemptions" and is_count_axis(by_kind["axis"])


def test_count_axis_draws_no_half_ticks():
    """tickMinStep alone does not stop vl-convert's Vega drawing 0.5 on a 0-2 axis."""
    import vl_convert as vlc

    table = pd.DataFrame({"x": [1, 2, 3], "n": [0, 1, 2]})
    chart = alt.Chart(table).mark_line().encode(x="x:Q", y=alt.Y("n:Q", axis=charts.count_axis()))
    svg = vlc.vegalite_to_svg(chart.properties(height=150).to_dict())
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert labels[labels.index("x") + 1 :] == ["0", "1", "2", "n"]


def test_headline_value_labels_clear_ai2_ticks():
    long = pd.DataFrame(
        {
            "label": [charts._FRACTIONS["impact"]] * 3 + [charts._FRACTIONS["unallocated_share"]],
            "value": [0.97, 0.44, 0.99, 0.21],
        }
    )
    starts = charts._clear_of_ticks(long)
    ai2 = {m: v for m, v in charts.AI2_REFERENCE.items() if m in charts._FRACTIONS}
    refs = long["label"].map({charts._FRACTIONS[m]: v for m, v in ai2.items()})
    for start, ref in zip(starts, refs):
        assert not start < ref < start + charts.LABEL_SPAN  # the label never covers the tick
    assert starts.tolist() == [0.98, 0.44, 0.99, 0.21]  # moved only when it would


def test_headline_labels_are_drawn_where_they_clear_the_ticks(runs):
    spec = charts.headline(runs).to_dict()
    text = next(lay for lay in spec["vconcat"][0]["layer"] if lay["mark"]["type"] == "text")
    assert text["encoding"]["x"]["field"] == "label_x"


def test_pyramid_warm_up_is_visible_over_its_areas_and_named(runs):
    spec = charts.pyramid(runs).to_dict()
    layers = layers_of(spec)
    marks = [layer["mark"]["type"] for layer in layers]
    band = next(
        i
        for i, lay in enumerate(layers)
        if lay["mark"]["type"] == "rect" and "warmup" in json.dumps(lay.get("transform", []))
    )
    assert band > marks.index("area")  # over the areas, which would hide it
    assert layers[band]["mark"]["opacity"] >= 0.3
    name = next(lay for lay in layers if lay["mark"]["type"] == "text")
    assert name["encoding"]["text"]["field"] == "name"
    assert charts.WARMUP_LABEL == "warm-up (not measured)"
    assert {row.get("name") for row in rows_of(charts.pyramid(runs))} >= {charts.WARMUP_LABEL}


def test_owed_share_is_drawn_on_top_of_delivered_dashed_and_darker(runs):
    spec = charts.shares(runs, top=2).to_dict()
    layers = layers_of(spec)
    lines = [lay for lay in layers if lay["mark"]["type"] == "line"]
    order = [json.dumps(lay["transform"]) for lay in lines]
    assert "delivered" in order[0] and "owed" in order[1]  # owed drawn last
    stroke = lines[1]["encoding"]["stroke"]["scale"]
    dash = lines[1]["encoding"]["strokeDash"]["scale"]
    styles = dict(zip(stroke["domain"], zip(stroke["range"], map(tuple, dash["range"]))))
    for run in runs:
        delivered, owed = styles[f"delivered: {run.run}"], styles[f"owed: {run.run}"]
        assert delivered[0] != owed[0] and delivered[1] == (1, 0) and owed[1] != (1, 0)


def test_gantt_title_says_which_run_and_which_hours(runs):
    spec = charts.gantt(runs[1], t0_h=30, t1_h=42).to_dict()
    title = spec["title"]["text"]
    assert "run impactful" in title and "hours 30 to 42" in title and "whole run" not in title
    start = runs[1].window.t0 / 3600
    spec = charts.gantt(runs[1]).to_dict()
    assert (
        "the reporting window" in spec["title"]["text"]
        and f"hours {start:g}" in spec["title"]["text"]
    )
    spec = charts.gantt(runs, t0_h=0, t1_h=6).to_dict()
    assert "2 runs, one panel each" in spec["title"]["text"] and "warm-up" in spec["title"]["text"]
    assert [panel["title"] for panel in spec["vconcat"]] == ["legacy", "impactful"]


def test_gantt_title_leaks_no_parameter_name(runs):
    spec = charts.gantt(runs[1], t0_h=30, t1_h=42, max_rows=40).to_dict()
    assert "max_rows" not in json.dumps(spec)


def test_sweep_lines_take_a_log_axis_when_means_span_orders_of_magnitude():
    stats = sweep_stats()
    waits = stats["metric"] == "wait_p90_s.size_9-64"
    stats.loc[waits & (stats["cap_hours"] == 1.0), ["mean", "ci_low", "ci_high"]] = [30.0, -9, 69]
    chart = charts.sweep_lines(stats, "cap_hours", "wait_p90_s.size_9-64")
    band = layers_of(chart.to_dict())[0]["encoding"]["y"]
    assert band["scale"]["type"] == "log" and band["title"].endswith("log scale")
    assert min(row["ci_low"] for row in rows_of(chart)) > 0
    linear = charts.sweep_lines(stats, "cap_hours", "lost_gpu_hours").to_dict()
    assert "scale" not in layers_of(linear)[0]["encoding"]["y"]


# ----- planned maintenance -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def maintained() -> list[il.SimResult]:
    """legacy and impactful with a quarter of the nodes announced at 30 h, down by 40 h."""
    plan = il.Maintenance(name="rack", announce_h=30, down_h=40, hours=2, share=0.25)
    config = il.SimConfig(gpus=32, days=3, seed=1).with_maintenance(plan)
    return il.compare(config, ["legacy", "impactful"])


def test_maintenance_chart_has_a_tick_per_node_and_the_deadline(maintained):
    chart = charts.maintenance(maintained)
    chart.to_dict(validate=True)
    rows = rows_of(chart)
    ticks = [row for row in rows if "free_h" in row and "node" in row]
    expected = {(r.run, n) for r in maintained for n in r.maintenance()["node"]}
    assert {(row["run"], row["node"]) for row in ticks} == expected
    for r in maintained:  # each tick is the run's own hours to free that node
        table = r.maintenance().set_index("node")["free_h"]
        for row in ticks:
            if row["run"] == r.run:
                assert row["free_h"] == pytest.approx(table[row["node"]])
    assert [row["deadline_h"] for row in rows if "window" in row and "node" not in row] == [10.0]


def test_maintenance_chart_without_a_plan_says_so(runs):
    with pytest.raises(ValueError, match="no run has a maintenance plan"):
        charts.maintenance(runs)
