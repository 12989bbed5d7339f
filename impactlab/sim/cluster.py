"""Nodes, free-GPU counts and gang placement with best fit (docs/model.md section 1)."""

from __future__ import annotations

import heapq

from ..base.gangs import gpus_on_each, nodes_needed


class Cluster:
    """Free GPUs per node, indexed by free count so best fit never scans all nodes.

    Invariant: node ``n`` is in ``by_free[free[n]]`` for every node in service; a node taken out
    (in ``down``) has no free GPUs and is in no ``by_free`` set. A node is in ``unshielded``
    exactly when no protected GPU is on it (a node out of service counts as wholly protected).

    A *cordoned* node (announced for maintenance) still runs its jobs but takes no new ones:
    to every reader it has no free GPU and is wholly protected (no search can make room on
    it), while ``cordoned[n]`` counts its GPUs really free, so that it is known when it is empty.
    """

    def __init__(self, nodes: int, gpus_per_node: int = 8):
        if nodes < 1 or gpus_per_node < 1:
            raise ValueError(
                f"a cluster needs nodes >= 1 and gpus_per_node >= 1, got {nodes}, {gpus_per_node}"
            )
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.capacity = nodes * gpus_per_node
        self.free = [gpus_per_node] * nodes
        self.free_total = self.capacity
        self.by_free: list[set[int]] = [set() for _ in range(gpus_per_node + 1)]
        self.by_free[gpus_per_node].update(range(nodes))
        self._largest = -1  # cache of largest_fit(); -1 = stale
        # GPUs per node held by jobs that may not be preempted now, and nodes per shield level:
        # a cheap necessary test before any search for preemption victims.
        self.shielded = [0] * nodes
        self.by_shield = [nodes] + [0] * gpus_per_node
        self.unshielded: set[int] = set(range(nodes))  # nodes in service with no protected GPU
        self.down: set[int] = set()  # nodes taken out of service:, never placed on
        self.cordoned: dict[int, int] = {}  # node -> GPUs really free on it (its jobs leaving)

    def largest_fit(self) -> int:
        """The largest gang that could be placed right now (0 if none); cached until a change."""
        if self._largest < 0:
            by_free = self.by_free
            k = self.gpus_per_node
            if len(by_free[k]) > 1:
                self._largest = len(by_free[k]) * k
            else:
                while k and not by_free[k]:
                    k -= 1
                self._largest = k
        return self._largest

    def best_fit(self, gpus: int, avoid: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
        """Nodes for a gang: the fullest node that fits, or the lowest-numbered whole free nodes;
        never a node in ``avoid``."""
        per = self.gpus_per_node
        if gpus > self.free_total:
            return None
        if gpus <= per:
            for k in range(gpus, per + 1):
                nodes = self.by_free[k]
                if nodes:
                    n = min(nodes)
                    if n in avoid:  # rare: avoided nodes are few
                        n = min((n for n in nodes if n not in avoid), default=-1)
                    if n >= 0:
                        return (n,)
            return None
        need = nodes_needed(gpus, per)
        whole = self.by_free[per]
        if len(whole) < need:
            return None
        if avoid:
            whole = whole - avoid
            if len(whole) < need:
                return None
        return tuple(sorted(heapq.nsmallest(need, whole)))

    def take(self, nodes: tuple[int, ...], gpus: int) -> None:
        """Allocate a gang on ``nodes``; raises if the placement is malformed or has no room."""
        if len(nodes) != nodes_needed(gpus, self.gpus_per_node) or len(set(nodes)) != len(nodes):
            raise RuntimeError(f"a {gpus}-GPU gang cannot be placed on nodes {nodes}")
        per_node = gpus_on_each(gpus, self.gpus_per_node)
        for n in nodes:
            if self.free[n] < per_node:
                raise RuntimeError(f"node {n} has {self.free[n]} free GPUs, cannot take {per_node}")
        for n in nodes:
            self._set(n, self.free[n] - per_node)

    def give_back(self, nodes: tuple[int, ...], gpus: int) -> None:
        """Release a gang previously taken on ``nodes``; raises if they did not hold it."""
        per_node = gpus_on_each(gpus, self.gpus_per_node)
        cordoned = self.cordoned
        for n in nodes:
            free = cordoned[n] if cordoned and n in cordoned else self.free[n]
            if free + per_node > self.gpus_per_node:
                raise RuntimeError(f"node {n} has {free} free GPUs, cannot give back {per_node}")
        for n in nodes:
            if cordoned and n in cordoned:
                cordoned[n] += per_node  # (it stays closed to new work)
            else:
                self._set(n, self.free[n] + per_node)

    def take_out(self, node: int) -> None:
        """Take an idle node out of service (a down node is never placed on)."""
        if self.free[node] != self.gpus_per_node or node in self.down:
            raise RuntimeError(
                f"node {node} cannot be taken out of service: it is busy or already down"
            )
        self._set(node, 0)
        self.by_free[0].discard(node)
        self._reshield(node, self.gpus_per_node)  # nothing on it can be cleared for a gang
        self.down.add(node)

    def cordon(self, node: int) -> None:
        """Close a node in service to new work (announced maintenance); its jobs run on."""
        if node in self.down or node in self.cordoned:
            raise RuntimeError(f"node {node} cannot be cordoned: it is down or cordoned already")
        self.cordoned[node] = self.free[node]
        self._set(node, 0)
        self._reshield(node, self.gpus_per_node)  # nothing on it can be cleared for a gang

    def idle(self, node: int) -> bool:
        """Whether cordoned ``node`` holds no job any more."""
        return self.cordoned[node] == self.gpus_per_node

    def close(self, node: int) -> None:
        """Take an empty cordoned node out of service (down for maintenance)."""
        if not self.idle(node):
            raise RuntimeError(f"node {node} cannot go down: jobs still hold GPUs on it")
        del self.cordoned[node]
        self.by_free[0].discard(node)
        self.down.add(node)

    def restore(self, node: int) -> None:
        """Bring a repaired node back into service, empty."""
        if node not in self.down:
            raise RuntimeError(f"node {node} is not down")
        self.down.discard(node)
        self.by_free[0].add(node)
        self._set(node, self.gpus_per_node)
        self._reshield(node, 0)

    def _reshield(self, node: int, value: int) -> None:
        self.by_shield[self.shielded[node]] -= 1
        self.shielded[node] = value
        self.by_shield[value] += 1
        if value:
            self.unshielded.discard(node)
        else:
            self.unshielded.add(node)

    def shield(self, nodes: tuple[int, ...], gpus: int, sign: int) -> None:
        """Mark a gang's GPUs as protected from preemption (+1) or no longer (-1). A cordoned
        node stays wholly protected (it comes back into service empty, with no shield)."""
        per_node = gpus_on_each(gpus, self.gpus_per_node)
        cordoned = self.cordoned
        for n in nodes:
            if not (cordoned and n in cordoned):
                self._reshield(n, self.shielded[n] + sign * per_node)

    def could_free(self, gpus: int) -> bool:
        """False when no choice of unprotected victims can make room for a gang of ``gpus``."""
        if gpus <= self.gpus_per_node:
            return any(self.by_shield[: self.gpus_per_node - gpus + 1])
        return self.by_shield[0] >= nodes_needed(gpus, self.gpus_per_node)

    def _set(self, node: int, free: int) -> None:
        old = self.free[node]
        self.by_free[old].discard(node)
        self.by_free[free].add(node)
        self.free[node] = free
        self.free_total += free - old
        self._largest = -1


def best_fit_on(free: list[int], gpus: int, gpus_per_node: int) -> tuple[int, ...] | None:
    """Best-fit placement on an explicit free-GPU list, by scanning (for what-if planning)."""
    if gpus <= gpus_per_node:
        fits = [(f, n) for n, f in enumerate(free) if f >= gpus]
        return (min(fits)[1],) if fits else None
    whole = [n for n, f in enumerate(free) if f == gpus_per_node]
    need = nodes_needed(gpus, gpus_per_node)
    return tuple(whole[:need]) if len(whole) >= need else None
