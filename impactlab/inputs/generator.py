"""A seeded, synthetic Ai2-like workload: an organisation with a budget tree and a trace.

Calibration (docs/model.md section 3, docs/calibration.md): each job kind gets a share of the
funded GPU time and its own size and duration distributions; funded work is offered at
``funded_load`` x capacity and the rest of ``demand`` is unallocated hyperparameter-search work
that only backfills (spec ``search``, kind ``other``). Arrivals follow diurnal and weekly
cycles. The legacy-era habits (inflated priorities, long jobs opting out of preemption) are
drawn into the same rows.

A fleet (``generate_fleet``) is several clusters under one organisation: one budget tree and
one set of users for the fleet's total GPUs, and per cluster the jobs of a workload sized to
that cluster, drawn from random streams of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..base.config import GeneratorConfig
from ..base.rng import stream, streams
from ..base.units import DAY_S, HOUR_S
from .budgets import BudgetTree


@dataclass(frozen=True)
class KindSpec:
    """How the jobs of one spec are drawn (a spec is a job kind, or ``search``)."""

    gpus: tuple[int, ...]  # gang sizes (or, for pretrain, 1/x of the cluster)
    gpu_p: tuple[float, ...]
    median_s: float  # log-normal duration
    sigma: float
    min_s: float
    max_s: float
    min_runtime_s: float  # declared protection
    checkpoint_s: float
    util: float
    patience_s: float  # median patience (log-normal, sigma 0.5); inf = never withdrawn
    burst: float = 1.0  # mean jobs submitted together (evals after a checkpoint)


INF = math.inf
#: How each spec's jobs are drawn, by spec name. A spec is a job kind (``trace.KINDS``) except
#: ``search``: the unallocated hyperparameter searches, whose jobs are of kind ``other``.
SPECS: dict[str, KindSpec] = {
    "debug": KindSpec(
        (1, 2, 4, 8),
        (0.55, 0.2, 0.15, 0.1),
        10 * 60,
        1.0,
        60,
        4 * HOUR_S,
        1800,
        INF,
        0.3,
        3 * HOUR_S,
    ),
    # A session asks to be protected for as long as it lasts (the cap decides: 8 h by default).
    "interactive": KindSpec(
        (1, 2, 4, 8),
        (0.5, 0.25, 0.15, 0.1),
        6 * HOUR_S,
        0.8,
        1800,
        48 * HOUR_S,
        INF,
        INF,
        0.2,
        3 * HOUR_S,
    ),
    "eval": KindSpec(
        (1, 2, 4, 8), (0.7, 0.1, 0.1, 0.1), 8 * 60, 0.8, 60, 1800, 1800, INF, 0.6, DAY_S, burst=6.0
    ),
    "training": KindSpec(
        (8, 16, 32, 64),
        (0.4, 0.3, 0.2, 0.1),
        7 * HOUR_S,
        0.8,
        HOUR_S,
        24 * HOUR_S,
        6 * HOUR_S,
        1800,
        0.8,
        2 * DAY_S,
    ),
    "pretrain": KindSpec(
        (16, 8, 4),
        (0.3, 0.45, 0.25),
        24 * HOUR_S,
        0.5,
        4 * HOUR_S,
        72 * HOUR_S,
        8 * HOUR_S,
        3600,
        0.9,
        INF,
    ),
    "search": KindSpec(
        (1, 2, 4, 8),
        (0.5, 0.2, 0.15, 0.15),
        5 * HOUR_S,
        0.6,
        1800,
        24 * HOUR_S,
        HOUR_S,
        1800,
        0.7,
        12 * HOUR_S,
    ),
}

#: Share of funded GPU time per kind (calibration targets: 2-5%, 2-10%, 20-40%, 50-70%).
FUNDED_SHARES = {
    "debug": 0.025,
    "interactive": 0.015,
    "eval": 0.03,
    "training": 0.30,
    "pretrain": 0.63,
}

#: Legacy-era priority levels (0 low .. 3 urgent): inflated towards the top.
PRIORITY_P = (0.05, 0.25, 0.55, 0.15)


@dataclass(frozen=True)
class Workload:
    """A generated trace with the organisation that produced it."""

    trace: pd.DataFrame
    tree: BudgetTree
    users: pd.DataFrame  # user -> project


def generate(config: GeneratorConfig | None = None) -> Workload:
    """Build the organisation and the trace for ``config``; same config, same rows."""
    config = config or GeneratorConfig()
    org_rng, time_rng, kind_rng, legacy_rng = streams(
        config.seed, ("organisation", "arrivals", "jobs", "habits")
    )
    tree, users, weights = _organisation(config, org_rng)
    trace = _cluster_trace(config, users, weights, org_rng, time_rng, kind_rng, legacy_rng)
    return Workload(trace, tree, users)


def generate_fleet(config: GeneratorConfig, clusters: Sequence[tuple[str, int]]) -> Workload:
    """Build one organisation and one trace for a fleet of clusters; same inputs, same rows.

    ``config.gpus`` is the fleet's total and sets the organisation (budget tree, users, project
    demand), built as ``generate`` builds it. ``clusters`` gives each cluster's name and GPUs in
    order; the GPUs must add up to ``config.gpus``. Each cluster gets the jobs of ``config``
    resized to it (gang sizes scale to the cluster, the load per GPU stays), drawn from the
    streams ``arrivals``, ``jobs`` and ``habits`` indexed by its position, with users picked
    from the organisation's. The trace has the schema's columns and a last column ``cluster``;
    a job id is the cluster's name, a dot and the job's id within its cluster, and rows are
    ordered by submit time, ties by cluster order and then by order within the cluster.
    """
    sized = _fleet_configs(config, clusters)
    org_rng = stream(config.seed, "organisation")
    tree, users, weights = _organisation(config, org_rng)
    parts = []
    for k, (name, cluster_config) in enumerate(sized):
        time_rng, kind_rng, legacy_rng = (
            stream(config.seed, s, k) for s in ("arrivals", "jobs", "habits")
        )
        part = _cluster_trace(
            cluster_config, users, weights, org_rng, time_rng, kind_rng, legacy_rng
        )
        part["job_id"] = [f"{name}.{job_id}" for job_id in part["job_id"]]
        part["cluster"] = name
        parts.append(part)
    trace = pd.concat(parts, ignore_index=True)
    trace = trace.sort_values("submit_s", kind="stable").reset_index(drop=True)
    return Workload(trace, tree, users)


def _fleet_configs(
    config: GeneratorConfig, clusters: Sequence[tuple[str, int]]
) -> list[tuple[str, GeneratorConfig]]:
    """Each cluster's name and ``config`` resized to it, or ValueError for a fleet that cannot
    be built: no clusters, a missing or repeated name, a cluster size the config refuses, or
    sizes that do not add up to ``config.gpus``."""
    clusters = [(name, gpus) for name, gpus in clusters]
    if not clusters:
        raise ValueError("a fleet needs at least one cluster, got none")
    names = [name for name, _gpus in clusters]
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"cluster names must be non-empty strings, got {name!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"cluster names must be unique, got {repeated} more than once")
    sized = []
    for name, gpus in clusters:
        try:
            sized.append((name, replace(config, gpus=gpus)))
        except ValueError as err:
            raise ValueError(f"cluster {name!r}: {err}") from err
    total = sum(c.gpus for _name, c in sized)
    if total != config.gpus:
        raise ValueError(
            f"the clusters' GPUs must add up to the fleet's {config.gpus}, got {total} "
            f"({' + '.join(str(c.gpus) for _name, c in sized)})"
        )
    return sized


def _cluster_trace(
    config: GeneratorConfig,
    users: pd.DataFrame,
    weights: dict,
    org_rng: np.random.Generator,
    time_rng: np.random.Generator,
    kind_rng: np.random.Generator,
    legacy_rng: np.random.Generator,
) -> pd.DataFrame:
    """The jobs of one cluster of ``config.gpus`` GPUs, in the schema (as ``_finish`` gives
    them): each job kind offers its share of the funded load, searches the rest of the demand;
    projects are drawn by the organisation's demand ``weights`` and users among its ``users``
    (with ``org_rng``, continued from building the organisation)."""
    capacity_gpu_s = config.gpus * config.days * DAY_S
    projects = np.array(sorted(weights))
    project_p = np.array([weights[p] for p in projects])
    parts = []
    for kind, share in (config.funded_shares or FUNDED_SHARES).items():
        target = share * config.funded_load * capacity_gpu_s
        if kind == "pretrain":
            rows = _campaigns(target, config, projects, project_p, kind_rng)
        else:
            rows = _kind_jobs(kind, target, config, kind_rng, time_rng)
            rows["project"] = kind_rng.choice(projects, size=len(rows), p=project_p)
        parts.append(rows)
    searches = _kind_jobs(
        "search", (config.demand - config.funded_load) * capacity_gpu_s, config, kind_rng, time_rng
    )
    searches["project"] = ""
    parts.append(searches)
    trace = pd.concat(parts, ignore_index=True)
    trace["user"] = _pick_users(trace["project"].to_numpy(), users, org_rng)
    _legacy_habits(trace, config, legacy_rng)
    return _finish(trace)


def _organisation(
    config: GeneratorConfig, rng: np.random.Generator
) -> tuple[BudgetTree, pd.DataFrame, dict]:
    """Programs -> projects -> users with Zipf-like shares; demand weights per project."""
    n_users = max(8, round(config.users_per_1024_gpus * config.gpus / 1024))
    n_projects = max(4, round(n_users / 4))
    n_programs = max(2, round(math.sqrt(n_projects)))
    shares = 100.0 / np.arange(1, n_projects + 1) ** 0.8
    rng.shuffle(shares)
    program_of = np.arange(n_projects) % n_programs
    names = [f"p{i:02d}" for i in range(n_projects)]
    spec = {
        "name": "root",
        "children": [
            {
                "name": f"program{g}",
                "share": float(shares[program_of == g].sum()),
                "children": [
                    {"name": names[i], "share": round(float(shares[i]), 2)}
                    for i in range(n_projects)
                    if program_of[i] == g
                ],
            }
            for g in range(n_programs)
        ],
    }
    tree = BudgetTree.from_dict(spec)
    # Demand does not follow shares exactly: some projects ask for more, some for less.
    demand = shares * rng.lognormal(0.0, 0.5, n_projects)
    weights = dict(zip(names, demand / demand.sum()))
    user_project = rng.choice(names, size=n_users, p=shares / shares.sum())
    user_project[:n_projects] = names  # every project has at least one user
    users = pd.DataFrame({"user": [f"u{i:03d}" for i in range(n_users)], "project": user_project})
    return tree, users, weights


def _kind_jobs(
    spec_name: str,
    target_gpu_s: float,
    config: GeneratorConfig,
    rng: np.random.Generator,
    time_rng: np.random.Generator,
) -> pd.DataFrame:
    """Jobs of one spec offering ``target_gpu_s`` GPU-seconds, spread over the days by the
    weekly cycle (each day gets its share exactly, up to one job) and within a day by the
    diurnal cycle."""
    spec = SPECS[spec_name]
    sizes = _sizes(spec_name, spec, config)
    day_w = _day_weights(config.days)
    frames = []
    for day, weight in enumerate(day_w):
        gpus, dur = _draw_until(spec, sizes, target_gpu_s * weight, rng)
        span = min(1.0, config.days - day)  # the last day may be partial
        submit = day * DAY_S + _times_in_day(len(dur), spec.burst, rng, time_rng, span)
        frames.append(pd.DataFrame({"gpus": gpus, "duration_s": dur, "submit_s": submit}))
    out = pd.concat(frames, ignore_index=True)
    out = out[out["submit_s"] < config.days * DAY_S]
    return out.assign(kind="other" if spec_name == "search" else spec_name, spec=spec_name)


def _draw_until(
    spec: KindSpec, sizes: np.ndarray, target_gpu_s: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw gangs and durations until their GPU-seconds reach ``target_gpu_s``."""
    mean_gpu_s = float(np.dot(sizes, spec.gpu_p)) * spec.median_s * math.exp(spec.sigma**2 / 2)
    n = max(4, int(target_gpu_s / mean_gpu_s * 1.5) + 10)
    gpus = rng.choice(sizes, size=n, p=spec.gpu_p)
    dur = np.clip(rng.lognormal(math.log(spec.median_s), spec.sigma, n), spec.min_s, spec.max_s)
    keep = min(n, int(np.searchsorted(np.cumsum(gpus * dur), target_gpu_s)) + 1)
    return gpus[:keep], dur[:keep]


def _campaigns(
    target_gpu_s: float,
    config: GeneratorConfig,
    projects: np.ndarray,
    project_p: np.ndarray,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Pretraining as campaigns: chains of long runs, each submitted when the previous one
    should end. Each concurrent slot keeps its gang size (a team's pretraining footprint);
    slots are added until they cover the target, and a slot idles between campaigns just
    enough that the offered load matches it, so the load is steady over time. A campaign
    ends (finished or cancelled) after a geometric number of runs."""
    spec = SPECS["pretrain"]
    sizes = _sizes("pretrain", spec, config)
    horizon_s = config.days * DAY_S
    busy_gpus = target_gpu_s / horizon_s
    slot_gpus: list[int] = []
    while sum(slot_gpus) < busy_gpus:
        slot_gpus.append(int(rng.choice(sizes, p=spec.gpu_p)))
    duty = busy_gpus / sum(slot_gpus)
    campaign_s = config.pretrain_chain_mean * (
        spec.median_s * math.exp(spec.sigma**2 / 2) + 1.25 * HOUR_S
    )
    idle_mean_s = campaign_s * (1.0 - duty) / duty
    rows = []
    for gpus in slot_gpus:
        t = -float(rng.uniform(0, campaign_s + idle_mean_s))  # slots are mid-campaign at day 0
        while t < horizon_s:
            project = str(rng.choice(projects, p=project_p))
            for _run in range(int(rng.geometric(1.0 / config.pretrain_chain_mean))):
                dur = float(
                    np.clip(
                        rng.lognormal(math.log(spec.median_s), spec.sigma), spec.min_s, spec.max_s
                    )
                )
                if 0 <= t < horizon_s:
                    rows.append((gpus, dur, t, project))
                elif t < 0 < t + dur:  # under way at day 0: what is left of it is submitted then
                    rows.append((gpus, t + dur, 0.0, project))
                t += dur + rng.uniform(0.5, 2.0) * HOUR_S
            t += idle_mean_s * rng.uniform(0.5, 1.5)
    out = pd.DataFrame(rows, columns=["gpus", "duration_s", "submit_s", "project"])
    return out.assign(submit_s=out["submit_s"].round(1), kind="pretrain", spec="pretrain")


def _sizes(spec_name: str, spec: KindSpec, config: GeneratorConfig) -> np.ndarray:
    """Gang sizes scaled to the cluster: at most a quarter of it, whole nodes above one node."""
    per = config.gpus_per_node
    cap = max(per, config.gpus // 4 // per * per)
    if spec_name == "pretrain":
        raw = [max(per, round(config.gpus / x / per) * per) for x in spec.gpus]
    else:
        raw = list(spec.gpus)
    return np.minimum(np.array(raw), cap)


def _day_weights(days: float) -> np.ndarray:
    """Share of the offered load per day: weekdays busier than weekends (sums to 1)."""
    n = math.ceil(days)
    weight = np.where(np.arange(n) % 7 >= 5, 0.5, 1.2)
    weight[-1] *= days - (n - 1)  # a partial last day
    return weight / weight.sum()


def _hour_weights() -> np.ndarray:
    """Relative submissions per hour of the day: busy afternoons, quiet nights."""
    hours = np.arange(24)
    rate = 1.0 + 0.35 * np.sin(2 * np.pi * (hours - 9) / 24)
    return rate / rate.sum()


def _times_in_day(
    n: int, burst: float, rng: np.random.Generator, time_rng: np.random.Generator, span: float = 1.0
) -> np.ndarray:
    """Submit times within the first ``span`` of one day for ``n`` jobs; a burst shares a time."""
    n_bursts = max(1, math.ceil(n / burst))
    hours_open = math.ceil(24 * span)
    weights = _hour_weights()[:hours_open]
    hours = time_rng.choice(hours_open, size=n_bursts, p=weights / weights.sum())
    starts = np.minimum((hours + time_rng.random(n_bursts)) * HOUR_S, span * DAY_S - 1.0)
    which = np.sort(rng.integers(0, n_bursts, size=n)) if burst > 1 else np.arange(n)
    return np.round(starts[which], 1)


def _pick_users(projects: np.ndarray, users: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    """A user of the job's project (any user for unallocated work)."""
    members = users.groupby("project")["user"].apply(list).to_dict()
    everyone = users["user"].tolist()
    # Each job's list of candidates, numbered; one draw per job below the length of its list
    # (an array of bounds draws what one scalar draw per job would, in the same order).
    lists = [*members.values(), everyone]
    number = {p: k for k, p in enumerate(members)}
    which = np.array([number.get(p, len(members)) for p in projects], dtype=np.int64)
    offsets = np.cumsum([0, *map(len, lists)])
    flat = np.array([u for names in lists for u in names], dtype=object)
    picks = rng.integers(0, np.diff(offsets)[which]) if len(which) else which
    return flat[offsets[which] + picks].astype(str)


def _legacy_habits(trace: pd.DataFrame, config: GeneratorConfig, rng: np.random.Generator) -> None:
    """Inflated priorities and opt-outs of preemption, as users behaved under the old system."""
    n = len(trace)
    trace["priority"] = rng.choice(len(PRIORITY_P), size=n, p=PRIORITY_P)
    long = trace["duration_s"].to_numpy() > 8 * HOUR_S
    opt_out = rng.random(n) < np.where(long, config.opt_out_long, config.opt_out_short)
    trace["preemptible"] = ~opt_out
    spec = trace["spec"].map(SPECS)
    trace["min_runtime_s"] = [s.min_runtime_s for s in spec]
    trace["checkpoint_s"] = [s.checkpoint_s for s in spec]
    base_util = np.array([s.util for s in spec])
    trace["util"] = np.round(np.clip(base_util + rng.normal(0, 0.05, n), 0.05, 1.0), 3)
    median = np.array([s.patience_s for s in spec])
    trace["patience_s"] = np.round(median * rng.lognormal(0.0, 0.5, n), 0)


def _finish(trace: pd.DataFrame) -> pd.DataFrame:
    """Order by submit time, name the jobs, keep the schema's columns.

    Jobs submitted at the same time are ordered by spec name, so a renamed spec may renumber
    the jobs (and change results): a new name must sort where the old one did."""
    trace = trace.sort_values(["submit_s", "spec", "duration_s"], kind="stable").reset_index(
        drop=True
    )
    trace["job_id"] = [f"j{i:06d}" for i in range(len(trace))]
    trace["duration_s"] = trace["duration_s"].round(0)
    cols = [
        "job_id",
        "submit_s",
        "user",
        "project",
        "gpus",
        "duration_s",
        "kind",
        "min_runtime_s",
        "priority",
        "preemptible",
        "checkpoint_s",
        "util",
        "patience_s",
    ]
    return trace[cols]
