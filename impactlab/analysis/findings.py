"""What a run's headline numbers may hide, said in one line each: thrashing, a backlog, jobs
that gave up waiting, impact that counts work thrown away. Every policy's run is checked the
same way, against the thresholds below (documented in docs/model.md, "Warnings").

A finding is computed from the summary, never from inside the simulator, so that it is the same
wherever the run is shown (the CLI's stderr, ``--json``, the Explorer, the report).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base.units import HOUR_S

#: Thrashing: more than this share of the GPU time delivered in the window was lost to
#: preemption (progress since the last checkpoint, grace periods and restart overhead) ...
LOST_SHARE = 0.10
#: ... or some funded job was preempted more than this many times in the window (unallocated
#: work is preemptible backfill by design; what it loses counts in the share above).
PREEMPTIONS_PER_JOB = 20
#: A backlog: more than this share of the run's jobs are still queued when it ends ...
QUEUED_SHARE = 0.05
#: ... or the median job waited longer than this for its first start.
MEDIAN_WAIT_S = 24 * HOUR_S
#: Funded jobs that gave up: more than this share of the funded jobs, or of the funded work
#: asked for, was withdrawn out of patience (unallocated backfill that gives up is by design).
WITHDRAWN_SHARE = 0.05
#: Impact counts GPU time handed out; when impact on useful work is lower by more than this,
#: much of what was handed out was thrown away.
IMPACT_GAP = 0.10


#: In a summary's ``most_preempted_funded_reasons``: the job's starts that were unprotected
#: because they landed on nodes drained for a gang (not a reason for a preemption, but why one
#: could happen).
DRAINED_STARTS = "started on draining nodes"

#: Every finding's code, in the order they are checked.
WARNING_CODES = ("thrashing", "backlog", "gave_up", "impact_gap")


@dataclass(frozen=True)
class Finding:
    """One thing a reader of the run's numbers must know: a code and a sentence."""

    code: str  # "thrashing", "backlog", "gave_up", "impact_gap"
    message: str


@dataclass(frozen=True)
class Protection:
    """What could protect a run's jobs longer than it did, as its inputs allow (``SimResult``
    works it out from the trace and the config; the defaults assume every way is open)."""

    cap_binds: bool = True  # some job's minimum runtime is longer than the policy's cap
    trace_runtimes: bool = True  # a replayed trace's own minimum runtimes could be longer
    contract: str | None = None  # a contract_default that would protect a trace declaring none
    synthetic: bool = False  # the synthetic workload (its opt-outs are knobs, not a column)


def findings(
    summary: Mapping[str, Any],
    run: str,
    knobs: Mapping[str, Any] | frozenset[str] = frozenset(),
    fleet: bool = False,
    no_patience: bool = False,
    protection: Protection = Protection(),
) -> list[Finding]:
    """The findings of one run's ``summary()``; ``knobs`` are the parameters its policy declares
    (to name the ones that change the outcome), with their values in the run when known (a
    mapping); ``fleet``: the run is a fleet's, or one of its clusters (more GPUs come from its
    clusters' sizes, not from ``gpus``); ``no_patience``: the run replays a trace some of whose
    jobs record no patience (``patience_hours`` would give them one); ``protection``: what could
    protect its jobs longer.
    """
    found = [
        _thrashing(summary, run, knobs, protection),
        _backlog(summary, run, fleet, no_patience),
        _gave_up(summary, run, fleet),
        _impact_gap(summary, run),
    ]
    return [f for f in found if f is not None]


def _thrashing(
    s: Mapping[str, Any],
    run: str,
    knobs: Mapping[str, Any] | frozenset[str],
    protection: Protection = Protection(),
) -> Finding | None:
    lost, most = (
        _number(s.get("preemption_lost_share")),
        int(s.get("funded_preemptions_per_job_max") or 0),
    )
    if not (lost > LOST_SHARE or most > PREEMPTIONS_PER_JOB):
        return None
    reasons: Mapping[str, int] = s.get("most_preempted_funded_reasons") or {}
    why = ", ".join(f"{kind} {n}" for kind, n in reasons.items() if kind != DRAINED_STARTS)
    drained = reasons.get(DRAINED_STARTS, 0)
    notes = [f"by reason: {why}"] if why else []
    if drained:
        notes.append(
            f"{drained} of its starts {'was' if drained == 1 else 'were'} unprotected, on nodes "
            "draining for a gang"
        )
    worst = (
        f"funded job {s.get('most_preempted_funded_job')} was preempted "
        f"{most} time{'' if most == 1 else 's'}" + (f" ({'; '.join(notes)})" if notes else "")
        if most
        else "no funded job was preempted"
    )
    return Finding(
        "thrashing",
        f"{run}: preemption is thrashing: {_share(lost)} of the delivered GPU time was "
        f"lost to it and {worst} (warned above {LOST_SHARE:.0%} lost or "
        f"{PREEMPTIONS_PER_JOB} preemptions of one funded job); "
        f"{_protection_advice(knobs, reasons, protection)}",
    )


def _protection_advice(
    knobs: Mapping[str, Any] | frozenset[str], reasons: Mapping[str, int], protection: Protection
) -> str:
    """The knobs behind the most preempted job's preemptions, to compare runs with: those behind
    its reasons first, then the ways to protect jobs longer that this run leaves open. None is
    sure to help (a smaller reserve or no draining can move the preemptions elsewhere), so the
    sentence says so."""

    def value(name: str, default: Any = None) -> Any:
        return knobs.get(name, default) if isinstance(knobs, Mapping) else default

    levers: list[tuple[int, str]] = []  # (how many of the job's preemptions it concerns, lever)
    if reasons.get("interactive reserve") and "interactive_reserve" in knobs:
        reserve = (
            "a smaller interactive reserve (interactive_reserve), whose borrowers yield to "
            "debug and interactive work at once"
        )
        levers.append((reasons["interactive reserve"], reserve))
    drained = max(reasons.get("drain", 0), reasons.get(DRAINED_STARTS, 0))
    if drained and value("drain_for_gangs", True) and "drain_for_gangs" in knobs:
        drain = (
            "no draining for gangs (drain_for_gangs=False): a job started on the nodes a gang "
            "waits for is unprotected, and yields to it"
        )
        levers.append((drained, drain))
    levers.sort(key=lambda lever: -lever[0])  # (stable: the reserve first on a tie)
    said = [lever for _, lever in levers]
    if "cap_hours" in knobs:
        longer = []
        if protection.contract:
            longer.append(f"contract_default={protection.contract} (the trace declares none)")
        cap = value("cap_hours")
        if protection.cap_binds:
            longer.append(f"a longer protection cap (cap_hours{f', now {cap:g} h' if cap else ''})")
        if protection.trace_runtimes:
            longer.append("longer minimum runtimes in the trace (min_runtime_s)")
        if longer:
            said.append("protecting jobs longer: " + ", ".join(longer))
    else:
        opt_outs = (
            "the workload's opt-outs (opt_out_long, opt_out_short)"
            if protection.synthetic
            else "preemptible=False in the trace"
        )
        said.append(f"an opt-out, the only protection this policy has: {opt_outs}")
    if not said:
        return "this run leaves no knob of its policy that would protect them longer"
    return "knobs to compare runs with (none is sure to help): " + "; or ".join(said)


def _backlog(
    s: Mapping[str, Any], run: str, fleet: bool = False, no_patience: bool = False
) -> Finding | None:
    share = _number(s.get("queued_at_end_share"))
    median = _number(((s.get("wait_s") or {}).get("all") or {}).get("p50"))
    if not (share > QUEUED_SHARE or median > MEDIAN_WAIT_S or s.get("backlog_growing")):
        return None
    waited = f"{median / HOUR_S:,.1f} h" if math.isfinite(median) else "an undefined time"
    quarters = queue_path(s.get("queue_quarters") or [])
    queued = int(s.get("queued_at_end") or 0)
    patience = (
        ", and if their owners would have given up, the jobs need a patience (patience_hours)"
        if no_patience
        else ""
    )
    return Finding(
        "backlog",
        f"{run}: a backlog: {_count(queued, 'job')} ({_share(share)} of the run's) "
        f"{'is' if queued == 1 else 'are'} still queued at the end (queue over the window: "
        f"{quarters}) and the median job waited {waited} to start (warned above "
        f"{QUEUED_SHARE:.0%} queued, a {MEDIAN_WAIT_S / HOUR_S:g} h median or a queue growing "
        "through the window); the waits of the jobs still queued stop at the run's end, so the "
        "waits shown are shorter than theirs will be: if that work should have run, it needs "
        f"{_more_gpus(fleet)}{patience}",
    )


def _gave_up(s: Mapping[str, Any], run: str, fleet: bool = False) -> Finding | None:
    jobs, work = (
        _number(s.get("withdrawn_funded_share")),
        _number(s.get("withdrawn_funded_work_share")),
    )
    if not (jobs > WITHDRAWN_SHARE or work > WITHDRAWN_SHARE):
        return None
    gone = int(s.get("withdrawn_funded") or 0)
    were, their = ("was", "its") if gone == 1 else ("were", "their")
    return Finding(
        "gave_up",
        f"{run}: {_count(gone, 'funded job')} ({_share(jobs)} of the funded jobs, "
        f"{_share(work)} of the funded work asked for in GPUs x run time) gave up waiting and "
        f"{were} withdrawn (warned above {WITHDRAWN_SHARE:.0%} of either); the results leave "
        f"{their} work out: a job is owed GPU time only while it waits, so impact does not count "
        "the run time it gave up, and its wait ends at the withdrawal, so waits look shorter "
        "than they would have been; if that work should have run, it needs a policy that "
        f"starts it sooner or {_more_gpus(fleet)}",
    )


def _more_gpus(fleet: bool) -> str:
    """The knobs that add GPUs: a fleet's cluster sizes, or one cluster's."""
    return (
        "more GPUs in its clusters (clusters; resize_cluster, move_gpus)"
        if fleet
        else "more GPUs in the cluster (gpus)"
    )


def _impact_gap(s: Mapping[str, Any], run: str) -> Finding | None:
    impact, useful = _number(s.get("impact")), _number(s.get("impact_useful"))
    if not impact - useful > IMPACT_GAP:
        return None
    return Finding(
        "impact_gap",
        f"{run}: impact {impact:.3f} counts GPU time that was then thrown away; on useful "
        f"work (impact_useful) it is {useful:.3f}",
    )


def queue_path(quarters: list[int]) -> str:
    """The queue at the window's start and at the end of each quarter: "12 -> 40 -> 35 -> 51 -> 60"."""
    return " -> ".join(f"{q:,}" for q in quarters)


def _count(n: int, noun: str) -> str:
    """``n`` things: "1 job", "1,204 jobs"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _share(value: float) -> str:
    """A share in percent: one decimal below 10%, so that a share next to a threshold does
    not read as the threshold itself ("4.9%" warned at 5%, not "5%")."""
    if not math.isfinite(value):
        return "an undefined share"
    return f"{value:.1%}" if abs(value) < 0.1 else f"{value:.0%}"


def _number(value: Any) -> float:
    """A summary value as a float; None and NaN (undefined) compare as never over a threshold."""
    if value is None:
        return -math.inf
    value = float(value)
    return -math.inf if math.isnan(value) else value
