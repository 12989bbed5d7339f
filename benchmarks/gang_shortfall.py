"""Where the owed GPU-hours that impactful does not deliver go: the shortfall against what
funded work waited for, split by gang size, and what the waiting gangs sat beside.

    python benchmarks/gang_shortfall.py                      # 1024 GPUs, seeds 0-2, demands 2 and 3
    python benchmarks/gang_shortfall.py --gpus 256 --seeds 0 --variants impactful impactful+resv

Per run: impact; the shortfall (owed minus delivered up to owed, summed over projects) and the
funded GPU-hours queued in the window (``gang_idle(min_gpus=1)``), both as shares of the
window's capacity; the part of those queued hours held by multi-node gangs, by gang size; and
the GPU-hours lent to unallocated work while a gang waited. Variants as in ``scenarios.py``.

``--split`` adds where the owed GPUs were at each instant (``instant_split``): the projects
short of their owed rate at that instant, against what held the GPUs they were owed: projects
above their owed rate (their attempts still under the contract, or no longer), unallocated work,
or nothing. Over the window a project's surplus at one time makes up for its shortfall at
another, so the instant shortfall is larger than the headline one.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace

import numpy as np
import pandas as pd
from scenarios import VARIANTS

import impactlab as il
from impactlab.explain import Protection
from impactlab.metrics import clipped, held_of, interval_steps, owed_steps
from impactlab.tables import bucket_order

log = logging.getLogger("gang_shortfall")


def step_values(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A step function (``values[k]`` from ``times[k]`` on) read at each time of ``grid``."""
    return values[np.searchsorted(times, grid, side="right") - 1]


def protected_until(result: il.SimResult) -> np.ndarray:
    """When each attempt's contract ends (its start if it had none), by the run's policy."""
    att, protection = result._attempts, Protection(result)
    records = {job.job_id: job for job in result._records}
    starts = result.events[result.events["event"] == "start"]
    return np.array([s + protection(records[j], tuple(int(n) for n in nodes.split(",")), detail)
                     for j, nodes, s, detail in zip(att["job_id"], att["nodes"], att["start_s"], starts["detail"])])


def instant_split(result: il.SimResult) -> dict[str, float]:
    """The owed GPUs that projects short of their owed rate did not hold, integrated over the
    window as shares of its capacity, split by what held them at that instant: projects above
    their owed rate (by how much, with that surplus split between their attempts under the
    contract and the others in proportion), unallocated work, or nothing."""
    tree, window, per = result.tree, result.window, result.config.gpus_per_node
    times, healthy, rates = owed_steps(result.events, result.jobs, tree, window, per)
    att = result._attempts
    leaf = att["job_id"].map(result.jobs.set_index("job_id")["leaf"]).to_numpy(int)
    held = held_of(att["gpus"].to_numpy(), per).astype(float)
    start, end = att["start_s"].to_numpy(), att["end_s"].to_numpy()
    until = np.minimum(protected_until(result), end)
    funded = leaf >= 0
    series = {"all": interval_steps(start[funded], end[funded], held[funded], leaf[funded], tree.size),
              "contract": interval_steps(start[funded], until[funded], held[funded], leaf[funded], tree.size),
              "unallocated": interval_steps(start[~funded], end[~funded], held[~funded])}
    grid = np.unique(np.concatenate([times] + [t for t, _ in series.values()]))
    dur = clipped(grid, np.append(grid[1:], np.inf), window)
    leaves = list(tree.leaves)
    owed = step_values(times, rates, grid)[:, leaves]
    have, under = (step_values(*series[k], grid)[:, leaves] for k in ("all", "contract"))
    unallocated = step_values(*series["unallocated"], grid)[:, 0]
    idle = step_values(times, healthy, grid) - have.sum(axis=1) - unallocated
    short = np.maximum(owed - have, 0).sum(axis=1)
    surplus = np.maximum(have - owed, 0)
    over = np.minimum(surplus.sum(axis=1), short)  # what projects above their owed rate held
    # the surplus under contract: each project's surplus in proportion of its GPUs under contract
    total, part = surplus.sum(axis=1), np.divide(under, have, out=np.zeros_like(have), where=have > 0)
    contract = over * np.divide((surplus * part).sum(axis=1), total, out=np.zeros_like(total), where=total > 0)
    lent = np.minimum(short - over, unallocated)
    capacity_s = float((step_values(times, healthy, grid) * dur).sum())
    share = lambda x: float((x * dur).sum()) / capacity_s  # noqa: E731
    return {"instant short": share(short), "held over owed, under contract": share(contract),
            "held over owed, no contract": share(over - contract), "lent": share(lent),
            "idle": share(np.minimum(short - over - lent, np.maximum(idle, 0)))}


def measure(gpus: int, seed: int, demand: float, variant: str, split: bool = False) -> dict:
    """One run's shortfall and what funded work waited for."""
    policy, knobs = VARIANTS[variant]
    base = il.SimConfig(gpus=gpus, seed=seed, demand=demand)
    workload = il.generate(base.generator())
    result = il.simulate(replace(base, policy=policy, policy_knobs=knobs), trace=workload.trace,
                         budgets=workload.tree)
    window = result.window
    capacity_h = window.capacity * window.span_s / 3600
    leaves = result.budgets[result.budgets["leaf"]]
    owed = leaves["owed_gpu_s"].to_numpy()
    short_h = float((owed - np.minimum(leaves["delivered_gpu_s"].to_numpy(), owed)).sum()) / 3600
    funded = result.gang_idle(min_gpus=1).set_index("bucket")
    gangs = result.gang_idle().set_index("bucket")
    row = {"gpus": gpus, "seed": seed, "demand": demand, "variant": variant,
           "impact": result.summary()["impact"], "shortfall": short_h / capacity_h,
           "funded_queued": funded.loc["all", "queued_gpu_hours"] / capacity_h,
           "gang_queued": gangs.loc["all", "queued_gpu_hours"] / capacity_h,
           "gang_lent": gangs.loc["all", "lent_gpu_hours"] / capacity_h}
    for bucket, r in gangs.drop(index="all").iterrows():
        row[f"queued {bucket}"] = r["queued_gpu_hours"] / capacity_h
    if split:
        row.update(instant_split(result))
    log.info("%s", row)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[1024])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--demands", type=float, nargs="*", default=[2.0, 3.0])
    parser.add_argument("--variants", nargs="*", default=["impactful"], choices=sorted(VARIANTS))
    parser.add_argument("--split", action="store_true", help="also split the instant shortfall (instant_split)")
    parser.add_argument("--csv", help="also write every run's row here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = pd.DataFrame([measure(g, s, d, v, args.split) for g in args.gpus for d in args.demands for s in args.seeds
                         for v in args.variants])
    buckets = bucket_order(pd.Series([c.removeprefix("queued ") for c in rows if c.startswith("queued ")]))
    rows = rows[[c for c in rows if not c.startswith("queued ")] + [f"queued {b}" for b in buckets]]
    if args.csv:
        rows.to_csv(args.csv, index=False)
    print(markdown(rows))


def markdown(rows: pd.DataFrame) -> str:
    """The rows as a markdown table, shares to three decimals."""
    cells = rows.astype(object).where(rows.notna(), "")
    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    for _, r in cells.iterrows():
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
