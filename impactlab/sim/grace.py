"""GPUs in a preemption's grace period: given back to the cluster, not yet really free.

A preempted job keeps its GPUs for the grace period after the decision (the engine logs their
release then). The engine gives them back to the cluster at once, so that the policy's pass
places the job it made room for as usual, and records them here. A start that needs more GPUs
on a node than are free outside the grace periods takes the soonest-released ones, and begins
when the last of them is released: nothing is ever held twice, and the log shows each GPU held
by one job at a time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class Grant:
    """GPUs released by ``victim`` on ``node`` at ``release_s`` (``gpus`` not yet claimed)."""

    release_s: float
    gpus: int
    victim: int


@dataclass
class GraceBook:
    """Per node, the grants still in grace (soonest first); per claiming job, what it took."""

    nodes: int
    on_node: list[list[Grant]] = field(init=False)
    taken: dict[int, list[tuple[int, Grant]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.on_node = [[] for _ in range(self.nodes)]

    def grant(self, victim: int, nodes: tuple[int, ...], per_node: int, release_s: float) -> None:
        """``victim`` gives back ``per_node`` GPUs on each of ``nodes``, really free at ``release_s``."""
        for n in nodes:
            self._insert(n, Grant(release_s, per_node, victim))

    def claim(self, j: int, nodes: tuple[int, ...], free_after: list[int]) -> float:
        """Job ``j`` has just taken its GPUs on ``nodes`` (``free_after``: the cluster's free GPUs
        now): on each node, take from the grants what the GPUs free outside them do not cover.
        Returns the latest release among them (-inf if none were needed)."""
        begin = -float("inf")
        for n in nodes:
            grants = self.on_node[n]
            short = sum(g.gpus for g in grants) - free_after[n]  # GPUs j holds that are in grace
            while short > 0:
                g = grants[0]
                used = min(short, g.gpus)
                g.gpus -= used
                short -= used
                self.taken.setdefault(j, []).append((n, Grant(g.release_s, used, g.victim)))
                begin = max(begin, g.release_s)
                if not g.gpus:
                    grants.pop(0)
        return begin

    def began(self, j: int) -> None:
        """Job ``j``'s claimed GPUs are all released: forget its claim."""
        self.taken.pop(j, None)

    def unclaim(self, j: int, leaving: set[int] | dict[int, bool]) -> None:
        """Job ``j`` gives up its claim before it began: grants of victims still leaving return."""
        for n, g in self.taken.pop(j, []):
            if g.victim in leaving:
                self._insert(n, g)

    def release(self, victim: int, nodes: tuple[int, ...]) -> None:
        """``victim``'s grace is over (or cut short): its unclaimed GPUs are simply free."""
        for n in nodes:
            self.on_node[n] = [g for g in self.on_node[n] if g.victim != victim]

    def _insert(self, n: int, grant: Grant) -> None:
        bisect.insort(self.on_node[n], grant, key=lambda g: g.release_s)
