"""Growth of a run, load to metrics, against jobs and against GPUs, with peak memory.

    python benchmarks/bench_scale.py      # 10k/100k/1M jobs x 1024 GPUs; 100k jobs x 128/1024/8192 GPUs
    python benchmarks/bench_scale.py --jobs 10000 100000 --gpus-sweep 128 1024 --timeout 900
    python benchmarks/bench_scale.py --policies fifo impactful
    python benchmarks/bench_scale.py --synthetic 100 --gpus 2048   # synthetic workload: ~1M jobs

Each run is a fresh process (so its peak resident memory is its own): a public-shape trace
(``realtrace.public_shape``), or with ``--synthetic`` the synthetic workload of ``SimConfig(gpus,
days)``, is generated and validated, replayed, and summarised. Columns:
trace generation, engine seconds, the rest of ``simulate`` around the engine ("around":
the job records and the event log's frame), metrics seconds, their total (load to metrics),
events, engine microseconds per event, the per-event ratio to the bare-heap floor of the
same event log (``bench_realtrace.floor_s``) and peak memory. A run that passes ``--timeout`` is reported as such.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one(policy: str, jobs: int, gpus: int, days: float | None = None) -> dict:
    """Generate, simulate and summarise one run in this process; its figures. The trace is the
    public shape of ``jobs`` jobs over its whole span, or, given ``days``, the synthetic
    workload of ``SimConfig(gpus=gpus, days=days)`` (``jobs`` is then unused)."""
    from bench_realtrace import floor_s
    from realtrace import public_shape

    import impactlab as il
    from impactlab.inputs.workload import trace_span_days

    began = time.perf_counter()
    if days is None:
        trace, tree = public_shape(jobs, gpus)
        days = trace_span_days(trace)  # (days=None with a DataFrame trace means 14 days)
        config = il.SimConfig(gpus=gpus, days=days, warmup_days=0.0, policy=policy)
        inputs = il.prepare(config, trace, tree)
    else:
        config = il.SimConfig(gpus=gpus, days=days, policy=policy)
        inputs = il.prepare(config)
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    result = il.simulate(config, inputs=inputs)
    simulate_s = time.perf_counter() - began  # the engine, plus job records and the event frame
    began = time.perf_counter()
    result.summary()
    metrics_s = time.perf_counter() - began
    events = len(result.events)
    # Read before the floor's replay, whose lists of the whole log are the benchmark's, not the run's.
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    floor = floor_s(result.events)
    return {
        "policy": policy,
        "jobs": len(inputs.trace),
        "gpus": gpus,
        "days": days,
        "events": events,
        "load_s": load_s,
        "sim_s": result.sim_wall_s,
        "around_s": simulate_s - result.sim_wall_s,
        "metrics_s": metrics_s,
        "total_s": load_s + simulate_s + metrics_s,
        "us_per_event": 1e6 * result.sim_wall_s / events,
        "x_floor": result.sim_wall_s / floor,
        "peak_mib": peak_mib,
    }


def spawn(policy: str, jobs: int, gpus: int, timeout_s: float, days: float = 0.0) -> dict:
    """``one`` in a fresh process (``days`` > 0: the synthetic workload), or a row saying it
    timed out."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", policy, str(jobs), str(gpus)]
    cmd += [str(days)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=True, cwd=HERE
        )
    except subprocess.TimeoutExpired:
        return {"policy": policy, "jobs": jobs, "gpus": gpus, "timeout_s": timeout_s}
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    lines = [
        (
            "| policy | jobs | GPUs | days | events | trace (s) | engine (s) | around (s) | metrics (s) | total (s) | "
            "us / event | x floor / event | peak MiB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "timeout_s" in r:
            lines.append(
                f"| {r['policy']} | {r['jobs']} | {r['gpus']} | timed out after {r['timeout_s']:.0f} s "
                "| | | | | | | | | |"
            )
            continue
        lines.append(
            f"| {r['policy']} | {r['jobs']} | {r['gpus']} | {r['days']:.1f} | {r['events']} | {r['load_s']:.1f} | "
            f"{r['sim_s']:.1f} | {r.get('around_s', float('nan')):.1f} | {r['metrics_s']:.1f} | "
            f"{r['total_s']:.1f} | {r['us_per_event']:.1f} | "
            f"{r['x_floor']:.1f} | {r['peak_mib']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="*", default=["impactful"])
    parser.add_argument("--jobs", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--gpus", type=int, default=1024, help="cluster of the jobs sweep")
    parser.add_argument("--gpus-sweep", type=int, nargs="*", default=[128, 1024, 8192])
    parser.add_argument("--sweep-jobs", type=int, default=100_000, help="jobs of the GPUs sweep")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument(
        "--synthetic",
        type=float,
        nargs="*",
        metavar="DAYS",
        help="instead of the sweeps, the synthetic workload of SimConfig(gpus=--gpus, days=DAYS)"
        " for each DAYS (2048 GPUs x 100 days: about a million jobs)",
    )
    parser.add_argument(
        "--one", nargs=4, metavar=("POLICY", "JOBS", "GPUS", "DAYS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        days = float(args.one[3]) or None
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]), days)))
        return
    if args.synthetic:
        runs = [(p, 0, args.gpus, d) for p in args.policies for d in args.synthetic]
    else:
        runs = [(p, n, args.gpus, 0.0) for p in args.policies for n in args.jobs]
        sweep = [(p, args.sweep_jobs, g, 0.0) for p in args.policies for g in args.gpus_sweep]
        runs += [run for run in sweep if run not in runs]
    rows = []
    for policy, jobs, gpus, days in runs:
        rows.append(spawn(policy, jobs, gpus, args.timeout, days))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
