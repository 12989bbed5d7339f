"""The Explorer as a Voila app, in a real browser: it renders, draws charts, re-runs on every
control, compares two policies, marks its charts stale while a change waits for Run, takes
presets from the URL and reports bad ones politely, and asks other machines for nothing (the
server is started as ``impactlab app``, whose page template drops Voila's CDN links).

Every wait is on the app's own state (the status line's ``impactlab-ready`` class and text, the
chart's drawn marks), never on a sleep. The first test measures how long a visitor of an idle
server waits for the first chart (the server preheats a kernel: voila.json). The next six are
steps on one page (each page load takes a kernel and a first run): they render, check that every
request stayed on this machine (an expected failure today: Voila's template links a CDN), move a
slider, change the policy, compare two policies, then make a change that waits for Run, in that
order, each asserting its own step. Every test ends with ``assert_clean_page``."""

from __future__ import annotations

import time

import pytest

from impactlab.widgets import default_config

pytestmark = pytest.mark.browser

STATUS = ".impactlab-status"
#: The line saying which settings the charts show (and that they are stale, when they are).
SHOWN = ".impactlab-shown"
READY = ".impactlab-status.impactlab-ready"
MARKS = ".impactlab-charts .vega-embed .marks"
#: A drawn chart of the charts area (vega-embed draws SVG or canvas).
CHART = ".impactlab-charts .vega-embed svg, .impactlab-charts .vega-embed canvas"
#: Seconds from opening the app to its first chart that fail the test: the goal is 4 s on an idle
#: 2-core machine (a preheated kernel has imported impactlab and bundled the chart library; what
#: is left is the first run and the page); CI machines are noisy, hence the margin.
FIRST_CHART_S = 8.0
#: Fingerprint of everything drawn in the charts area: SVG markup, canvas pixels.
CHART_SIGNATURE = """() => Array.from(document.querySelectorAll('.impactlab-charts .vega-embed .marks'))
    .map(m => m.tagName === 'CANVAS' ? m.toDataURL() : m.outerHTML).join('|')"""


def open_app(page, voila_url: str, query: str = ""):
    """Load the Explorer and wait until its first run is drawn."""
    page.goto(f"{voila_url}/{'?' + query if query else ''}")
    page.wait_for_selector(".impactlab-explorer")
    page.wait_for_selector(READY)
    page.wait_for_selector(MARKS)
    return page


def status(page) -> str:
    """The status line's text."""
    return page.inner_text(STATUS)


def rerun(page, action) -> str:
    """Do ``action()``, wait until the app ran again and redrew its charts; the new status text.

    The Explorer re-runs by itself when it expects a run to take about a second; on a slower
    machine it asks for the Run button instead (the button turns to a warning): press it then.
    """
    before, drawn = status(page), page.evaluate(CHART_SIGNATURE)
    action()
    wait_for_new_status(page, before)
    if page.locator(".impactlab-run.mod-warning").count():
        asked = status(page)
        page.click(".impactlab-run")
        wait_for_new_status(page, asked)
    page.wait_for_function(f"(drawn) => ({CHART_SIGNATURE})() !== drawn", arg=drawn)
    return status(page)


def wait_for_new_status(page, before: str) -> None:
    """Wait until the status line is ready again and says something other than ``before``."""
    page.wait_for_function(
        """([sel, before]) => { const s = document.querySelector(sel);
            return s && s.classList.contains('impactlab-ready') && s.innerText !== before; }""",
        arg=[STATUS, before],
    )


def control(name: str) -> str:
    """Selector of the control of one declared parameter."""
    return f".impactlab-param-{name}"


def set_slider(page, name: str, value: float) -> None:
    """Type an exact value into an ipywidgets 8 slider's readout (sliders are noUiSlider)."""
    readout = page.locator(f"{control(name)} .widget-readout")
    readout.fill(str(value))
    readout.press("Enter")


def other_value(page, name: str) -> int:
    """A value of a slider different from its current one, inside its range."""
    handle = page.locator(f"{control(name)} .noUi-handle")
    lo, hi, now = (float(handle.get_attribute(f"aria-value{k}")) for k in ("min", "max", "now"))
    for candidate in (64, 128, 32, 16, 256):
        if lo <= candidate <= hi and candidate != now:
            return candidate
    raise AssertionError(f"no test value fits {name} in [{lo}, {hi}]")


def selected(page, name: str) -> str:
    """The value a dropdown control shows."""
    return page.locator(f"{control(name)} select").input_value()


def options(page, name: str) -> list[str]:
    """The values a dropdown control offers."""
    return page.locator(f"{control(name)} select option").evaluate_all("os => os.map(o => o.value)")


def assert_clean_page(page) -> None:
    """No console error, no uncaught page error, and no request to another machine: not the
    page template's, not the charts' library, not a widget's, not MathJax."""
    assert page.problems == []
    assert page.outside_requests() == []
    assert page.remote_failures == []


def test_first_chart_of_a_preheated_app_within_seconds(
    page, voila_preheated, artifacts, record_property
):
    log = artifacts / "voila.log"
    preheated_before = log.read_text().count("Using pre-heated kernel")
    start = time.monotonic()
    page.goto(f"{voila_preheated}/")
    page.wait_for_selector(CHART, state="visible")
    seconds = time.monotonic() - start
    print(f"Voila Explorer, page opened to first chart: {seconds:.2f} s (goal 4 s idle)")
    record_property("seconds: Voila Explorer, page opened to first chart", seconds)
    served = log.read_text().count("Using pre-heated kernel") - preheated_before
    assert served == 1, "no preheated kernel served the page (voila.json: preheat_kernel)"
    page.wait_for_selector(READY)
    assert status(page).startswith("run 1: ")
    assert seconds < FIRST_CHART_S, f"{seconds:.1f} s from opening the app to its first chart"
    assert_clean_page(page)


@pytest.fixture(scope="module")
def app(module_page, voila_url):
    """The Explorer, loaded once with its defaults, for the steps that share it."""
    return open_app(module_page, voila_url)


def test_app_renders_with_charts(app, shot):
    page = app
    shot(page, "rendered")
    assert page.locator(MARKS).count() >= 1
    assert page.locator(".impactlab-charts .vega-embed").first.bounding_box()["height"] > 50
    assert status(page).startswith("run ")
    assert_clean_page(page)


def test_the_app_requests_nothing_outside_this_machine(app):
    """Served offline, the page must ask nothing of other machines: its scripts, styles, fonts,
    the chart library and the kernel's websocket all come from the Voila server. (Voila's own
    "lab" template links Font Awesome from a CDN; ``impactlab app`` serves a template without
    those links.)"""
    page = app
    assert page.requests, "no request recorded"
    assert any(url.startswith("ws://127.0.0.1:") for url in page.requests), "no kernel websocket"
    outside = page.outside_requests()
    assert outside == [], f"the page asked other machines for: {outside}"
    links = page.eval_on_selector_all("link[href]", "ls => ls.map(l => l.href)")
    assert [h for h in links if "cdn" in h or "fontawesome" in h] == [], links
    assert page.remote_failures == [], page.remote_failures
    assert page.problems == []


def test_slider_reruns_and_changes_chart_and_status(app, shot):
    page = app
    shot(page, "before")
    gpus = other_value(page, "gpus")
    text = rerun(page, lambda: set_slider(page, "gpus", gpus))
    shot(page, f"gpus-{gpus}")
    assert f"{gpus} GPUs" in text
    assert page.inner_text(f"{control('gpus')} .widget-readout") == str(gpus)
    assert_clean_page(page)


def test_policy_dropdown_reruns_and_changes_chart_and_status(app, shot):
    page = app
    policy = next(p for p in ("legacy", "fifo", "fairshare") if p != selected(page, "policy"))
    text = rerun(page, lambda: page.select_option(f"{control('policy')} select", policy))
    shot(page, f"policy-{policy}")
    assert policy in text
    assert selected(page, "policy") == policy
    assert_clean_page(page)


def test_compare_mode_shows_two_policies(app, shot):
    page = app
    if selected(page, "policy") == selected(page, "policy_b"):  # a step before chose it
        other = next(p for p in options(page, "policy") if p != selected(page, "policy_b"))
        rerun(page, lambda: page.select_option(f"{control('policy')} select", other))
    rerun(page, lambda: page.check(".impactlab-compare input[type=checkbox]"))
    a, b = selected(page, "policy"), selected(page, "policy_b")
    if a == b:
        b = next(p for p in options(page, "policy_b") if p != a)
        rerun(page, lambda: page.select_option(f"{control('policy_b')} select", b))
    shot(page, "compare")
    shown = status(page) + page.locator(".impactlab-charts").inner_text()
    shown += " ".join(page.locator(".impactlab-charts svg text").all_text_contents())
    assert a in shown and b in shown, f"compare mode should show {a} and {b}: {status(page)!r}"
    assert_clean_page(page)


#: The look of stale charts, as the page computes it: the charts area's opacity and filter.
STALE_LOOK = """() => { const s = getComputedStyle(document.querySelector('.impactlab-charts'));
    return {opacity: parseFloat(s.opacity), filter: s.filter}; }"""


def test_a_change_waiting_for_run_marks_the_charts_stale(app, shot):
    """A change whose run is expected to take longer than the rule under the Run button allows
    waits for Run: until then the charts are greyed out (``impactlab-stale``) and a line says
    which run, and which settings, they still show."""
    page = app
    shown_before, ran = page.inner_text(SHOWN), status(page)
    run = ran.split(":")[0]  # "run 5"
    gpus = page.inner_text(f"{control('gpus')} .widget-readout")
    assert shown_before.startswith(f"The charts show {run}: ") and f"on {gpus} GPUs" in shown_before
    assert page.evaluate(STALE_LOOK)["opacity"] == 1
    handle = page.locator(f"{control('gpus')} .noUi-handle")
    biggest = int(float(handle.get_attribute("aria-valuemax")))  # 2048: many times the last run
    set_slider(page, "gpus", biggest)
    page.wait_for_selector(".impactlab-charts.impactlab-stale")
    shot(page, f"stale-gpus-{biggest}")
    assert page.locator(".impactlab-run.mod-warning").count() == 1, (
        f"gpus={biggest} ran by itself ({status(page)!r}): no stale state to see"
    )
    rule = page.inner_text(".impactlab-rule")
    assert "waits for Run" in rule, rule  # the rule, shown under the button
    assert "press Run" in status(page)
    look = page.evaluate(STALE_LOOK)
    assert look["opacity"] < 0.5 and "grayscale" in look["filter"], look
    shown = page.inner_text(SHOWN)
    assert shown.startswith(f"\u26a0 The charts still show {run}: "), shown
    assert f"on {gpus} GPUs" in shown and f"{biggest} GPUs" not in shown
    assert "press Run" in shown
    assert_clean_page(page)


def test_query_string_presets_the_app(page, voila_url, shot):
    open_app(page, voila_url, "gpus=88&policy=legacy")
    shot(page, "preset")
    text = status(page)
    assert "legacy" in text and "88 GPUs" in text, text
    assert selected(page, "policy") == "legacy"
    assert page.inner_text(f"{control('gpus')} .widget-readout") == "88"
    assert_clean_page(page)


def test_bad_presets_show_a_message_and_the_app_runs_with_the_defaults(page, voila_url, shot):
    """An unknown policy and an out-of-range number in the URL: a message names both, lists the
    valid policies, and the app still runs and draws its charts with the defaults."""
    open_app(page, voila_url, "policy=nope&gpus=-5")
    message = page.inner_text(".impactlab-message")
    shot(page, "bad-presets")
    body = page.inner_text("body")
    assert "Traceback" not in body and "There was an error when executing" not in body
    policies = options(page, "policy")  # the kernel's policies (the tests register one more)
    assert {"legacy", "impactful", "fifo"} <= set(policies)
    assert f"policy='nope' is not one of {', '.join(policies)}" in message, message
    assert "gpus" in message and "-5" in message, message
    assert "Ran with the defaults for those" in message
    default = default_config()
    assert selected(page, "policy") == default.policy
    assert page.inner_text(f"{control('gpus')} .widget-readout") == str(default.gpus)
    text = status(page)
    assert text.startswith("run 1: ") and f"{default.policy} on {default.gpus} GPUs" in text, text
    assert page.locator(MARKS).count() >= 1
    assert_clean_page(page)


#: What of the app does not fit the window: the page's and the window's widths, the app's elements
#: whose right edge is past the window's (cut off by an inner scroller, if not by the page), the tab
#: titles and control labels shown cut, and inputs sticking out of the controls column.
FIT = """() => {
    const app = document.querySelector('.impactlab-explorer'), vw = window.innerWidth;
    const shown = e => e.getClientRects().length > 0, right = e => e.getBoundingClientRect().right;
    const name = e => e.tagName + '.' + String(e.className.baseVal ?? e.className).split(' ').join('.');
    const cut = sel => Array.from(app.querySelectorAll(sel)).filter(shown)
        .filter(e => e.scrollWidth > e.clientWidth).map(e => e.innerText);
    const column = app.querySelector('.impactlab-controls');
    return {
        scrollWidth: document.documentElement.scrollWidth, innerWidth: vw,
        outside: Array.from(app.querySelectorAll('*')).filter(shown).filter(e => right(e) > vw + 1)
            .map(e => `${name(e)} ends at ${Math.round(right(e))} px`).slice(0, 5),
        tabs: cut('.lm-TabBar-tabLabel'),
        labels: cut('.widget-inline-hbox > .widget-label'),
        sticking: Array.from(column.querySelectorAll('input, select, .widget-readout')).filter(shown)
            .filter(e => right(e) > right(column) + 1).map(name),
    };
}"""


def test_app_fits_a_1024_px_laptop_screen(page, voila_url, shot):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_app(page, voila_url)
    page.click(".impactlab-explorer .jupyter-widget-Collapse-header:has-text('More knobs')")
    page.wait_for_selector(f"{control('restart_overhead_s')} .widget-readout")
    shot(page, "1024px")
    fit = page.evaluate(FIT)
    assert fit["scrollWidth"] <= fit["innerWidth"] + 1, f"the page scrolls sideways: {fit}"
    assert fit["outside"] == [], "parts of the app are past the window's right edge"
    assert fit["tabs"] == [], "tab titles shown cut"
    assert fit["labels"] == [], "control labels shown cut"
    assert fit["sticking"] == [], "inputs stick out of the controls column"
    assert_clean_page(page)
