"""Every policy on a trace shaped like public ones, against fifo and a bare-heap floor.

    python benchmarks/bench_realtrace.py                          # 20,000 jobs on 512 GPUs + default scenario
    python benchmarks/bench_realtrace.py --jobs 11400 --gpus 640 --no-default
    python benchmarks/bench_realtrace.py --profile impactful      # cProfile of one run, top 25

The trace comes from ``realtrace.public_shape`` (mostly 1-GPU jobs, heavy-tailed durations,
bursts, a few 16-64 GPU gangs, overloaded). For each trace and policy: events, engine wall
time (best of ``--repeat``), its ratio to fifo's, the metrics time (``summary()``, apart), and
the per-event ratio to the floor: a bare ``heapq`` loop that replays the same event log, one
pop, one logged row and one push of the job's next event per event. The starts and preemptions
say how much scheduling work each run did: a ratio to fifo compares runs that may start very
different numbers of jobs (fifo's blocked head can make most of a queue give up).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import pstats
import time
from dataclasses import replace

import pandas as pd
from realtrace import public_shape

import impactlab as il
from impactlab.inputs.workload import trace_span_days
from impactlab.policies import REGISTRY


def floor_s(events: pd.DataFrame) -> float:
    """Seconds for a bare heapq event loop to replay ``events``: each job's first event is
    queued; popping one logs it and queues the job's next event."""
    t, job = events["t_s"].tolist(), events["job_id"].tolist()
    following: dict[int, int] = {}
    first: list[tuple[float, int]] = []
    last: dict[str, int] = {}
    for k, j in enumerate(job):
        if j in last:
            following[last[j]] = k
        else:
            first.append((t[k], k))
        last[j] = k
    kinds = events["event"].tolist()
    began = time.perf_counter()
    heap = list(first)
    heapq.heapify(heap)
    log: list[tuple[float, str, str]] = []
    while heap:
        now, k = heapq.heappop(heap)
        log.append((now, kinds[k], job[k]))
        nxt = following.get(k)
        if nxt is not None:
            heapq.heappush(heap, (t[nxt], nxt))
    return time.perf_counter() - began


def timed(
    config: il.SimConfig, trace: pd.DataFrame, tree: il.BudgetTree, repeat: int
) -> tuple[il.SimResult, float]:
    """The run of ``config`` and its best engine wall time over ``repeat`` runs."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        result = il.simulate(config, trace=trace, budgets=tree)
        best = min(best, result.sim_wall_s)
    return result, best  # type: ignore[return-value]


def bench(
    name: str,
    config: il.SimConfig,
    trace: pd.DataFrame,
    tree: il.BudgetTree,
    policies: list[str],
    repeat: int,
) -> list[dict]:
    """One row per policy on one trace."""
    rows = []
    for policy in policies:
        result, wall = timed(replace(config, policy=policy), trace, tree, repeat)
        began = time.perf_counter()
        result.summary()
        metrics_s = time.perf_counter() - began
        rows.append(
            {
                "trace": name,
                "policy": policy,
                "jobs": len(trace),
                "events": len(result.events),
                "starts": int((result.events["event"] == "start").sum()),
                "preemptions": int((result.events["event"] == "preempt").sum()),
                "wall_s": wall,
                "metrics_s": metrics_s,
                "floor_s": floor_s(result.events),
            }
        )
    frame = pd.DataFrame(rows)
    fifo = frame.loc[frame.policy == "fifo", "wall_s"]
    frame["x_fifo"] = frame.wall_s / fifo.iloc[0] if len(fifo) else float("nan")
    frame["x_floor_per_event"] = frame.wall_s / frame.floor_s
    frame["metrics_share"] = frame.metrics_s / frame.wall_s
    return frame.to_dict("records")


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    lines = [
        (
            "| trace | policy | jobs | events | starts | preemptions | wall (s) | x fifo "
            "| x floor / event | metrics (s) | metrics / wall |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['policy']} | {r['jobs']} | {r['events']} | {r['starts']} | "
            f"{r['preemptions']} | {r['wall_s']:.2f} | "
            f"{r['x_fifo']:.2f} | {r['x_floor_per_event']:.1f} | {r['metrics_s']:.2f} | "
            f"{r['metrics_share']:.0%} |"
        )
    return "\n".join(lines)


def profile(config: il.SimConfig, trace: pd.DataFrame, tree: il.BudgetTree, top: int = 25) -> str:
    """cProfile of one run, by cumulative time."""
    prof = cProfile.Profile(time.process_time)  # CPU time: the machine is shared
    prof.enable()
    il.simulate(config, trace=trace, budgets=tree)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--days", type=float, default=14.0, help="simulated span (0: the trace's whole span)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per policy (best is kept)")
    parser.add_argument("--policies", nargs="*", default=sorted(REGISTRY))
    parser.add_argument(
        "--no-default", dest="default", action="store_false", help="skip the default scenario"
    )
    parser.add_argument(
        "--profile", metavar="POLICY", help="only profile POLICY on the public-shape trace"
    )
    args = parser.parse_args()
    trace, tree = public_shape(args.jobs, args.gpus, args.seed)
    days = args.days or trace_span_days(trace)
    config = il.SimConfig(gpus=args.gpus, days=days, warmup_days=0.0)
    if args.profile:
        print(profile(replace(config, policy=args.profile), trace, tree))
        return
    name = f"public-shape {args.jobs} jobs, {args.gpus} GPUs, {days:g} d"
    rows = bench(name, config, trace, tree, args.policies, args.repeat)
    print(markdown(rows), flush=True)
    if args.default:
        base = il.SimConfig()
        work = il.generate(base.generator())
        rows += bench(
            "default (256 GPUs x 14 d)", base, work.trace, work.tree, args.policies, args.repeat
        )
        print(markdown(rows))


if __name__ == "__main__":
    main()
