"""impactlab: simulate GPU-cluster scheduling, from Ai2's impactful scheduling to the baselines."""

from .budget_io import budgets_from_trace, load_budgets
from .budgets import BudgetError, BudgetTree
from .config import GeneratorConfig, HealthConfig, SimConfig, parameter, parameters
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

__all__ = ["PAIRINGS", "REGISTRY", "BasePolicy", "BudgetError", "BudgetTree", "Context", "GeneratorConfig", "HealthConfig",
           "Inputs", "LoadReport", "Overview", "Param", "ParamError", "Policy", "PolicyError", "Scheduler", "SimConfig",
           "SimResult", "TraceError", "budgets_from_trace", "compare", "generate", "knob", "load_budgets",
           "load_scenario", "load_sweep", "load_trace", "make_policy", "metrics_frame", "overview", "pairing", "parameter",
           "parameters", "policy_names", "prepare", "register_policy", "simulate", "summarise_sweep", "sweep",
           "validate_trace"]
__version__ = "0.1.0"
