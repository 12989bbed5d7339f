"""A self-contained HTML report of a sweep directory or of saved runs, readable offline.

``write_report(DIR, "report.html")`` accepts what ``impactlab.sweep(out=DIR)`` wrote, a folder
written by ``simulate --out`` (one run) or by ``compare --out`` (one sub-folder per policy).
Charts are rendered to SVG by vl-convert and inlined, the CSS is inline, and nothing refers to
the network (not even the SVG namespace URIs, which HTML does not need): the file opens in any
browser with no internet. It holds the code version, the configs, a headline table and charts.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import math
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.catalog import BY_NAME, CLUSTER_TABLE, MAINTENANCE, SWEEP_HEADLINE
from ..analysis.results import SimResult, runs_to_report
from ..base.config import SimConfig
from ..base.params import ParamError
from ..base.registry import policy_class
from ..runs.sweep import (
    RUNS,
    code_version,
    describe,
    headline_table,
    load_sweep,
    read_manifest,
    summarise_sweep,
)

log = logging.getLogger(__name__)

#: Metrics drawn against each numeric swept knob.
SWEEP_CHARTS = ("impact", "wait_p90_s.debug", "preemptions")
TRADEOFF = ("impact", "wait_p90_s.debug")
_NAMESPACES = re.compile(r'\s+xmlns(:xlink)?="http://www\.w3\.org/[^"]*"')
CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.chart { margin: 1em 0 2em; } .meta { color: #555; font-size: 0.9em; }
.error { color: #a00; font-family: monospace; text-align: left; white-space: pre-wrap; }
details { margin: 0.5em 0; } pre { background: #f8f8f8; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
"""


class ReportError(ValueError):
    """A directory that is neither a sweep nor saved runs."""


def write_report(source: str | Path, out: str | Path) -> Path:
    """Write the HTML report of ``source`` (a sweep directory or saved runs) to ``out``."""
    out = Path(out)
    out.write_text(build_report(source), encoding="utf-8")
    return out


def build_report(source: str | Path) -> str:
    """The HTML report of a sweep directory, a ``simulate --out`` or a ``compare --out`` folder."""
    source = Path(source)
    if (source / RUNS).is_dir() and any((source / RUNS).glob("*.parquet")):
        title, body = f"Sweep {source.name}", sweep_sections(source)
    else:
        results = load_results(source)
        title, body = f"Runs in {source.name}", result_sections(results)
    return page(title, [_versions(source), *body])


def load_results(source: Path) -> list[SimResult]:
    """One saved run (``simulate --out``) or one per sub-folder (``compare --out``)."""
    folders = runs_to_report(source)
    if not folders:
        raise ReportError(
            f"{source}: not a sweep directory (runs/*.parquet) nor saved runs (config.json)"
        )
    return [SimResult.load(p) for p in folders]


# ----- a sweep --------------------------------------------------------------------------------
def sweep_sections(source: Path) -> list[str]:
    """The sections of a sweep's report: what was swept, the headline table, charts, failures, configs."""
    frame = load_sweep(source)
    manifest = read_manifest(source)
    ok = frame[frame["status"] == "ok"]
    parts = [section("Sweep", _sweep_overview(frame, manifest))]
    if not ok.empty:
        stats = summarise_sweep(frame, [m for m in SWEEP_HEADLINE if m in frame])
        parts.append(
            section(
                "Headline (mean ± 95% CI across seeds)",
                table_html(headline_table(stats, SWEEP_HEADLINE)),
            )
        )
        parts += _sweep_warnings(ok, stats)
        parts.append(
            section("Charts", "".join(chart_html(c) for c in sweep_charts(stats, manifest)))
        )
    failed = frame[frame["status"] != "ok"]
    if not failed.empty:
        parts.append(section(f"Failed runs ({len(failed)})", _failures(source, failed)))
    parts.append(section("Configs", _sweep_configs(frame, manifest)))
    return parts


def _sweep_warnings(ok: pd.DataFrame, stats: pd.DataFrame) -> list[str]:
    """The Warnings section of a sweep (none when no run warned): per config that warned, its
    runs' sentences, each with its seed."""
    said = ok[ok["warnings"].fillna("").astype(str) != ""] if "warnings" in ok else ok.iloc[:0]
    if said.empty:
        return []
    label = stats.drop_duplicates("point_key").set_index("point_key")["label"]
    runs = ok.groupby("point_key", sort=False).size()
    blocks = []
    for key, group in said.groupby("point_key", sort=False):
        items = "".join(
            f"<li>seed {seed}: {html.escape(text)}</li>"
            for seed, texts in zip(group["seed"], group["warnings"], strict=True)
            for text in str(texts).split(" | ")
        )
        blocks.append(
            f"<details><summary>{html.escape(str(label.get(key, key)))}: {len(group)} of "
            f"{runs[key]} runs warned</summary><ul>{items}</ul></details>"
        )
    intro = (
        f"<p class='meta'>{len(said)} of {len(ok)} runs warned: their headline numbers hide "
        "thrashing, a backlog, jobs that gave up or impact on work thrown away (the "
        "<i>warned</i> column of the headline counts them per config).</p>"
    )
    return [section("Warnings", intro + "".join(blocks))]


def _sweep_overview(frame: pd.DataFrame, manifest: dict[str, Any]) -> str:
    grid = manifest.get("grid", {})
    rows = [(name, ", ".join(map(str, values))) for name, values in grid.items()]
    rows.append(
        ("seeds", ", ".join(map(str, manifest.get("seeds", sorted(frame["seed"].unique())))))
    )
    done = int((frame["status"] == "ok").sum())
    runs = f"{len(frame)} ({done} finished, {len(frame) - done} failed)"
    rows.append(("runs", f"{runs}; total run time {frame['wall_s'].sum():.1f} s"))
    rows.append(("backend", str(manifest.get("backend", "?"))))
    return table_html(pd.DataFrame(rows, columns=["axis", "values"]))


def sweep_charts(stats: pd.DataFrame, manifest: dict[str, Any]) -> list[Any]:
    """Each headline metric against each numeric swept knob, then the trade-off."""
    from . import charts

    knobs = [
        k
        for k in manifest.get("grid", {})
        if k in stats and pd.api.types.is_numeric_dtype(stats[k])
    ]
    out = [
        charts.sweep_lines(stats, knob, metric)
        for knob in knobs
        for metric in SWEEP_CHARTS
        if metric in set(stats["metric"])
    ]
    if set(TRADEOFF) <= set(stats["metric"]):
        out.append(charts.tradeoff(stats, *TRADEOFF))
    return out


def _failures(source: Path, failed: pd.DataFrame) -> str:
    rows = []
    for key in failed["run_key"]:
        record = json.loads((source / RUNS / f"{key}.json").read_text())
        what = describe(SimConfig.from_dict(record["config"])) if "config" in record else key
        rows.append(
            f"<tr><td>{html.escape(what)}</td><td class='error'>{html.escape(record.get('error', ''))}"
            f"<details><summary>traceback</summary><pre>{html.escape(record.get('traceback', ''))}"
            "</pre></details></td></tr>"
        )
    return f"<table><tr><th>run</th><th>error</th></tr>{''.join(rows)}</table>"


def _sweep_configs(frame: pd.DataFrame, manifest: dict[str, Any]) -> str:
    axes = [k for k in manifest.get("grid", {}) if k in frame and k != "policy"]
    runs = frame[["run_key", "policy", *axes, "seed", "status", "wall_s"]].assign(
        wall_s=frame["wall_s"].round(2)
    )
    base = json.dumps(manifest.get("base", {}), indent=2, default=str)
    return (
        f"<details><summary>base config (JSON)</summary><pre>{html.escape(base)}</pre></details>"
        f"<details><summary>every run ({len(frame)}; its config is runs/&lt;run_key&gt;.json)</summary>"
        f"{table_html(runs)}</details>"
    )


# ----- saved runs -----------------------------------------------------------------------------
def result_sections(results: list[SimResult]) -> list[str]:
    """The sections of a report on saved runs: headline table, charts, configs and provenance."""
    from . import charts

    metrics = pd.DataFrame({r.run: r.metrics() for r in results})
    planned = any(not r.maintenance().empty for r in results)
    rows = [*SWEEP_HEADLINE, *(MAINTENANCE if planned else ())]
    shown = metrics.loc[[m for m in rows if m in metrics.index]]
    table = shown.apply(
        lambda row: row.map(lambda v: _number(v, _is_count(str(row.name)))),
        axis=1,
    ).reset_index(names="metric")
    figures = [charts.headline(results), charts.waits(results), charts.preemptions(results)]
    if all(
        _known_policy(r.config.policy) for r in results
    ):  # (the split reads each policy's contract)
        figures.append(charts.owed_split(results))
    if planned:
        figures.append(charts.maintenance(results))
    configs = "".join(
        f"<details><summary>{html.escape(r.run)}: config and provenance</summary><pre>"
        f"{html.escape(json.dumps({'config': r.config.to_dict(), 'provenance': r.provenance}, indent=2, default=str))}"
        "</pre></details>"
        for r in results
    )
    warned = [text for r in results for text in r.warnings]
    notes = (
        [
            section(
                "Warnings", "<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in warned) + "</ul>"
            )
        ]
        if warned
        else []
    )
    return [
        section("Headline", table_html(table)),
        *notes,
        *_clusters([r for r in results if r.config.clusters]),
        section("Charts", "".join(map(chart_html, figures))),
        section("Configs", configs),
    ]


def _clusters(fleets: list[SimResult]) -> list[str]:
    """The Clusters section of runs that are fleets (none without one): each cluster's headline
    metrics and the organisation's, then the per-cluster charts."""
    if not fleets:
        return []
    from . import charts

    table = pd.concat([r.by_cluster() for r in fleets], ignore_index=True)
    keys = ["run", "cluster"] if len(fleets) > 1 else ["cluster"]
    shown = table[keys].copy()
    for column, heading, per, _ in CLUSTER_TABLE:
        if column in table:
            values = table[column] / per if per != 1.0 else table[column]
            shown[heading] = values.map(_number)
    note = (
        "<p class='meta'>One row per cluster, each measured as a run of its own, and one for the "
        "organisation: every cluster as one (ratios of sums over the fleet, not means of the "
        "rows above). Reporting window.</p>"
    )
    figures = [charts.fleet(fleets), charts.cluster_series(fleets)]
    body = note + table_html(shown) + "".join(map(chart_html, figures))
    return [section("Clusters", body)]


def _known_policy(name: str) -> bool:
    """Whether this session can build policy ``name`` (a run may come from one that registered it)."""
    try:
        policy_class(name)
    except (ParamError, ImportError, AttributeError):
        log.warning(
            "policy %r is not registered here: the report leaves out where the owed GPUs were", name
        )
        return False
    return True


def _is_count(metric: str) -> bool:
    """Whether a headline row is a count or an amount (``catalog``; a wait by kind is not)."""
    known = BY_NAME.get(metric)
    return known is not None and known.kind == "count"


def _number(value: Any, count: bool = False) -> str:
    """A table cell: three decimals below 10, else whole; a ``count`` that is whole (jobs,
    preemptions, GPU-hours of none) is shown whole whatever its size (a row of runs is one
    float column, so 893 preemptions next to none read "0.000")."""
    if isinstance(value, float) and not math.isfinite(value):
        return "–"
    if count and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3f}" if isinstance(value, float) and abs(value) < 10 else f"{value:,.0f}"


# ----- HTML pieces ----------------------------------------------------------------------------
def chart_html(chart: Any) -> str:
    """A chart as inline SVG (vl-convert, offline), without namespace URIs."""
    from .charts import save_chart

    with tempfile.TemporaryDirectory() as tmp:
        svg = save_chart(chart, Path(tmp) / "chart.svg").read_text(encoding="utf-8")
    return f"<div class='chart'>{_NAMESPACES.sub('', svg)}</div>"


def table_html(frame: pd.DataFrame) -> str:
    """A table as escaped HTML, without the index."""
    return frame.to_html(index=False, escape=True, na_rep="–", border=0)


def section(title: str, body: str) -> str:
    """A titled section."""
    return f"<section><h2>{html.escape(title)}</h2>{body}</section>"


def _versions(source: Path) -> str:
    now = code_version()
    produced = _produced_by(source)
    built = f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
    lines = [
        f"report built {built} with impactlab {now['version']} (commit {now['commit'] or 'unknown'})"
    ]
    lines += [
        f"runs produced by impactlab {v.get('version')} (commit {v.get('commit') or 'unknown'})"
        for v in produced
    ]
    return "<p class='meta'>" + "<br>".join(html.escape(line) for line in lines) + "</p>"


def _produced_by(source: Path) -> list[dict[str, Any]]:
    """Distinct code versions recorded with the runs of a sweep."""
    versions = [
        json.loads(p.read_text()).get("impactlab", {})
        for p in sorted((source / RUNS).glob("*.json"))
    ]
    return _distinct(v for v in versions if v)


def _distinct(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for item in items:
        seen.setdefault(json.dumps(item, sort_keys=True), item)
    return list(seen.values())


def page(title: str, sections: Sequence[str]) -> str:
    """The whole document: inline CSS, no script, no external reference."""
    body = "\n".join(sections)
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
