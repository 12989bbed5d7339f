"""Several clusters in one run (a fleet): their engines share one clock.

Each cluster keeps its own nodes, queues, policy and scheduling pass, and a job runs on one
cluster only. Their events interleave on one clock in time order (ties in the order they were
set), so the clusters live through the same instants. Once every event of an instant has fired,
each cluster whose state changed runs its pass, in the order the clusters were declared; a call
due at the same instant (a pass can set one) fires first, and the passes resume after it.

What else the clusters share is the policies' business, through ``Organisation`` (for example
one fair-share usage meter for the whole organisation, ``impactlab.policies.fair``). A change
made by one cluster starts no pass in another: each cluster reads the shared state when its own
events call for a pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .clock import Call, Clock
from .policy import Organisation


class Member(Protocol):
    """What the fleet needs of a cluster's engine."""

    now: float

    def passes(self, now: float) -> None:
        """Run the cluster's due passes at ``now`` until a call is due at this instant."""


@dataclass(frozen=True)
class FleetSeat:
    """What one cluster's engine takes from its fleet.

    ``streams``: the index of the cluster's own random streams (empty for the first cluster,
    which draws as a run of that cluster alone does); ``first_node``: the number of its first
    node among the fleet's (node failures draw from one stream per fleet node).
    """

    clock: Clock
    fire: Callable[[Member], Callable[[Call], None]]
    streams: tuple[int, ...]
    first_node: int
    org: Organisation | None


class Fleet:
    """The shared clock of several clusters' engines, and the order of their passes."""

    def __init__(self, org: Organisation | None = None) -> None:
        self.clock = Clock(self._stray)
        self.org = org
        self.members: list[Member] = []
        self._report_at, self._report_step = math.inf, math.inf
        self._progress: Callable[[float], None] | None = None

    def seat(self, index: int, first_node: int) -> FleetSeat:
        """The seat of the fleet's ``index``-th cluster, whose nodes start at ``first_node``."""
        return FleetSeat(self.clock, self.fire, (index,) if index else (), first_node, self.org)

    def fire(self, member: Member) -> Callable[[Call], None]:
        """The function that fires ``member``'s calls (the member joins the pass order)."""
        self.members.append(member)
        clock = self.clock

        def fire(call: Call) -> None:
            now = member.now = clock.now
            if now >= self._report_at:
                self._report(now)
            call.fn(*call.args)
            if not clock.due_at(now):
                self._passes(now)

        return fire

    def _passes(self, now: float) -> None:
        """Every cluster runs its due passes, in order, unless a call becomes due first."""
        for member in self.members:
            member.passes(now)
            if self.clock.due_at(now):
                return  # it fires first; the passes resume after it

    @staticmethod
    def _stray(call: Call) -> None:
        raise RuntimeError("a call on the fleet's clock that no cluster owns")

    def run(
        self,
        horizon_s: float,
        begin: list[Callable[[], None]],
        progress: Callable[[float], None] | None = None,
        reports: int = 200,
    ) -> None:
        """Start every cluster (``begin``, in order) and run the clock to ``horizon_s``;
        ``progress(t_s)`` is called about ``reports`` times in simulated time."""
        if progress is not None:
            self._progress, self._report_step, self._report_at = progress, horizon_s / reports, 0.0
        for start in begin:
            start()
        self.clock.run(until=horizon_s)
        if progress is not None:
            progress(horizon_s)

    def _report(self, now: float) -> None:
        assert self._progress is not None
        self._progress(now)
        self._report_at = (now // self._report_step + 1) * self._report_step
