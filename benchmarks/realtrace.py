"""A generated trace with the shape of public GPU-cluster traces (Philly, Helios, Acme), for
benchmarks: most jobs take one GPU, durations are heavy-tailed from a minute to days, jobs
come in bursts (sweeps), a few gangs of 16-64 GPUs get blocked by fragmentation, hundreds of
jobs run at once, and the cluster is overloaded so that a backlog builds.

    python benchmarks/realtrace.py --jobs 20000 --gpus 512     # describe one such trace

``public_shape(jobs, gpus, seed)`` returns ``(trace, tree)``; the span follows from the load.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np
import pandas as pd

import impactlab as il
from impactlab.base.units import DAY_S, HOUR_S
from impactlab.inputs.traces.reshape import fill_contract

log = logging.getLogger("realtrace")

#: Gang sizes and their share of jobs: ~90% 1 GPU, a few 16-64 GPU multi-node gangs.
SIZES = np.array([1, 2, 4, 8, 16, 32, 64])
SIZE_P = np.array([0.90, 0.035, 0.03, 0.02, 0.008, 0.005, 0.002])
#: Budget tree: programs -> virtual clusters (the public traces' queues), Zipf-like shares.
PROGRAMS = 4
VCS_PER_PROGRAM = 3


def budget_tree() -> il.BudgetTree:
    """Programs of virtual clusters, shares falling like 1/rank."""
    children = []
    for p in range(PROGRAMS):
        vcs = [{"name": f"vc{p}{v}", "share": 1.0 / (v + 1)} for v in range(VCS_PER_PROGRAM)]
        children.append({"name": f"prog{p}", "share": 1.0 / (p + 1), "children": vcs})
    return il.BudgetTree.from_dict({"name": "root", "children": children})


def _durations_s(rng: np.random.Generator, gpus: np.ndarray) -> np.ndarray:
    """Log-normal work, median ~10 min for one GPU and longer for gangs, from 1 min to 5 days."""
    median_s = np.where(gpus == 1, 600.0, np.where(gpus <= 8, 3600.0, 4 * 3600.0))
    return np.clip(median_s * np.exp(rng.normal(0.0, 2.0, len(gpus))), 60.0, 5 * DAY_S).round()


def _submits_s(rng: np.random.Generator, jobs: int, span_s: float) -> np.ndarray:
    """Bursty arrivals: sweeps of 1-200 jobs a few seconds apart, sweep starts on a daily cycle."""
    sizes = np.minimum(rng.zipf(1.6, jobs), 200)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), jobs)) + 1]
    starts = rng.random(len(sizes)) * span_s
    day = starts % DAY_S  # thin the night: keep a night start with probability 1/2
    night = (day < 8 * HOUR_S) & (rng.random(len(sizes)) < 0.5)
    starts[night] += 10 * HOUR_S
    first = np.repeat(starts % span_s, sizes)
    within = np.concatenate([np.arange(n) for n in sizes]) * rng.exponential(5.0, len(first))
    return np.sort(first + within)[:jobs]


def public_shape(
    jobs: int,
    gpus: int,
    seed: int = 0,
    load: float = 1.4,
    funded_share: float = 0.9,
    contracts: bool = True,
) -> tuple[pd.DataFrame, il.BudgetTree]:
    """A validated trace of ``jobs`` jobs for ``gpus`` GPUs at offered ``load`` (GPU-hours
    submitted per hour / capacity), and its budget tree. Queued jobs give up after a
    log-normal patience (median 12 h), so the backlog stays bounded on long runs. Every job
    gets its kind's default minimum runtime (``fill_contract``) unless ``contracts`` is off."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    size = rng.choice(SIZES, jobs, p=SIZE_P / SIZE_P.sum())
    size = np.minimum(size, gpus)
    work_s = _durations_s(rng, size)
    span_s = float((size * work_s).sum()) / (load * gpus)
    tree = budget_tree()
    vcs = [tree.names[leaf] for leaf in tree.leaves]
    weights = np.array([tree.fraction[leaf] for leaf in tree.leaves])
    project = rng.choice(vcs, jobs, p=weights / weights.sum())
    project = np.where(rng.random(jobs) < funded_share, project, "")
    kind = np.where(
        size > 8,
        "training",
        np.where(size > 1, "training", np.where(work_s <= 1800, "eval", "other")),
    )
    kind = np.where((size <= 2) & (rng.random(jobs) < 0.03), "debug", kind)
    trace = pd.DataFrame(
        {
            "job_id": [f"r{i:07d}" for i in range(jobs)],
            "submit_s": _submits_s(rng, jobs, span_s).round(1),
            "user": [f"u{k:03d}" for k in rng.integers(0, 150, jobs)],
            "project": project,
            "gpus": size,
            "duration_s": work_s,
            "kind": kind,
            "patience_s": (12 * HOUR_S * np.exp(rng.normal(0.0, 1.0, jobs))).round(),
        }
    )
    trace = il.validate_trace(trace, source="public-shape trace", max_gpus=gpus)
    return (fill_contract(trace) if contracts else trace), tree


def describe(trace: pd.DataFrame, gpus: int) -> dict[str, float]:
    """The shape figures the benchmark claims: job mix, durations, span and offered load."""
    span_s = float(trace.submit_s.max())
    return {
        "jobs": len(trace),
        "days": span_s / DAY_S,
        "one_gpu_share": float((trace.gpus == 1).mean()),
        "gangs_16_64": int((trace.gpus >= 16).sum()),
        "median_duration_s": float(trace.duration_s.median()),
        "p99_duration_h": float(trace.duration_s.quantile(0.99) / HOUR_S),
        "load": float((trace.gpus * trace.duration_s).sum() / (gpus * span_s)),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    built, _ = public_shape(args.jobs, args.gpus, args.seed)
    for key, value in describe(built, args.gpus).items():
        log.info("%-18s %s", key, f"{value:.3g}" if isinstance(value, float) else value)
