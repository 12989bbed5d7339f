"""Speed of ``SimResult.explain``: one story of the jobs a user would ask about first.

    python benchmarks/bench_explain.py [--gpus 256] [--days 14] [--jobs 5]

Prints the run's events and, per story, its steps and wall time (the metrics the picker
needs are derived once beforehand, as the Explorer has them).
"""

from __future__ import annotations

import argparse
import time

import impactlab as il
from impactlab.analysis.explain import story_choices


def main() -> None:
    """Simulate once, then time the stories of the most preempted jobs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--jobs", type=int, default=5)
    args = parser.parse_args()
    result = il.simulate(il.SimConfig(gpus=args.gpus, days=args.days))
    chosen = story_choices(result).job_id.iloc[: args.jobs]
    print(f"{len(result.events)} events, {len(result.trace)} jobs")
    for job_id in chosen:
        began = time.perf_counter()
        story = result.explain(job_id)
        print(f"{job_id}: {len(story.steps)} steps in {time.perf_counter() - began:.2f} s")


if __name__ == "__main__":
    main()
