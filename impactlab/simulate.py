"""One entry point: ``simulate(config, trace, budgets) -> SimResult``."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from .budget_io import check_projects
from .budgets import BudgetTree
from .cluster import Cluster
from .config import SimConfig
from .engine import Engine
from .events import events_frame, jobs_from_trace
from .metrics import Window, health_series, share_series, summarise
from .policies import Policy, make_policy
from .trace import TraceError
from .units import DAY_S
from .workload import Inputs, prepare

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
             on_unknown_project: Literal["unallocated", "error"] | None = None, *,
             inputs: Inputs | None = None, label: str = "") -> SimResult:
    """Replay a trace (or the synthetic workload of ``config``) under ``config.policy``.

    The workload comes from ``config`` (generator knobs, or ``trace_path`` / ``budgets_path``);
    ``trace`` (a DataFrame in the schema) and ``budgets`` override it, and ``inputs`` (from
    ``impactlab.workload.prepare``) reuses one already built. ``policy`` overrides the
    registered policy with an instance (a researcher's draft, or a test oracle);
    ``config.policy`` then only names the run. Jobs whose project is not a leaf of the tree run
    unallocated and are reported (log warning, ``SimResult.unknown_projects``), or raise a
    BudgetError when ``on_unknown_project`` (default: ``config.unknown_projects``) is "error".
    """
    config = config or SimConfig()
    inputs = inputs or prepare(config, trace, budgets)
    trace, tree = inputs.trace, inputs.tree
    too_big = trace["gpus"] > config.gpus
    if too_big.any():
        row = int(too_big.to_numpy().argmax())
        raise TraceError("trace", row, "gpus", f"job larger than the cluster ({config.gpus} GPUs)")
    unknown = check_projects(trace, tree, on_unknown_project or config.unknown_projects)  # type: ignore[arg-type]
    jobs = jobs_from_trace(trace, tree, config.gpus_per_node)
    policy = policy or make_policy(config.policy, **config.policy_knobs)
    engine = Engine(jobs, tree, Cluster(config.nodes, config.gpus_per_node), policy,
                    config.restart_overhead_s, config.horizon_s, config.health, config.seed)
    began = time.perf_counter()
    event_log = engine.run()
    wall = time.perf_counter() - began
    log.info("%s: %d jobs, %d events in %.2f s", config.policy, len(jobs), len(event_log), wall)
    return SimResult(config, trace, tree, events_frame(event_log), wall, unknown_projects=unknown)


def compare(config: SimConfig | None = None,
            policies: Sequence[str] | Mapping[str, Mapping[str, Any]] = ("legacy", "impactful"),
            trace: pd.DataFrame | None = None, budgets: BudgetTree | None = None) -> list[SimResult]:
    """Replay one workload under several policies (or variants), with one reporting window.

    ``policies`` is a list of policy names, or a mapping from a label to parameter overrides
    (``{"cap 4 h": {"policy": "impactful", "cap_hours": 4}}``; a label that names a policy
    needs no "policy" key). The workload is built once; each run's knobs are the config's,
    kept where the run's policy declares them. Results come back in order, labelled.
    """
    config = config or SimConfig()
    variants = _variants(policies)
    base = replace(config, warmup_days=config.warmup_s / DAY_S)  # the same window for every run
    inputs = prepare(base, trace, budgets)
    runs = [(label, base.with_params(changes)) for label, changes in variants.items()]
    return [simulate(cfg, inputs=inputs, label=label) for label, cfg in runs]


def _variants(policies: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Label -> parameter overrides; a plain name is a policy with its default knobs."""
    if isinstance(policies, str):
        raise TypeError("policies is a list of names or a mapping of label -> overrides, not a string")
    if not isinstance(policies, Mapping):
        return {name: {"policy": name} for name in policies}
    return {label: {"policy": label, **changes} if "policy" not in changes else dict(changes)
            for label, changes in policies.items()}
