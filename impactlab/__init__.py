"""impactlab: simulate GPU-cluster scheduling, from Ai2's impactful scheduling to the baselines.

The public names below load on first use (PEP 562), so that ``import impactlab`` and the
command line start without pandas until a run needs it: ``impactlab simulate --out /bad``
answers at once, and a notebook pays for what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base.version import VERSION

#: Each public name and the module that defines it.
_SOURCES = {
    "inputs.budget_io": ("budgets_from_trace", "load_budgets"),
    "inputs.budgets": ("BudgetError", "BudgetTree"),
    "base.config": (
        "ClusterSpec",
        "GeneratorConfig",
        "HealthConfig",
        "Maintenance",
        "SimConfig",
        "parameter",
        "parameters",
    ),
    "base.files": ("OutputPathError",),
    "inputs.generator": ("generate", "generate_fleet"),
    "inputs.maintenance": ("MaintenanceError", "load_maintenance"),
    "inputs.overview": ("Overview", "overview"),
    "base.params": ("Param", "ParamError", "knob"),
    "policies": (
        "Attempt",
        "BasePolicy",
        "Context",
        "Explainer",
        "Job",
        "Policy",
        "PolicyError",
        "Scheduler",
        "make_policy",
    ),
    "base.registry": ("REGISTRY", "policy_names", "register_policy"),
    "analysis.results": ("SimResult", "metrics_frame"),
    "inputs.scenario": ("load_scenario",),
    "runs.simulate": ("PAIRINGS", "compare", "compare_fleets", "pairing", "simulate"),
    "runs.sweep": ("load_sweep", "summarise_sweep", "sweep"),
    "inputs.trace": ("TraceError", "validate_trace"),
    "inputs.traces": ("LoadReport", "load_trace"),
    "inputs.workload": ("Inputs", "prepare"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}
__all__ = sorted(_MODULE_OF)
__version__ = VERSION


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (then the name is an ordinary attribute)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'impactlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and IDEs read; at run time, __getattr__ above
    from .analysis.results import SimResult, metrics_frame
    from .base.config import (
        ClusterSpec,
        GeneratorConfig,
        HealthConfig,
        Maintenance,
        SimConfig,
        parameter,
        parameters,
    )
    from .base.files import OutputPathError
    from .base.params import Param, ParamError, knob
    from .base.registry import REGISTRY, policy_names, register_policy
    from .inputs.budget_io import budgets_from_trace, load_budgets
    from .inputs.budgets import BudgetError, BudgetTree
    from .inputs.generator import generate, generate_fleet
    from .inputs.maintenance import MaintenanceError, load_maintenance
    from .inputs.overview import Overview, overview
    from .inputs.scenario import load_scenario
    from .inputs.trace import TraceError, validate_trace
    from .inputs.traces import LoadReport, load_trace
    from .inputs.workload import Inputs, prepare
    from .policies import (
        Attempt,
        BasePolicy,
        Context,
        Explainer,
        Job,
        Policy,
        PolicyError,
        Scheduler,
        make_policy,
    )
    from .runs.simulate import PAIRINGS, compare, compare_fleets, pairing, simulate
    from .runs.sweep import load_sweep, summarise_sweep, sweep
