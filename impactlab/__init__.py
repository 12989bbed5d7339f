"""impactlab: simulate GPU-cluster scheduling, from Ai2's impactful scheduling to the baselines."""

from .budgets import BudgetTree
from .config import SimConfig
from .generator import GeneratorConfig, generate
from .policies import REGISTRY, make_policy
from .simulate import SimResult, simulate
from .trace import TraceError, validate_trace

__all__ = ["REGISTRY", "BudgetTree", "GeneratorConfig", "SimConfig", "SimResult", "TraceError",
           "generate", "make_policy", "simulate", "validate_trace"]
__version__ = "0.1.0"
