"""Which cluster of a fleet runs each job (docs/model.md, "Several clusters").

A job runs on one cluster, chosen before the run:

1. a trace row that names a cluster (its ``cluster`` column) runs on the fleet's cluster of
   that name, or on one that takes the name (a cluster made by merging takes the names of
   those it replaced; the clusters split from one all take its name);
2. among the clusters it may run on (all of them when the row names none), only those at
   least as large as the job count; of those, it goes to the one with the least work per GPU
   assigned so far (GPU-seconds asked for, jobs in submit order), the first declared on a tie.

The rule is static (it does not look at the queues as the run goes), so a what-if that changes
the fleet's layout moves jobs by the same rule, and the same trace always lands the same way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..base.config import ClusterSpec
from .trace import TraceError

#: The trace's optional column naming a job's cluster ("" or absent: any cluster).
CLUSTER = "cluster"


def assign_clusters(
    trace: pd.DataFrame,
    clusters: tuple[ClusterSpec, ...],
    source: str = "trace",
    rows: bool = True,
) -> pd.DataFrame:
    """``trace`` with its ``cluster`` column set to the fleet cluster that runs each job; a
    row naming a cluster no one takes, or a job larger than every cluster it may run on,
    raises TraceError naming the job, the column and (``rows``) the row: its position in
    ``trace``, which for a loaded file is not the file's line, so a file's caller passes
    ``rows=False``."""
    gpus = trace["gpus"].to_numpy()
    if CLUSTER in trace.columns:
        named = trace[CLUSTER].fillna("").astype(str).to_numpy()
    else:
        named = np.full(len(trace), "", dtype=object)
    sizes = np.array([c.gpus for c in clusters])
    everyone = list(range(len(clusters)))
    takers: dict[str, list[int]] = {"": everyone}
    for k, c in enumerate(clusters):
        for name in c.names:
            takers.setdefault(name, []).append(k)
    known = ", ".join(c.name for c in clusters)
    for name in pd.unique(named):
        if name not in takers:
            row = int(np.flatnonzero(named == name)[0])
            raise TraceError(
                source,
                row if rows else None,
                CLUSTER,
                f"job {trace['job_id'].iloc[row]} names cluster {name!r}, which no cluster of "
                f"the fleet runs (the fleet's: {known})",
            )
    order = np.argsort(trace["submit_s"].to_numpy(), kind="stable")
    work = gpus.astype(float) * trace["duration_s"].to_numpy()
    load = [0.0] * len(clusters)
    where = np.empty(len(trace), dtype=np.int64)
    fits: dict[tuple[str, int], list[int]] = {}
    for i in order.tolist():
        key = (named[i], int(gpus[i]))
        options = fits.get(key)
        if options is None:
            options = fits[key] = [k for k in takers[key[0]] if sizes[k] >= key[1]]
        if not options:
            raise TraceError(
                source,
                i if rows else None,
                "gpus",
                f"job {trace['job_id'].iloc[i]} ({key[1]} GPUs) is larger than every cluster "
                f"it may run on ({', '.join(clusters[k].name for k in takers[key[0]])})",
            )
        best = options[0]
        if len(options) > 1:
            best = min(options, key=lambda k: (load[k] / sizes[k], k))
        load[best] += work[i]
        where[i] = best
    names = np.array([c.name for c in clusters], dtype=object)
    return trace.assign(**{CLUSTER: names[where]})
