"""The acceptance matrix: legacy, fairshare and impactful on the same traces, across cluster
sizes, seeds and demand levels, plus an all-funded overloaded trace (the numbers quoted in
docs/calibration.md).

    python benchmarks/studies/scenarios.py          # the full matrix (about half an hour)
    python benchmarks/studies/scenarios.py --quick  # 256 GPUs, seed 0, demand 2.5
    python benchmarks/studies/scenarios.py --gpus 256 --seeds 0 1 --demands 2 3 --variants impactful impactful+resv

Every variant replays the same trace in a row group. "largest gangs p90" is the p90 first-start
wait (hours) of funded jobs of at least max(9, G/16) GPUs submitted in the reporting window.
The second table is the funded jobs that gave up waiting (the ``gave_up`` warning), the third
(``SimResult.gang_idle`` and ``free_block_series``) fragmentation: how long
funded multi-node gangs waited, what was idle or lent to unallocated work meanwhile (shares of
the window's GPU-hours), and the mean largest block one job could get.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pandas as pd

import impactlab as il

#: Policy variants: name -> (policy, knobs).
VARIANTS = {
    "legacy": ("legacy", {}),
    "fairshare": ("fairshare", {}),
    "fairshare-noresv": ("fairshare", {"backfill_reservation": False}),
    "impactful": ("impactful", {}),
    "impactful+resv": ("impactful", {"backfill_reservation": True}),
    "impactful-noreserve": ("impactful", {"interactive_reserve": 0.0}),
    "impactful-reserve1node": (
        "impactful",
        {"interactive_reserve": 0.005},
    ),  # one node up to 200 nodes
    "impactful+everypass": ("impactful", {"gangs_preempt_every_pass": True}),
    "impactful+everypass+resv": (
        "impactful",
        {"gangs_preempt_every_pass": True, "backfill_reservation": True},
    ),
    "impactful-victims2": ("impactful", {"max_victim_ratio": 2.0}),
    "impactful-victimsinf": ("impactful", {"max_victim_ratio": float("inf")}),
    "impactful-refresh60": ("impactful", {"refresh_s": 60.0}),
    "impactful-nodrain": ("impactful", {"drain_for_gangs": False}),
    "impactful-nopack": ("impactful", {"pack_victims": False}),
}
DEFAULT_VARIANTS = ["legacy", "fairshare", "impactful", "impactful+resv"]


def all_funded(workload: il.inputs.generator.Workload, seed: int) -> pd.DataFrame:
    """The workload's trace with every unallocated job charged to a project, drawn in proportion
    to the projects' entitled shares (as in public traces, where every job has a queue)."""
    trace = workload.trace.copy()
    tree = workload.tree
    leaves = list(tree.leaves)
    names = [tree.names[leaf] for leaf in leaves]
    weights = np.array([tree.fraction[leaf] for leaf in leaves], dtype=float)
    rng = np.random.default_rng(seed)
    empty = trace["project"].fillna("") == ""
    trace.loc[empty, "project"] = rng.choice(names, int(empty.sum()), p=weights / weights.sum())
    return trace


def row(task: tuple) -> dict:
    """Headline numbers of one run."""
    scenario, variant, gpus, seed, demand, funded_only = task
    policy, knobs = VARIANTS[variant]
    base = il.SimConfig(gpus=gpus, seed=seed, demand=demand)
    workload = il.generate(base.generator())
    trace = all_funded(workload, seed) if funded_only else workload.trace
    result = il.simulate(
        replace(base, policy=policy, policy_knobs=knobs), trace=trace, budgets=workload.tree
    )
    s = result.summary()
    jobs, window = result.jobs, result.window
    big = jobs[
        (jobs.gpus >= max(9, gpus // 16))
        & (jobs.project.fillna("") != "")
        & (jobs.submit_s >= window.t0)
        & (jobs.submit_s < window.t1)
    ]
    return {
        "scenario": scenario,
        "variant": variant,
        "gpus": gpus,
        "seed": seed,
        "demand": demand,
        "occupancy": s["occupancy"],
        "impact": s["impact"],
        "unallocated_share": s["unallocated_share"],
        "debug_p90_s": s["wait_s"].get("debug", {}).get("p90", float("nan")),
        "big_p90_h": big.wait_s.quantile(0.9) / 3600 if len(big) else float("nan"),
        "preemptions": s["preemptions"],
        "gave_up": s["withdrawn_funded_share"],  # funded jobs that gave up waiting
        "gave_up_work": s["withdrawn_funded_work_share"],
        "sim_wall_s": s["sim_wall_s"],
        **fragmentation(result),
    }


def fragmentation(result: il.SimResult) -> dict:
    """While funded multi-node gangs waited (in the window): the share of the window they waited,
    and the GPU-hours left idle or lent to unallocated work as shares of the window's capacity;
    the mean largest block of free GPUs, and of free-or-lent GPUs, over the window."""
    window = result.window
    capacity_h = window.capacity * window.span_s / 3600
    gangs = result.gang_idle().set_index("bucket").loc["all"]
    blocks = result.free_block_series()
    inside = blocks[blocks.t_h * 3600 >= window.t0]
    return {
        "gang_waiting_share": gangs.waiting_h * 3600 / window.span_s,
        "gang_idle_share": gangs.idle_gpu_hours / capacity_h,
        "gang_lent_share": gangs.lent_gpu_hours / capacity_h,
        "largest_free_gpus": inside.largest_free_gpus.mean(),
        "largest_open_gpus": inside.largest_open_gpus.mean(),
    }


def tasks(args: argparse.Namespace) -> list[tuple]:
    """Every run of the matrix."""
    out = []
    for gpus in args.gpus:
        for demand in args.demands:
            for seed in args.seeds:
                for variant in args.variants:
                    out.append(
                        (f"{gpus} GPUs, demand {demand:g}", variant, gpus, seed, demand, False)
                    )
    if args.funded:
        for seed in args.seeds:
            for variant in args.variants:
                out.append(("all-funded, 256 GPUs, demand 2.5", variant, 256, seed, 2.5, True))
    return out


def table(rows: pd.DataFrame) -> str:
    """Means over seeds per scenario and variant, as a markdown table."""
    cols = ["occupancy", "impact", "unallocated_share", "debug_p90_s", "big_p90_h", "preemptions"]
    mean = rows.groupby(["scenario", "variant"], sort=False)[cols].mean()
    lo = rows.groupby(["scenario", "variant"], sort=False)["impact"].min()
    hi = rows.groupby(["scenario", "variant"], sort=False)["impact"].max()
    lines = [
        (
            "| scenario | policy | occupancy | impact (min-max over seeds) | unallocated share | "
            "debug p90 (s) | largest gangs p90 (h) | preemptions |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for (scenario, variant), r in mean.iterrows():
        lines.append(
            f"| {scenario} | {variant} | {r.occupancy:.3f} | {r.impact:.3f} "
            f"({lo[scenario, variant]:.3f}-{hi[scenario, variant]:.3f}) | {r.unallocated_share:.3f} | "
            f"{r.debug_p90_s:.0f} | {r.big_p90_h:.1f} | {r.preemptions:.0f} |"
        )
    return "\n".join(lines)


def gave_up_table(rows: pd.DataFrame) -> str:
    """Funded jobs that gave up waiting, per scenario and variant: the share of the funded jobs
    and of the funded work asked for (GPUs x run time), least and most over seeds."""
    grouped = rows.groupby(["scenario", "variant"], sort=False)[["gave_up", "gave_up_work"]]
    lo, hi = grouped.min(), grouped.max()
    lines = [
        "| scenario | policy | funded jobs that gave up | their share of the funded work |",
        "|---|---|---|---|",
    ]
    for (scenario, variant), low in lo.iterrows():
        high = hi.loc[(scenario, variant)]
        lines.append(
            f"| {scenario} | {variant} | {low.gave_up:.1%}-{high.gave_up:.1%} | "
            f"{low.gave_up_work:.1%}-{high.gave_up_work:.1%} |"
        )
    return "\n".join(lines)


def fragmentation_table(rows: pd.DataFrame) -> str:
    """Means over seeds of the fragmentation columns, as a markdown table."""
    cols = [
        "gang_waiting_share",
        "gang_idle_share",
        "gang_lent_share",
        "largest_free_gpus",
        "largest_open_gpus",
    ]
    mean = rows.groupby(["scenario", "variant"], sort=False)[cols].mean()
    lines = [
        (
            "| scenario | policy | gangs waiting (share of time) | idle while gangs waited | lent while "
            "gangs waited | largest free block (GPUs) | largest free-or-lent block (GPUs) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for (scenario, variant), r in mean.iterrows():
        lines.append(
            f"| {scenario} | {variant} | {r.gang_waiting_share:.2f} | {r.gang_idle_share:.3f} | "
            f"{r.gang_lent_share:.3f} | {r.largest_free_gpus:.1f} | {r.largest_open_gpus:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gpus", type=int, nargs="*", default=[88, 256, 1024])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--demands", type=float, nargs="*", default=[2.0, 3.0])
    parser.add_argument("--variants", nargs="*", default=DEFAULT_VARIANTS, choices=sorted(VARIANTS))
    parser.add_argument(
        "--no-funded", dest="funded", action="store_false", help="skip the all-funded trace"
    )
    parser.add_argument("--csv", help="also write every run's row here")
    args = parser.parse_args()
    if args.quick:
        args.gpus, args.seeds, args.demands, args.funded = [256], [0], [2.5], False
    done = []
    for task in tasks(args):  # one process: a process pool hung in CI sandboxes
        done.append(row(task))
        if args.csv:  # rewritten after every run, so a long matrix stopped early keeps its rows
            pd.DataFrame(done).to_csv(args.csv, index=False)
    rows = pd.DataFrame(done)
    print(table(rows))
    print()
    print(gave_up_table(rows))
    print()
    print(fragmentation_table(rows))


if __name__ == "__main__":
    main()
