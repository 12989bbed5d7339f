"""Every policy on the queue shapes where impactful's scheduling pass is slowest, against fifo.

    python benchmarks/bench_shapes.py            # the four shapes below, one table
    python benchmarks/bench_shapes.py --quick    # a tenth of the jobs, for a first look
    python benchmarks/bench_shapes.py --quick --policies fifo impactful --instructions
    python benchmarks/bench_shapes.py --shapes backlog-none --policies fifo impactful

The shapes, all from ``realtrace.public_shape`` (mostly 1-GPU jobs, heavy-tailed durations):

* **backlog**: 30,000 jobs on 256 GPUs at offered load 2.0 over about 9 days, so a queue of
  thousands stands for days; once with every job's contract filled (``fill_contract``), once
  with none declared;
* **burst**: 2,000 jobs all submitted within ten minutes onto 648 GPUs;
* **public**: 20,000 jobs on 512 GPUs at load 1.4 (``bench_realtrace.py``'s trace);
* **default**: the default scenario (256 GPUs, 14 days, the synthetic generator).

Each row: events, engine wall time, its ratio to fifo's on the same trace and the per-event
ratio to a bare-heap floor (``bench_realtrace.floor_s``); with ``--instructions``, also the
instructions of each run's ``simulate`` under valgrind's callgrind (``count_instructions.py``;
they repeat to about 0.1%, where wall times do not) and their ratio to fifo's. The machine is
shared and noisy: compare the ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from bench_realtrace import bench
from bench_realtrace import markdown as plain_markdown
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


#: The shapes by name: (description, jobs at full size, GPUs). ``default`` is the default scenario.
SHAPES = {
    "backlog-filled": ("backlog, filled contracts", 30_000, 256),
    "backlog-none": ("backlog, no contracts", 30_000, 256),
    "burst": ("burst", 2_000, 648),
    "public": ("public", 20_000, 512),
    "default": ("default scenario", None, 256),
}


def build(name: str, scale: float = 1.0) -> tuple[str, il.SimConfig, pd.DataFrame, il.BudgetTree]:
    """(row label, config, trace, tree) of shape ``name`` with ``scale`` times its jobs (the
    default scenario is never scaled)."""
    label, jobs, gpus = SHAPES[name]
    if jobs is None:
        config = il.SimConfig()
        work = il.generate(config.generator())
        return label, config, work.trace, work.tree
    n = max(int(jobs * scale), 50)
    if name == "burst":
        trace, tree = burst(n, gpus)
        label = f"{label}: {len(trace)} jobs in 10 min, {gpus} GPUs"
    elif name == "public":
        trace, tree = public_shape(n, gpus)
    else:
        trace, tree = public_shape(n, gpus, load=2.0, contracts=name == "backlog-filled")
    if name != "burst":
        label = f"{label}: {len(trace)} jobs, {gpus} GPUs"
    config = il.SimConfig(gpus=gpus, days=trace_span_days(trace), warmup_days=0.0)
    return label, config, trace, tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the jobs")
    parser.add_argument("--policies", nargs="*", default=sorted(REGISTRY))
    parser.add_argument("--repeat", type=int, default=1, help="runs per policy (best is kept)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each run's instructions under callgrind (about 50x its time)",
    )
    parser.add_argument("--shapes", nargs="*", choices=list(SHAPES), default=list(SHAPES))
    args = parser.parse_args()
    policies = ["fifo", *[p for p in args.policies if p != "fifo"]]  # fifo first: the ratios' base
    scale = 0.1 if args.quick else 1.0
    rows: list[dict] = []
    for name in args.shapes:
        label, config, trace, tree = build(name, scale)
        found = bench(label, config, trace, tree, policies, args.repeat)
        if args.instructions:
            count(found, name, scale)
        rows += found
        print(markdown(rows[-len(policies) :]), flush=True)
    print()
    print(markdown(rows))


def markdown(rows: list[dict]) -> str:
    """``bench_realtrace.markdown``'s table, with instructions and their ratio to fifo's on the
    same shape when they were counted."""
    table = plain_markdown(rows).splitlines()
    if not rows or "instructions" not in rows[0]:
        return "\n".join(table)
    lines = [table[0] + " G instr. | instr. x fifo |", table[1] + "---|---|"]
    for row, line in zip(rows, table[2:]):
        lines.append(f"{line} {row['instructions'] / 1e9:.2f} | {row['instr_x_fifo']:.1f} |")
    return "\n".join(lines)


def count(rows: list[dict], shape: str, scale: float) -> None:
    """Add each row's instructions of ``simulate`` (callgrind, this checkout: the engine, the job
    records and the event frame) and their ratio to fifo's (the first row)."""
    from count_instructions import simulate_instructions  # (it imports this module)

    here = Path(__file__).resolve().parent.parent
    for row in rows:
        row["instructions"] = simulate_instructions(here, f"shape:{shape}", row["policy"], scale)
    for row in rows:
        row["instr_x_fifo"] = row["instructions"] / rows[0]["instructions"]


if __name__ == "__main__":
    main()
