"""The inputs of a run, from its config: a validated trace and a budget tree, with provenance.

A config names its workload (the synthetic generator's knobs, or a trace file with its
reshaping options and a budget file); ``prepare`` builds it once so that several policies can
replay the same rows (``compare``), and records where it came from next to the results.
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..base.config import DAYS, SimConfig
from ..base.files import find_input
from ..base.units import DAY_S, HOUR_S
from .budget_io import load_budgets
from .budgets import BudgetTree
from .generator import generate, generate_fleet
from .overview import span_days
from .trace import TraceError, validate_trace
from .traces import load
from .traces.reshape import default_patience, fill_contract, protect_for_own_length, window

log = logging.getLogger(__name__)

#: Config fields that do not change the inputs (policy side, reporting, health).
_RUN_SIDE = frozenset({"policy", "policy_knobs", "restart_overhead_s", "warmup_days", "health"})


@dataclass(frozen=True)
class Inputs:
    """A run's trace (validated, in the schema) and budget tree, with where they came from."""

    trace: pd.DataFrame
    tree: BudgetTree
    provenance: dict[str, Any] = field(default_factory=dict)


def inputs_key(config: SimConfig) -> tuple:
    """What determines a config's inputs: equal keys, identical trace and tree."""
    return tuple(getattr(config, f.name) for f in fields(config) if f.name not in _RUN_SIDE)


def prepare(
    config: SimConfig, trace: pd.DataFrame | None = None, budgets: BudgetTree | None = None
) -> Inputs:
    """The trace and tree ``config`` describes; ``trace`` / ``budgets`` override its sources."""
    tree = budgets
    provenance: dict[str, Any]
    if tree is None and config.budgets_path:
        tree = load_budgets(config.budgets_path)
    if trace is not None:
        loaded = "load_report" in trace.attrs  # from a loader (a real trace), not written by hand
        # (in a fleet, the cluster each job may run on decides: inputs.fleet names the job)
        max_gpus = None if config.clusters else config.gpus
        trace, provenance = validate_trace(trace, max_gpus=max_gpus), {"source": "dataframe"}
        if loaded:
            trace, provenance = default_contract(trace, config, provenance)
    elif config.trace_path:
        trace, provenance = read_trace(config)
        trace, provenance = default_contract(trace, config, provenance)
    else:
        work = (
            generate_fleet(config.generator(), [(c.name, c.gpus) for c in config.clusters])
            if config.clusters
            else generate(config.generator())
        )
        trace, tree = work.trace, tree or work.tree
        provenance = {"source": "synthetic", "seed": config.seed}
    if (
        config.patience_hours is not None and provenance["source"] != "synthetic"
    ):  # real traces record none
        trace = default_patience(trace, config.patience_hours * HOUR_S)
    tree = (tree or _flat_tree(trace)).with_shares(config.budget_shares)
    provenance["rows"] = len(trace)
    if config.budgets_path and budgets is None:
        provenance["budgets_path"] = config.budgets_path
    return Inputs(trace, tree, provenance)


#: Synthetic jobs per GPU-day per unit of offered load: 2.0 at demand 2.5, 2.4 at demand 1.5 (measured
#: on 88-2048 GPUs); the estimate takes the high end.
JOBS_PER_GPU_DAY = 2.4
#: Wall seconds per job and policy, end to end (generation, simulation, metrics), measured on the
#: default scenario on a 2-core machine; an estimate for planning, not a promise.
SECONDS_PER_JOB = 1e-4


@dataclass(frozen=True)
class SizeEstimate:
    """How big a run will be, before building its workload (``estimate_size``)."""

    jobs: int

    @property
    def seconds(self) -> float:
        """Rough wall time per policy."""
        return self.jobs * SECONDS_PER_JOB


def estimate_size(config: SimConfig) -> SizeEstimate | None:
    """The jobs a synthetic run will generate (an upper estimate); None for a trace, whose rows
    bound the run and are counted when it is read."""
    if config.trace_path:
        return None
    return SizeEstimate(
        math.ceil(JOBS_PER_GPU_DAY * config.demand * config.gpus * config.horizon_s / DAY_S)
    )


def read_trace(config: SimConfig) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The config's trace file, loaded, reshaped and validated, with its provenance."""
    path = Path(config.trace_path or "")  # as given: load() finds a shipped file by its name
    loaded = load(
        path,
        config.trace_format,
        max_gpus=max(c.gpus for c in config.clusters) if config.clusters else config.gpus,
        oversize="skip" if config.skip_large else "error",
    )
    report = loaded.report
    if report.skipped:
        reasons = "; ".join(f"{n} {why}" for why, n in report.skipped.items())
        log.warning(
            "%s: loaded %d of %d rows (skipped: %s)", path, report.jobs, report.rows, reasons
        )
    trace = loaded.trace
    if config.trace_start_days or config.trace_days is not None:
        trace = window(trace, config.trace_start_days, config.trace_days)
    if config.fill_contract:
        trace = fill_contract(trace)
    provenance = {
        "source": "file",
        "path": config.trace_path,  # as given (a shipped file by its bare name); sha256 pins it
        "format": report.format,
        "sha256": file_hash(find_input(path)),
        "load_report": report.to_dict(),
    }
    return trace, provenance


def default_contract(
    trace: pd.DataFrame, config: SimConfig, provenance: dict[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A replayed trace that declares no minimum runtimes gets ``config.contract_default`` (said
    once, in the log, and kept in the provenance); one that declares any, or ``fill_contract``,
    keeps its own."""
    if config.fill_contract or (trace["min_runtime_s"] > 0).any():
        return trace, provenance
    if config.contract_default == "none":
        return trace, {
            **provenance,
            "contract": "none declared; replayed unprotected (contract_default=none)",
        }
    if config.contract_default == "per-kind":
        trace, said = (
            fill_contract(trace, ("min_runtime_s",)),
            "each job gets its kind's default minimum runtime",
        )
    else:
        trace, said = (
            protect_for_own_length(trace),
            "each job is protected for its own length (under a policy with a contract, up to its cap)",
        )
    log.warning(
        "the trace declares no minimum runtimes: %s (contract_default=%s; contract_default=none replays it "
        "unprotected)",
        said,
        config.contract_default,
    )
    return trace, {
        **provenance,
        "contract": f"none declared: {said} (contract_default={config.contract_default})",
    }


def file_hash(path: Path) -> str:
    """SHA-256 of a trace's bytes (of each file's name and bytes, for a folder of tables)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _flat_tree(trace: pd.DataFrame) -> BudgetTree:
    """Without a budget tree, every project in the trace gets an equal share."""
    projects = sorted(p for p in trace["project"].unique() if p)
    return (
        BudgetTree.flat({p: 1.0 for p in projects})
        if projects
        else BudgetTree.from_dict({"name": "root"})
    )


def trace_span_days(trace: pd.DataFrame) -> float:
    """A trace's span (``impactlab.inputs.overview.span_days``: up to its last submission, rounded up
    to the hour)."""
    return span_days(trace)


def fit(config: SimConfig, inputs: Inputs) -> SimConfig:
    """``config`` with its span filled in: the trace's when it follows a replayed trace (a file
    or a DataFrame), the synthetic workload's 14 days otherwise."""
    if config.days is not None:
        return config
    if inputs.provenance.get("source") == "synthetic":
        return replace(config, days=config.horizon_s / DAY_S)
    days, most = trace_span_days(inputs.trace), DAYS.hi
    assert most is not None  # (the knob is bounded)
    if days > most:  # (else the config would blame ``days``, which no one gave)
        last = inputs.trace.loc[inputs.trace["submit_s"].idxmax()]
        raise TraceError(
            str(inputs.provenance.get("path") or "trace"),
            None,
            "submit_s",
            f"job {last['job_id']} is submitted {last['submit_s']:g} s after time 0, so a replay "
            f"of the whole trace would cover {days:,.0f} days, more than a run covers "
            f"({most:g}): give days (--days) to replay its start, or check that the column "
            "counts seconds",
        )
    log.info("simulating the trace's whole span: %.2f days", days)
    return replace(config, days=days)
