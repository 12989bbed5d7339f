"""Altair charts of finished runs: pure functions of the SimResult long-form tables.

Every public chart takes one ``SimResult`` or a list of them, concatenates the tables the
results already aggregate (each carries ``run`` and ``policy``), and returns an Altair chart.
Charts never simulate and never read files; each embeds at most a few thousand rows.

Colours are fixed per job kind, per policy (custom policies and repeated policies fall back to
a categorical scheme) and per project, and set on the encodings, so a chart looks the same
under any theme. Importing this module *registers* the Altair theme ``"impactlab"`` (the
Altair plug-in idiom) but does not enable it: ``enable_offline()`` enables it for notebooks,
``save_chart()`` uses it while exporting, ``alt.theme.enable("impactlab")`` does it by hand.

Offline: ``enable_offline()`` makes Jupyter/Voila draw charts with JavaScript bundled by
vl-convert (no CDN); ``save_chart(chart, "x.svg" | "x.png" | "x.html")`` exports without internet.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import math
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import altair as alt
import pandas as pd

from ..analysis.catalog import BY_NAME as METRIC_INFO
from ..analysis.catalog import label as metric_label
from ..analysis.tables import OWED_HOLDERS, bucket_size
from ..base.config import ORGANISATION, parameter
from ..base.params import label
from ..inputs.trace import KINDS

log = logging.getLogger(__name__)

THEME = "impactlab"
#: Width of a whole chart, in pixels: fits a notebook cell.
WIDTH = 640
#: Waits are drawn on a log axis; shorter waits (zero included) are drawn at this floor.
WAIT_FLOOR_S = 1.0

#: Job kinds in the order charts list them: the trace schema's kinds, in its order.
KIND_ORDER = KINDS
#: One colour per job kind.
KIND_COLORS = {
    "debug": "#d62728",
    "interactive": "#ff7f0e",
    "eval": "#2ca02c",
    "training": "#1f77b4",
    "pretrain": "#9467bd",
    "other": "#7f7f7f",
}
POLICY_COLORS = {
    "fifo": "#9e9e9e",
    "legacy": "#e6550d",
    "fairshare": "#6baed6",
    "impactful": "#08519c",
}
#: For custom policies, and for a second run of the same policy.
FALLBACK_COLORS = (
    "#31a354",
    "#756bb1",
    "#e7298a",
    "#bcbd22",
    "#17becf",
    "#8c6d31",
    "#636363",
    "#d6616b",
    "#3182bd",
    "#fd8d3c",
)
#: Projects and programs: picked by a hash of the name, so a project keeps its colour everywhere.
PROJECT_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#a0cbe8",
    "#ffbe7d",
    "#8cd17d",
    "#b6992d",
    "#f1ce63",
    "#86bcb6",
    "#d37295",
    "#fabfd2",
    "#d4a6c8",
    "#9d7660",
)
TIER_COLORS = {"funded": "#1f77b4", "unallocated": "#fdae6b"}
PYRAMID_COLORS = {
    "availability": "#2ca02c",
    "occupancy": "#08306b",
    "utilization": "#d62728",
    "occupancy: funded": "#9ecae1",
    "occupancy: unallocated": "#fdd0a2",
}
#: Ai2's reported values after moving to impactful scheduling (30 days; docs/model.md).
AI2_REFERENCE = {
    "impact": 0.98,
    "occupancy": 0.98,
    "unallocated_share": 0.18,
    "wait_p90_s.debug": 30.0,
}
#: Ai2's debug p90 wait under its old priority scheduler ("about 2 h").
AI2_LEGACY_DEBUG_P90_S = 7200.0

#: Rows a chart may embed: Altair refuses 5,000; a few thousand keep a notebook light.
ROW_BUDGET = 2400
#: A value axis turns logarithmic when its largest value is this many times its smallest
#: positive one (a wait of 57 s next to one of 16,654 s): on a linear axis the small ones vanish.
LOG_SPAN = 100.0
_MULTIPLES = (2, 3, 4, 6, 8, 12, 24, 48, 168, 336)
_DURATION_TICKS = (
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
    (6 * 3600, "6 h"),
    (86400, "1 day"),
    (7 * 86400, "1 week"),
    (30 * 86400, "30 days"),
)
_WARMUP_NOTE = "shaded, up to the dashed line: warm-up, not counted in the metrics"
#: The words inside a warm-up band, and the band's colour and opacity under and over the data.
WARMUP_LABEL = "warm-up (not measured)"
WARMUP_UNDER, WARMUP_OVER = ("#888", 0.15), ("#fff", 0.55)
#: The note of charts whose warm-up band is drawn over the data (``_warmup_band(over=True)``).
_WARMUP_FADED = "faded, up to the dashed line: warm-up, not counted in the metrics"


@alt.theme.register(THEME, enable=False)
def theme() -> alt.theme.ThemeConfig:
    """The impactlab Altair theme: notebook-width views, quiet grid, readable titles."""
    return alt.theme.ThemeConfig(
        config={
            "view": {"continuousWidth": WIDTH, "continuousHeight": 260, "stroke": None},
            "font": "Helvetica, Arial, sans-serif",
            "title": {
                "fontSize": 15,
                "anchor": "start",
                "subtitleFontSize": 12,
                "subtitleColor": "#555",
            },
            "axis": {
                "labelFontSize": 11,
                "titleFontSize": 12,
                "gridColor": "#ececec",
                "domainColor": "#888",
            },
            "header": {"labelFontSize": 12, "titleFontSize": 12},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "range": {"category": list(FALLBACK_COLORS)},
        }
    )


# ---------------------------------------------------------------- offline rendering and export


def enable_offline(theme: bool = True) -> None:
    """Draw charts in Jupyter and Voila with no internet (JupyterChart, JS bundled by vl-convert),
    each with a PNG of itself for whoever sees the notebook without running it; with ``theme``,
    also enable the impactlab theme. The bundle is kept on disk (``offline_bundle_path``): made
    once, it is read back by every later kernel instead of being made again."""
    _offline_chart_widget()
    alt.renderers.register(RENDERER, _offline_with_picture)
    alt.renderers.enable(RENDERER)
    if theme:
        alt.theme.enable(THEME)


#: The renderer ``enable_offline`` turns on.
RENDERER = "impactlab"


def offline_bundle_path() -> Path | None:
    """Where the JavaScript of offline charts is kept between kernels: a file under the user's
    cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``) named by a digest of everything that
    makes it (altair's widget code and versions, vl-convert's version), so an upgrade makes a
    new one; None if this altair does not expose what the digest needs."""
    try:
        from altair.jupyter.jupyter_chart import load_js_src
        from altair.utils._importers import vl_version_for_vl_convert

        versions = [importlib.metadata.version(d) for d in ("altair", "vl-convert-python")]
    except (ImportError, importlib.metadata.PackageNotFoundError):
        return None
    made_of = "\n".join((*versions, vl_version_for_vl_convert(), load_js_src()))
    digest = hashlib.sha256(made_of.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "impactlab" / f"jupyterchart-offline-{digest}.js"


def _offline_chart_widget() -> None:
    """``alt.JupyterChart.enable_offline()``, which has vl-convert bundle the chart widget's
    JavaScript with the Vega libraries (about a second, in every kernel), reading the bundle
    back from ``offline_bundle_path()`` when an earlier kernel kept it there, and keeping it
    there otherwise. Altair keeps the bundle as the widget class's ``_esm``; should a later
    altair keep it otherwise, its own ``enable_offline`` is used as it is."""
    widget = alt.JupyterChart
    if getattr(widget, "_is_offline", False):
        return
    path = offline_bundle_path()
    if path is not None and hasattr(widget, "_esm"):
        kept_bundle = ""
        with contextlib.suppress(OSError, UnicodeDecodeError):  # (none kept, or unreadable)
            kept_bundle = path.read_bytes().decode("utf-8")  # (bytes: no newline translation)
        if kept_bundle:
            widget._esm, widget._is_offline = kept_bundle, True
            return
    widget.enable_offline()
    bundle = getattr(widget, "_esm", None)
    if path is None or not isinstance(bundle, str):
        return
    kept = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:  # (written whole, then renamed: a kernel reading it never sees half of it)
        path.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(bundle.encode("utf-8"))
        os.replace(kept, path)
    except OSError as err:  # a read-only home: every kernel bundles, as without the cache
        log.debug("offline chart bundle not kept at %s: %s", path, err)
        with contextlib.suppress(OSError):
            kept.unlink(missing_ok=True)


def _offline_with_picture(spec: dict, **metadata: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The interactive chart (a JupyterChart widget, offline) and, in the same output, a PNG of
    it and its title as text. A live kernel shows the widget; JupyterLab opening a stored,
    untrusted notebook, GitHub and nbviewer cannot, and show the picture instead (a PNG, not
    SVG: untrusted notebooks do not render SVG). No widget state needs to be stored."""
    shown = alt.JupyterChart(
        chart=alt.Chart.from_dict(spec), embed_options=metadata.get("embed_options")
    )._repr_mimebundle_()
    data, meta = shown if isinstance(shown, tuple) else (shown or {}, {})
    data = {
        **data,
        "image/png": picture(spec),
        "text/plain": f"<chart: {_title_text(spec) or 'untitled'}>",
    }
    return data, meta


def picture(spec: dict) -> str:
    """The stored picture of a chart's Vega-Lite ``spec``: a small PNG, base64-encoded (what a
    notebook's ``image/png`` output holds)."""
    import base64

    import vl_convert as vlc

    return base64.b64encode(small_png(vlc.vegalite_to_png(spec, scale=PICTURE_SCALE))).decode()


#: Scale of the stored pictures, and the colours they keep: a chart has few colours, and a
#: 64-colour palette makes its PNG about 8x smaller with no visible change (110 KB -> 13 KB for
#: the headline chart), so that notebooks stored with their pictures stay light.
PICTURE_SCALE, PICTURE_COLOURS = 1.0, 64


def small_png(png: bytes, colours: int = PICTURE_COLOURS) -> bytes:
    """``png`` with its colours reduced to a palette of ``colours``."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        flat = Image.new("RGB", image.size, "white")
        flat.paste(image, mask=image.getchannel("A") if image.mode == "RGBA" else None)
        out = io.BytesIO()
        flat.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(
            out, "PNG", optimize=True
        )
    return out.getvalue()


def _title_text(spec: dict) -> str:
    """A chart's title (and subtitle) as plain text."""
    title = spec.get("title", "")
    if isinstance(title, dict):
        text, sub = title.get("text", ""), title.get("subtitle", "")
        parts = (" ".join(t) if isinstance(t, list) else str(t or "") for t in (text, sub))
        return ": ".join(part for part in parts if part)
    return " ".join(title) if isinstance(title, list) else str(title)


SaveFormat = Literal["svg", "png", "pdf", "json", "html"]
#: File suffixes ``save_chart`` writes, and the format each means.
SAVE_FORMATS: dict[str, SaveFormat] = {
    "svg": "svg",
    "png": "png",
    "pdf": "pdf",
    "json": "json",
    "html": "html",
}


def save_chart(
    chart: alt.TopLevelMixin, path: str | Path, scale: float = 1.0, theme: bool = True
) -> Path:
    """Write ``chart`` as SVG, PNG, PDF, JSON or self-contained HTML (chosen by the suffix), offline."""
    path = Path(path)
    fmt = SAVE_FORMATS.get(path.suffix.lower().lstrip("."))
    if fmt is None:
        raise ValueError(f"cannot save {path.name!r}: use a .svg, .png, .pdf, .json or .html path")
    with alt.theme.enable(THEME) if theme else contextlib.nullcontext():
        if fmt == "html":  # inline=True bundles Vega/Vega-Lite into the file: no CDN at view time
            chart.save(path, format="html", inline=True)
        else:
            chart.save(path, format=fmt, scale_factor=scale)
    return path


# ---------------------------------------------------------------- results -> tables


def as_results(results: Any) -> list:
    """One result or a sequence of them -> a non-empty list with distinct run names."""
    out = list(results) if isinstance(results, (list, tuple)) else [results]
    if not out:
        raise ValueError("no results to chart")
    runs = [r.run for r in out]
    twice = sorted({r for r in runs if runs.count(r) > 1})
    if twice:
        raise ValueError(
            f"runs share a name {twice}: label them, e.g. dataclasses.replace(result, label='...')"
        )
    return out


def _table(results: list, name: str, **kwargs: Any) -> pd.DataFrame:
    """Concatenate one long-form table over the runs."""
    return pd.concat([getattr(r, name)(**kwargs) for r in results], ignore_index=True)


def _runs(results: list) -> list[str]:
    return [r.run for r in results]


def _warmup_h(results: list) -> dict[str, float]:
    """Per run: end of the warm-up (start of the reporting window), in hours."""
    return {r.run: r.window.t0 / 3600.0 for r in results}


def _layers(**parts: pd.DataFrame) -> pd.DataFrame:
    """One data frame for a layered (possibly faceted) chart: each part tagged by a ``layer`` column."""
    return pd.concat([df.assign(layer=name) for name, df in parts.items()], ignore_index=True)


def _only(layer: str) -> alt.Chart:
    """A chart without data that keeps the rows of one layer (data comes from the enclosing spec)."""
    return alt.Chart().transform_filter(alt.datum.layer == layer)


# ---------------------------------------------------------------- scales and axes


def _ordered(values: Sequence[str], order: Sequence[str]) -> list[str]:
    """Values present, known ones in ``order`` first, the rest sorted."""
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


def kind_scale(kinds: Sequence[str]) -> alt.Scale:
    """Fixed colour per job kind; unknown kinds get fallback colours."""
    domain = _ordered(kinds, KIND_ORDER)
    extra = iter(FALLBACK_COLORS * 3)
    return alt.Scale(domain=domain, range=[KIND_COLORS.get(k) or next(extra) for k in domain])


def run_colors(results: list) -> dict[str, str]:
    """Per run, its policy's colour; a custom policy or a second run of a policy gets a fallback colour."""
    out, used, extra = {}, set(), iter(FALLBACK_COLORS * 3)
    for r in results:
        policy = r.config.policy
        take = policy in POLICY_COLORS and policy not in used
        out[r.run] = POLICY_COLORS[policy] if take else next(extra)
        used.add(policy)
    return out


def _shade(color: str, factor: float) -> str:
    """``color`` (#rrggbb) darkened: each channel times ``factor``."""
    channels = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c * factor):02x}" for c in channels)


def project_color(name: str) -> str:
    """A stable colour for a project or program, the same in every chart and session."""
    return PROJECT_COLORS[zlib.crc32(name.encode()) % len(PROJECT_COLORS)]


def _run_color(results: list, title: str = "run", channel: type = alt.Color) -> Any:
    """Colour (or another channel, e.g. ``alt.Stroke``) by run, in the runs' colours."""
    colors = run_colors(results)
    return channel(
        "run:N",
        title=title,
        sort=list(colors),
        scale=alt.Scale(domain=list(colors), range=list(colors.values())),
    )


def _duration_axis(lo_s: float, hi_s: float, title: str, sparse: bool = False) -> alt.Axis:
    """Log-scale seconds labelled in readable units (s, min, h, days); ``sparse`` for narrow plots."""
    ticks = [(v, text) for v, text in _DURATION_TICKS if lo_s <= v <= hi_s * 1.01] or list(
        _DURATION_TICKS[:2]
    )
    if sparse:
        ticks = [(v, text) for v, text in ticks if v in (1, 60, 3600, 86400, 30 * 86400)] or ticks
    expr = "''"
    for v, text in reversed(ticks):
        expr = f"datum.value == {v} ? '{text}' : {expr}"
    return alt.Axis(values=[v for v, _ in ticks], labelExpr=expr, title=title, grid=True)


#: True for an axis tick between whole numbers (a Vega expression).
_FRACTIONAL_TICK = "datum.value % 1 !== 0"


def count_axis(**kwargs: Any) -> alt.Axis:
    """An axis for counts: whole-number ticks only (never 0.5 preemptions). ``tickMinStep`` asks
    for that, but the Vega that vl-convert bundles ignores it on small domains (vega/vega#4163):
    ticks that fall between whole numbers are also drawn without label, tick or grid line."""
    hide = {"condition": {"test": _FRACTIONAL_TICK, "value": 0}, "value": 1}
    return alt.Axis(
        tickMinStep=1,
        format=",d",
        labelExpr=f"{_FRACTIONAL_TICK} ? '' : datum.label",
        tickOpacity=hide,
        gridOpacity=hide,
        **kwargs,
    )


def _duration_domain(seconds: pd.Series, from_floor: bool = True) -> list[float]:
    """Log-axis domain in seconds: from the floor (or just under the shortest wait) to past the longest."""
    hi = float(seconds.max()) if len(seconds) else 60.0
    lo = (
        WAIT_FLOOR_S
        if from_floor or not len(seconds)
        else max(WAIT_FLOOR_S, float(seconds.min()) / 3)
    )
    return [lo, max(lo * 60, hi * 1.5)]


def fmt_duration(seconds: float) -> str:
    """Seconds as a short human string: '35 s', '12 min', '2.5 h', '3.1 days'."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    for limit, div, unit in ((60, 1, "s"), (3600, 60, "min"), (86400, 3600, "h")):
        if seconds < limit:
            return f"{seconds / div:.3g} {unit}"
    return f"{seconds / 86400:.3g} days"


def _day(t_h: pd.Series) -> pd.Series:
    return t_h / 24.0


def _time_x(field: str = "day") -> alt.X:
    return alt.X(
        f"{field}:Q", title="time (days since start)", scale=alt.Scale(nice=False, zero=True)
    )


def _bucket_h(t_h: pd.Series) -> float:
    """Width of a time bucket, from the gaps between bucket starts (1 h if there is a single one)."""
    steps = pd.Series(sorted(set(t_h))).diff().dropna()
    steps = steps[steps > 0]
    return float(steps.min()) if len(steps) else 1.0


def _coarsen(
    table: pd.DataFrame, keys: list[str], how: dict[str, str], budget: int
) -> pd.DataFrame:
    """Merge k consecutive time buckets (k a nice multiple, so 1 h becomes 2 h, 3 h, 6 h, ...) until
    the table has at most about ``budget`` rows. ``how``: "mean" for time-averaged values (the last,
    possibly shorter bucket weighs as much as the others), "sum" for counts."""
    if len(table) <= budget:
        return table
    k = next((k for k in _MULTIPLES if len(table) / k <= budget), _MULTIPLES[-1])
    width = _bucket_h(table["t_h"]) * k
    merged = table.assign(t_h=(table["t_h"] // width) * width)
    return merged.groupby([*keys, "t_h"], as_index=False, sort=False).agg(how)


def _warmup_rows(results: list, **columns: Any) -> pd.DataFrame:
    """One row per run spanning the warm-up (``day`` to ``day_end``), for a shaded, named band."""
    rows = [
        {"run": run, "day": 0.0, "day_end": t0 / 24.0, "note": _WARMUP_NOTE, "name": WARMUP_LABEL}
        for run, t0 in _warmup_h(results).items()
    ]
    return pd.DataFrame(rows).assign(**columns)


def _warmup_band(over: bool = False) -> alt.Chart:
    """The warm-up as a band; reads rows of layer ``warmup``. Grey and drawn first, under lines
    and bars; with ``over``, a white veil drawn over areas (which would hide a band under them)."""
    color, opacity = WARMUP_OVER if over else WARMUP_UNDER
    return (
        _only("warmup")
        .mark_rect(color=color, opacity=opacity)
        .encode(x=_time_x(), x2="day_end:Q", tooltip=[alt.Tooltip("note:N", title="warm-up")])
    )


def _warmup_label(at: Literal["top", "bottom"] = "top") -> alt.Chart:
    """The band's name ("warm-up (not measured)") inside it, at its top or bottom left."""
    top = at == "top"
    return (
        _only("warmup")
        .mark_text(
            align="left",
            baseline="top" if top else "bottom",
            dx=4,
            dy=4 if top else -4,
            fontSize=10,
        )
        .encode(x=_time_x(), y=alt.value(0 if top else "height"), text="name:N")
    )


def _warmup_end() -> alt.Chart:
    """Dashed rule where the warm-up ends (draw it last: areas can hide the band)."""
    return (
        _only("warmup")
        .mark_rule(color="#444", strokeDash=[4, 3])
        .encode(x="day_end:Q", tooltip=[alt.Tooltip("note:N", title="warm-up")])
    )


def _row(results: list) -> alt.Row:
    return alt.Row(
        "run:N", title=None, sort=_runs(results), header=alt.Header(labelAngle=0, labelAlign="left")
    )


# ---------------------------------------------------------------- charts


def waits(results: Any, columns: int = 3) -> alt.FacetChart:
    """Queue wait before first start by job kind: cumulative distribution per run, p50/p90 marked."""
    rs = as_results(results)
    cdf = _table(rs, "wait_cdf")
    cdf = cdf.assign(wait_s=(cdf["wait_h"] * 3600.0).clip(lower=WAIT_FLOOR_S))
    # each curve rises from 0 at the floor, so a kind whose shortest wait is long starts flat at 0
    start = cdf.drop_duplicates(["run", "kind"]).assign(wait_s=WAIT_FLOOR_S, fraction=0.0)
    cdf = pd.concat([start, cdf], ignore_index=True)
    q = _table(rs, "wait_quantiles")
    q = q[(q["by"] == "kind") & q["quantile"].isin(["p50", "p90"])].dropna(subset=["wait_s"])
    q = q.assign(
        kind=q["group"],
        fraction=q["quantile"].map({"p50": 0.5, "p90": 0.9}),
        wait=q["wait_s"].map(fmt_duration),
        wait_s=q["wait_s"].clip(lower=WAIT_FLOOR_S),
    )
    data = _layers(
        cdf=cdf[["run", "kind", "wait_s", "fraction"]],
        quantile=q[["run", "kind", "quantile", "wait_s", "wait", "fraction", "n"]],
    )
    x = alt.X(
        "wait_s:Q",
        scale=alt.Scale(type="log", domain=_duration_domain(data["wait_s"]), clamp=True),
        axis=_duration_axis(WAIT_FLOOR_S, data["wait_s"].max(), "wait (log scale)", sparse=True),
    )
    y = alt.Y(
        "fraction:Q",
        title="share of jobs started",
        axis=alt.Axis(format="%"),
        scale=alt.Scale(domain=[0, 1]),
    )
    color = _run_color(rs)
    line = (
        _only("cdf")
        .mark_line(interpolate="step-after", strokeWidth=2)
        .encode(x=x, y=y, color=color)
    )
    marks = (
        _only("quantile")
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=x,
            y=y,
            color=color,
            shape=alt.Shape(
                "quantile:N",
                title="quantile",
                scale=alt.Scale(domain=["p50", "p90"], range=["circle", "triangle-up"]),
            ),
            tooltip=[
                "run:N",
                "kind:N",
                "quantile:N",
                alt.Tooltip("wait:N", title="wait"),
                alt.Tooltip("n:Q", title="jobs"),
            ],
        )
    )
    kinds = ["all", *_ordered([k for k in data["kind"].unique() if k != "all"], KIND_ORDER)]
    cell = (WIDTH - 40 * columns) // columns
    return (
        alt.LayerChart(layer=[line, marks], data=data)
        .properties(width=cell, height=150)
        .facet(facet=alt.Facet("kind:N", sort=kinds, title=None), columns=columns)
        .properties(
            title=alt.Title(
                "Queue wait before first start, by job kind",
                subtitle=[
                    "Share of jobs submitted after the warm-up that started within a given wait.",
                    "● median (p50), ▲ p90. Log time axis: waits under 1 s (zero included) drawn at 1 s.",
                ],
            )
        )
    )


def preemptions(results: Any) -> alt.VConcatChart:
    """Preemptions over time (stacked by kind) and, per kind, preemptions and GPU-hours lost."""
    rs = as_results(results)
    series = _table(rs, "preemption_series")
    series = series[
        (series["preemptions"] > 0) | (series["lost_gpu_hours"] > 0)
    ]  # empty bars draw nothing
    series = _coarsen(
        series, ["run", "kind"], {"preemptions": "sum", "lost_gpu_hours": "sum"}, ROW_BUDGET
    )
    bucket = _bucket_h(series["t_h"]) if len(series) else 1.0
    horizon_h = series["run"].map({r.run: r.config.horizon_s / 3600.0 for r in rs})
    series = series.assign(
        day=_day(series["t_h"]), day_end=_day((series["t_h"] + bucket).clip(upper=horizon_h))
    )
    data = _layers(bars=series, warmup=_warmup_rows(rs))
    kinds = kind_scale(list(series["kind"].unique()) or ["other"])
    bars = (
        _only("bars")
        .mark_rect()
        .encode(
            x=_time_x(),
            x2="day_end:Q",
            y=alt.Y("sum(preemptions):Q", title="preemptions", stack=True, axis=count_axis()),
            color=alt.Color("kind:N", scale=kinds, title="job kind", sort=kinds.domain),
            order=alt.Order("kind:N"),
            tooltip=[
                "run:N",
                "kind:N",
                alt.Tooltip("t_h:Q", title="bucket start (h)", format=".0f"),
                alt.Tooltip("sum(preemptions):Q", title="preemptions"),
                alt.Tooltip("sum(lost_gpu_hours):Q", title="GPU-hours lost", format=".1f"),
            ],
        )
    )
    timeline = (
        alt.LayerChart(layer=[_warmup_band(), bars, _warmup_end(), _warmup_label()], data=data)
        .properties(width=WIDTH - 120, height=110)
        .facet(row=_row(rs))
        .properties(
            title=alt.Title(
                f"Preemptions per {fmt_duration(bucket * 3600)}, by job kind", subtitle=_WARMUP_NOTE
            )
        )
    )
    return alt.vconcat(timeline, _preemptions_by_kind(rs)).resolve_scale(color="independent")


def _preemptions_by_kind(rs: list) -> alt.HConcatChart:
    """Two bar panels: preemptions and GPU-hours lost per kind, one bar per run."""
    table = _table(rs, "preemptions_by_kind")
    order = _ordered(list(table["kind"].unique()), KIND_ORDER)
    tooltip = [
        "run:N",
        "kind:N",
        alt.Tooltip("preemptions:Q"),
        alt.Tooltip("jobs_preempted:Q", title="jobs preempted"),
        alt.Tooltip("lost_gpu_hours:Q", title="GPU-hours lost", format=".1f"),
    ]
    base = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            y=alt.Y("kind:N", sort=order, title="job kind"),
            yOffset=alt.YOffset("run:N", sort=_runs(rs)),
            color=_run_color(rs),
            tooltip=tooltip,
        )
        .properties(width=(WIDTH - 200) // 2, height=28 * max(len(order), 1))
    )
    count = base.encode(
        x=alt.X("preemptions:Q", title="preemptions (reporting window)", axis=count_axis())
    )
    lost = base.encode(x=alt.X("lost_gpu_hours:Q", title="GPU-hours lost (restart + lost work)"))
    return alt.hconcat(count, lost).properties(title="Preemptions and GPU-hours lost, by job kind")


def shares(
    results: Any, level: Literal["project", "program"] = "project", top: int = 8, columns: int = 4
) -> alt.FacetChart:
    """Delivered share of healthy GPUs over time per budget node, against entitled and owed share,
    for the ``top`` nodes by entitlement."""
    rs = as_results(results)
    table = _table(rs, "share_series")
    table = table[table["level"] == level]
    if table.empty:
        raise ValueError(f"no share series at level {level!r} (levels: 'project', 'program')")
    nodes = (
        table.groupby("node")["entitled_share"]
        .mean()
        .sort_values(ascending=False)
        .index[:top]
        .tolist()
    )
    table = table[table["node"].isin(nodes)]
    # drawn three times over (delivered and owed per run, entitled once)
    means = dict.fromkeys(["delivered_share", "entitled_share", "owed_share"], "mean")
    table = _coarsen(table, ["run", "node"], means, ROW_BUDGET // 3).assign(
        day=lambda d: _day(d["t_h"])
    )
    lines = table.melt(
        id_vars=["run", "node", "day", "t_h"],
        value_vars=["delivered_share", "owed_share"],
        var_name="series",
        value_name="share",
    )
    lines["series"] = lines["series"].str.removesuffix("_share")
    lines["line"] = lines["series"] + ": " + lines["run"]
    entitled = table[table["run"] == rs[0].run][["node", "day", "entitled_share"]].rename(
        columns={"entitled_share": "share"}
    )
    warm = pd.concat([_warmup_rows(rs[:1], node=n, name="warm-up") for n in nodes])
    delivered = lines["series"] == "delivered"
    data = _layers(
        entitled=entitled, delivered=lines[delivered], owed=lines[~delivered], warmup=warm
    )
    y = alt.Y("share:Q", title="share of healthy GPUs", axis=alt.Axis(format="%"))
    area = (
        _only("entitled")
        .mark_area(interpolate="step-after", opacity=0.35)
        .encode(
            x=_time_x(),
            y=y,
            fill=alt.Fill(
                "node:N",
                legend=None,
                scale=alt.Scale(domain=nodes, range=[project_color(n) for n in nodes]),
            ),
            tooltip=["node:N", alt.Tooltip("share:Q", title="entitled", format=".1%")],
        )
    )
    # owed is drawn last, dashed and dark, so that it shows where it equals delivered
    drawn = [_share_line(rs, layer, y) for layer in ("delivered", "owed")]
    cell = (WIDTH - 30 * columns) // columns
    return (
        alt.LayerChart(
            layer=[_warmup_band(), area, *drawn, _warmup_end(), _warmup_label()], data=data
        )
        .properties(width=cell, height=110)
        .facet(facet=alt.Facet("node:N", sort=nodes, title=None), columns=columns)
        .properties(
            title=alt.Title(
                f"Share of healthy GPUs delivered to each {level} (top {len(nodes)} by entitlement)",
                subtitle=[
                    "shaded area, in the node's colour: entitled share; solid line, in the run's",
                    "colour: delivered; dark dashes: owed (its entitlement, given its demand).",
                    _WARMUP_NOTE,
                ],
            )
        )
    )


#: Dashes of the owed share's line, and how much darker than the run's colour it is.
OWED_DASH, OWED_SHADE = [4, 3], 0.4


def _share_line(rs: list, layer: str, y: alt.Y) -> alt.Chart:
    """Delivered (solid, in the run's colour) or owed (dashed, darker) shares of ``shares``,
    one legend for both."""
    colors = run_colors(rs)
    styles = {f"delivered: {run}": (c, [1, 0]) for run, c in colors.items()}
    styles |= {f"owed: {run}": (_shade(c, OWED_SHADE), OWED_DASH) for run, c in colors.items()}
    domain = list(styles)
    return (
        _only(layer)
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=_time_x(),
            y=y,
            stroke=alt.Stroke(
                "line:N",
                title="lines",
                scale=alt.Scale(domain=domain, range=[c for c, _ in styles.values()]),
            ),
            strokeDash=alt.StrokeDash(
                "line:N",
                title="lines",
                scale=alt.Scale(domain=domain, range=[d for _, d in styles.values()]),
            ),
            detail="run:N",
            tooltip=[
                "run:N",
                "node:N",
                "series:N",
                alt.Tooltip("t_h:Q", title="hour", format=".0f"),
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
    )


def pyramid(results: Any) -> alt.FacetChart:
    """Ai2's pyramid over time: availability, occupancy (funded and unallocated stacked) and utilization."""
    rs = as_results(results)
    table = _coarsen(_table(rs, "pyramid_series"), ["run", "metric"], {"value": "mean"}, ROW_BUDGET)
    table = table.assign(day=lambda d: _day(d["t_h"]))
    bucket = _bucket_h(table["t_h"])
    names = {
        "occupancy_funded": "occupancy: funded",
        "occupancy_unallocated": "occupancy: unallocated",
    }
    table["metric"] = table["metric"].replace(names)
    stacked = table[table["metric"].isin(names.values())]
    lines = table[table["metric"].isin(["availability", "occupancy", "utilization"])]
    data = _layers(area=stacked, line=lines, warmup=_warmup_rows(rs))
    color = alt.Color(
        "metric:N",
        title=None,
        sort=list(PYRAMID_COLORS),
        scale=alt.Scale(domain=list(PYRAMID_COLORS), range=list(PYRAMID_COLORS.values())),
    )
    y = alt.Y(
        "value:Q",
        title="share of GPUs",
        axis=alt.Axis(format="%"),
        scale=alt.Scale(domain=[0, 1.05]),
    )
    tooltip = [
        "run:N",
        "metric:N",
        alt.Tooltip("t_h:Q", title="hour", format=".0f"),
        alt.Tooltip("value:Q", format=".1%"),
    ]
    area = (
        _only("area")
        .mark_area(interpolate="step-after")
        .encode(
            x=_time_x(), y=y.stack(True), color=color, order=alt.Order("metric:N"), tooltip=tooltip
        )
    )
    line = (
        _only("line")
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(x=_time_x(), y=y, color=color, tooltip=tooltip)
    )
    return (
        alt.LayerChart(
            layer=[area, line, _warmup_band(over=True), _warmup_end(), _warmup_label("bottom")],
            data=data,
        )
        .properties(width=WIDTH - 220, height=150)
        .facet(row=_row(rs))
        .properties(
            title=alt.Title(
                f"Availability, occupancy and utilization (per {fmt_duration(bucket * 3600)})",
                subtitle=[
                    "availability: share of all GPUs healthy; occupancy, utilization: share of healthy GPUs",
                    "held by jobs (areas: funded and unallocated) and doing useful work. "
                    + _WARMUP_FADED,
                ],
            )
        )
    )


def fragmentation(results: Any, work: str = "all") -> alt.LayerChart:
    """Queue wait against gang size (log-log), p50 and p90 per run: do large jobs wait longer?
    ``work``: all jobs, or funded or unallocated ones alone."""
    rs = as_results(results)
    table = _table(rs, "wait_by_size", work=work)
    long = table.melt(
        id_vars=["run", "gpus", "jobs"],
        value_vars=["p50_h", "p90_h"],
        var_name="quantile",
        value_name="wait_h",
    ).dropna(subset=["wait_h"])
    long["quantile"] = long["quantile"].str.removesuffix("_h")
    long["wait"] = (long["wait_h"] * 3600).map(fmt_duration)
    long["wait_s"] = (long["wait_h"] * 3600).clip(lower=WAIT_FLOOR_S)
    sizes = sorted(long["gpus"].unique()) or [1]
    x = alt.X(
        "gpus:Q",
        title="gang size (GPUs, log scale)",
        scale=alt.Scale(type="log", base=2, domain=[1, max(2, sizes[-1])]),
        axis=alt.Axis(
            values=[2**i for i in range(int(math.log2(max(sizes[-1], 1))) + 1)], format="d"
        ),
    )
    domain = _duration_domain(long["wait_s"], from_floor=False)
    y = alt.Y(
        "wait_s:Q",
        scale=alt.Scale(type="log", domain=domain, clamp=True),
        axis=_duration_axis(domain[0], domain[1], "wait before first start (log; <1 s at 1 s)"),
    )
    base = alt.Chart(long).encode(x=x, y=y, color=_run_color(rs))
    dash = alt.StrokeDash(
        "quantile:N",
        title="quantile",
        scale=alt.Scale(domain=["p50", "p90"], range=[[1, 0], [4, 3]]),
    )
    lines = base.mark_line(opacity=0.7).encode(strokeDash=dash, detail="quantile:N")
    points = base.mark_point(filled=True).encode(
        shape=alt.Shape(
            "quantile:N", scale=alt.Scale(domain=["p50", "p90"], range=["circle", "triangle-up"])
        ),
        size=alt.Size("jobs:Q", title="jobs", scale=alt.Scale(range=[20, 200])),
        tooltip=["run:N", "gpus:Q", "quantile:N", alt.Tooltip("wait:N", title="wait"), "jobs:Q"],
    )
    return alt.LayerChart(layer=[lines, points]).properties(
        width=WIDTH - 140,
        height=300,
        title=alt.Title(
            "Queue wait by gang size",
            subtitle="p50 (solid) and p90 (dashed) first-start wait of "
            + ("jobs" if work == "all" else f"{work} jobs")
            + " of each exact size; size: jobs",
        ),
    )


GANG_IDLE_COLORS = {"idle": "#bdbdbd", "lent to unallocated work": TIER_COLORS["unallocated"]}


def gang_idle(results: Any) -> alt.FacetChart:
    """Per gang-size bucket and run: GPU-hours left idle or lent to unallocated work while funded
    multi-node gangs of that size waited (the reporting window), labelled with the hours they waited."""
    rs = as_results(results)
    table = _table(rs, "gang_idle")
    long = table.melt(
        id_vars=["run", "bucket", "gangs", "waiting_h", "queued_gpu_hours"],
        value_vars=["idle_gpu_hours", "lent_gpu_hours"],
        var_name="what",
        value_name="gpu_hours",
    )
    long["what"] = long["what"].map(
        {"idle_gpu_hours": "idle", "lent_gpu_hours": "lent to unallocated work"}
    )
    buckets = [b for b in table["bucket"].drop_duplicates() if b != "all"] + ["all"]
    color = alt.Color(
        "what:N",
        title="while gangs waited, GPUs were",
        scale=alt.Scale(domain=list(GANG_IDLE_COLORS), range=list(GANG_IDLE_COLORS.values())),
    )
    tooltip = [
        "run:N",
        alt.Tooltip("bucket:N", title="gang GPUs"),
        "what:N",
        alt.Tooltip("gpu_hours:Q", title="GPU-hours", format=",.0f"),
        alt.Tooltip("waiting_h:Q", title="hours with a gang waiting", format=".1f"),
        alt.Tooltip("queued_gpu_hours:Q", title="GPU-hours the gangs waited for", format=",.0f"),
        alt.Tooltip("gangs:Q", title="gangs submitted"),
    ]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("sum(gpu_hours):Q", title="GPU-hours (reporting window)", stack=True),
            y=alt.Y("run:N", title=None, sort=_runs(rs)),
            color=color,
            tooltip=tooltip,
        )
    )
    return (
        alt.LayerChart(layer=[bars], data=long)
        .properties(width=WIDTH - 260, height=alt.Step(16))
        .facet(
            row=alt.Row(
                "bucket:N",
                title="funded gangs of (GPUs)",
                sort=buckets,
                header=alt.Header(labelAngle=0, labelAlign="left"),
            )
        )
        .properties(
            title=alt.Title(
                "GPUs idle or lent while large gangs waited",
                subtitle=[
                    "GPU-hours of the window during which at least one funded multi-node gang of",
                    "that size was queued; lent GPUs could be taken back by preemption, idle ones",
                    "were free but too few, or not on whole nodes",
                ],
            )
        )
    )


#: What held the GPUs short projects were owed (``tables.OWED_HOLDERS``), and its colour.
OWED_COLORS = dict(zip(OWED_HOLDERS, ("#08519c", "#6baed6", TIER_COLORS["unallocated"], "#bdbdbd")))


def owed_split(results: Any) -> alt.Chart:
    """Per run: the owed GPU-hours that projects short of their owed rate did not have, stacked
    by what held them at the time (``SimResult.owed_split``), as shares of the window's healthy GPU-hours."""
    rs = as_results(results)
    table = _table(rs, "owed_split")
    parts = table[table["held_by"] != "all"]
    color = alt.Color(
        "held_by:N",
        title="the owed GPUs were held by",
        scale=alt.Scale(domain=list(OWED_COLORS), range=list(OWED_COLORS.values())),
        legend=alt.Legend(orient="bottom", columns=2, labelLimit=360),
    )
    tooltip = [
        "run:N",
        alt.Tooltip("held_by:N", title="held by"),
        alt.Tooltip("share:Q", title="share of capacity", format=".3f"),
        alt.Tooltip("gpu_hours:Q", title="GPU-hours", format=",.0f"),
    ]
    return (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            x=alt.X("sum(share):Q", title="share of the window's healthy GPU-hours", stack=True),
            y=alt.Y("run:N", title=None, sort=_runs(rs)),
            color=color,
            order=alt.Order("order:Q"),
            tooltip=tooltip,
        )
        .transform_calculate(order=f"indexof({list(OWED_COLORS)}, datum.held_by)")
        .properties(
            width=WIDTH - 40,
            height=alt.Step(22),
            title=alt.Title(
                "Where the owed GPUs were",
                subtitle=[
                    "At each instant, the GPUs a project short of its owed rate lacked, by what",
                    "held them: impact's shortfall before a surplus at one time makes up for",
                    "a shortfall at another",
                ],
            ),
        )
    )


BLOCK_COLORS = {
    "largest free block": "#2ca02c",
    "largest free-or-lent block": "#fdae6b",
    "smallest waiting gang": "#9467bd",
}


def free_blocks(results: Any) -> alt.FacetChart:
    """Over time, per run: the largest block of GPUs one job could get (free only, and free or lent
    to unallocated work) against the GPUs the smallest waiting funded gang needs (time-averaged)."""
    rs = as_results(results)
    blocks = _table(rs, "free_block_series").merge(
        _table(rs, "gang_wait_series"), on=["run", "policy", "t_h"]
    )
    columns = ["largest_free_gpus", "largest_open_gpus", "smallest_waiting_gpus"]
    long = blocks.melt(
        id_vars=["run", "t_h"], value_vars=columns, var_name="series", value_name="gpus"
    )
    long["series"] = long["series"].map(dict(zip(columns, BLOCK_COLORS)))
    long = _coarsen(long, ["run", "series"], {"gpus": "mean"}, ROW_BUDGET)
    long = long.assign(day=_day(long["t_h"]))
    bucket = _bucket_h(long["t_h"])
    color = alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=list(BLOCK_COLORS), range=list(BLOCK_COLORS.values())),
    )
    line = (
        _only("line")
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=_time_x(),
            y=alt.Y("gpus:Q", title="GPUs (mean)"),
            color=color,
            tooltip=[
                "run:N",
                "series:N",
                alt.Tooltip("t_h:Q", title="hour", format=".0f"),
                alt.Tooltip("gpus:Q", title="GPUs", format=".1f"),
            ],
        )
    )
    data = _layers(line=long, warmup=_warmup_rows(rs))
    return (
        alt.LayerChart(layer=[_warmup_band(), line, _warmup_end(), _warmup_label()], data=data)
        .properties(width=WIDTH - 220, height=140)
        .facet(row=_row(rs))
        .properties(
            title=alt.Title(
                f"The largest block one job could get (mean per {fmt_duration(bucket * 3600)})",
                subtitle=[
                    "whole free nodes x GPUs per node, or the most free on one node; free-or-lent",
                    "also counts GPUs held by unallocated work, which a funded job may preempt;",
                    "purple: GPUs the smallest waiting funded multi-node gang needs (gaps: none",
                    "waiting). " + _WARMUP_NOTE,
                ],
            )
        )
    )


def queue(results: Any, measure: Literal["jobs", "gpus"] = "jobs") -> alt.FacetChart:
    """Queue length over time (time-averaged per bucket), stacked by job kind, one row per run."""
    if measure not in ("jobs", "gpus"):
        raise ValueError("measure is 'jobs' or 'gpus'")
    rs = as_results(results)
    means = {"queued_jobs": "mean", "queued_gpus": "mean"}
    table = _coarsen(_table(rs, "queue_series"), ["run", "kind"], means, ROW_BUDGET)
    table = table.assign(day=lambda d: _day(d["t_h"]))
    bucket = _bucket_h(table["t_h"]) if len(table) else 1.0
    kinds = kind_scale(list(table["kind"].unique()) or ["other"])
    field = f"queued_{measure}"
    area = (
        _only("area")
        .mark_area(interpolate="step-after")
        .encode(
            x=_time_x(),
            y=alt.Y(f"{field}:Q", title=f"queued {measure} (mean)", stack=True),
            color=alt.Color("kind:N", scale=kinds, title="job kind", sort=kinds.domain),
            order=alt.Order("kind_rank:Q"),
            tooltip=[
                "run:N",
                "kind:N",
                alt.Tooltip("t_h:Q", title="hour", format=".0f"),
                alt.Tooltip("queued_jobs:Q", title="jobs waiting", format=".1f"),
                alt.Tooltip("queued_gpus:Q", title="GPUs asked", format=".0f"),
            ],
        )
    )
    table["kind_rank"] = table["kind"].map({k: i for i, k in enumerate(kinds.domain)})
    data = _layers(area=table, warmup=_warmup_rows(rs))
    return (
        alt.LayerChart(
            layer=[area, _warmup_band(over=True), _warmup_end(), _warmup_label()], data=data
        )
        .properties(width=WIDTH - 150, height=140)
        .facet(row=_row(rs))
        .properties(
            title=alt.Title(
                f"Jobs waiting in the queue, by job kind (mean per {fmt_duration(bucket * 3600)})"
                if measure == "jobs"
                else f"GPUs asked by queued jobs, by job kind (mean per {fmt_duration(bucket * 3600)})",
                subtitle=_WARMUP_FADED,
            )
        )
    )


def gantt(
    results: Any,
    t0_h: float | None = None,
    t1_h: float | None = None,
    color: Literal["kind", "tier"] = "kind",
    max_rows: int = 3000,
) -> alt.VConcatChart:
    """Which job held which GPUs of which node, over time: one band per node, bars coloured by job
    kind or tier. For small clusters or a zoomed window (``t0_h``..``t1_h`` hours)."""
    if color not in ("kind", "tier"):
        raise ValueError("color is 'kind' or 'tier'")
    rs = as_results(results)
    per_run = max(1, max_rows // len(rs))
    tables = [r.gantt(t0_h=t0_h, t1_h=t1_h, max_rows=per_run) for r in rs]
    scale = (
        kind_scale(list(pd.concat([t["kind"] for t in tables]).unique()))
        if color == "kind"
        else alt.Scale(domain=list(TIER_COLORS), range=list(TIER_COLORS.values()))
    )
    panels = [_gantt_panel(r, t, color, scale) for r, t in zip(rs, tables)]
    who = f"run {rs[0].run}" if len(rs) == 1 else f"{len(rs)} runs, one panel each"
    return alt.vconcat(*panels).properties(
        title=alt.Title(
            f"GPU assignments per node, {who}: {_gantt_span(rs[0], t0_h, t1_h)}",
            subtitle="each bar: one attempt of a job on one node, as tall as the GPUs it held there",
        )
    )


def _gantt_span(result: Any, t0_h: float | None, t1_h: float | None) -> str:
    """The hours a Gantt chart shows, and where they sit against the reporting window."""
    start, end = result.window.t0 / 3600.0, result.config.horizon_s / 3600.0
    lo, hi = start if t0_h is None else t0_h, end if t1_h is None else t1_h
    hours = f"hours {lo:g} to {hi:g}"
    if lo == start and hi == end:
        return f"the reporting window ({hours})"
    if lo >= start:
        return f"{hours}, in the reporting window"
    if hi <= start:
        return f"{hours}, in the warm-up (not measured)"
    return f"{hours} (warm-up until hour {start:g})"


def _gantt_panel(result: Any, table: pd.DataFrame, color: str, scale: alt.Scale) -> alt.LayerChart:
    """One run's node x time chart: every node a band of gpus_per_node rows."""
    gpn = int(result.config.gpus_per_node)
    table = _pack(table, gpn).assign(
        tier=lambda d: d["funded"].map({True: "funded", False: "unallocated"})
    )
    nodes = _node_order(table["node"])
    index = {n: i for i, n in enumerate(nodes)}
    table["y0"] = table["node"].map(index) * gpn + table["slot"]
    table["y1"] = table["y0"] + table["gpus_on_node"]
    step = max(1, len(nodes) // 32)  # at most ~32 node labels
    labels = ", ".join(f"'{n}'" for n in nodes)
    axis = alt.Axis(
        values=[i * gpn + gpn / 2 for i in range(0, len(nodes), step)],
        grid=False,
        ticks=False,
        labelExpr=f"[{labels}][floor(datum.value / {gpn})]",
        title="node",
    )
    bars = (
        alt.Chart(table)
        .mark_rect(stroke="white", strokeWidth=0.3)
        .encode(
            x=alt.X(
                "start_h:Q",
                title="time (hours since start)",
                scale=alt.Scale(zero=False, nice=False),
            ),
            x2="end_h:Q",
            y=alt.Y(
                "y0:Q",
                axis=axis,
                scale=alt.Scale(domain=[len(nodes) * gpn, 0], nice=False, zero=False),
            ),
            y2="y1:Q",
            color=alt.Color(
                f"{color}:N", scale=scale, title="job kind" if color == "kind" else "tier"
            ),
            tooltip=[
                "job_id:N",
                "kind:N",
                "tier:N",
                "node:N",
                alt.Tooltip("gpus_on_node:Q", title="GPUs on node"),
                alt.Tooltip("start_h:Q", title="start (h)", format=".1f"),
                alt.Tooltip("end_h:Q", title="end (h)", format=".1f"),
            ],
        )
    )
    layers = [bars, *_gantt_warmup(result, table)]
    height = min(600, max(120, 10 * len(nodes)))
    shown = f"{result.run}: the first {len(nodes)} of {result.config.nodes} nodes (a chart of all would be too big)"
    title = result.run if len(nodes) >= result.config.nodes else shown
    return alt.LayerChart(layer=layers).properties(width=WIDTH - 160, height=height, title=title)


def _gantt_warmup(result: Any, table: pd.DataFrame) -> list[alt.Chart]:
    """A rule where the warm-up ends, if that moment is inside the drawn window."""
    t0 = result.window.t0 / 3600.0
    if table.empty or not table["start_h"].min() <= t0 <= table["end_h"].max():
        return []
    rule = pd.DataFrame({"start_h": [t0], "note": ["warm-up ends: metrics count from here"]})
    return [
        alt.Chart(rule)
        .mark_rule(color="#444", strokeDash=[4, 3])
        .encode(x="start_h:Q", tooltip="note:N")
    ]


def _node_order(nodes: pd.Series) -> list:
    """Nodes in natural order (numerically when they are numbers)."""
    unique = pd.Series(nodes.unique())
    numeric = pd.to_numeric(unique, errors="coerce")
    if numeric.notna().all():
        return unique.iloc[numeric.argsort()].tolist()
    return sorted(unique, key=str)


def _pack(table: pd.DataFrame, gpn: int) -> pd.DataFrame:
    """Give each bar a GPU slot on its node so that bars overlapping in time do not overlap in space.

    The table does not say which GPUs of a node a job held; lowest-first contiguous packing is a
    faithful picture whenever the node's GPUs are not fragmented (first fit; overlap otherwise)."""
    table = table.sort_values(["node", "start_h", "end_h"], kind="stable").reset_index(drop=True)
    slots = [0] * len(table)
    for _, rows in table.groupby("node", sort=False):
        active: list[tuple[float, int, int]] = []  # (end_h, slot, width)
        for i, start, end, width in zip(
            rows.index, rows["start_h"], rows["end_h"], rows["gpus_on_node"]
        ):
            active = [a for a in active if a[0] > start]
            slots[i] = _first_fit(active, int(width), gpn)
            active.append((end, slots[i], int(width)))
    return table.assign(slot=slots)


def _first_fit(active: list[tuple[float, int, int]], width: int, gpn: int) -> int:
    """Lowest slot with ``width`` free contiguous GPUs (0 when none: bars then overlap)."""
    busy = [False] * gpn
    for _, slot, w in active:
        for s in range(slot, min(gpn, slot + w)):
            busy[s] = True
    for s in range(gpn - width + 1):
        if not any(busy[s : s + width]):
            return s
    return 0


def headline(results: Any) -> alt.VConcatChart:
    """Two or more runs at a glance on Ai2's headline metrics, with Ai2's reported values marked."""
    rs = as_results(results)
    rows = [{"run": r.run, **r.metrics()} for r in rs]
    metrics = pd.DataFrame(rows)
    return alt.vconcat(
        _headline_fractions(rs, metrics),
        alt.hconcat(_headline_debug(rs, metrics), _headline_preemptions(rs, metrics)),
    ).properties(
        title=alt.Title(
            "Headline metrics (reporting window)",
            subtitle="black ticks: what Ai2 reported after moving to impactful scheduling",
        )
    )


_FRACTIONS = {
    m: metric_label(m)
    for m in ("impact", "impact_useful", "occupancy", "utilization", "unallocated_share")
}


#: Width of a value label ("97%") of the headline fractions, with its gap, in shares of the axis.
LABEL_SPAN = 0.08


def _headline_fractions(rs: list, metrics: pd.DataFrame) -> alt.LayerChart:
    """Grouped bars of the four fractions, Ai2's value as a tick."""
    long = metrics.melt(
        id_vars=["run"],
        value_vars=[m for m in _FRACTIONS if m in metrics],
        var_name="metric",
        value_name="value",
    ).dropna(subset=["value"])
    long["label"] = long["metric"].map(_FRACTIONS)
    long["label_x"] = _clear_of_ticks(long)
    refs = pd.DataFrame(
        [
            {"label": _FRACTIONS[m], "ref": v, "text": f"Ai2 {v:.0%}"}
            for m, v in AI2_REFERENCE.items()
            if m in _FRACTIONS
        ]
    )
    y = alt.Y("label:N", sort=list(_FRACTIONS.values()), title=None)
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X(
                "value:Q", title="share", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])
            ),
            y=y,
            yOffset=alt.YOffset("run:N", sort=_runs(rs)),
            color=_run_color(rs),
            tooltip=["run:N", "label:N", alt.Tooltip("value:Q", format=".1%")],
        )
    )
    text = bars.mark_text(align="left", dx=4, fontSize=10).encode(
        x="label_x:Q", text=alt.Text("value:Q", format=".0%")
    )
    ref = (
        alt.Chart(refs)
        .mark_tick(color="black", thickness=2)
        .encode(x="ref:Q", y=y, tooltip=[alt.Tooltip("text:N", title="reference")])
    )
    return alt.LayerChart(layer=[bars, text, ref]).properties(
        width=WIDTH - 220, height=22 * len(rs) * len(_FRACTIONS) + 20
    )


def _clear_of_ticks(long: pd.DataFrame) -> pd.Series:
    """Where each bar's value label starts: at the bar's end, or just past Ai2's tick when the
    label would cover it."""
    refs = {_FRACTIONS[m]: v for m, v in AI2_REFERENCE.items() if m in _FRACTIONS}
    ref = long["label"].map(refs)
    covers = (long["value"] <= ref) & (ref < long["value"] + LABEL_SPAN)
    return long["value"].where(~covers, ref)


def _headline_debug(rs: list, metrics: pd.DataFrame) -> alt.LayerChart:
    """Debug jobs' p90 wait, log scale, with Ai2's before (about 2 h) and after (30 s)."""
    key = "wait_p90_s.debug"
    table = pd.DataFrame(
        {"run": metrics["run"], "wait_s": metrics.get(key, pd.Series(dtype=float))}
    )
    table = table.dropna(subset=["wait_s"])
    table = table.assign(
        wait=table["wait_s"].map(fmt_duration), wait_s=table["wait_s"].clip(lower=WAIT_FLOOR_S)
    )
    refs = pd.DataFrame(
        {
            "ref": [AI2_REFERENCE[key], AI2_LEGACY_DEBUG_P90_S],
            "text": ["Ai2 after: 30 s", "Ai2 before: ~2 h"],
        }
    )
    hi = max(AI2_LEGACY_DEBUG_P90_S, float(table["wait_s"].max()) if len(table) else 0.0)
    x = alt.X(
        "wait_s:Q",
        scale=alt.Scale(type="log", domain=[WAIT_FLOOR_S, hi * 2]),
        axis=_duration_axis(WAIT_FLOOR_S, hi * 2, "debug jobs: p90 wait (log; <1 s at 1 s)"),
    )
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=x,
            x2=alt.X2(datum=WAIT_FLOOR_S),
            y=alt.Y("run:N", sort=_runs(rs), title=None),
            color=_run_color(rs),
            tooltip=["run:N", alt.Tooltip("wait:N", title="p90 wait")],
        )
    )
    rule = (
        alt.Chart(refs)
        .mark_rule(color="black", strokeDash=[3, 2])
        .encode(x=alt.X("ref:Q"), tooltip=alt.Tooltip("text:N", title="reference"))
    )
    label = rule.mark_text(align="left", dx=2, dy=-4, fontSize=10, baseline="bottom").encode(
        y=alt.value(0), text="text:N"
    )
    return alt.LayerChart(layer=[bars, rule, label]).properties(
        width=(WIDTH - 200) // 2, height=26 * len(rs) + 10
    )


def _headline_preemptions(rs: list, metrics: pd.DataFrame) -> alt.Chart:
    """Preemptions in the window, per run, with GPU-hours lost in the tooltip."""
    table = metrics.reindex(columns=["run", "preemptions", "lost_gpu_hours"])
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X("preemptions:Q", title="preemptions", axis=count_axis()),
            y=alt.Y("run:N", sort=_runs(rs), title=None),
            color=_run_color(rs),
            tooltip=[
                "run:N",
                "preemptions:Q",
                alt.Tooltip("lost_gpu_hours:Q", title="GPU-hours lost", format=".1f"),
            ],
        )
        .properties(width=(WIDTH - 200) // 2, height=26 * len(rs) + 10)
    )


# ---------------------------------------------------------------- planned maintenance


def maintenance(results: Any) -> alt.HConcatChart:
    """How long each policy took to free the nodes announced for maintenance (one tick per node,
    the deadline dashed) and what it cost: GPU-hours of work lost to evictions and GPU-hours the
    closed nodes stood idle before going down."""
    rs = as_results(results)
    nodes = _table(rs, "maintenance")
    if nodes.empty:
        raise ValueError("no run has a maintenance plan (SimConfig.maintenance)")
    nodes = nodes.assign(
        free_h=nodes["free_h"].fillna(
            nodes["run"].map({r.run: r.config.horizon_s / 3600.0 for r in rs})
            - nodes["announced_s"] / 3600.0
        ),
        deadline_h=(nodes["down_s"] - nodes["announced_s"]) / 3600.0,
    )
    plan = {w.label(i): w for r in rs for i, w in enumerate(r.config.maintenance)}
    deadlines = pd.DataFrame(
        {
            "window": list(plan),
            "deadline_h": [w.down_h - w.announce_h for w in plan.values()],
        }
    )
    y = alt.Y("run:N", sort=_runs(rs), title=None)
    ticks = (
        alt.Chart(nodes)
        .mark_tick(thickness=2, size=18)
        .encode(
            x=alt.X("free_h:Q", title="hours from the announcement until the node is free"),
            y=y,
            color=_run_color(rs),
            tooltip=[
                "run:N",
                "window:N",
                "node:Q",
                alt.Tooltip("free_h:Q", title="hours to free", format=".2f"),
                alt.Tooltip("evicted:Q", title="jobs evicted"),
            ],
        )
    )
    rules = (
        alt.Chart(deadlines)
        .mark_rule(strokeDash=[6, 4], color="#444")
        .encode(
            x="deadline_h:Q",
            tooltip=["window:N", alt.Tooltip("deadline_h:Q", title="deadline (h)")],
        )
    )
    label = (
        alt.Chart(deadlines)
        .mark_text(align="left", dx=4, dy=-6, color="#444", fontSize=11)
        .encode(x="deadline_h:Q", y=alt.value(0), text=alt.value("deadline"))
    )
    spread = (
        alt.layer(ticks, rules, label)
        .properties(width=(WIDTH - 160) // 2, height=30 * len(rs) + 20)
        .properties(title="Time to free each announced node (one tick per node)")
    )
    costs = (
        nodes.groupby("run", sort=False)[["evicted_lost_gpu_hours", "idle_gpu_hours"]]
        .sum()
        .rename(
            columns={
                "evicted_lost_gpu_hours": "work lost to evictions",
                "idle_gpu_hours": "closed nodes idle before going down",
            }
        )
        .reset_index()
        .melt("run", var_name="cost", value_name="gpu_hours")
    )
    costs = costs[  # (nodes that go down as soon as they are empty never stand idle)
        (costs["cost"] != "closed nodes idle before going down") | (costs["gpu_hours"] > 0).any()
    ]
    bars = (
        alt.Chart(costs)
        .mark_bar()
        .encode(
            x=alt.X("gpu_hours:Q", title="GPU-hours"),
            y=alt.Y("cost:N", title=None),
            yOffset=alt.YOffset("run:N", sort=_runs(rs)),
            color=_run_color(rs),
            tooltip=[
                "run:N",
                "cost:N",
                alt.Tooltip("gpu_hours:Q", title="GPU-hours", format=".1f"),
            ],
        )
        .properties(width=(WIDTH - 160) // 2 - 60, height=24 * 2 * len(rs) + 20)
        .properties(title="What the maintenance cost")
    )
    return alt.hconcat(spread, bars).properties(
        title=alt.Title(
            "Planned maintenance: how long until the nodes are free, and at what cost",
            subtitle="Jobs still on a node at the deadline are evicted (or waited for, as planned).",
        )
    )


# ---------------------------------------------------------------- fleets (several clusters in one run)

#: What ``fleet`` draws per cluster by default: the pyramid's shares, the p90 wait of all jobs
#: (in hours) and the backlog at the end.
FLEET_METRICS = (
    "occupancy",
    "utilization",
    "impact",
    "impact_useful",
    "wait_p90_s.all",
    "queued_at_end",
)
#: Behind the organisation's row (``fleet``) and its panels (``cluster_series``).
ORGANISATION_FILL = "#ececec"
#: The organisation in axis labels and headers.
ORGANISATION_TEXT = "organisation"
#: Rows ``cluster_series`` may embed, over every run and cluster: its buckets are sized to fit.
FLEET_SERIES_ROWS = 600
_IS_ORGANISATION = f"datum.value == '{ORGANISATION}'"
_ORGANISATION_LABEL = f"{_IS_ORGANISATION} ? '{ORGANISATION_TEXT}' : datum.label"


def _fleet_results(results: Any, what: str) -> list:
    """``as_results``, refusing a run of one cluster (it has no clusters to compare)."""
    rs = as_results(results)
    single = [r.run for r in rs if not r.config.clusters]
    if single:
        raise ValueError(
            f"{what} draws fleets, and run(s) {single} have one cluster (config.clusters is "
            "empty): simulate several, e.g. SimConfig(clusters='a:88,b:128'), or compare layouts "
            "with impactlab.compare_fleets"
        )
    return rs


def _cluster_order(clusters: pd.Series) -> list[str]:
    """The clusters in the order the runs list them, the organisation last."""
    names = [c for c in dict.fromkeys(clusters.astype(str)) if c != ORGANISATION]
    return [*names, ORGANISATION]


def _cluster_axis(**kwargs: Any) -> alt.Axis:
    """A cluster axis with the organisation's label in bold and in words."""
    return alt.Axis(
        labelExpr=_ORGANISATION_LABEL,
        labelFontWeight={
            "condition": {"test": _IS_ORGANISATION, "value": "bold"},
            "value": "normal",
        },
        **kwargs,
    )


FleetKind = Literal["share", "hours", "count", "number"]
#: How ``fleet`` writes a value beside its bar, per kind of metric.
_FLEET_TEXT = {"share": "{:.1%}", "hours": "{:,.1f} h", "count": "{:,.0f}", "number": "{:,.4g}"}


def _fleet_metric(metric: str) -> tuple[float, str, str, FleetKind]:
    """How ``fleet`` draws a metric: divisor to its unit, panel title, axis title and its kind
    (a share is drawn in %, from 0 to 1; a duration in hours; a count on whole numbers)."""
    if _is_duration(metric):
        return 3600.0, metric_title(metric, "h"), "hours", "hours"
    if _is_share(metric):
        return 1.0, metric_title(metric), "share", "share"
    info = METRIC_INFO.get(metric)
    unit = info.unit if info is not None else ""
    kind: FleetKind = "count" if unit in ("jobs", "count", "flag") else "number"
    return 1.0, metric_title(metric), unit or "value", kind


def fleet(
    results: Any, metrics: Sequence[str] = FLEET_METRICS, columns: int = 2
) -> alt.ConcatChart:
    """A fleet's headline metrics per cluster, one panel per metric (each in its unit): a bar per
    cluster and run (colour: run), the organisation last, in bold on a grey band (the fleet as
    one: ratios of sums, not means of the clusters). For one fleet result or several (layouts
    from ``compare_fleets``, or policies); refuses a run of one cluster."""
    rs = _fleet_results(results, "charts.fleet")
    metrics = list(metrics)
    if not metrics:
        raise ValueError("charts.fleet: no metrics to draw")
    table = _table(rs, "by_cluster")
    unknown = [m for m in metrics if m not in table.columns]
    if unknown:
        raise ValueError(
            f"charts.fleet: no metric(s) {unknown} in by_cluster(); e.g. {', '.join(FLEET_METRICS)}"
        )
    order = _cluster_order(table["cluster"])
    parts = []
    for metric in metrics:
        per, title, _, kind = _fleet_metric(metric)
        values = pd.to_numeric(table[metric], errors="coerce") / per
        parts.append(
            pd.DataFrame(
                {
                    "run": table["run"],
                    "cluster": table["cluster"].astype(str),
                    "gpus": table["gpus"].astype(int),
                    "metric": metric,
                    "label": title,
                    "value": values,
                    "text": values.map(
                        lambda v, f=_FLEET_TEXT[kind]: "n/a" if pd.isna(v) else f.format(v)
                    ),
                }
            )
        )
    data = pd.concat(parts, ignore_index=True)
    cell = (WIDTH - 110 * columns) // max(columns, 1)
    height = len(order) * (14 * len(rs) + 10)
    panels = [_fleet_panel(rs, metric, order, cell, height) for metric in metrics]
    return alt.ConcatChart(concat=panels, columns=columns, data=data).properties(
        title=alt.Title(
            "Clusters of the fleet: headline metrics per cluster (reporting window)",
            subtitle=[
                "one bar per run; in bold on a grey band: the organisation, every cluster as one",
                "(ratios of sums over the fleet, not means of the clusters' values)",
            ],
        )
    )


def _fleet_panel(
    rs: list, metric: str, order: list[str], width: int, height: int
) -> alt.LayerChart:
    """One metric of ``fleet``: bars per cluster and run, their values beside them."""
    _, title, axis_title, kind = _fleet_metric(metric)
    share = kind == "share"
    clusters = alt.Scale(domain=order, paddingInner=0.2, paddingOuter=0.1)
    y = alt.Y("cluster:N", sort=order, scale=clusters, title=None, axis=_cluster_axis())
    scale = alt.Scale(domain=[0, 1]) if share else alt.Scale(zero=True)
    axis = (
        alt.Axis(format="%", title=axis_title)
        if share
        else count_axis(title=axis_title)
        if kind == "count"
        else alt.Axis(title=axis_title)
    )
    mine = alt.Chart().transform_filter(alt.datum.metric == metric)
    band = (
        mine.transform_filter((alt.datum.cluster == ORGANISATION) & (alt.datum.run == rs[0].run))
        .mark_rect(color=ORGANISATION_FILL)
        .encode(y=y, x=alt.value(0), x2=alt.value("width"))
    )
    rule = band.mark_rule(color="#888").encode(
        y=alt.Y("cluster:N", sort=order, scale=clusters, bandPosition=0)
    )
    bars = mine.mark_bar().encode(
        x=alt.X("value:Q", scale=scale, axis=axis),
        y=y,
        yOffset=alt.YOffset("run:N", sort=_runs(rs)),
        color=_run_color(rs),
        tooltip=[
            "run:N",
            alt.Tooltip("cluster:N", title="cluster"),
            alt.Tooltip("gpus:Q", title="GPUs", format=",d"),
            alt.Tooltip("label:N", title="metric"),
            alt.Tooltip("text:N", title="value"),
        ],
    )
    text = bars.mark_text(align="left", dx=3, fontSize=9, color="#333").encode(
        text="text:N", color=alt.value("#333")
    )
    return alt.LayerChart(layer=[band, rule, bars, text]).properties(
        width=width, height=height, title=title
    )


def cluster_series(results: Any) -> alt.HConcatChart:
    """A fleet's clusters over time: occupancy (left) and jobs queued (right), time-averaged per
    bucket, one row of panels per cluster and the organisation's last, a line per run. Buckets
    are sized so that every run and cluster fit in ``FLEET_SERIES_ROWS`` rows; refuses a run of
    one cluster."""
    rs = _fleet_results(results, "charts.cluster_series")
    lines = sum(len(r.config.clusters) + 1 for r in rs)
    horizon = max(r.config.horizon_s for r in rs)
    bucket_s = bucket_size(horizon, max(1, FLEET_SERIES_ROWS // lines))
    table = _table(rs, "cluster_series", bucket_s=bucket_s).drop(columns="policy")
    table = table.assign(day=_day(table["t_h"]))
    order = _cluster_order(table["cluster"])
    warm = pd.concat([_warmup_rows(rs, cluster=c) for c in order], ignore_index=True)
    warm = warm.drop_duplicates(["cluster", "day_end"])
    organisation = pd.DataFrame({"cluster": [ORGANISATION]})
    data = _layers(series=table, warmup=warm, organisation=organisation)
    tooltip = [
        "run:N",
        alt.Tooltip("cluster:N", title="cluster"),
        alt.Tooltip("t_h:Q", title="bucket start (h)", format=".0f"),
        alt.Tooltip("occupancy:Q", title="occupancy", format=".1%"),
        alt.Tooltip("queued_jobs:Q", title="jobs queued (mean)", format=",.1f"),
        alt.Tooltip("running_gpus:Q", title="GPUs held (mean)", format=",.0f"),
        alt.Tooltip("healthy_gpus:Q", title="healthy GPUs (mean)", format=",.0f"),
        alt.Tooltip("gpus:Q", title="GPUs", format=",d"),
    ]
    occupancy = alt.Y(
        "occupancy:Q",
        title=None,
        axis=alt.Axis(format="%", tickCount=3),
        scale=alt.Scale(domain=[0, 1]),
    )
    queued = alt.Y("queued_jobs:Q", title=None, axis=alt.Axis(tickCount=3))
    panels = [
        _cluster_panel(rs, data, order, y, tooltip, title, labels)
        for y, title, labels in (
            (occupancy, "occupancy (share of healthy GPUs held)", True),
            (queued, "jobs queued (mean; each row its own scale)", False),
        )
    ]
    return alt.hconcat(*panels).properties(
        title=alt.Title(
            f"Occupancy and queue per cluster over time (mean per {fmt_duration(bucket_s)})",
            subtitle=[
                "one line per run; last, on grey: the organisation, every cluster as one (GPUs held",
                "over healthy GPUs of the fleet, queues summed); jobs queued: each row its own scale",
                _WARMUP_NOTE,
            ],
        )
    )


def _cluster_panel(
    rs: list,
    data: pd.DataFrame,
    order: list[str],
    y: alt.Y,
    tooltip: list,
    title: str,
    labels: bool,
) -> alt.FacetChart:
    """One measure of ``cluster_series``: a row per cluster (its own y scale), a line per run."""
    shade = (
        _only("organisation")
        .mark_rect(color=ORGANISATION_FILL)
        .encode(x=alt.value(0), x2=alt.value("width"), y=alt.value(0), y2=alt.value("height"))
    )
    line = (
        _only("series")
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(x=_time_x(), y=y, color=_run_color(rs), tooltip=tooltip)
    )
    header = alt.Header(
        labelAngle=0,
        labelAlign="left",
        labelExpr=_ORGANISATION_LABEL,
        labelFontWeight="bold",
        labels=labels,
    )
    return (
        alt.LayerChart(layer=[shade, _warmup_band(), line, _warmup_end()], data=data)
        .properties(width=(WIDTH - 240) // 2, height=70)
        .facet(row=alt.Row("cluster:N", sort=order, title=None, header=header))
        .resolve_scale(y="independent")
        .properties(title=alt.Title(title, fontSize=12))
    )


# ---------------------------------------------------------------- sweeps (impactlab.summarise_sweep)

_STAT_COLUMNS = ("label", "point_key", "metric", "n", "mean", "std", "ci_low", "ci_high")
#: The quantity of a quantile metric (``wait_p90_s``, ``queued_p50_s``), in words.
_QUANTITIES = {"wait": "wait", "queued": "time queued"}
#: Units a duration is drawn in: the largest one that its largest value reaches.
_DURATION_UNITS = ((3600.0, "h"), (60.0, "min"), (1.0, "s"))
#: Point shapes, one per value of a swept knob (repeated past eight values).
SHAPES = (
    "circle",
    "square",
    "triangle-up",
    "diamond",
    "cross",
    "triangle-down",
    "triangle-right",
    "triangle-left",
)


def metric_title(metric: str, unit: str = "") -> str:
    """A metric in words, with ``unit`` in brackets: ``wait_p90_s.size_9-64`` -> "p90 wait, jobs
    of 9-64 GPUs"."""
    head, _, group = metric.partition(".")
    words = head.split("_")
    if len(words) == 3 and words[0] in _QUANTITIES and words[2] == "s":
        text = f"{words[1]} {_QUANTITIES[words[0]]}"
    else:
        text = metric_label(head)
    text = f"{text}, {_group_words(group)}" if group else text
    return f"{text} ({unit})" if unit else text


def _group_words(group: str) -> str:
    """The jobs a metric's suffix names: ``size_9-64`` -> "jobs of 9-64 GPUs", ``debug`` -> "debug jobs"."""
    size = group.removeprefix("size_")
    if size != group:
        return "1-GPU jobs" if size == "1" else f"jobs of {size} GPUs"
    return "all jobs" if group == "all" else f"{group} jobs"


def knob_title(name: str) -> str:
    """A swept parameter in words with its unit, as the Explorer labels it (``cap_hours`` ->
    "protection cap (h)"); not a declared parameter: its name in words."""
    try:
        return label(parameter(name))
    except ValueError:  # ParamError: not a declared parameter (a custom column)
        return name.replace("_", " ")


def _is_duration(metric: str) -> bool:
    return metric.partition(".")[0].endswith("_s")


def _is_share(metric: str) -> bool:
    """A metric that cannot exceed 1."""
    return metric in _FRACTIONS or metric == "jain" or metric.endswith("_share")


def _duration_unit(seconds: pd.Series) -> tuple[float, str]:
    """Seconds per unit, and the unit, to draw these durations in (hours for hours-long waits)."""
    top = float(seconds.abs().max()) if seconds.notna().any() else 0.0
    return next(((d, u) for d, u in _DURATION_UNITS if top >= d), _DURATION_UNITS[-1])


def _sweep_metric(stats: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, str]:
    """The rows of one metric, durations in readable units and the 95% interval clipped to what
    the metric can be (a wait is never below 0 s, a share never above 1), and its axis title."""
    rows = _sweep_rows(stats, metric)
    per, unit = _duration_unit(rows["mean"]) if _is_duration(metric) else (1.0, "")
    values = rows[["mean", "ci_low", "ci_high"]] / per
    lower = 0.0 if (values["mean"].dropna() >= 0).all() else None
    upper = 1.0 if _is_share(metric) else None
    ci = values[["ci_low", "ci_high"]].clip(lower=lower, upper=upper)
    return rows.assign(mean=values["mean"], **ci), metric_title(metric, unit)


def spans_orders(values: pd.Series, floor: float = 0.0) -> bool:
    """Whether the positive ``values`` span LOG_SPAN or more, the smallest taken as at least
    ``floor`` (where smaller ones are drawn): then a log axis shows them all."""
    positive = values[values > 0]
    return len(positive) > 1 and positive.max() >= LOG_SPAN * max(positive.min(), floor)


def sweep_lines(stats: pd.DataFrame, x: str, metric: str, log_x: bool = False) -> alt.LayerChart:
    """One metric of a sweep against the knob ``x``: mean across seeds with its 95% CI band, one
    line per policy (and per value of the other swept columns). A policy that does not declare
    ``x`` (legacy has no cap) is drawn flat and dashed across the range, as a reference."""
    table, y_title = _sweep_metric(stats, metric)
    if x not in table.columns:
        raise ValueError(f"{x!r} is not a config column of the sweep")
    legend = _series_title(table, exclude=(x,))
    table = table.assign(series=_series(table, exclude=(x,)))
    log_y = spans_orders(table["mean"])
    table = _floored(table) if log_y else table
    numeric = pd.api.types.is_numeric_dtype(table[x]) and table[x].notna().any()
    table = _flat_references(table, x) if numeric else table.dropna(subset=[x])
    colors = _series_colors(table)
    kind = "Q" if numeric else "N"
    values = (
        sorted(table.loc[~table["reference"], x].dropna().unique().tolist()) if numeric else None
    )
    scale = (
        alt.Scale(type="log" if log_x else "linear", nice=False, zero=False)
        if numeric
        else alt.Undefined
    )
    axis = alt.Axis(values=values) if values and len(values) <= 12 else alt.Axis()
    x_title = knob_title(x)
    base = alt.Chart(table[["series", x, "mean", "ci_low", "ci_high", "n", "reference"]]).encode(
        x=alt.X(f"{x}:{kind}", title=x_title, scale=scale, axis=axis),
        color=alt.Color(
            "series:N",
            title=legend,
            scale=alt.Scale(domain=list(colors), range=list(colors.values())),
            legend=alt.Legend(symbolOpacity=1),  # not the band's paler colour
        ),
        detail="series:N",
    )
    axis_title, y_scale = _value_axis(y_title, log_y)
    band = base.mark_area(opacity=0.18).encode(
        y=alt.Y("ci_low:Q", title=axis_title, scale=y_scale if log_y else alt.Undefined),
        y2="ci_high:Q",
    )
    dash = alt.condition(alt.datum.reference, alt.value([5, 3]), alt.value([1, 0]))
    line = base.mark_line().encode(y="mean:Q", strokeDash=dash)
    tooltip = [
        alt.Tooltip("series:N", title=legend or "series"),
        alt.Tooltip(f"{x}:{kind}", title=x_title),
        alt.Tooltip("mean:Q", title=y_title, format=",.4~g"),
        alt.Tooltip("ci_low:Q", title="95% CI low", format=",.4~g"),
        alt.Tooltip("ci_high:Q", title="95% CI high", format=",.4~g"),
        alt.Tooltip("n:Q", title="seeds"),
    ]
    points = (
        base.transform_filter(~alt.datum.reference)
        .mark_point(filled=True)
        .encode(y="mean:Q", tooltip=tooltip)
    )
    title = alt.Title(
        f"{metric_title(metric)} against {x_title}",
        subtitle="mean across seeds, band: 95% confidence interval",
    )
    return alt.LayerChart(layer=[band, line, points]).properties(
        width=WIDTH - 200, height=260, title=title
    )


def tradeoff(
    stats: pd.DataFrame,
    x_metric: str,
    y_metric: str,
    color: str | None = None,
    shape: str | None = None,
) -> alt.LayerChart:
    """Two metrics of a sweep against each other, one point per config (mean across seeds) with
    95% CI bars both ways: colour says one swept knob (the first, or ``color``), shape another
    (the second, or ``shape``); a label beside each point says any further one."""
    xs, x_title = _sweep_metric(stats, x_metric)
    ys, y_title = _sweep_metric(stats, y_metric)
    table = xs.merge(
        ys[["point_key", "mean", "ci_low", "ci_high", "n"]], on="point_key", suffixes=("_x", "_y")
    )
    roles = _grid_roles(table, color, shape)
    table = table.assign(
        colour=_knob_text(table, roles[0]),
        shape=_knob_text(table, roles[1]),
        others=_others_text(table, exclude=roles),
    )
    logs = {axis: spans_orders(table[f"mean_{axis}"]) for axis in "xy"}
    for axis in (a for a, log in logs.items() if log):
        table = _floored(table, f"_{axis}")
    x_title, x_scale = _value_axis(x_title, logs["x"])
    y_title, y_scale = _value_axis(y_title, logs["y"])
    x = alt.X("mean_x:Q", title=x_title, scale=x_scale)
    y = alt.Y("mean_y:Q", title=y_title, scale=y_scale)
    base = alt.Chart(table).encode(color=_tradeoff_color(table, roles[0]))
    layers = [
        base.mark_rule(opacity=0.45).encode(
            x=alt.X("ci_low_x:Q", title=x_title, scale=x_scale), x2="ci_high_x:Q", y=y
        ),
        base.mark_rule(opacity=0.45).encode(
            x=x, y=alt.Y("ci_low_y:Q", title=y_title, scale=y_scale), y2="ci_high_y:Q"
        ),
        base.mark_point(filled=True, size=80, opacity=1).encode(
            x=x,
            y=y,
            shape=_tradeoff_shape(table, roles[1]),
            tooltip=_tradeoff_tooltip(roles, x_title, y_title),
        ),
    ]
    if table["others"].any():  # colour and shape say two knobs; a label says the rest
        layers.append(
            base.mark_text(align="left", dx=7, dy=-7, fontSize=10).encode(x=x, y=y, text="others:N")
        )
    title = alt.Title(
        f"Trade-off: {metric_title(y_metric)} against {metric_title(x_metric)}",
        subtitle="one point per config: mean across seeds; bars: 95% confidence intervals",
    )
    return alt.LayerChart(layer=layers).properties(width=WIDTH - 200, height=300, title=title)


def _grid_roles(
    table: pd.DataFrame, color: str | None, shape: str | None
) -> tuple[str | None, str | None]:
    """The swept columns that colour and shape a trade-off's points: as asked, else the first
    two that vary (policy first)."""
    for name in (color, shape):
        if name is not None and name not in table.columns:
            raise ValueError(f"{name!r} is not a config column of the sweep")
    varied = _varied(table, exclude=())
    color = color or next((c for c in varied if c != shape), None)
    shape = shape or next((c for c in varied if c != color), None)
    return color, shape


def _knob_text(table: pd.DataFrame, column: str | None) -> pd.Series:
    """A swept column's values as legend text ("1", "impactful"; "n/a" where a policy lacks it)."""
    if column is None:
        return pd.Series("", index=table.index)
    return table[column].map(lambda v: "n/a" if pd.isna(v) else _show(v))


def _others_text(table: pd.DataFrame, exclude: Sequence[str | None]) -> pd.Series:
    """Per row: the swept values that neither colour nor shape says ("window (days) 3")."""
    varied = _varied(table, exclude)
    return (
        table.apply(
            lambda row: ", ".join(
                f"{knob_title(c)} {_show(row[c])}" for c in varied if pd.notna(row[c])
            ),
            axis=1,
        )
        if len(table)
        else pd.Series(dtype=str)
    )


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _knob_order(table: pd.DataFrame, column: str) -> list[str]:
    """A swept column's legend text, in the order of its values ("n/a" last)."""
    values = table[column].dropna().unique().tolist()
    try:
        values = sorted(values)
    except TypeError:  # mixed types: keep the sweep's order
        pass
    missing = ["n/a"] if table[column].isna().any() else []
    return [_show(v) for v in values] + missing


def _tradeoff_color(table: pd.DataFrame, column: str | None) -> alt.Color | alt.ColorValue:
    """Colour by one swept knob: policies in their colours, other values in distinct ones."""
    if column is None:
        policy = str(table["policy"].iloc[0]) if "policy" in table else ""
        return alt.ColorValue(POLICY_COLORS.get(policy, POLICY_COLORS["impactful"]))
    order = _knob_order(table, column)
    if column == "policy":
        palette = list(_policy_colors(pd.Series(order)).values())
    else:
        palette = [FALLBACK_COLORS[i % len(FALLBACK_COLORS)] for i in range(len(order))]
    scale = alt.Scale(domain=order, range=palette)
    legend = alt.Legend(symbolOpacity=1)  # not the error bars' paler colour
    return alt.Color("colour:N", title=knob_title(column), sort=order, scale=scale, legend=legend)


def _tradeoff_shape(table: pd.DataFrame, column: str | None) -> alt.Shape | alt.ShapeValue:
    """Shape by a second swept knob, one shape per value."""
    if column is None:
        return alt.ShapeValue("circle")
    order = _knob_order(table, column)
    shapes = [SHAPES[i % len(SHAPES)] for i in range(len(order))]
    scale = alt.Scale(domain=order, range=shapes)
    return alt.Shape("shape:N", title=knob_title(column), sort=order, scale=scale)


def _value_axis(title: str, log: bool) -> tuple[str, alt.Scale]:
    """A value axis's title and scale: logarithmic (and saying so) or linear, not from zero."""
    if log:
        return f"{title}, log scale", alt.Scale(type="log")
    return title, alt.Scale(zero=False)


def _floored(table: pd.DataFrame, suffix: str = "") -> pd.DataFrame:
    """For a log axis: means and interval ends (``mean{suffix}``, ...) under a third of the
    smallest positive mean drawn at that floor (a log axis has no 0)."""
    means = table[f"mean{suffix}"]
    floor = float(means[means > 0].min()) / 3.0
    columns = [f"{c}{suffix}" for c in ("mean", "ci_low", "ci_high")]
    return table.assign(**{c: table[c].clip(lower=floor) for c in columns})


def _tradeoff_tooltip(
    roles: tuple[str | None, str | None], x_title: str, y_title: str
) -> list[Any]:
    knobs = [
        alt.Tooltip(f"{field}:N", title=knob_title(column))
        for field, column in zip(("colour", "shape"), roles)
        if column is not None
    ]
    return [
        alt.Tooltip("label:N", title="config"),
        *knobs,
        alt.Tooltip("mean_x:Q", title=x_title, format=",.4~g"),
        alt.Tooltip("mean_y:Q", title=y_title, format=",.4~g"),
        alt.Tooltip("n_x:Q", title="seeds"),
    ]


def _sweep_rows(stats: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of one metric of a ``summarise_sweep`` table."""
    missing = sorted({"point_key", "metric", "mean", "ci_low", "ci_high"} - set(stats.columns))
    if missing:
        raise ValueError(f"not a summarise_sweep table: no column(s) {missing}")
    rows = stats[stats["metric"] == metric]
    if rows.empty:
        raise ValueError(
            f"no metric {metric!r} in the table; it has {sorted(stats['metric'].unique())[:8]}..."
        )
    return rows.reset_index(drop=True)


def _varied(table: pd.DataFrame, exclude: Sequence[str | None]) -> list[str]:
    """The swept config columns (those that vary), but ``exclude``, in the table's order."""
    config = [c for c in table.columns if c not in _STAT_COLUMNS and not c.endswith(("_x", "_y"))]
    return [c for c in config if c not in exclude and table[c].astype(str).nunique() > 1]


def _series(table: pd.DataFrame, exclude: Sequence[str | None], empty: str = "all") -> pd.Series:
    """Per row: the swept config values other than ``exclude`` ("impactful, 3"), in the order of
    ``_series_title``."""
    varied = _varied(table, exclude)

    def name(row: pd.Series) -> str:
        return ", ".join(_show(row[c]) for c in varied if not pd.isna(row[c])) or empty

    return table.apply(name, axis=1) if len(table) else pd.Series(dtype=str)


def _series_title(table: pd.DataFrame, exclude: Sequence[str | None]) -> str | None:
    """What ``_series`` names, in words ("policy, window (days)"), for a legend's title."""
    return ", ".join(knob_title(c) for c in _varied(table, exclude)) or None


def _flat_references(table: pd.DataFrame, x: str) -> pd.DataFrame:
    """Series without a value of ``x`` (a policy that lacks the knob) as flat lines over its range."""
    has = table[x].notna()
    lo, hi = (table.loc[has, x].min(), table.loc[has, x].max()) if has.any() else (0, 1)
    flat = table[~has]
    ends = pd.concat([flat.assign(**{x: lo}), flat.assign(**{x: hi})], ignore_index=True)
    ends = ends.assign(series=ends["series"] + " (no such knob)")
    return pd.concat(
        [table[has].assign(reference=False), ends.assign(reference=True)], ignore_index=True
    )


def _policy_colors(policies: pd.Series) -> dict[str, str]:
    """Each policy's fixed colour; custom policies take fallback colours in order."""
    extra = iter(FALLBACK_COLORS * 3)
    return {p: POLICY_COLORS.get(p) or next(extra) for p in dict.fromkeys(policies.astype(str))}


def _series_colors(table: pd.DataFrame) -> dict[str, str]:
    """A series that is one policy keeps the policy's colour; other series take fallback colours."""
    extra = iter(FALLBACK_COLORS * 3)
    out = {}
    for series, policy in dict.fromkeys(zip(table["series"], table.get("policy", table["series"]))):
        plain = series.split(" (no ")[0] == policy and policy in POLICY_COLORS
        out[series] = POLICY_COLORS[policy] if plain else next(extra)
    return out
