"""Wall time per policy for the default scenario and for 1024 GPUs x 30 days.

    python benchmarks/bench_policies.py            # both scenarios
    python benchmarks/bench_policies.py --quick    # the default scenario only

The workload is generated once per scenario (not timed); each policy's engine run is timed
(best of ``--repeat``), as wall and CPU seconds, then the metrics derivation once.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import impactlab as il
from impactlab.policies import REGISTRY

SCENARIOS = {
    "default (256 GPUs x 14 d)": il.SimConfig(),
    "large (1024 GPUs x 30 d)": il.SimConfig(gpus=1024, days=30),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the default scenario")
    parser.add_argument("--repeat", type=int, default=3, help="runs per policy (best is kept)")
    parser.add_argument("--policies", nargs="*", default=sorted(REGISTRY))
    args = parser.parse_args()
    scenarios = list(SCENARIOS.items())[:1] if args.quick else list(SCENARIOS.items())
    print(
        f"{'scenario':28} {'policy':10} {'jobs':>7} {'events':>8} {'wall_s':>7} {'cpu_s':>7} {'metrics_s':>9}"
    )
    for name, base in scenarios:
        workload = il.generate(base.generator())
        for policy in args.policies:
            config = replace(base, policy=policy)
            best_wall = best_cpu = float("inf")
            for _ in range(max(1, args.repeat if base is SCENARIOS[scenarios[0][0]] else 1)):
                cpu0 = time.process_time()
                result = il.simulate(config, trace=workload.trace, budgets=workload.tree)
                best_cpu = min(best_cpu, time.process_time() - cpu0)
                best_wall = min(best_wall, result.sim_wall_s)
            began = time.perf_counter()
            result.summary()
            metrics_s = time.perf_counter() - began
            print(
                f"{name:28} {policy:10} {len(workload.trace):7d} {len(result.events):8d} "
                f"{best_wall:7.2f} {best_cpu:7.2f} {metrics_s:9.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
