"""Repair as its own axis (issue 17 item 3): ``compare`` repairs nodes one way for every policy
unless a variant says otherwise; Ai2's before/after is the named pairing ``ai2``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import impactlab as il
from impactlab.cli import main
from impactlab.runs.simulate import COMPARE_REPAIR
from impactlab.sim.health import HealthConfig

CONFIG = il.SimConfig(gpus=32, days=3, seed=1, warmup_days=0.0, health=HealthConfig(mtbf_hours=48))


def node_events(result: il.SimResult) -> pd.DataFrame:
    """The node failures and repairs of a run (the policy cannot move them)."""
    log = result.events
    return log[log.event.isin(["node_down", "node_up"])].reset_index(drop=True)


def test_compare_with_failures_repairs_every_policy_the_same_way():
    legacy, impactful = il.compare(CONFIG, ["legacy", "impactful"])
    assert legacy.repair == impactful.repair == COMPARE_REPAIR == "automatic"
    # With one repair mode, failures and repairs do not depend on the scheduler at all.
    pd.testing.assert_frame_equal(node_events(legacy), node_events(impactful))
    a, b = legacy.summary(), impactful.summary()
    for key in ("availability", "node_failures", "human_repairs", "auto_repairs"):
        assert a[key] == b[key], key


def test_the_ai2_pairing_gives_legacy_manual_and_impactful_automatic_repair():
    legacy, impactful = il.compare(CONFIG, "ai2")
    assert (legacy.config.policy, legacy.repair) == ("legacy", "manual")
    assert (impactful.config.policy, impactful.repair) == ("impactful", "automatic")
    assert legacy.summary()["auto_repairs"] == 0 and legacy.summary()["human_repairs"] > 0
    assert il.pairing("ai2") == il.PAIRINGS["ai2"]
    with pytest.raises(il.ParamError, match="unknown pairing 'ai3'; known: ai2"):
        il.pairing("ai3")
    with pytest.raises(TypeError, match="pairing"):
        il.compare(CONFIG, "legacy")


def test_a_variant_or_the_config_sets_the_repair_mode():
    own = il.compare(CONFIG, {"legacy": {"repair": "manual"}, "impactful": {}})
    assert [r.repair for r in own] == ["manual", COMPARE_REPAIR]
    everyone = il.compare(CONFIG.with_params(repair="manual"), ["fifo", "impactful"])
    assert [r.repair for r in everyone] == ["manual", "manual"]


def test_a_single_run_keeps_the_policys_own_repair_mode():
    config = il.SimConfig(policy="legacy", gpus=32, days=1, health=HealthConfig(mtbf_hours=48))
    assert il.simulate(config).repair == "manual"
    assert il.simulate(config.with_params(policy="impactful")).repair == "automatic"
    assert il.simulate(config.with_params(mtbf_hours=None)).repair is None


def test_without_failures_compare_leaves_the_config_alone():
    runs = il.compare(il.SimConfig(gpus=16, days=1), ["legacy", "impactful"])
    assert [r.config.health.repair for r in runs] == [None, None]
    assert [r.summary()["repair"] for r in runs] == [None, None]


def test_summary_shows_the_human_fraction_next_to_human_repairs():
    result = il.simulate(CONFIG.with_params(human_fraction=0.5))
    summary = result.summary()
    assert summary["repair"] == "automatic" and summary["human_fraction"] == 0.5


def test_cli_compare_pairing_and_per_policy_repairs(capsys):
    flags = ["--gpus", "32", "--days", "3", "--seed", "1", "--node-mtbf-hours", "48"]
    assert main(["compare", "--pairing", "ai2", *flags, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["policy"], s["repair"]) for s in out] == [
        ("legacy", "manual"),
        ("impactful", "automatic"),
    ]
    assert (
        main(
            ["compare", "--policies", "fifo", "legacy", "--repairs", "manual", "automatic", *flags]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert [line.split()[-2:] for line in table.splitlines() if "repair (mode)" in line] == [
        ["manual", "automatic"]
    ]
    assert "human_fraction (input)" in table
    assert main(["compare", *flags]) == 0
    assert [
        line.split()[-2:]
        for line in capsys.readouterr().out.splitlines()
        if "repair (mode)" in line
    ] == [["automatic", "automatic"]]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--repairs", "manual"], "--repairs: give one mode per policy (2), got 1"),
        (
            ["--pairing", "ai2", "--repairs", "manual", "manual"],
            "the pairing sets each variant's repair mode",
        ),
        (["--repairs", "manual", "manual", "--repair", "automatic"], "--repairs and --repair"),
    ],
)
def test_cli_rejects_conflicting_repair_flags(capsys, extra, message):
    assert main(["compare", "--gpus", "16", "--days", "1", *extra]) == 2
    assert message in capsys.readouterr().err
