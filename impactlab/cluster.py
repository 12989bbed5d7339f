"""Nodes, free-GPU counts and gang placement with best fit (DESIGN.md section 2)."""

from __future__ import annotations

import heapq
import math


def nodes_needed(gpus: int, gpus_per_node: int) -> int:
    """Nodes a gang of ``gpus`` occupies: one node, or whole nodes when larger than a node."""
    return 1 if gpus <= gpus_per_node else math.ceil(gpus / gpus_per_node)


def held_gpus(gpus: int, gpus_per_node: int) -> int:
    """GPUs a gang holds (and is charged for): multi-node gangs hold whole nodes."""
    return gpus if gpus <= gpus_per_node else nodes_needed(gpus, gpus_per_node) * gpus_per_node


class Cluster:
    """Free GPUs per node, indexed by free count so best fit never scans all nodes.

    Invariant: node ``n`` is in ``by_free[free[n]]`` for every node.
    """

    def __init__(self, nodes: int, gpus_per_node: int = 8):
        if nodes < 1 or gpus_per_node < 1:
            raise ValueError(f"a cluster needs nodes >= 1 and gpus_per_node >= 1, got {nodes}, {gpus_per_node}")
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.capacity = nodes * gpus_per_node
        self.free = [gpus_per_node] * nodes
        self.free_total = self.capacity
        self.by_free: list[set[int]] = [set() for _ in range(gpus_per_node + 1)]
        self.by_free[gpus_per_node].update(range(nodes))

    def fits_now(self, gpus: int) -> bool:
        """True if a gang of ``gpus`` can be placed right now."""
        return self.best_fit(gpus) is not None

    def best_fit(self, gpus: int) -> tuple[int, ...] | None:
        """Nodes for a gang: the fullest node that fits, or the lowest-numbered whole free nodes."""
        per = self.gpus_per_node
        if gpus > self.free_total:
            return None
        if gpus <= per:
            for k in range(gpus, per + 1):
                if self.by_free[k]:
                    return (min(self.by_free[k]),)
            return None
        need = nodes_needed(gpus, per)
        whole = self.by_free[per]
        if len(whole) < need:
            return None
        return tuple(sorted(heapq.nsmallest(need, whole)))

    def take(self, nodes: tuple[int, ...], gpus: int) -> None:
        """Allocate a gang on ``nodes``; raises if they do not have room."""
        per_node = self._per_node(nodes, gpus)
        for n in nodes:
            if self.free[n] < per_node:
                raise RuntimeError(f"node {n} has {self.free[n]} free GPUs, cannot take {per_node}")
        for n in nodes:
            self._set(n, self.free[n] - per_node)

    def give_back(self, nodes: tuple[int, ...], gpus: int) -> None:
        """Release a gang previously taken on ``nodes``."""
        per_node = self._per_node(nodes, gpus)
        for n in nodes:
            self._set(n, self.free[n] + per_node)

    def _per_node(self, nodes: tuple[int, ...], gpus: int) -> int:
        if len(nodes) != nodes_needed(gpus, self.gpus_per_node) or len(set(nodes)) != len(nodes):
            raise RuntimeError(f"a {gpus}-GPU gang cannot be placed on nodes {nodes}")
        return gpus if len(nodes) == 1 and gpus <= self.gpus_per_node else self.gpus_per_node

    def _set(self, node: int, free: int) -> None:
        old = self.free[node]
        self.by_free[old].discard(node)
        self.by_free[free].add(node)
        self.free[node] = free
        self.free_total += free - old


def best_fit_on(free: list[int], gpus: int, gpus_per_node: int) -> tuple[int, ...] | None:
    """Best-fit placement on an explicit free-GPU list, by scanning (for what-if planning)."""
    if gpus <= gpus_per_node:
        fits = [(f, n) for n, f in enumerate(free) if f >= gpus]
        return (min(fits)[1],) if fits else None
    whole = [n for n, f in enumerate(free) if f == gpus_per_node]
    need = nodes_needed(gpus, gpus_per_node)
    return tuple(whole[:need]) if len(whole) >= need else None
