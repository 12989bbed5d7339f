"""Where the owed GPU-hours that impactful does not deliver go: the shortfall against what
funded work waited for, split by gang size, and what the waiting gangs sat beside.

    python benchmarks/studies/gang_shortfall.py  # 1024 GPUs, seeds 0-2, demands 2 and 3
    python benchmarks/studies/gang_shortfall.py --gpus 256 --seeds 0 --variants impactful impactful+resv

Per run: impact; the shortfall (owed minus delivered up to owed, summed over projects) and the
funded GPU-hours queued in the window (``gang_idle(min_gpus=1)``), both as shares of the
window's capacity; the part of those queued hours held by multi-node gangs, by gang size; and
the GPU-hours lent to unallocated work while a gang waited. Variants as in ``scenarios.py``.

``--split`` adds where the owed GPUs were at each instant (``SimResult.owed_split``): the projects
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
from impactlab.analysis.tables import bucket_order

log = logging.getLogger("gang_shortfall")


def measure(gpus: int, seed: int, demand: float, variant: str, split: bool = False) -> dict:
    """One run's shortfall and what funded work waited for."""
    policy, knobs = VARIANTS[variant]
    base = il.SimConfig(gpus=gpus, seed=seed, demand=demand)
    workload = il.generate(base.generator())
    result = il.simulate(
        replace(base, policy=policy, policy_knobs=knobs),
        trace=workload.trace,
        budgets=workload.tree,
    )
    window = result.window
    capacity_h = window.capacity * window.span_s / 3600
    leaves = result.budgets[result.budgets["leaf"]]
    owed = leaves["owed_gpu_s"].to_numpy()
    short_h = float((owed - np.minimum(leaves["delivered_gpu_s"].to_numpy(), owed)).sum()) / 3600
    funded = result.gang_idle(min_gpus=1).set_index("bucket")
    gangs = result.gang_idle().set_index("bucket")
    row = {
        "gpus": gpus,
        "seed": seed,
        "demand": demand,
        "variant": variant,
        "impact": result.summary()["impact"],
        "shortfall": short_h / capacity_h,
        "funded_queued": funded.loc["all", "queued_gpu_hours"] / capacity_h,
        "gang_queued": gangs.loc["all", "queued_gpu_hours"] / capacity_h,
        "gang_lent": gangs.loc["all", "lent_gpu_hours"] / capacity_h,
    }
    for bucket, r in gangs.drop(index="all").iterrows():
        row[f"queued {bucket}"] = r["queued_gpu_hours"] / capacity_h
    if split:
        row.update(
            result.owed_split().set_index("held_by")["share"].rename({"all": "instant short"})
        )
    log.info("%s", row)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[1024])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--demands", type=float, nargs="*", default=[2.0, 3.0])
    parser.add_argument("--variants", nargs="*", default=["impactful"], choices=sorted(VARIANTS))
    parser.add_argument(
        "--split",
        action="store_true",
        help="also split the instant shortfall (SimResult.owed_split)",
    )
    parser.add_argument("--csv", help="also write every run's row here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = pd.DataFrame(
        [
            measure(g, s, d, v, args.split)
            for g in args.gpus
            for d in args.demands
            for s in args.seeds
            for v in args.variants
        ]
    )
    buckets = bucket_order(
        pd.Series([c.removeprefix("queued ") for c in rows if c.startswith("queued ")])
    )
    rows = rows[[c for c in rows if not c.startswith("queued ")] + [f"queued {b}" for b in buckets]]
    if args.csv:
        rows.to_csv(args.csv, index=False)
    print(markdown(rows))


def markdown(rows: pd.DataFrame) -> str:
    """The rows as a markdown table, shares to three decimals."""
    cells = rows.astype(object).where(rows.notna(), "")
    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    for _, r in cells.iterrows():
        lines.append(
            "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
