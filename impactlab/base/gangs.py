"""A gang's geometry: how many nodes and GPUs a job of a given size takes, and the size classes
results are reported in. Pure arithmetic, shared by inputs (a trace's load), the simulation core
(placement) and the analysis (results by size)."""

from __future__ import annotations

import math

import numpy as np

#: Size classes of a job's GPU count: (smallest, largest, name), in order.
SIZE_BUCKETS = ((1, 1, "1"), (2, 8, "2-8"), (9, 64, "9-64"), (65, 1 << 30, "65+"))


def nodes_needed(gpus: int, gpus_per_node: int) -> int:
    """Nodes a gang of ``gpus`` occupies: one node, or whole nodes when larger than a node."""
    return 1 if gpus <= gpus_per_node else math.ceil(gpus / gpus_per_node)


def gpus_on_each(gpus: int, gpus_per_node: int) -> int:
    """GPUs a gang takes on each of its nodes: all of them on one node, whole nodes above."""
    return min(gpus, gpus_per_node)


def held_gpus(gpus: int, gpus_per_node: int) -> int:
    """GPUs a gang holds (and is charged for): multi-node gangs hold whole nodes."""
    return gpus if gpus <= gpus_per_node else nodes_needed(gpus, gpus_per_node) * gpus_per_node


def nodes_needed_of(gpus: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """``nodes_needed`` of each gang size in ``gpus`` (integers)."""
    gpus = np.asarray(gpus, dtype=np.int64)
    return np.where(gpus > gpus_per_node, -(-gpus // gpus_per_node), 1)


def held_of(gpus: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """``held_gpus`` of each gang size in ``gpus`` (integers)."""
    gpus = np.asarray(gpus, dtype=np.int64)
    return np.where(
        gpus > gpus_per_node, nodes_needed_of(gpus, gpus_per_node) * gpus_per_node, gpus
    )
