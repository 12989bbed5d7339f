"""The ``impactlab`` command line: run a simulation and print or save its results."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .budgets import BudgetError, BudgetTree
from .config import SimConfig
from .health import REPAIR_MODES, HealthConfig
from .policies import REGISTRY, PolicyError
from .simulate import SimResult, simulate
from .trace import TraceError, validate_trace

HEADLINE = ("availability", "occupancy", "occupancy_funded", "occupancy_unallocated", "utilization",
            "impact", "impact_strict", "unallocated_share", "jain", "requested_ratio")
COUNTS = ("preemptions", "lost_gpu_hours", "withdrawn", "node_failures", "human_repairs", "auto_repairs",
          "jobs_hit", "failure_lost_gpu_hours")


class UsageError(Exception):
    """A problem with the command line's inputs, reported in one line."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    parser = argparse.ArgumentParser(prog="impactlab", description="Simulate GPU-cluster scheduling policies.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="replay a trace (or a synthetic Ai2-like workload) under a policy")
    cmp = sub.add_parser("compare", help="replay the same workload under several policies, side by side")
    cmp.add_argument("--policies", nargs="+", default=["legacy", "impactful"], choices=sorted(REGISTRY))
    _run_options(sim, policy=True)
    _run_options(cmp, policy=False)
    return parser


def _run_options(sim: argparse.ArgumentParser, policy: bool) -> None:
    """Options shared by ``simulate`` and ``compare``."""
    sim.add_argument("--trace", type=Path, help="CSV or Parquet trace in the impactlab schema (default: synthetic)")
    d = SimConfig()
    sim.add_argument("--gpus", type=int, default=d.gpus, help=f"cluster size in GPUs (default {d.gpus})")
    sim.add_argument("--gpus-per-node", type=int, default=d.gpus_per_node)
    sim.add_argument("--days", type=float, default=d.days, help=f"simulated days (default {d.days:g})")
    sim.add_argument("--demand", type=float, default=d.demand,
                     help=f"synthetic offered load / capacity (default {d.demand:g})")
    sim.add_argument("--funded-load", type=float, default=d.funded_load,
                     help=f"synthetic funded part of the load (default {d.funded_load:g})")
    sim.add_argument("--seed", type=int, default=d.seed)
    if policy:
        sim.add_argument("--policy", required=True, choices=sorted(REGISTRY))
    sim.add_argument("--budgets", type=Path, help="budget tree (YAML); default: the synthetic org, or equal shares")
    sim.add_argument("--window-days", type=float, help="impactful: sliding fair-share window (default 7)")
    sim.add_argument("--cap-hours", type=float, help="impactful: protection cap (default 8)")
    sim.add_argument("--warmup-days", type=float, help="left out of the metrics (default: the window, 7 d)")
    sim.add_argument("--node-mtbf-hours", type=float, help="node failures: mean time between failures per node (off when absent)")
    sim.add_argument("--repair", choices=REPAIR_MODES, help="how failed nodes are repaired (default: the policy's own)")
    sim.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    sim.add_argument("--out", type=Path, help="write events, jobs, budgets (Parquet), summary and config (JSON)")


def config_from_args(args: argparse.Namespace, policy: str) -> SimConfig:
    """The run configuration the arguments describe."""
    knobs = {}
    if policy == "impactful":
        if args.window_days is not None:
            knobs["window_days"] = args.window_days
        if args.cap_hours is not None:
            knobs["cap_hours"] = args.cap_hours
    warmup = args.warmup_days
    if warmup is None:  # the same reporting window for every policy, so runs compare
        warmup = min(args.window_days or 7.0, args.days / 2)
    for name in ("gpus", "days", "demand"):
        if not getattr(args, name) > 0:
            raise UsageError(f"--{name} must be positive, got {getattr(args, name)}")
    try:
        health = HealthConfig(mtbf_hours=args.node_mtbf_hours, repair=args.repair)
        return SimConfig(policy=policy, gpus=args.gpus, gpus_per_node=args.gpus_per_node, days=args.days,
                         demand=args.demand, funded_load=args.funded_load, seed=args.seed,
                         warmup_days=warmup, policy_knobs=knobs, health=health)
    except ValueError as err:
        raise UsageError(str(err)) from None


def read_trace(path: Path, max_gpus: int) -> pd.DataFrame:
    """A trace file (CSV or Parquet) validated into the schema."""
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            raw = pd.read_parquet(path)
            row_base = 0
        else:
            raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
            row_base = 2  # the header is line 1
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise UsageError(f"{path}: cannot read: {err}".splitlines()[0]) from None
    return validate_trace(raw, source=str(path), row_base=row_base, max_gpus=max_gpus)


def run(args: argparse.Namespace, policy: str) -> SimResult:
    """Load the inputs and simulate under one policy."""
    config = config_from_args(args, policy)
    trace = read_trace(args.trace, config.gpus) if args.trace else None
    tree = BudgetTree.from_yaml(args.budgets) if args.budgets else None
    if trace is None and tree is not None:
        raise UsageError("--budgets needs --trace: the synthetic workload brings its own organisation")
    return simulate(config, trace=trace, budgets=tree)


def json_ready(value: object) -> object:
    """Replace NaN/inf (not valid JSON) by None, recursively."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def format_table(summary: dict) -> str:
    """A readable summary: headline fractions, counts and waits per kind."""
    title = (f"policy {summary['policy']} on {summary['gpus']} GPUs: {summary['jobs']} jobs, "
             f"simulated in {summary['sim_wall_s']:.2f} s")
    lines = [title]
    lines += [f"  {name:24} {summary[name]:7.3f}" for name in HEADLINE]
    lines += [f"  {name:24} {summary[name]:7.1f}" if isinstance(summary[name], float)
              else f"  {name:24} {summary[name]:7d}" for name in COUNTS]
    lines += ["", f"  {'wait (s)':14} {'p50':>9} {'p90':>9} {'p99':>9} {'n':>6}"]
    for kind, w in summary["wait_s"].items():
        cells = " ".join(f"{w[p]:9.0f}" if w[p] is not None else f"{'-':>9}" for p in ("p50", "p90", "p99"))
        lines.append(f"  {kind:14} {cells} {w['n']:6d}")
    return "\n".join(lines)


def format_comparison(summaries: list[dict]) -> str:
    """Policies side by side: headline metrics and p50/p90 waits per kind."""
    head = f"  {'':24}" + "".join(f"{s['policy']:>12}" for s in summaries)
    lines = [f"{summaries[0]['jobs']} jobs on {summaries[0]['gpus']} GPUs", head]
    for name in (*HEADLINE, *COUNTS, "sim_wall_s"):
        lines.append(f"  {name:24}" + "".join(f"{s[name]:12.3f}" if isinstance(s[name], float)
                                             else f"{s[name]:12d}" for s in summaries))
    for kind in summaries[0]["wait_s"]:
        for p in ("p50", "p90"):
            cells = [s["wait_s"].get(kind, {}).get(p) for s in summaries]
            lines.append(f"  {f'wait {kind} {p} (s)':24}" + "".join(f"{c:12.0f}" if c is not None else f"{'-':>12}"
                                                               for c in cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    policies = [args.policy] if args.command == "simulate" else args.policies
    try:
        summaries = []
        for policy in policies:
            result = run(args, policy)
            summaries.append(json_ready(result.summary()))
            if args.out:
                result.save(args.out / policy if args.command == "compare" else args.out)
    except (UsageError, TraceError, BudgetError, PolicyError) as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        text = json.dumps(summaries[0] if args.command == "simulate" else summaries)
    elif args.command == "simulate":
        text = format_table(summaries[0])  # type: ignore[arg-type]
    else:
        text = format_comparison(summaries)  # type: ignore[arg-type]
    try:
        print(text)
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
