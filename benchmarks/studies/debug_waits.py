"""Why debug jobs wait under ``impactful``: debug p90 by gang size, and what blocked each
failed search for victims on behalf of a debug job.

    python benchmarks/studies/debug_waits.py  # 88 GPUs, seeds 0-4
    python benchmarks/studies/debug_waits.py --gpus 256 --seeds 0

A failed search is put in the first class that applies:

* ``protected``: every node holds more protected GPUs than the job leaves room for;
* ``gangs``: some node could be cleared only by breaking up a gang larger than the job
  (``max_victim_ratio``);
* ``fair share``: the unprotected jobs on the nodes that could be cleared belong to the job's
  own project or to a better-served side (no ping-pong);
* ``other``: none of these (for example jobs started at this very instant).
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

import impactlab as il
from impactlab.policies.impactful import Impactful
from impactlab.sim.policy import Context, Scheduler


class Observed(Impactful):
    """``impactful`` unchanged, counting why searches for debug jobs fail."""

    def setup(self, ctx: Context) -> None:
        """Start counting."""
        super().setup(ctx)
        self.blocked: Counter[str] = Counter()

    def make_room(self, sched: Scheduler, j: int) -> bool:
        """As impactful does; count the reason when a debug job's search fails."""
        made = super().make_room(sched, j)
        if not made and sched.jobs[j].kind == "debug":
            self.blocked[self._blocker(sched, j)] += 1
        return made

    def _blocker(self, sched: Scheduler, j: int) -> str:
        job, cluster, jobs = sched.jobs[j], sched.cluster, sched.jobs
        open_nodes = [
            n
            for n in range(cluster.nodes)
            if cluster.shielded[n] <= cluster.gpus_per_node - job.gpus
        ]
        if not open_nodes:
            return "protected"
        movable = [
            v
            for n in open_nodes
            for v in sched.on_node[n]
            if not sched.shielded[v] and sched.started_at[v] < sched.now
        ]
        if any(jobs[v].held > self.max_victim_ratio * job.held for v in movable):
            return "gangs"
        if any(jobs[v].funded for v in movable):
            return "fair share"
        return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=88)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    print(
        "| seed | debug p90 (s) | p90 by GPUs (s) | failed searches | protected | gangs | fair share | other |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        config = il.SimConfig(gpus=args.gpus, seed=seed)
        policy = Observed()
        result = il.simulate(config, policy=policy)
        jobs = result.jobs
        debug = jobs[(jobs["kind"] == "debug") & (jobs["submit_s"] >= config.warmup_s)]
        by_gpus = {
            int(g): round(float(np.percentile(w, 90))) for g, w in debug.groupby("gpus")["wait_s"]
        }
        total = sum(policy.blocked.values()) or 1
        shares = [
            f"{policy.blocked[k] / total:.0%}"
            for k in ("protected", "gangs", "fair share", "other")
        ]
        p90 = result.summary()["wait_s"]["debug"]["p90"]
        print(
            f"| {seed} | {p90:.0f} | {by_gpus} | {total} | " + " | ".join(shares) + " |", flush=True
        )


if __name__ == "__main__":
    main()
