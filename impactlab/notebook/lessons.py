"""Small helpers for the workshop notebooks: budget-tree tables, trace what-ifs, sweep charts.

The notebooks hold no function definitions; what they need beyond the core library lives here,
tested like the rest (tests/test_lessons.py). Trace helpers return a new trace in the schema
(the input is never changed); charts are pure functions of tables, as in ``impactlab.charts``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import altair as alt
import pandas as pd

from ..base.units import DAY_S
from ..inputs.budgets import BudgetTree
from .charts import WIDTH, as_results, count_axis, knob_title, run_colors, spans_orders

#: Budget measures in the order a reader compares them.
MEASURES = ("entitled", "owed", "delivered")


# ----- budget trees ---------------------------------------------------------------------------
def _level(tree: BudgetTree, node: int) -> str:
    """ "root", "project" (a leaf) or "program" (any node in between)."""
    if tree.parent[node] < 0:
        return "root"
    return "project" if not tree.children[node] else "program"


def tree_table(tree: BudgetTree) -> pd.DataFrame:
    """One row per budget node, parents first: name (indented by depth), level, parent, the raw
    share a manager wrote, and the entitled fraction of the cluster it turns into."""
    rows = []
    for i, name in enumerate(tree.names):
        depth = len(tree.path(i)) - 1
        up = tree.parent[i]
        rows.append(
            {
                "node": "    " * depth + name,
                "level": _level(tree, i),
                "parent": tree.names[up] if up >= 0 else "",
                "share": tree.share[i],
                "entitled": float(tree.fraction[i]),
            }
        )
    return pd.DataFrame(rows)


def budget_table(results: Any) -> pd.DataFrame:
    """Long form of each run's ``budgets``: run, node, level, measure (entitled, owed,
    delivered) and GPU-hours in the reporting window, plus the node's impact."""
    frames = []
    for r in as_results(results):
        b = r.budgets
        level = {name: _level(r.tree, i) for i, name in enumerate(r.tree.names)}
        long = b.melt(
            id_vars=["node", "impact"],
            value_vars=[f"{m}_gpu_s" for m in MEASURES],
            var_name="measure",
            value_name="gpu_s",
        )
        frames.append(
            long.assign(
                run=r.run,
                level=long["node"].map(level),
                measure=long["measure"].str.removesuffix("_gpu_s"),
                gpu_hours=long["gpu_s"] / 3600.0,
            )
        )
    out = pd.concat(frames, ignore_index=True)
    return out[["run", "node", "level", "measure", "gpu_hours", "impact"]]


def budget_chart(results: Any, level: str = "project") -> alt.FacetChart:
    """Entitled, owed and delivered GPU-hours per budget node (one panel per run): a project is
    owed less than its entitlement when it asks for less, and impact counts delivered up to owed."""
    rs = as_results(results)
    table = budget_table(rs)
    table = table[table["level"] == level]
    if table.empty:
        raise ValueError(
            f"no budget nodes at level {level!r} (levels: 'project', 'program', 'root')"
        )
    nodes = sorted(table["node"].unique())
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X("gpu_hours:Q", title="GPU-hours in the reporting window"),
            y=alt.Y("node:N", sort=nodes, title=level),
            yOffset=alt.YOffset("measure:N", sort=list(MEASURES)),
            color=alt.Color(
                "measure:N",
                sort=list(MEASURES),
                title=None,
                scale=alt.Scale(domain=list(MEASURES), range=["#c7c7c7", "#6baed6", "#08519c"]),
            ),
            tooltip=[
                "run:N",
                "node:N",
                "measure:N",
                alt.Tooltip("gpu_hours:Q", format=",.0f"),
                alt.Tooltip("impact:Q", format=".1%"),
            ],
        )
        .properties(width=(WIDTH - 160) // min(len(rs), 2), height=22 * 3 * len(nodes))
    )
    return bars.facet(column=alt.Column("run:N", sort=[r.run for r in rs], title=None)).properties(
        title=alt.Title(
            f"Entitled, owed and delivered GPU-hours per {level}",
            subtitle="impact = delivered (up to owed) / owed, summed over projects",
        )
    )


# ----- trace what-ifs -------------------------------------------------------------------------
def _in_window(trace: pd.DataFrame, project: str, start_days: float, end_days: float) -> pd.Series:
    if project not in set(trace["project"]):
        raise ValueError(f"no job of project {project!r} in the trace")
    if not 0 <= start_days < end_days:
        raise ValueError(f"need 0 <= start_days < end_days, got {start_days} and {end_days}")
    t = trace["submit_s"] / DAY_S
    return (trace["project"] == project) & (t >= start_days) & (t < end_days)


def idle(
    trace: pd.DataFrame, project: str, start_days: float, end_days: float = math.inf
) -> pd.DataFrame:
    """The trace without ``project``'s jobs submitted in [start_days, end_days): the project goes
    idle for a while (its running work still finishes)."""
    return trace[~_in_window(trace, project, start_days, end_days)].reset_index(drop=True)


def burst(
    trace: pd.DataFrame,
    project: str,
    copies: int = 2,
    start_days: float = 0.0,
    end_days: float = math.inf,
) -> pd.DataFrame:
    """The trace with each of ``project``'s jobs submitted in [start_days, end_days) submitted
    ``copies`` times in all (copies get ids ``<id>~2``, ``<id>~3``, ...): the project bursts."""
    if int(copies) != copies or copies < 1:
        raise ValueError(f"copies is a whole number >= 1, got {copies}")
    picked = trace[_in_window(trace, project, start_days, end_days)]
    extra = [
        picked.assign(job_id=picked["job_id"].astype(str) + f"~{k}")
        for k in range(2, int(copies) + 1)
    ]
    out = pd.concat([trace, *extra], ignore_index=True)
    return out.sort_values(["submit_s", "job_id"], kind="stable").reset_index(drop=True)


def ask_protection(
    trace: pd.DataFrame, kinds: Sequence[str] = ("interactive",), hours: float | None = None
) -> pd.DataFrame:
    """The trace with jobs of ``kinds`` declaring a minimum runtime of ``hours`` (None: their
    whole duration), as people would if the cap allowed it; the policy's cap still applies."""
    unknown = sorted(set(kinds) - set(trace["kind"]))
    if unknown:
        raise ValueError(f"no job of kind(s) {unknown} in the trace")
    if hours is not None and not hours >= 0:
        raise ValueError(f"hours must be >= 0, got {hours}")
    mine = trace["kind"].isin(list(kinds))
    wanted = trace["duration_s"] if hours is None else pd.Series(hours * 3600.0, index=trace.index)
    return trace.assign(min_runtime_s=trace["min_runtime_s"].where(~mine, wanted))


# ----- charts of metrics_frame ----------------------------------------------------------------
def metric_chart(
    frame: pd.DataFrame,
    x: str,
    metrics: Mapping[str, str] | Sequence[str],
    columns: int = 2,
    log_x: bool = False,
    title: str = "",
) -> alt.ConcatChart:
    """Metrics of several runs (rows of ``metrics_frame``) against ``x``: lines over a numeric
    knob (a sweep), bars over a text column such as ``run`` (variants, in the runs' colours).
    ``metrics`` maps a column to its title; each panel has its own value scale, logarithmic
    where the values span two orders of magnitude or more (a wait of 57 s next to one of
    16,654 s), with values under 1 drawn at 1; counts (integer columns) on whole-number ticks."""
    titles = dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics}
    missing = sorted((set(titles) | {x, "run"}) - set(frame.columns))
    if missing:
        raise ValueError(f"no column(s) {missing} in the frame")
    numeric = pd.api.types.is_numeric_dtype(frame[x]) and not pd.api.types.is_bool_dtype(frame[x])
    cell = (WIDTH - 60 * columns) // columns
    panels = [
        _metric_panel(frame, x, column, label, numeric, log_x).properties(
            width=cell, height=150 if numeric else 18 * frame[x].nunique() + 10, title=label
        )
        for column, label in titles.items()
    ]
    chart = alt.concat(*panels, columns=columns)
    return chart.properties(title=title) if title else chart


#: On a logarithmic value axis (``charts.LOG_SPAN``), values under this are drawn at it.
LOG_FLOOR = 1.0


def _metric_panel(
    frame: pd.DataFrame, x: str, column: str, label: str, numeric: bool, log_x: bool
) -> alt.LayerChart:
    """One metric of ``metric_chart``: a line over a numeric ``x``, bars over runs."""
    ids = list(dict.fromkeys([x, "run"]))
    data = frame[ids].assign(value=frame[column].to_numpy(dtype=float), metric=label)
    log = spans_orders(data["value"], floor=LOG_FLOOR)
    if log:
        data["value"] = data["value"].clip(lower=LOG_FLOOR)
    value_scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
    value_title = f"{label} (log scale)" if log else None
    counts = pd.api.types.is_integer_dtype(frame[column]) and not log
    value_axis = count_axis() if counts else alt.Axis()
    tooltip: list[str | alt.Tooltip] = [
        "run:N",
        alt.Tooltip("value:Q", title=label, format=",.3~f"),
    ]
    if numeric:
        values = sorted(frame[x].dropna().unique().tolist())
        lo, hi = (values[0], values[-1]) if values else (1, 10)
        scale = alt.Scale(
            type="log" if log_x else "linear", domain=[lo, hi], nice=False, zero=False
        )
        axis = alt.Axis(values=values) if len(values) <= 12 else alt.Axis()  # tick the values tried
        base = alt.Chart(data).encode(
            x=alt.X(f"{x}:Q", title=knob_title(x), scale=scale, axis=axis),
            y=alt.Y("value:Q", title=value_title, scale=value_scale, axis=value_axis),
            tooltip=[f"{x}:Q", *tooltip],
        )
        return alt.LayerChart(
            layer=[base.mark_line(color="#08519c"), base.mark_point(filled=True, color="#08519c")]
        )
    rows = [
        SimpleNamespace(run=run, config=SimpleNamespace(policy=policy))
        for run, policy in zip(frame["run"], frame.get("policy", frame["run"]))
    ]
    colors = run_colors(rows)  # the runs' colours, as charts.headline draws them
    scale = alt.Scale(domain=list(colors), range=list(colors.values()))
    color = alt.Color("run:N", legend=None, scale=scale) if x == "run" else alt.value("#08519c")
    order = list(dict.fromkeys(frame[x].astype(str)))
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y(f"{x}:N", sort=order, title=None),
            x=alt.X("value:Q", title=value_title, scale=value_scale, axis=value_axis),
            # a log axis has no zero: bars rise from the floor that small values are drawn at
            x2=alt.X2(datum=LOG_FLOOR) if log else alt.Undefined,
            color=color,
            tooltip=tooltip,
        )
    )
    return alt.LayerChart(layer=[bars])


# ----- planned maintenance ------------------------------------------------------------------
def maintenance_effect(planned: Any, baseline: Any) -> pd.DataFrame:
    """Per run, what a maintenance plan cost, beside the same run without it (runs paired by
    name): the longest and mean hours to free a node, jobs evicted, GPU-hours of work they lost
    and GPU-hours the closed nodes stood idle, and how the p90 wait of all jobs and impact
    moved (planned minus baseline)."""
    before = {r.run: r.metrics() for r in as_results(baseline)}
    rows = []
    for r in as_results(planned):
        m, b = r.metrics(), before[r.run]
        rows.append(
            {
                "run": r.run,
                "free_h_max": m["maintenance_free_h_max"],
                "free_h_mean": m["maintenance_free_h_mean"],
                "evicted": m["maintenance_evicted"],
                "lost_gpu_hours": m["maintenance_lost_gpu_hours"],
                "idle_gpu_hours": m["maintenance_idle_gpu_hours"],
                "wait_p90_h_change": (m["wait_p90_s.all"] - b["wait_p90_s.all"]) / 3600.0,
                "impact_change": m["impact"] - b["impact"],
            }
        )
    return pd.DataFrame(rows)


#: The columns of ``fleet_table``: metric -> heading (waits in hours).
FLEET_COLUMNS = {
    "gpus": "gpus",
    "occupancy": "occupancy",
    "impact": "impact",
    "impact_useful": "impact_useful",
    "jain": "jain",
    "wait_p90_s.all": "wait_p90_h",
    "wait_p90_s.pretrain": "pretrain_wait_p90_h",
    "queued_at_end": "queued_at_end",
}


def fleet_table(results: Any) -> pd.DataFrame:
    """Fleet runs side by side, one row per run and cluster (the organisation last in each
    run): GPUs, occupancy, impact, impact on useful work, Jain's index, the p90 waits of all
    jobs and of pretraining (hours), and jobs still queued at the end."""
    frames = []
    for r in as_results(results):
        table = r.by_cluster()
        cols = [c for c in FLEET_COLUMNS if c in table.columns]
        out = table[["run", "cluster", *cols]].rename(columns=FLEET_COLUMNS)
        for name in ("wait_p90_h", "pretrain_wait_p90_h"):
            if name in out.columns:
                out[name] = out[name] / 3600.0
        frames.append(out)
    return pd.concat(frames, ignore_index=True)
