"""The Explorer without a browser: controls come from the declarations, a change re-runs and
replaces the charts, compare mode, presets, the cache, and messages instead of tracebacks."""

from __future__ import annotations

import html
from pathlib import Path

import altair as alt
import ipywidgets as w
import pytest

import impactlab as il
from impactlab.widgets import HIDDEN, TABS, Explorer, default_config, parse_query

SMALL = il.SimConfig(gpus=32, days=2.0, seed=1)


@pytest.fixture
def app() -> Explorer:
    """An Explorer on a small synthetic cluster, after its first run."""
    return Explorer(
        config=SMALL, auto_s=60.0
    )  # every change runs at once, however busy the machine


def spec(app: Explorer) -> dict:
    """The chart shown in the first tab, as Vega-Lite."""
    chart = app.tabs.children[0]
    assert isinstance(chart, alt.JupyterChart)
    return chart.chart.to_dict()


def test_the_app_runs_on_start_and_draws_the_first_tab(app):
    assert app.runs == 1 and len(app.results) == 1
    assert "impactlab-ready" in app.status._dom_classes
    assert app.status.value.startswith("run 1: impactful on 32 GPUs, 2 days")
    assert spec(app)["vconcat"]  # the headline chart
    assert all(isinstance(c, w.HTML) for c in app.tabs.children[1:])  # others drawn when opened


def test_every_declared_parameter_has_a_control(app):
    names = {p.name for p in il.parameters("impactful")} - HIDDEN
    assert names == set(app.controls)
    for name, (_, widget) in app.controls.items():
        assert f"impactlab-param-{name}" in widget._dom_classes


def test_moving_a_slider_reruns_and_replaces_the_chart(app):
    before, chart = spec(app), app.tabs.children[0]
    app.controls["seed"][1].value = 2
    assert app.runs == 2 and app.results[0].config.seed == 2
    assert app.tabs.children[0] is chart  # replaced in place, not re-created
    assert spec(app) != before
    assert app.status.value.startswith("run 2:")


def test_a_policy_brings_its_own_knobs(app):
    assert "cap_hours" in app.controls
    app.controls["policy"][1].value = "legacy"
    assert "cap_hours" not in app.controls and app.knob_box.children == ()
    assert app.results[0].config.policy == "legacy"
    app.controls["policy"][1].value = "fifo"
    assert {"backfill", "backfill_depth"} <= set(app.controls)


def test_a_changed_knob_reaches_the_config(app):
    app.controls["cap_hours"][1].value = 2.0
    assert app.results[0].config.policy_knobs == {"cap_hours": 2.0}


def test_compare_mode_runs_two_policies_on_one_workload(app):
    app.policy_b.value = "legacy"
    app.compare_box.value = True
    assert [r.run for r in app.results] == ["impactful", "legacy"]
    assert len(app.results[0].trace) == len(app.results[1].trace)
    assert app.results[0].window == app.results[1].window
    assert "impactful vs legacy" in app.status.value
    runs = {d["run"] for d in spec(app)["datasets"].values() for d in d if "run" in d}
    assert runs == {"impactful", "legacy"}


def test_a_bad_value_shows_a_message_not_a_traceback(app):
    app.controls["mtbf_hours"][1].value = "-3"
    assert "mtbf_hours must be positive" in app.message.value
    assert "impactlab-error" in app.status._dom_classes and app.runs == 1
    app.controls["mtbf_hours"][1].value = ""
    assert app.message.value == "" and app.runs == 2


def test_going_back_to_a_setting_comes_from_the_cache(app):
    first = app.results[0]
    app.controls["seed"][1].value = 5
    app.controls["seed"][1].value = 1
    assert app.results[0] is first and "from cache" in app.status.value


def test_a_slow_run_waits_for_the_button():
    app = Explorer(config=SMALL, auto_s=0.0)
    app.controls["seed"][1].value = 3
    assert app.runs == 1 and app.run_button.button_style == "warning"
    assert "press Run" in app.status.value
    seen = []
    app.bar.observe(lambda change: seen.append(change["new"]), names="value")
    app.run_button.click()
    assert app.runs == 2 and app.results[0].config.seed == 3
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)  # the bar followed the run
    assert app.bar.layout.display == "none"


def test_charts_that_no_longer_match_the_controls_are_marked_and_say_what_they_show():
    app = Explorer(config=SMALL, auto_s=0.0)
    assert (
        "impactlab-stale" not in app.tabs._dom_classes
        and "The charts show run 1:" in app.shown.value
    )
    assert f"under {app.auto_s:g} s" in app.rule.value  # the rule of what runs by itself, shown
    app.controls["seed"][1].value = 3  # needs Run
    assert "impactlab-stale" in app.tabs._dom_classes
    assert "still show run 1" in app.shown.value and "press Run" in app.shown.value
    app.run_button.click()
    assert (
        "impactlab-stale" not in app.tabs._dom_classes
        and "The charts show run 2:" in app.shown.value
    )
    app.workload.value = "file"  # no file given yet: a message, and the charts are run 2's
    assert "impactlab-stale" in app.tabs._dom_classes and "still show run 2" in app.shown.value


def test_opening_a_tab_draws_its_chart(app):
    for index in range(len(TABS)):
        app.tabs.selected_index = index
        assert isinstance(app.tabs.children[index], alt.JupyterChart), list(TABS)[index]
    assert app.message.value == ""


def test_budget_shares_are_editable_per_node(app):
    tree = app.results[0].tree
    program = tree.names[tree.children[0][0]]
    box = next(b for b in app.budget_box.children if b.description == program)
    box.value = box.value * 4
    assert app.results[0].config.budget_shares == {program: box.value}
    assert app.results[0].tree.share[tree.names.index(program)] == box.value


def test_a_query_string_presets_the_app():
    app = Explorer.from_query("gpus=48&days=2&policy=legacy&compare=impactful&tab=Waits")
    assert [r.config.policy for r in app.results] == ["legacy", "impactful"]
    assert app.results[0].config.gpus == 48 and app.results[0].config.days == 2
    assert app.tabs.selected_index == list(TABS).index("Waits")
    assert isinstance(app.tabs.children[app.tabs.selected_index], alt.JupyterChart)


def test_a_preset_beyond_a_sliders_span_widens_it_rather_than_clamping_the_value():
    """ipywidgets clamps a slider's value to its span without a word: gpus=4000 ran on 2048."""
    app = Explorer.from_query("gpus=4000&days=0.5&seed=1000&cap_hours=100", run=False)
    config = app.config()
    assert (config.gpus, config.days, config.seed) == (4000, 0.5, 1000)
    assert config.policy_knobs["cap_hours"] == 100 and not app.message.value
    days = app.controls["days"][1]
    assert days.min <= 0.5 and (days.max - days.min) % days.step == 0  # (widened by steps)


def test_budget_shares_in_a_preset_are_applied_and_bad_ones_named():
    app = Explorer.from_query("gpus=16&days=1&share.p00=7")
    assert app.results[0].config.budget_shares == {"p00": 7.0} and not app.message.value
    bad = Explorer.from_query("gpus=16&days=1&share.p00=abc&share.nope=2")
    message = html.unescape(bad.message.value)
    assert "share.p00: a share is a number from 1e-06 to 1e+09, got 'abc'" in message
    assert "share.nope: no budget node 'nope'" in message
    assert bad.results[0].config.budget_shares == {}
    with pytest.raises(il.ParamError, match="policy: no policy 'bogus'; known: "):
        bad.set_values({"policy": "bogus"}, run=False)


@pytest.mark.parametrize(
    "query, words",
    [
        ("gpus=-5", "gpus must be in"),
        ("bogus=1", "bogus"),
        ("policy=legacy&cap_hours=4", "cap_hours"),
    ],
)
def test_a_bad_preset_shows_a_message_and_the_app_runs_without_it(query, words):
    app = Explorer.from_query(query)
    assert words in app.message.value and "Ran with the defaults for those" in app.message.value
    assert len(app.results) == 1 and "impactlab-ready" in app.status._dom_classes


def test_a_bad_choice_in_a_preset_lists_the_valid_ones_and_keeps_the_good_keys():
    app = Explorer.from_query("policy=nope&gpus=48&days=2&tab=Nowhere&compare=nobody")
    message = html.unescape(app.message.value)
    assert "policy='nope' is not one of " + ", ".join(il.policy_names()) in message
    assert (
        "tab='Nowhere' is not one of " + ", ".join(TABS) in message
        and "compare='nobody'" in message
    )
    assert (
        app.results[0].config.gpus == 48 and app.results[0].config.policy == default_config().policy
    )
    assert len(app.results) == 1  # no comparison: its policy was not valid
    app.set(gpus=56)  # the next run drops the note
    assert app.message.value == ""


def test_query_strings_split_parameters_from_options():
    params, options = parse_query("?gpus=88&compare=legacy&cap_hours=4&tab=Waits")
    assert params == {"gpus": "88", "cap_hours": "4"} and options == {
        "compare": "legacy",
        "tab": "Waits",
    }


def test_keys_the_servers_add_to_the_url_are_not_presets():
    params, options = parse_query("gpus=88&policy=legacy&token=abc123&voila-theme=dark")
    assert params == {"gpus": "88", "policy": "legacy"} and options == {}
    app = Explorer.from_query("gpus=48&days=2&token=abc123")
    assert app.message.value == "" and app.results[0].config.gpus == 48


#: The example trace shipped inside the package, named as a user types it: a bare file name.
SHIPPED_TRACE = "example-trace-88gpu-3d.csv"


def test_a_shipped_trace_by_its_bare_name_runs_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository, not the notebooks folder
    app = Explorer(config=il.SimConfig(gpus=88, days=2.0, seed=1), auto_s=60.0)
    app.workload.value = "file"
    app.file.value = SHIPPED_TRACE
    assert app.message.value == "" and app.runs == 2, html.unescape(app.message.value)
    result = app.results[0]
    assert result.provenance["source"] == "file"
    assert result.provenance["path"].endswith(SHIPPED_TRACE)
    assert result.config.days == pytest.approx(3.0, abs=0.1)  # the trace's span, not the slider's
    assert "impactlab-ready" in app.status._dom_classes


def test_a_trace_path_relative_to_the_working_directory_wins(tmp_path, monkeypatch):
    from impactlab.base.files import DATA

    (tmp_path / SHIPPED_TRACE).write_bytes((DATA / SHIPPED_TRACE).read_bytes())
    monkeypatch.chdir(tmp_path)
    app = Explorer(config=il.SimConfig(gpus=88, days=2.0, seed=1), auto_s=60.0, run=False)
    app.workload.value = "file"
    with app.hold():
        app.file.value = SHIPPED_TRACE
    assert app.config().trace_path == str(tmp_path.resolve() / SHIPPED_TRACE)


@pytest.mark.parametrize("typed", ["no-such-trace.csv", "traces/no-such-trace.csv"])
def test_a_missing_trace_file_is_named_with_where_it_was_looked_for_and_runs_nothing(
    typed, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    # auto_s=0: any run would wait for the button after showing its estimate; none may be shown
    app = Explorer(config=SMALL, auto_s=0.0)
    app.workload.value = "file"
    app.file.value = typed
    message = html.unescape(app.message.value)
    assert f"trace file {typed!r} not found" in message
    assert str(tmp_path / typed) in message  # where it looked: the working directory
    assert ("shipped files" in message) == ("/" not in typed)  # and, for a bare name, the data
    assert "impactlab-error" in app.status._dom_classes
    assert "press Run" not in app.status.value and "about" not in app.status.value  # no estimate
    assert app.run_button.button_style != "warning"
    assert app.run() is None and app.runs == 1  # the button runs nothing either
    assert "impactlab-stale" in app.tabs._dom_classes  # the charts are the synthetic run's


def test_a_stored_explorer_shows_a_picture_of_its_headline_but_not_under_voila(app, monkeypatch):
    """A notebook viewer cannot show the widget: the output also holds a PNG of the first tab's
    chart. Voila always shows the widget, so it draws no picture (its first chart comes sooner)."""
    import base64

    monkeypatch.delenv("VOILA_PREHEAT", raising=False)
    monkeypatch.delenv("SERVER_SOFTWARE", raising=False)
    bundle = app._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert bundle["text/plain"].startswith("impactlab Explorer: run this notebook")
    monkeypatch.setenv("SERVER_SOFTWARE", "voila/0.5.13")
    assert "image/png" not in app._repr_mimebundle_()
    assert "image/png" not in Explorer(config=SMALL, run=False)._repr_mimebundle_()  # no run yet


def test_a_pai_folder_runs_from_the_file_box_and_another_folder_is_named(tmp_path):
    """A PAI 2020 trace is a folder: the file box takes it; any other folder gets the loader's
    message (it once said every folder is 'a directory, not a file'). A trace is estimated
    over its own span (it was 14 days: a 1-hour trace after a tiny run asked for Run)."""
    app = Explorer(config=SMALL)
    app.workload.value = "file"
    app.file.value = str(Path(__file__).parent / "fixtures" / "pai2020")
    assert app.results[0].provenance["format"] == "pai2020" and len(app.results[0].trace) == 3
    app.file.value = str(tmp_path)  # (read at once for its span, as the estimate needs it)
    message = html.unescape(app.message.value)
    assert f"{tmp_path}: is a directory; give a trace file (only an Alibaba PAI 2020" in message
    assert "impactlab-error" in app.status._dom_classes
    app.file.value = str(Path(il.__file__).parent / "data" / "example-trace-88gpu-3d.csv")
    assert app.results[0].config.days == 3 and "press Run" not in app.status.value


def test_the_run_estimate_weighs_every_run_by_its_size():
    """The speed behind the estimate is the time of all runs over all their GPU-days: a tiny run,
    whose fixed costs make it slow per GPU-day, no longer makes the next large run look slow
    (it was the last run's speed alone)."""
    app = Explorer(config=SMALL, run=False)
    app._learn(1.0, 1000.0)  # a default-sized run: 1 ms per GPU-day
    app._learn(0.05, 1.0)  # a tiny run: 50 ms per GPU-day
    assert app.rate_s() == pytest.approx(1.05 / 1001.0)
    assert app.estimate_s(il.SimConfig(gpus=256, days=14)) == pytest.approx(
        1.05 / 1001.0 * 256 * 14 * il.SimConfig().demand * len(app.policies())
    )
    app.run()
    assert app._spent[1] > 1001.0 and app.rate_s() > 0  # (a real run counts too)
