"""The acceptance matrix: impactful against legacy on the same traces, across seeds, cluster
sizes and demand levels (the numbers quoted in docs/calibration.md).

    python benchmarks/scenarios.py            # the full matrix (a few minutes)
    python benchmarks/scenarios.py --quick    # the default scenario only
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import impactlab as il

MATRIX = [{}, {"seed": 1}, {"seed": 2}, {"seed": 3}, {"seed": 4}, {"gpus": 88}, {"gpus": 1024},
          {"demand": 2.0}, {"demand": 3.0}]


def row(config: il.SimConfig, workload: il.generator.Workload) -> dict:
    """Headline numbers of one run."""
    s = il.simulate(config, trace=workload.trace, budgets=workload.tree).summary()
    debug = s["wait_s"].get("debug", {})
    return {"occupancy": s["occupancy"], "impact": s["impact"], "unallocated_share": s["unallocated_share"],
            "debug_p90_s": debug.get("p90"), "preemptions": s["preemptions"], "sim_wall_s": s["sim_wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("| scenario | policy | occupancy | impact | unallocated share | debug p90 (s) | preemptions | sim (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for change in MATRIX[:1] if args.quick else MATRIX:
        base = replace(il.SimConfig(), **change)
        workload = il.generate(base.generator())
        name = ", ".join(f"{k}={v}" for k, v in change.items()) or "default (256 GPUs, 14 d, demand 2.5, seed 0)"
        for policy in ("legacy", "impactful"):
            r = row(replace(base, policy=policy), workload)
            print(f"| {name} | {policy} | {r['occupancy']:.3f} | {r['impact']:.3f} | "
                  f"{r['unallocated_share']:.3f} | {r['debug_p90_s']:.0f} | {r['preemptions']} | "
                  f"{r['sim_wall_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
