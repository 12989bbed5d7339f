"""Regenerate impactlab/data/: scenario files, an example budget tree and small example traces.

    python benchmarks/make_examples.py        # writes into impactlab/data/

Everything here comes from impactlab's own seeded generator; no third-party trace is shipped.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import yaml

import impactlab as il
from impactlab.inputs.scenario import scenario_dict

log = logging.getLogger("make_examples")

SCENARIOS = {
    "workshop-88": (88, 7.0, "Workshop: 11 nodes x 8 GPUs for a week, demand 2.5x capacity."),
    "week-256": (256, 7.0, "A 256-GPU cluster for a week (the default scenario's size)."),
    "month-1024": (1024, 30.0, "A 1024-GPU cluster for 30 days, as in Ai2's report."),
}

#: A fleet shaped like Ai2's (clusters of 88 to 1,024 GPUs, about 150 researchers). The sizes
#: span Ai2's published range; the names and the exact sizes are impactlab's, not Ai2's.
FLEETS = {
    "fleet-ai2": (
        "atlas:1024,borealis:512,cirrus:256,delta:88",
        14.0,
        82,  # users per 1,024 GPUs: 150 users on the fleet's 1,880 GPUs
        (
            "A fleet shaped like Ai2's: four clusters of 88 to 1,024 GPUs (1,880 in all), about "
            "150 researchers under one budget tree, two weeks; fair share charged "
            "organisation-wide."
        ),
    ),
}


def write_yaml(path: Path, data: dict, header: str) -> None:
    """YAML with a comment header, keys in the order given."""
    path.write_text(
        f"# {header}\n# Regenerate with: python benchmarks/make_examples.py\n"
        + yaml.safe_dump(data, sort_keys=False, width=100)
    )
    log.info("wrote %s", path)


def main(out: Path) -> None:
    """Write every file of impactlab/data/ into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, (gpus, days, text) in SCENARIOS.items():
        config = il.SimConfig(gpus=gpus, days=days, seed=0)
        tree = il.BudgetTree.from_dict(_rounded(il.generate(config.generator()).tree.to_dict()))
        write_yaml(
            out / f"scenario-{name}.yaml",
            scenario_dict(name, config, tree, text),
            f"Scenario {name}",
        )
    for name, (clusters, days, users, text) in FLEETS.items():
        config = il.SimConfig(days=days, seed=0, users_per_1024_gpus=users).with_params(
            clusters=clusters
        )
        fleet = [(c.name, c.gpus) for c in config.clusters]
        work = il.generate_fleet(config.generator(), fleet)
        tree = il.BudgetTree.from_dict(_rounded(work.tree.to_dict()))
        write_yaml(
            out / f"scenario-{name}.yaml",
            scenario_dict(name, config, tree, text),
            f"Scenario {name}",
        )
    small = il.generate(il.GeneratorConfig(gpus=88, days=3, seed=1))
    small.trace.to_csv(out / "example-trace-88gpu-3d.csv", index=False)
    write_yaml(
        out / "example-budgets.yaml",
        _annotated(_rounded(small.tree.to_dict()), small.users),
        "Budget tree of example-trace-88gpu-3d.csv: programs -> projects (-> users)",
    )
    log.info("wrote %d jobs to %s", len(small.trace), out / "example-trace-88gpu-3d.csv")


def _rounded(node: dict) -> dict:
    """Shares rounded to 2 decimals, for a readable file (shares are relative anyway)."""
    out = {**node, "share": round(float(node["share"]), 2)}
    if "children" in node:
        out["children"] = [_rounded(c) for c in node["children"]]
    return out


def _annotated(tree: dict, users) -> dict:
    """The tree with each project's users listed under it (informational)."""
    members = users.groupby("project")["user"].apply(list).to_dict()
    for program in tree.get("children", []):
        for project in program.get("children", []):
            project["users"] = members.get(project["name"], [])
    return tree


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "impactlab" / "data"
    )
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(parser.parse_args().out)
