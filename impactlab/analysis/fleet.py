"""A fleet's event log: the clusters' logs as one, and each cluster's back out of it.

The organisation's log holds every cluster's events in time order (at one instant, cluster by
cluster in declared order, each in its own order), with a ``cluster`` column and the nodes
numbered across the fleet: the first cluster's nodes first, then the next cluster's. Every
organisation metric is computed from it as for one large cluster, so each is a ratio of sums
over the fleet (integrals over all GPUs), never a mean of the clusters' ratios. Each cluster's
own log, with its own node numbers, is cut back out of it (``cluster_events``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..base.config import SimConfig


def first_nodes(config: SimConfig) -> list[int]:
    """The fleet number of each cluster's first node."""
    sizes = [c.gpus // config.gpus_per_node for c in config.clusters]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()


def _renumber(nodes: pd.Series, shift: int) -> pd.Series:
    """The ``nodes`` column ("3,4") with every node number moved by ``shift``."""
    if shift == 0 or nodes.empty:
        return nodes
    texts = pd.unique(nodes)
    moved = {
        text: ",".join(str(int(n) + shift) for n in text.split(",")) if text else text
        for text in texts
    }
    return nodes.map(moved).astype(object)  # (the log's dtype, not pandas' string dtype)


def combine_events(frames: Sequence[pd.DataFrame], config: SimConfig) -> pd.DataFrame:
    """The organisation's log from each cluster's (in the fleet's order)."""
    names = [c.name for c in config.clusters]
    parts = [
        frame.assign(nodes=_renumber(frame["nodes"], first), cluster=name)
        for frame, first, name in zip(frames, first_nodes(config), names)
    ]
    out = pd.concat(parts, ignore_index=True)
    out = out.iloc[np.argsort(out["t_s"].to_numpy(), kind="stable")].reset_index(drop=True)
    out["cluster"] = pd.Categorical(out["cluster"], categories=names)
    return out


def cluster_events(events: pd.DataFrame, config: SimConfig, k: int) -> pd.DataFrame:
    """Cluster ``k``'s own log (its node numbers, no ``cluster`` column), from the fleet's."""
    mine = events[events["cluster"].astype(str) == config.clusters[k].name]
    mine = mine.drop(columns="cluster").reset_index(drop=True)
    mine["nodes"] = _renumber(mine["nodes"], -first_nodes(config)[k])
    return mine
