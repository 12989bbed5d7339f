"""One entry point: ``simulate(config, trace, budgets) -> SimResult``."""

from __future__ import annotations

import copy
import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pandas as pd

from ..analysis.fleet import combine_events, first_nodes
from ..analysis.results import SimResult
from ..base.config import (
    PAIRINGS,
    WARMUP_DAYS,
    ClusterSpec,
    RepairMode,
    SimConfig,
    UnknownProjects,
    fleet_from,
)
from ..base.params import ParamError
from ..base.units import DAY_S, plural
from ..inputs.budget_io import check_projects
from ..inputs.budgets import BudgetTree
from ..inputs.fleet import CLUSTER, assign_clusters
from ..inputs.overview import SENSIBLE_LOAD, check_load, overview
from ..inputs.trace import TraceError
from ..inputs.workload import Inputs, fit, prepare
from ..policies import Policy, make_policy
from ..sim.cluster import Cluster
from ..sim.engine import Engine, Sessions, Timing
from ..sim.events import Job, events_frame, jobs_from_trace
from ..sim.fleet import Fleet
from ..sim.policy import Organisation

# The engine, the policy and simpy's processes refer to each other, so after a run they wait
# for the collector's next full pass, which may come only after the metrics' peak. Above this
# many jobs, ``simulate`` collects them at once (at 1,000,000 jobs they hold 300 MiB or more;
# a full pass costs about half a second at 300,000 jobs, too much for a small run's slider).
COLLECT_ABOVE_JOBS = 50_000

log = logging.getLogger(__name__)

#: The repair mode ``compare`` gives every run that sets none, when nodes fail. One mode for
#: all, so that a difference in availability or human repairs comes from the schedulers and not
#: from how nodes are mended; automatic, since it is the mode of every policy but legacy and of
#: a cluster with health checks today. (A single ``simulate`` keeps the policy's own mode.)
COMPARE_REPAIR: RepairMode = "automatic"

#: Progress of a long run: a tqdm bar (True), a callback of the simulated time, or nothing.
Progress = bool | Callable[[float], None] | None


def simulate(
    config: SimConfig | None = None,
    trace: pd.DataFrame | None = None,
    budgets: BudgetTree | None = None,
    policy: Policy | None = None,
    on_unknown_project: UnknownProjects | None = None,
    *,
    inputs: Inputs | None = None,
    label: str = "",
    progress: Progress = None,
) -> SimResult:
    """Replay a trace (or the synthetic workload of ``config``) under ``config.policy``.

    The workload comes from ``config`` (generator knobs, or ``trace_path`` / ``budgets_path``);
    ``trace`` (a DataFrame in the schema) and ``budgets`` override it, and ``inputs`` (from
    ``impactlab.inputs.workload.prepare``) reuses one already built. ``policy`` overrides the
    registered policy with an instance (a researcher's draft, or a test oracle);
    ``config.policy`` then only names the run. Jobs whose project is not a leaf of the tree run
    unallocated and are reported (log warning, ``SimResult.unknown_projects``), or raise a
    BudgetError when ``on_unknown_project`` (default: ``config.unknown_projects``) is "error".
    ``progress=True`` shows a tqdm bar in simulated days (a widget in Jupyter); a callable gets
    the simulated time in seconds as the run goes.
    """
    config = config or SimConfig()
    fresh = inputs is None
    inputs = inputs or prepare(config, trace, budgets)
    config = fit(config, inputs)
    trace, tree = inputs.trace, inputs.tree
    too_big = trace["gpus"] > config.gpus
    if too_big.any() and not config.clusters:  # (a fleet's: assign_clusters names the job)
        row = int(too_big.to_numpy().argmax())
        raise TraceError("trace", row, "gpus", f"job larger than the cluster ({config.gpus} GPUs)")
    if fresh:  # compare warns once for all its runs
        _check_load(config, inputs)
    unknown = check_projects(trace, tree, on_unknown_project or config.unknown_projects)
    late = [
        w.label(i)
        for i, w in enumerate(config.maintenance)
        if w.announce_h * 3600.0 >= config.horizon_s
    ]
    if late:
        log.warning(
            "maintenance %s: announced after the run ends (%g h); it does nothing",
            ", ".join(late),
            config.horizon_s / 3600.0,
        )
    _check_shares(config)
    with _progress_of(progress, config, label or config.policy) as report:
        if config.clusters:
            from_file = inputs.provenance.get("source") == "file"
            trace = assign_clusters(trace, config.clusters, _source(inputs), rows=not from_file)
            events, wall = run_fleet(config, trace, tree, policy, report)
        else:
            jobs = jobs_from_trace(trace, tree, config.gpus_per_node)
            engine = make_engine(config, jobs, tree, policy)
            began = time.perf_counter()  # (the engine's run alone: sim_wall_s)
            event_log = engine.run(report)
            wall = time.perf_counter() - began
            events = events_frame(event_log)
            del engine, jobs, event_log
    log.info("%s: %d jobs, %d events in %.2f s", config.policy, len(trace), len(events), wall)
    result = SimResult(
        config,
        trace,
        tree,
        events,
        wall,
        unknown_projects=unknown,
        provenance=inputs.provenance,
        label=label,
    )
    if len(trace) > COLLECT_ABOVE_JOBS:
        gc.collect()
    return result


def make_engine(
    config: SimConfig,
    jobs: list[Job],
    tree: BudgetTree,
    policy: Policy | None = None,
    cluster: int | None = None,
    fleet: Fleet | None = None,
    first_node: int = 0,
) -> Engine:
    """The engine of ``config``'s run (of its ``cluster``-th cluster, in ``fleet``) under
    ``policy`` (default: ``config.policy`` with its knobs; an instance is copied for each
    cluster of a fleet, so that each sets up its own state)."""
    if policy is None:
        policy = make_policy(config.policy, **config.policy_knobs)
    elif fleet is not None:
        policy = copy.deepcopy(policy)
    own = config if cluster is None else config.cluster_config(cluster)
    return Engine(
        jobs,
        tree,
        Cluster(own.nodes, own.gpus_per_node),
        policy,
        own.restart_overhead_s,
        own.horizon_s,
        own.health,
        own.seed,
        timing=Timing(own.cycle_s, own.startup_s, own.grace_s),
        sessions=Sessions(
            own.preempted_sessions,
            own.session_resubmit_share,
            own.session_resubmit_delay_s,
        ),
        maintenance=own.maintenance,
        fleet=None if fleet is None or cluster is None else fleet.seat(cluster, first_node),
    )


def run_fleet(
    config: SimConfig,
    trace: pd.DataFrame,
    tree: BudgetTree,
    policy: Policy | None = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[pd.DataFrame, float]:
    """Run the clusters of ``config``'s fleet together on one clock (each job on the cluster
    its ``cluster`` column names); the organisation's event log (``impactlab.analysis.fleet``)
    and the wall seconds of the run itself. Fair-share usage is the organisation's
    (``config.fair_share``), or each cluster's own."""
    fleet, engines = fleet_engines(config, trace, tree, policy)
    began = time.perf_counter()
    fleet.run(config.horizon_s, [e.begin for e in engines], progress)
    wall = time.perf_counter() - began
    return combine_events([events_frame(e.log) for e in engines], config), wall


def fleet_engines(
    config: SimConfig, trace: pd.DataFrame, tree: BudgetTree, policy: Policy | None = None
) -> tuple[Fleet, list[Engine]]:
    """The fleet of ``config`` (sharing the organisation's usage when ``config.fair_share``
    says so) and one engine per cluster on the jobs its ``cluster`` column names, in order."""
    org = Organisation(config.gpus) if config.fair_share == "organisation" else None
    fleet = Fleet(org)
    engines = []
    for k, (spec, first) in enumerate(zip(config.clusters, first_nodes(config))):
        jobs = jobs_from_trace(trace[trace[CLUSTER] == spec.name], tree, config.gpus_per_node)
        engines.append(make_engine(config, jobs, tree, policy, k, fleet, first))
    return fleet, engines


def _source(inputs: Inputs) -> str:
    """How errors name the trace: its file, else "trace"."""
    return str(inputs.provenance.get("path") or "trace")


def compare(
    config: SimConfig | None = None,
    policies: str | Sequence[str] | Mapping[str, Mapping[str, Any]] = ("legacy", "impactful"),
    trace: pd.DataFrame | None = None,
    budgets: BudgetTree | None = None,
    *,
    inputs: Inputs | None = None,
    progress: Progress = None,
) -> list[SimResult]:
    """Replay one workload under several policies (or variants), with one reporting window.

    ``policies`` is a list of policy names, or a mapping from a label to parameter overrides
    (``{"cap 4 h": {"policy": "impactful", "cap_hours": 4}}``; a label that names a policy
    needs no "policy" key), or the name of a pairing (``PAIRINGS``: ``"ai2"``). The workload is
    built once; each run's knobs are the config's, kept where the run's policy declares them.
    With node failures, every run repairs nodes one way: the config's ``repair``, else
    ``COMPARE_REPAIR``, unless a variant sets its own. Results come back in order, labelled.
    ``inputs`` (from ``impactlab.inputs.workload.prepare``) reuses a workload already built;
    ``progress`` is passed to each ``simulate``.
    """
    config = config or SimConfig()
    inputs = inputs or prepare(config, trace, budgets)
    config = fit(config, inputs)
    _check_load(config, inputs)
    runs = [
        (label, config.with_params(_one_repair(config, changes)))
        for label, changes in _variants(policies).items()
    ]
    warmup_days = _shared_warmup_days(config, [cfg for _, cfg in runs])
    return [
        simulate(
            replace(cfg, warmup_days=warmup_days), inputs=inputs, label=label, progress=progress
        )
        for label, cfg in runs
    ]


def compare_fleets(
    config: SimConfig,
    layouts: Mapping[str, SimConfig | str | Sequence[ClusterSpec]],
    trace: pd.DataFrame | None = None,
    budgets: BudgetTree | None = None,
    *,
    inputs: Inputs | None = None,
    progress: Progress = None,
) -> list[SimResult]:
    """Replay one workload (``config``'s, built once) on several layouts of the fleet, under
    ``config``'s policy: each layout is a config whose clusters are used (for example
    ``config.merge_clusters("a", "b")``), or the clusters as text (``"a:88,b:256"``) or specs.
    Jobs keep the cluster names of the workload; each layout sends them by its clusters'
    ``takes`` and the usual rule. Results come back in order, labelled by the layouts' keys."""
    inputs = inputs or prepare(config, trace, budgets)
    config = fit(config, inputs)
    _check_load(config, inputs)
    runs = []
    for label, layout in layouts.items():
        if isinstance(layout, SimConfig):  # its clusters and its maintenance plan
            clusters, plan = layout.clusters, layout.maintenance
        else:  # the config's windows that still name a cluster of the layout (or none)
            clusters = fleet_from(layout)
            names = {c.name for c in clusters}
            plan = tuple(w for w in config.maintenance if w.cluster in names or not w.cluster)
        if not clusters:
            raise ParamError(f"compare_fleets: layout {label!r} has no clusters")
        runs.append((label, replace(config, clusters=clusters, maintenance=plan)))
    warmup_days = _shared_warmup_days(config, [cfg for _, cfg in runs])
    return [
        simulate(
            replace(cfg, warmup_days=warmup_days), inputs=inputs, label=label, progress=progress
        )
        for label, cfg in runs
    ]


def pairing(name: str) -> dict[str, dict[str, Any]]:
    """The variants of a named pairing (``PAIRINGS``), for ``compare``."""
    if name not in PAIRINGS:
        raise ParamError(f"unknown pairing {name!r}; known: {', '.join(sorted(PAIRINGS))}")
    return {label: dict(changes) for label, changes in PAIRINGS[name].items()}


def _one_repair(config: SimConfig, changes: Mapping[str, Any]) -> dict[str, Any]:
    """A variant's overrides, with the shared repair mode unless it sets one (nodes failing)."""
    if config.health.mtbf_hours is None or config.health.repair is not None or "repair" in changes:
        return dict(changes)
    return {**changes, "repair": COMPARE_REPAIR}


def _check_shares(config: SimConfig) -> None:
    """Warn when a maintenance window's share, rounded up to whole nodes, takes far more of a
    cluster than it says (a share of 0.1 takes the whole of a one-node cluster)."""
    per = config.gpus_per_node
    clusters = (
        [
            (c.name, c.gpus // per, config.cluster_maintenance(k))
            for k, c in enumerate(config.clusters)
        ]
        if config.clusters
        else [("", config.nodes, config.maintenance)]
    )
    for name, nodes, plan in clusters:
        for i, w in enumerate(plan):
            if not w.share:
                continue
            taken = len(w.node_list(nodes))
            if taken / nodes > 1.5 * w.share:
                log.warning(
                    "maintenance %s: a share of %g takes %d of %s%d node%s (%.0f%%): a share is "
                    "rounded up to whole nodes",
                    w.label(i),
                    w.share,
                    taken,
                    f"cluster {name}'s " if name else "the cluster's ",
                    nodes,
                    plural(nodes),
                    100 * taken / nodes,
                )


def _check_load(config: SimConfig, inputs: Inputs) -> None:
    """Warn when a replayed trace offers far more or less work than the cluster can take (in a
    fleet, also each cluster), or names clusters that a run of one cluster does not use."""
    if inputs.provenance.get("source") == "synthetic":
        return
    trace, days = inputs.trace, config.horizon_s / DAY_S
    check_load(trace, config.gpus, config.gpus_per_node, days)
    named = trace[CLUSTER].fillna("").astype(str) if CLUSTER in trace else None
    if not config.clusters:
        if named is not None and (named != "").any():
            found = sorted(set(named) - {""})
            log.warning(
                "the trace names clusters (%s%s) in its %s column; one cluster of %d GPUs runs "
                "all its jobs: give clusters (--clusters NAME:GPUS,...) to replay it as a fleet",
                ", ".join(found[:5]),
                f" and {len(found) - 5} more" if len(found) > 5 else "",
                CLUSTER,
                config.gpus,
            )
        return
    from_file = inputs.provenance.get("source") == "file"
    placed = assign_clusters(trace, config.clusters, _source(inputs), rows=not from_file)
    for c in config.clusters:
        mine = placed[placed[CLUSTER] == c.name]
        load = overview(mine, config.gpus_per_node, days).offered_load(c.gpus) if len(mine) else 0
        lo, hi = SENSIBLE_LOAD
        if not lo <= load <= hi:
            log.warning(
                "cluster %s: the trace offers it %.2fx the capacity of its %d GPUs (the model is "
                "meant for %g-%gx); its jobs are those that name it, and its share of the rest",
                c.name,
                load,
                c.gpus,
                lo,
                hi,
            )


def _days(config: SimConfig) -> float:
    """The simulated span of a config ``fit`` has filled in, in days."""
    if config.days is None:
        raise ValueError("days is unset: fit(config, inputs) fills it in before a run")
    return config.days


def _shared_warmup_days(config: SimConfig, runs: list[SimConfig]) -> float:
    """One reporting window for every run: the config's warm-up, or else the longest fair-share
    window among the runs (``WARMUP_DAYS`` if none has one), at most half the run."""
    if config.warmup_days is not None:
        return config.warmup_days
    windows = [cfg.knobs()["window_days"] for cfg in runs if "window_days" in cfg.knobs()]
    return min(max(windows, default=WARMUP_DAYS), _days(config) / 2)


def _variants(
    policies: Sequence[str] | Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Label -> parameter overrides; a plain name is a policy with its default knobs."""
    if isinstance(policies, str):
        if policies in PAIRINGS:
            return pairing(policies)
        raise TypeError(
            f"policies is a list of names, a mapping of label -> overrides or a pairing "
            f"({', '.join(sorted(PAIRINGS))}), not {policies!r}"
        )
    if not isinstance(policies, Mapping):
        return {name: {"policy": name} for name in policies}
    return {
        label: {"policy": label, **changes} if "policy" not in changes else dict(changes)
        for label, changes in policies.items()
    }


@contextmanager
def _progress_of(
    progress: Progress, config: SimConfig, name: str
) -> Iterator[Callable[[float], None] | None]:
    """The engine's progress callback for ``progress``; a tqdm bar is closed at the end."""
    if not progress:
        yield None
        return
    if callable(progress):
        yield progress
        return
    from tqdm.auto import tqdm

    bar = tqdm(
        total=round(_days(config), 2),
        unit="day",
        desc=name,
        leave=False,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:g} days [{elapsed}<{remaining}]",
    )

    def advance(t_s: float) -> None:
        bar.update(round(t_s / DAY_S - bar.n, 2))

    try:
        yield advance
    finally:
        bar.close()
