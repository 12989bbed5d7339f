"""What running several clusters as one fleet costs the engine, policy by policy.

    python benchmarks/bench_fleet.py              # the shipped fleet scenario over 7 days
    python benchmarks/bench_fleet.py --days 14    # its whole two weeks (about 129,000 jobs)
    python benchmarks/bench_fleet.py --quick      # 3 days, for a first look
    python benchmarks/bench_fleet.py --repeat 2 --policies fifo impactful
    python benchmarks/bench_fleet.py --quick --exact   # also whole logs, no session resubmitted

The workload is ``impactlab/data/scenario-fleet-ai2.yaml`` (clusters of 1,024, 512, 256 and 88
GPUs), shortened to ``--days``: generated once and sent to its clusters once (not timed). For
each policy three runs are timed, in CPU seconds (``time.process_time``) of the engine alone:

* **(a) organisation**: the fleet charged organisation-wide (one shared fair-share meter);
* **(b) per cluster**: the same fleet, each cluster charging its own meter;
* **(c) alone**: each cluster as a plain one-cluster run (``config.cluster_config(k)``: its
  GPUs, every other setting the same) on exactly the jobs sent to it, passed as a DataFrame
  without the ``cluster`` column, with the budget tree; summed over the clusters.

The fleet runs are built as ``impactlab.runs.simulate.run_fleet`` builds them, and a lone run
as ``simulate`` does, but only ``Fleet.run`` / ``Engine.run`` is timed: building the job
records and engines, the event logs' frames and the organisation's combined log are left out
(the span ``SimResult.sim_wall_s`` times too, in wall seconds). The three runs of a policy are
interleaved and their order rotates with each ``--repeat``; each keeps its best.

Then each cluster's own log in (b) is checked against its log in (c). They must be the same
log, apart from random draws: the first cluster draws its random streams as a lone run does,
but the others draw from streams of their own (``FleetSeat.streams``), so a killed interactive
session's resubmission draw (``preempted_sessions="end"``) may differ, and with node failures
(per fleet node) every draw does. So the first cluster's whole log is compared; another
cluster's is compared whole if it has no kill (or if the draws happened to agree), else up to
the instant its first kill's resubmission could fire (kill time + ``session_resubmit_delay_s``),
and not at all if nodes fail. ``--exact`` then runs (b) and (c) once more (untimed) with
``session_resubmit_share=0``, so that every draw has one outcome, and compares every cluster's
whole log. The machine is shared and noisy: compare the ratios within one run, not seconds
across runs.
"""

from __future__ import annotations

import argparse
import gc
import time
from dataclasses import dataclass, replace
from datetime import date

import pandas as pd

from impactlab.base.config import SimConfig
from impactlab.inputs.budgets import BudgetTree
from impactlab.inputs.fleet import CLUSTER, assign_clusters
from impactlab.inputs.scenario import load_scenario
from impactlab.inputs.workload import fit, prepare
from impactlab.runs.simulate import fleet_engines, make_engine
from impactlab.sim.events import Ev, events_frame, jobs_from_trace

SCENARIO = "scenario-fleet-ai2.yaml"
POLICIES = ("fifo", "legacy", "fairshare", "impactful")
RUNS = ("organisation", "cluster", "alone")


def fleet_run(config: SimConfig, trace: pd.DataFrame, tree: BudgetTree) -> tuple[float, list]:
    """CPU seconds of the fleet's engines (``fleet_engines``, as ``run_fleet`` runs them) and each cluster's
    own event log (its own node numbers)."""
    fleet, engines = fleet_engines(config, trace, tree)
    gc.collect()
    began = time.process_time()
    fleet.run(config.horizon_s, [e.begin for e in engines])
    cpu_s = time.process_time() - began
    return cpu_s, [events_frame(e.log) for e in engines]


def alone_run(config: SimConfig, trace: pd.DataFrame, tree: BudgetTree) -> tuple[float, list]:
    """CPU seconds of each cluster's engine run alone on its jobs, summed, and their logs."""
    total, logs = 0.0, []
    for k, spec in enumerate(config.clusters):
        own = config.cluster_config(k)
        mine = trace[trace[CLUSTER] == spec.name].drop(columns=CLUSTER).reset_index(drop=True)
        inputs = prepare(own, mine, tree)  # as simulate(own, trace=mine, budgets=tree) does
        engine = make_engine(
            own, jobs_from_trace(inputs.trace, inputs.tree, own.gpus_per_node), inputs.tree
        )
        gc.collect()
        began = time.process_time()
        log = engine.run()
        total += time.process_time() - began
        logs.append(events_frame(log))
        del engine
    return total, logs


@dataclass
class Check:
    cluster: str
    events: int  # in the per-cluster fleet's log
    kills: int  # killed sessions in it (each draws from the cluster's sessions stream)
    compared: str  # "whole", "before t = ... d", "none"
    same: bool | None


def compare_logs(config: SimConfig, fleet_logs: list, alone_logs: list) -> list[Check]:
    """Each cluster's log in the per-cluster fleet against its lone run's, where they must match."""
    out = []
    delay = config.session_resubmit_delay_s
    for k, (spec, a, b) in enumerate(zip(config.clusters, fleet_logs, alone_logs)):
        killed = int((a.event == Ev.KILL.value).sum())
        if k == 0 or a.equals(b):  # the first cluster draws from the lone run's own streams
            out.append(Check(spec.name, len(a), killed, "whole", a.equals(b)))
            continue
        if config.health.mtbf_hours is not None:
            out.append(Check(spec.name, len(a), killed, "none (nodes fail)", None))
            continue
        kills = pd.concat([a.t_s[a.event == Ev.KILL.value], b.t_s[b.event == Ev.KILL.value]])
        if kills.empty or config.preempted_sessions != "end":
            out.append(Check(spec.name, len(a), killed, "whole", False))
            continue
        until = kills.min() + delay  # no draw can show before its resubmission fires
        a_, b_ = a[a.t_s < until].reset_index(drop=True), b[b.t_s < until].reset_index(drop=True)
        what = f"before {until / 86400:.2f} d ({len(a_):,} events)"
        out.append(Check(spec.name, len(a), killed, what, a_.equals(b_)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--days", type=float, default=7.0, help="simulated days (14: the whole scenario)"
    )
    parser.add_argument("--quick", action="store_true", help="3 days")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind (best is kept)")
    parser.add_argument("--policies", nargs="*", default=list(POLICIES))
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also compare whole logs, (b) and (c) rerun with session_resubmit_share=0",
    )
    args = parser.parse_args()
    days = 3.0 if args.quick else args.days
    scenario = load_scenario(SCENARIO)
    base = replace(scenario.config, days=days, fair_share="organisation")
    began = time.perf_counter()
    inputs = prepare(base, budgets=scenario.budgets)
    base = fit(base, inputs)
    trace, tree = assign_clusters(inputs.trace, base.clusters), inputs.tree
    sizes = ", ".join(
        f"{c.name} {c.gpus} GPUs / {(trace[CLUSTER] == c.name).sum():,} jobs" for c in base.clusters
    )
    print(
        f"{SCENARIO}, {days:g} days, {len(trace):,} jobs ({sizes}); workload in "
        f"{time.perf_counter() - began:.1f} s; {date.today()}\n",
        flush=True,
    )
    rows, checks, exact = [], {}, {}
    for policy in args.policies:
        config = base.with_params(policy=policy)
        configs = {
            "organisation": config,
            "cluster": replace(config, fair_share="cluster"),
            "alone": config,
        }
        best = dict.fromkeys(RUNS, float("inf"))
        events: dict[str, int] = {}
        logs: dict[str, list] = {}
        for r in range(max(1, args.repeat)):
            for run in RUNS[r % 3 :] + RUNS[: r % 3]:  # interleaved, the order rotating
                go = alone_run if run == "alone" else fleet_run
                cpu_s, logs[run] = go(configs[run], trace, tree)
                best[run] = min(best[run], cpu_s)
                events[run] = sum(len(f) for f in logs[run])
        checks[policy] = compare_logs(config, logs["cluster"], logs["alone"])
        del logs
        if args.exact:
            never = replace(config, session_resubmit_share=0.0)
            _, fleet_logs = fleet_run(replace(never, fair_share="cluster"), trace, tree)
            _, alone_logs = alone_run(never, trace, tree)
            exact[policy] = [a.equals(b) for a, b in zip(fleet_logs, alone_logs)]
            del fleet_logs, alone_logs
        a, b, c = (best[run] for run in RUNS)
        ea, eb, ec = (events[run] for run in RUNS)
        rows.append(
            f"| {policy} | {len(trace):,} | {ea:,} | {eb:,} | {ec:,} | {a:.2f} | {b:.2f} | "
            f"{c:.2f} | {a / c:.2f} | {b / c:.2f} | {a / ea * 1e6:.1f} | {b / eb * 1e6:.1f} | "
            f"{c / ec * 1e6:.1f} |"
        )
        print(f"{policy}: {rows[-1]}", flush=True)
    print()
    print(
        "| policy | jobs | events (a) | events (b) | events (c) | CPU (a) s | CPU (b) s | "
        "CPU (c) s | (a)/(c) | (b)/(c) | us/event (a) | us/event (b) | us/event (c) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("(b) per cluster against (c) alone, each cluster's own log:")
    print()
    extra = " | whole log, no resubmission" if exact else ""
    print(f"| policy | cluster | events | kills | compared | same log{extra} |")
    print("|---|---|---|---|---|---|" + ("---|" if exact else ""))
    yes = lambda same: "n/a" if same is None else ("yes" if same else "**NO**")  # noqa: E731
    for policy, found in checks.items():
        for k, ch in enumerate(found):
            more = f" | {yes(exact[policy][k])}" if exact else ""
            print(
                f"| {policy} | {ch.cluster} | {ch.events:,} | {ch.kills:,} | {ch.compared} | "
                f"{yes(ch.same)}{more} |"
            )
    print()
    for policy, found in checks.items():
        matched = [ch.cluster for ch in found if ch.same]
        line = f"{policy}: (b) = (c) where compared on {', '.join(matched) or 'no cluster'}"
        if exact:
            whole = [ch.cluster for ch, same in zip(found, exact[policy]) if same]
            line += f"; whole logs without resubmission on {', '.join(whole) or 'no cluster'}"
        print(line)


if __name__ == "__main__":
    main()
