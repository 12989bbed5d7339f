"""The frozen configuration of a run, declared once; vary it with ``with_params`` or ``replace``.

Every knob is a ``Param`` (``impactlab.base.params``) used as the default of a dataclass field, so
the CLI flags, scenario keys, widgets and sweep axes all come from the declarations here and
on the policies' own fields. This module is the bottom layer: it imports only ``params``,
``registry`` and ``units``.

A config is hashable (results are cached on it), and round-trips through ``to_dict`` /
``from_dict`` (JSON) and through ``flat`` / ``from_flat`` (one value per parameter name).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

from .params import FrozenMap, Param, ParamError, check_fields, declared, merge_knobs
from .registry import check_knobs, policy_class, policy_names, policy_params
from .units import DAY_S

log = logging.getLogger(__name__)

_R = TypeVar("_R")  # a dataclass read from mappings (``_records``)
RepairMode = Literal["automatic", "manual"]
REPAIR_MODES: tuple[RepairMode, ...] = ("automatic", "manual")
#: What happens to jobs whose project no budget funds: they run unallocated, or the run stops.
UnknownProjects = Literal["unallocated", "error"]
UNKNOWN_PROJECTS: tuple[UnknownProjects, ...] = ("unallocated", "error")

#: Named variant sets for ``compare``. ``ai2`` is Ai2's before/after: legacy with manual repair
#: against impactful with automatic repair. It credits the second run with both changes at
#: once; the cut in human repairs follows from ``human_fraction`` (an input), not from the
#: scheduler.
PAIRINGS: dict[str, dict[str, dict[str, Any]]] = {
    "ai2": {
        "legacy": {"policy": "legacy", "repair": "manual"},
        "impactful": {"policy": "impactful", "repair": "automatic"},
    },
}

#: What a replayed trace that declares no minimum runtimes gets (``contract_default``).
CONTRACT_DEFAULTS = ("job-length", "per-kind", "none")
SESSION_MODES = ("end", "restore", "requeue")  # what preempting an interactive session does
SHARE_PREFIX = "share."  # flat key of a budget-share override: "share.<tree node>"

# ----- the declarations shared by the run and the generator ------------------------------------
GPUS = Param(
    "gpus", 256, int, "cluster", "cluster size", "GPUs", lo=1, hi=65536, step=8, ui=(8, 2048)
)
GPUS_PER_NODE = Param("gpus_per_node", 8, int, "cluster", "GPUs per node", "GPUs", lo=1, hi=64)
#: The warm-up left out of the metrics when no policy knob says otherwise: a week, the span of
#: Ai2's fair-share window (a policy's own ``window_days`` takes its place).
WARMUP_DAYS = 7.0
DAYS = Param(
    "days",
    14.0,
    float,
    "workload",
    "simulated span",
    "days",
    lo=0,
    hi=3660,
    step=0.5,
    lo_open=True,
    ui=(1, 60),
)
DEMAND = Param(
    "demand",
    2.5,
    float,
    "workload",
    "synthetic offered load: GPU-hours submitted per hour / capacity",
    "x capacity",
    lo=0,
    hi=20,
    step=0.1,
    lo_open=True,
    ui=(0.5, 5),
)
FUNDED_LOAD = Param(
    "funded_load",
    0.8,
    float,
    "workload",
    "synthetic funded part of the load (the rest is unallocated)",
    "x capacity",
    lo=0,
    hi=20,
    step=0.05,
    lo_open=True,
    ui=(0.1, 2),
)
#: A run's span: like the generator's, but "none" follows the trace (its whole span).
RUN_DAYS = dataclasses.replace(
    DAYS,
    default=None,
    nullable=True,
    help="simulated span (none: 14 days of synthetic workload, or the whole span of the trace)",
)
SEED = Param(
    "seed",
    0,
    int,
    "workload",
    "random seed of the synthetic workload, of node failures and of whether a user resubmits a "
    "killed interactive session (a replayed trace is the same for every seed)",
    lo=0,
    hi=2**32 - 1,
    step=1,
    ui=(0, 99),
)
USERS = Param(
    "users_per_1024_gpus",
    150,
    int,
    "workload",
    "synthetic researchers per 1024 GPUs",
    lo=1,
    hi=10_000,
)
CHAIN = Param(
    "pretrain_chain_mean",
    4.0,
    float,
    "workload",
    "synthetic pretraining runs per campaign before it ends or is cancelled",
    "runs",
    lo=1,
    hi=100,
)
OPT_OUT_LONG = Param(
    "opt_out_long",
    0.85,
    float,
    "workload",
    "legacy habit: share of jobs over 8 h that refuse preemption",
    lo=0,
    hi=1,
    step=0.05,
)
OPT_OUT_SHORT = Param(
    "opt_out_short",
    0.3,
    float,
    "workload",
    "legacy habit: share of shorter jobs that refuse preemption",
    lo=0,
    hi=1,
    step=0.05,
)
REPAIR = Param(
    "repair",
    None,
    str,
    "health",
    "how failed nodes are repaired (none: the policy's own, legacy manual, others automatic)",
    choices=REPAIR_MODES,
    nullable=True,
)


@dataclass(frozen=True)
class GeneratorConfig:
    """Knobs of the synthetic workload (``funded_shares``: GPU-time share per job kind, or None
    for the generator's calibrated shares)."""

    gpus: int = GPUS.field()
    days: float = DAYS.field()
    demand: float = DEMAND.field()
    funded_load: float = FUNDED_LOAD.field()
    seed: int = SEED.field()
    gpus_per_node: int = GPUS_PER_NODE.field()
    users_per_1024_gpus: int = USERS.field()
    pretrain_chain_mean: float = CHAIN.field()
    opt_out_long: float = OPT_OUT_LONG.field()
    opt_out_short: float = OPT_OUT_SHORT.field()
    funded_shares: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        _check_cluster(self.gpus, self.gpus_per_node)
        if not self.funded_load <= self.demand:
            raise ParamError(
                f"funded_load must be <= demand, got {self.funded_load} > {self.demand}"
            )
        if self.funded_shares is not None:
            object.__setattr__(self, "funded_shares", FrozenMap(self.funded_shares))


@dataclass(frozen=True)
class HealthConfig:
    """Node failures and repairs; with ``mtbf_hours=None`` (the default) nodes never fail."""

    mtbf_hours: float | None = Param(
        "mtbf_hours",
        None,
        float,
        "health",
        "mean time between failures of one node (none: no failures)",
        "h",
        lo=0,
        lo_open=True,
        nullable=True,
        flag="--node-mtbf-hours",
    ).field()
    repair: RepairMode | None = REPAIR.field()  # noqa: RUF009 (a field, not a shared default)
    auto_repair_hours: float = Param(
        "auto_repair_hours",
        2.0,
        float,
        "health",
        "automatic repair: drain, reboot, checks, back in service",
        "h",
        lo=0,
        hi=1000,
    ).field()
    human_repair_hours: float = Param(
        "human_repair_hours",
        24.0,
        float,
        "health",
        "a repair that needs a person (a ticket, maybe a part)",
        "h",
        lo=0,
        hi=10_000,
    ).field()
    human_fraction: float = Param(
        "human_fraction",
        0.25,
        float,
        "health",
        "automatic mode: failures that still need a person",
        lo=0,
        hi=1,
        step=0.05,
    ).field()
    detect_hours: float = Param(
        "detect_hours",
        4.0,
        float,
        "health",
        "manual mode: until a person notices a failing node",
        "h",
        lo=0,
        hi=1000,
    ).field()
    crash_s: float = Param(
        "crash_s",
        300.0,
        float,
        "health",
        "manual mode: how long a job lasts on a failed node "
        "(positive, or jobs would land and die forever)",
        "s",
        lo=0,
        lo_open=True,
    ).field()

    def __post_init__(self) -> None:
        check_fields(self)


AtDeadline = Literal["stop", "wait"]
#: What happens to jobs still running on a node when its maintenance must begin: they are
#: stopped (requeued from their last checkpoint), or the node waits until they end.
AT_DEADLINE: tuple[AtDeadline, ...] = ("stop", "wait")


@dataclass(frozen=True)
class Maintenance:
    """One planned maintenance window (docs/model.md, "Planned maintenance").

    At ``announce_h`` (hours from the start of the run) the nodes are announced: from then on
    they take no new work, and the policy lets the jobs on them go its own way
    (``Policy.vacate_at``). They must be down at ``down_h`` and stay down ``hours``. The nodes
    are listed (``nodes``, numbered from 0) or a ``share`` of the cluster, spread evenly over the
    node numbers. Jobs still running at ``down_h`` are stopped and requeued from their last
    checkpoint (``at_deadline="stop"``), or the node waits for them (``"wait"``). A node goes
    down as soon as it is empty (``early=True``: drained, then maintained) or not before
    ``down_h`` (``early=False``: it stands idle, closed, until then); its time to free counts from
    the announcement. In a fleet, ``cluster`` names the cluster whose nodes it takes; a window
    that names none takes its share of every cluster.
    """

    announce_h: float
    down_h: float
    hours: float = 4.0
    nodes: tuple[int, ...] = ()
    share: float = 0.0
    at_deadline: AtDeadline = "stop"
    early: bool = True
    name: str = ""
    cluster: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(int(n) for n in self.nodes))
        where = f"maintenance {self.name or '(unnamed)'}"
        if not (math.isfinite(self.announce_h) and self.announce_h >= 0):
            raise ParamError(f"{where}: announce_h must be a time >= 0, got {self.announce_h}")
        if not (math.isfinite(self.down_h) and self.down_h >= self.announce_h):
            raise ParamError(
                f"{where}: down_h must be at or after announce_h ({self.announce_h:g}), "
                f"got {self.down_h}"
            )
        if not (math.isfinite(self.hours) and self.hours > 0):
            raise ParamError(f"{where}: hours must be > 0, got {self.hours}")
        if self.nodes and self.share:
            raise ParamError(f"{where}: give either nodes or a share of the cluster, not both")
        if not (self.nodes or self.share):
            raise ParamError(
                f"{where}: give the nodes it takes down (nodes: a list) or a share of the "
                f"cluster (share, in (0, 1]); got nodes {list(self.nodes)} and share {self.share:g}"
            )
        if self.share and not 0 < self.share <= 1:
            raise ParamError(f"{where}: share must be in (0, 1], got {self.share}")
        if any(n < 0 for n in self.nodes) or len(set(self.nodes)) != len(self.nodes):
            raise ParamError(f"{where}: nodes must be distinct numbers >= 0, got {self.nodes}")
        if not isinstance(self.early, bool):
            raise ParamError(f"{where}: early must be true or false, got {self.early!r}")
        if self.at_deadline not in AT_DEADLINE:
            raise ParamError(
                f"{where}: at_deadline must be one of {', '.join(AT_DEADLINE)}, "
                f"got {self.at_deadline!r}"
            )

    def label(self, i: int) -> str:
        """Its name, or for an unnamed window "window N", its place in the plan counted from 1
        (``i`` from 0), as the plan loaders name it in their errors."""
        return self.name or f"window {i + 1}"

    def node_list(self, node_count: int) -> tuple[int, ...]:
        """The nodes it takes down on a cluster of ``node_count`` nodes: the listed ones, or
        ``ceil(share * node_count)`` spread evenly (node ``floor(i * node_count / k)`` for the
        i-th of k), so that no one corner of the numbering is favoured."""
        if self.nodes:
            bad = [n for n in self.nodes if n >= node_count]
            if bad:
                raise ParamError(
                    f"maintenance {self.name or '(unnamed)'}: node {bad[0]} is not in a cluster "
                    f"of {node_count} nodes (numbered from 0)"
                )
            return tuple(sorted(self.nodes))
        k = min(node_count, math.ceil(self.share * node_count - 1e-9))
        return tuple(i * node_count // k for i in range(k))


def check_maintenance(plan: tuple[Maintenance, ...], node_count: int) -> None:
    """Raise ParamError if two windows take one node at overlapping times (from announcement
    to the latest it could be back: a window's node may go down after ``down_h`` only while it
    waits for its jobs, which the check cannot know, so it uses the announced times)."""
    busy: dict[int, list[tuple[float, float, str]]] = {}
    for i, w in enumerate(plan):
        span = (w.announce_h, w.down_h + w.hours, w.label(i))
        for n in w.node_list(node_count):
            for a, b, other in busy.get(n, []):
                if span[0] < b and a < span[1]:
                    raise ParamError(
                        f"maintenance {span[2]} and {other} both take node {n} between "
                        f"{max(a, span[0]):g} h and {min(b, span[1]):g} h"
                    )
            busy.setdefault(n, []).append(span)


def maintenance_plan(value: Any) -> tuple[Maintenance, ...]:
    """A plan from what a caller gave: Maintenance windows, or mappings of their fields."""
    return _records(value, Maintenance, lambda i: f"maintenance window {i + 1}")


def _records(value: Any, cls: type[_R], where: Callable[[int], str]) -> tuple[_R, ...]:
    """``cls`` instances from what a caller gave: instances or mappings of their fields, one or
    a list (none for None); errors name the ``i``-th item by ``where(i)``."""
    if value is None:
        return ()
    if isinstance(value, (cls, Mapping)):
        value = [value]
    out = []
    for i, item in enumerate(value):
        if isinstance(item, cls):
            out.append(item)
        elif isinstance(item, Mapping):
            known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
            unknown = sorted(set(item) - known)
            if unknown:
                raise ParamError(f"{where(i)}: unknown key(s) {unknown}; known: {sorted(known)}")
            required = [f.name for f in fields(cls) if f.default is dataclasses.MISSING]  # type: ignore[arg-type]
            missing = [name for name in required if name not in item]
            if missing:
                raise ParamError(f"{where(i)}: give its {' and '.join(missing)}")
            out.append(cls(**item))
        else:
            raise ParamError(f"{where(i)}: expected a mapping, got {item!r}")
    return tuple(out)


#: How a fleet charges fair-share usage: one meter for the organisation, or one per cluster.
FAIR_SHARE_SCOPES = ("organisation", "cluster")
_NAME_BREAKS = frozenset(",:+=")  # characters a cluster's name cannot hold (its text form)


#: The name of the organisation's row in per-cluster tables: no cluster may take it.
ORGANISATION = "organisation"


def _is_cluster_name(name: object) -> bool:
    """A word that reads back from a fleet's text form: no space, ',', ':', '+' or '=', and
    not the organisation's row."""
    return (
        isinstance(name, str)
        and bool(name)
        and name != ORGANISATION
        and not _NAME_BREAKS & set(name)
        and not any(ch.isspace() for ch in name)
    )


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster of a fleet: its ``name`` and ``gpus`` (whole nodes of the fleet's
    ``gpus_per_node``), and ``takes``, other cluster names of trace rows it runs besides its
    own (a cluster made by merging takes the names of those it replaced, and the clusters
    split from one all take its name)."""

    name: str
    gpus: int
    takes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _is_cluster_name(self.name):
            raise ParamError(
                "a cluster's name is a word without spaces, ',', ':', '+' or '=', and not "
                f"{ORGANISATION!r} (the organisation's row), got {self.name!r}"
            )
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise ParamError(
                f"cluster {self.name}: gpus must be a whole number >= 1, got {self.gpus!r}"
            )
        takes = (self.takes,) if isinstance(self.takes, str) else tuple(self.takes)
        if not all(_is_cluster_name(t) for t in takes):
            raise ParamError(
                f"cluster {self.name}: takes names clusters (words), got {self.takes!r}"
            )
        object.__setattr__(self, "takes", takes)

    @property
    def names(self) -> tuple[str, ...]:
        """The cluster names of the trace rows it may run: its own and those it takes."""
        return (self.name, *(t for t in self.takes if t != self.name))

    def text(self) -> str:
        """``name:gpus``, with ``:a+b`` when it takes other names (``fleet_text``)."""
        own = f"{self.name}:{self.gpus}"
        return own if not self.takes else f"{own}:{'+'.join(self.takes)}"


def fleet_from(value: Any) -> tuple[ClusterSpec, ...]:
    """A fleet from what a caller gave: ``ClusterSpec``s, mappings of their fields, or text
    ``"a:88,b:256"`` (``name:gpus[:takes+takes]``, comma-separated); empty for none."""
    if value is None or value == "" or value == () or (isinstance(value, float) and value != value):
        return ()  # (NaN: a blank cell of a table mixing fleets and one-cluster runs)
    if isinstance(value, str):
        specs = []
        for part in value.split(","):
            bits = part.strip().split(":")
            if len(bits) not in (2, 3) or not bits[1].strip().isdigit():
                raise ParamError(
                    f"clusters: {part.strip()!r} is not name:gpus or name:gpus:a+b "
                    "(for example 'a:88,b:256')"
                )
            takes = tuple(bits[2].split("+")) if len(bits) == 3 else ()
            specs.append(ClusterSpec(bits[0].strip(), int(bits[1]), takes))
        return tuple(specs)
    return _records(value, ClusterSpec, lambda i: f"cluster {i + 1}")


def fleet_text(clusters: tuple[ClusterSpec, ...]) -> str:
    """The text form of a fleet (``fleet_from`` reads it back)."""
    return ",".join(c.text() for c in clusters)


def _check_fleet(clusters: tuple[ClusterSpec, ...], per_node: int) -> None:
    names = [c.name for c in clusters]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ParamError(f"clusters: the name {twice[0]!r} is used twice")
    for c in clusters:
        if c.gpus < per_node or c.gpus % per_node:
            raise ParamError(
                f"cluster {c.name}: gpus must be a positive multiple of gpus_per_node "
                f"({per_node}), got {c.gpus}"
            )


@dataclass(frozen=True)
class SimConfig:
    """Everything a run needs besides in-memory inputs (a trace or tree passed to ``simulate``).

    Without ``trace_path``, the synthetic generator builds the workload from the cluster and
    workload knobs. ``policy_knobs`` override the policy's declared knobs (``{"cap_hours": 4}``);
    ``budget_shares`` override the shares of named budget-tree nodes; ``maintenance`` is a plan
    of ``Maintenance`` windows (or mappings of their fields). ``warmup_days`` (default:
    the policy's window, 7 days, at most half the run) is left out of the metrics so that the
    sliding window is full. ``days`` left unset follows the replayed trace (``trace_path``, or a
    DataFrame passed to ``simulate``) over its whole span, and is 14 days of synthetic workload
    otherwise; the result's config has it filled in.
    """

    policy: str = Param(
        "policy",
        "impactful",
        str,
        "policy",
        "scheduling policy (a registered name or a 'module:Class' spec)",
    ).field()
    gpus: int = GPUS.field()
    gpus_per_node: int = GPUS_PER_NODE.field()
    days: float | None = RUN_DAYS.field()
    demand: float = DEMAND.field()
    funded_load: float = FUNDED_LOAD.field()
    seed: int = SEED.field()
    users_per_1024_gpus: int = USERS.field()
    pretrain_chain_mean: float = CHAIN.field()
    opt_out_long: float = OPT_OUT_LONG.field()
    opt_out_short: float = OPT_OUT_SHORT.field()
    trace_path: str | None = Param(
        "trace_path",
        None,
        str,
        "trace",
        "trace file: impactlab CSV/Parquet, Philly, Helios, Acme, Alibaba, sacct (none: synthetic)",
        nullable=True,
        flag="--trace",
    ).field()
    trace_format: str | None = Param(
        "trace_format",
        None,
        str,
        "trace",
        "trace format (none: detected from the columns)",
        nullable=True,
        flag="--format",
    ).field()
    trace_start_days: float = Param(
        "trace_start_days",
        0.0,
        float,
        "trace",
        "replay the trace from this day on",
        "days",
        lo=0,
        hi=1e5,
    ).field()
    trace_days: float | None = Param(
        "trace_days",
        None,
        float,
        "trace",
        "replay only this many days of the trace (none: all)",
        "days",
        lo=0,
        hi=1e5,
        lo_open=True,
        nullable=True,
    ).field()
    skip_large: bool = Param(
        "skip_large",
        False,
        bool,
        "trace",
        "skip (and report) jobs larger than the cluster instead of stopping",
    ).field()
    fill_contract: bool = Param(
        "fill_contract",
        False,
        bool,
        "trace",
        "set min_runtime_s, checkpoint_s and util from per-kind defaults",
    ).field()
    contract_default: str = Param(
        "contract_default",
        "job-length",
        str,
        "trace",
        "minimum runtime of the jobs of a replayed trace "
        "that declares none (every min_runtime_s 0): the job's own length (the policy's cap still "
        "applies), the per-kind defaults, or none (every job preemptible at once)",
        choices=CONTRACT_DEFAULTS,
    ).field()
    patience_hours: float | None = Param(
        "patience_hours",
        None,
        float,
        "trace",
        "a replayed job that records no patience is withdrawn "
        "if still queued after this long (none: it waits forever)",
        "h",
        lo=0,
        hi=1e5,
        lo_open=True,
        nullable=True,
    ).field()
    budgets_path: str | None = Param(
        "budgets_path",
        None,
        str,
        "trace",
        "budget tree YAML, or a scenario file (none: the "
        "synthetic organisation, or equal shares per project)",
        nullable=True,
        flag="--budgets",
    ).field()
    unknown_projects: UnknownProjects = Param(  # noqa: RUF009 (a field, not a shared default)
        "unknown_projects",
        "unallocated",
        str,
        "trace",
        "jobs whose project is not in the budget tree: run unallocated or stop",
        choices=UNKNOWN_PROJECTS,
    ).field()
    restart_overhead_s: float = Param(
        "restart_overhead_s",
        60.0,
        float,
        "policy",
        "paid by a preempted or failed job when it starts again",
        "s",
        lo=0,
        hi=86_400,
        step=10,
        ui=(0, 1800),
    ).field()
    cycle_s: float = Param(
        "cycle_s",
        30.0,
        float,
        "latency",
        "scheduling cycle: passes run at multiples of it "
        "(0: at once after every change; Slurm's bf_interval default)",
        "s",
        lo=0,
        hi=3600,
        step=5,
        ui=(0, 300),
    ).field()
    startup_s: float = Param(
        "startup_s",
        30.0,
        float,
        "latency",
        "start-up of every attempt: GPUs held, no progress (container start and a cached image)",
        "s",
        lo=0,
        hi=86_400,
        step=5,
        ui=(0, 600),
    ).field()
    grace_s: float = Param(
        "grace_s",
        30.0,
        float,
        "latency",
        "a preempted job keeps its GPUs this long after the "
        "decision (Kubernetes' default terminationGracePeriodSeconds)",
        "s",
        lo=0,
        hi=3600,
        step=5,
        ui=(0, 300),
    ).field()
    preempted_sessions: str = Param(
        "preempted_sessions",
        "end",
        str,
        "sessions",
        "a preempted interactive session ends; or "
        "(what-if) is restored whole; or is requeued like any job",
        choices=SESSION_MODES,
    ).field()
    session_resubmit_share: float = Param(
        "session_resubmit_share",
        0.5,
        float,
        "sessions",
        "share of killed sessions their user submits again",
        lo=0,
        hi=1,
        step=0.05,
    ).field()
    session_resubmit_delay_s: float = Param(
        "session_resubmit_delay_s",
        600.0,
        float,
        "sessions",
        "how long after a kill the user submits the session again",
        "s",
        lo=0,
        hi=86_400,
        step=60,
        ui=(0, 7200),
    ).field()
    warmup_days: float | None = Param(
        "warmup_days",
        None,
        float,
        "policy",
        "left out of the metrics (none: the fair-share window, 7 days, at most half the run)",
        "days",
        lo=0,
        hi=1e5,
        nullable=True,
    ).field()
    policy_knobs: Mapping[str, Any] = field(default_factory=FrozenMap)
    budget_shares: Mapping[str, float] = field(default_factory=FrozenMap)
    fair_share: str = Param(
        "fair_share",
        "organisation",
        str,
        "fleet",
        "in a fleet of clusters, fair-share usage counts against one budget wherever it runs "
        "(organisation), or each cluster keeps its own (cluster)",
        choices=FAIR_SHARE_SCOPES,
    ).field()
    health: HealthConfig = field(default_factory=HealthConfig)
    maintenance: tuple[Maintenance, ...] = ()
    clusters: tuple[ClusterSpec, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, "clusters", fleet_from(self.clusters))
        if self.clusters:  # a fleet's size is the sum of its clusters'
            _check_fleet(self.clusters, self.gpus_per_node)
            object.__setattr__(self, "gpus", sum(c.gpus for c in self.clusters))
        _check_cluster(self.gpus, self.gpus_per_node)
        object.__setattr__(self, "maintenance", maintenance_plan(self.maintenance))
        self._check_maintenance()
        if not self.funded_load <= self.demand:
            raise ParamError(
                f"funded_load must be <= demand, got {self.funded_load} > {self.demand}"
            )
        days = self.days if self.days is not None or self.trace_path else DAYS.default
        if self.warmup_days is not None and days is not None and not self.warmup_days < days:
            raise ParamError(f"warmup_days must be below days ({days:g}), got {self.warmup_days:g}")
        policy_class(self.policy)
        # Knobs at their declared default are left out: two configs that run the same compare
        # (and hash) equal, whether a knob was spelled out or not (``from_flat(c.flat()) == c``).
        defaults = {p.name: p.default for p in policy_params(self.policy)}
        knobs = check_knobs(self.policy, self.policy_knobs)
        object.__setattr__(
            self,
            "policy_knobs",
            FrozenMap({k: v for k, v in knobs.items() if v != defaults[k]}),
        )
        object.__setattr__(self, "budget_shares", FrozenMap(_check_shares(self.budget_shares)))
        if isinstance(self.health, Mapping):
            object.__setattr__(self, "health", HealthConfig(**self.health))

    def _check_maintenance(self) -> None:
        if not self.clusters:
            named = sorted({w.cluster for w in self.maintenance if w.cluster})
            if named:
                raise ParamError(
                    f"maintenance names cluster {named[0]!r}, but the run has one cluster"
                )
            check_maintenance(self.maintenance, self.nodes)
            return
        names = [c.name for c in self.clusters]
        for w in self.maintenance:
            if w.cluster and w.cluster not in names:
                raise ParamError(
                    f"maintenance {w.name or '(unnamed)'}: no cluster {w.cluster!r}; "
                    f"the fleet's: {', '.join(names)}"
                )
            if w.nodes and not w.cluster:
                raise ParamError(
                    f"maintenance {w.name or '(unnamed)'}: lists nodes; name their cluster "
                    "(cluster: ...)"
                )
        for k, c in enumerate(self.clusters):
            check_maintenance(self.cluster_maintenance(k), c.gpus // self.gpus_per_node)

    @property
    def nodes(self) -> int:
        """Nodes in the cluster (in a fleet, in all its clusters)."""
        return self.gpus // self.gpus_per_node

    def cluster_maintenance(self, k: int) -> tuple[Maintenance, ...]:
        """The windows of the fleet's ``k``-th cluster (those naming it or none); an unnamed
        window is named after its place in the fleet's plan, as a one-cluster run names it."""
        name = self.clusters[k].name
        return tuple(
            w if w.name else replace(w, name=w.label(i))
            for i, w in enumerate(self.maintenance)
            if w.cluster in ("", name)
        )

    def cluster_config(self, k: int) -> SimConfig:
        """The config of the fleet's ``k``-th cluster on its own: its GPUs and its maintenance
        windows (per-cluster results are measured with it)."""
        return replace(
            self,
            clusters=(),
            gpus=self.clusters[k].gpus,
            maintenance=tuple(replace(w, cluster="") for w in self.cluster_maintenance(k)),
        )

    @property
    def horizon_s(self) -> float:
        """Simulated time span. Unset ``days`` follows the trace, a file's or a DataFrame's, and
        is known once the trace is read (``simulate`` and ``compare`` fill it in); with no trace
        at all it is the synthetic workload's 14 days."""
        if self.days is not None:
            return self.days * DAY_S
        if self.trace_path:
            raise ParamError(
                "days follows the trace and is not known before it is read; "
                "use the result's config, or set days"
            )
        return DAYS.default * DAY_S

    @property
    def warmup_s(self) -> float:
        """Start of the reporting window."""
        if self.warmup_days is not None:
            return self.warmup_days * DAY_S
        window = self.knobs().get("window_days", WARMUP_DAYS)
        return min(window, self.horizon_s / DAY_S / 2) * DAY_S

    def generator(self) -> GeneratorConfig:
        """The synthetic workload this config asks for."""
        values = {name: getattr(self, name) for name in _GENERATOR_FIELDS}
        return GeneratorConfig(**{**values, "days": self.horizon_s / DAY_S})

    def knobs(self) -> dict[str, Any]:
        """Every knob of the policy with its value in this run (declared default unless overridden)."""
        return {
            p.name: self.policy_knobs.get(p.name, p.default) for p in policy_params(self.policy)
        }

    # ----- flat form: one value per parameter name -----------------------------------------
    def flat(self) -> dict[str, Any]:
        """Every parameter of this run by name: run fields, health, the policy's knobs and
        ``share.<node>`` budget overrides (config columns of result tables, presets, sweeps)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _RUN_PARAMS}
        out.update({f.name: getattr(self.health, f.name) for f in fields(HealthConfig)})
        out.update(self.knobs())
        out.update({SHARE_PREFIX + k: v for k, v in self.budget_shares.items()})
        if self.clusters:  # (a fleet: its layout, as text; with_params reads it back)
            out["clusters"] = fleet_text(self.clusters)
        return out

    def with_params(self, values: Mapping[str, Any] | None = None, /, **kv: Any) -> SimConfig:
        """A copy with parameters set by name; text values (CLI, query strings) are parsed.

        Setting a trace on a synthetic config also lets ``days`` follow the trace, unless
        ``days`` is given too.

        A knob of the old policy that the new one does not declare is dropped when only the
        policy changes; a knob named here must belong to the policy.
        """
        values = {**(values or {}), **kv}
        clusters = values.pop("clusters", None)
        if clusters is not None:  # (with the node size given alongside, if any: checked by it)
            per_node = values.pop("gpus_per_node", self.gpus_per_node)
            fleet = replace(
                self, clusters=fleet_from(clusters), gpus_per_node=GPUS_PER_NODE.parse(per_node)
            )
            if fleet.clusters and "gpus" in values and GPUS.parse(values["gpus"]) == fleet.gpus:
                del values["gpus"]  # (a fleet's flat form names its total as well)
            return fleet.with_params(values)
        if self.clusters and "gpus" in values:
            raise ParamError(
                "a fleet's GPUs are its clusters' (set clusters, e.g. 'a:88,b:256', not gpus)"
            )
        run, health, knobs, shares = _split(values, values.get("policy", self.policy))
        policy = run.get("policy", self.policy)
        mine = {p.name for p in policy_params(policy)}
        kept = {k: v for k, v in self.policy_knobs.items() if k in mine}
        if len(kept) < len(self.policy_knobs):
            log.debug("knobs %s do not apply to %s", sorted(set(self.policy_knobs) - mine), policy)
        if run.get("trace_path") and not self.trace_path and "days" not in run:
            run["days"] = None  # a new trace is replayed over its whole span unless days is given
        return replace(
            self,
            **run,
            health=replace(self.health, **health),
            policy_knobs={**kept, **knobs},
            budget_shares={**self.budget_shares, **shares},
        )

    # ----- what-ifs on a fleet's layout (the same trace, the clusters rearranged) ---------
    def _fleet_index(self, name: str) -> int:
        names = [c.name for c in self.clusters]
        if name not in names:
            known = ", ".join(names) or "none: this run has one cluster"
            raise ParamError(f"no cluster {name!r}; the fleet's: {known}")
        return names.index(name)

    def _with_fleet(self, clusters: list[ClusterSpec]) -> SimConfig:
        kept = {c.name for c in clusters}
        plan = self._windows_kept(lambda w: not w.cluster or w.cluster in kept)
        return replace(self, clusters=tuple(clusters), maintenance=plan)

    def _windows_kept(self, keep: Callable[[Maintenance], bool]) -> tuple[Maintenance, ...]:
        """The maintenance windows ``keep`` keeps; if it drops any, an unnamed one kept is named
        after its place in the whole plan, so that it keeps its name in the new layout."""
        if all(keep(w) for w in self.maintenance):
            return self.maintenance
        return tuple(
            w if w.name else replace(w, name=w.label(i))
            for i, w in enumerate(self.maintenance)
            if keep(w)
        )

    def merge_clusters(self, *names: str, into: str | None = None) -> SimConfig:
        """A copy whose clusters ``names`` are one cluster (named ``into``, default the first
        name), as large as they were together, in the first one's place; it runs every job
        that named any of them. Maintenance windows naming a merged cluster are dropped."""
        if len(set(names)) < 2:
            raise ParamError(f"merge_clusters: name at least two clusters, got {list(names)}")
        ks = sorted({self._fleet_index(n) for n in names})
        merged = ClusterSpec(
            into or names[0],
            sum(self.clusters[k].gpus for k in ks),
            tuple(dict.fromkeys(n for k in ks for n in self.clusters[k].names)),
        )
        rest = [c for k, c in enumerate(self.clusters) if k not in ks[1:]]
        gone = {self.clusters[k].name for k in ks}
        plan = self._windows_kept(lambda w: w.cluster not in gone)
        dropped = [w.label(i) for i, w in enumerate(self.maintenance) if w.cluster in gone]
        if dropped:  # (the node numbers of one cluster mean other nodes in the merged one)
            log.warning(
                "merging %s drops maintenance %s, which named a merged cluster",
                "+".join(names),
                ", ".join(dropped),
            )
        merged_fleet = [merged if c is self.clusters[ks[0]] else c for c in rest]
        return replace(self._with_fleet(merged_fleet), maintenance=plan)

    def split_cluster(self, name: str, parts: int | list[int] = 2) -> SimConfig:
        """A copy where cluster ``name`` is several (``name-1``, ``name-2``, ...): ``parts``
        equal ones (whole nodes, the first ones larger by a node when it does not divide), or
        the listed GPUs, which must add up to its own. Each runs the jobs that named it, by the
        usual rule (least work per GPU)."""
        k = self._fleet_index(name)
        old, per = self.clusters[k], self.gpus_per_node
        if isinstance(parts, int):
            nodes = old.gpus // per
            if not 2 <= parts <= nodes:
                raise ParamError(f"split_cluster: {name} has {nodes} nodes; split it in 2..{nodes}")
            sizes = [(nodes // parts + (i < nodes % parts)) * per for i in range(parts)]
        else:
            sizes = [int(g) for g in parts]
            if len(sizes) < 2 or sum(sizes) != old.gpus:
                raise ParamError(
                    f"split_cluster: the parts must be two or more and add up to {name}'s "
                    f"{old.gpus} GPUs, got {sizes}"
                )
        pieces = [ClusterSpec(f"{name}-{i + 1}", g, old.names) for i, g in enumerate(sizes)]
        return self._with_fleet([*self.clusters[:k], *pieces, *self.clusters[k + 1 :]])

    def move_gpus(self, source: str, target: str, gpus: int) -> SimConfig:
        """A copy with ``gpus`` (whole nodes) moved from cluster ``source`` to ``target``."""
        a, b = self._fleet_index(source), self._fleet_index(target)
        if a == b or gpus <= 0 or gpus % self.gpus_per_node or gpus >= self.clusters[a].gpus:
            raise ParamError(
                f"move_gpus: move whole nodes ({self.gpus_per_node} GPUs each) between two "
                f"clusters, leaving {source} at least one node; got {gpus} GPUs"
            )
        sizes = {a: self.clusters[a].gpus - gpus, b: self.clusters[b].gpus + gpus}
        return self._with_fleet(
            [replace(c, gpus=sizes.get(k, c.gpus)) for k, c in enumerate(self.clusters)]
        )

    def resize_cluster(self, name: str, gpus: int) -> SimConfig:
        """A copy with cluster ``name`` at ``gpus`` GPUs (the fleet grows or shrinks)."""
        k = self._fleet_index(name)
        return self._with_fleet(
            [replace(c, gpus=gpus) if i == k else c for i, c in enumerate(self.clusters)]
        )

    def with_maintenance(self, *windows: Maintenance | Mapping[str, Any]) -> SimConfig:
        """A copy with this maintenance plan (replacing any other; none: no maintenance)."""
        return replace(self, maintenance=maintenance_plan(list(windows)))

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> SimConfig:
        """A config from parameter names and values (defaults for the rest)."""
        return cls().with_params(values)

    # ----- nested form: JSON next to every result ------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, saved next to every result."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(
            policy_knobs=dict(self.policy_knobs),
            budget_shares=dict(self.budget_shares),
            health=dataclasses.asdict(self.health),
            maintenance=[dataclasses.asdict(w) for w in self.maintenance],
            clusters=[dataclasses.asdict(c) for c in self.clusters],
        )
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimConfig:
        """Inverse of ``to_dict``; unknown keys raise ParamError."""
        data = dict(data)
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ParamError(f"unknown config key(s) {unknown}")
        data["health"] = HealthConfig(**(data.get("health") or {}))
        return cls(**data)


def parameters(policy: str | None = None) -> list[Param]:
    """Every declared parameter: run, cluster, workload, trace and health knobs, and the knobs
    of ``policy`` (default: of every registered policy, one entry per name)."""
    knobs = [p for name in ([policy] if policy else policy_names()) for p in policy_params(name)]
    return declared(SimConfig) + declared(HealthConfig) + merge_knobs(knobs)


def parameter(name: str, policy: str | None = None) -> Param:
    """One declared parameter by name (policy knobs: as ``policy`` declares it)."""
    for p in parameters(policy):
        if p.name == name:
            return p
    raise ParamError(_unknown(name, [p.name for p in parameters(policy)]))


def _split(values: Mapping[str, Any], policy: str) -> tuple[dict, dict, dict, dict]:
    """Route flat values to run fields, health fields, policy knobs and budget shares."""
    run_params = {p.name: p for p in declared(SimConfig)}
    health_params = {p.name: p for p in declared(HealthConfig)}
    knob_params = {p.name: p for p in policy_params(policy)}
    run, health, knobs, shares = {}, {}, {}, {}
    for key, value in values.items():
        if key.startswith(SHARE_PREFIX):
            shares[key[len(SHARE_PREFIX) :]] = _parse_share(key, value)
        elif key in run_params:
            run[key] = run_params[key].parse(value)
        elif key in health_params:
            health[key] = health_params[key].parse(value)
        elif key in knob_params:
            knobs[key] = knob_params[key].parse(value)
        else:
            everyone = [*run_params, *health_params, *(p.name for p in parameters())]
            if key in everyone:
                raise ParamError(
                    f"policy {policy!r} has no knob {key!r}; its knobs: {sorted(knob_params) or 'none'}"
                )
            raise ParamError(_unknown(key, everyone))
    return run, health, knobs, shares


def _unknown(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, list(dict.fromkeys(names)), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see impactlab.parameters()"
    return f"unknown parameter {key!r}{hint}"


def _parse_share(key: str, value: Any) -> float:
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ParamError(f"{key} must be a number, got {value!r}") from None
    if not share > 0 or math.isinf(share):
        raise ParamError(f"{key} must be a positive share, got {value!r}")
    return share


def _check_shares(shares: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): _parse_share(SHARE_PREFIX + str(k), v) for k, v in shares.items()}


def _check_cluster(gpus: int, per_node: int) -> None:
    if gpus < per_node or gpus % per_node:
        raise ParamError(
            f"gpus must be a positive multiple of gpus_per_node ({per_node}), got {gpus}"
        )


_GENERATOR_FIELDS = tuple(f.name for f in fields(GeneratorConfig) if f.name != "funded_shares")
_RUN_PARAMS = frozenset(p.name for p in declared(SimConfig))
