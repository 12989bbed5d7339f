"""Instructions executed by ``simulate`` under valgrind's callgrind: a speed measure that does
not move with the machine's load, for before/after comparisons of the engine and policies.

    python benchmarks/count_instructions.py                          # this checkout, public shape
    python benchmarks/count_instructions.py --trace default --checkout /path/to/other/clone
    python benchmarks/count_instructions.py --trace shape:backlog-none --scale 0.1   # a shape of bench_shapes.py

Wall times on a shared 2-core machine swing by tens of percent between back-to-back runs;
callgrind counts the instructions a run executes, which repeat to within about 0.1% (set and
dict order of strings varies with Python's hash seed). Each trace is run twice under callgrind
in a fresh process: once generating the trace only, once generating it and simulating it; the
difference is the cost of ``simulate`` (the engine, the job records and the event log's
frame). Both first simulate the trace's first 20 jobs, so that what a first call costs once
(lazy imports) is not counted. Expect about 50x the run's normal time (the public shape: 3-4 minutes).
Needs valgrind (Debian's package ``valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_shapes import SHAPES

HERE = Path(__file__).resolve().parent

#: The traces, as (jobs, GPUs) of the public shape, or the default scenario.
TRACES = {"public": (20_000, 512), "small": (8_000, 256), "wide": (20_000, 1024), "default": None}

RUN = """
import sys
import impactlab as il
from realtrace import public_shape
from bench_shapes import SHAPES, build
trace_name, simulate_too, policy, scale = sys.argv[1], sys.argv[2] == "1", sys.argv[3], float(sys.argv[4])
if trace_name.startswith("shape:"):
    _, config, trace, tree = build(trace_name[len("shape:"):], scale)
    config = config.with_params(policy=policy)
elif {shapes}[trace_name] is None:
    config = il.SimConfig(policy=policy)
    work = il.generate(config.generator())
    trace, tree = work.trace, work.tree
else:
    shape = {shapes}[trace_name]
    trace, tree = public_shape(*shape, 0)
    config = il.SimConfig(gpus=shape[1], days=14, warmup_days=0.0, policy=policy)
il.simulate(config, trace=trace.head(20), budgets=tree)  # (both runs: lazy imports, first calls)
if simulate_too:
    il.simulate(config, trace=trace, budgets=tree)
"""


def instructions(
    checkout: Path, trace: str, policy: str, simulate_too: bool, scale: float = 1.0
) -> int:
    """Instructions callgrind counts for one fresh process. ``trace`` is a name of ``TRACES``,
    or ``shape:<name>`` for a shape of ``bench_shapes.py`` with ``scale`` times its jobs."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        # (run from an empty folder: ``python -c`` puts the working folder first on the path)
        env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'benchmarks'}"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                RUN.format(shapes=repr(TRACES)),
                trace,
                "1" if simulate_too else "0",
                policy,
                repr(scale),
            ],
            env=env,
            cwd=tmp,
            check=True,
            capture_output=True,
        )
        totals = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
        if totals is None:
            raise SystemExit(f"no totals in callgrind's output for {checkout}")
        return int(totals.group(1))


def simulate_instructions(checkout: Path, trace: str, policy: str, scale: float = 1.0) -> int:
    """Instructions of ``simulate`` alone: a run that generates the trace and simulates it,
    less one that only generates it."""
    setup = instructions(checkout, trace, policy, simulate_too=False, scale=scale)
    return instructions(checkout, trace, policy, simulate_too=True, scale=scale) - setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkout", type=Path, default=HERE.parent, help="the clone whose impactlab runs"
    )
    parser.add_argument(
        "--trace",
        choices=sorted(TRACES) + [f"shape:{name}" for name in SHAPES],
        default="public",
        help="a trace, or a shape of bench_shapes.py",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="jobs of a shape, times")
    parser.add_argument("--policy", default="impactful")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    checkout = args.checkout.resolve()
    total = simulate_instructions(checkout, args.trace, args.policy, args.scale)
    print(f"| {checkout} | {args.trace} | {args.policy} | {total / 1e9:.2f} |")


if __name__ == "__main__":
    main()
