"""The Explorer: an ipywidgets app over the library, the same in JupyterLab and under Voila.

Every control is generated from a declared parameter (``impactlab.parameters()``): a slider
for a bounded number, a checkbox for a flag, a dropdown for choices, a text box for the rest
(empty = none). A change re-runs at once when the last runs suggest it takes about a second
or less; otherwise the Run button lights up. A run is config -> ``compare`` -> charts, cached
on the config, so going back to a setting is instant. Bad input shows a message, not a
traceback. A URL query string (``?gpus=88&policy=legacy&cap_hours=4``) presets the app.
"""

from __future__ import annotations

import html
import logging
import math
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import altair as alt
import ipywidgets as w
from traitlets import TraitError

from ..analysis.explain import story_choices
from ..analysis.results import SimResult
from ..base.config import SimConfig, fleet_from, fleet_text, parameters
from ..base.files import DATA, find_input, shipped_files
from ..base.params import Param, ParamError, label
from ..base.registry import policy_names
from ..base.units import DAY_S
from ..inputs.budgets import BudgetError
from ..inputs.scenario import ScenarioError, load_scenario
from ..inputs.trace import TraceError
from ..inputs.workload import Inputs, fit, inputs_key, prepare
from ..runs.simulate import compare
from . import charts
from .charts import picture

log = logging.getLogger(__name__)

#: Scenario files shipped with the repository (absent in a bare wheel install: synthetic only).
SYNTHETIC = "synthetic"
#: Controls always on show, by section; every other declared parameter is under "More knobs".
MAIN = {"Cluster and workload": ("gpus", "days", "demand", "seed"), "Policy": ("policy",)}
HIDDEN = {"trace_path", "trace_format", "budgets_path", "gpus_per_node", "unknown_projects"}
#: Tabs of the chart area: title -> chart function of a list of results.
TABS: dict[str, Callable[[list[SimResult]], alt.TopLevelSpec]] = {
    # (a fleet's headline is per cluster, with the organisation's row)
    "Headline": lambda rs: charts.fleet(rs) if rs[0].config.clusters else charts.headline(rs),
    "Waits": charts.waits,
    "Shares": lambda rs: charts.shares(rs, level="program"),
    "Owed GPUs": charts.owed_split,
    "Pyramid": charts.pyramid,
    "Preemptions": charts.preemptions,
    "Queue": charts.queue,
    "Gang size": charts.fragmentation,
    "Gantt": lambda rs: charts.gantt(rs[:1]),
}
#: Query keys added by the Jupyter server or Binder, never presets.
SERVER_KEYS = frozenset({"token"})
ERRORS = (ParamError, ScenarioError, TraceError, BudgetError, ValueError, OSError)


def scenarios() -> dict[str, Path]:
    """Shipped scenario files by name (``workshop-88`` -> impactlab/data/scenario-workshop-88.yaml)."""
    return {p.stem.removeprefix("scenario-"): p for p in shipped_files("scenario-*.yaml")}


def default_config() -> SimConfig:
    """The workshop scenario (88 GPUs, 7 days) when it is shipped, else the same size synthetic."""
    path = scenarios().get("workshop-88")
    return load_scenario(path).config if path else SimConfig(gpus=88, days=7.0)


#: Width of a control's label (its text must fit: ``label`` keeps labels short).
LABEL_WIDTH = "150px"


def tooltip(param: Param) -> str:
    """A control's tooltip: the parameter's name (as in presets, the CLI and scenario files) and help."""
    return f"{param.name}: {param.describe()}"


def control(param: Param, value: Any) -> w.Widget:
    """The widget for one declared parameter, showing ``value``: labelled in words with its unit,
    the parameter's name and help in the tooltip; as wide as its column."""
    common = {
        "description": label(param),
        "tooltip": tooltip(param),
        "style": {"description_width": LABEL_WIDTH},
        "layout": w.Layout(width="auto"),
    }
    span = param.slider_range
    if param.type is bool:
        widget = w.Checkbox(value=bool(value), indent=False, **common)
    elif param.choices is not None:
        options = [("none", None)] * param.nullable + [(str(c), c) for c in param.choices]
        widget = w.Dropdown(options=options, value=value, **common)
    elif param.type in (int, float) and span is not None and value is not None:  # none: a text box
        kind = w.IntSlider if param.type is int else w.FloatSlider
        lo, hi = min(span[0], value), max(span[1], value)
        step = param.step or (1 if param.type is int else (hi - lo) / 100)
        widget = kind(value=value, min=lo, max=hi, step=step, continuous_update=False, **common)
    else:
        widget = w.Text(
            value="" if value is None else f"{value:g}" if isinstance(value, float) else str(value),
            placeholder="none",
            continuous_update=False,
            **common,
        )
    widget.add_class(f"impactlab-param-{param.name}")
    return widget


def widen(slider: w.IntSlider | w.FloatSlider, value: float) -> None:
    """Widen ``slider`` by whole steps to reach ``value`` (which the parameter allows beyond the
    slider's usual span): ipywidgets would clamp it to the span without a word."""
    step = slider.step or 1
    if value < slider.min:
        slider.min = slider.min - math.ceil((slider.min - value) / step) * step
    if value > slider.max:
        slider.max = slider.max + math.ceil((value - slider.max) / step) * step


def trace_file(text: str) -> Path:
    """The trace a path typed into the Explorer means (``find_input``): the path itself,
    relative to the working directory, else the shipped file of that bare name; a file, or a
    folder (a PAI 2020 trace is one; the loader names any other as not a trace). A ParamError
    naming the path and where it was looked for when there is no such file."""
    found = find_input(text)
    if found.is_file() or found.is_dir():  # (a folder: the loader says if its format allows it)
        return found.resolve()
    given = Path(text)
    where = f"looked for {given if given.is_absolute() else Path.cwd() / given}"
    if not given.is_absolute() and len(given.parts) == 1:  # a bare name: the shipped files too
        where += f", then among the shipped files in {DATA}"
    raise ParamError(f"trace file {text!r} not found ({where})")


def read(param: Param, widget: w.Widget) -> Any:
    """The parameter value a control holds (text parsed; empty text is none)."""
    return param.parse(widget.value) if isinstance(widget, w.Text) else widget.value


#: How a stale chart looks (the class is set on the tabs while the charts do not match the controls).
STALE_STYLE = "<style>.impactlab-stale { opacity: 0.35; filter: grayscale(100%); }</style>"

#: Fitting a laptop screen (1024 px and up) without sideways scrolling: controls as wide as their
#: column; the charts column wraps under the controls when narrower than 520 px; every tab shows
#: its whole title (the tab bar wraps when they do not fit in one row); a chart wider than its
#: tab is scaled down to fit (Vega's SVG has a viewBox), never cut off or scrolled.
FIT_STYLE = """<style>
.impactlab-explorer .impactlab-columns { flex-wrap: wrap; }
.impactlab-explorer .impactlab-charts.jupyter-widget-tab > .lm-TabBar { height: auto; min-height: 0; }
.impactlab-explorer .impactlab-charts.jupyter-widget-tab > .lm-TabBar > .lm-TabBar-content { flex-wrap: wrap; }
.impactlab-explorer .impactlab-charts.jupyter-widget-tab > .lm-TabBar .lm-TabBar-tab {
  flex: 0 0 auto; min-width: 0; padding: 0 7px; }
.impactlab-explorer .impactlab-charts.jupyter-widget-tab > .widget-tab-contents { padding: 8px; }
.impactlab-explorer .impactlab-charts .vega-embed { max-width: 100%; box-sizing: border-box; }
.impactlab-explorer .impactlab-charts .vega-embed .marks { max-width: 100%; height: auto; }
</style>"""


def parse_query(query: str) -> tuple[dict[str, str], dict[str, str]]:
    """A URL query string split into declared parameters and Explorer options
    (``scenario``, ``compare`` = the second policy, ``tab``). Keys the servers add on their way
    (Binder's redirect adds ``token``; Voila reads ``voila-*``) are not presets."""
    options: dict[str, str] = {}
    params: dict[str, str] = {}
    for key, value in parse_qsl(query.lstrip("?"), keep_blank_values=True):
        if key in SERVER_KEYS or key.startswith("voila-"):
            continue
        (options if key in ("scenario", "compare", "tab") else params)[key] = value
    return params, options


def under_voila() -> bool:
    """Whether this kernel serves a Voila page (a preheated kernel, or one Voila started for
    a request: it names itself in ``SERVER_SOFTWARE``)."""
    return os.environ.get("VOILA_PREHEAT") == "True" or os.environ.get(
        "SERVER_SOFTWARE", ""
    ).startswith("voila")


def preset_from_voila() -> str:
    """The query string of the page this kernel serves under Voila ("" when it has none), or ""
    outside Voila (JupyterLab, nbval, nbconvert): the notebook's preset.

    A preheated Voila kernel (``voila.json``: ``preheat_kernel``; Voila sets ``VOILA_PREHEAT`` in
    its kernels) runs the notebook before anyone opens the page, so everything above this call
    (imports, ``charts.enable_offline()``) is done by then; here it waits until a page is
    requested and returns that page's query string. Elsewhere it returns at once: Voila's
    ordinary kernels start with the query string as ``QUERY_STRING``; other kernels have none.
    """
    if os.environ.get("VOILA_PREHEAT") == "True":
        from voila.utils import get_query_string  # voila is only there when Voila runs us

        return get_query_string() or ""
    return os.environ.get("QUERY_STRING", "")


@dataclass
class ExplorerRun:
    """One run of the Explorer (what ``Explorer.run`` returns and its cache keeps): the results
    of the policies it compared, and how long simulating and the whole run took."""

    results: list[SimResult]
    sim_s: float
    wall_s: float


class Explorer(w.VBox):
    """Pick a cluster, a workload and policy knobs; see waits, preemptions and shares."""

    def __init__(
        self,
        config: SimConfig | None = None,
        preset: str | Mapping[str, Any] | None = None,
        auto_s: float = 1.5,
        cache_size: int = 24,
        run: bool = True,
    ) -> None:
        super().__init__()
        self.add_class("impactlab-explorer")
        self.auto_s, self.cache_size = auto_s, cache_size
        self.base = config or default_config()
        self.scenario = (
            "workshop-88" if config is None and "workshop-88" in scenarios() else SYNTHETIC
        )
        self.runs = 0
        self.results: list[SimResult] = []
        self._cache: OrderedDict[tuple, ExplorerRun] = OrderedDict()
        self._inputs: tuple[tuple, Inputs] | None = None
        self._holding = False
        # Seconds and GPU-days of the runs so far: their ratio is the speed an estimate uses
        # (a first guess until a run is done).
        self._spent = (0.0, 0.0)
        self._build()
        self._note: str | None = None
        self._note = self._apply_preset(preset) if preset else None  # shown with the first run
        if run:
            self.run()
        elif self._note:
            self._show_message(self._note)

    def __repr__(self) -> str:
        """What a page that shows no widgets (a stored notebook not yet run, a notebook
        viewer) prints in the app's place: one line saying how to get it."""
        return (
            "impactlab Explorer: run this notebook (or `impactlab app`) to use its controls "
            "and charts"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, and for a page that cannot show widgets (a stored notebook opened
        before running it, a notebook viewer) a picture of its headline chart beside the line
        above. Under Voila, which always shows the widget, no picture is drawn (it would
        delay the app's first chart)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None or not self.results or under_voila():
            return bundle
        try:
            shown = picture(TABS["Headline"](self.results).to_dict())
        except ValueError:  # (a chart that cannot be drawn: the line alone)
            return bundle
        return {**bundle, "image/png": shown}

    @classmethod
    def from_query(cls, query: str | None, **kwargs: Any) -> Explorer:
        """An Explorer preset by a URL query string (Voila passes it as QUERY_STRING)."""
        return cls(preset=query or None, **kwargs)

    # ----- layout ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.status = w.HTML("ready", layout=w.Layout(margin="4px 0"))
        self.status.add_class("impactlab-status")
        self.bar = w.FloatProgress(
            min=0.0, max=1.0, description="simulating", layout=w.Layout(display="none")
        )
        self.bar.add_class("impactlab-progress")
        self.message = w.HTML(layout=w.Layout(display="none"))
        self.message.add_class("impactlab-message")
        self.warnings = w.HTML(layout=w.Layout(display="none"))  # what the headline may hide
        self.warnings.add_class("impactlab-warnings")
        self.shown = w.HTML(STALE_STYLE)  # which settings the charts show; marked when stale
        self.shown.add_class("impactlab-shown")
        self.rule = w.HTML(
            f"<small>A change runs by itself when the run is expected to take under "
            f"{self.auto_s:g} s; a longer one waits for <b>Run</b> and shows its progress.</small>"
        )
        self.rule.add_class("impactlab-rule")
        self.run_button = w.Button(
            description="Run", icon="play", tooltip="simulate with these settings"
        )
        self.run_button.add_class("impactlab-run")
        self.run_button.on_click(lambda _: self.run())
        self.workload = w.Dropdown(
            options=[SYNTHETIC, *scenarios(), "file"],
            value=self.scenario,
            description="workload",
            layout=w.Layout(width="auto"),
            style={"description_width": LABEL_WIDTH},
        )
        self.workload.add_class("impactlab-param-workload")
        self.file = w.Text(
            placeholder="path to a trace file",
            description="trace file",
            continuous_update=False,
            layout=w.Layout(width="auto", display="none"),
            style={"description_width": LABEL_WIDTH},
        )
        self.fleet = w.Text(
            value=fleet_text(self.base.clusters),
            placeholder="name:GPUs, comma-separated",
            description="clusters",
            tooltip="clusters: the fleet's clusters as name:GPUs (e.g. a:88,b:256; name:GPUs:x+y "
            "also runs the jobs named x or y). A synthetic workload is built for the layout shown; "
            "to replay one workload on several layouts, use impactlab.compare_fleets",
            continuous_update=False,
            layout=w.Layout(width="auto", display="flex" if self.base.clusters else "none"),
            style={"description_width": LABEL_WIDTH},
        )
        self.fleet.add_class("impactlab-param-clusters")
        self.upload = w.FileUpload(
            accept=".csv,.parquet,.json,.txt", multiple=False, layout=w.Layout(display="none")
        )
        self.compare_box = w.Checkbox(value=False, description="compare with", indent=False)
        self.compare_box.add_class("impactlab-compare")
        self.policy_b = w.Dropdown(
            options=policy_names(), value="legacy", layout=w.Layout(width="160px")
        )
        self.policy_b.add_class("impactlab-param-policy_b")
        self.knob_box, self.more_box, self.budget_box = w.VBox(), w.VBox(), w.VBox()
        self.tabs = w.Tab(children=[w.HTML("not drawn yet") for _ in TABS], titles=tuple(TABS))
        self.tabs.add_class("impactlab-charts")
        self._jcharts: dict[int, alt.JupyterChart] = {}
        self._drawn: set[int] = set()  # tabs showing the current results
        self.controls: dict[str, tuple[Param, w.Widget]] = {}
        self._make_controls(self.base)
        sections = w.Accordion(
            children=[self.knob_box, self.budget_box, self.more_box],
            titles=("Policy knobs", "Budget shares", "More knobs"),
        )
        left = w.VBox(
            [
                w.HTML("<b>Workload</b>"),
                self.workload,
                self.file,
                self.upload,
                self.fleet,
                *self._widgets(MAIN["Cluster and workload"]),
                w.HTML("<b>Policy</b>"),
                *self._widgets(MAIN["Policy"]),
                w.HBox([self.compare_box, self.policy_b]),
                self.run_button,
                self.rule,
                sections,
            ],
            layout=w.Layout(flex="0 0 350px", width="350px", min_width="0"),
        )
        left.add_class("impactlab-controls")
        self.stories = JobStories()
        why = w.Accordion(children=[self.stories], titles=("Why is my job waiting?",))
        right = w.VBox(
            [self.status, self.bar, self.message, self.warnings, self.shown, self.tabs, why],
            layout=w.Layout(flex="1 1 520px", min_width="0"),
        )  # under 520 px: below the controls
        right.add_class("impactlab-main")
        columns = w.HBox([left, right])
        columns.add_class("impactlab-columns")
        self.children = [w.HTML(FIT_STYLE, layout=w.Layout(display="none")), columns]
        self.workload.observe(self._on_workload, names="value")
        self.file.observe(self._changed, names="value")
        self.fleet.observe(self._on_fleet, names="value")
        self._show_fleet()
        self.upload.observe(self._on_upload, names="value")
        self.compare_box.observe(self._changed, names="value")
        self.policy_b.observe(self._changed, names="value")
        self.tabs.observe(lambda _: self._draw(), names="selected_index")

    def _on_fleet(self, _change: Any = None) -> None:
        """A new layout: the (disabled) GPU slider shows its size, then the usual rule runs."""
        try:
            total = sum(c.gpus for c in fleet_from(self.fleet.value.strip()))
        except ParamError:
            total = 0  # (the run's config names the problem)
        slider = self.controls["gpus"][1]
        if total and slider.min <= total <= slider.max:
            with self.hold():
                slider.value = total
        self._changed()

    def _show_fleet(self) -> None:
        """A fleet shows its clusters (editable) and its size as their sum (not a slider's)."""
        fleet = bool(self.base.clusters) and self.scenario != "file"
        self.fleet.layout.display = "flex" if fleet else "none"
        self.controls["gpus"][1].disabled = fleet

    def _widgets(self, names: tuple[str, ...]) -> list[w.Widget]:
        return [self.controls[n][1] for n in names]

    def _make_controls(self, config: SimConfig) -> None:
        """(Re)build every control from the declarations, showing ``config``'s values."""
        flat = config.flat()
        main = {n for names in MAIN.values() for n in names}
        run_params = [p for p in parameters(config.policy) if p.name not in HIDDEN]
        for param in run_params:
            widget = control(param, flat.get(param.name, param.default))
            if param.name == "policy":
                widget = w.Dropdown(
                    options=policy_names(),
                    value=config.policy,
                    description=label(param),
                    tooltip=tooltip(param),
                    layout=w.Layout(width="auto"),
                    style={"description_width": LABEL_WIDTH},
                )
                widget.add_class("impactlab-param-policy")
            widget.observe(
                self._on_policy if param.name == "policy" else self._changed, names="value"
            )
            self.controls[param.name] = (param, widget)
        self.knob_box.children = [wd for p, wd in self.controls.values() if p.policies]
        self.more_box.children = [
            wd for p, wd in self.controls.values() if not p.policies and p.name not in main
        ]

    # ----- events ----------------------------------------------------------------------------
    def _changed(self, _change: Any = None) -> None:
        if self._holding:
            return
        try:
            config = self.config()
            estimate = self.estimate_s(config)  # (a trace file is read for its span)
        except ERRORS as err:
            self._show_message(str(err))
            self._mark_shown(stale=True)
            return
        self._show_message("")
        if self._key(config) in self._cache or estimate <= self.auto_s:
            self.run(config)
        else:
            self._set_status(f"about {estimate:.0f} s to simulate: press Run", "impactlab-ready")
            self.run_button.button_style = "warning"
            self._mark_shown(stale=True)

    def _on_policy(self, change: Any) -> None:
        """A new policy brings its own knobs; the cluster and workload controls stay."""
        for name in [n for n, (p, _) in self.controls.items() if p.policies]:
            del self.controls[name]
        knobs = [p for p in parameters(change["new"]) if p.policies]
        for param in knobs:
            widget = control(param, param.default)
            widget.observe(self._changed, names="value")
            self.controls[param.name] = (param, widget)
        self.knob_box.children = [self.controls[p.name][1] for p in knobs]
        self._changed()

    def _on_workload(self, change: Any) -> None:
        name = change["new"]
        self.file.layout.display = self.upload.layout.display = "flex" if name == "file" else "none"
        self.scenario = name
        if name in scenarios():
            self.base = load_scenario(scenarios()[name]).config
            # every run control the scenario sets (its generator's knobs too), not only those
            # on show: a control left at its old value would override the scenario's
            shown = {
                k: v
                for k, v in self.base.flat().items()
                if k in self.controls and not self.controls[k][0].policies and k != "policy"
            }
            self.set_values(shown, run=False)
            with self.hold():
                self.fleet.value = fleet_text(self.base.clusters)
        self._show_fleet()
        if name != "file" or self.file.value:
            self._changed()
        else:  # waiting for a trace file: the charts show the workload picked before
            self._mark_shown(stale=True)

    def _on_upload(self, change: Any) -> None:
        """Keep an uploaded trace in a private temp folder (never in the repository) and use it."""
        files = change["new"]
        if not files:
            return
        upload = files[0]
        folder = Path(tempfile.mkdtemp(prefix="impactlab-upload-"))
        path = folder / Path(upload["name"]).name
        path.write_bytes(bytes(upload["content"]))
        self.file.value = str(path)

    # ----- the run -----------------------------------------------------------------------------
    def config(self) -> SimConfig:
        """The config the controls describe (raises ParamError on a bad value)."""
        values = {
            name: read(param, widget)
            for name, (param, widget) in self.controls.items()
            if not param.policies or read(param, widget) != param.default
        }  # knobs: changes only
        base = self.base
        if self.scenario == "file":
            values.pop("days")  # a trace is replayed over its whole span
            text = self.file.value.strip()
            if not text:
                raise ParamError("give a trace file path (or upload one)")
            # checked here, before any estimate or run: a missing file is a message at once
            base = base.with_params(trace_path=str(trace_file(text)), budgets_path=None)
        elif self.scenario == SYNTHETIC:
            base = base.with_params(trace_path=None, budgets_path=None)
        if base.clusters and self.scenario != "file":  # a fleet: its size is its clusters'
            values.pop("gpus", None)
            base = base.with_params(clusters=self.fleet.value.strip() or base.clusters)
        elif base.clusters:
            base = replace(base, clusters=())
        return base.with_params({**values, **self._shares()})

    def policies(self) -> list[str]:
        """The policies of a run: the chosen one, and the compared one in compare mode."""
        first = self.controls["policy"][1].value
        second = self.policy_b.value
        return [first, second] if self.compare_box.value and second != first else [first]

    def _key(self, config: SimConfig) -> tuple:
        return (config, tuple(self.policies()))

    def estimate_s(self, config: SimConfig) -> float:
        """Expected seconds for a run, from the speed of the runs so far (GPU-days x policies);
        a trace replayed whole counts its own span (it is read, once, to know it)."""
        days = config.days
        if days is None and config.trace_path:
            days = fit(config, self._inputs_for(replace(config, budget_shares={}))).days
        return self.rate_s() * config.gpus * (days or 14.0) * config.demand * len(self.policies())

    def rate_s(self) -> float:
        """Seconds per GPU-day of the runs so far, all of them together: the whole time over the
        whole work, so that a tiny run (whose fixed costs dominate) barely moves it."""
        wall, gpu_days = self._spent
        return max(wall / gpu_days, 1e-7) if gpu_days > 0 else 1e-6

    def _learn(self, wall_s: float, gpu_days: float) -> None:
        """Count a run of ``gpu_days`` that took ``wall_s`` in ``rate_s``."""
        self._spent = (self._spent[0] + wall_s, self._spent[1] + gpu_days)

    def run(self, config: SimConfig | None = None) -> ExplorerRun | None:
        """Simulate now with the controls' settings (``config``: already read from them), show
        the charts; None when input is bad."""
        began = time.perf_counter()
        try:
            config = config or self.config()
            key = self._key(config)
            cached = key in self._cache
            self._set_status("running...", "impactlab-busy")
            if not cached:
                self._mark_shown(stale=True, running=True)
            outcome = self._cache[key] if cached else self._simulate(config)
        except ERRORS as err:
            self._show_message(str(err))
            self._set_status(f"run {self.runs}: not run, see the message", "impactlab-error")
            self._mark_shown(stale=True)
            return None
        self._remember(key, outcome)
        self.results = outcome.results
        self.runs += 1
        self._show_message(self._note or "")
        self._note = None
        self._mark_shown(stale=False)
        self._show_warnings([text for r in self.results for text in r.warnings])
        self.run_button.button_style = ""
        self._draw(replace_all=True)
        self.stories.show(self.results)
        self._set_status(
            self._summary(outcome, cached, time.perf_counter() - began), "impactlab-ready"
        )
        return outcome

    def _simulate(self, config: SimConfig) -> ExplorerRun:
        began = time.perf_counter()
        plain = self._inputs_for(replace(config, budget_shares={}))
        shares = self._shares()  # after a new workload, only boxes of its own tree count
        config = replace(
            config, budget_shares={k.removeprefix("share."): v for k, v in shares.items()}
        )
        inputs = Inputs(plain.trace, plain.tree.with_shares(config.budget_shares), plain.provenance)
        self._horizon_s = fit(config, inputs).horizon_s  # a trace's span: known once it is read
        slow = self.estimate_s(config) > self.auto_s
        self.bar.value, self.bar.layout.display = 0.0, "flex" if slow else "none"
        try:
            results = compare(
                config, self.policies(), inputs=inputs, progress=self._advance if slow else None
            )
        finally:
            self.bar.layout.display = "none"
        wall = time.perf_counter() - began
        self._learn(wall, config.gpus * self._horizon_s / DAY_S * config.demand * len(results))
        return ExplorerRun(results, sum(r.sim_wall_s for r in results), wall)

    def _advance(self, t_s: float) -> None:
        """Progress of a slow run, in simulated time (each policy fills the bar once)."""
        self.bar.value = min(t_s / self._horizon_s, 1.0)

    def _inputs_for(self, config: SimConfig) -> Inputs:
        """The workload (without share overrides), built once per workload setting."""
        key = inputs_key(config)
        if self._inputs is None or self._inputs[0] != key:
            self._inputs = (key, prepare(config))
            self._budget_editor(self._inputs[1])
        return self._inputs[1]

    def _remember(self, key: tuple, outcome: ExplorerRun) -> None:
        self._cache[key] = outcome
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _summary(self, outcome: ExplorerRun, cached: bool, total_s: float) -> str:
        first = outcome.results[0]
        names = " vs ".join(r.run for r in outcome.results)
        how = "from cache" if cached else f"simulated in {outcome.sim_s:.2f} s"
        outside = sum(first.unknown_projects.values())
        note = (
            f"; {outside:,} jobs of projects outside the budget tree ran unallocated"
            if outside
            else ""
        )
        return (
            f"run {self.runs}: {names} on {first.config.gpus} GPUs, {first.config.days:g} days: "
            f"{len(first.trace):,} jobs; {how}, shown in {total_s:.2f} s{note}"
        )

    # ----- charts ------------------------------------------------------------------------------
    def _draw(self, replace_all: bool = False) -> None:
        """Draw the selected tab's chart (the others are drawn when opened)."""
        if replace_all:
            self._drawn = set()
        index = self.tabs.selected_index or 0
        if not self.results or index in self._drawn:
            return
        try:
            chart = list(TABS.values())[index](self.results)
        except ValueError as err:  # e.g. a Gantt window with nothing in it
            self._show_message(f"{list(TABS)[index]}: {err}")
            return
        if index in self._jcharts:  # replaced in place: the view keeps its place on the page
            self._jcharts[index].chart = chart
        else:  # a JupyterChart is a widget itself: no Output widget (and its print capture) needed
            self._jcharts[index] = alt.JupyterChart(chart)
            children = list(self.tabs.children)
            children[index] = self._jcharts[index]
            self.tabs.children = children
        self._drawn.add(index)

    # ----- budgets -----------------------------------------------------------------------------
    def _budget_editor(self, inputs: Inputs) -> None:
        """One share box per budget node of the workload, indented under its parent; edits
        made for nodes that the new tree also has are kept."""
        kept = self._shares()
        tree = inputs.tree
        self._own_shares = dict(zip(tree.names[1:], tree.share[1:]))
        boxes = []
        for node in range(1, tree.size):
            name, depth = tree.names[node], len(tree.path(node)) - 2
            box = w.BoundedFloatText(
                value=kept.get(f"share.{name}", tree.share[node]),
                min=1e-6,
                max=1e9,
                description=name,
                tooltip="share among its siblings",
                style={"description_width": "120px"},
                layout=w.Layout(width=f"{300 - 16 * depth}px", margin=f"0 0 0 {16 * depth}px"),
            )
            box.add_class(f"impactlab-share-{name}")
            box.observe(self._changed, names="value")
            boxes.append(box)
        with self.hold():
            self.budget_box.children = boxes

    def _shares(self) -> dict[str, float]:
        """Share overrides (``share.<node>``): the boxes that differ from the workload's own tree."""
        own = getattr(self, "_own_shares", {})
        return {
            f"share.{b.description}": b.value
            for b in self.budget_box.children
            if b.description in own and b.value != own[b.description]
        }

    # ----- presets and programmatic use --------------------------------------------------------
    def hold(self) -> _Hold:
        """A context in which control changes do not trigger runs."""
        return _Hold(self)

    def set_values(self, values: Mapping[str, Any], run: bool = True) -> None:
        """Set controls by parameter name (values as Python objects or text), then re-run once."""
        with self.hold():
            if "policy" in values:
                if values["policy"] not in policy_names():
                    raise ParamError(
                        f"policy: no policy {values['policy']!r}; known: "
                        + ", ".join(policy_names())
                    )
                self.controls["policy"][1].value = values["policy"]  # rebuilds the knob controls
            for name, value in values.items():
                if name == "policy":
                    continue
                if name == "clusters" and self.base.clusters:
                    self.fleet.value = str(value)
                    continue
                if name.startswith("share."):
                    self._set_share(name.removeprefix("share."), value)
                    continue
                if name not in self.controls:
                    raise ParamError(
                        f"{name}: not a control of the Explorer for policy "
                        f"{self.controls['policy'][1].value!r}"
                    )
                param, widget = self.controls[name]
                parsed = param.parse(value)
                if isinstance(widget, (w.IntSlider, w.FloatSlider)) and parsed is not None:
                    widen(widget, parsed)
                widget.value = (
                    ("" if parsed is None else str(parsed))
                    if isinstance(widget, w.Text)
                    else parsed
                )
        if run:
            self.run()

    def set(self, **values: Any) -> None:
        """Set controls by parameter name and re-run: ``app.set(gpus=128, policy="legacy")``."""
        self.set_values(values)

    def _set_share(self, node: str, value: Any) -> None:
        for box in self.budget_box.children:
            if box.description == node:
                try:
                    share = float(value)
                except (TypeError, ValueError):
                    share = math.nan
                if not box.min <= share <= box.max:  # (the box would clamp it without a word)
                    raise ParamError(
                        f"share.{node}: a share is a number from {box.min:g} to {box.max:g}, "
                        f"got {value!r}"
                    )
                box.value = share
                return
        raise ParamError(f"share.{node}: no budget node {node!r} in this workload")

    def _apply_preset(self, preset: str | Mapping[str, Any]) -> str | None:
        """Apply a query string or mapping key by key; a key that cannot be applied is left at its
        default and named, with the valid choices where there is a list. Returns what to show."""
        params, options = parse_query(preset) if isinstance(preset, str) else (dict(preset), {})
        problems = []
        for key, widget in (("scenario", self.workload), ("compare", self.policy_b)):
            if options.get(key):
                problems += self._try_preset(
                    key, options[key], lambda v, w=widget: setattr(w, "value", v)
                )
        if options.get("compare") and self.policy_b.value == options["compare"]:
            with self.hold():
                self.compare_box.value = True
        if options.get("tab"):
            problems += self._try_preset("tab", options["tab"], self._select_tab)
        ordered = sorted(
            params.items(), key=lambda kv: kv[0] != "policy"
        )  # policy decides the knobs
        for key, value in ordered:
            if not key.startswith("share."):
                problems += self._try_preset(
                    key, value, lambda v, k=key: self.set_values({k: v}, run=False)
                )
        shares = [(key, value) for key, value in ordered if key.startswith("share.")]
        if shares:  # (their boxes come with the workload: build it now, as the run would)
            try:
                self._inputs_for(replace(self.config(), budget_shares={}))
            except ERRORS:
                problems.append(f"{', '.join(k for k, _ in shares)}: not applied")
            else:
                for key, value in shares:
                    problems += self._try_preset(
                        key, value, lambda v, k=key: self.set_values({k: v}, run=False)
                    )
        try:
            self.config()  # the preset as a whole (a knob may not suit the policy)
        except ERRORS as err:
            problems.append(str(err))
        if not problems:
            return None
        return f"preset {preset!r}: " + "; ".join(problems) + ". Ran with the defaults for those."

    def _try_preset(self, key: str, value: str, apply: Any) -> list[str]:
        """Apply one preset key; the problem, with the valid choices, if it cannot be applied."""
        try:
            with self.hold():
                apply(value)
        except (*ERRORS, TraitError) as err:
            widget = (
                self.controls[key][1]
                if key in self.controls
                else {"scenario": self.workload, "compare": self.policy_b}.get(key)
            )
            choices = [str(o) for o in getattr(widget, "options", ())] or (
                list(TABS) if key == "tab" else []
            )
            if choices:
                return [f"{key}={value!r} is not one of {', '.join(choices)}"]
            return [str(err)]
        return []

    def _select_tab(self, name: str) -> None:
        if name not in TABS:
            raise TraitError(name)
        self.tabs.selected_index = list(TABS).index(name)

    # ----- status and messages -----------------------------------------------------------------
    def _set_status(self, text: str, state: str) -> None:
        for name in ("impactlab-busy", "impactlab-ready", "impactlab-error"):
            self.status.remove_class(name)
        self.status.add_class(state)
        self.status.value = html.escape(text)

    def _show_message(self, text: str) -> None:
        self.message.value = (
            f"<span style='color:#b00020'>{html.escape(text)}</span>" if text else ""
        )
        self.message.layout.display = "block" if text else "none"
        if text:
            self._set_status(f"run {self.runs}: not run, see the message", "impactlab-error")

    def _mark_shown(self, stale: bool, running: bool = False) -> None:
        """Say which settings the charts show; grey them out when the controls moved on (a change
        waiting for Run, a bad value, a run in progress)."""
        if not self.results:
            self.shown.value = STALE_STYLE
            return
        first = self.results[0].config
        what = (
            f"run {self.runs}: {' vs '.join(r.run for r in self.results)} on {first.gpus} GPUs, "
            f"{first.days:g} days"
        )
        if stale:
            why = (
                "a new run is in progress"
                if running
                else "the controls have changed since: press Run"
            )
            text = f"&#9888; The charts still show {html.escape(what)}; {why}."
            self.tabs.add_class("impactlab-stale")
        else:
            text = f"The charts show {html.escape(what)}."
            self.tabs.remove_class("impactlab-stale")
        self.shown.value = f"{STALE_STYLE}<small>{text}</small>"

    def _show_warnings(self, texts: list[str]) -> None:
        """The runs' warnings (thrashing, a backlog, jobs that gave up, impact counting lost
        work), above the charts."""
        items = "".join(f"<li>{html.escape(t)}</li>" for t in texts)
        self.warnings.value = (
            f"<ul style='color:#8a5300;margin:2px 0'>{items}</ul>" if texts else ""
        )
        self.warnings.layout.display = "block" if texts else "none"


class JobStories(w.VBox):
    """Pick a run and a job from a table (the most preempted and longest waiting first); read
    its story (``SimResult.explain``). Nothing is replayed until a job is picked."""

    def __init__(self) -> None:
        super().__init__()
        self.add_class("impactlab-stories")
        self.results: list[SimResult] = []
        self.run = w.Dropdown(description="run", layout=w.Layout(width="260px"))
        self.table = w.Select(rows=8, layout=w.Layout(width="100%"))
        self.table.add_class("impactlab-story-table")
        self.story = w.HTML()
        self.story.add_class("impactlab-story")
        self.children = [self.run, self.table, self.story]
        self.run.observe(lambda _: self._list(), names="value")
        self.table.observe(lambda _: self._tell(), names="value")

    def show(self, results: list[SimResult]) -> None:
        """List the jobs of new results (the first run's, until another is picked)."""
        self.results = results
        labels = [r.run for r in results]
        with self.hold_trait_notifications():
            self.run.options = [(label, k) for k, label in enumerate(labels)]
            self.run.value = 0
        self._list()

    def _list(self) -> None:
        if not self.results or self.run.value is None:
            return
        rows = story_choices(self.results[self.run.value])
        self.table.options = [
            (
                (
                    f"{r.job_id}  {r.kind} {r.gpus} GPUs  {r.project or 'unallocated'}  waited "
                    f"{r.wait_h:g} h  preempted {r.preempts}x  {r.state}"
                ),
                r.job_id,
            )
            for r in rows.itertuples()
        ]
        self.table.value = None  # a story is told once a job is picked (a replay of the log)
        self._tell()

    def _tell(self) -> None:
        if self.table.value is None:
            self.story.value = ""
            return
        text = self.results[self.run.value].explain(self.table.value).text()
        self.story.value = f"<pre style='white-space: pre-wrap'>{html.escape(text)}</pre>"


class _Hold:
    """Suspends auto-runs while several controls change together."""

    def __init__(self, app: Explorer) -> None:
        self.app = app

    def __enter__(self) -> None:
        self.prior, self.app._holding = self.app._holding, True

    def __exit__(self, *exc: object) -> None:
        self.app._holding = self.prior
