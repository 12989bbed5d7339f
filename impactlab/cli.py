"""The ``impactlab`` command line: run a simulation and print or save its results."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pandas as pd

from .budget_io import load_budgets
from .budgets import BudgetError, BudgetTree
from .config import SimConfig
from .health import REPAIR_MODES, HealthConfig
from .policies import REGISTRY, PolicyError
from .scenario import load_scenario
from .simulate import SimResult, simulate
from .trace import TraceError
from .traces import FORMATS, load
from .traces.reshape import fill_contract, window

log = logging.getLogger("impactlab")

HEADLINE = ("availability", "occupancy", "occupancy_funded", "occupancy_unallocated", "utilization",
            "impact", "impact_strict", "unallocated_share", "jain", "requested_ratio")
COUNTS = ("preemptions", "lost_gpu_hours", "withdrawn", "node_failures", "human_repairs", "auto_repairs",
          "jobs_hit", "failure_lost_gpu_hours")


class UsageError(Exception):
    """A problem with the command line's inputs, reported in one line."""


class _Parser(argparse.ArgumentParser):
    """Reports a bad argument in one line (with a pointer to --help), not the usage block."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    parser = _Parser(prog="impactlab", description="Simulate GPU-cluster scheduling policies.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser("simulate", help="replay a trace (or a synthetic Ai2-like workload) under a policy")
    cmp = sub.add_parser("compare", help="replay the same workload under several policies, side by side")
    cmp.add_argument("--policies", nargs="+", default=["legacy", "impactful"], choices=sorted(REGISTRY))
    _run_options(sim, policy=True)
    _run_options(cmp, policy=False)
    return parser


def _run_options(sim: argparse.ArgumentParser, policy: bool) -> None:
    """Options shared by ``simulate`` and ``compare``."""
    sim.add_argument("--trace", type=Path,
                     help="trace file: impactlab CSV/Parquet, Philly, Helios, Acme, Alibaba, sacct (default: synthetic)")
    sim.add_argument("--format", choices=sorted(FORMATS), help="trace format (default: detected from the columns)")
    sim.add_argument("--trace-start-days", type=float, default=0.0, help="replay the trace from this day on")
    sim.add_argument("--trace-days", type=float, help="replay only this many days of the trace (default: all)")
    sim.add_argument("--skip-large", action="store_true",
                     help="skip (and report) jobs larger than the cluster instead of stopping")
    sim.add_argument("--fill-contract", action="store_true",
                     help="set min_runtime_s, checkpoint_s and util from per-kind defaults")
    d = SimConfig()
    sim.add_argument("--scenario", type=Path,
                     help="scenario YAML (data/scenario-*.yaml): cluster, generator and budgets; "
                          "options left at their defaults take the scenario's values")
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
    sim.add_argument("--unknown-projects", choices=("unallocated", "error"), default="unallocated",
                     help="jobs whose project is not in the budget tree: run unallocated (default) or stop")
    sim.add_argument("--window-days", type=float, help="impactful: sliding fair-share window (default 7)")
    sim.add_argument("--cap-hours", type=float, help="impactful: protection cap (default 8)")
    sim.add_argument("--warmup-days", type=float, help="left out of the metrics (default: the window, 7 d)")
    sim.add_argument("--node-mtbf-hours", type=float, help="node failures: mean time between failures per node (off when absent)")
    sim.add_argument("--repair", choices=REPAIR_MODES, help="how failed nodes are repaired (default: the policy's own)")
    sim.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    sim.add_argument("--out", type=Path, help="write events, jobs, budgets (Parquet), summary and config (JSON)")


def apply_scenario(args: argparse.Namespace) -> BudgetTree | None:
    """Fill options left at their defaults from ``--scenario``; return its budget tree."""
    if not args.scenario:
        return None
    try:
        scenario = load_scenario(args.scenario)
    except ValueError as err:
        raise UsageError(str(err)) from None
    default = SimConfig()
    for name in ("gpus", "gpus_per_node", "days", "demand", "funded_load", "seed"):
        if getattr(args, name) == getattr(default, name):
            setattr(args, name, getattr(scenario.config, name))
    return scenario.budgets


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


def read_trace(path: Path, max_gpus: int, format: str | None = None, skip_large: bool = False) -> pd.DataFrame:
    """A trace file of any supported format, validated into the schema; skips are logged."""
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    loaded = load(path, format, max_gpus=max_gpus, oversize="skip" if skip_large else "error")
    report = loaded.report
    if report.skipped:
        reasons = "; ".join(f"{n} {why}" for why, n in report.skipped.items())
        log.warning("%s: loaded %d of %d rows (skipped: %s)", path, report.jobs, report.rows, reasons)
    for line in report.lines()[1:]:
        log.info(line)
    return loaded.trace


def shape_trace(trace: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """Apply the reshaping options: time window and contract defaults."""
    if args.trace_start_days or args.trace_days is not None:
        try:
            trace = window(trace, args.trace_start_days, args.trace_days)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return fill_contract(trace) if args.fill_contract else trace


def run(args: argparse.Namespace, policy: str) -> SimResult:
    """Load the inputs and simulate under one policy."""
    scenario_tree = apply_scenario(args)
    config = config_from_args(args, policy)
    trace = None
    if args.trace:
        trace = shape_trace(read_trace(args.trace, config.gpus, args.format, args.skip_large), args)
    tree = load_budgets(args.budgets) if args.budgets else None
    if trace is None and tree is not None:
        raise UsageError("--budgets needs --trace: the synthetic workload brings its own organisation")
    tree = tree or scenario_tree
    return simulate(config, trace=trace, budgets=tree, on_unknown_project=args.unknown_projects)


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
