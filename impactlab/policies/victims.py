"""Choosing preemption victims for a gang that does not fit (DESIGN.md section 5, step 4)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

from ..cluster import nodes_needed
from .base import Scheduler

Accept = Callable[[int], bool]  # is this candidate still eligible, given those accepted so far?
Approve = Callable[[list[int]], bool]  # is this final set of victims allowed?


def choose_victims(sched: Scheduler, j: int, candidates: Iterable[int], accept: Accept,
                   approve: Approve | None = None) -> list[int] | None:
    """Victims, in preference order, whose preemption lets job ``j`` be placed; None if none do.

    Walks ``candidates`` in order, counting what each would free per node, and stops at the
    first node (or set of whole nodes, for a multi-node gang) that becomes free enough. A
    reverse pass then drops victims that turned out unneeded, and ``approve`` checks the set
    that remains (a rule judged on the walk could depend on victims since dropped).
    """
    victims = _walk(sched, j, candidates, accept)
    if victims is None or (approve is not None and not approve(victims)):
        return None
    return victims


def _walk(sched: Scheduler, j: int, candidates: Iterable[int], accept: Accept) -> list[int] | None:
    cluster, job = sched.cluster, sched.jobs[j]
    if not cluster.could_free(job.gpus):
        return None
    per = cluster.gpus_per_node
    freed: dict[int, int] = {}
    chosen: list[int] = []
    whole = sorted(cluster.by_free[per]) if job.n_nodes > 1 else []
    for v in candidates:
        if not accept(v):
            continue
        chosen.append(v)
        victim = sched.jobs[v]
        share = victim.gpus if victim.n_nodes == 1 else per
        for n in sched.nodes[v]:
            freed[n] = freed.get(n, 0) + share
            if job.n_nodes == 1 and cluster.free[n] + freed[n] >= job.gpus:
                return _trim(sched, chosen, [n], job.gpus)
            if job.n_nodes > 1 and cluster.free[n] + freed[n] == per:
                whole.append(n)
        if job.n_nodes > 1 and len(whole) >= job.n_nodes:
            return _trim(sched, chosen, whole[: job.n_nodes], per)
    return None


def _trim(sched: Scheduler, chosen: list[int], target: list[int], need: int) -> list[int]:
    """Keep only victims on the target nodes, then drop any the gang can do without."""
    per = sched.cluster.gpus_per_node
    keep = [v for v in chosen if set(sched.nodes[v]) & set(target)]

    def room(victims: list[int], n: int) -> int:
        gained = sum(sched.jobs[v].gpus if sched.jobs[v].n_nodes == 1 else per
                     for v in victims if n in sched.nodes[v])
        return sched.cluster.free[n] + gained

    for v in reversed(list(keep)):
        trial = [u for u in keep if u != v]
        if all(room(trial, n) >= need for n in target):
            keep = trial
    return keep


def room_profile(free: list[int], victim_gpus: list[int], gpus_per_node: int) -> tuple[int, int]:
    """If every possible victim (``victim_gpus`` per node) were preempted: the most GPUs one
    node would have free, and how many nodes would be wholly free."""
    rooms = list(map(operator.add, free, victim_gpus))
    return max(rooms), sum(1 for room in rooms if room >= gpus_per_node)


def could_fit(profile: tuple[int, int], gpus: int, gpus_per_node: int) -> bool:
    """Whether a gang could be placed with the room of ``room_profile``: a cheap test that
    rules out hopeless searches."""
    if gpus <= gpus_per_node:
        return profile[0] >= gpus
    return profile[1] >= nodes_needed(gpus, gpus_per_node)
