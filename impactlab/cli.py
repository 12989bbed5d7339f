"""The ``impactlab`` command line: run a simulation and print or save its results."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, overload

from .analysis.catalog import BY_NAME, CLUSTER_TABLE, SCALAR, shown
from .analysis.findings import queue_path
from .base.config import PAIRINGS, REPAIR_MODES, SimConfig, parameter, parameters
from .base.files import (
    InputFileError,
    OutputPathError,
    check_output_dir,
    check_output_file,
    read_yaml,
)
from .base.params import Param, ParamError, iter_groups
from .base.registry import policy_class, policy_names, policy_params
from .base.version import VERSION
from .inputs.budgets import BudgetError
from .inputs.maintenance import MaintenanceError
from .inputs.scenario import ScenarioError, load_scenario
from .policies import PolicyError
from .runs.machine import BACKENDS

if TYPE_CHECKING:  # the modules that run simulations load when a command needs them (pandas:
    # about half a second), so a bad flag or output path is answered at once
    from .inputs.workload import SizeEstimate
    from .runs.simulate import SimResult

log = logging.getLogger("impactlab")

#: Per-kind columns of the readable summary: (summary key, heading, format).
KIND_CELLS = (
    ("jobs", "jobs", "d"),
    ("preemptions", "preempts", "d"),
    ("preempted_share", "preempt sh", ".2f"),
    ("killed", "killed", "d"),
    ("killed_share", "kill share", ".2f"),
    ("lost_gpu_hours", "lost GPU-h", ".1f"),
    ("cut_gpu_hours", "cut GPU-h", ".1f"),
    ("queued_p90_s", "queued p90", ".0f"),
)


W = max(map(len, SCALAR)) + 2  # the name column of the readable tables


class UsageError(Exception):
    """A problem with the command line's inputs, reported in one line."""


class _Parser(argparse.ArgumentParser):
    """Reports a bad argument in one line (with a pointer to --help), not the usage block."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DEFAULT_POLICIES = ["legacy", "impactful"]  # what compare compares unless told


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI); run options come from the declared
    parameters (``impactlab.parameters()``), so a new knob is a new flag with no edit here."""
    parser = _Parser(prog="impactlab", description="Simulate GPU-cluster scheduling policies.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("--version", action="version", version=f"impactlab {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser(
        "simulate", help="replay a trace (or a synthetic Ai2-like workload) under a policy"
    )
    cmp = sub.add_parser(
        "compare", help="replay the same workload under several policies, side by side"
    )
    sim.add_argument(
        "--policy",
        required=True,
        type=_policy_name,
        help=f"one of {policy_names()} or module:Class",
    )
    which = cmp.add_mutually_exclusive_group()
    which.add_argument(
        "--policies",
        nargs="+",
        default=DEFAULT_POLICIES,
        type=_policy_name,
        help=f"policies to compare (default legacy impactful); from {policy_names()} or module:Class",
    )
    which.add_argument(
        "--pairing",
        choices=sorted(PAIRINGS),
        help="a named set of variants: ai2 = legacy with "
        "manual repair against impactful with automatic repair (Ai2's before/after)",
    )
    cmp.add_argument(
        "--layouts",
        nargs="+",
        metavar="LABEL=LAYOUT",
        type=_layout_arg,
        help="what-ifs on a fleet (from --scenario or --clusters), under one policy (--policies "
        "NAME, default impactful): as-is, merge:A+B, split:A:N, move:A:B:GPUS, resize:A:GPUS, "
        "or clusters as text (a:88,b:256); e.g. --layouts today=as-is one=merge:a+b",
    )
    cmp.add_argument(
        "--repairs",
        nargs="+",
        choices=REPAIR_MODES,
        metavar="MODE",
        help="with --policies: one "
        "repair mode per policy, in order (default: --repair, else automatic for all)",
    )
    for command in (sim, cmp):
        _run_options(command)
        _size_options(command)
    _inspect_options(
        sub.add_parser("inspect", help="what a trace holds, and the cluster size that suits it")
    )
    _sweep_commands(sub)
    why = sub.add_parser(
        "explain", help="why a job waited or was preempted: its story, from a saved run"
    )
    why.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="a simulate --out folder (or one policy's folder of a compare --out)",
    )
    why.add_argument("job_id", metavar="JOB_ID", help="the job's id in the trace")
    why.add_argument("--json", action="store_true", help="print the steps as JSON")
    app = sub.add_parser(
        "app",
        help="serve the Explorer as an app (Voila), with nothing asked of other machines",
        description="Serve the Explorer notebook with Voila and impactlab's page template (no "
        "CDN links). Run it from the repository root, whose voila.json preheats a kernel. "
        "Arguments after the notebook go to Voila (--port=8866, --no-browser, ...).",
    )
    app.add_argument(
        "notebook",
        nargs="?",
        type=Path,
        default=EXPLORER,
        help=f"the notebook (default {EXPLORER})",
    )
    app.add_argument("voila", nargs=argparse.REMAINDER, help="arguments for Voila")
    return parser


def _size_options(command: argparse.ArgumentParser) -> None:
    """simulate and compare: progress, and the guard against runs too long to be meant."""
    command.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"a progress bar in simulated days on stderr (default: for runs of over "
        f"{PROGRESS_JOBS:,} estimated jobs)",
    )
    command.add_argument(
        "--long-run",
        action="store_true",
        help=f"run even when the estimate is over {LONG_RUN_JOBS:,} jobs per policy",
    )


def _inspect_options(command: argparse.ArgumentParser) -> None:
    """``impactlab inspect TRACE``: the trace summary, without simulating."""
    command.add_argument("trace", type=Path, help="trace file (any supported format)")
    for name in ("trace_format", "demand", "gpus_per_node"):
        _add_flag(command, parameter(name))
    command.add_argument("--json", action="store_true", help="print one JSON object")


def inspect(args: argparse.Namespace) -> str:
    """The text (or JSON) ``impactlab inspect`` prints."""
    from .inputs.overview import fleet_advice, overview
    from .inputs.traces import load

    demand, per_node = getattr(args, "demand", 2.5), getattr(args, "gpus_per_node", 8)
    loaded = load(args.trace, getattr(args, "trace_format", None), on_bad="error")
    trace = loaded.trace
    trace.attrs["load_report"] = loaded.report.to_dict()
    info = overview(trace, per_node)
    fleet = fleet_advice(trace, per_node, demand)
    if args.json:
        fleet_json = {"fleet": fleet.to_dict()} if fleet else {}
        return json.dumps({**info.to_dict(demand), **fleet_json, "format": loaded.report.format})
    lines = [f"{args.trace} ({loaded.report.format})", *info.lines(demand)]
    return "\n".join(lines + (fleet.lines() if fleet else []))


def _run_options(command: argparse.ArgumentParser) -> None:
    """One flag per declared parameter, grouped; absent flags stay absent (not defaults)."""
    command.add_argument(
        "--scenario",
        type=Path,
        help="scenario YAML (a file, or a shipped name such as scenario-week-256.yaml): cluster, "
        "workload and budgets; flags given explicitly win over it",
    )
    command.add_argument(
        "--maintenance",
        type=Path,
        metavar="PLAN",
        help="maintenance plan (YAML or CSV: announce_h, down_h, hours, nodes or share, "
        "at_deadline); replaces the scenario's",
    )
    command.add_argument(
        "--clusters",
        metavar="NAME:GPUS,...",
        help="a fleet of clusters in one run (e.g. a:88,b:256; name:gpus:x+y also runs the jobs "
        "whose trace names x or y); replaces the scenario's clusters",
    )
    command.add_argument(
        "--json", action="store_true", help="print one JSON object instead of a table"
    )
    command.add_argument(
        "--out",
        type=Path,
        help="write events, jobs, budgets, trace (Parquet), summary and config (JSON)",
    )
    for group, params in iter_groups([p for p in parameters() if p.name != "policy"]):
        title = (
            f"{group} knobs (policies: {', '.join(params[0].policies)})"
            if params[0].policies
            else group
        )
        section = command.add_argument_group(title)
        for param in params:
            _add_flag(section, param)


def _add_flag(section: argparse._ActionsContainer, param: Param) -> None:
    kwargs: dict[str, Any] = {
        "dest": param.name,
        "default": argparse.SUPPRESS,
        "help": param.describe().replace("%", "%%"),
    }
    if param.type is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    else:
        kwargs.update(
            type=_parser_of(param),
            metavar=param.unit.upper().replace(" ", "_") or param.type.__name__.upper(),
        )
    section.add_argument(param.cli_flag, **kwargs)


def _parser_of(param: Param) -> Any:
    def parse(text: str) -> Any:
        try:
            return param.parse(text)
        except ParamError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = param.name  # argparse names the converter in its messages
    return parse


def _policy_name(text: str) -> str:
    try:
        policy_class(text)
    except ParamError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The declared parameters set on the command line (absent flags are not in the namespace)."""
    names = {p.name for p in parameters()}
    return {k: v for k, v in vars(args).items() if k in names}


def base_config(args: argparse.Namespace) -> SimConfig:
    """Defaults, then the scenario file, then the explicit flags (which always win); a
    ``--maintenance`` plan replaces the scenario's and is checked against the cluster the
    flags ask for."""
    base = load_scenario(args.scenario).config if args.scenario else SimConfig()
    plan = None
    if getattr(args, "maintenance", None) is not None:
        from .inputs.maintenance import load_maintenance

        plan = load_maintenance(args.maintenance)
        base = dataclasses.replace(base, maintenance=())
    values = given(args)
    knobs = {p.name for p in parameters() if p.policies}
    run = {k: v for k, v in values.items() if k not in knobs}
    if getattr(args, "clusters", None):  # (with the flags: --gpus-per-node checks it)
        run["clusters"] = args.clusters
    if args.command == "simulate":
        run = {**run, "policy": args.policy, **{k: values[k] for k in values if k in knobs}}
    config = base.with_params(run)
    if plan is None:
        return config
    try:
        return config.with_maintenance(*plan)
    except ParamError as err:  # (checked against the cluster: the plan's file names it)
        raise ParamError(f"{args.maintenance}: {err}") from None


def variants(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """compare: each policy (or variant of the pairing) with the knobs given on the command
    line that it declares, and its repair mode from ``--repairs``."""
    from .runs.simulate import pairing

    if args.pairing and args.repairs:
        raise UsageError("--repairs: the pairing sets each variant's repair mode")
    base = pairing(args.pairing) if args.pairing else _own_repairs(args)
    knobs = {
        k: v for k, v in given(args).items() if k in {p.name for p in parameters() if p.policies}
    }
    declared = {label: {p.name for p in policy_params(v["policy"])} for label, v in base.items()}
    orphans = sorted(k for k in knobs if not any(k in mine for mine in declared.values()))
    if orphans:
        raise UsageError(
            f"{', '.join(orphans)}: not a knob of any of {[v['policy'] for v in base.values()]}"
        )
    return {
        label: {**v, **{k: x for k, x in knobs.items() if k in declared[label]}}
        for label, v in base.items()
    }


def _own_repairs(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--policies`` with ``--repairs`` (one mode per policy, if given)."""
    repairs = args.repairs or []
    if repairs and len(repairs) != len(args.policies):
        raise UsageError(
            f"--repairs: give one mode per policy ({len(args.policies)}), got {len(repairs)}"
        )
    if repairs and "repair" in given(args):
        raise UsageError("--repairs and --repair: give one or the other")
    return {
        name: {"policy": name, **({"repair": repairs[k]} if repairs else {})}
        for k, name in enumerate(args.policies)
    }


#: Above this many estimated jobs a run needs --long-run; above PROGRESS_JOBS it shows a progress bar.
LONG_RUN_JOBS, PROGRESS_JOBS = 3_000_000, 300_000


def run(args: argparse.Namespace) -> list[SimResult]:
    """Parse -> config -> simulate or compare; the results in the order asked."""
    from .inputs.workload import estimate_size
    from .runs.simulate import compare, simulate

    config = base_config(args)
    size = estimate_size(config)
    runs = (
        1
        if args.command == "simulate"
        else len(args.layouts)
        if args.layouts
        else len(args.policies)
    )
    check_size(size, runs, args.long_run)
    progress = (
        args.progress if args.progress is not None else bool(size and size.jobs > PROGRESS_JOBS)
    )
    if args.command == "simulate":
        return [simulate(config, progress=progress)]
    if args.layouts:
        return compare_layouts(args, config, progress)
    return compare(config, variants(args), progress=progress)


def _layout_arg(text: str) -> tuple[str, str]:
    label, sep, layout = text.partition("=")
    if not sep or not label.strip() or not layout.strip():
        raise argparse.ArgumentTypeError(f"expected LABEL=LAYOUT, got {text!r}")
    return label.strip(), layout.strip()


def layout_of(config: SimConfig, text: str) -> SimConfig:
    """A what-if on ``config``'s fleet, from ``--layouts`` text (see its help)."""
    op, _, rest = text.partition(":")
    bits = rest.split(":")
    try:
        if text == "as-is":
            return config
        if op == "merge" and len(bits) == 1:
            return config.merge_clusters(*bits[0].split("+"))
        if op == "split" and len(bits) == 2:
            return config.split_cluster(bits[0], int(bits[1]))
        if op == "move" and len(bits) == 3:
            return config.move_gpus(bits[0], bits[1], int(bits[2]))
        if op == "resize" and len(bits) == 2:
            return config.resize_cluster(bits[0], int(bits[1]))
    except ValueError as err:
        if isinstance(err, ParamError):
            raise
        raise UsageError(f"--layouts {text}: {err}") from None
    return config.with_params(clusters=text)


def compare_layouts(args: argparse.Namespace, config: SimConfig, progress: bool) -> list[SimResult]:
    """compare --layouts: one policy on several layouts of the fleet, the same workload."""
    from .runs.simulate import compare_fleets

    if not config.clusters:
        raise UsageError("--layouts: the run has one cluster; give --clusters or a fleet scenario")
    chosen = args.policies is not DEFAULT_POLICIES  # (argparse hands the default object back)
    if args.pairing or args.repairs or (chosen and len(args.policies) > 1):
        raise UsageError("--layouts: compare one policy (--policies NAME) across layouts")
    policy = args.policies[0] if chosen else "impactful"
    every_knob = {p.name for p in parameters() if p.policies}
    knobs = {k: v for k, v in given(args).items() if k in every_knob}
    mine = {p.name for p in policy_params(policy)}
    if set(knobs) - mine:
        raise UsageError(f"{', '.join(sorted(set(knobs) - mine))}: not a knob of {policy}")
    config = config.with_params(policy=policy, **knobs)
    labels = [label for label, _ in args.layouts]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise UsageError(f"--layouts: the label {twice[0]!r} is given twice")
    unsafe = [
        label for label in labels if not re.fullmatch(r"[\w.+-]+", label) or label in (".", "..")
    ]
    if unsafe:  # (a label names the run's folder under --out)
        raise UsageError(
            f"--layouts: label {unsafe[0]!r}: use letters, digits, '.', '_', '+' or '-'"
        )
    layouts = {label: layout_of(config, text) for label, text in args.layouts}
    return compare_fleets(config, layouts, progress=progress)


def check_size(size: SizeEstimate | None, runs: int, long_run: bool) -> None:
    """Refuse, with an estimate, a run so long that it was more likely a typo than a plan."""
    if size is None or size.jobs <= LONG_RUN_JOBS or long_run:
        return
    hours = size.seconds * runs / 3600
    raise UsageError(
        f"this run would simulate about {size.jobs:,} jobs per policy (roughly {hours:,.1f} h for "
        f"{runs} polic{'y' if runs == 1 else 'ies'}, and memory growing with the jobs); check --days "
        f"and --gpus, or pass --long-run to go ahead"
    )


def check_out(out: Path | None) -> None:
    """Refuse an output folder that cannot be written before spending time on a run."""
    if out is not None:
        try:
            check_output_dir(out)
        except OutputPathError as err:
            raise UsageError(f"--out {err}") from None


def check_not_a_sweep(out: Path) -> None:
    """Refuse to save single runs into a sweep's folder (its report reads only the sweep)."""
    from .runs.sweep import is_sweep_folder

    if is_sweep_folder(out):
        raise UsageError(f"--out {out}: holds a sweep; give the runs a folder of their own")


def replace_saved_runs(out: Path, runs: list[str]) -> None:
    """Make room in ``out`` for new runs (``runs``: a compare's sub-folders, none for a single
    run): the run saved in it before is replaced (one stderr line says so) and a compare lists
    its runs, so that a report never shows old runs beside the new ones."""
    from .analysis.results import replace_runs

    if replace_runs(out, runs):
        print(f"impactlab: replaced the run saved in {out} before", file=sys.stderr)


def _out_refused(out: Path | None) -> bool:
    """``check_out`` before anything slow is even imported; the one line on stderr if refused."""
    try:
        check_out(out)
    except UsageError as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return True
    return False


@overload
def json_ready(value: dict[str, Any], digits: int = 6) -> dict[str, object]: ...
@overload
def json_ready(value: object, digits: int = 6) -> object: ...
def json_ready(value: object, digits: int = 6) -> object:
    """Replace NaN/inf (not valid JSON) by None and round floats to ``digits`` significant
    digits (0.958333 rather than 0.9583333333333334), recursively."""
    if isinstance(value, dict):
        return {k: json_ready(v, digits) for k, v in value.items()}
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else None
    return value


def _cell(value: object, spec: str, width: int) -> str:
    """One number of a table, right-aligned; "-" where it is undefined (None)."""
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:{width}{spec if isinstance(value, float) else 'd'}}"


def _window(summary: dict) -> str:
    """The simulated span and the reporting window, in days."""
    days, start = round(summary["days"], 2), round(summary["report_from_days"], 2)
    return f"simulated days 0-{days:g}, reported days {start:g}-{days:g}"


def _fact(summary: dict, key: str) -> object:
    return _window(summary) if key == "window" else summary[key]


def _reported(window: object) -> str:
    """The reported days of a ``_window`` text."""
    return str(window).rpartition(" ")[2]


def format_table(summary: dict) -> str:
    """A readable summary: headline fractions, counts and waits per kind."""
    title = (
        f"policy {summary['policy']} on {summary['gpus']} GPUs, {_window(summary)}: {summary['jobs']} jobs, "
        f"simulated in {summary['sim_wall_s']:.2f} s"
    )
    lines = [title]
    lines += [
        f"  {name:{W}} {_cell(summary[name], BY_NAME[name].fmt, 7)}" for name in shown([summary])
    ]
    lines.append(f"  {'queued jobs by quarter':{W}} {queue_path(summary['queue_quarters'])}")
    if summary["repair"] is not None:
        lines += [
            f"  {'repair (mode)':{W}} {summary['repair']:>7}",
            f"  {'human_fraction (input)':{W}} {summary['human_fraction']:7.2f}",
        ]
    lines += ["", f"  {'wait (s)':14} {'p50':>9} {'p90':>9} {'p99':>9} {'n':>6}"]
    for kind, w in summary["wait_s"].items():
        cells = " ".join(_cell(w[p], ".0f", 9) for p in ("p50", "p90", "p99"))
        lines.append(f"  {kind:14} {cells} {w['n']:6d}")
    return "\n".join(lines + format_kinds(summary["by_kind"]))


def format_kinds(by_kind: dict[str, dict]) -> list[str]:
    """The per-kind table of a summary: outcomes, preemptions, kills and lost GPU-hours."""
    lines = ["", f"  {'per kind':14}" + "".join(f"{head:>11}" for _, head, _ in KIND_CELLS)]
    for kind, row in by_kind.items():
        cells = "".join(
            f"{'-':>11}" if row[key] is None else f"{row[key]:11{fmt}}"
            for key, _, fmt in KIND_CELLS
        )
        lines.append(f"  {kind:14}{cells}")
    return lines


def format_clusters(table: Any) -> str:
    """A fleet's run, one line per cluster and one for the organisation (ratios of sums)."""
    cells = [cell for cell in CLUSTER_TABLE if cell[0] in table.columns]
    lines = ["  " + f"{'cluster':14}" + "".join(f"{cell[1]:>14}" for cell in cells)]
    for row in table.to_dict("records"):
        out = [
            f"{int(row[key]):14d}" if fmt == "d" else _cell(row[key] / per, fmt, 14)
            for key, _, per, fmt in cells
        ]
        lines.append(f"  {row['cluster']:14}" + "".join(out))
    return "\n".join(lines)


def format_comparison(summaries: list[dict], labels: list[str] | None = None) -> str:
    """Runs side by side (headed by ``labels``, default their policies): headline metrics and
    p50/p90 waits per kind."""
    labels = labels or [s["policy"] for s in summaries]
    head = f"  {'':{W}}" + "".join(f"{label:>12}" for label in labels)
    first = summaries[0]
    # The title says what holds for every run; what differs (the GPUs of a fleet's layouts,
    # for example) is a row instead.
    differ = [k for k in ("jobs", "gpus", "window") if len({_fact(s, k) for s in summaries}) > 1]
    who = "runs" if "jobs" in differ else f"{first['jobs']} jobs"
    if "gpus" not in differ:
        who += f" on {first['gpus']} GPUs"
    lines = [who if "window" in differ else f"{who}, {_window(first)}", head]
    for key in differ:
        name, cell = ("reported days", _reported) if key == "window" else (key, str)
        lines.append(f"  {name:{W}}" + "".join(f"{cell(_fact(s, key)):>12}" for s in summaries))
    for name in (*shown(summaries), "sim_wall_s"):
        lines.append(f"  {name:{W}}" + "".join(_cell(s[name], ".3f", 12) for s in summaries))
    lines.append("  queued jobs at the window's start and at the end of each quarter:")
    lines += [
        f"    {label:22} {queue_path(s['queue_quarters'])}" for label, s in zip(labels, summaries)
    ]
    if any(s["repair"] is not None for s in summaries):  # human repairs follow from these inputs
        lines.append(
            f"  {'repair (mode)':{W}}" + "".join(f"{s['repair'] or '-':>12}" for s in summaries)
        )
        lines.append(
            f"  {'human_fraction (input)':{W}}"
            + "".join(f"{s['human_fraction']:12.2f}" for s in summaries)
        )
    for kind in summaries[0]["wait_s"]:
        for p in ("p50", "p90"):
            cells = [s["wait_s"].get(kind, {}).get(p) for s in summaries]
            lines.append(
                f"  {f'wait {kind} {p} (s)':{W}}" + "".join(_cell(c, ".0f", 12) for c in cells)
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status (130 when interrupted)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # (Ctrl-C: one line, not a traceback)
        print("impactlab: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # a bad flag (status 2, one line on stderr) or --help (0)
        return int(stop.code or 0)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    if args.command in _EXTRA_COMMANDS:
        return _EXTRA_COMMANDS[args.command](args)
    if _out_refused(getattr(args, "out", None)):
        return 2
    from .inputs.trace import TraceError

    try:
        if args.command == "inspect":
            print(inspect(args))
            return 0
        if args.out:
            check_not_a_sweep(args.out)
        results = run(args)
        if args.out:
            replace_saved_runs(args.out, [r.run for r in results if args.command == "compare"])
        for result in results:
            if args.out:
                result.save(args.out / result.run if args.command == "compare" else args.out)
    except (
        UsageError,
        ParamError,
        ScenarioError,
        TraceError,
        BudgetError,
        PolicyError,
        OutputPathError,
        MaintenanceError,
    ) as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return 2
    summaries = [json_ready(r.summary()) for r in results]
    fleets = [r.by_cluster() if r.config.clusters else None for r in results]
    if args.json:
        if args.command == "compare":  # (a run's label: its policy, or its layout's)
            summaries = [{"run": r.run, **s} for r, s in zip(results, summaries)]
        for summary, table in zip(summaries, fleets):
            if table is not None:
                summary["clusters"] = [json_ready(row) for row in table.to_dict("records")]
        text = json.dumps(summaries[0] if args.command == "simulate" else summaries)
    elif args.command == "simulate":
        text = format_table(summaries[0])
        if fleets[0] is not None:
            text += "\n\n" + format_clusters(fleets[0])
    else:
        text = format_comparison(summaries, [r.run for r in results])
        text += "".join(
            f"\n\n{r.run}:\n" + format_clusters(t) for r, t in zip(results, fleets) if t is not None
        )
    try:
        print(text)
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return 0


# ----- sweep and report ------------------------------------------------------------------------
_SWEEP_HELP = """Run every config of a grid x seeds (serially, in local processes or on Dask) and print
mean and 95% CI per config. Axes come from GRID.yaml ({grid: {cap_hours: [1, 4, 8]}, seeds: 0-5,
base: {gpus: 88}}) and --grid flags; any declared parameter, "policy", "trace_path" or
"share.<node>". A policy knob given as a flag is a one-value axis (it applies to the policies that
declare it). --out DIR files each run as it completes (runs/<key>.parquet and .json); the same
command again resumes. Exit status 1 if a run failed (each failure is filed with its error)."""


def _sweep_commands(sub: Any) -> None:
    """The ``sweep`` and ``report`` subcommands."""
    swp = sub.add_parser(
        "sweep",
        help="run a grid of configs x seeds, resumable with --out DIR",
        description=_SWEEP_HELP,
    )
    swp.add_argument(
        "grid_file",
        nargs="?",
        type=Path,
        metavar="GRID.yaml",
        help="grid, seeds and base parameters",
    )
    swp.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        type=_axis,
        help="one grid axis, repeatable: --grid cap_hours=1,4,8 --grid policy=legacy,impactful; "
        "fleets are parted by semicolons: --grid 'clusters=a:64,b:16;a:48,b:32'",
    )
    swp.add_argument(
        "--seeds", type=_seed_list, metavar="0-5", help="seeds: 0-5, 0,3,7 or both (default 0)"
    )
    swp.add_argument(
        "--policy",
        type=_policy_name,
        default=argparse.SUPPRESS,
        help="base policy (default impactful); sweep several with --grid policy=a,b",
    )
    swp.add_argument(
        "--backend", choices=BACKENDS, default="processes", help="where runs go (default processes)"
    )
    swp.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes or LocalCluster workers (default: cores)",
    )
    swp.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --backend dask: a running scheduler (tcp://host:8786) instead of a LocalCluster",
    )
    swp.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _run_options(swp)
    rep = sub.add_parser(
        "report", help="a self-contained, offline HTML report of a sweep or of saved runs"
    )
    rep.add_argument(
        "source",
        type=Path,
        metavar="DIR",
        help="a sweep --out, simulate --out or compare --out folder",
    )
    rep.add_argument(
        "-o", "--output", type=Path, help="HTML file to write (default DIR/report.html)"
    )


def _axis(text: str) -> tuple[str, list[str]]:
    name, sep, values = text.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., got {text!r}")
    name = name.strip().replace("-", "_")
    # (a fleet is written with commas, "a:64,b:16": its layouts are parted by semicolons)
    return name, [v.strip() for v in values.split(";" if name == "clusters" else ",")]


def _seed_list(text: str) -> list[int]:
    from .runs.sweep import SweepError, parse_seeds

    try:
        return parse_seeds(text)
    except SweepError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def sweep_spec(args: argparse.Namespace) -> tuple[SimConfig, dict[str, list[Any]], list[int]]:
    """Base config, grid and seeds: defaults < --scenario < GRID.yaml base < flags; knob values
    outside the grid become one-value axes (so each applies where a policy declares it)."""
    from .runs.sweep import parse_seeds

    spec = _grid_file(args.grid_file) if args.grid_file else {}
    flags = given(args)
    knob_names = {p.name for p in parameters() if p.policies}
    fixed = {**{k: v for k, v in spec.get("base", {}).items() if k not in flags}, **flags}
    start = base_config(args)
    try:
        base = start.with_params(
            {k: v for k, v in fixed.items() if k not in knob_names and k not in flags}
        )
    except ParamError as err:  # (the flags were checked as they were parsed: it is the file's)
        raise UsageError(f"{args.grid_file}: base: {err}") from None
    grid = {
        **{k: v if isinstance(v, list) else [v] for k, v in spec.get("grid", {}).items()},
        **dict(args.grid),
    }
    grid.update({k: [v] for k, v in fixed.items() if k in knob_names and k not in grid})
    seeds = args.seeds or spec.get("seeds") or [flags.get("seed", 0)]
    return base, grid, parse_seeds(seeds) if isinstance(seeds, str | int) else list(seeds)


def _grid_file(path: Path) -> dict[str, Any]:
    try:
        spec = read_yaml(path)
    except InputFileError as err:
        raise UsageError(f"{path}: cannot read the grid: {err}") from None
    extra = (
        sorted(set(spec) - {"grid", "seeds", "base"})
        if isinstance(spec, dict)
        else ["(not a mapping)"]
    )
    if extra or not isinstance(spec.get("grid"), dict):
        raise UsageError(
            f"{path}: a grid file is a mapping with grid: {{name: [values]}}, optional seeds: and "
            f"base:; found {extra or 'no grid'}"
        )
    return spec


def sweep_command(args: argparse.Namespace) -> int:
    """``impactlab sweep``: run the grid, print mean and CI per config (or the runs as JSON)."""
    if _out_refused(args.out):
        return 2
    from .runs.sweep import SweepError, headline_table, summarise_sweep, sweep

    try:
        base, grid, seeds = sweep_spec(args)
        with _dask_client(args.scheduler) as client:
            frame = sweep(
                base,
                grid,
                seeds,
                backend=args.backend,
                client=client,
                workers=args.workers,
                progress=args.progress,
                out=args.out,
            )
    except (UsageError, SweepError, ParamError, ScenarioError, BudgetError) as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if not args.out:
            raise
        print(
            f"impactlab: interrupted; the runs that finished are kept in {args.out} "
            "(the same command resumes)",
            file=sys.stderr,
        )
        return 130
    failed = frame[frame["status"] != "ok"]
    if args.json:
        print(frame.to_json(orient="records"))
    elif len(failed) < len(frame):
        print(headline_table(summarise_sweep(frame)).to_string(index=False))
    if len(failed):  # (each failure was logged as it happened, with its config and error)
        print(
            f"impactlab: {len(failed)} of {len(frame)} runs failed (each named above with its "
            "error" + ("; the same command retries only them)" if args.out else ")"),
            file=sys.stderr,
        )
    return 1 if len(failed) else 0


def _dask_client(address: str | None) -> Any:
    """A client of the scheduler at ``address`` (closed afterwards), or None."""
    from contextlib import nullcontext

    if not address:
        return nullcontext(None)
    from distributed import Client

    return Client(address)


def report_command(args: argparse.Namespace) -> int:
    """``impactlab report DIR -o report.html``."""
    out = args.output or args.source / "report.html"
    if not args.source.is_dir():
        what = "is not a folder" if args.source.exists() else "no such folder"
        print(
            f"impactlab: error: {args.source}: {what}; give a sweep, simulate or compare --out folder",
            file=sys.stderr,
        )
        return 2
    try:
        check_output_file(out)  # before anything slow is even imported
    except OutputPathError as err:
        flag = "-o " if args.output is not None else "the report (-o) "
        print(f"impactlab: error: {flag}{err}", file=sys.stderr)
        return 2
    from .analysis.results import SavedFileError
    from .notebook.report import ReportError, write_report

    try:
        write_report(args.source, out)
    except (ReportError, SavedFileError, FileNotFoundError, NotADirectoryError) as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


def explain_command(args: argparse.Namespace) -> int:
    """``impactlab explain RUN_DIR JOB_ID``: the job's story, in words (or JSON)."""
    from .analysis.explain import ExplainError
    from .analysis.results import SavedFileError
    from .runs.simulate import SimResult

    try:
        story = SimResult.load(_run_dir(args.run_dir)).explain(args.job_id)
    except (UsageError, ExplainError, SavedFileError) as err:
        print(f"impactlab: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    "job_id": story.job_id,
                    "steps": [
                        {
                            "t_s": s.t_s,
                            "kind": s.kind,
                            "text": s.text,
                            "span_s": s.span_s,
                            "why": [{"reason": str(w.reason), "text": w.text} for w in s.why],
                        }
                        for s in story.steps
                    ],
                }
            )
        )
    else:
        print(story.text())
    return 0


def _run_dir(path: Path) -> Path:
    """``path`` if it holds a saved run; a compare folder names its runs in the error."""
    if (path / "config.json").is_file() and (path / "events.parquet").is_file():
        return path
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder")
    runs = sorted(p.name for p in path.iterdir() if (p / "config.json").is_file())
    hint = f"; it holds the runs {', '.join(runs)}: give one of them" if runs else ""
    raise UsageError(f"{path}: not a saved run (simulate --out){hint}")


#: Jupyter data folder with the Explorer's page template (``impactlab app``).
APP_DATA = Path(__file__).resolve().parent / "notebook" / "jupyter"
#: The Explorer notebook, from the repository root (where voila.json preheats a kernel for it).
EXPLORER = Path("notebooks") / "01-explorer.ipynb"


def app_command(args: argparse.Namespace) -> int:
    """Serve the Explorer as an app: Voila, with a page that asks nothing of other machines.
    The process becomes Voila (exec), so stopping it stops the server."""
    if importlib.util.find_spec("voila") is None:
        print(
            "impactlab app: error: Voila is not installed: pip install 'impactlab[app]'",
            file=sys.stderr,
        )
        return 2
    if not args.notebook.is_file():
        print(
            f"impactlab app: error: {args.notebook}: no such notebook (run from the repository "
            "root, or name the Explorer notebook)",
            file=sys.stderr,
        )
        return 2
    env = dict(os.environ)
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(APP_DATA), env.get("JUPYTER_PATH")]))
    cmd = [sys.executable, "-m", "voila", str(args.notebook), "--template=impactlab", *args.voila]
    sys.stdout.flush()
    os.execve(sys.executable, cmd, env)
    return 0  # (not reached: the process is Voila now)


_EXTRA_COMMANDS = {
    "sweep": sweep_command,
    "report": report_command,
    "explain": explain_command,
    "app": app_command,
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
