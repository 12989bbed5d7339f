"""impactlab: simulate GPU-cluster scheduling, from Ai2's impactful scheduling to the baselines."""

from .budget_io import budgets_from_trace, load_budgets
from .budgets import BudgetError, BudgetTree
from .config import SimConfig
from .generator import GeneratorConfig, generate
from .policies import REGISTRY, make_policy
from .simulate import SimResult, simulate
from .trace import TraceError, validate_trace
from .traces import LoadReport, load_trace

__all__ = ["REGISTRY", "BudgetError", "BudgetTree", "GeneratorConfig", "LoadReport", "SimConfig", "SimResult",
           "TraceError", "budgets_from_trace", "generate", "load_budgets", "load_trace", "make_policy", "simulate",
           "validate_trace"]
__version__ = "0.1.0"
