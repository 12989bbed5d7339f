"""How fast impactful could be if parts of its pass cost nothing: lower bounds by replay.

    python benchmarks/bounds.py                          # public shape (20,000 jobs, 512 GPUs) and default scenario
    python benchmarks/bounds.py --traces public --repeat 3
    python benchmarks/bounds.py --traces whole --jobs 1000000 --gpus 1024 --repeat 1   # bench_scale's million
    python benchmarks/bounds.py --traces backlog-none backlog-filled burst   # bench_shapes.py's shapes

Issue 14 asks impactful to run within 3x fifo's time on the same trace, with every event log
unchanged. This measures how close any exact speed-up could come. One run of impactful
records what each pass did (its starts, preemptions and wake-up calls) and what each victim
search returned (its ``Room``, and what a failure told the pass through ``Searches``).
Two replays then produce the same event log (checked by digest) for less work:

* **free failed searches**: a search recorded as failed returns its recorded result at once,
  leaving the flag it left; the successful ones run. What is left is the pass without any
  search that finds nothing: the bound of every exact pruning of searches.
* **free pass**: a pass that ran does only the two things the engine's hooks read later (the
  fair-share refresh and the drain's plan) and then applies the recorded actions; no lane,
  queue or search is visited. What is left is the engine and impactful's bookkeeping of each
  event (fair-share charges, the index of victims, protection timers, the drain's release
  times), over the events impactful's decisions cause (its preemptions and requeues).

The recording also counts the searches that **repeat a failed search unchanged**: the same
search key (leaf, GPUs, nodes, tier, reservation) as an earlier failed search, with nothing the
policy tracks changed since (``sched.epoch``, the ``Searches`` version and refresh count, the
reservation's version). Remembering failed searches by key, or sharing one answer between the
jobs of a key, could save at most those; the count of searches that then *succeeded* in such
an unchanged state shows that even this key and state are not enough to reuse an answer.

fifo and fairshare run the same trace for the ratios. Wall times are the best of
``--repeat``; compare ratios within one run (the machine is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from bench_shapes import SHAPES, build
from log_hashes import digest
from realtrace import public_shape

import impactlab as il
from impactlab.inputs.workload import trace_span_days
from impactlab.policies.impactful import Impactful
from impactlab.policies.queues import Room
from impactlab.sim.engine import Engine


@dataclass
class Recording:
    """What one run of impactful did: per pass, whether it ran and its actions; per search,
    (what it returned, ``missed_fresh`` after it)."""

    passes: list[tuple[bool, list[tuple[Callable[..., Any], tuple[Any, ...]]]]] = field(
        default_factory=list
    )
    searches: list[tuple[Room, bool]] = field(default_factory=list)
    #: Searches with the key and state of the last failed search of their key: how many
    #: failed again, and how many succeeded.
    repeats: dict[str, int] = field(default_factory=lambda: {"failed": 0, "made": 0})


@contextlib.contextmanager
def patched(cls: type, name: str, value: Callable[..., Any]) -> Iterator[None]:
    """``cls.name`` replaced for the duration of the block."""
    own = cls.__dict__.get(name)  # (None: inherited)
    setattr(cls, name, value)
    try:
        yield
    finally:
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)


ACTIONS = ("start", "preempt", "wake_at")
ORIGINAL = {name: getattr(Engine, name) for name in (*ACTIONS, "_pass")}
MAKE_ROOM, PLAN = Impactful.make_room, Impactful.plan


def record(run: Callable[[], il.SimResult]) -> tuple[il.SimResult, Recording]:
    """Run impactful once, recording its passes and searches."""
    rec = Recording()
    failed_in: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # key -> state of its last failure

    def make_room(self: Impactful, sched: Any, j: int) -> Room:
        job, hold = sched.jobs[j], self.hold
        key = (
            job.leaf,
            job.held,
            job.n_nodes,
            self.boosts(job),
            hold is not None and hold.constrains(sched, j, False),
            self.drain is not None and self.drain.holder == j,
        )
        state = (
            sched.epoch,
            self.searches.version,
            self.searches.refreshes,
            hold.version if hold is not None else 0,
        )
        room = MAKE_ROOM(self, sched, j)
        rec.searches.append((room, self.searches.missed_fresh))
        if failed_in.get(key) == state:
            rec.repeats["made" if room is Room.MADE else "failed"] += 1
        if room is Room.MADE:
            failed_in.pop(key, None)
        else:
            failed_in[key] = state
        return room

    def plan(self: Impactful, sched: Any) -> None:  # called only by a pass the gate lets run
        rec.passes[-1] = (True, rec.passes[-1][1])
        PLAN(self, sched)

    def recorder(name: str) -> Callable[..., Any]:
        def act(self: Engine, *args: Any) -> Any:
            rec.passes[-1][1].append((ORIGINAL[name], args))
            return ORIGINAL[name](self, *args)

        return act

    def one_pass(self: Engine) -> None:
        rec.passes.append((False, []))
        with contextlib.ExitStack() as stack:
            for name in ACTIONS:
                stack.enter_context(patched(Engine, name, recorder(name)))
            ORIGINAL["_pass"](self)

    with (
        patched(Impactful, "make_room", make_room),
        patched(Impactful, "plan", plan),
        patched(Engine, "_pass", one_pass),
    ):
        return run(), rec


def free_failed_searches(rec: Recording) -> contextlib.AbstractContextManager[None]:
    """Failed searches return their result at once, with the flag they left."""
    outcomes = iter(rec.searches)

    def make_room(self: Impactful, sched: Any, j: int) -> Room:
        room, missed_fresh = next(outcomes)
        if room is Room.MADE:
            return MAKE_ROOM(self, sched, j)
        self.searches.missed_fresh = missed_fresh
        return room

    return patched(Impactful, "make_room", make_room)


def free_pass(rec: Recording) -> contextlib.AbstractContextManager[None]:
    """Each pass that ran refreshes fair shares, plans the drain and applies its actions."""
    passes = iter(rec.passes)
    start = ORIGINAL["start"]

    def one_pass(self: Engine) -> None:
        ran, actions = next(passes)
        self._pass_due = False
        self._in_pass = True
        policy = self.policy
        if ran:
            if self.now >= policy.fair.next_refresh:
                policy.fair.refresh(self.now)
                policy.searches.refreshes += 1
            policy.plan(self)
            if policy.drain is not None:
                policy._plan_drain(self)
        for act, args in actions:
            if act is start:
                policy.queues.remove(args[0])  # (the pass pops a job it starts off its queue)
            act(self, *args)
        self._in_pass = False
        requeued, self._requeued = self._requeued, []
        for j in requeued:
            self._enqueue(j)

    return patched(Engine, "_pass", one_pass)


def traces(
    names: list[str], jobs: int, gpus: int
) -> Iterator[tuple[str, il.SimConfig, pd.DataFrame, il.BudgetTree]]:
    """(name, impactful's config, trace, budget tree) of each asked trace: the public shape
    (``jobs`` on ``gpus``, 14 days as ``bench_realtrace.py`` runs it, or its whole span as
    ``bench_scale.py`` does when ``whole``), one of ``bench_shapes.py``'s shapes, or the
    default scenario."""
    for name in names:
        if name in SHAPES and name not in ("public", "default"):
            label, config, trace, tree = build(name)
            yield label, replace(config, policy="impactful"), trace, tree
        elif name in ("public", "whole"):
            trace, tree = public_shape(jobs, gpus, 0)
            days = trace_span_days(trace) if name == "whole" else 14
            yield (
                f"public shape, {jobs} jobs, {gpus} GPUs, {days:.0f} d",
                il.SimConfig(gpus=gpus, days=days, warmup_days=0.0, policy="impactful"),
                trace,
                tree,
            )
        else:
            config = il.SimConfig(policy="impactful")
            work = il.generate(config.generator())
            yield "default (256 GPUs x 14 d)", config, work.trace, work.tree


def bench(
    name: str, config: il.SimConfig, trace: pd.DataFrame, tree: il.BudgetTree, repeat: int
) -> list[dict]:
    """The rows of one trace: impactful as is, its two bounds, fairshare and fifo."""

    def run(policy: str = "impactful") -> il.SimResult:
        gc.collect()
        return il.simulate(replace(config, policy=policy), trace=trace, budgets=tree)

    result, rec = record(run)
    expected = digest(result.events)
    failed = sum(room is not Room.MADE for room, _ in rec.searches)
    runs: list[tuple[str, Callable[[], contextlib.AbstractContextManager[None]], str]] = [
        ("impactful", contextlib.nullcontext, "impactful"),
        ("impactful, failed searches free", lambda: free_failed_searches(rec), "impactful"),
        ("impactful, pass free", lambda: free_pass(rec), "impactful"),
        ("fairshare", contextlib.nullcontext, "fairshare"),
        ("fifo", contextlib.nullcontext, "fifo"),
    ]
    best: dict[str, float] = {}
    events: dict[str, int] = {}
    for _ in range(repeat):
        for label, context, policy in runs:  # (alternated, so a slow minute hits every run)
            with context():
                result = run(policy)
            if policy == "impactful" and digest(result.events) != expected:
                raise AssertionError(f"{label} on {name}: the replay's event log differs")
            best[label] = min(best.get(label, float("inf")), result.sim_wall_s)
            events[label] = len(result.events)
    fifo = best["fifo"]
    return [
        {
            "trace": name,
            "run": label,
            "events": events[label],
            "wall_s": best[label],
            "x_fifo": best[label] / fifo,
            "passes": len(rec.passes) if policy == "impactful" else None,
            "searches": f"{len(rec.searches)} ({failed} failed)" if policy == "impactful" else "",
            "repeats": (
                f"{rec.repeats['failed']} ({rec.repeats['made']} made)"
                if label == "impactful"
                else ""
            ),
        }
        for label, _, policy in runs
    ]


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    lines = [
        "| trace | run | events | engine (s) | x fifo | passes | searches | failed again unchanged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['run']} | {r['events']} | {r['wall_s']:.2f} | {r['x_fifo']:.2f} | "
            f"{r['passes'] or ''} | {r['searches']} | {r['repeats']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces",
        nargs="*",
        choices=("public", "whole", "default", "backlog-none", "backlog-filled", "burst"),
        default=["public", "default"],
        help="public: the public shape over 14 days; whole: over its whole span; the others: "
        "bench_shapes.py's shapes",
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs of the public shape")
    parser.add_argument("--gpus", type=int, default=512, help="GPUs of the public shape")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each (best is kept)")
    args = parser.parse_args()
    rows = [
        row
        for name, config, trace, tree in traces(args.traces, args.jobs, args.gpus)
        for row in bench(name, config, trace, tree, args.repeat)
    ]
    print(markdown(rows))


if __name__ == "__main__":
    main()
