"""Declared parameters: one declaration drives config validation, flat and JSON forms, the CLI
(explicit flags beat a scenario), and policies as plug-ins."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import impactlab as il
from impactlab.base.config import HealthConfig
from impactlab.base.params import FrozenMap, Param, ParamError
from impactlab.cli import build_parser, main

DATA = Path(__file__).resolve().parent.parent / "impactlab" / "data"


def test_every_knob_is_declared_once_with_its_group_and_help():
    params = il.parameters()
    names = [p.name for p in params]
    assert len(names) == len(set(names))
    assert {
        "gpus",
        "days",
        "demand",
        "seed",
        "mtbf_hours",
        "cap_hours",
        "window_days",
        "backfill",
    } <= set(names)
    for p in params:
        assert p.help and p.group, p.name
        assert p.check(p.default) == p.default or (p.default is None and p.nullable), p.name
    assert il.parameter("cap_hours").policies == ("impactful",)
    assert set(il.parameter("refresh_s").policies) == {"fairshare", "impactful"}


def test_every_policy_field_is_a_declared_knob():
    for name in il.policy_names():
        declared = {p.name for p in il.parameters(name) if p.policies}
        cls = il.REGISTRY[name]
        fields = {f.name for f in __import__("dataclasses").fields(cls)}
        assert declared == fields, name
        assert all("not declared" not in p.help for p in il.parameters(name) if p.policies), name


@pytest.mark.parametrize(
    "values, words",
    [
        ({"gpus": 12}, "multiple of gpus_per_node"),
        ({"seed": -1}, "seed must be in"),
        ({"days": 0}, "days must be in"),
        ({"funded_load": 3.0}, "funded_load must be <= demand"),
        ({"warmup_days": 20.0}, "warmup_days must be below days"),
        ({"policy": "nope"}, "unknown policy 'nope'"),
        ({"policy_knobs": {"cap_hours": -1}}, "cap_hours must be in [0, 168]"),
        ({"policy_knobs": {"window_days": 0}}, "window_days must be in (0, 90]"),
        (
            {"policy": "legacy", "policy_knobs": {"cap_hours": 4}},
            "policy 'legacy' has no knob 'cap_hours'",
        ),
        ({"health": HealthConfig(mtbf_hours=10)} | {"budget_shares": {"p1": 0}}, "positive share"),
    ],
)
def test_bad_values_are_refused_when_the_config_is_built(values, words):
    with pytest.raises(ParamError) as err:
        il.SimConfig(**values)
    assert words in str(err.value)


def test_health_knobs_are_checked_against_their_declarations():
    with pytest.raises(ParamError, match="mtbf_hours must be positive"):
        HealthConfig(mtbf_hours=0)
    with pytest.raises(ParamError, match="repair must be one of"):
        HealthConfig(repair="sometimes")


def test_a_config_is_hashable_and_round_trips_through_json():
    config = il.SimConfig(
        policy="impactful",
        gpus=64,
        policy_knobs={"cap_hours": 4, "max_victim_ratio": math.inf},
        budget_shares={"p01": 2.0},
        health=HealthConfig(mtbf_hours=100.0, repair="manual"),
    )
    again = il.SimConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and hash(again) == hash(config)
    assert {config: 1}[again] == 1


@pytest.mark.parametrize(
    "config",
    [
        il.SimConfig(),
        il.SimConfig(policy="impactful", policy_knobs={"max_victim_ratio": math.inf}),
        il.SimConfig(policy="fairshare", gpus=64, budget_shares={"p01": 2.0}),
        il.SimConfig(clusters="a:8:x+y,b:16", health=HealthConfig(mtbf_hours=50.0)),
    ],
    ids=["default", "knob", "shares", "fleet"],
)
def test_a_config_rebuilt_from_its_flat_form_is_equal_to_it(config):
    """The flat form spells every knob out; a knob at its default is not kept apart from one
    left out, so the two configs (which run the same) are equal and hash alike."""
    again = il.SimConfig.from_flat(config.flat())
    assert again == config and hash(again) == hash(config)
    spelled = il.SimConfig(policy="impactful", policy_knobs={"cap_hours": 8.0, "window_days": 7})
    assert spelled == il.SimConfig(policy="impactful") and not spelled.policy_knobs


def test_the_flat_form_names_every_parameter_and_rebuilds_the_config():
    config = il.SimConfig(gpus=64, policy_knobs={"cap_hours": 4}, budget_shares={"p01": 2.0})
    flat = config.flat()
    assert flat["cap_hours"] == 4 and flat["window_days"] == 7.0 and flat["share.p01"] == 2.0
    assert flat["mtbf_hours"] is None
    assert (
        il.SimConfig.from_flat(flat)
        == il.SimConfig.from_flat({k: str(v) for k, v in flat.items()})
        == il.SimConfig(gpus=64, policy_knobs=dict(config.knobs()), budget_shares={"p01": 2.0})
    )


def test_with_params_parses_text_and_routes_each_name():
    config = il.SimConfig().with_params(
        {
            "gpus": "88",
            "cap_hours": "2.5",
            "mtbf_hours": "none",
            "repair": "manual",
            "share.p00": "3",
        },
        seed=4,
    )
    assert (config.gpus, config.seed, config.policy_knobs["cap_hours"]) == (88, 4, 2.5)
    assert config.health.repair == "manual" and config.budget_shares == {"p00": 3.0}


def test_a_policy_change_drops_knobs_it_does_not_have_but_a_named_one_must_fit():
    config = il.SimConfig(policy_knobs={"cap_hours": 4})
    assert config.with_params(policy="legacy").policy_knobs == {}
    with pytest.raises(ParamError, match="policy 'legacy' has no knob 'cap_hours'"):
        config.with_params(policy="legacy", cap_hours=2)
    with pytest.raises(ParamError, match="did you mean cap_hours"):
        config.with_params(cap_hour=2)


def test_text_parsing_follows_the_declared_type():
    flag = Param("flag", False, bool, "g", "a flag")
    assert flag.parse("yes") is True and flag.parse("0") is False
    with pytest.raises(ParamError, match="expected bool"):
        flag.parse("maybe")
    ratio = Param("ratio", 1.0, float, "g", "r", lo=0, lo_open=True)
    assert ratio.parse("inf") == math.inf
    with pytest.raises(ParamError, match="ratio must be positive"):
        ratio.parse("0")
    with pytest.raises(ParamError, match="must be a number"):
        ratio.parse("nan")


def test_frozen_maps_compare_with_dicts_and_hash():
    a, b = FrozenMap({"x": 1, "y": 2}), FrozenMap({"y": 2, "x": 1})
    assert a == b == {"x": 1, "y": 2} and hash(a) == hash(b)
    with pytest.raises(TypeError):
        a["x"] = 3  # type: ignore[index]


# ----- the command line is generated from the declarations ------------------------------------
def test_every_declared_parameter_is_a_flag():
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices["simulate"]  # type: ignore[union-attr]
    flags = {opt for action in sub._actions for opt in action.option_strings}
    for p in il.parameters():
        if p.name != "policy":
            assert p.cli_flag in flags, p.name


def test_an_explicit_flag_wins_over_the_scenario_even_at_its_default(capsys):
    scenario = DATA / "scenario-workshop-88.yaml"
    assert (
        main(["simulate", "--scenario", str(scenario), "--days", "1", "--policy", "fifo", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["gpus"] == 88
    # --gpus 256 equals SimConfig's default: the old CLI took it for "not given"
    assert (
        main(
            [
                "simulate",
                "--scenario",
                str(scenario),
                "--gpus",
                "256",
                "--days",
                "1",
                "--policy",
                "fifo",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == 256


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--seed", "-1"], "seed must be in"),
        (["--window-days", "0"], "window_days must be in (0, 90]"),
        (["--window-days", "-3"], "window_days must be in (0, 90]"),
        (["--cap-hours", "-1"], "cap_hours must be in [0, 168]"),
        (["--gpus", "12"], "multiple of gpus_per_node"),
    ],
)
def test_bad_flags_are_one_line_with_status_2(capsys, argv, words):
    assert main(["simulate", "--policy", "impactful", "--days", "1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err


def test_a_knob_of_another_policy_is_refused(capsys):
    assert main(["simulate", "--policy", "legacy", "--cap-hours", "4", "--days", "1"]) == 2
    assert "has no knob 'cap_hours'" in capsys.readouterr().err


def test_compare_gives_each_policy_the_knobs_it_declares(capsys):
    argv = [
        "compare",
        "--policies",
        "legacy",
        "impactful",
        "--gpus",
        "16",
        "--days",
        "1",
        "--cap-hours",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    legacy, impactful = json.loads(capsys.readouterr().out)
    assert (legacy["policy"], impactful["policy"]) == ("legacy", "impactful")
    assert main(["compare", "--policies", "legacy", "fifo", "--days", "1", "--cap-hours", "2"]) == 2
    assert "not a knob of any" in capsys.readouterr().err


def test_out_naming_a_file_is_refused_before_the_run(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    assert main(["simulate", "--policy", "fifo", "--days", "1", "--out", str(target)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err


def test_out_round_trips_through_simresult_load(tmp_path, capsys):
    argv = [
        "simulate",
        "--policy",
        "impactful",
        "--gpus",
        "16",
        "--days",
        "1.5",
        "--cap-hours",
        "3",
        "--out",
        str(tmp_path / "run"),
        "--json",
    ]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    loaded = il.SimResult.load(tmp_path / "run")
    assert loaded.config.policy_knobs == {"cap_hours": 3.0}
    assert loaded.summary()["impact"] == pytest.approx(printed["impact"])
    assert loaded.metrics()["preemptions"] == printed["preemptions"]


# ----- policies as plug-ins -------------------------------------------------------------------
def test_a_policy_from_a_test_file_runs_through_the_cli_by_its_spec(capsys):
    argv = [
        "simulate",
        "--policy",
        "plugin_policy:ShortestFirst",
        "--gpus",
        "16",
        "--days",
        "1",
        "--scan",
        "50",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "plugin_policy:ShortestFirst" and out["jobs"] > 0


def test_registered_policies_are_listed_and_checked():
    assert "shortest" in il.policy_names()  # registered by conftest
    assert il.parameter("scan", "shortest").policies == ("shortest",)
    with pytest.raises(ParamError, match="scan must be in"):
        il.SimConfig(policy="shortest", policy_knobs={"scan": 0})
    with pytest.raises(ParamError, match="cannot load policy"):
        il.SimConfig(policy="no_such_module:Policy")


# ----- compare from Python ----------------------------------------------------------------------
def test_compare_builds_the_workload_once_and_shares_one_window(monkeypatch):
    from impactlab.inputs import workload

    calls = []
    real = workload.generate
    monkeypatch.setattr(workload, "generate", lambda cfg: calls.append(cfg) or real(cfg))
    config = il.SimConfig(gpus=16, days=2.0, seed=2)
    runs = il.compare(
        config,
        {
            "legacy": {},
            "cap 1 h": {"policy": "impactful", "cap_hours": 1.0},
            "short window": {"policy": "impactful", "window_days": 0.5},
        },
    )
    assert len(calls) == 1
    assert [r.run for r in runs] == ["legacy", "cap 1 h", "short window"]
    assert runs[1].config.policy_knobs == {"cap_hours": 1.0}
    # the longest window among the runs (7 d), at most half the run
    assert len({r.window for r in runs}) == 1 and runs[0].window.t0 == 1.0 * 86_400
    assert all(r.trace is runs[0].trace for r in runs)


def test_compare_gives_the_same_log_as_simulate():
    config = il.SimConfig(gpus=16, days=1.0, seed=3, warmup_days=0.0)
    both = il.compare(config, ["fifo", "impactful"])
    alone = il.simulate(config.with_params(policy="impactful"))
    assert both[1].events.equals(alone.events)


def test_progress_reports_simulated_time_and_changes_nothing():
    config = il.SimConfig(gpus=16, days=1.0, seed=3)
    seen: list[float] = []
    watched = il.simulate(config, progress=seen.append)
    assert watched.events.equals(il.simulate(config).events)
    assert seen == sorted(seen) and seen[-1] == config.horizon_s and len(seen) > 20
    assert il.simulate(config, progress=True).events.equals(watched.events)  # a tqdm bar


# ----- a trace sets the run's span ----------------------------------------------------------------
EXAMPLE = DATA / "example-trace-88gpu-3d.csv"


def test_a_trace_is_replayed_over_its_whole_span_unless_days_is_given():
    config = il.SimConfig(gpus=88, policy="fifo").with_params(trace_path=str(EXAMPLE))
    assert config.days is None
    result = il.simulate(config)
    last = result.trace["submit_s"].max()
    assert (
        result.config.days * 86_400 >= last > result.config.days * 86_400 - 3600
    )  # rounded up to the hour
    assert result.window.t0 == result.config.days * 86_400 / 2  # warm-up fitted: half a short run
    assert il.simulate(config.with_params(days=1.0)).config.days == 1.0


def test_a_dataframe_trace_is_replayed_over_its_whole_span_too():
    trace = pd.read_csv(EXAMPLE)
    span = il.simulate(il.SimConfig(gpus=88, policy="fifo"), trace=trace).config.days
    assert span > 2.5 and span * 86_400 >= trace["submit_s"].max() > span * 86_400 - 3600
    assert (
        il.simulate(il.SimConfig(gpus=88, policy="fifo", days=1.0), trace=trace).config.days == 1.0
    )
    assert il.simulate(il.SimConfig(gpus=16, policy="fifo")).config.days == 14  # synthetic: 14 days
    assert il.SimConfig().horizon_s == 14 * 86_400


def test_the_cli_prints_the_simulated_and_reported_window(capsys):
    assert main(["simulate", "--trace", str(EXAMPLE), "--gpus", "88", "--policy", "fifo"]) == 0
    assert "simulated days 0-3, reported days 1.5-3" in capsys.readouterr().out.splitlines()[0]
    assert (
        main(
            [
                "simulate",
                "--trace",
                str(EXAMPLE),
                "--gpus",
                "88",
                "--policy",
                "fifo",
                "--warmup-days",
                "5",
            ]
        )
        == 2
    )
    assert "warmup_days must be below days (3)" in capsys.readouterr().err


def test_version_flag(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"impactlab {il.__version__}"
