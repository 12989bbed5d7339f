"""The issue's sweep (2 policies x 4 caps x 6 seeds, default scenario) serially, in local processes
and on a Dask LocalCluster: wall time and speed-up over serial.

    python benchmarks/bench_sweep.py                  # all three backends, serial in full
    python benchmarks/bench_sweep.py --serial-seeds 2 # serial estimated from 2 seeds (x 6/2)
    python benchmarks/bench_sweep.py --workers 4      # more workers (default: one per core)

The grid has 48 points but 30 distinct runs: legacy declares no ``cap_hours``, so its 4 caps are
one config per seed (``impactlab.sweep`` runs each distinct config once). Each backend writes to
a fresh ``out=`` directory, so file I/O is included, and starts its own pool or cluster, so the
start-up is included too. Every backend must give the serial metrics exactly. Wall times on a
shared machine are noisy: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import pandas as pd

import impactlab as il
from impactlab.runs.sweep import plan

GRID = {"policy": ["legacy", "impactful"], "cap_hours": [1, 2, 4, 8]}
SEEDS = tuple(range(6))


def timed_sweep(
    backend: str, seeds: tuple[int, ...], workers: int | None
) -> tuple[pd.DataFrame, float]:
    """The sweep's frame and its wall time (fresh output directory: nothing to resume)."""
    with tempfile.TemporaryDirectory() as out:
        began = time.perf_counter()
        frame = il.sweep(il.SimConfig(), GRID, seeds, backend=backend, workers=workers, out=out)
        return frame, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, help="processes / Dask workers (default: one per core)"
    )
    parser.add_argument(
        "--serial-seeds",
        type=int,
        default=len(SEEDS),
        help="run serial on this many seeds and scale up (default: all, no estimate)",
    )
    args = parser.parse_args()
    workers = args.workers or os.cpu_count()
    print(
        f"grid {GRID} x seeds {list(SEEDS)}: {2 * 4 * len(SEEDS)} points, "
        f"{len(plan(il.SimConfig(), GRID, SEEDS))} distinct runs; "
        f"{os.cpu_count()} cores, {workers} workers; load average {os.getloadavg()[0]:.2f}"
    )
    serial_seeds = SEEDS[: args.serial_seeds]
    serial, t_serial = timed_sweep("serial", serial_seeds, None)
    scale = len(SEEDS) / len(serial_seeds)
    estimate = (
        ""
        if scale == 1
        else f" (measured {t_serial:.1f} s on {len(serial_seeds)} seeds, x {scale:g})"
    )
    t_serial *= scale
    print(
        f"serial     {t_serial:7.1f} s{estimate}; sum of run times {serial['wall_s'].sum() * scale:.1f} s"
    )
    for backend in ("processes", "dask"):
        frame, wall = timed_sweep(backend, SEEDS, workers)
        mine = frame.set_index("run_key").loc[serial["run_key"]].drop(columns="wall_s")
        pd.testing.assert_frame_equal(
            mine, serial.set_index("run_key").drop(columns="wall_s")
        )  # same metrics
        print(
            f"{backend:10} {wall:7.1f} s  speed-up {t_serial / wall:4.2f}x over serial "
            f"({t_serial / wall / workers:.0%} of {workers} workers); sum of run times {frame['wall_s'].sum():.1f} s"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f} (other work on the machine adds noise)")


if __name__ == "__main__":
    main()
