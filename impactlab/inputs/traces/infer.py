"""Documented heuristics for what a trace does not record: job kinds, and projects from users."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...base.units import HOUR_S


@dataclass(frozen=True)
class KindRule:
    """Thresholds of the kind heuristic (docs/traces.md); the first rule that matches wins.

    1. ``gpus >= pretrain_gpus`` and ``duration >= pretrain_s``       -> ``pretrain``
    2. ``gpus >= training_gpus`` and ``duration >= training_s``       -> ``training``
    3. ``duration <= short_s`` and ``gpus <= short_gpus``:
       ended FAILED / CANCELLED (or similar)                        -> ``debug``;
       otherwise                                                    -> ``eval``
    4. anything else                                                -> ``other``
    """

    pretrain_gpus: int = 64
    pretrain_s: float = 12 * HOUR_S
    training_gpus: int = 8
    training_s: float = 1 * HOUR_S
    short_s: float = 30 * 60.0
    short_gpus: int = 8


#: Final states that mark a short job as a debugging attempt rather than an evaluation.
DEBUG_STATES = frozenset({"failed", "cancelled", "killed", "timeout", "node_fail", "out_of_memory"})


def infer_kinds(
    gpus: pd.Series, duration_s: pd.Series, state: pd.Series | None, rule: KindRule
) -> np.ndarray:
    """Kinds for jobs whose trace does not record one, by ``rule`` (vectorised)."""
    g, d = gpus.to_numpy(dtype=float), duration_s.to_numpy(dtype=float)
    failed = np.zeros(len(g), bool)
    if state is not None:
        failed = state.fillna("").astype(str).str.lower().isin(DEBUG_STATES).to_numpy()
    short = (d <= rule.short_s) & (g <= rule.short_gpus)
    conditions = [
        (g >= rule.pretrain_gpus) & (d >= rule.pretrain_s),
        (g >= rule.training_gpus) & (d >= rule.training_s),
        short & failed,
        short,
    ]
    return np.select(conditions, ["pretrain", "training", "debug", "eval"], default="other").astype(
        object
    )


def projects_from_users(users: pd.Series, seed: int, users_per_project: int) -> pd.Series:
    """Group users into ``proj00..`` by a seeded rule, for traces that record no project.

    The distinct users, sorted, are shuffled by ``numpy.random.default_rng(seed)`` and dealt
    round-robin into ``max(1, round(n_users / users_per_project))`` projects. The same users
    and seed always give the same projects.
    """
    names = np.array(sorted(users.fillna("unknown").astype(str).unique()))
    n_projects = max(1, round(len(names) / max(1, users_per_project)))
    order = np.random.default_rng(seed).permutation(len(names))
    width = len(str(n_projects - 1)) if n_projects > 1 else 1
    labels = np.array(
        [f"proj{i % n_projects:0{max(2, width)}d}" for i in range(len(names))], dtype=object
    )
    assigned = dict(zip(names[order], labels))
    return users.fillna("unknown").astype(str).map(assigned)
