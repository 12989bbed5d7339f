"""impactlab: simulate GPU-cluster scheduling, from Ai2's impactful scheduling to the baselines.

The public names below load on first use (PEP 562), so that ``import impactlab`` and the
command line start without pandas until a run needs it: ``impactlab simulate --out /bad``
answers at once, and a notebook pays for what it uses.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

#: Each public name and the module that defines it.
_SOURCES = {
    "budget_io": ("budgets_from_trace", "load_budgets"),
    "budgets": ("BudgetError", "BudgetTree"),
    "config": ("GeneratorConfig", "HealthConfig", "SimConfig", "parameter", "parameters"),
    "files": ("OutputPathError",),
    "generator": ("generate",),
    "overview": ("Overview", "overview"),
    "params": ("Param", "ParamError", "knob"),
    "policies": ("BasePolicy", "Context", "Policy", "PolicyError", "Scheduler", "make_policy"),
    "registry": ("REGISTRY", "policy_names", "register_policy"),
    "results": ("SimResult", "metrics_frame"),
    "scenario": ("load_scenario",),
    "simulate": ("PAIRINGS", "compare", "pairing", "simulate"),
    "sweep": ("load_sweep", "summarise_sweep", "sweep"),
    "trace": ("TraceError", "validate_trace"),
    "traces": ("LoadReport", "load_trace"),
    "workload": ("Inputs", "prepare"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}
__all__ = sorted(_MODULE_OF)
__version__ = "0.1.0"


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


class _Package(types.ModuleType):
    """Importing ``impactlab.simulate`` (or ``.sweep``, ``.overview``) sets the package attribute
    of that name to the module; the public function of the same name keeps it, as it did when this
    package imported everything eagerly. (``importlib.import_module`` still gives the module.)"""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _MODULE_OF and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # what type checkers and IDEs read; at run time, __getattr__ above
    from .budget_io import budgets_from_trace, load_budgets
    from .budgets import BudgetError, BudgetTree
    from .config import GeneratorConfig, HealthConfig, SimConfig, parameter, parameters
    from .files import OutputPathError
    from .generator import generate
    from .overview import Overview, overview
    from .params import Param, ParamError, knob
    from .policies import BasePolicy, Context, Policy, PolicyError, Scheduler, make_policy
    from .registry import REGISTRY, policy_names, register_policy
    from .results import SimResult, metrics_frame
    from .scenario import load_scenario
    from .simulate import PAIRINGS, compare, pairing, simulate
    from .sweep import load_sweep, summarise_sweep, sweep
    from .trace import TraceError, validate_trace
    from .traces import LoadReport, load_trace
    from .workload import Inputs, prepare
