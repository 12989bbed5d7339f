"""A finished run (``SimResult``): its inputs, the event log, and everything derived from them.

Headline numbers come from ``summary()`` (nested) or ``metrics()`` (flat, for sweeps and
``metrics_frame``); long-form tables for charts from the table methods (``impactlab.analysis.tables``).
``save``/``load`` round-trip a run through a directory of Parquet and JSON files.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..base.config import ORGANISATION, SimConfig
from ..base.files import check_output_dir
from ..base.registry import policy_class
from ..base.units import DAY_S, HOUR_S
from ..inputs.budgets import BudgetTree
from ..inputs.fleet import CLUSTER
from ..sim.events import EVENT_DTYPES, Job, jobs_from_trace
from . import tables
from .catalog import SCALAR
from .explain import Story, explain, protection_ends
from .findings import Protection, findings
from .fleet import cluster_events
from .metrics import (
    SIZE_BUCKETS,
    EventKinds,
    Window,
    attempts,
    down_intervals,
    health_series,
    maintenance_table,
    out_of_service,
    run_job_codes,
    summarise,
)

log = logging.getLogger(__name__)

QUANTILE_NAMES = ("p50", "p90", "p99")


class SavedFileError(ValueError):
    """A file of a saved run or sweep that cannot be read; the message names it."""


def read_parquet_file(path: Path) -> pd.DataFrame:
    """A saved Parquet table, or a SavedFileError naming the file (missing, empty, truncated or
    not Parquet at all)."""
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # (pyarrow's ArrowInvalid is a ValueError)
        raise SavedFileError(f"{path}: cannot be read as a saved table ({err})") from None


def read_json_file(path: Path) -> Any:
    """A saved JSON file, or a SavedFileError naming the file."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SavedFileError(f"{path}: cannot be read as saved JSON ({err})") from None


@dataclass(frozen=True)
class SimResult:
    """A finished run: its config and inputs, the event log and everything derived from it."""

    config: SimConfig
    trace: pd.DataFrame
    tree: BudgetTree
    events: pd.DataFrame
    sim_wall_s: float
    #: Projects named in the trace but not in the budget tree (job counts); their jobs ran unallocated.
    unknown_projects: dict[str, int] = field(default_factory=dict)
    #: Where the trace came from: path/format/sha256/rows kept and skipped, or {"source": "synthetic", ...}.
    provenance: dict = field(default_factory=dict)
    label: str = ""  # display name of the run; "" -> the policy
    #: Log the run's warnings when its metrics are first derived (a sweep collects them instead).
    log_warnings: bool = True
    #: One cluster of a fleet's run (``per_cluster``), measured on its own.
    in_fleet: bool = False

    @property
    def run(self) -> str:
        """The run's display name: its label, else its policy."""
        return self.label or self.config.policy

    @property
    def repair(self) -> str | None:
        """How failed nodes were repaired: the config's mode, else the policy's own; None when
        nodes never fail."""
        if self.config.health.mtbf_hours is None:
            return None
        return self.config.health.repair or policy_class(self.config.policy).repair

    @property
    def window(self) -> Window:
        """The reporting window (after the warm-up)."""
        return Window(self.config.warmup_s, self.config.horizon_s, self.config.gpus)

    @cached_property
    def _derived(self) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
        derived = summarise(
            self.events,
            self.trace,
            self.tree,
            self.window,
            self.config.gpus_per_node,
            self.config.horizon_s,
            att=self._attempts,
            down=self._down,
            kinds=self._event_kinds,
            job=self._job_codes,
        )
        head = derived[0]
        knobs = self.config.knobs()
        fleet = bool(self.config.clusters) or self.in_fleet
        synthetic = self.provenance.get("source") == "synthetic"
        no_patience = not synthetic and bool(
            np.isinf(self.trace["patience_s"].to_numpy(float)).any()
        )
        protection = self._protection(knobs, synthetic)
        found = findings(head, self.run, knobs, fleet, no_patience, protection)
        warnings, codes = [f.message for f in found], [f.code for f in found]
        # A fleet's totals can hide one cluster's backlog or thrashing: each cluster's say too
        # (each names its cluster: "<run> on <cluster>: ...").
        for part in self.per_cluster.values() if len(self.per_cluster) > 1 else ():
            warnings += part.warnings
            codes += part.warning_codes
        head["warnings"], head["warning_codes"] = warnings, codes
        for message in warnings if self.log_warnings else ():
            log.warning("%s", message)
        return derived

    @cached_property
    def per_cluster(self) -> dict[str, SimResult]:
        """A fleet's clusters, each as a run of its own (its jobs, its log, its GPUs), by name;
        empty for a one-cluster run. The organisation's numbers are this result's own."""
        return {
            spec.name: SimResult(
                self.config.cluster_config(k),
                self.trace[self.trace[CLUSTER] == spec.name].reset_index(drop=True),
                self.tree,
                cluster_events(self.events, self.config, k),
                self.sim_wall_s,
                provenance=self.provenance,
                label=f"{self.run} on {spec.name}",
                log_warnings=False,
                in_fleet=True,
            )
            for k, spec in enumerate(self.config.clusters)
        }

    def by_cluster(self) -> pd.DataFrame:
        """A fleet's headline metrics per cluster and for the organisation (last row), one row
        each: ``cluster``, ``gpus`` and every scalar metric of the catalog (``metrics()``).
        The organisation's are ratios of sums over the fleet, not means of the rows above."""
        if not self.config.clusters:
            raise ValueError("by_cluster: this run has one cluster (config.clusters is empty)")
        rows = [
            {"cluster": name, "gpus": part.config.gpus, **part.metrics()}
            for name, part in self.per_cluster.items()
        ]
        rows.append({"cluster": ORGANISATION, "gpus": self.config.gpus, **self.metrics()})
        return self._tagged(pd.DataFrame(rows))

    def cluster_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """A fleet's clusters over time, per time bucket and cluster, then the organisation (the
        fleet as one: held over healthy GPU-time of every cluster, queues summed): cluster, t_h,
        gpus, healthy_gpus, running_gpus, occupancy, queued_jobs, queued_gpus
        (``tables.cluster_series``, from each cluster's ``pyramid_series`` and ``queue_series``);
        ``bucket_s`` overrides the adaptive bucket."""
        if not self.config.clusters:
            raise ValueError("cluster_series: this run has one cluster (config.clusters is empty)")
        bucket = bucket_s or tables.bucket_size(self.config.horizon_s)
        parts = {**self.per_cluster, ORGANISATION: self}
        frames = {
            name: tables.cluster_series(
                part.pyramid_series(bucket), part.queue_series(bucket), part.config.gpus
            )
            for name, part in parts.items()
        }
        return self._tagged(tables.stack_clusters(frames))

    def _protection(self, knobs: Mapping[str, Any], synthetic: bool) -> Protection:
        """What could protect this run's jobs longer: a cap some job's minimum runtime exceeds,
        a replayed trace's own minimum runtimes (not when they were filled with each job's
        length), or ``contract_default=job-length`` for a trace that declares none."""
        said = str(self.provenance.get("contract", ""))  # (set when the trace declares none)
        cap = knobs.get("cap_hours")
        runtimes = self.trace["min_runtime_s"].to_numpy(float)
        return Protection(
            cap_binds=cap is not None and bool((runtimes > float(cap) * HOUR_S).any()),
            trace_runtimes=not synthetic and not said,
            contract=(
                "job-length"
                if said.startswith("none declared") and self.config.contract_default != "job-length"
                else None
            ),
            synthetic=synthetic,
        )

    @cached_property
    def _attempts(self) -> pd.DataFrame:
        return attempts(self.events, self.config.horizon_s, self._job_codes, self._event_kinds)

    @cached_property
    def _down(self) -> pd.DataFrame:
        return down_intervals(self.events, self.config.horizon_s, self._event_kinds)

    @cached_property
    def _closed(self) -> pd.DataFrame:
        """When a node had no GPUs to give a new job: failed, or announced for maintenance
        until it is back (``out_of_service``)."""
        return out_of_service(
            self.events, self.config.horizon_s, self._event_kinds, self._down, closed=True
        )

    @cached_property
    def _event_kinds(self) -> EventKinds:
        """The log's events as integer codes, shared by the metrics."""
        return EventKinds.of(self.events)

    @cached_property
    def _job_codes(self) -> np.ndarray:
        """The log's jobs as rows of the per-job table, shared by the metrics."""
        return run_job_codes(self.events, self.trace, self.config.horizon_s)

    @property
    def jobs(self) -> pd.DataFrame:
        """Per-job table derived from the event log."""
        return self._derived[1]

    @property
    def budgets(self) -> pd.DataFrame:
        """Per budget node: entitled, owed and delivered GPU-seconds in the window, and impact."""
        return self._derived[2]

    def summary(self) -> dict:
        """Headline metrics (fractions in [0, 1], waits in seconds) with the run's identity."""
        head = {
            "policy": self.config.policy,
            "gpus": self.config.gpus,
            "days": self.config.days,
            "report_from_days": self.window.t0 / DAY_S,
            "sim_wall_s": self.sim_wall_s,
            # human repairs follow from these inputs: shown wherever they are reported
            "repair": self.repair,
            "human_fraction": self.config.health.human_fraction,
        }
        return {**head, **self._derived[0]}

    @property
    def warnings(self) -> list[str]:
        """What the headline numbers may hide (thrashing, a backlog, jobs that gave up, impact
        counting work thrown away), a sentence each; also logged once and in
        ``summary()["warnings"]`` (``impactlab.analysis.findings`` holds the thresholds)."""
        return list(self._derived[0]["warnings"])

    @property
    def warning_codes(self) -> list[str]:
        """The code of each of ``warnings``, in order ("thrashing", "backlog", "gave_up",
        "impact_gap"; a fleet's clusters' after the organisation's): what a script tests
        (also ``summary()["warning_codes"]``)."""
        return list(self._derived[0]["warning_codes"])

    def metrics(self) -> dict[str, float | int]:
        """Headline metrics as one flat dict of numbers (no wall time): see ``flat_metrics``."""
        return flat_metrics(self._derived[0], tables._kinds(self.trace))

    # ----- long-form tables ------------------------------------------------------------------------
    def _tagged(self, table: pd.DataFrame) -> pd.DataFrame:
        """The table with the run's ``run`` and ``policy`` as its first columns."""
        return table.assign(run=self.run, policy=self.config.policy)[
            ["run", "policy", *table.columns]
        ]

    def _edges(self, bucket_s: float | None = None) -> Any:
        """Time-series bucket edges: ``bucket_s`` or the adaptive nice size."""
        horizon = self.config.horizon_s
        return tables.bucket_edges(horizon, bucket_s or tables.bucket_size(horizon))

    def health_series(self, bucket_s: float = 3600.0) -> pd.DataFrame:
        """Per time bucket: mean healthy GPUs, failures and repairs by kind."""
        return health_series(
            self.events,
            self.config.gpus,
            self.config.gpus_per_node,
            self.config.horizon_s,
            bucket_s,
        )

    def wait_quantiles(self) -> pd.DataFrame:
        """First-start wait p50/p90/p99 by kind and by size bucket (``tables.wait_quantiles``)."""
        return self._tagged(tables.wait_quantiles(self.jobs, self.window))

    def wait_cdf(self, points: int = 60) -> pd.DataFrame:
        """Empirical CDF of first-start waits per kind and "all" (``tables.wait_cdf``)."""
        return self._tagged(tables.wait_cdf(self.jobs, self.window, points))

    def wait_by_size(self, work: str = "all") -> pd.DataFrame:
        """First-start waits and queued GPU-hours per exact gang size, of all, funded or
        unallocated jobs (``tables.wait_by_size``)."""
        return self._tagged(
            tables.wait_by_size(self.jobs, self.window, self.config.gpus_per_node, work)
        )

    def gang_idle(self, min_gpus: int | None = None) -> pd.DataFrame:
        """GPU-hours idle and lent to unallocated work while funded gangs waited, per gang-size
        bucket, in the window (``tables.gang_idle``; gangs: multi-node, or ``min_gpus`` and up)."""
        c = self.config
        return self._tagged(
            tables.gang_idle(
                self.events,
                self._attempts,
                self.jobs,
                self._closed,
                c.nodes,
                c.gpus_per_node,
                self.window,
                min_gpus,
            )
        )

    def owed_split(self) -> pd.DataFrame:
        """Why impact is below 1: the GPUs short projects were owed, in the window, by what held
        them at the time (over-served projects under contract or not, unallocated work, nothing;
        ``tables.owed_split``). Reads the contract from the run's policy, which must be registered."""
        c = self.config
        ends = protection_ends(self, self._records)
        return self._tagged(
            tables.owed_split(
                self.events,
                self._attempts,
                self.jobs,
                self._down,
                self.tree,
                self.window,
                c.gpus_per_node,
                ends,
            )
        )

    def gang_wait_series(
        self, bucket_s: float | None = None, min_gpus: int | None = None
    ) -> pd.DataFrame:
        """Funded gangs waiting and the GPU-hours idle or lent meanwhile, per time bucket
        (``tables.gang_wait_series``)."""
        c = self.config
        return self._tagged(
            tables.gang_wait_series(
                self.events,
                self._attempts,
                self.jobs,
                self._closed,
                c.nodes,
                c.gpus_per_node,
                self._edges(bucket_s),
                min_gpus,
            )
        )

    def free_block_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """Free (or lent) GPUs and the largest block one job could get, per time bucket
        (``tables.free_block_series``)."""
        c = self.config
        return self._tagged(
            tables.free_block_series(
                self._attempts,
                self.jobs,
                self._closed,
                c.nodes,
                c.gpus_per_node,
                self._edges(bucket_s),
            )
        )

    def preemption_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """Preemptions and lost GPU-hours per time bucket and kind (``tables.preemption_series``)."""
        return self._tagged(
            tables.preemption_series(self._attempts, self.trace, self._edges(bucket_s))
        )

    def by_kind(self) -> pd.DataFrame:
        """Per kind of job: outcomes, preemptions, kills, GPU-hours and waits (``metrics.by_kind``)."""
        frame = pd.DataFrame.from_dict(self._derived[0]["by_kind"], orient="index")
        return self._tagged(frame.rename_axis("kind").reset_index())

    def preemptions_by_kind(self) -> pd.DataFrame:
        """Preemptions in the reporting window per kind (``tables.preemptions_by_kind``)."""
        return self._tagged(tables.preemptions_by_kind(self._attempts, self.trace, self.window))

    def share_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """Delivered, entitled and owed shares of healthy capacity per time bucket, for projects and
        programs (``tables.share_series``); ``bucket_s`` overrides the adaptive bucket."""
        c = self.config
        edges = (
            tables.bucket_edges(c.horizon_s, bucket_s)
            if bucket_s
            else tables.share_edges(self.tree, c.horizon_s)
        )
        return self._tagged(
            tables.share_series(
                self.events,
                self._attempts,
                self.jobs,
                self._down,
                self.tree,
                c.gpus,
                c.gpus_per_node,
                c.horizon_s,
                edges,
            )
        )

    def pyramid_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """Availability, occupancy (all, funded, unallocated) and utilization per time bucket."""
        c = self.config
        return self._tagged(
            tables.pyramid_series(
                self.events,
                self._attempts,
                self.jobs,
                self._down,
                c.gpus,
                c.gpus_per_node,
                self._edges(bucket_s),
            )
        )

    def maintenance(self) -> pd.DataFrame:
        """Per node and maintenance window: announced, vacated, down and up times, hours to
        free it, jobs evicted and their lost work, idle closed GPU-hours
        (``metrics.maintenance_table``; empty without a plan)."""
        c = self.config
        return self._tagged(
            maintenance_table(
                self.events,
                c.gpus_per_node,
                c.horizon_s,
                self._event_kinds,
                self._attempts,
                self._down,
            )
        )

    def queue_series(self, bucket_s: float | None = None) -> pd.DataFrame:
        """Time-averaged queued jobs and GPUs per time bucket and kind (``tables.queue_series``)."""
        return self._tagged(tables.queue_series(self.events, self.trace, self._edges(bucket_s)))

    def gantt(
        self, t0_h: float | None = None, t1_h: float | None = None, max_rows: int = 3000
    ) -> pd.DataFrame:
        """Attempts per node between ``t0_h`` (default: the window's start) and ``t1_h`` (default:
        the horizon), lowest nodes first, at most ``max_rows`` rows (``tables.gantt``)."""
        t0 = self.window.t0 if t0_h is None else t0_h * HOUR_S
        t1 = self.config.horizon_s if t1_h is None else t1_h * HOUR_S
        return self._tagged(tables.gantt(self._attempts, self.jobs, t0, t1, max_rows))

    def explain(self, job_id: str) -> Story:
        """The story of one job in words, from the event log: waits and why, starts, preemptions
        (by whom and why), requeues, the end (``impactlab.analysis.explain``); ``.text()`` renders it."""
        for name, part in self.per_cluster.items():  # a fleet's job: told on its own cluster
            if (part.trace["job_id"] == job_id).any():
                return dataclasses.replace(part.explain(job_id), cluster=name)
        return explain(self, job_id, self._records)

    @cached_property
    def _records(self) -> list[Job]:
        """The run's job records (as the engine saw them), for stories."""
        return jobs_from_trace(self.trace, self.tree, self.config.gpus_per_node)

    # ----- files -----------------------------------------------------------------------------------
    def save(self, out: str | Path) -> Path:
        """Write events, trace, jobs and budgets (Parquet), summary and config (JSON) into ``out``;
        ``SimResult.load(out)`` reads the run back. ``out`` is created, its parent must exist
        (``OutputPathError`` otherwise, before anything is written)."""
        out = check_output_dir(out)
        out.mkdir(exist_ok=True)
        self.events.to_parquet(out / "events.parquet", index=False)
        self.trace.to_parquet(out / "trace.parquet", index=False)
        self.jobs.to_parquet(out / "jobs.parquet", index=False)
        self.budgets.to_parquet(out / "budgets.parquet", index=False)
        summary = json.dumps(finite(self.summary()), indent=2, default=_plain, allow_nan=False)
        (out / "summary.json").write_text(summary)  # (strict JSON: NaN is null)
        config = {
            "config": self.config.to_dict(),
            "budgets": self.tree.to_dict(),
            "label": self.label,
            "provenance": self.provenance,
            "unknown_projects": self.unknown_projects,
            "sim_wall_s": self.sim_wall_s,
            # Parquet reads text back as strings, not objects: keep the trace's own dtypes
            "trace_dtypes": {col: str(dtype) for col, dtype in self.trace.dtypes.items()},
        }
        (out / "config.json").write_text(json.dumps(config, indent=2, default=_plain))
        return out

    @classmethod
    def load(cls, path: str | Path) -> SimResult:
        """Read a run written by ``save``: its config, budget tree, trace and event log."""
        path = Path(path)
        saved = read_json_file(path / "config.json")
        events = read_parquet_file(path / "events.parquet").astype(EVENT_DTYPES)
        trace = read_parquet_file(path / "trace.parquet").astype(saved.get("trace_dtypes", {}))
        return cls(
            config=SimConfig.from_dict(saved["config"]),
            trace=trace,
            tree=BudgetTree.from_dict(saved["budgets"]),
            events=events,
            sim_wall_s=float(saved.get("sim_wall_s", 0.0)),
            unknown_projects=saved.get("unknown_projects", {}),
            provenance=saved.get("provenance", {}),
            label=saved.get("label", ""),
        )


def flat_metrics(summary: Mapping[str, Any], kinds: Iterable[str]) -> dict[str, float | int]:
    """A ``summary()`` as one flat dict of numbers: the scalar metrics, ``preemptions.<kind>``
    per kind, and ``wait_<q>_s.<group>`` / ``queued_<q>_s.<group>`` for q in p50, p90, p99 and
    group in all, the kinds and ``size_<bucket>`` (waits only). NaN where there are no jobs."""
    kinds = list(kinds)
    out: dict[str, float | int] = {
        key: int(v) if isinstance(v := summary[key], bool) else v for key in SCALAR
    }
    by_kind = summary["preemptions_by_kind"]
    out.update({f"preemptions.{k}": int(by_kind.get(k, 0)) for k in kinds})
    groups = [(g, g) for g in ("all", *kinds)]
    sizes = [(f"size_{name}", name) for _, _, name in SIZE_BUCKETS]
    for prefix, stats, names in (
        ("wait", summary["wait_s"], groups),
        ("wait", summary["wait_by_size_s"], sizes),
        ("queued", summary["queued_s"], groups),
    ):
        for q in QUANTILE_NAMES:
            out.update(
                {
                    f"{prefix}_{q}_s.{name}": _number(stats.get(key, {}).get(q))
                    for name, key in names
                }
            )
    return out


def _number(value: float | None) -> float:
    """A quantile as a float, NaN when there was nothing to measure."""
    return math.nan if value is None else float(value)


def metrics_frame(results: Iterable[SimResult]) -> pd.DataFrame:
    """One row per run: run, policy, the flat config columns (``SimConfig.flat()``),
    ``metrics()`` and sim_wall_s, in that column order whatever the runs' policies."""
    results = list(results)
    config = pd.DataFrame([r.config.flat() for r in results]).drop(
        columns="policy", errors="ignore"
    )
    metrics = pd.DataFrame([r.metrics() for r in results])
    head = pd.DataFrame(
        {"run": [r.run for r in results], "policy": [r.config.policy for r in results]}
    )
    wall = pd.DataFrame({"sim_wall_s": [r.sim_wall_s for r in results]})
    return pd.concat([head, config, metrics, wall], axis=1)


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (not valid JSON) replaced by None, through
    dicts, lists and tuples."""
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


#: The files ``SimResult.save`` writes into a run's folder.
SAVED_FILES = (
    "events.parquet",
    "trace.parquet",
    "jobs.parquet",
    "budgets.parquet",
    "summary.json",
    "config.json",
)


def saved_runs_in(folder: str | Path) -> list[Path]:
    """The runs saved in ``folder`` (``SimResult.save``): the folder itself, and each of its
    sub-folders, that holds a run's ``config.json`` and ``events.parquet`` (another tool's
    ``config.json`` is not one)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return [p for p in (folder, *sorted(folder.iterdir())) if _is_saved_run(p)]


def _is_saved_run(path: Path) -> bool:
    if not ((path / "config.json").is_file() and (path / "events.parquet").is_file()):
        return False
    try:
        saved = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and "config" in saved


#: A compare's list of its runs in its folder (``replace_runs``): a report reads those.
COMPARE_LIST = "compare.json"


def runs_to_report(folder: str | Path) -> list[Path]:
    """The runs a report of ``folder`` shows: the run saved in it, else those its compare
    listed (``COMPARE_LIST``), else every run in its sub-folders."""
    folder = Path(folder)
    if _is_saved_run(folder):
        return [folder]
    listed = folder / COMPARE_LIST
    if listed.is_file():
        try:
            names = json.loads(listed.read_text())["runs"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SavedFileError(f"{listed}: cannot be read as a list of runs ({err})") from None
        return [folder / name for name in names if _is_saved_run(folder / name)]
    return saved_runs_in(folder)


def replace_runs(folder: str | Path, runs: Iterable[str] = ()) -> bool:
    """Make ``folder`` hold new runs: the run saved in it before is removed (only the files
    ``save`` writes), and so is a compare's list; with ``runs`` (the sub-folder names of a
    compare), a new list names them, so that a report reads those only. Runs in other
    sub-folders are left alone (they may be runs saved there on purpose). True if a run saved
    in the folder itself was removed."""
    folder = Path(folder)
    removed = _is_saved_run(folder)
    if removed:
        for name in SAVED_FILES:
            (folder / name).unlink(missing_ok=True)
    (folder / COMPARE_LIST).unlink(missing_ok=True)
    runs = list(runs)
    if runs:
        folder.mkdir(exist_ok=True)
        (folder / COMPARE_LIST).write_text(json.dumps({"runs": runs}, indent=2))
    return removed


def _plain(value: Any) -> Any:
    """JSON fallback: NumPy scalars as Python numbers, anything else as its string."""
    return value.item() if hasattr(value, "item") else str(value)
