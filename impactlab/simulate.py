"""One entry point: ``simulate(config, trace, budgets) -> SimResult`` (``SimResult`` lives in
``impactlab.results``; it is re-exported here)."""

from __future__ import annotations

import logging
import time
from typing import Literal

import pandas as pd

from .budget_io import check_projects
from .budgets import BudgetTree
from .cluster import Cluster
from .config import SimConfig
from .engine import Engine
from .events import events_frame, jobs_from_trace
from .generator import generate
from .policies import Policy, make_policy
from .results import SimResult
from .trace import TraceError, validate_trace

log = logging.getLogger(__name__)


def simulate(config: SimConfig | None = None, trace: pd.DataFrame | None = None,
             budgets: BudgetTree | None = None, policy: Policy | None = None,
             on_unknown_project: Literal["unallocated", "error"] = "unallocated") -> SimResult:
    """Replay a trace (or the synthetic workload of ``config``) under ``config.policy``.

    ``policy`` overrides the registered policy with an instance (a researcher's draft, or a
    test oracle); ``config.policy`` then only names the run. Without ``config``, the default
    scenario (``SimConfig()``). Jobs whose project is not a leaf of ``budgets`` run unallocated
    and are reported (log warning, ``SimResult.unknown_projects``), or raise a BudgetError with
    ``on_unknown_project="error"``.
    """
    config = config or SimConfig()
    if trace is None:
        workload = generate(config.generator())
        trace, tree = workload.trace, budgets or workload.tree
        provenance = {"source": "synthetic", "seed": config.seed, "rows": len(trace)}
    else:
        trace = validate_trace(trace, max_gpus=config.gpus)
        tree = budgets or _flat_tree(trace)
        provenance = {"source": "dataframe", "rows": len(trace)}
    too_big = trace["gpus"] > config.gpus
    if too_big.any():
        row = int(too_big.to_numpy().argmax())
        raise TraceError("trace", row, "gpus", f"job larger than the cluster ({config.gpus} GPUs)")
    unknown = check_projects(trace, tree, on_unknown_project)
    jobs = jobs_from_trace(trace, tree, config.gpus_per_node)
    policy = policy or make_policy(config.policy, **config.policy_knobs)
    engine = Engine(jobs, tree, Cluster(config.nodes, config.gpus_per_node), policy,
                    config.restart_overhead_s, config.horizon_s, config.health, config.seed)
    began = time.perf_counter()
    event_log = engine.run()
    wall = time.perf_counter() - began
    log.info("%s: %d jobs, %d events in %.2f s", config.policy, len(jobs), len(event_log), wall)
    return SimResult(config, trace, tree, events_frame(event_log), wall, unknown_projects=unknown,
                     provenance=provenance)


def _flat_tree(trace: pd.DataFrame) -> BudgetTree:
    """Without a budget tree, every project in the trace gets an equal share."""
    projects = sorted(p for p in trace["project"].unique() if p)
    return BudgetTree.flat({p: 1.0 for p in projects}) if projects else BudgetTree.from_dict({"name": "root"})
