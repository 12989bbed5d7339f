"""A fleet's per-cluster tables, charts and report section: the right columns and rows, the
organisation's numbers checked by hand, a few hundred rows per chart, one-cluster runs refused
(charts) or left as they were (report)."""

from __future__ import annotations

import dataclasses
import logging

import altair as alt
import pandas as pd
import pytest
from helpers import run_tiny

import impactlab as il
from impactlab import charts
from impactlab.analysis.tables import CLUSTER_SERIES
from impactlab.base.config import ORGANISATION
from impactlab.notebook import report

H = 3600.0
approx = pytest.approx
#: "A few hundred rows": what a fleet chart may embed, whatever the run.
MAX_ROWS = 600


@pytest.fixture(scope="module")
def fleet() -> il.SimResult:
    """Three small clusters for three days (warm-up: the first day), simulated once."""
    config = il.SimConfig(days=3, warmup_days=1, seed=3).with_params(clusters="a:16,b:32,c:8")
    return il.simulate(config)


@pytest.fixture(scope="module")
def layouts(fleet) -> list[il.SimResult]:
    """The same workload on today's fleet and with a and b merged."""
    config = fleet.config
    return il.compare_fleets(config, {"today": config, "merged": config.merge_clusters("a", "b")})


@pytest.fixture(scope="module")
def single() -> il.SimResult:
    return il.simulate(il.SimConfig(gpus=16, days=2, seed=1))


@pytest.fixture(scope="module")
def tiny() -> il.SimResult:
    """Two 8-GPU clusters for 2 h (buckets of 1 h). On a: a1 (8 GPUs) runs 0-1800 and a2 (8 GPUs)
    waits for it, then runs 1800-3600; on b: b1 (4 GPUs) runs from 0 past the horizon."""
    rows = [
        {"job_id": "a1", "submit_s": 0, "gpus": 8, "duration_s": 1800, "cluster": "a"},
        {"job_id": "a2", "submit_s": 0, "gpus": 8, "duration_s": 1800, "cluster": "a"},
        {"job_id": "b1", "submit_s": 0, "gpus": 4, "duration_s": 3 * H, "cluster": "b"},
    ]
    return run_tiny(rows, gpus=16, horizon_s=2 * H, clusters="a:8,b:8")


def rows_of(chart: alt.TopLevelMixin) -> list[dict]:
    """Every row a chart embeds (Altair gathers inline data sets under ``datasets``)."""
    return [row for rows in chart.to_dict()["datasets"].values() for row in rows]


# ----- the table ----------------------------------------------------------------------------------
def test_cluster_series_has_one_row_per_bucket_and_cluster(fleet):
    table = fleet.cluster_series()
    assert list(table.columns) == ["run", "policy", "cluster", "t_h", *CLUSTER_SERIES]
    clusters = ["a", "b", "c", ORGANISATION]
    assert list(dict.fromkeys(table["cluster"])) == clusters
    buckets = fleet.pyramid_series()["t_h"].unique()  # the adaptive buckets: 72 of 1 h
    assert len(buckets) == 72 and len(table) == len(buckets) * len(clusters)
    for _, rows in table.groupby("cluster"):
        assert list(rows["t_h"]) == list(buckets)
    gpus = table.groupby("cluster")["gpus"].first().to_dict()
    assert gpus == {"a": 16, "b": 32, "c": 8, ORGANISATION: 56}
    assert set(table["run"]) == {fleet.run}
    coarse = fleet.cluster_series(bucket_s=6 * H)
    assert len(coarse) == 12 * len(clusters) and set(coarse["t_h"]) == {6.0 * k for k in range(12)}


def test_the_organisation_is_the_fleet_as_one(fleet):
    table = fleet.cluster_series()
    wide = table.pivot(index="t_h", columns="cluster")
    parts = ["a", "b", "c"]
    held, healthy = wide["running_gpus"][parts].sum(axis=1), wide["healthy_gpus"][parts].sum(axis=1)
    organisation = wide.xs(ORGANISATION, axis=1, level="cluster")
    assert organisation["occupancy"].to_numpy() == approx((held / healthy).to_numpy())
    for summed in ("queued_jobs", "queued_gpus", "running_gpus"):
        total = wide[summed][parts].sum(axis=1)
        assert organisation[summed].to_numpy() == approx(total.to_numpy(), abs=1e-6)
    # each cluster's numbers are its own run's (pyramid and queue on the same buckets)
    pyramid = fleet.per_cluster["b"].pyramid_series()
    occupancy = pyramid[pyramid["metric"] == "occupancy"]["value"].to_numpy()
    assert wide["occupancy"]["b"].to_numpy() == approx(occupancy)


def test_cluster_series_by_hand(tiny):
    table = tiny.cluster_series().set_index(["cluster", "t_h"])
    # a: held 8 of 8 GPUs over hour 0 (a1 then a2), a2 queued half of it; nothing in hour 1
    assert table.loc[
        ("a", 0.0), ["occupancy", "running_gpus", "queued_jobs", "queued_gpus"]
    ].tolist() == approx([1.0, 8.0, 0.5, 4.0])
    assert table.loc[("a", 1.0), ["occupancy", "queued_jobs"]].tolist() == approx([0.0, 0.0])
    # b: 4 of 8 GPUs both hours
    assert table.xs("b")["occupancy"].tolist() == approx([0.5, 0.5])
    # the organisation: (8 + 4) / 16, then 4 / 16; healthy GPUs: all 16
    org = table.xs(ORGANISATION)
    assert org["occupancy"].tolist() == approx([0.75, 0.25])
    assert org["running_gpus"].tolist() == approx([12.0, 4.0])
    assert org["healthy_gpus"].tolist() == approx([16.0, 16.0])
    assert org["queued_jobs"].tolist() == approx([0.5, 0.0])


def test_cluster_series_refuses_a_one_cluster_run(single):
    with pytest.raises(ValueError, match="one cluster"):
        single.cluster_series()


# ----- the charts ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [charts.fleet, charts.cluster_series])
@pytest.mark.parametrize("count", [1, 2])
def test_fleet_charts_build_validate_and_stay_small(layouts, build, count):
    arg = layouts[0] if count == 1 else layouts
    chart = build(arg)
    chart.to_dict(validate=True)  # raises on a spec the Vega-Lite schema rejects
    rows = rows_of(chart)
    assert 0 < len(rows) <= MAX_ROWS
    assert {r.run for r in layouts[:count]} <= {row.get("run") for row in rows}
    assert {"a", ORGANISATION} <= {row.get("cluster") for row in rows}


def test_fleet_chart_has_a_panel_per_metric_in_its_unit(layouts):
    spec = charts.fleet(layouts).to_dict()
    assert spec["title"]["text"].startswith("Clusters of the fleet")
    panels = spec["concat"]
    assert len(panels) == len(charts.FLEET_METRICS) and spec["columns"] == 2
    titles = [panel["title"] for panel in panels]
    assert titles[0].startswith("occupancy") and titles[4] == "p90 wait, all jobs (h)"
    bars = [next(lay for lay in p["layer"] if lay["mark"]["type"] == "bar") for p in panels]
    for bar in bars:
        enc = bar["encoding"]
        assert enc["y"]["field"] == "cluster" and enc["y"]["sort"][-1] == ORGANISATION
        assert enc["color"]["field"] == "run" and enc["yOffset"]["field"] == "run"
        assert enc["color"]["scale"]["domain"] == ["today", "merged"]
        assert {t["field"] for t in enc["tooltip"]} >= {"run", "cluster", "gpus", "text"}
    assert bars[0]["encoding"]["x"]["axis"]["format"] == "%"
    assert bars[4]["encoding"]["x"]["axis"]["title"] == "hours"
    assert bars[5]["encoding"]["x"]["axis"]["title"] == "jobs"
    # the organisation: bold on a grey band
    axis = bars[0]["encoding"]["y"]["axis"]
    assert ORGANISATION in axis["labelFontWeight"]["condition"]["test"]
    band = panels[0]["layer"][0]
    assert band["mark"]["type"] == "rect" and band["mark"]["color"] == charts.ORGANISATION_FILL
    # the wait is drawn in hours, the clusters as the table has them
    rows = pd.DataFrame(rows_of(charts.fleet(layouts)))
    table = layouts[1].by_cluster().set_index("cluster")
    wait = rows[(rows["run"] == "merged") & (rows["metric"] == "wait_p90_s.all")]
    assert wait.set_index("cluster")["value"].to_dict() == approx(
        (table["wait_p90_s.all"] / H).to_dict()
    )
    assert set(wait["cluster"]) == {"a", "c", ORGANISATION}  # b merged into a


def test_fleet_chart_takes_other_metrics_and_refuses_unknown_ones(fleet):
    spec = charts.fleet(fleet, metrics=["preemptions", "jain"], columns=1).to_dict()
    assert [p["title"] for p in spec["concat"]] == ["preemptions", "Jain's fairness over projects"]
    with pytest.raises(ValueError, match="nope"):
        charts.fleet(fleet, metrics=["nope"])


def test_cluster_series_chart_rows_are_clusters_lines_are_runs(layouts):
    spec = charts.cluster_series(layouts).to_dict()
    assert spec["title"]["text"].startswith("Occupancy and queue per cluster over time")
    occupancy, queued = spec["hconcat"]
    for panel, field in ((occupancy, "occupancy"), (queued, "queued_jobs")):
        assert panel["facet"]["row"]["field"] == "cluster"
        assert panel["facet"]["row"]["sort"] == ["a", "b", "c", ORGANISATION]
        line = next(lay for lay in panel["spec"]["layer"] if lay["mark"]["type"] == "line")
        assert line["encoding"]["y"]["field"] == field
        assert line["encoding"]["color"]["field"] == "run"
        assert line["encoding"]["x"]["title"] == "time (days since start)"
        assert panel["resolve"]["scale"]["y"] == "independent"
    assert occupancy["title"]["text"].startswith("occupancy (share of healthy GPUs")
    assert queued["title"]["text"].startswith("jobs queued (mean")
    rows = pd.DataFrame(rows_of(charts.cluster_series(layouts)))
    assert {"series", "warmup", "organisation"} == set(rows["layer"])
    series = rows[rows["layer"] == "series"]
    # buckets sized to fit: 2 runs x (3 or 2 clusters + the organisation) over 72 h
    assert series.groupby(["run", "cluster"]).size().nunique() == 1


@pytest.mark.parametrize("build", [charts.fleet, charts.cluster_series])
def test_fleet_charts_refuse_one_cluster_runs(fleet, single, build):
    with pytest.raises(ValueError, match="one cluster"):
        build(single)
    with pytest.raises(ValueError, match="one cluster"):
        build([fleet, dataclasses.replace(single, label="alone")])


def test_fleet_chart_exports_offline(layouts, tmp_path):
    svg = charts.save_chart(charts.fleet(layouts), tmp_path / "f.svg").read_text()
    assert svg.startswith("<svg") and "Clusters of the fleet" in svg and "organisation" in svg


# ----- the report ---------------------------------------------------------------------------------
def test_a_fleet_report_has_a_clusters_section(fleet, tmp_path):
    fleet.save(tmp_path / "fleet")
    page = report.build_report(tmp_path / "fleet")
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "<h2>Clusters</h2>" in page
    clusters = page[page.index("<h2>Clusters</h2>") : page.index("<h2>Charts</h2>")]
    for name in ("a", "b", "c", ORGANISATION):
        assert f"<td>{name}</td>" in clusters
    assert "wait p90 (h)" in clusters and "queued at end" in clusters
    assert clusters.count("<svg") == 2
    assert "Clusters of the fleet" in clusters and "Occupancy and queue per cluster" in clusters


def test_a_one_cluster_report_has_no_clusters_section(single, monkeypatch):
    monkeypatch.setattr(report, "chart_html", lambda chart: "<div class='chart'></div>")
    logging.disable(logging.WARNING)
    try:
        sections = report.result_sections([single])
    finally:
        logging.disable(logging.NOTSET)
    assert [s[: s.index("</h2>")] for s in sections] == [
        "<section><h2>Headline",
        *(["<section><h2>Warnings"] if single.warnings else []),
        "<section><h2>Charts",
        "<section><h2>Configs",
    ]
    assert "Clusters" not in "".join(sections)


def test_a_reports_headline_shows_whole_counts_whole_next_to_fractions():
    """A row of runs is one float column: 893 preemptions next to none read "0.000"."""
    assert [report._number(v, count=True) for v in (0.0, 893.0, 2.5)] == ["0", "893", "2.500"]
    assert [report._number(v) for v in (0.0, 0.942, 1311.4)] == ["0.000", "0.942", "1,311"]
    assert report._is_count("preemptions") and not report._is_count("impact")
    assert not report._is_count("wait_p90_s.debug")  # (a wait by kind is in no catalog)
