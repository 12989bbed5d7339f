"""Choosing preemption victims for a gang that does not fit (docs/model.md section 5, step 4)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

from ..sim.policy import Scheduler

Approve = Callable[[list[int]], bool]  # is this final set of victims allowed?


def choose_victims(
    sched: Scheduler,
    j: int,
    candidates: Iterable[int],
    approve: Approve | None = None,
    avoid: frozenset[int] = frozenset(),
) -> list[int] | None:
    """Victims, in preference order, whose preemption lets job ``j`` be placed; None if none do.

    Walks ``candidates`` in order, counting what each would free per node, and stops at the
    first node (or set of whole nodes, for a multi-node gang) that becomes free enough. The
    walk draws the next candidate only once it has counted the previous one, so a generator
    can judge each candidate by the victims it has already handed out. A reverse pass then
    drops victims that turned out unneeded, and ``approve`` checks the set that remains (a
    rule judged on the walk could depend on victims since dropped). Room on the nodes in
    ``avoid`` does not count: the job may not be placed there, nor on nodes cordoned for
    maintenance (``sched.cordoned``).
    """
    if sched.cordoned:
        avoid = avoid | sched.cordoned
    victims = _walk(sched, j, candidates, avoid)
    if victims is None or (approve is not None and not approve(victims)):
        return None
    return victims


def _walk(
    sched: Scheduler, j: int, candidates: Iterable[int], avoid: frozenset[int]
) -> list[int] | None:
    cluster, job = sched.cluster, sched.jobs[j]
    if not cluster.could_free(job.gpus):
        return None
    if job.n_nodes == 1:
        return walk_one(sched, job.gpus, candidates, avoid)
    jobs, nodes_of, per, free = sched.jobs, sched.nodes, cluster.gpus_per_node, cluster.free
    freed: dict[int, int] = {}  # GPUs the accepted victims free per node
    on: dict[int, list[int]] = {}  # accepted victims per node, in walk order
    order: dict[int, int] = {}  # walk position of each accepted victim
    whole = sorted(cluster.by_free[per] - avoid)
    for v in candidates:
        order[v] = len(order)
        share = jobs[v].per_node
        for n in nodes_of[v]:
            if n in avoid:
                continue
            room = free[n] + freed.get(n, 0) + share
            freed[n] = room - free[n]
            on.setdefault(n, []).append(v)
            if room == per:
                whole.append(n)
        if len(whole) >= job.n_nodes:
            target = whole[: job.n_nodes]
            kept = sorted({v for n in target for v in on.get(n, ())}, key=order.__getitem__)
            return _trim(sched, kept, target, per)
    return None


def walk_one(
    sched: Scheduler,
    need: int,
    candidates: Iterable[int],
    avoid: frozenset[int],
    room: dict[int, int] | None = None,
    accepted: list[int] | None = None,
) -> list[int] | None:
    """``_walk`` for a single-node job of ``need`` GPUs: the first node with room wins (None:
    the candidates make room nowhere). It trims as ``_trim`` does, for one node, inline
    (a call per node here would cost a measurable share of an impactful run).

    ``room`` (free GPUs per node once the accepted victims are gone, for the nodes they touch)
    and ``accepted`` (in walk order), if given, are the state of a walk that went before and
    found room nowhere: this one goes on from there, and updates them. Nodes cordoned for
    maintenance count as avoided."""
    jobs, nodes_of, free = sched.jobs, sched.nodes, sched.cluster.free
    if sched.cordoned:
        avoid = avoid | sched.cordoned
    room = {} if room is None else room
    accepted = [] if accepted is None else accepted
    for v in candidates:
        accepted.append(v)
        share = jobs[v].per_node
        for n in nodes_of[v]:
            if n in avoid:
                continue
            left = room[n] = room.get(n, free[n]) + share
            if left >= need:  # drop, newest-accepted first, the victims on n it can do without
                kept = []
                for u in reversed([u for u in accepted if n in nodes_of[u]]):
                    if left - jobs[u].per_node >= need:
                        left -= jobs[u].per_node
                    else:
                        kept.append(u)
                kept.reverse()
                return kept
    return None


def _trim(sched: Scheduler, keep: list[int], target: list[int], need: int) -> list[int]:
    """Of the victims on the target nodes (in walk order), drop, newest-accepted first, any
    the gang can do without."""
    room = {n: sched.cluster.free[n] for n in target}
    jobs = sched.jobs
    share = {v: jobs[v].per_node for v in keep}
    mine = {v: [n for n in sched.nodes[v] if n in room] for v in keep}  # its target nodes
    for v in keep:
        for n in mine[v]:
            room[n] += share[v]
    kept = []
    for v in reversed(keep):
        if all(room[n] - share[v] >= need for n in mine[v]):
            for n in mine[v]:
                room[n] -= share[v]
        else:
            kept.append(v)
    kept.reverse()
    return kept


def reach(free: list[int], victim_gpus: list[int], gpus_per_node: int) -> int:
    """The largest gang that could be placed by best fit if every possible victim
    (``victim_gpus`` per node) were preempted: a cheap necessary test that rules out hopeless
    searches (a gang of more GPUs cannot find room however its victims are chosen)."""
    rooms = list(map(operator.add, free, victim_gpus))
    whole = rooms.count(gpus_per_node)  # a node never has more room than GPUs
    return whole * gpus_per_node if whole else max(rooms)
