"""The CLI replays every format's fixture and the shipped examples; bad files exit with status 2."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from impactlab import budgets_from_trace, load_trace, simulate
from impactlab.cli import main
from impactlab.inputs.scenario import load_scenario

FIXTURES = Path(__file__).parent / "fixtures"
DATA = Path(__file__).resolve().parent.parent / "impactlab" / "data"
TRACES = [
    "philly_derived.csv",
    "philly_cluster_job_log.json",
    "helios_cluster_log.csv",
    "acme_trace_seren.csv",
    "acme_trace_kalos.csv",
    "pai2020",
    "spot_job_info_df.csv",
    "sacct_parsable2.txt",
    "generic_trace.csv",
]


@pytest.mark.parametrize("fixture", TRACES)
def test_simulate_each_format_with_budgets(tmp_path, capsys, fixture):
    tree = budgets_from_trace(load_trace(FIXTURES / fixture))
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text(yaml.safe_dump(tree.to_dict()))
    argv = [
        "simulate",
        "--trace",
        str(FIXTURES / fixture),
        "--policy",
        "impactful",
        "--budgets",
        str(budgets),
        "--gpus",
        "1024",
        "--days",
        "200",
        "--warmup-days",
        "0",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["policy"] == "impactful" and summary["gpus"] == 1024
    assert (summary["days"], summary["report_from_days"]) == (200, 0)
    jobs = len(load_trace(FIXTURES / fixture))  # every loaded job is submitted within 200 days
    assert summary["jobs"] == jobs and summary["wait_s"]["all"]["n"] == jobs
    assert 0 < summary["occupancy"] <= 1 and 0 < summary["utilization"] <= summary["occupancy"]
    assert 0 <= summary["impact"] <= 1 and 0 <= summary["unallocated_share"] <= 1


def test_simulate_the_shipped_example_trace(capsys):
    argv = [
        "simulate",
        "--trace",
        str(DATA / "example-trace-88gpu-3d.csv"),
        "--budgets",
        str(DATA / "example-budgets.yaml"),
        "--gpus",
        "88",
        "--days",
        "3",
        "--policy",
        "impactful",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["impact"] > 0.5


def test_scenarios_are_complete():
    sizes = {load_scenario(p).config.gpus for p in DATA.glob("scenario-*.yaml")}
    assert {88, 256, 1024} <= sizes
    workshop = load_scenario(DATA / "scenario-workshop-88.yaml")
    assert workshop.budgets is not None and workshop.config.days == 7


def test_scenario_on_the_command_line(capsys):
    argv = [
        "simulate",
        "--scenario",
        str(DATA / "scenario-workshop-88.yaml"),
        "--days",
        "2",
        "--policy",
        "fifo",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["policy"], summary["gpus"], summary["days"]) == ("fifo", 88, 2)
    assert summary["report_from_days"] == 1  # the 7-day default warm-up, at most half the run
    # the same run through the library: the scenario's workload, budgets and seed, 2 days
    scenario = load_scenario(DATA / "scenario-workshop-88.yaml")
    same = simulate(
        replace(scenario.config, policy="fifo", days=2.0), budgets=scenario.budgets
    ).summary()
    assert summary["jobs"] == same["jobs"] > 100
    assert (
        summary["occupancy"] == pytest.approx(same["occupancy"]) and 0.5 < summary["occupancy"] <= 1
    )
    assert summary["impact"] == pytest.approx(same["impact"]) and summary["preemptions"] == 0


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty"),
        ("job_id,submit_s,gpus,duration_s\na,0,1,-5\n", "row 2"),
        ("job_id,submit_s,gpus,duration_s\na,0,999,5\n", "larger"),
    ],
)
def test_bad_trace_is_one_line_and_status_2(tmp_path, capsys, text, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert main(["simulate", "--trace", str(path), "--policy", "fifo", "--gpus", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("impactlab: error:") and words in err and "\n" not in err


def test_unknown_projects_can_stop_the_run(capsys):
    argv = [
        "simulate",
        "--trace",
        str(FIXTURES / "helios_cluster_log.csv"),
        "--budgets",
        str(DATA / "example-budgets.yaml"),
        "--policy",
        "impactful",
        "--unknown-projects",
        "error",
    ]
    assert main(argv) == 2
    assert "not in the budget tree" in capsys.readouterr().err
