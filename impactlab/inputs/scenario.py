"""Scenario files: a cluster, generator parameters and a budget tree in one YAML (shipped ones in impactlab/data/).

::

    name: workshop-88
    cluster: {gpus: 88, gpus_per_node: 8}
    generator: {days: 7, demand: 2.5, funded_load: 0.8, seed: 0}
    budgets: {name: root, children: [...]}   # optional; leaves = projects
    maintenance: [{announce_h: 192, down_h: 216, share: 0.25}]   # optional (inputs.maintenance)

A fleet lists its clusters instead of the cluster's ``gpus`` (``cluster`` then holds
``gpus_per_node`` and ``fair_share``)::

    cluster: {gpus_per_node: 8, fair_share: organisation}
    clusters:
      - {name: jupiter, gpus: 1024}
      - {name: saturn, gpus: 256}

``load_scenario`` returns the ``SimConfig`` and the tree; the tree replaces the synthetic
organisation's (its leaves should name the generator's projects ``p00, p01, ...``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..base.config import SimConfig, fleet_from, parameters
from ..base.files import InputFileError, find_input, read_yaml
from ..base.params import ParamError
from .budgets import BudgetError, BudgetTree
from .maintenance import MaintenanceError, window_from


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and key."""


SECTIONS = {"name", "description", "cluster", "clusters", "generator", "budgets", "maintenance"}
#: Scenario sections hold the declared parameters of their group.
CLUSTER_KEYS = {p.name for p in parameters() if p.group in ("cluster", "fleet")}
GENERATOR_KEYS = {p.name for p in parameters() if p.group == "workload"}


@dataclass(frozen=True)
class Scenario:
    """A named cluster + workload + budget tree, ready for ``simulate(scenario.config, budgets=...)``."""

    name: str
    config: SimConfig
    budgets: BudgetTree | None
    description: str = ""

    def for_policy(self, policy: str) -> SimConfig:
        """The scenario's config under another policy."""
        return replace(self.config, policy=policy)


def load_scenario(path: str | Path, policy: str = "impactful") -> Scenario:
    """Read and check a scenario file; unknown keys and bad values raise BudgetError or ValueError."""
    given, path = str(path), find_input(path)
    try:
        spec = read_yaml(path)
    except InputFileError as err:
        raise ScenarioError(f"{path}: cannot read scenario: {err}") from None
    if not isinstance(spec, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping with {sorted(SECTIONS)}")
    _only(spec, SECTIONS, str(path))
    cluster, gen = spec.get("cluster") or {}, spec.get("generator") or {}
    _only(cluster, CLUSTER_KEYS, f"{path}: cluster")
    _only(gen, GENERATOR_KEYS, f"{path}: generator")
    tree = (
        BudgetTree.from_dict(spec["budgets"], source=f"{path}: budgets")
        if spec.get("budgets")
        else None
    )
    if tree is not None and not tree.leaves:
        raise BudgetError(f"{path}: budgets: the tree has no projects")
    try:  # the config names the file for its tree, so that it alone rebuilds the run
        fleet = spec.get("clusters")
        if fleet is not None:
            if not isinstance(fleet, list) or not fleet:
                raise ScenarioError(f"{path}: clusters: a list of clusters (name, gpus)")
            if "gpus" in cluster:
                raise ScenarioError(
                    f"{path}: cluster: gpus is the sum of the clusters' (drop it, or drop clusters)"
                )
            cluster = {**cluster, "clusters": fleet_from(fleet)}
        config = SimConfig(policy=policy).with_params(
            {**cluster, **gen, "budgets_path": given if tree is not None else None}
        )
        windows = spec.get("maintenance") or []
        if not isinstance(windows, list) or not all(isinstance(w, dict) for w in windows):
            raise ScenarioError(f"{path}: maintenance: a list of windows (mappings)")
        plan = tuple(
            window_from(w, f"{path}: maintenance, window {k + 1}") for k, w in enumerate(windows)
        )
        config = replace(config, maintenance=plan) if plan else config
    except (ParamError, MaintenanceError) as err:
        raise ScenarioError(f"{path}: {err}" if str(path) not in str(err) else str(err)) from None
    return Scenario(
        str(spec.get("name", path.stem)), config, tree, str(spec.get("description", ""))
    )


def scenario_dict(
    name: str, config: SimConfig, tree: BudgetTree | None, description: str = ""
) -> dict[str, Any]:
    """The YAML form of a scenario (inverse of ``load_scenario``)."""
    flat = config.flat()
    defaults = SimConfig().flat()
    gen = {
        k: flat[k]
        for k in sorted(GENERATOR_KEYS)
        if k in ("days", "demand", "funded_load", "seed") or flat[k] != defaults[k]
    }
    out: dict[str, Any] = {
        "name": name,
        "description": description,
        "cluster": {k: flat[k] for k in ("gpus", "gpus_per_node")},
        "generator": gen,
    }
    if config.clusters:
        out["cluster"] = {"gpus_per_node": config.gpus_per_node, "fair_share": config.fair_share}
        out["clusters"] = [
            {"name": c.name, "gpus": c.gpus, **({"takes": list(c.takes)} if c.takes else {})}
            for c in config.clusters
        ]
    if tree is not None:
        out["budgets"] = tree.to_dict()
    if config.maintenance:
        out["maintenance"] = [
            {k: (list(v) if k == "nodes" else v) for k, v in dataclasses.asdict(w).items()}
            for w in config.maintenance
        ]
    return out


def _only(mapping: Any, allowed: set[str], where: str) -> None:
    if not isinstance(mapping, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {mapping!r}")
    extra = sorted(set(mapping) - allowed)
    if extra:
        raise ScenarioError(f"{where}: unknown key(s) {extra}; allowed {sorted(allowed)}")
