"""One entry point: ``simulate(config, trace, budgets) -> SimResult``."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import pandas as pd

from .budget_io import check_projects
from .budgets import BudgetTree
from .cluster import Cluster
from .config import SimConfig
from .engine import Engine
from .events import events_frame, jobs_from_trace
from .generator import generate
from .metrics import Window, health_series, share_series, summarise
from .policies import Policy, make_policy
from .trace import TraceError, validate_trace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimResult:
    """A finished run: its config and inputs, the event log and everything derived from it."""

    config: SimConfig
    trace: pd.DataFrame
    tree: BudgetTree
    events: pd.DataFrame
    sim_wall_s: float
    #: Projects named in the trace but not in the budget tree (job counts); their jobs ran unallocated.
    unknown_projects: dict[str, int] = field(default_factory=dict)

    @property
    def window(self) -> Window:
        """The reporting window (after the warm-up)."""
        return Window(self.config.warmup_s, self.config.horizon_s, self.config.gpus)

    @cached_property
    def _derived(self) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
        return summarise(self.events, self.trace, self.tree, self.window, self.config.gpus_per_node,
                         self.config.horizon_s)

    @property
    def jobs(self) -> pd.DataFrame:
        """Per-job table derived from the event log."""
        return self._derived[1]

    @property
    def budgets(self) -> pd.DataFrame:
        """Per budget node: entitled, owed and delivered GPU-seconds in the window."""
        return self._derived[2]

    def health_series(self, bucket_s: float = 3600.0) -> pd.DataFrame:
        """Per time bucket: mean healthy GPUs, failures and repairs by kind."""
        return health_series(self.events, self.config.gpus, self.config.gpus_per_node, self.config.horizon_s,
                             bucket_s)

    def share_series(self, bucket_s: float = 6 * 3600.0) -> pd.DataFrame:
        """Per time bucket and project: delivered share of healthy capacity against entitlement."""
        return share_series(self.events, self.jobs, self.tree, self.config.gpus, self.config.gpus_per_node,
                            self.config.horizon_s, bucket_s)

    def summary(self) -> dict:
        """Headline metrics (fractions in [0, 1], waits in seconds) with the run's identity."""
        head = {"policy": self.config.policy, "gpus": self.config.gpus, "sim_wall_s": self.sim_wall_s}
        return {**head, **self._derived[0]}

    def save(self, out: str | Path) -> Path:
        """Write events, jobs and budgets (Parquet) and summary + config (JSON) into ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.events.to_parquet(out / "events.parquet", index=False)
        self.jobs.to_parquet(out / "jobs.parquet", index=False)
        self.budgets.to_parquet(out / "budgets.parquet", index=False)
        (out / "summary.json").write_text(json.dumps(self.summary(), indent=2))
        config = {"config": self.config.to_dict(), "budgets": self.tree.to_dict()}
        (out / "config.json").write_text(json.dumps(config, indent=2))
        return out


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
    else:
        trace = validate_trace(trace, max_gpus=config.gpus)
        tree = budgets or _flat_tree(trace)
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
    return SimResult(config, trace, tree, events_frame(event_log), wall, unknown_projects=unknown)


def _flat_tree(trace: pd.DataFrame) -> BudgetTree:
    """Without a budget tree, every project in the trace gets an equal share."""
    projects = sorted(p for p in trace["project"].unique() if p)
    return BudgetTree.flat({p: 1.0 for p in projects}) if projects else BudgetTree.from_dict({"name": "root"})
