"""Reshape a real trace to a question: a time window, a target cluster size, contract fields.

Each function returns a new validated trace and logs what it dropped; the record of steps is
appended to ``trace.attrs["reshape"]`` (a list of strings).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...base.units import DAY_S
from ..generator import SPECS
from ..trace import KINDS, validate_trace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Contract:
    """What a job of one kind declares when its trace does not say."""

    min_runtime_s: float
    checkpoint_s: float
    util: float


def _contract(spec_name: str) -> Contract:
    spec = SPECS[spec_name]
    return Contract(spec.min_runtime_s, spec.checkpoint_s, spec.util)


#: The contract each kind declares by default (``fill_contract``; ``contract_default="per-kind"``):
#: the synthetic generator's (one source of truth), ``other`` from its ``search`` spec.
KIND_CONTRACTS: dict[str, Contract] = {k: _contract("search" if k == "other" else k) for k in KINDS}


def window(trace: pd.DataFrame, start_days: float = 0.0, days: float | None = None) -> pd.DataFrame:
    """Jobs submitted in ``[start, start + days)``, with ``submit_s`` counted from the window start.

    Jobs submitted before the window are left out even if they would still run in it.
    """
    if start_days < 0 or (days is not None and days <= 0):
        raise ValueError(f"need start_days >= 0 and days > 0, got {start_days}, {days}")
    lo = start_days * DAY_S
    hi = math.inf if days is None else lo + days * DAY_S
    keep = (trace["submit_s"] >= lo) & (trace["submit_s"] < hi)
    out = trace[keep].assign(submit_s=trace.loc[keep, "submit_s"] - lo)
    return _done(
        trace,
        out,
        f"window [{start_days:g} d, {'end' if days is None else f'{start_days + days:g} d'}):"
        f" kept {int(keep.sum())} of {len(trace)} jobs",
    )


def thin(trace: pd.DataFrame, target_gpus: int, source_gpus: int, seed: int = 0) -> pd.DataFrame:
    """Scale to ``target_gpus`` by thinning arrivals: keep each job with probability
    target / source (seeded), so the load per GPU is kept; jobs larger than the target are
    dropped and counted."""
    if not 0 < target_gpus <= source_gpus:
        raise ValueError(f"need 0 < target_gpus <= source_gpus, got {target_gpus}, {source_gpus}")
    draw = np.random.default_rng(seed).random(len(trace)) < target_gpus / source_gpus
    fits = (trace["gpus"] <= target_gpus).to_numpy()
    out = trace[draw & fits]
    return _done(
        trace,
        out,
        f"thinned {source_gpus} -> {target_gpus} GPUs (seed {seed}): kept {len(out)} of "
        f"{len(trace)} jobs, {int((draw & ~fits).sum())} drawn but larger than the cluster",
    )


def pick_projects(
    trace: pd.DataFrame,
    target_gpus: int,
    quotas: Mapping[str, float] | None = None,
    source_gpus: int | None = None,
) -> pd.DataFrame:
    """Scale to ``target_gpus`` by keeping whole projects whose quotas sum to at most the target.

    Projects are taken largest quota first, skipping any that would overshoot. Without
    ``quotas``, a project's quota is its share of the trace's GPU-hours x ``source_gpus``.
    Unallocated jobs are thinned in proportion to the quota kept.
    """
    funded = trace[trace["project"] != ""]
    if quotas is None:
        if source_gpus is None:
            raise ValueError("pick_projects needs quotas or source_gpus")
        used = (funded["gpus"] * funded["duration_s"]).groupby(funded["project"]).sum()
        quotas = (used / used.sum() * source_gpus).to_dict()
    unknown = sorted(set(quotas) - set(funded["project"]))
    if unknown:
        raise ValueError(f"pick_projects: no jobs of project(s) {unknown} in the trace")
    bad = {p: q for p, q in quotas.items() if not (q > 0 and np.isfinite(q))}
    if bad:
        raise ValueError(f"pick_projects: quotas are positive numbers of GPUs, got {bad}")
    chosen, total = [], 0.0
    for project, quota in sorted(quotas.items(), key=lambda kv: (-kv[1], kv[0])):
        if total + quota <= target_gpus:
            chosen.append(project)
            total += quota
    share = total / sum(quotas.values()) if quotas else 0.0
    spare = np.random.default_rng(0).random(len(trace)) < share
    keep = trace["project"].isin(chosen).to_numpy() | ((trace["project"] == "").to_numpy() & spare)
    out = trace[keep & (trace["gpus"] <= target_gpus).to_numpy()]
    return _done(
        trace,
        out,
        f"picked {len(chosen)} projects with quotas summing to {total:g} of {target_gpus} GPUs:"
        f" kept {len(out)} of {len(trace)} jobs",
    )


def fill_contract(
    trace: pd.DataFrame,
    columns: tuple[str, ...] = ("min_runtime_s", "checkpoint_s", "util"),
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Set contract fields the trace does not record from per-kind defaults.

    ``overrides`` maps a kind to field values, e.g. ``{"debug": {"min_runtime_s": 600}}``.
    Only the listed ``columns`` are set, for every job (the loaders' traces do not record them).
    """
    table = dict(KIND_CONTRACTS)
    for kind, fields in (overrides or {}).items():
        if kind not in table:
            raise ValueError(f"unknown kind {kind!r}; kinds are {KINDS}")
        table[kind] = replace(table[kind], **fields)
    out = trace.copy()
    for col in columns:
        out[col] = trace["kind"].map({k: getattr(c, col) for k, c in table.items()}).astype(float)
    return _done(trace, out, f"contract fields {list(columns)} from per-kind defaults")


def protect_for_own_length(trace: pd.DataFrame) -> pd.DataFrame:
    """Give every job a minimum runtime equal to its own length (``duration_s``): a job asks to
    run to its end unpreempted, and the policy's cap decides how much of that it gets. What a
    careful user would declare for a trace that records no minimum runtimes; without it, no job
    is protected and an overloaded replay can preempt the same job hundreds of times."""
    out = trace.assign(min_runtime_s=trace["duration_s"].to_numpy(dtype=float))
    return _done(trace, out, "min_runtime_s = each job's own length (the trace declares none)")


def default_patience(trace: pd.DataFrame, patience_s: float) -> pd.DataFrame:
    """Give jobs whose trace records no patience (``patience_s`` infinite) this one: a queued job
    not started within it is withdrawn. Real traces record none, so an overloaded replay's queue
    would otherwise grow for the whole run."""
    if not patience_s > 0:
        raise ValueError(f"need patience_s > 0, got {patience_s}")
    unset = np.isinf(trace["patience_s"].to_numpy(dtype=float))
    out = trace.assign(
        patience_s=np.where(unset, patience_s, trace["patience_s"].to_numpy(dtype=float))
    )
    return _done(
        trace,
        out,
        f"patience {patience_s / 3600:g} h for the {int(unset.sum())} of {len(trace)} jobs "
        "that recorded none",
    )


def _done(before: pd.DataFrame, after: pd.DataFrame, step: str) -> pd.DataFrame:
    log.info(step)
    attrs = dict(before.attrs)
    out = validate_trace(after.reset_index(drop=True), source=f"reshaped trace ({step})")
    out.attrs = {**attrs, "reshape": [*attrs.get("reshape", []), step]}
    return out
