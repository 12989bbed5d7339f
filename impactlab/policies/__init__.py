"""Scheduling policies: the protocol, the built-ins (one file each) and the registry view.

The registry itself lives in ``impactlab.base.registry`` (the bottom layer, so that a config can
check a policy's knobs); a new policy is one file plus ``impactlab.register_policy``.
"""

from __future__ import annotations

from typing import Any

from ..base.params import ParamError
from ..base.registry import REGISTRY, check_knobs, policy_class, register_policy
from ..sim.events import Job
from ..sim.policy import Attempt, BasePolicy, Context, Explainer, Policy, PolicyError, Scheduler

__all__ = [
    "REGISTRY",
    "Attempt",
    "BasePolicy",
    "Context",
    "Explainer",
    "Job",
    "Policy",
    "PolicyError",
    "Scheduler",
    "make_policy",
    "register_policy",
]


def make_policy(name: str, **knobs: Any) -> Policy:
    """A fresh policy instance by registered name (or ``"module:Class"`` spec), with knob overrides."""
    try:
        return policy_class(name)(**check_knobs(name, knobs))
    except ParamError as err:
        raise ValueError(str(err)) from None
