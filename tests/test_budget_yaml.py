"""Budget trees from YAML (with users), from history, and jobs of projects no budget funds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import INSTANT

import impactlab as il
from impactlab import BudgetError, SimConfig, budgets_from_trace, load_budgets, simulate
from impactlab.inputs.budget_io import unknown_projects
from impactlab.inputs.budgets import BudgetTree
from impactlab.inputs.scenario import load_scenario

DATA = Path(__file__).resolve().parent.parent / "impactlab" / "data"

YAML = """
name: lab
children:
  - name: language
    share: 3
    children:
      - name: olmo
        share: 2
        users: [ann, bob]
      - name: tulu
        share: 1
        users:
          - name: cy
  - name: robotics
    share: 1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "budgets.yaml"
    path.write_text(text)
    return path


def test_yaml_tree_with_users(tmp_path):
    tree = load_budgets(write(tmp_path, YAML))
    assert [tree.names[i] for i in tree.leaves] == ["olmo", "tulu", "robotics"]
    assert dict(tree.users) == {"olmo": ("ann", "bob"), "tulu": ("cy",)}
    assert tree.fraction[tree.leaf_of["olmo"]] == pytest.approx(0.5)
    assert BudgetTree.from_dict(tree.to_dict()) == tree  # users survive the round trip


@pytest.mark.parametrize(
    "text, words",
    [
        ("name: lab\nchildren:\n  - name: a\n    shares: 2\n", "unknown key"),
        ("name: lab\nchildren:\n  - name: a\n    share: -1\n", "positive"),
        (
            "name: lab\nchildren:\n  - name: g\n    users: [x]\n    children: [{name: a}]\n",
            "leaves",
        ),
        ("name: lab\nchildren:\n  - name: a\n  - name: a\n", "twice"),
        ("name: lab\nchildren: a\n", "list"),
        ("name: lab\n", "no projects"),
        ("- a\n- b\n", "mapping"),
        ("name: lab\nchildren: [\n", "cannot read"),
    ],
)
def test_bad_yaml_is_a_budget_error(tmp_path, text, words):
    with pytest.raises(BudgetError, match=words):
        load_budgets(write(tmp_path, text))


def test_budgets_from_trace_shares_gpu_hours():
    trace = pd.DataFrame(
        {
            "job_id": ["1", "2", "3", "4"],
            "project": ["a", "a", "b", ""],
            "user": ["u1", "u2", "u3", "u4"],
            "gpus": [1, 2, 4, 8],
            "duration_s": [3600.0, 3600.0, 1800.0, 3600.0],
        }
    )
    tree = budgets_from_trace(trace)
    assert {tree.names[i]: tree.share[i] for i in tree.leaves} == {"a": 3.0, "b": 2.0}
    assert dict(tree.users) == {"a": ("u1", "u2"), "b": ("u3",)}
    equal = budgets_from_trace(trace, rule="equal")
    assert {equal.share[i] for i in equal.leaves} == {1.0}
    by_user = budgets_from_trace(trace, by="user", rule="jobs")
    assert sorted(by_user.leaf_of) == ["u1", "u2", "u3", "u4"]


def test_unknown_projects_run_unallocated_and_are_reported():
    rows = [
        {"job_id": "a", "submit_s": 0, "gpus": 1, "duration_s": 60, "project": "olmo"},
        {"job_id": "b", "submit_s": 0, "gpus": 1, "duration_s": 60, "project": "ghost"},
        {"job_id": "c", "submit_s": 5, "gpus": 1, "duration_s": 60, "project": "ghost"},
    ]
    tree = BudgetTree.flat({"olmo": 1.0})
    assert unknown_projects(pd.DataFrame(rows), tree) == {"ghost": 2}
    config = SimConfig(policy="impactful", gpus=8, days=0.1, warmup_days=0.0)
    result = simulate(config, trace=pd.DataFrame(rows), budgets=tree)
    assert result.unknown_projects == {"ghost": 2}
    with pytest.raises(BudgetError, match="ghost"):
        simulate(config, trace=pd.DataFrame(rows), budgets=tree, on_unknown_project="error")


def written_fractions(node: dict, fraction: float = 1.0) -> dict[str, float]:
    """Each node's entitled fraction from the YAML as written: the product along its path of
    share / sum of its siblings' shares (share 1 when not given)."""
    out = {node["name"]: fraction}
    children = node.get("children", [])
    total = sum(c.get("share", 1.0) for c in children)
    for child in children:
        out.update(written_fractions(child, fraction * child.get("share", 1.0) / total))
    return out


def test_shipped_budget_files_load_with_their_shares():
    paths = sorted(DATA.glob("*.yaml"))
    assert len(paths) >= 4
    for path in paths:
        tree = load_budgets(path)
        doc = yaml.safe_load(path.read_text())
        doc = doc.get("budgets", doc)  # a scenario file carries its tree under "budgets"
        fractions = written_fractions(doc)
        assert sorted(tree.names) == sorted(fractions), path
        for i, name in enumerate(tree.names):
            assert tree.fraction[i] == pytest.approx(fractions[name]), (path, name)
        leaves = [tree.names[i] for i in tree.leaves]
        assert len(leaves) >= 2 and sum(tree.fraction[i] for i in tree.leaves) == pytest.approx(
            1.0
        ), path
    example = load_budgets(DATA / "example-budgets.yaml")
    assert example.share[example.names.index("p02")] == 100.0
    assert example.fraction[example.names.index("p02")] == pytest.approx(
        132.99 / (132.99 + 98.96) * 100 / 132.99
    )


def test_shipped_budget_files_hold_the_shares_of_the_organisation_they_were_made_from():
    # benchmarks/make_examples.py writes the generator's tree, shares rounded to 2 decimals. The
    # organisation has its own random stream: a 1-day run draws the same one as the full run.
    made_from = {
        path: load_scenario(path).config.generator() for path in DATA.glob("scenario-*.yaml")
    }
    made_from[DATA / "example-budgets.yaml"] = il.GeneratorConfig(gpus=88, days=3, seed=1)
    for path, config in sorted(made_from.items()):
        tree = il.generate(replace(config, days=1.0)).tree
        shipped = load_budgets(path)
        assert shipped.names == tree.names and shipped.parent == tree.parent, path
        assert list(shipped.share) == [round(float(x), 2) for x in tree.share], path


def test_users_written_as_leaves_under_a_project_are_charged_by_user():
    from impactlab import SimConfig, simulate

    tree = BudgetTree.from_dict(
        {
            "name": "root",
            "children": [
                {
                    "name": "P",
                    "share": 1,
                    "children": [{"name": "ann", "share": 3}, {"name": "bob", "share": 1}],
                },
                {"name": "Q", "share": 1, "children": [{"name": "ann", "share": 1}]},
            ],
        }
    )
    trace = pd.DataFrame(
        [
            {
                "job_id": "a",
                "submit_s": 0,
                "gpus": 8,
                "duration_s": 100,
                "project": "P",
                "user": "ann",
            },
            {
                "job_id": "b",
                "submit_s": 0,
                "gpus": 8,
                "duration_s": 100,
                "project": "P",
                "user": "bob",
            },
            {
                "job_id": "c",
                "submit_s": 0,
                "gpus": 8,
                "duration_s": 100,
                "project": "Q",
                "user": "ann",
            },
            {
                "job_id": "d",
                "submit_s": 0,
                "gpus": 8,
                "duration_s": 100,
                "project": "P",
                "user": "eve",
            },
        ]
    )
    leaves = tree.leaves_for(trace["project"], trace["user"])
    names = [tree.names[i] if i >= 0 else None for i in leaves]
    assert names == ["ann", "bob", "ann", None]
    assert leaves[0] != leaves[2]  # ann of P and ann of Q are different budgets
    result = simulate(
        SimConfig(policy="fifo", gpus=32, days=0.01, warmup_days=0, **INSTANT),
        trace=trace,
        budgets=tree,
    )
    assert result.unknown_projects == {"P": 1}  # eve has no budget under P: runs unallocated
    delivered = result.budgets.set_index("node")["delivered_gpu_s"]
    assert delivered["P"] == 2 * 8 * 100 and delivered["Q"] == 8 * 100


@pytest.mark.parametrize(
    ("node", "words"),
    [
        ("{name: , share: 3}", "node under '/root' has no name"),  # (was a project "None")
        ("{name: [a], share: 3}", r"node under '/root' has no name \(got \['a'\]\)"),
        ("{name: yes}", "node under '/root' has no name"),
        ("{name: p01, share: yes}", "node 'p01': share must be a number, got True"),  # (was 1)
    ],
)
def test_a_yaml_slip_in_a_name_or_share_is_named(tmp_path, node, words):
    path = tmp_path / "budgets.yaml"
    path.write_text(f"name: root\nchildren:\n  - {node}\n  - {{name: p02}}\n")
    with pytest.raises(BudgetError, match=f"{path}: {words}"):
        load_budgets(path)


def test_numbers_are_names_too(tmp_path):
    path = tmp_path / "budgets.yaml"
    path.write_text("name: root\nchildren:\n  - {name: 2024, share: 2}\n  - {name: p02}\n")
    assert load_budgets(path).names == ("root", "2024", "p02")


def test_jobs_of_users_without_a_leaf_are_named_by_user_not_as_an_absent_project(caplog):
    """Under a project funded by per-user leaves, the jobs of a user without a leaf run
    unallocated: the warning named the project as "not in the budget tree"."""
    from impactlab.inputs.budget_io import check_projects

    tree = BudgetTree.from_dict(
        {"name": "root", "children": [{"name": "P", "children": [{"name": "ann"}]}, {"name": "Q"}]}
    )
    trace = pd.DataFrame(
        {
            "project": ["P", "P", "P", "R", "P"],
            "user": ["ann", "bob", "cy", "dee", None],
        }
    )
    with caplog.at_level("WARNING", logger="impactlab"):
        assert check_projects(trace, tree) == {"P": 3, "R": 1}
    assert caplog.messages == [
        (
            "4 jobs run unallocated: projects not in the budget tree: R (1 job); project P "
            "(3 jobs) funds its users by leaves: users bob, cy have none"
        )
    ]
    with pytest.raises(BudgetError, match=r"project P .* some of its jobs name no user"):
        check_projects(trace.iloc[[4]], tree, "error")
