"""Parameter sweeps: the product of a grid of declared parameters and seeds, run serially, in
local processes or on a Dask cluster, resumable, with statistics across seeds.

``sweep(base, {"policy": ["legacy", "impactful"], "cap_hours": [1, 4, 8]}, seeds=range(6))``
builds every config up front (a typo fails before any run), runs each distinct config once and
returns one tidy row per run: the config columns (``SimConfig.flat()``), bookkeeping
(``run_key``, ``point_key``, ``status``, ``error``, ``wall_s``) and the flat metrics.

Workers receive configs as ``to_dict()`` dicts and rebuild the workload themselves (generator
seed, or trace path checked against the SHA-256 the caller saw); no DataFrame is pickled per
run. A policy knob that a point's policy does not declare is dropped for that point (legacy
has no ``cap_hours``), so a policy x knob grid runs each legacy config once, not once per cap.

With ``out=DIR`` every finished run is written as it completes (``runs/<run_key>.parquet``, one
row, then ``runs/<run_key>.json``, its config and outcome); the same call again skips runs
already finished and retries failed ones. ``run_key`` hashes the config dict and the hashes of
its input files, so an edited trace is a new run.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import itertools
import json
import logging
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from functools import cache
from numbers import Integral
from pathlib import Path
from types import FrameType
from typing import Any, Self

import pandas as pd

from ..analysis.catalog import SCALAR, SWEEP_HEADLINE
from ..analysis.results import SavedFileError, read_parquet_file
from ..base.config import SHARE_PREFIX, HealthConfig, SimConfig, parameters
from ..base.files import OutputPathError, check_output_dir, find_input
from ..base.params import ParamError, declared
from ..base.registry import BUILTIN, policy_class, policy_params, register_policy
from ..base.version import VERSION
from ..inputs.workload import file_hash
from .machine import BACKENDS, Backend, resources

log = logging.getLogger(__name__)

#: Bookkeeping columns of a sweep frame, between the config columns and the metrics.
META = ("run_key", "point_key", "status", "error", "warnings", "warning_codes", "wall_s")
RUNS = "runs"
MANIFEST = "sweep.json"
_METRIC_PREFIXES = ("preemptions.", "wait_", "queued_")
_RUN_FIELDS = (
    frozenset(p.name for p in declared(SimConfig))
    | frozenset(p.name for p in declared(HealthConfig))
    | {"clusters"}  # (a fleet's layout: not a declared knob, set through ``with_params`` too)
)
#: Two-sided 95% t quantiles for 1..30 degrees of freedom (beyond: a Cornish-Fisher expansion).
_T975 = (
    12.7062,
    4.3027,
    3.1824,
    2.7764,
    2.5706,
    2.4469,
    2.3646,
    2.3060,
    2.2622,
    2.2281,
    2.2010,
    2.1788,
    2.1604,
    2.1448,
    2.1314,
    2.1199,
    2.1098,
    2.1009,
    2.0930,
    2.0860,
    2.0796,
    2.0739,
    2.0687,
    2.0639,
    2.0595,
    2.0555,
    2.0518,
    2.0484,
    2.0452,
    2.0423,
)


class SweepError(ValueError):
    """A sweep that cannot start (bad grid, a policy workers cannot load); says which and why."""


@dataclass(frozen=True)
class Run:
    """One distinct run of a sweep: its config, the hashes of its input files, and its keys."""

    config: SimConfig
    inputs: Mapping[
        str, str | None
    ]  # sha256 of the trace and budget files (None: not readable here)
    key: str  # config + inputs: what a finished run is filed under
    point: str  # the same without the seed: runs of one point differ only by seed


# ----- planning: grid -> distinct runs ----------------------------------------------------------
def plan(
    base: SimConfig, grid: Mapping[str, Sequence[Any]], seeds: Iterable[int] = (0,)
) -> list[Run]:
    """Every distinct run of ``grid`` x ``seeds`` from ``base``, in grid order; raises SweepError
    (naming the point) on a bad axis or value before anything runs."""
    axes = _axes(grid)
    seeds = _seeds(seeds)
    policies = [str(p) for p in axes.get("policy", [base.policy])]
    _check_knob_axes(axes, policies)
    hashes: dict[str, str | None] = {}
    runs: dict[str, Run] = {}
    for values in itertools.product(*axes.values(), seeds):
        point = dict(zip([*axes, "seed"], values, strict=True))
        config = _config(base, point)
        run = _run(config, hashes)
        runs.setdefault(run.key, run)
    points = math.prod(len(v) for v in axes.values()) * len(seeds)
    if len(runs) < points:
        log.info(
            "%d grid points, %d distinct runs (knobs a policy does not declare are dropped)",
            points,
            len(runs),
        )
    return list(runs.values())


def _axes(grid: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """The grid's axes as lists; "seed" belongs in ``seeds``."""
    axes = {}
    for name, values in grid.items():
        if name == "seed":
            raise SweepError("give seeds with seeds=..., not as a grid axis")
        values = (
            [values]
            if isinstance(values, str) or not isinstance(values, Iterable)
            else list(values)
        )
        if not values:
            raise SweepError(f"grid axis {name!r} has no values")
        axes[str(name)] = values
    return axes


def parse_seeds(text: str | int) -> list[int]:
    """Seeds written as text: ``0-5`` (inclusive), ``0,3,7`` or both (``0-2,7``). A reversed
    range, an empty part, a negative or repeated seed is refused, never read as fewer seeds."""
    if isinstance(text, Integral):
        return _seeds(int(text))
    example = "seeds are written like 0-5, 0,3,7 or 0-2,7"
    seeds: list[int] = []
    for part in str(text).split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.strip().isdigit() or (dash and not hi.strip().isdigit()):
            raise SweepError(f"{example}; got {str(text)!r} (bad part {part.strip()!r})")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise SweepError(
                f"{example}; got {str(text)!r}: the range {first}-{last} runs backwards "
                f"(did you mean {last}-{first}?)"
            )
        seeds += range(first, last + 1)
    return _seeds(seeds)


def _seeds(seeds: Iterable[int] | int) -> list[int]:
    # (int for the type checker: it is an Integral at run time, but not to typeshed.)
    out = [int(seeds)] if isinstance(seeds, (int, Integral)) else [int(s) for s in seeds]
    if not out:
        raise SweepError("no seeds")
    repeated = sorted({s for s in out if out.count(s) > 1})
    if repeated:
        raise SweepError(f"seed {repeated[0]} is given more than once")
    return out


def _knobs_of(policy: str) -> set[str]:
    return {p.name for p in policy_params(policy)}


def _is_knob(name: str) -> bool:
    return name not in _RUN_FIELDS and name != "policy" and not name.startswith(SHARE_PREFIX)


def _check_knob_axes(axes: Mapping[str, list[Any]], policies: list[str]) -> None:
    """Each policy-knob axis is declared by at least one of the sweep's policies."""
    try:
        declared_by = {p: _knobs_of(p) for p in policies}
    except ParamError as err:
        raise SweepError(f"grid axis 'policy': {err}") from None
    known = {p.name for p in parameters()} | set().union(*declared_by.values())
    for name in filter(_is_knob, axes):
        if name not in known:
            try:
                SimConfig().with_params({name: axes[name][0]})  # raises with a did-you-mean
            except ParamError as err:
                raise SweepError(f"grid axis {name!r}: {err}") from None
        if not any(name in mine for mine in declared_by.values()):
            raise SweepError(
                f"grid axis {name!r} is not a knob of any of the sweep's policies {policies}"
            )


def _config(base: SimConfig, point: Mapping[str, Any]) -> SimConfig:
    """``base`` with one grid point set; knobs the point's policy does not declare are dropped."""
    policy = str(point.get("policy", base.policy))
    try:
        mine = _knobs_of(policy)
        values = {k: v for k, v in point.items() if not _is_knob(k) or k in mine}
        return base.with_params(values)
    except ParamError as err:
        raise SweepError(f"grid point {dict(point)}: {err}") from None


def _run(config: SimConfig, hashes: dict[str, str | None]) -> Run:
    """The run of ``config``, keyed by its dict and its input files' hashes (each file hashed once)."""
    inputs = {
        "trace_sha256": _hash_once(config.trace_path, hashes),
        "budgets_sha256": _hash_once(config.budgets_path, hashes),
    }
    data = config.to_dict()
    key = _digest({"config": data, "inputs": inputs})
    point = _digest({"config": {**data, "seed": None}, "inputs": inputs})
    return Run(config, inputs, key, point)


def _hash_once(path: str | None, hashes: dict[str, str | None]) -> str | None:
    if path is None:
        return None
    if path not in hashes:
        # a Dask cluster may see files the client does not: then only the path is in the key
        hashes[path] = file_hash(find_input(path)) if find_input(path).exists() else None
    return hashes[path]


def _digest(data: Any) -> str:
    """A stable short hash of JSON-ready data (key order does not matter)."""
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----- policies on workers ----------------------------------------------------------------------
def worker_policies(runs: Iterable[Run], backend: Backend) -> dict[str, str | type]:
    """Registrations a worker needs: name -> "module:Class" spec for each registered custom
    policy (Dask also ships classes defined in ``__main__`` by value; spawned processes cannot)."""
    if backend == "serial":
        return {}
    out: dict[str, str | type] = {}
    for name in sorted({r.config.policy for r in runs} - set(BUILTIN)):
        if ":" in name:
            continue  # a spec: workers import it themselves
        cls = policy_class(name)
        if _importable(cls):
            out[name] = f"{cls.__module__}:{cls.__qualname__}"
        elif backend == "dask":
            out[name] = cls  # cloudpickle sends an interactively defined class by value
        else:
            raise SweepError(
                f"policy {name!r} ({cls.__qualname__}) is defined in {cls.__module__!r} (a notebook or "
                "script), which spawned worker processes cannot import; put the class in a module and "
                "register it by its 'module:Class' spec, or use backend='serial' or 'dask'"
            )
    return out


def _importable(cls: type) -> bool:
    """Whether ``cls`` can be imported by its module and qualified name in another process."""
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        return False
    try:
        found: Any = importlib.import_module(cls.__module__)
        for part in cls.__qualname__.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return False
    return found is cls


# ----- one run, on a worker ---------------------------------------------------------------------
def run_one(
    config: Mapping[str, Any], inputs: Mapping[str, str | None], policies: Mapping[str, str | type]
) -> dict[str, Any]:
    """Simulate one config (a ``to_dict()`` dict) where it lands; never raises: a failure comes
    back as a record with the error and a traceback summary."""
    from ..inputs.workload import prepare
    from .simulate import simulate  # workers import the engine; planning does not need it

    began = time.perf_counter()
    try:
        for name, target in policies.items():
            register_policy(name, target)
        sim_config = SimConfig.from_dict(config)
        with _notices() as notices:  # (the sweep says each once, not once per run)
            work = prepare(sim_config)
        _check_trace(work.provenance, inputs.get("trace_sha256"))
        # the run's warnings travel in its record, and the sweep says them once
        result = replace(simulate(sim_config, inputs=work), log_warnings=False)
        record = {
            "status": "ok",
            "metrics": result.metrics(),
            "provenance": result.provenance,
            "warnings": result.warnings,
            "warning_codes": result.warning_codes,
            "notices": notices,
        }
    except Exception as err:
        record = failure(err)
    return {
        **record,
        "wall_s": time.perf_counter() - began,
        "host": os.uname().nodename,
        "pid": os.getpid(),
    }


@contextlib.contextmanager
def _notices() -> Iterator[list[str]]:
    """The warnings the inputs' modules log inside the block (a trace's default contract, jobs
    skipped, its load), kept instead of logged: a worker's record carries them home."""
    logger, kept = logging.getLogger("impactlab.inputs"), []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record.getMessage())

    handler, propagate = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield kept
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _check_trace(provenance: Mapping[str, Any], expected: str | None) -> None:
    found = provenance.get("sha256")
    if expected is not None and found is not None and found != expected:
        raise RuntimeError(
            f"trace {provenance.get('path')} changed since the sweep started "
            f"(sha256 {found[:12]}..., expected {expected[:12]}...)"
        )


def failure(err: BaseException) -> dict[str, Any]:
    """A failed run's record: the error in one line and the last frames of its traceback."""
    frames = traceback.format_exception(type(err), err, err.__traceback__, limit=-4)
    return {
        "status": "error",
        "metrics": {},
        "error": f"{type(err).__name__}: {err}",
        "traceback": "".join(frames)[-4000:],
    }


# ----- backends: each yields (run, record) as runs complete -------------------------------------
Outcomes = Iterator[tuple[Run, dict[str, Any]]]


def _serial(runs: list[Run], policies: Mapping[str, Any], **_: Any) -> Outcomes:
    for run in runs:
        yield run, run_one(run.config.to_dict(), run.inputs, policies)


def _processes(
    runs: list[Run], policies: Mapping[str, Any], workers: int = 1, **_: Any
) -> Outcomes:
    """A local process pool under spawn (the same in notebooks, macOS, Windows and Linux)."""
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with,
        initargs=(os.getpid(),),
    )
    try:
        futures = {pool.submit(run_one, r.config.to_dict(), r.inputs, policies): r for r in runs}
        for future in as_completed(futures):
            yield futures[future], _outcome(future.result)
    finally:  # interrupted or done: drop what has not started, let running runs end
        pool.shutdown(wait=True, cancel_futures=True)


def _exit_with(parent: int, every_s: float = 1.0) -> None:
    """In a pool worker: exit when the sweep's process is gone (killed with SIGKILL, the pool's
    workers would otherwise wait forever for work)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="impactlab-parent-watch").start()


def _dask(
    runs: list[Run],
    policies: Mapping[str, Any],
    workers: int | None = None,
    client: Any = None,
    **_: Any,
) -> Outcomes:
    """The given ``distributed.Client``, or a LocalCluster started and closed here."""
    from distributed import Client, LocalCluster
    from distributed import as_completed as dask_completed

    chatter = logging.getLogger("distributed")
    level, cluster, futures = chatter.level, None, {}
    try:
        if client is None:  # quiet: the cluster's start and stop are not the user's business
            chatter.setLevel(max(level, logging.WARNING))
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.WARNING,
            )
            client = Client(cluster)
        elif workers:
            log.info("workers=%d ignored: the given client's cluster decides", workers)
        for r in runs:
            future = client.submit(
                run_one,
                r.config.to_dict(),
                r.inputs,
                policies,
                key=f"impactlab-run-{r.key}",
                pure=False,
            )
            futures[future] = r
        for future in dask_completed(futures):
            yield futures[future], _outcome(future.result)
    finally:
        if futures:
            client.cancel([f for f in futures if not f.done()])
        if cluster is not None:
            if client is not None:
                client.close()
            cluster.close()
        chatter.setLevel(level)


def pool_workers(tasks: int) -> int:
    """Local workers for ``tasks`` runs, from the CPUs and memory this process may really use
    (``impactlab.runs.machine``), not the host's core count."""
    found = resources()
    chosen = found.workers(tasks)
    log.info(
        "%d local worker%s for %d runs: %s",
        chosen,
        "" if chosen == 1 else "s",
        tasks,
        found.describe(),
    )
    return chosen


def unguarded_script() -> str | None:
    """The path of the ``__main__`` script when this call runs in its top-level code outside an
    ``if __name__ == "__main__":`` block, else None. Spawned workers import ``__main__`` again,
    so such a script would start the sweep again in every worker; notebooks, the REPL and
    ``python -c`` have no script and are fine."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame: FrameType | None = sys._getframe(1)
    top: FrameType | None = None
    while frame is not None:
        if (
            main is not None
            and frame.f_globals is vars(main)
            and frame.f_code.co_name == "<module>"
        ):
            top = frame
        frame = frame.f_back
    if not path or top is None:
        return None
    try:
        body = ast.parse(Path(path).read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError):
        return None
    statement = next(
        (s for s in body if s.lineno <= top.f_lineno <= (s.end_lineno or s.lineno)), None
    )
    return None if statement is None or _is_main_guard(statement) else str(path)


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either side of the comparison)."""
    if (
        not isinstance(node, ast.If)
        or not isinstance(node.test, ast.Compare)
        or len(node.test.comparators) != 1
    ):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    texts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return isinstance(node.test.ops[0], ast.Eq) and names == ["__name__"] and texts == ["__main__"]


def _outcome(result: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A future's record; a worker that died (killed, out of memory) is a failed run too."""
    try:
        return result()
    except Exception as err:
        return failure(err)


_BACKENDS: dict[str, Callable[..., Outcomes]] = {
    "serial": _serial,
    "processes": _processes,
    "dask": _dask,
}


# ----- the sweep --------------------------------------------------------------------------------
def sweep(
    base: SimConfig,
    grid: Mapping[str, Sequence[Any]],
    seeds: Iterable[int] = (0,),
    backend: Backend = "processes",
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    out: str | Path | None = None,
) -> pd.DataFrame:
    """Run ``base`` over the product of ``grid``'s axes (declared parameter names, "policy",
    "trace_path", "share.<node>") and ``seeds``; one tidy row per distinct run, in grid order.

    ``backend``: "processes" (a local spawn pool of ``workers``, default one per core),
    "dask" (``client``, or a LocalCluster of ``workers`` started and closed here) or "serial".
    ``out``: a directory where each run is written as it completes; calling again resumes.
    ``progress``: a tqdm.auto bar (a widget in Jupyter) as runs complete.
    """
    if backend not in _BACKENDS:
        raise SweepError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if out is not None:
        _check_out(out)
    runs = plan(base, grid, seeds)
    backend = _spawnable(backend, client)
    policies = worker_policies(runs, backend)
    store = Store(out) if out is not None else None
    rows = store.finished(runs) if store else {}
    todo = [r for r in runs if r.key not in rows]
    if store:
        store.write_manifest(base, grid, seeds, backend, runs)
        log.info("%s: %d runs finished before, %d to run", store.path, len(rows), len(todo))
    local_pool = backend == "processes" or (backend == "dask" and client is None)
    workers = (workers or pool_workers(len(todo))) if local_pool and todo else workers
    outcomes = (
        _BACKENDS[backend](todo, policies, workers=workers, client=client) if todo else iter(())
    )
    where = (
        f"{backend}, {workers} worker{'' if workers == 1 else 's'}"
        if local_pool and todo
        else backend
    )
    said: set[str] = set()  # the notices about inputs logged so far (each once per sweep)
    with _bar(progress, len(runs), len(rows), where) as bar:
        for run, record in outcomes:
            rows[run.key] = row_of(run, record)
            if store:
                store.write(run, record, rows[run.key])
            _report(run, record, bar, said)
    frame = frame_of([rows[r.key] for r in runs])
    _say_warnings(frame)
    return frame


def _say_warnings(frame: pd.DataFrame) -> None:
    """One line for the runs that warned (thrashing, a backlog, ...), of the runs that finished,
    with how many runs said each: each run's sentences are in its ``warnings`` column."""
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    said = ok["warnings"].fillna("").astype(str) if "warnings" in ok else pd.Series(dtype=str)
    warned = int((said != "").sum())
    if not warned:
        return
    codes = ok.get("warning_codes", pd.Series(dtype=str)).fillna("").astype(str)
    counts = pd.Series([c for text in codes for c in set(text.split(",")) if c]).value_counts()
    which = ", ".join(f"{code} {n}" for code, n in counts.items())
    log.warning(
        "%d of %d finished runs warned%s: see the sweep's 'warnings' column (or the report of "
        "its folder)",
        warned,
        len(ok),
        f" ({which})" if which else "",
    )


def _check_out(out: str | Path) -> Path:
    try:
        return check_output_dir(out)
    except OutputPathError as err:
        raise SweepError(f"out={err}") from None


def is_sweep_folder(path: str | Path) -> bool:
    """Whether ``path`` holds a sweep (its ``sweep.json`` or filed runs)."""
    path = Path(path)
    return (path / MANIFEST).is_file() or any((path / RUNS).glob("*.parquet"))


def _spawnable(backend: Backend, client: Any) -> Backend:
    """``backend``, or "serial" (with a warning) where spawned workers would re-run the calling
    script (see ``unguarded_script``)."""
    if backend == "serial" or (backend == "dask" and client is not None):
        return backend
    script = unguarded_script()
    if script is None:
        return backend
    warnings.warn(
        f'impactlab.runs.sweep: {script} calls sweep outside `if __name__ == "__main__":`, so {backend} '
        "workers would re-run the script; running serially instead (put the call under that guard to "
        "use worker processes)",
        RuntimeWarning,
        stacklevel=3,
    )
    return "serial"


class _bar:
    """A tqdm.auto bar over runs (nothing when ``progress`` is false)."""

    def __init__(self, progress: bool, total: int, done: int, backend: str) -> None:
        self.progress, self.total, self.done, self.backend = progress, total, done, backend
        self.bar: Any = None
        self.shown: Any = None  # in Jupyter: the display of the widget bar, replaced when it closes
        self.failed = 0

    def __enter__(self) -> Self:
        if self.progress:
            from tqdm.auto import tqdm
            from tqdm.notebook import tqdm_notebook

            widget = issubclass(tqdm, tqdm_notebook)
            shown_later: dict[str, Any] = {"display": False} if widget else {}
            self.bar = tqdm(
                total=self.total,
                initial=self.done,
                unit="run",
                desc=f"sweep ({self.backend})",
                **shown_later,
            )
            if widget:  # displayed here, with an id, so that the stored output ends at 100%, not 0%
                from IPython.display import display

                self.shown = display(self.bar.container, display_id=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.shown is not None:
            # A finished bar moves no more: its last line, as text, replaces the widget, so the
            # stored output reads the same everywhere (a widget's needs a live kernel to draw).
            self.shown.update({"text/plain": repr(self.bar.container)}, raw=True)

    def step(self, failed: bool) -> None:
        """One more run completed."""
        self.failed += failed
        if self.bar is not None:
            self.bar.update(1)
            if self.failed:
                self.bar.set_postfix(failed=self.failed)


def _report(run: Run, record: Mapping[str, Any], bar: _bar, said: set[str]) -> None:
    for notice in record.get("notices", ()):  # (every run of one trace says the same)
        if notice not in said:
            said.add(notice)
            log.warning("%s", notice)
    failed = record["status"] != "ok"
    if failed:
        log.warning("run %s (%s) failed: %s", run.key, describe(run.config), record["error"])
    else:
        log.debug("run %s done in %.2f s", run.key, record["wall_s"])
    bar.step(failed)


def describe(config: SimConfig) -> str:
    """A config in a few words: policy, seed and what differs from the defaults."""
    defaults = SimConfig(policy=config.policy).flat()
    changed = {
        k: v for k, v in config.flat().items() if defaults.get(k, object()) != v and k != "seed"
    }
    words = [config.policy, f"seed={config.seed}", *(f"{k}={_show(v)}" for k, v in changed.items())]
    return " ".join(words)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# ----- rows and frames --------------------------------------------------------------------------
def row_of(run: Run, record: Mapping[str, Any]) -> dict[str, Any]:
    """One tidy row: the config columns, bookkeeping, then the flat metrics (none if it failed)."""
    meta = {
        "run_key": run.key,
        "point_key": run.point,
        "status": record["status"],
        "error": record.get("error", ""),
        "warnings": " | ".join(record.get("warnings", [])),
        "warning_codes": ",".join(record.get("warning_codes", [])),
        "wall_s": float(record.get("wall_s", math.nan)),
    }
    return {**run.config.flat(), **meta, **record.get("metrics", {})}


def frame_of(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows as a frame: config columns first (in order of appearance), bookkeeping, metrics."""
    frame = pd.DataFrame(list(rows))
    if frame.empty:
        return frame
    metrics = metric_columns(frame)
    config = [c for c in frame.columns if c not in META and c not in metrics]
    return frame[[*config, *[m for m in META if m in frame], *metrics]]


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """The flat-metric columns of a sweep or metrics frame (``SimResult.metrics()`` keys)."""
    return [c for c in frame.columns if c in SCALAR or str(c).startswith(_METRIC_PREFIXES)]


def config_columns(frame: pd.DataFrame) -> list[str]:
    """The config columns of a sweep frame (everything before the bookkeeping)."""
    metrics = set(metric_columns(frame))
    return [
        c
        for c in frame.columns
        if c not in META and c not in metrics and c not in ("run", "sim_wall_s")
    ]


# ----- statistics across seeds ------------------------------------------------------------------
def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (95% two-sided)."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = statistics.NormalDist().inv_cdf(0.975)  # Cornish-Fisher: within 1e-4 from df 30 on
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def summarise_sweep(frame: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and 95% confidence interval (t) of each metric per config across its seeds, in long
    form: ``label`` (the swept values), the config columns but the seed, ``metric``, ``n`` (seeds
    with a value), ``mean``, ``std``, ``ci_low``, ``ci_high``, ``runs`` (the config's finished
    runs) and ``warned``: how many of them warned (thrashing, a backlog, ...). Failed runs are
    left out."""
    missing = sorted({"point_key", "status"} - set(frame.columns))
    if missing:
        raise ValueError(f"not a sweep frame: no column(s) {missing} (use impactlab.sweep)")
    ok = frame[frame["status"] == "ok"]
    metrics = list(metrics) if metrics is not None else metric_columns(frame)
    unknown = sorted(set(metrics) - set(frame.columns))
    if unknown:
        raise ValueError(f"no metric column(s) {unknown}")
    configs = ok.drop_duplicates("point_key").set_index("point_key")
    keys = [c for c in config_columns(frame) if c != "seed"]
    stats = _moments(ok, metrics)
    stats = stats.join(configs[keys], on="point_key")
    every = frame.drop_duplicates("point_key").set_index("point_key")  # (an axis whose other
    stats.insert(0, "label", stats["point_key"].map(labels(every, keys)))  # values failed: named)
    stats["runs"] = stats["point_key"].map(ok.groupby("point_key", sort=False).size())
    stats["warned"] = stats["point_key"].map(warned_runs(ok)).astype(int)
    columns = ["point_key", "metric", "n", "mean", "std", "ci_low", "ci_high", "runs", "warned"]
    return stats[["label", *keys, *columns]]


def warned_runs(frame: pd.DataFrame) -> pd.Series:
    """Per config (``point_key``, in order of appearance): how many of its runs warned."""
    said = frame["warnings"].fillna("").astype(str) != "" if "warnings" in frame else False
    return pd.Series(said, index=frame.index).groupby(frame["point_key"], sort=False).sum()


def headline_table(stats: pd.DataFrame, metrics: Sequence[str] = SWEEP_HEADLINE) -> pd.DataFrame:
    """Per config (row) and metric (column) of a ``summarise_sweep`` table: "mean ± CI half-width",
    with the config's label, its seeds and how many of its runs warned ("2 of 3")."""
    stats = stats[stats["metric"].isin(metrics)]
    cells = stats.assign(
        cell=[
            _mean_ci(m, lo, hi)
            for m, lo, hi in zip(stats["mean"], stats["ci_low"], stats["ci_high"], strict=True)
        ]
    )
    wide = cells.pivot_table(
        index="point_key", columns="metric", values="cell", aggfunc="first", sort=False
    )
    first = stats.drop_duplicates("point_key").set_index("point_key")
    wide.insert(0, "seeds", first["n"].astype(int))
    wide.insert(0, "config", first["label"])
    head = ["config", "seeds"]
    if {"warned", "runs"} <= set(first.columns):
        wide["warned"] = first["warned"].astype(str) + " of " + first["runs"].astype(str)
        head.append("warned")
    wide.columns.name = None
    return wide[[*head, *[m for m in metrics if m in wide]]].reset_index(drop=True)


def _mean_ci(mean: float, lo: float, hi: float) -> str:
    """ "0.912 ± 0.013" (3 decimals below 10, none above); the mean alone without an interval."""
    if not math.isfinite(mean):
        return "-"
    digits = 3 if abs(mean) < 10 else 0
    if not math.isfinite(hi - lo):
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} ± {(hi - lo) / 2:,.{digits}f}"


def _moments(ok: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Per point and metric: n, mean, std and the t interval, points in order of appearance."""
    long = ok.melt(id_vars=["point_key"], value_vars=metrics, var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    stats = long.groupby(["point_key", "metric"], sort=False)["value"].agg(["count", "mean", "std"])
    stats = stats.reset_index().rename(columns={"count": "n"})
    half = stats["n"].map(lambda n: t975(n - 1)) * stats["std"] / stats["n"].pow(0.5)
    return stats.assign(ci_low=stats["mean"] - half, ci_high=stats["mean"] + half)


def labels(configs: pd.DataFrame, keys: Sequence[str]) -> dict[str, str]:
    """Per point: the values of the columns that vary across points ("policy=impactful cap_hours=4")."""
    varied = [k for k in keys if configs[k].astype(str).nunique() > 1]
    out = {}
    for point, row in configs.iterrows():
        parts = [f"{k}={_show(row[k])}" for k in varied if not _missing(row[k])]
        out[point] = " ".join(parts) or "base"
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ----- the output directory ---------------------------------------------------------------------
class Store:
    """A sweep's directory: ``runs/<key>.parquet`` (one row) and ``runs/<key>.json`` (config and
    outcome, written last: a run is finished when its JSON says so) and ``sweep.json``."""

    def __init__(self, path: str | Path) -> None:
        self.path = _check_out(path)
        (self.path / RUNS).mkdir(parents=True, exist_ok=True)

    def finished(self, runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
        """Rows of the runs already finished (failed runs are retried)."""
        out = {}
        for run in runs:
            record = _read_json(self.path / RUNS / f"{run.key}.json")
            table = self.path / RUNS / f"{run.key}.parquet"
            if record.get("status") == "ok" and table.exists():
                try:
                    out[run.key] = read_parquet_file(table).iloc[0].to_dict()
                except (SavedFileError, IndexError) as err:  # (truncated, or empty)
                    log.warning("%s; running it again", err)
        return out

    def write(self, run: Run, record: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        """File one completed run: its row, then its config and outcome."""
        base = self.path / RUNS / run.key
        _atomic(
            base.with_suffix(".parquet"),
            lambda tmp: pd.DataFrame([row]).to_parquet(tmp, index=False),
        )
        saved = {
            "run_key": run.key,
            "point_key": run.point,
            "config": run.config.to_dict(),
            "inputs": dict(run.inputs),
            **{k: v for k, v in record.items() if k != "metrics"},
            "impactlab": code_version(),
        }
        _atomic(
            base.with_suffix(".json"),
            lambda tmp: tmp.write_text(json.dumps(saved, indent=2, default=str)),
        )

    def write_manifest(
        self,
        base: SimConfig,
        grid: Mapping[str, Sequence[Any]],
        seeds: Iterable[int],
        backend: str,
        runs: list[Run],
    ) -> None:
        """What the last call asked for: base config, grid, seeds and its run keys, in order."""
        manifest = {
            "base": base.to_dict(),
            "grid": {k: list(v) if not isinstance(v, str) else [v] for k, v in grid.items()},
            "seeds": _seeds(seeds),
            "backend": backend,
            "runs": [r.key for r in runs],
            "impactlab": code_version(),
        }
        _atomic(
            self.path / MANIFEST,
            lambda tmp: tmp.write_text(json.dumps(manifest, indent=2, default=str)),
        )


def _atomic(path: Path, write: Callable[[Path], Any]) -> None:
    """Write through a temporary file: a killed sweep never leaves half a file under ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:  # (interrupted or failed: no half-written file left behind)
        tmp.unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def load_sweep(path: str | Path) -> pd.DataFrame:
    """Every run filed in a sweep directory, as ``sweep`` returned them (the last call's runs in
    its order, then any others)."""
    path = Path(path)
    tables = {p.stem: p for p in sorted((path / RUNS).glob("*.parquet"))}
    if not tables:
        raise FileNotFoundError(
            f"{path}: no runs (expected {RUNS}/<key>.parquet files from impactlab.sweep)"
        )
    order = [k for k in _read_json(path / MANIFEST).get("runs", []) if k in tables]
    order += [k for k in tables if k not in set(order)]
    return frame_of([read_parquet_file(tables[k]).iloc[0].to_dict() for k in order])


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The ``sweep.json`` of a sweep directory ({} if there is none)."""
    return _read_json(Path(path) / MANIFEST)


@cache
def code_version() -> dict[str, str | None]:
    """impactlab's version and, when it runs from a git checkout, the commit (``+dirty`` if edited)."""

    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"version": VERSION, "commit": None}
    return {"version": VERSION, "commit": commit + ("+dirty" if dirty else "")}
