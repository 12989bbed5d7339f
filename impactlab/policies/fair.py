"""Fair Tree ordering shared by ``fairshare`` and ``impactful`` (docs/model.md section 5).

Leaves are ranked by Slurm's Fair Tree over charged usage. As in Slurm (PriorityCalcPeriod),
the ranking is refreshed at most every ``refresh_s`` seconds, at the first pass after that
period, so a pass ranks a handful of leaves instead of sorting pending jobs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from operator import itemgetter

import numpy as np

from ..sim.events import SESSION, UNALLOCATED, Job
from ..sim.policy import Context, Scheduler
from .queues import NO_LIMIT, Place, PreemptFn, Searches, SizeQueues, queue_for, start_in_order
from .reservation import Hold
from .usage import DecayedUsage, WindowUsage

BOOSTED_KINDS = frozenset({"debug", SESSION})


#: The key of the organisation's ``SharedUsage`` in ``Organisation.shared``.
SHARED_USAGE = "fair-share usage"


def _nothing() -> None:
    """What a fair tree does by default when another cluster's usage changes."""


class SharedUsage:
    """Organisation-wide charging in a fleet: one usage meter and one funded allocation per
    budget node for the fair-share rankings of every cluster. A funded job charges its budget
    wherever it runs, and each cluster ranks and judges victims by the organisation's usage and
    allocation, relative to the organisation's GPUs. Each cluster still refreshes its own
    ranking on its own period; a charge by one cluster tells the others' trees
    (``FairTree.outside_change``) so that they forget what they concluded from the old state."""

    def __init__(self, size: int, capacity: int, window_s: float, half_life_s: float | None):
        self.capacity, self.rule = capacity, (window_s, half_life_s)
        self.meter = _meter(size, window_s, half_life_s)
        self.alloc = [0] * size
        self.trees: list[FairTree] = []

    def charged(self, by: FairTree) -> None:
        """``by`` changed the shared usage: every other cluster's tree hears of it."""
        for tree in self.trees:
            if tree is not by:
                tree.outside_change()


def _meter(size: int, window_s: float, half_life_s: float | None) -> WindowUsage | DecayedUsage:
    return WindowUsage(size, window_s) if half_life_s is None else DecayedUsage(size, half_life_s)


def _shared_usage(ctx: Context, window_s: float, half_life_s: float | None) -> SharedUsage | None:
    """The organisation's usage when the fleet charges fair share organisation-wide (the first
    cluster's tree makes it); None otherwise."""
    if ctx.org is None:
        return None
    shared = ctx.org.shared.get(SHARED_USAGE)
    if shared is None:
        shared = ctx.org.shared[SHARED_USAGE] = SharedUsage(
            ctx.tree.size, ctx.org.capacity, window_s, half_life_s
        )
    assert isinstance(shared, SharedUsage)
    if shared.rule != (window_s, half_life_s):
        raise ValueError(
            "the clusters of a fleet charged organisation-wide must count usage the same way "
            f"(window, half-life): {shared.rule} and {(window_s, half_life_s)}"
        )
    return shared


class FairTree:
    """Charged usage, current allocation and the Fair Tree rank of every leaf.

    In a fleet charged organisation-wide (``ctx.org``), the usage and the allocation are the
    organisation's (``SharedUsage``) and ``capacity`` is the fleet's; ``outside_change`` is
    called when another cluster changes them (its policy sets it)."""

    def __init__(self, ctx: Context, window_s: float, half_life_s: float | None, refresh_s: float):
        self.tree, self.capacity, self.refresh_s = ctx.tree, ctx.capacity, refresh_s
        size = ctx.tree.size
        self.norm_s = (
            window_s if half_life_s is None else float(half_life_s / np.log(2))
        )  # the (decayed) integral of a constant rate over the window
        self.outside_change: Callable[[], None] = _nothing
        self.shared = _shared_usage(ctx, window_s, half_life_s)
        if self.shared is not None:
            self.meter, self.alloc = self.shared.meter, self.shared.alloc
            self.capacity = self.shared.capacity
            self.shared.trees.append(self)
        else:
            self.meter = _meter(size, window_s, half_life_s)
            # Plain lists, not arrays: they are read and updated one element at a time.
            self.alloc = [0] * size  # funded GPUs held now, per node (subtree sums)
        self._used = [0.0] * size  # charged usage per node at the last refresh / window capacity
        self.fraction = ctx.tree.fraction.tolist()
        self.paths = {leaf: ctx.tree.path(leaf) for leaf in ctx.tree.leaves}
        # Leaves by Fair Tree rank: a new list only when a refresh changes the ranking (the
        # lanes of ``FairQueues`` are re-sorted when it is not the list they follow).
        self.order: list[int] = list(ctx.tree.leaves)
        self._splits: dict[tuple[int, int], tuple[int, int] | None] = {}
        self._levels: dict[int, list[tuple[int, list[int]]]] = {}  # leaf -> ``levels``
        self.next_refresh = 0.0

    def charge(self, job: Job, now: float, sign: int) -> None:
        """A funded job starts (+1) or stops (-1) holding its GPUs."""
        self.meter.change(job.leaf, now, sign * job.held)
        for node in self.paths[job.leaf]:
            self.alloc[node] += sign * job.held
        if self.shared is not None:
            self.shared.charged(self)

    def refresh(self, now: float) -> None:
        """Recompute usage and the leaf ranking if the refresh period has passed."""
        if now < self.next_refresh:
            return
        self.next_refresh = now + self.refresh_s
        usage = self.tree.subtree_sum_list(self.meter.usage_list(now))
        scale = self.capacity * self.norm_s
        self._used = [u / scale for u in usage]
        order = self.tree.fair_tree_order(usage)
        if order != self.order:  # (most refreshes keep the ranking)
            self.order = order

    def served(self, node: int, alloc_delta: float = 0.0) -> float:
        """How well served a node is: (usage share of the window + allocation share) / entitlement."""
        held = (self.alloc[node] + alloc_delta) / self.capacity
        return (self._used[node] + held) / self.fraction[node]

    def no_better(self, mine: int, mine_delta: float, theirs: int, theirs_delta: float) -> bool:
        """``served(mine, mine_delta) <= served(theirs, theirs_delta)`` in one call (the same
        sums): the fair swap every victim search judges, hundreds of thousands of times a run."""
        alloc, used, fraction, capacity = self.alloc, self._used, self.fraction, self.capacity
        return (used[mine] + (alloc[mine] + mine_delta) / capacity) / fraction[mine] <= (
            used[theirs] + (alloc[theirs] + theirs_delta) / capacity
        ) / fraction[theirs]

    def most_taken(self, leaf: int, held: int, open_gpus: dict[int, int]) -> dict[int, float]:
        """For each side of a split between ``leaf`` and another leaf, the most GPUs a victim
        walk for a job of ``held`` GPUs under ``leaf`` could take from it, as of now, when each
        budget node holds ``open_gpus`` in jobs that may be taken.

        The walk takes a victim from side ``s`` (split off below ``mine``, on the leaf's path)
        only if ``served(mine, held - freed under mine) <= served(s, -taken from s)``, the victim
        included. Only victims from the sides of deeper splits free GPUs under ``mine``, so the
        bound is built from the leaf up: what is freed under ``mine`` is at most what its deeper
        sides can give (each at most its ``open_gpus`` and at most what it can lose itself);
        with that much freed, ``mine`` is at least ``served(mine, held - freed)``, which caps
        what ``s`` can lose. (A small margin covers rounding: a larger bound is never wrong.)"""
        alloc, used, fraction, capacity = self.alloc, self._used, self.fraction, self.capacity
        margin = 1e-9 * (capacity + 1)
        can_take: dict[int, float] = {}
        freed = 0.0  # the most a walk could free under ``mine``
        for mine, sides in self.levels(leaf):
            least = (used[mine] + (alloc[mine] + held - freed) / capacity) / fraction[
                mine
            ]  # (``served``)
            for side in sides:
                can_lose = can_take[side] = (
                    alloc[side] + capacity * (used[side] - least * fraction[side]) + margin
                )
                gpus = open_gpus.get(side, 0)
                if gpus > 0 and can_lose > 0:
                    freed += min(gpus, can_lose)
        return can_take

    def levels(self, leaf: int) -> list[tuple[int, list[int]]]:
        """(node on ``leaf``'s path, the other children of its parent) for each node below the
        root, from the leaf up (cached; the tree does not change)."""
        levels = self._levels.get(leaf)
        if levels is None:
            children, path = self.tree.children, self.paths[leaf]
            levels = self._levels[leaf] = [
                (mine, [c for c in children[up] if c != mine])
                for up, mine in zip(path[-2::-1], path[:0:-1])
            ]
        return levels

    def why(self, mine: int, theirs: int) -> str:
        """Why a job under ``theirs`` yields to one under ``mine`` (the two sides of their lowest
        common ancestor): how well served each side is now."""
        names = self.tree.names
        return (
            f"fair share under {names[self.tree.parent[mine]]}: {names[theirs]} served "
            f"{self.served(theirs):.2f} > {names[mine]} {self.served(mine):.2f}"
        )

    def split(self, a: int, b: int) -> tuple[int, int] | None:
        """The children of the lowest common ancestor of leaves ``a`` and ``b`` on each side."""
        key = (a, b)
        if key not in self._splits:
            pairs = zip(self.paths[a], self.paths[b])
            self._splits[key] = next(((x, y) for x, y in pairs if x != y), None)  # None: same leaf
        return self._splits[key]


class FairQueues:
    """Pending jobs in lanes: funded per leaf, then unallocated; optionally debug first.

    A pass visits only the lanes with pending jobs, kept in pass order: funded lanes by tier
    (boosted first) and Fair Tree rank, then the unallocated ones. The order is rebuilt when
    the ranking is refreshed; a lane that gains jobs is slotted in, and one that runs empty
    is dropped after the pass that emptied it.
    """

    def __init__(self, jobs: list[Job] | tuple[Job, ...], boost: bool):
        self.jobs, self.boost = jobs, boost
        self.queues: dict[tuple[bool, int], SizeQueues] = {}
        self._lanes: list[tuple[tuple[bool, bool, int], SizeQueues]] = []  # (pass position, queue)
        self._listed: set[tuple[bool, int]] = set()  # lanes in ``_lanes``
        self._ranked: list[int] | None = None  # the Fair Tree order ``_lanes`` follows
        self._rank: dict[int, int] = {}  # leaf -> position in that order

    def _lane(self, j: int) -> tuple[bool, int]:
        job = self.jobs[j]
        return (self.boost and job.kind in BOOSTED_KINDS, job.leaf)

    def _position(self, lane: tuple[bool, int]) -> tuple[bool, bool, int]:
        boosted, leaf = lane
        return (leaf == UNALLOCATED, not boosted, self._rank.get(leaf, 0))

    def add(self, j: int) -> bool:
        """Job ``j`` joins its lane, in FIFO (submit, id) order; True if it is the first of
        its size there (see ``SizeQueues.push``)."""
        lane = self._lane(j)
        queue = queue_for(self.queues, lane)
        if lane not in self._listed:
            self._listed.add(lane)
            if self._ranked is not None:
                bisect.insort(self._lanes, (self._position(lane), queue), key=itemgetter(0))
        return queue.push(j, self.jobs[j].gpus, (j,))

    def unstick(self, j: int) -> None:
        """Have job ``j``'s lane scanned at the next pass even if the state did not change."""
        self.queues[self._lane(j)].stuck = None

    def remove(self, j: int) -> None:
        """Job ``j`` leaves the queue without starting."""
        self.queues[self._lane(j)].discard(j)

    def lanes(self, fair: FairTree) -> list[tuple[tuple[bool, bool, int], SizeQueues]]:
        """The lanes in pass order under the current ranking (stale lanes may be empty)."""
        return self._lanes if self._ranked is fair.order else self._resort(fair)

    def top(self, fair: FairTree, funded_only: bool, above: int = 0) -> int:
        """The first pending job in pass order (-1: none) of more than ``above`` GPUs, among
        funded jobs if asked."""
        for (unfunded, _, _), queue in self.lanes(fair):
            if unfunded and funded_only:
                return -1
            if not queue.live or queue.sizes[-1] <= above:
                continue
            found = queue.best_head(NO_LIMIT, above=above)
            if found is not None:
                return found[0][-1]
        return -1

    def position(self, j: int) -> tuple[tuple[bool, bool, int], int]:
        """Job ``j``'s place in pass order under the ranking the lanes follow."""
        return (self._position(self._lane(j)), j)

    def _resort(self, fair: FairTree) -> list[tuple[tuple[bool, bool, int], SizeQueues]]:
        """The lanes with pending jobs, sorted into pass order by a new ranking."""
        self._ranked = fair.order
        self._rank = {leaf: k for k, leaf in enumerate(fair.order)}
        self._lanes = sorted(
            ((self._position(lane), self.queues[lane]) for lane in self._listed), key=itemgetter(0)
        )
        return self._lanes

    def run(
        self,
        fair: FairTree,
        sched: Scheduler,
        make_room: PreemptFn | None,
        place: tuple[Place | None, Place | None] = (None, None),
        searches: Searches | None = None,
        preempt_max: int = NO_LIMIT,
        hold: Hold | None = None,
        blocked: Callable[[SizeQueues, bool], bool] | None = None,
    ) -> None:
        """One pass: funded lanes by Fair Tree rank (preempting if allowed), then unallocated.
        ``place[boosted]`` chooses the nodes of funded jobs (default: best fit); only gangs of
        up to ``preempt_max`` GPUs ask ``make_room`` in this pass (it refuses larger ones), so
        a lane of larger gangs only is scanned only if one of them fits. ``blocked(queue,
        boosted)``, the policy's quick test that a funded lane would start nothing, stands for
        the scan when it says so: the lane is then marked as a failed scan would mark it, and
        may be scanned again after a ranking refresh (its test may have judged fair shares).

        A lane whose scan started nothing is skipped until GPUs are freed or a protection ends
        (``sched.epoch``), the ``searches`` version of the victims moves, the ranking is
        refreshed if one of its searches judged fair shares (``make_room`` returned
        ``Room.NONE_UNTIL_REFRESH``, or a gang of the lane searches only at a refresh), or a job
        arrives at the head of one of its sizes: until then the scan would fail the same way. The state is read again
        before each lane, since an earlier lane may have changed it. With preemption, only a
        scan with no job started at this instant counts (those jobs are no victims yet)."""
        cluster, emptied = sched.cluster, False
        lanes = self.lanes(fair)
        for (unfunded, unboosted, _), queue in lanes:
            if not queue.live:
                emptied = True
                continue
            state = (sched.epoch, searches.version if searches else 0, hold.version if hold else 0)
            stuck = queue.stuck
            if (
                stuck is not None
                and stuck[0] == state
                and (stuck[1] is None or (searches is not None and stuck[1] == searches.refreshes))
                and (stuck[2] is None or stuck[2] == sched.now)
            ):
                continue
            if unfunded:
                if queue.sizes[0] <= cluster.largest_fit():
                    self._scan(queue, sched, None, None, state, None, hold, funded=False)
            elif (make_room and queue.sizes[0] <= preempt_max) or queue.sizes[
                0
            ] <= cluster.largest_fit():
                if make_room and blocked is not None and blocked(queue, not unboosted):
                    queue.stuck = _failed(sched, state, searches, True, True)
                    continue
                self._scan(
                    queue,
                    sched,
                    make_room,
                    place[not unboosted],
                    state,
                    searches,
                    hold,
                    preempt_max=preempt_max,
                )
        if emptied:  # drop the lanes found empty (one this pass empties goes after the next)
            self._lanes = [entry for entry in lanes if entry[1].live]
            self._listed = {lane for lane, queue in self.queues.items() if queue.live}

    @staticmethod
    def _scan(
        queue: SizeQueues,
        sched: Scheduler,
        make_room: PreemptFn | None,
        place: Place | None,
        state: tuple[int, int, int],
        searches: Searches | None,
        hold: Hold | None,
        funded: bool = True,
        preempt_max: int = NO_LIMIT,
    ) -> None:
        waiting = len(queue.live)
        # Gangs above preempt_max search at a later pass (a refresh), so a failed scan of this
        # lane depends on the ranking too (the policy would say so for each of them it asked).
        later = make_room is not None and queue.sizes[-1] > preempt_max
        until_refresh = start_in_order(
            queue,
            sched,
            make_room,
            larger_no_easier=not funded,
            place=place,
            hold=hold,
            search_max=preempt_max,
        )
        if len(queue.live) == waiting:
            queue.stuck = _failed(
                sched, state, searches, until_refresh or later, make_room is not None
            )


def _failed(
    sched: Scheduler,
    state: tuple[int, int, int],
    searches: Searches | None,
    until_refresh: bool,
    preempts: bool,
) -> tuple[tuple[int, int, int], int | None, float | None]:
    """The mark of a lane whose scan in ``state`` started nothing (``SizeQueues.stuck``): it
    holds until the state moves; across ranking refreshes only if no search of the scan judged
    fair shares (``until_refresh``). Jobs started at this instant are no victims yet: if the
    scan could preempt (``preempts``), the mark holds for this instant only (a pass that
    preempted is followed by another one)."""
    fresh = preempts and sched.last_start_s >= sched.now
    return (
        state,
        searches.refreshes if searches and until_refresh else None,
        sched.now if fresh else None,
    )
