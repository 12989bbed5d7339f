"""Budget trees from files and from history, and the check of a trace against a tree.

YAML form (docs/model.md section 4; docs/traces.md): nested nodes ``{name, share, children}``;
leaves are projects and may list ``users`` (informational). ``budgets_from_trace`` starts a
tree from what a trace's projects used; ``unknown_projects`` finds jobs no leaf funds.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import pandas as pd

from ..base.units import plural
from .budgets import BudgetError, BudgetTree

log = logging.getLogger(__name__)

RULES = ("gpu_hours", "jobs", "equal")


def load_budgets(path: str | Path) -> BudgetTree:
    """A validated budget tree from a YAML file (a bare tree, or a scenario's ``budgets`` key)."""
    return BudgetTree.from_yaml(path)


def budgets_from_trace(
    trace: pd.DataFrame, by: str = "project", rule: str = "gpu_hours", name: str = "root"
) -> BudgetTree:
    """A one-level tree whose leaves are the values of column ``by`` (empty = unallocated, left out).

    ``rule``: ``gpu_hours`` (share = GPU-hours the leaf submitted), ``jobs`` (job count) or
    ``equal``. With ``by="project"`` each leaf lists the users seen in it (informational). For
    another column (e.g. ``user``), charge jobs to it with ``trace.assign(project=trace[by])``.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if by not in trace.columns:
        raise ValueError(f"no column {by!r} in the trace")
    funded = trace[trace[by].fillna("").astype(str).str.strip() != ""]
    if funded.empty:
        raise BudgetError(f"budgets_from_trace: no job has a value in column {by!r}")
    keys = funded[by].astype(str).str.strip()
    weight = {
        "gpu_hours": funded["gpus"] * funded["duration_s"] / 3600.0,
        "jobs": pd.Series(1.0, index=funded.index),
        "equal": pd.Series(0.0, index=funded.index),
    }[rule]
    shares = weight.groupby(keys).sum()
    users = (
        funded.groupby(keys)["user"].apply(lambda u: sorted(set(u.astype(str))))
        if "user" in funded
        else {}
    )
    children = []
    for leaf, value in shares.items():
        node = {
            "name": leaf,
            "share": 1.0 if rule == "equal" else max(round(float(value), 2), 0.01),
        }
        if by == "project" and len(users):
            node["users"] = users[leaf]
        children.append(node)
    return BudgetTree.from_dict({"name": name, "children": children}, source="budgets_from_trace")


def unknown_projects(trace: pd.DataFrame, tree: BudgetTree) -> dict[str, int]:
    """Projects named by jobs that charge no leaf of ``tree``, with their job counts."""
    named = trace["project"].fillna("").astype(str)
    users = (
        trace["user"].fillna("").astype(str)
        if "user" in trace
        else pd.Series("", index=trace.index)
    )
    missing = named[(named != "").to_numpy() & (tree.leaves_for(named, users) < 0)]
    return {str(k): int(v) for k, v in missing.value_counts().sort_index().items()}


def _unfunded_text(trace: pd.DataFrame, tree: BudgetTree, missing: dict[str, int]) -> str:
    """Why the jobs of ``missing`` projects charge no leaf: the project is not in the tree, or
    it is a node of per-user leaves and their users have none (those users named)."""
    groups = set(tree.names) - {tree.names[i] for i in tree.leaves}
    parts = []
    absent = {p: n for p, n in missing.items() if p not in groups}
    if absent:
        listed = ", ".join(f"{p} ({n} job{plural(n)})" for p, n in list(absent.items())[:10])
        more = f" and {len(absent) - 10} more" if len(absent) > 10 else ""
        parts.append(f"projects not in the budget tree: {listed}{more}")
    for project in [p for p in missing if p in groups][:10]:
        have = {tree.names[i] for i in tree.leaves if tree.names[tree.parent[i]] == project}
        mine = trace["project"].fillna("").astype(str) == project
        users = trace.loc[mine, "user"].fillna("").astype(str) if "user" in trace else []
        lacking = sorted(set(users) - have - {""})
        named = ", ".join(lacking[:5]) + (
            f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        )
        why = f"users {named} have none" if lacking else "some of its jobs name no user"
        parts.append(
            f"project {project} ({missing[project]} job{plural(missing[project])}) funds its users by leaves: {why}"
        )
    return "; ".join(parts)


def check_projects(
    trace: pd.DataFrame,
    tree: BudgetTree,
    on_unknown: Literal["unallocated", "error"] = "unallocated",
) -> dict[str, int]:
    """Report jobs whose project the tree does not fund; they run unallocated, or raise with "error"."""
    if on_unknown not in ("unallocated", "error"):
        raise ValueError(f"on_unknown must be 'unallocated' or 'error', got {on_unknown!r}")
    missing = unknown_projects(trace, tree)
    if missing:
        text = _unfunded_text(trace, tree, missing)
        if on_unknown == "error":
            raise BudgetError(text)
        log.warning("%d jobs run unallocated: %s", sum(missing.values()), text)
    return missing
