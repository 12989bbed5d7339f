"""Scheduling policies and their registry: a new policy is one file plus one line here."""

from __future__ import annotations

from typing import Any

from .base import BasePolicy, Context, Policy, PolicyError, Scheduler
from .fairshare import FairShare
from .fifo import Fifo
from .impactful import Impactful
from .legacy import Legacy

REGISTRY: dict[str, type] = {
    "fifo": Fifo,
    "legacy": Legacy,
    "fairshare": FairShare,
    "impactful": Impactful,
}


def make_policy(name: str, **knobs: Any) -> Policy:
    """A fresh policy instance by registered name, with knob overrides."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {sorted(REGISTRY)}") from None
    try:
        return cls(**knobs)
    except TypeError as err:
        raise ValueError(f"policy {name!r}: bad knobs {knobs}: {err}") from None


__all__ = ["REGISTRY", "BasePolicy", "Context", "Policy", "PolicyError", "Scheduler", "make_policy"]
