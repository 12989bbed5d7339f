"""Every policy on the queue shapes where impactful's scheduling pass is slowest, against fifo.

    python benchmarks/bench_shapes.py            # the four shapes below, one table
    python benchmarks/bench_shapes.py --quick    # a tenth of the jobs, for a first look

The shapes, all from ``realtrace.public_shape`` (mostly 1-GPU jobs, heavy-tailed durations):

* **backlog**: 30,000 jobs on 256 GPUs at offered load 2.0 over about 9 days, so a queue of
  thousands stands for days; once with every job's contract filled (``fill_contract``), once
  with none declared;
* **burst**: 2,000 jobs all submitted within ten minutes onto 648 GPUs;
* **public**: 20,000 jobs on 512 GPUs at load 1.4 (``bench_realtrace.py``'s trace);
* **default**: the default scenario (256 GPUs, 14 days, the synthetic generator).

Each row: events, engine wall time, its ratio to fifo's on the same trace and the per-event
ratio to a bare-heap floor (``bench_realtrace.floor_s``). The machine is shared and noisy:
compare the ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from bench_realtrace import bench, markdown
from realtrace import public_shape

import impactlab as il
from impactlab.inputs.workload import trace_span_days
from impactlab.policies import REGISTRY


def burst(
    jobs: int, gpus: int, seed: int = 0, within_s: float = 600.0
) -> tuple[pd.DataFrame, il.BudgetTree]:
    """``jobs`` public-shape jobs all submitted within ``within_s`` seconds."""
    trace, tree = public_shape(jobs, gpus, seed)
    rng = np.random.default_rng(seed)
    trace = trace.assign(submit_s=np.sort(rng.uniform(0.0, within_s, len(trace))).round(1))
    return il.validate_trace(trace, source="burst", max_gpus=gpus), tree


def shapes(scale: float) -> list[tuple[str, int, pd.DataFrame, il.BudgetTree]]:
    """(name, GPUs, trace, tree) of each shape, with ``scale`` times the jobs."""
    n = lambda jobs: max(int(jobs * scale), 50)  # noqa: E731
    out = []
    for contracts in (True, False):
        trace, tree = public_shape(n(30_000), 256, load=2.0, contracts=contracts)
        label = "filled contracts" if contracts else "no contracts"
        out.append((f"backlog, {label}: {len(trace)} jobs, 256 GPUs", 256, trace, tree))
    trace, tree = burst(n(2_000), 648)
    out.append((f"burst: {len(trace)} jobs in 10 min, 648 GPUs", 648, trace, tree))
    trace, tree = public_shape(n(20_000), 512)
    out.append((f"public: {len(trace)} jobs, 512 GPUs", 512, trace, tree))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the jobs")
    parser.add_argument("--policies", nargs="*", default=sorted(REGISTRY))
    parser.add_argument("--repeat", type=int, default=1, help="runs per policy (best is kept)")
    args = parser.parse_args()
    policies = ["fifo", *[p for p in args.policies if p != "fifo"]]  # fifo first: the ratios' base
    rows: list[dict] = []
    for name, gpus, trace, tree in shapes(0.1 if args.quick else 1.0):
        config = il.SimConfig(gpus=gpus, days=trace_span_days(trace), warmup_days=0.0)
        rows += bench(name, config, trace, tree, policies, args.repeat)
        print(markdown(rows[-len(policies) :]), flush=True)
    base = il.SimConfig()
    work = il.generate(base.generator())
    rows += bench("default scenario", base, work.trace, work.tree, policies, args.repeat)
    print()
    print(markdown(rows))


if __name__ == "__main__":
    main()
