"""``impactful``: Ai2's budgets, windowed fair share, protection contract and backfill.

The rule, written plainly, is ``reference.ImpactfulReference``; this pass makes the identical event log,
faster (``tests/test_oracle.py`` replays traces under both).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import ClassVar

from ..base.params import knob
from ..base.units import DAY_S, plural, span
from ..sim.events import SESSION, Job
from ..sim.policy import (
    BACKFILL_REASON,
    DRAIN_NOTE,
    DRAIN_REASON,
    RESERVE_REASON,
    Attempt,
    Context,
    Explainer,
    Scheduler,
)
from .fair import BOOSTED_KINDS
from .fairshare import FairShare
from .open_victims import OpenVictims
from .queues import NO_LIMIT, Place, Room, Searches, SizeQueues
from .reservation import Hold
from .victims import Approve, choose_victims, walk_one

_UNTIL_REFRESH = Room.NONE_UNTIL_REFRESH  # (a module global: see ``queues._MADE``)


class Verdicts:
    """What one victim search (one ``make_room`` call) records besides its victims: ``judged``
    is set when one of its verdicts judged fair shares (so that after a ranking refresh the
    search may end differently). ``make_room`` makes one per search and hands it to each step
    of that search; nothing else shares it."""

    __slots__ = ("judged",)

    def __init__(self) -> None:
        self.judged = False


@dataclass
class Impactful(FairShare):
    """Funded work by Fair Tree over a sliding window; protected for a capped minimum runtime,
    then preemptible by under-served budgets; unallocated work backfills and never preempts."""

    name: ClassVar[str] = "impactful"
    window_days: float = knob(
        7.0,
        float,
        "sliding fair-share window over which usage counts",
        "days",
        lo=0,
        hi=90,
        step=0.5,
        lo_open=True,
        ui=(0.5, 28),
    )
    cap_hours: float = knob(
        8.0,
        float,
        "protection cap: a job is protected for min(declared minimum runtime, cap)",
        "h",
        lo=0,
        hi=168,
        step=0.5,
        ui=(0, 48),
    )
    cap_hours_interactive: float | None = knob(
        None,
        float,
        "protection cap of interactive sessions (none: cap_hours)",
        "h",
        lo=0,
        hi=168,
        step=0.5,
        nullable=True,
        ui=(0, 48),
    )
    protect_unallocated: bool = knob(False, bool, "unallocated jobs get the contract too")
    half_life_days: float | None = knob(
        None,
        float,
        "decay the window's usage with this "
        "half-life instead of a hard cut-off (none: hard cut-off)",
        "days",
        lo=0,
        hi=365,
        step=0.5,
        lo_open=True,
        nullable=True,
    )
    refresh_s: float = knob(
        300.0, float, "how often the fair-share ranking is refreshed", "s", lo=1, hi=86_400, step=60
    )
    boost_interactive: bool = knob(
        True, bool, "debug and interactive work first within its tier (Ai2: debug p90 wait 30 s)"
    )
    # Breaking up a large gang for a small job wastes the rest of it and the gang then
    # struggles to find whole nodes again (fragmentation).
    max_victim_ratio: float = knob(
        1.0,
        float,
        "a funded victim may hold at most this many times "
        "the GPUs of the job it makes room for (inf: no limit)",
        "x",
        lo=0,
        hi=math.inf,
        step=0.5,
        lo_open=True,
        ui=(0.5, 16),
    )
    # Multi-node gangs look for victims only in the pass that refreshes the fair-share ranking
    # (every refresh_s), like the periodic preemption cycle of batch schedulers; smaller jobs
    # look at every event. Clearing whole nodes rarely becomes possible from one event to the
    # next, so a gang's search at every event costs much and finds little.
    gangs_preempt_every_pass: bool = knob(
        False,
        bool,
        "multi-node gangs search for victims at every pass, not only at ranking refreshes",
    )
    # With the boost, the highest-numbered nodes are held back for debug/interactive work: funded
    # jobs are placed off them first, and go there only when they fit nowhere else. A job that
    # fits outside the reserve and lands on it *borrows* it: that attempt is unprotected and a
    # debug/interactive job may preempt it at once (like unallocated backfill), so the reserve
    # never idles while work waits. A job larger than the nodes outside the reserve runs there
    # with its contract (else it could never run). Without a reserve, protected work can cover
    # a small cluster and a debug job that needs a whole node waits for hours. The default
    # share was chosen by measurement (docs/design-choices.md).
    interactive_reserve: float = knob(
        0.03,
        float,
        "share of nodes (rounded up) held for debug and interactive work",
        lo=0,
        hi=0.99,
        step=0.01,
        ui=(0, 0.25),
    )
    backfill_reservation: bool = knob(
        False,
        bool,
        "the top-ranked blocked funded multi-node gang reserves the "
        "nodes that free soonest (as running jobs end or their "
        "protection ends); other jobs start there only if they end or "
        "become preemptible before its reserved start",
    )
    # A gang of 256 GPUs needs 32 whole nodes free of protected work at once, which protection
    # contracts ending at random times rarely give. Draining nodes for it ends their
    # protection without idling them.
    drain_for_gangs: bool = knob(
        True,
        bool,
        "the top-ranked blocked funded multi-node gang drains the "
        "nodes that become preemptible soonest: work started there meanwhile is "
        "unprotected and yields to the gang",
    )
    # A node that holds protected work cannot be cleared for a gang until that work ends, so a
    # single-node job that preempts unallocated work takes it there first, leaving the nodes that
    # could be cleared whole to gangs (docs/design-choices.md has what it gains).
    pack_victims: bool = knob(
        True,
        bool,
        "a single-node job preempts unallocated work on the nodes "
        "with the most protected GPUs first (newest first within), leaving nodes "
        "that could be cleared whole to gangs; off: newest first anywhere",
    )
    reserve_for_unallocated: ClassVar[bool] = False
    # Single-node jobs look for victims at every pass and rarely wait long; a reservation for
    # them kept protected work off nodes and lowered impact.
    reserve_for_gangs_only: ClassVar[bool] = True
    reserve_min_nodes: int = knob(
        8,
        int,
        "clusters of fewer nodes keep no interactive reserve",
        "nodes",
        lo=1,
        hi=1_000_000,
        step=1,
        ui=(1, 64),
    )

    def setup(self, ctx: Context) -> None:
        """Build the fair-share state, the lanes and the victim indexes."""
        super().setup(ctx)
        self.searches = Searches()
        self.fair.outside_change = self._outside_change
        self.open = OpenVictims()  # the funded running jobs that may be preempted now
        self._sides_of: dict[int, list[int]] = {}
        self._mine_of: dict[
            int, dict[int, int]
        ] = {}  # leaf -> side -> the leaf's side of that split
        self.unfunded_running: dict[int, None] = {}  # in start order: newest last
        nodes, cluster = ctx.capacity // ctx.gpus_per_node, ctx.view.cluster
        # Running funded multi-node gangs and their nodes: never victims of a single-node job
        # while max_victim_ratio <= 1, which makes hopeless searches cheap to rule out.
        self.gangs: set[int] = set()
        self.gang_nodes: set[int] = set()
        # The least blocked node (off the reserve, and anywhere), as of (epoch, searches version).
        self._least_blocked: list[tuple[tuple[int, int], int]] = [((-1, -1), 0), ((-1, -1), 0)]
        self.reserve = frozenset(range(nodes - self.reserved_nodes(nodes), nodes))
        self.off_reserve = nodes - len(self.reserve)  # nodes a funded job fits on without borrowing
        self.borrowers: dict[
            int, None
        ] = {}  # running funded jobs borrowing the reserve, newest last
        self.place: Place | None = None
        if self.reserve:
            self.place = lambda g, avoid: (
                cluster.best_fit(g, self.reserve | avoid) or cluster.best_fit(g, avoid)
            )
        # Draining (``drain_for_gangs``): the holder, its nodes, and the running jobs that borrow them.
        self.drain = Hold(lambda j: 0.0) if self.drain_for_gangs else None
        self._reclaim: frozenset[int] = frozenset()  # the jobs that yield to the searching holder
        if self.drain is not None:
            self.place = self._place_draining

    def _outside_change(self) -> None:
        """Another cluster of the fleet changed the organisation's allocation: fair-share
        verdicts may differ, so no earlier search stands and the next pass runs."""
        self.gate.note()
        self.searches.changed()

    def _place_draining(self, gpus: int, avoid: frozenset[int]) -> tuple[int, ...] | None:
        """Best fit off the draining nodes (and off the reserve) first; then off the reserve;
        then anywhere."""
        best_fit, draining = self.ctx.view.cluster.best_fit, self.drain.nodes  # type: ignore[union-attr]
        if draining:
            nodes = best_fit(gpus, self.reserve | draining | avoid)
            if nodes is not None:
                return nodes
        return (best_fit(gpus, self.reserve | avoid) if self.reserve else None) or best_fit(
            gpus, avoid
        )

    def drains(self, j: int, nodes: tuple[int, ...]) -> bool:
        """Whether job ``j`` on ``nodes`` borrows nodes draining for a gang: a drain holds, ``j``
        is not its holder nor a debug job (with the boost), and runs partly on its nodes. (Debug
        jobs are short, so they keep their protection there; protected interactive sessions
        would keep the nodes from the gang for hours.)"""
        drain = self.drain
        if drain is None or drain.holder < 0 or j == drain.holder or drain.nodes.isdisjoint(nodes):
            return False
        return not (self.boost and self.ctx.jobs[j].kind == "debug")

    def reserved_nodes(self, nodes: int) -> int:
        """Size of the interactive reserve: ceil(share x nodes) with the boost on a cluster of at
        least ``reserve_min_nodes`` nodes, leaving at least one node outside; else none."""
        if not self.boost or nodes < self.reserve_min_nodes:
            return 0
        return min(math.ceil(round(self.interactive_reserve * nodes, 9)), nodes - 1)

    def borrows(self, job: Job, nodes: tuple[int, ...]) -> bool:
        """Whether funded ``job`` on ``nodes`` borrows the reserve (``borrows_reserve``)."""
        return borrows_reserve(job, nodes, self.reserve, self.off_reserve, self.boosts)

    def holds_for_s(self, sched: Scheduler, j: int) -> float:
        """How long pending job ``j`` would keep its nodes from a reserved gang if started now:
        until it ends or its contract ends, whichever is sooner."""
        return min(sched.work_left(j), self.contract_of(sched.jobs[j]))

    def release_s(self, sched: Scheduler, j: int) -> float:
        """When running job ``j`` gives its nodes to a reserved gang: when it ends or may be
        preempted, whichever is sooner."""
        return min(sched.expected_end(j), sched.protected_until[j])

    def contract_of(self, job: Job) -> float:
        """The contract as the job declares it: min(declared minimum runtime, its kind's cap);
        none for unallocated work unless ``protect_unallocated``."""
        if not job.funded and not self.protect_unallocated:
            return 0.0
        return min(job.min_runtime_s, self.cap_s(job))

    def vacate_at(self, j: int, sched: Scheduler) -> float:
        """Maintenance waits for the contract, not for the job: a job may be stopped for it
        once its protection ends (at once if it has none)."""
        return sched.protected_until[j] if sched.protected(j) else sched.now

    def protection_s(self, job: Job) -> float:
        """The contract of an attempt, asked as it starts, once placed: none for a borrower of
        the reserve, nor on nodes draining for a gang."""
        contract = self.contract_of(job)
        if contract <= 0:
            return 0.0
        nodes = self.ctx.view.nodes[job.idx]
        if self.reserve and self.borrows(job, nodes):
            return 0.0
        if self.drain is not None and self.drains(job.idx, nodes):
            return 0.0
        return contract

    def start_note(self, j: int) -> str:
        """For a start that the drain leaves unprotected (it would have a contract otherwise),
        the drain's holder; else nothing."""
        job, nodes = self.ctx.jobs[j], self.ctx.view.nodes[j]
        if not self.drains(j, nodes) or (self.reserve and self.borrows(job, nodes)):
            return ""
        if self.contract_of(job) <= 0 or self.drain is None:
            return ""
        return DRAIN_NOTE + self.ctx.jobs[self.drain.holder].job_id

    def explainer(self, nodes: int) -> Explainer:
        """Stories under impactful: the reserve, the contract, and fair share's victims."""
        return ImpactfulExplainer(self, nodes)

    def cap_s(self, job: Job) -> float:
        """The protection cap of ``job``'s kind: ``cap_hours_interactive`` for sessions, if set."""
        if job.kind == SESSION and self.cap_hours_interactive is not None:
            return self.cap_hours_interactive * 3600.0
        return self.cap_hours * 3600.0

    @property
    def window_s(self) -> float:
        """The sliding fair-share window."""
        return self.window_days * DAY_S

    @property
    def boost(self) -> bool:
        """Debug/interactive first within their tier, if asked."""
        return self.boost_interactive

    def boosts(self, job: Job) -> bool:
        """Whether the boost applies to ``job``, debug/interactive work: first within its tier,
        free to clear the interactive reserve and to reclaim it from its borrowers."""
        return self.boost and job.kind in BOOSTED_KINDS

    def may_act(self, j: int) -> bool:
        """A funded job may preempt; an unallocated one matters only if it fits now."""
        return self.ctx.jobs[j].funded or super().may_act(j)

    def on_start(self, j: int, now: float) -> None:
        """Charge a funded job's budget from now on; remember it as a possible victim."""
        super().on_start(j, now)
        job = self.ctx.jobs[j]
        if self.drain is not None:
            self._drain_start(j, now)
        if job.funded:
            sched = self.ctx.view
            size = (
                job.held,
                bool(self.reserve) and self.reserve.issuperset(self.ctx.view.nodes[j]),
            )
            self.open.add(
                j,
                self.fair.paths[job.leaf][1:],
                size,
                sched.started_at[j],  # (ahead of now for a start waiting for GPUs in grace)
                sched.protected_until[j],
                sched.expected_end(j),
            )
            self.searches.changed()  # a new victim, and a side's allocation grew
            if self.reserve and self.borrows(job, self.ctx.view.nodes[j]):
                self.borrowers[j] = (
                    None  # (a borrowing gang blocks no one: it yields to debug work)
                )
            else:
                self._count_gang(j, +1)
        else:
            self.unfunded_running[j] = None

    def dequeue(self, j: int, now: float) -> None:
        """A withdrawn job leaves its queue; if it held the drain (or the drain was planned for
        it and found no nodes), the next pass plans the drain for another gang."""
        super().dequeue(j, now)
        if self.drain is not None and (j == self.drain.holder or self.drain.planned_for(j)):
            self.gate.note()

    def on_stop(self, j: int, now: float) -> None:
        """Stop charging; forget the job as a victim."""
        super().on_stop(j, now)
        job = self.ctx.jobs[j]
        if self.drain is not None:
            self.drain.stopped(j, now)
        if job.funded:
            self.open.remove(j)
            if j in self.borrowers:
                del self.borrowers[j]
            else:
                self._count_gang(j, -1)
        else:
            del self.unfunded_running[j]

    def _drain_start(self, j: int, now: float) -> None:
        """Track a start for the drain: its release time; the holder's start ends the drain."""
        drain = self.drain
        assert drain is not None
        drain.running(j, self.release_s(self.ctx.view, j))
        drain.started(j)

    def _count_gang(self, j: int, sign: int) -> None:
        if self.ctx.jobs[j].n_nodes > 1:
            if sign > 0:
                self.gangs.add(j)
                self.gang_nodes.update(self.ctx.view.nodes[j])
            else:
                self.gangs.discard(j)
                self.gang_nodes.difference_update(self.ctx.view.nodes[j])

    def schedule(self, now: float, sched: Scheduler) -> None:
        """Funded lanes by rank with preemption, then unallocated backfill."""
        refresh = now >= self.fair.next_refresh
        if self.gate.skip(sched, refresh):
            return
        self.searches.begin_pass(now)
        self._refresh_pass = refresh
        if refresh:
            self.fair.refresh(now)
            self.searches.refreshes += 1
            sched.wake_at(self.fair.next_refresh)  # gangs search then, even if nothing else happens
        self.plan(sched)
        if self.drain is not None:
            self._plan_drain(sched)
        gangs_too = refresh or self.gangs_preempt_every_pass
        self.queues.run(
            self.fair,
            sched,
            partial(self.make_room, sched),
            (self.place, self.place),
            self.searches,
            NO_LIMIT if gangs_too else sched.cluster.gpus_per_node,
            self.hold,
            partial(self.lane_blocked, sched),
        )
        self.gate.done(sched)

    def _plan_drain(self, sched: Scheduler) -> None:
        """The first funded gang in pass order that does not fit drains the nodes that free
        soonest for it. A new holder or new nodes change what searches may find (the holder's
        lane may have been skipped as stuck)."""
        drain = self.drain
        assert drain is not None
        before = (drain.holder, drain.nodes)
        drain.plan(sched, self.queues.top(self.fair, True, sched.cluster.gpus_per_node))
        if (drain.holder, drain.nodes) != before:
            self.searches.changed()

    def make_room(self, sched: Scheduler, j: int) -> Room:
        """Preempt eligible victims so that funded job ``j`` fits: ``Room.MADE`` if it now
        does; a failed search that judged fair shares (or a gang's, put off to the next
        refresh) is ``Room.NONE_UNTIL_REFRESH``, since a ranking refresh may change it."""
        job = sched.jobs[j]
        if job.n_nodes > 1 and not (self._refresh_pass or self.gangs_preempt_every_pass):
            return _UNTIL_REFRESH  # it searches at the next refresh
        boosted = self.boosts(job)
        verdicts = Verdicts()
        victims = None
        if not self._hopeless(sched, job, boosted):
            avoid = self._kept_off(boosted, job.n_nodes)
            if self.hold is not None and self.hold.constrains(sched, j, False):
                avoid = avoid | self.hold.nodes  # the nodes reserved for a gang stay out of reach
            self._reclaim = self._reclaimable(sched, j)
            if job.n_nodes == 1:
                victims = self._search_one_node(sched, j, avoid, boosted, verdicts)
            else:
                victims = self._walk_all(sched, j, avoid, boosted, verdicts)
        reason = (
            partial(self.why, sched, j) if victims is not None else None
        )  # (only a success asks why)
        return self.searches.preempt(sched, j, victims, reason, verdicts.judged)

    def _kept_off(self, boosted: bool, n_nodes: int) -> frozenset[int]:
        """The nodes a search for a job of ``n_nodes`` nodes of the tier ``boosted`` may not
        clear: the interactive reserve, which boosted jobs, and jobs that fit only with it,
        may clear (a reservation's nodes are added by the caller)."""
        return frozenset() if boosted or n_nodes > self.off_reserve else self.reserve

    def _reserve_too(self, avoid: frozenset[int]) -> bool:
        """Whether victims running only on the reserve may help a search kept off ``avoid``."""
        return not (avoid and avoid.issuperset(self.reserve))

    def _search_one_node(
        self, sched: Scheduler, j: int, avoid: frozenset[int], boosted: bool, verdicts: Verdicts
    ) -> list[int] | None:
        """The victims for single-node job ``j`` (None: no set makes room), as the walk of
        ``candidates`` would choose them, with the same ``verdicts``. Most searches are decided
        without the full walk, which is costly on long queues:

        * it cannot free room at all: none;
        * the first candidates (unallocated work and, for debug work, borrowers of the reserve)
          make room on some node: the walk stops among them whatever their order, so its
          victims are theirs, walked in its order;
        * they make room nowhere and no funded victim can ever be accepted
          (``_no_funded_victim``): none;
        * otherwise the walk of the funded candidates goes on from the room the first ones
          left: in any order they make room nowhere, so it reaches the funded ones with the
          same room. Only if it succeeds are its victims trimmed again from the walk's own
          order (the first candidates packed, if asked, then the funded ones it drew).

        Not while ``j`` holds the drain: its reclaimed jobs come before the funded ones."""
        job = sched.jobs[j]
        if not sched.cluster.could_free(job.gpus):
            return None  # (the walk stops before drawing a candidate)
        if self._reclaim:
            return self._walk_all(sched, j, avoid, boosted, verdicts)
        room: dict[int, int] = {}  # the state of the walk of the first candidates (unpacked)
        accepted: list[int] = []
        # (whether they make room does not depend on their order: the cheaper one first)
        first = walk_one(
            sched,
            job.gpus,
            self._first_candidates(sched, job, avoid, packed=False),
            avoid,
            room,
            accepted,
        )
        if first is not None and self.pack_victims:  # (the walk takes them in another order)
            first = walk_one(sched, job.gpus, self._first_candidates(sched, job, avoid), avoid)
        if first is not None:
            return first
        if self._no_funded_victim(sched, job, avoid, verdicts):
            return None
        if self._ruled_out(sched, job, avoid, boosted, verdicts):
            return None
        first_drawn = len(accepted)
        lender = boosted and bool(self.borrowers)
        funded = self._funded_candidates(sched, j, avoid, lender, verdicts)
        victims = walk_one(sched, job.gpus, funded, avoid, room, accepted)
        if victims is None:
            return None
        if self.pack_victims:  # (the first candidates were walked unpacked)
            first_candidates = self._first_candidates(sched, job, avoid)
            victims = walk_one(
                sched, job.gpus, chain(first_candidates, accepted[first_drawn:]), avoid
            )
            assert victims is not None  # (the same room, drawn in another order)
        return victims if self._approves(sched, j, verdicts)(victims) else None

    def _walk_all(
        self, sched: Scheduler, j: int, avoid: frozenset[int], boosted: bool, verdicts: Verdicts
    ) -> list[int] | None:
        """The victims the walk of ``candidates`` chooses for ``j`` (None: none make room),
        unless its search of whole nodes is ruled out at once."""
        if self._ruled_out(sched, sched.jobs[j], avoid, boosted, verdicts):
            return None
        return choose_victims(
            sched,
            j,
            self.candidates(sched, j, avoid, verdicts),
            self._approves(sched, j, verdicts),
            avoid,
        )

    def _ruled_out(
        self, sched: Scheduler, job: Job, avoid: frozenset[int], boosted: bool, verdicts: Verdicts
    ) -> bool:
        """True if ``job`` takes whole nodes and too few could be cleared
        (``_too_few_clearable``). The walk this spares might have judged fair shares, so
        ``verdicts`` says so."""
        if job.gpus < sched.cluster.gpus_per_node or not self._too_few_clearable(
            sched, job, avoid, boosted, self._reclaim
        ):
            return False
        verdicts.judged = True
        return True

    def _no_funded_victim(
        self, sched: Scheduler, job: Job, avoid: frozenset[int], verdicts: Verdicts
    ) -> bool:
        """True if no funded victim could ever be accepted for single-node ``job``, once the
        first candidates (which free no funded GPUs, so they change no swap) make room nowhere:
        no side's smallest victim passes the fair swap with nothing freed. Then the walk would
        still have judged fair shares if it drew a victim at all: this says so in ``verdicts``
        whenever a side has one it may break up (a lane judged without need is only scanned
        again at the next refresh, and fails the same way)."""
        self.open.refresh(sched.now, sched.shielded)
        reserve_too = self._reserve_too(avoid)
        fails = self._swaps_fail(job.leaf, job.held, reserve_too)
        if fails is None:
            return False
        if fails:
            verdicts.judged = True
        return True

    def _swaps_fail(self, leaf: int, held: int, reserve_too: bool) -> bool | None:
        """For a single-node job of ``held`` GPUs under ``leaf``: None if some side's smallest
        victim it may break up (``OpenVictims.smallest``, as refreshed) passes the fair swap
        with nothing freed yet; else whether any side has one at all (True: they all fail)."""
        index, largest, sides = self.open, self.max_victim_ratio * held, self._sides(leaf)
        no_better, mine_of = self.fair.no_better, self._mine_of[leaf]  # (filled by _sides)
        judged = False
        for theirs in sides:  # (the verdicts of ``_open_sides``, without its lists)
            smallest = index.smallest(theirs, largest, reserve_too)
            if smallest is not None:
                if no_better(mine_of[theirs], held, theirs, -smallest):
                    return None  # (``_passes_alone``, inline: this loop is the usual failed search)
                judged = True
        return judged

    def lane_blocked(self, sched: Scheduler, queue: SizeQueues, boosted: bool) -> bool:
        """A quick test, for a funded lane of the tier ``boosted`` whose scan would otherwise
        run, that no job of it can start in this pass (True: the scan would start nothing;
        False: it may). A few tests stand for the search of every job of the lane:

        * no job fits (the smallest size is above the largest free block);
        * a gang searches only at a ranking refresh: the lane has none, or this pass is not one;
        * a size may be hopeless (``_hopeless``); for the others, the first candidates
          (unallocated work, and the reserve's borrowers for debug work) make room for the
          smallest nowhere, so for none, and either no side's smallest victim passes the fair
          swap for any of them (``_first_passing``), or the first size for which one does
          takes a whole node (the largest single-node size) and too few could be cleared
          (``_too_few_clearable``).

        Every single-node search of the lane would then end with no victims (at one of these
        tests, or before it), whatever order the scan takes them in. The test is not made with
        a reservation (its nodes are kept from some jobs only)."""
        if self.hold is not None:
            return False
        cluster, sizes = sched.cluster, queue.sizes
        if sizes[0] <= cluster.largest_fit():
            return False
        per = cluster.gpus_per_node
        if sizes[-1] > per and (self._refresh_pass or self.gangs_preempt_every_pass):
            return False
        searched = sizes[: bisect.bisect_right(sizes, self._largest_hopeful(sched, boosted))]
        if not searched:
            return True  # (and gangs that search at the next refresh)
        some = sched.jobs[next(iter(queue.live))]  # (of the tier: it draws the same candidates)
        avoid = self._kept_off(boosted, 1)
        if self.unfunded_running or (boosted and self.borrowers):
            first = self._first_candidates(sched, some, avoid, False)
            if walk_one(sched, searched[0], first, avoid) is not None:
                return False
        self.open.refresh(sched.now, sched.shielded)
        gpus = self._first_passing(some.leaf, searched, self._reserve_too(avoid))
        if gpus is None:
            return True
        if gpus < per:
            return False
        whole = sched.jobs[queue.best_head(gpus + 1, above=gpus - 1)[0][-1]]  # type: ignore[index]
        return self._too_few_clearable(sched, whole, avoid, boosted, frozenset())

    def _first_passing(self, leaf: int, sizes: list[int], reserve_too: bool) -> int | None:
        """The smallest of ``sizes`` (single-node, ascending) for which ``_swaps_fail`` finds
        a side whose smallest victim passes the fair swap (None: for none of them), with one
        swap per side rather than one per side and size. A side's smallest victim (as
        refreshed) is the same for every size that may break it up (at least its GPUs over
        ``max_victim_ratio``), and the swap only gets harder as the job grows, so a side
        passes for no size or for a run of sizes that starts at the first one that may break
        its smallest victim up."""
        index, ratio, sides = self.open, self.max_victim_ratio, self._sides(leaf)
        no_better, mine_of = self.fair.no_better, self._mine_of[leaf]  # (filled by _sides)
        first = None
        for theirs in sides:
            smallest = index.smallest(theirs, math.inf, reserve_too)
            if smallest is None:
                continue
            for gpus in sizes:
                if first is not None and gpus >= first:
                    break
                if smallest <= ratio * gpus:  # (``OpenVictims.smallest``'s test, for this size)
                    if no_better(mine_of[theirs], gpus, theirs, -smallest):
                        first = gpus
                    break
        return first

    def _too_few_clearable(
        self,
        sched: Scheduler,
        job: Job,
        avoid: frozenset[int],
        boosted: bool,
        reclaim: frozenset[int],
    ) -> bool:
        """True if fewer nodes than ``job`` needs whole (it takes whole nodes) could be cleared by
        any walk: such a node holds no protected GPU, is not in ``avoid``, and every job on it
        could be drawn and accepted, those of each fair-share side together taking at most
        what any walk could take from that side (``FairTree.most_taken``, with the GPUs each
        budget node holds in preemptible jobs, ``OpenVictims.gpus``). So the test never rules out
        a search that can succeed. It reads the jobs of the nodes without protected work only,
        and stops at the first one that fails."""
        need, now = job.n_nodes, sched.now
        started, shielded, jobs, on_node = (
            sched.started_at,
            sched.shielded,
            sched.jobs,
            sched.on_node,
        )
        split, leaf, largest = self.fair.split, job.leaf, self.max_victim_ratio * job.held
        self.open.refresh(now, shielded)  # (the bound counts the open jobs as of now)
        can_take = self.fair.most_taken(leaf, job.held, self.open.gpus)  # side -> GPUs
        lent = self.borrowers if boosted else ()
        for n in sched.cluster.unshielded:
            if n in avoid:
                continue
            taken: dict[int, int] = {}  # side -> GPUs its jobs on n hold
            for v in on_node[n]:
                if started[v] >= now or shielded[v]:
                    break
                victim = jobs[v]
                if not victim.funded or v in lent or v in reclaim:
                    continue
                if victim.leaf == leaf or victim.held > largest:
                    break
                theirs = split(leaf, victim.leaf)[1]  # type: ignore[index]
                gpus = taken.get(theirs, 0) + victim.held
                if gpus > can_take[theirs]:
                    break
                taken[theirs] = gpus
            else:
                need -= 1
                if not need:
                    return False
        return True

    def why(self, sched: Scheduler, j: int, v: int) -> str:
        """Why victim ``v`` yields to job ``j``: it is unallocated, it borrows the reserve ``j``
        may reclaim, or its side of their lowest common ancestor is the more over-served."""
        job, victim = sched.jobs[j], sched.jobs[v]
        if not victim.funded:
            return BACKFILL_REASON
        if v in self.borrowers and self.boosts(job):
            return RESERVE_REASON
        if self._reclaims(j, v):
            return DRAIN_REASON
        return self.fair.why(*self.fair.split(job.leaf, victim.leaf))  # type: ignore[misc]

    def _reclaims(self, j: int, v: int) -> bool:
        """Whether ``v`` yields to ``j`` at once: ``j`` holds the drain and ``v`` is unprotected
        on its nodes (as of ``j``'s current search)."""
        return v in self._reclaim and self.drain is not None and self.drain.holder == j

    def _reclaimable(self, sched: Scheduler, j: int) -> frozenset[int]:
        """The funded jobs that yield to ``j`` at once if it holds the drain: every unprotected
        one on the draining nodes, its own project's and larger gangs included, whatever the fair
        shares (docs/design-choices.md lists the narrower rules measured)."""
        drain = self.drain
        if drain is None or drain.holder != j:
            return frozenset()
        now, jobs, started, shielded = sched.now, sched.jobs, sched.started_at, sched.shielded
        return frozenset(
            v
            for n in drain.nodes
            for v in sched.on_node[n]
            if jobs[v].funded and not shielded[v] and started[v] < now
        )

    def _hopeless(self, sched: Scheduler, job: Job, boosted: bool) -> bool:
        """A single-node job cannot break up gangs: True if every node it may use is too full
        of them and of protected jobs (a necessary condition only; the search decides)."""
        return job.n_nodes == 1 and job.gpus > self._largest_hopeful(sched, boosted)

    def _largest_hopeful(self, sched: Scheduler, boosted: bool) -> int:
        """The largest single-node job of the tier ``boosted`` that is not ``_hopeless``."""
        per = sched.cluster.gpus_per_node
        if self.max_victim_ratio > 1:
            return per
        key = (
            sched.epoch,
            self.searches.version,
        )  # shields and gangs only shrink with a change of these
        known = self._least_blocked[boosted]
        if known[0] != key:
            known = self._least_blocked[boosted] = (key, self._least_blocked_now(sched, boosted))
        return per - known[1]

    def _least_blocked_now(self, sched: Scheduler, boosted: bool) -> int:
        """The fewest GPUs that protected work and funded gangs hold on a node the job may use.
        A gang holds whole nodes, so its nodes are either wholly protected or hold nothing
        else: only the unprotected ones move from level 0 of the cluster's shield counts."""
        cluster = sched.cluster
        kept = 0 if boosted else len(self.reserve)
        if cluster.by_shield[0] > len(self.gang_nodes) + kept:
            return 0  # (the usual answer, without counting: some node is free of both)
        jobs, shielded = sched.jobs, sched.shielded
        levels = cluster.by_shield.copy()  # nodes per count of protected GPUs
        levels[0] -= sum(jobs[g].n_nodes for g in self.gangs if not shielded[g])
        if kept:
            for n in self.reserve:
                if n not in self.gang_nodes:  # (a gang's nodes are already placed above)
                    levels[cluster.shielded[n]] -= 1
        for level, count in enumerate(levels):
            if count > 0:
                return level
        return cluster.gpus_per_node

    def candidates(
        self, sched: Scheduler, j: int, avoid: frozenset[int], verdicts: Verdicts
    ) -> Iterator[int]:
        """Preemptible running jobs in preference order: unallocated, the most recently started
        first (for a single-node job with ``pack_victims``, those on the most protected nodes
        first); then funded on the most over-served side of the lowest common ancestor, newest
        first. A job started at this very instant is never a victim, nor a gang too large to
        break up, nor a job running only on nodes in ``avoid`` (where ``j`` may not go).

        No ping-pong, judged as the walk draws them: with the funded victims handed out so far
        gone, ``j``'s side must stay no better served than the next funded victim's side (a
        refusal is noted in the search's ``verdicts``)."""
        started, job = sched.started_at, sched.jobs[j]
        yield from self._first_candidates(sched, job, avoid)
        lender = bool(self.borrowers) and self.boosts(job)
        reclaim = (
            self._reclaim if self.drain is not None and self.drain.holder == j else frozenset()
        )
        if reclaim:  # unprotected work on the draining nodes yields to their gang at once
            for v in sorted(reclaim, key=lambda v: (started[v], v), reverse=True):
                if not (lender and v in self.borrowers):
                    yield v
        yield from self._funded_candidates(sched, j, avoid, lender, verdicts, reclaim)

    def _first_candidates(
        self, sched: Scheduler, job: Job, avoid: frozenset[int], packed: bool = True
    ) -> Iterator[int]:
        """The candidates a walk draws before any funded one: unallocated work (``packed``:
        for a single-node job with ``pack_victims``, in that order), then, for debug and
        interactive work, the borrowers of the reserve, which yield to it at once."""
        if packed and self.pack_victims and job.n_nodes == 1:
            yield from self._unfunded_packed(sched, avoid)
        elif self.unfunded_running:  # (a gang needs nodes free of protected work: the old order)
            yield from self._unfunded(sched, avoid)
        if self.borrowers and self.boosts(job):
            yield from self._lent(sched, avoid)

    def _unfunded(self, sched: Scheduler, avoid: frozenset[int]) -> Iterator[int]:
        """Unallocated running jobs that may be preempted now, the most recently started first
        (not started at this very instant, nor running only on nodes in ``avoid``)."""
        now, started, shielded, nodes = sched.now, sched.started_at, sched.shielded, sched.nodes
        for v in reversed(self.unfunded_running):
            if started[v] < now and not shielded[v] and not (avoid and avoid.issuperset(nodes[v])):
                yield v

    def _unfunded_packed(self, sched: Scheduler, avoid: frozenset[int]) -> list[int]:
        """``_unfunded`` for a single-node job with ``pack_victims``: the jobs on the nodes with
        the most protected GPUs first (the most on any of a job's nodes), newest first within."""
        shielded, nodes = sched.cluster.shielded, sched.nodes
        victims = list(self._unfunded(sched, avoid))
        most = [  # (most are single-node jobs: one look each)
            shielded[on[0]] if len(on) == 1 else max(map(shielded.__getitem__, on))
            for on in map(nodes.__getitem__, victims)
        ]
        order = sorted(range(len(victims)), key=most.__getitem__, reverse=True)  # (stable)
        return [victims[k] for k in order]

    def _lent(self, sched: Scheduler, avoid: frozenset[int]) -> Iterator[int]:
        """Borrowers of the reserve that may yield to debug work now, newest first."""
        now, started, nodes = sched.now, sched.started_at, sched.nodes
        for v in reversed(self.borrowers):
            if started[v] < now and not (avoid and avoid.issuperset(nodes[v])):
                yield v

    def _judge_none_passing(
        self,
        sched: Scheduler,
        sides: list[tuple[int, list[tuple[int, bool]], bool]],
        avoid: frozenset[int],
        lender: bool,
        verdicts: Verdicts,
    ) -> None:
        """With no side passing the swap, the walk would still have drawn (and judged) a victim
        if one is drawable: then a refresh may change the verdict (``verdicts`` says so)."""
        if not verdicts.judged and any(
            self._drawable(sched, [(side, size) for size in sizes], avoid, lender)
            for side, sizes, _ in sides
        ):
            verdicts.judged = True

    def _funded_candidates(
        self,
        sched: Scheduler,
        j: int,
        avoid: frozenset[int],
        lender: bool,
        verdicts: Verdicts,
        reclaim: frozenset[int] = frozenset(),
    ) -> Iterator[int]:
        """The funded part of ``candidates``, from the index of unprotected victims under each
        side of ``j``'s splits: sides most over-served first (equal values merge by start
        time); a side whose smallest victim fails the fair swap is left at once (a larger one
        would fail too, until an accepted victim changes what is freed). A verdict that judged
        fair shares is noted in ``verdicts``."""
        now, nodes, jobs, fair, job = sched.now, sched.nodes, sched.jobs, self.fair, sched.jobs[j]
        index = self.open
        index.refresh(now, sched.shielded)
        sides = self._open_sides(job, avoid)
        passes = {side: ok for side, _, ok in sides}
        if not any(passes.values()):
            # No victim passes the swap while nothing is freed, so none is ever accepted (the
            # usual failed search): skip the walk, keeping its one verdict.
            self._judge_none_passing(sched, sides, avoid, lender, verdicts)
            return
        groups: dict[float, list[tuple[int, tuple[int, bool]]]] = {}  # served -> (side, size) lists
        smallest: dict[int, int] = {}  # side -> its smallest eligible victim size
        for theirs, sizes, _ in sides:
            smallest[theirs] = sizes[0][0]
            groups.setdefault(fair.served(theirs), []).extend((theirs, size) for size in sizes)
        freed: dict[int, int] = {}  # funded GPUs taken from each tree node by the victims so far
        failed: dict[int, int] = {}  # side -> smallest size that failed since the last victim
        mine_of, no_better, held = (
            self._mine_of[job.leaf],
            fair.no_better,
            job.held,
        )  # (filled by _open_sides)
        for served in sorted(groups, reverse=True):
            group = groups[served]
            if not freed and not any(passes[side] for side, _ in group):
                # Every victim of the group would fail the swap: skip the walk, as above.
                if not verdicts.judged and self._drawable(sched, group, avoid, lender):
                    verdicts.judged = True
                continue
            for s, v, theirs in index.newest_first(group):
                if s >= now or (lender and v in self.borrowers) or v in reclaim:
                    continue  # started at this instant, or handed out already
                if avoid and avoid.issuperset(nodes[v]):
                    continue  # freeing the reserve does not help
                victim = jobs[v]
                gpus, mine = (
                    victim.held,
                    mine_of[theirs],
                )  # (``_fair_swap``, inline: the victim is under theirs)
                if gpus < failed.get(theirs, NO_LIMIT) and no_better(
                    mine, held - freed.get(mine, 0), theirs, -freed.get(theirs, 0) - gpus
                ):
                    for node in fair.paths[victim.leaf]:
                        freed[node] = freed.get(node, 0) + gpus
                    failed.clear()
                    yield v
                    continue
                verdicts.judged = True  # a refresh may change this verdict
                failed[theirs] = min(failed.get(theirs, NO_LIMIT), gpus)
                if all(failed.get(side, NO_LIMIT) <= smallest[side] for side, _ in group):
                    break  # every victim left in this group would fail too

    def _open_sides(
        self, job: Job, avoid: frozenset[int]
    ) -> list[tuple[int, list[tuple[int, bool]], bool]]:
        """(side, the sizes of its victims ``job`` may break up, smallest first, whether its
        smallest passes the fair swap with nothing freed yet) for each side of ``job``'s
        splits with victims. With nothing freed, the verdict depends only on the victim's size
        and gets no better as it grows (the same sums as ``_fair_swap``)."""
        largest, index = self.max_victim_ratio * job.held, self.open
        reserve_too = self._reserve_too(avoid)
        sides = self._sides(job.leaf)
        found = []
        for theirs in sides:
            sizes = index.eligible(theirs, largest, reserve_too)
            if sizes:
                found.append((theirs, sizes, self._passes_alone(job, theirs, sizes[0][0])))
        return found

    def _passes_alone(self, job: Job, theirs: int, gpus: int) -> bool:
        """Whether a victim of ``gpus`` under side ``theirs`` passes ``job``'s fair swap with
        nothing freed yet (``_fair_swap``'s sums)."""
        return self.fair.no_better(self._mine_of[job.leaf][theirs], job.held, theirs, -gpus)

    def _drawable(
        self,
        sched: Scheduler,
        group: list[tuple[int, tuple[int, bool]]],
        avoid: frozenset[int],
        lender: bool,
    ) -> bool:
        """Whether the walk of ``group`` would draw (and judge) a victim at all: one started
        before now, not handed out already, not only on nodes in ``avoid``."""
        now, nodes, borrowers, lists = sched.now, sched.nodes, self.borrowers, self.open.lists
        for key in group:
            for s, v in reversed(lists[key]):
                if (
                    s < now
                    and not (lender and v in borrowers)
                    and not (avoid and avoid.issuperset(nodes[v]))
                ):
                    return True
        return False

    def _sides(self, leaf: int) -> list[int]:
        """The other side of every split between ``leaf`` and another leaf: the siblings of
        each node on its path, from the root down (cached; the tree does not change)."""
        sides = self._sides_of.get(leaf)
        if sides is None:
            levels = self.fair.levels(leaf)  # (from the leaf up)
            sides = self._sides_of[leaf] = [c for _, siblings in reversed(levels) for c in siblings]
            self._mine_of[leaf] = {c: mine for mine, siblings in levels for c in siblings}
        return sides

    def _approves(self, sched: Scheduler, j: int, verdicts: Verdicts) -> Approve:
        """No ping-pong on the final set: after the swap, ``j``'s side is no better served than
        the side of every funded victim (a refusal judged fair shares: ``verdicts`` says so)."""
        jobs, fair, job = sched.jobs, self.fair, sched.jobs[j]

        lender = self.boosts(job)
        borrowers = self.borrowers

        def approve(victims: list[int]) -> bool:
            funded = [
                jobs[v]
                for v in victims
                if jobs[v].funded and not (lender and v in borrowers) and not self._reclaims(j, v)
            ]
            freed: dict[int, int] = {}
            for victim in funded:
                for node in fair.paths[victim.leaf]:
                    freed[node] = freed.get(node, 0) + victim.held
            if all(self._fair_swap(job, victim, freed, 0) for victim in funded):
                return True
            verdicts.judged = True
            return False

        return approve

    def _fair_swap(self, job: Job, victim: Job, freed: dict[int, int], extra: int) -> bool:
        """Whether ``job``'s side stays no better served than ``victim``'s side at their lowest
        common ancestor, with ``freed`` (plus ``extra`` from the victim's side) taken away."""
        mine, theirs = self.fair.split(job.leaf, victim.leaf)  # type: ignore[misc]
        return self.fair.no_better(
            mine, job.held - freed.get(mine, 0), theirs, -freed.get(theirs, 0) - extra
        )


def borrows_reserve(
    job: Job,
    nodes: tuple[int, ...],
    reserve: frozenset[int],
    off_reserve: int,
    boosts: Callable[[Job], bool],
) -> bool:
    """Whether funded ``job`` on ``nodes`` borrows the interactive ``reserve``: it fits on the
    ``off_reserve`` nodes, runs partly on the reserve, and is not debug/interactive work under
    the boost (``boosts``: ``Impactful.boosts``, asked last)."""
    return (
        job.funded
        and job.n_nodes <= off_reserve
        and not reserve.isdisjoint(nodes)
        and not boosts(job)
    )


class ImpactfulExplainer(Explainer):
    """impactful's answers to a story's questions: the contract (none for a borrower of the
    reserve, nor on nodes draining for a gang), preemption for funded work only, and why
    unprotected funded jobs were spared (own project, too large, no-ping-pong, the reserve)."""

    policy: Impactful

    def __init__(self, policy: Impactful, nodes: int):
        super().__init__(policy, nodes)
        self.reserve = frozenset(range(nodes - policy.reserved_nodes(nodes), nodes))
        self.off_reserve = nodes - len(self.reserve)

    def borrows(self, job: Job, nodes: tuple[int, ...]) -> bool:
        """As the policy decides it, for this run's reserve."""
        return borrows_reserve(job, nodes, self.reserve, self.off_reserve, self.policy.boosts)

    def boosted(self, job: Job) -> bool:
        """Debug/interactive work under the boost (``Impactful.boosts``)."""
        return self.policy.boosts(job)

    def protection_s(self, job: Job, nodes: tuple[int, ...], note: str) -> float:
        """The contract, unless the attempt borrowed the reserve or a gang's draining nodes
        (its start note says so)."""
        if self.borrows(job, nodes) or note.startswith(DRAIN_NOTE):
            return 0.0
        return self.policy.contract_of(job)

    def unprotected_because(self, job: Job, nodes: tuple[int, ...], note: str) -> str:
        """A borrower of the reserve, or a start on nodes draining for a gang."""
        if self.borrows(job, nodes):
            return "it borrows the interactive reserve"
        if note.startswith(DRAIN_NOTE):
            holder = note[len(DRAIN_NOTE) :]
            return f"it runs on nodes draining for job {holder}, which reclaims them"
        return ""

    def preempts_for(self, job: Job) -> bool:
        """Funded work preempts; unallocated work only backfills."""
        return job.funded

    def no_preemption(self, job: Job) -> str:
        """Unallocated work never preempts."""
        return "unallocated work only backfills: it never preempts"

    def spared(
        self, job: Job, unprotected: Sequence[Attempt], had_room: bool
    ) -> list[tuple[str, str]]:
        """Fair share's reasons (when no block was free), then the reserve's."""
        out = [] if had_room or not job.funded else self._fair_share(job, unprotected)
        return out + self._reserve(job)

    def _fair_share(self, job: Job, unprotected: Sequence[Attempt]) -> list[tuple[str, str]]:
        """Unprotected funded jobs that were no victims of ``job``, and why not."""
        policy = self.policy
        free = [
            other
            for other, nodes in unprotected
            if other.funded and not (self.boosted(job) and self.borrows(other, nodes))
        ]
        if not free:
            return []
        own = [v for v in free if v.leaf == job.leaf]
        large = [
            v for v in free if v.leaf != job.leaf and v.held > policy.max_victim_ratio * job.held
        ]
        rest = len(free) - len(own) - len(large)
        parts = [f"{len(own)} of its own project (never its victims)"] if own else []
        if large:
            parts.append(
                f"{len(large)} too large to break up for it (max_victim_ratio {policy.max_victim_ratio:g})"
            )
        if rest:
            parts.append(
                f"{rest} on {'a side' if rest == 1 else 'sides'} no more over-served than its own "
                "(the no-ping-pong rule), or not where freeing them would make room"
            )
        gang = (
            f"; a gang looks for victims only at ranking refreshes (every {span(policy.refresh_s)})"
            if job.n_nodes > 1 and not policy.gangs_preempt_every_pass
            else ""
        )
        gpus, n = sum(v.held for v in free), len(free)
        return [
            (
                "fair_share",
                (
                    f"{n} unprotected funded job{plural(n)} holding {gpus} GPUs "
                    f"{'was' if n == 1 else 'were'} not preempted for it: {'; '.join(parts)}{gang}"
                ),
            )
        ]

    def _reserve(self, job: Job) -> list[tuple[str, str]]:
        """The reserve, which funded work that fits elsewhere may use but not clear."""
        reserve = self.reserve
        if not reserve or not job.funded or self.boosted(job) or job.n_nodes > self.off_reserve:
            return []
        nodes = (
            f"node {min(reserve)} is"
            if len(reserve) == 1
            else f"nodes {min(reserve)}-{max(reserve)} are"
        )
        return [
            (
                "reserve",
                (
                    f"{nodes} the interactive reserve, held for debug and interactive work: it may "
                    "use them when free, but may not preempt there"
                ),
            )
        ]
