"""The run's named random streams: one seed, one independent generator per source of chance.

Every random draw of a run comes from ``stream(seed, name)`` (or ``stream(seed, name, i)`` for
the i-th member of a family, such as one stream per node). Each name maps to a fixed
``numpy.random.SeedSequence`` spawn key, so

* the same seed gives the same draws, hence the same event log;
* streams are independent: drawing more from one (a bigger cluster, one more kind of job)
  never shifts another;
* a new source of chance gets a new name and key here, and no existing log changes.

The keys are the ones the generator and the failure model have always used
(``SeedSequence(seed).spawn(4)`` is keys ``(0,)`` to ``(3,)``, and node ``i``'s failures are
``(7, i)``), so logs written before this module existed are reproduced exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Spawn key of each named stream (never renumber: every saved log depends on them).
STREAMS: dict[str, tuple[int, ...]] = {
    "organisation": (0,),  # generator: budget shares, project demand, users and their projects
    "arrivals": (1,),  # generator: submit hour and time within the day
    "jobs": (2,),  # generator: gang sizes, durations, bursts, projects, pretraining campaigns
    "habits": (3,),  # generator: legacy priorities, opt-outs, util, patience
    "health": (7,),  # failure model: one stream per node, stream(seed, "health", node)
    "sessions": (8,),  # engine: whether the user resubmits a killed interactive session
}


def spawn_key(name: str, *index: int) -> tuple[int, ...]:
    """The SeedSequence spawn key of stream ``name`` (member ``index`` of a family)."""
    try:
        return STREAMS[name] + tuple(index)
    except KeyError:
        raise ValueError(f"unknown random stream {name!r}; known: {sorted(STREAMS)}") from None


def stream(seed: int, name: str, *index: int) -> np.random.Generator:
    """The generator of stream ``name`` (member ``index`` of a family) for ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=spawn_key(name, *index)))


def streams(seed: int, names: Sequence[str]) -> list[np.random.Generator]:
    """One generator per name, in order."""
    return [stream(seed, name) for name in names]


def family(seed: int, name: str, count: int) -> list[np.random.Generator]:
    """Members ``0 .. count-1`` of stream family ``name`` (e.g. one per node)."""
    return [stream(seed, name, i) for i in range(count)]
