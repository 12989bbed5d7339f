"""SHA-256 of the event logs of medium runs, to show that a speed change keeps every log.

    PYTHONPATH=<checkout A> python benchmarks/log_hashes.py > a.txt
    PYTHONPATH=<checkout B> python benchmarks/log_hashes.py > b.txt
    diff <(cut -d' ' -f1-2 a.txt) <(cut -d' ' -f1-2 b.txt)     # no output: identical logs

One line per run: its name, the first 16 hex digits of the SHA-256 of its event log as CSV,
its events and the CPU seconds of ``simulate``. The runs cover the default scenario under
every built-in policy, impactful on 88 GPUs (plain, with backfill reservations, with gangs
searching at every pass), the public-trace shape at 8,000 jobs on 256 GPUs (plain,
``max_victim_ratio=4``, reservations) and a run with node failures.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

import pandas as pd
from realtrace import public_shape

import impactlab as il


def digest(events: pd.DataFrame) -> str:
    """The first 16 hex digits of the SHA-256 of the event log as CSV."""
    return hashlib.sha256(events.to_csv(index=False).encode()).hexdigest()[:16]


def line(
    name: str,
    config: il.SimConfig,
    trace: pd.DataFrame | None = None,
    tree: il.BudgetTree | None = None,
) -> str:
    """One run's line: name, digest, events and CPU seconds."""
    began = time.process_time()
    result = il.simulate(config, trace=trace, budgets=tree)
    cpu_s = time.process_time() - began
    return f"{name.replace(' ', '_')} {digest(result.events)} events={len(result.events)} cpu_s={cpu_s:.2f}"


def main() -> None:
    base = il.SimConfig()
    work = il.generate(base.generator())
    for policy in ("impactful", "fairshare", "legacy", "fifo"):
        print(
            line(f"default {policy}", replace(base, policy=policy), work.trace, work.tree),
            flush=True,
        )
    small = il.SimConfig(gpus=88, days=14)
    print(line("88 impactful", replace(small, policy="impactful")), flush=True)
    print(
        line(
            "88 impactful reservation",
            small.with_params({"policy": "impactful", "backfill_reservation": True}),
        )
    )
    print(
        line(
            "88 impactful gangs every pass",
            small.with_params({"policy": "impactful", "gangs_preempt_every_pass": True}),
        ),
        flush=True,
    )
    trace, tree = public_shape(8000, 256, 0)
    public = il.SimConfig(gpus=256, days=14, warmup_days=0.0, policy="impactful")
    print(line("public 8000/256", public, trace, tree), flush=True)
    print(
        line(
            "public 8000/256 ratio 4",
            public.with_params({"policy": "impactful", "max_victim_ratio": 4.0}),
            trace,
            tree,
        ),
        flush=True,
    )
    print(
        line(
            "public 8000/256 reservation",
            public.with_params({"policy": "impactful", "backfill_reservation": True}),
            trace,
            tree,
        ),
        flush=True,
    )
    print(
        line(
            "256x10 failures",
            il.SimConfig(days=10).with_params({"policy": "impactful", "mtbf_hours": 2000.0}),
        )
    )


if __name__ == "__main__":
    main()
