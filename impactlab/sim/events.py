"""Job records and the event log, the single source of truth (docs/model.md section 6)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # loaded by the functions that need it: the core and the CLI start without pandas
    import pandas as pd

from ..base.gangs import held_of, nodes_needed_of
from ..inputs.budgets import BudgetTree

UNALLOCATED = -1  # leaf of a job no budget funds
#: The kind of job that is a session: a person at the other end (preempting it may end it, and
#: a cap on its protection may apply).
SESSION = "interactive"


class Ev(StrEnum):
    """Kinds of state change recorded in the event log."""

    SUBMIT = "submit"
    START = "start"
    PREEMPT = "preempt"
    REQUEUE = "requeue"
    FINISH = "finish"
    FAIL = "fail"
    WITHDRAW = "withdraw"
    NODE_DOWN = "node_down"
    NODE_UP = "node_up"
    KILL = "kill"  # a preempted interactive session ends (no requeue)
    RESUBMIT = "resubmit"  # the user submits a killed session again
    CORDON = "cordon"  # a node announced for maintenance takes no new work
    EVICT = "evict"  # a job stopped so that its node can go down for maintenance (requeued)
    VACATED = "vacated"  # a cordoned node holds no job any more
    MAINT_DOWN = "maintenance_down"  # a node goes down for planned maintenance
    MAINT_UP = "maintenance_up"  # it is back in service


class Event(NamedTuple):
    """One row of the event log.

        ``gpus`` are the GPUs the job holds when running (whole nodes for multi-node gangs);
        ``nodes`` is a comma-separated list; ``overhead_s`` is the restart overhead an attempt
        pays (on ``start``: start-up plus any restart overhead); ``lost_s`` is the progress an attempt
    loses (on ``preempt``/``fail``/``evict``), or on ``kill`` the session time the user did not get.
    """

    t_s: float
    event: str
    job_id: str
    gpus: int
    nodes: str
    detail: str
    overhead_s: float
    lost_s: float


EVENT_COLUMNS = list(Event._fields)


def preemptor(detail: str) -> str:
    """The job a ``preempt`` row's detail (``by=<job_id>; <reason>``) names."""
    return detail.removeprefix("by=").partition(";")[0]


def preempt_reason(detail: str) -> str:
    """The policy's reason in a ``preempt`` row's detail ("" if it gave none)."""
    return detail.partition(";")[2].strip()


EVENT_DTYPES: dict[str, npt.DTypeLike] = {
    "t_s": float,
    "event": object,
    "job_id": object,
    "gpus": "int64",
    "nodes": object,
    "detail": object,
    "overhead_s": float,
    "lost_s": float,
}


def events_frame(events: Sequence[tuple] | EventLog) -> pd.DataFrame:
    """The event log (an ``EventLog``, or ``Event`` rows or plain tuples in its field order) as
    a DataFrame with stable dtypes (also when empty)."""
    import pandas as pd

    if isinstance(events, EventLog):
        # Straight to arrays of the final dtypes: letting pandas infer its string dtype and
        # casting back to object made new Python strings of every value (5x the time and 4x
        # the memory of the frame; measured on 800,000 rows).
        return pd.DataFrame(
            {
                name: _column(values, EVENT_DTYPES[name])
                for name, values in zip(EVENT_COLUMNS, events.columns)
            },
            copy=False,
        )
    return pd.DataFrame(events, columns=EVENT_COLUMNS).astype(EVENT_DTYPES)


def _column(values: list | array, dtype: npt.DTypeLike) -> pd.Series:
    """One column of the log as a Series of ``dtype``: a numeric column reads the log's buffer
    without a copy; a text column shares the log's string objects."""
    import pandas as pd

    if isinstance(values, array):
        data = np.frombuffer(values, dtype=dtype) if len(values) else np.array([], dtype=dtype)
        return pd.Series(data, dtype=dtype, copy=False)
    return pd.Series(np.array(values, dtype=dtype), dtype=dtype, copy=False)


#: The ``array`` type code of each numeric column of the log (the others are lists of strings).
NUMERIC_CODES = {"t_s": "d", "gpus": "q", "overhead_s": "d", "lost_s": "d"}


class EventLog:
    """The event log as it is written: one column per ``Event`` field.

    Columns rather than a tuple per row keep the garbage collector out of long runs (a tuple
    is tracked until a collection looks at it). Numeric columns are typed arrays: 8 bytes a
    value instead of a pointer to a float object, and the frame reads them without a copy.
    """

    def __init__(self) -> None:
        self.columns: tuple[list | array, ...] = tuple(
            array(NUMERIC_CODES[name]) if name in NUMERIC_CODES else [] for name in EVENT_COLUMNS
        )
        #: each column's ``append``, in field order (one row = one call of each)
        self.appends = tuple(column.append for column in self.columns)

    def __len__(self) -> int:
        return len(self.columns[0])


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the engine and policies see it: the trace row plus derived placement facts."""

    idx: int  # position in (submit_s, job_id) order; also the FIFO tie-break
    job_id: str
    submit_s: float
    user: str
    project: str
    leaf: int  # budget-tree node the job is charged to, or UNALLOCATED
    gpus: int  # requested
    held: int  # held and charged (whole nodes for multi-node gangs)
    n_nodes: int
    duration_s: float
    kind: str
    min_runtime_s: float
    priority: int
    preemptible: bool
    checkpoint_s: float
    util: float
    patience_s: float
    # Derived once here, since the hot paths read them for every job they look at.
    funded: bool = field(init=False)  # a budget funds the job
    per_node: int = field(init=False)  # GPUs taken on each of its nodes

    def __post_init__(self) -> None:
        object.__setattr__(self, "funded", self.leaf != UNALLOCATED)
        object.__setattr__(self, "per_node", self.held // self.n_nodes)


#: ``Job``'s fields given to its constructor, in their declared order.
JOB_FIELDS = tuple(f.name for f in fields(Job) if f.init)


def jobs_from_trace(trace: pd.DataFrame, tree: BudgetTree, gpus_per_node: int) -> list[Job]:
    """Job records from a validated trace, in (submit_s, job_id) order."""
    ordered = trace.sort_values(["submit_s", "job_id"], kind="stable")
    leaves = tree.leaves_for(ordered["project"], ordered["user"])
    gpus = ordered["gpus"].to_numpy(np.int64)
    # Each column as a list of Python values of its final type, converted by numpy in one go
    # (a per-row int() or float() took a third of the time over 1,000,000 jobs). One object per
    # distinct value of the columns that repeat (names, and contract fields from per-kind
    # defaults), not one per job; two tables, text and numbers, so that each hands back the
    # type it is given (a string never equals a number, so one table would hold the same entries).
    shared_text: dict[str, str] = {}
    shared_number: dict[float, float] = {}

    def floats(name: str) -> list[float]:
        return ordered[name].to_numpy(np.float64).tolist()

    def texts(name: str) -> list[str]:
        return [shared_text.setdefault(v, v) for v in ordered[name].tolist()]

    def repeated(name: str) -> list[float]:
        return [shared_number.setdefault(v, v) for v in floats(name)]

    columns = {
        "idx": range(len(ordered)),
        "job_id": ordered["job_id"].tolist(),
        "submit_s": floats("submit_s"),
        "user": texts("user"),
        "project": texts("project"),
        "leaf": np.asarray(leaves, dtype=np.int64).tolist(),
        "gpus": gpus.tolist(),
        "held": held_of(gpus, gpus_per_node).tolist(),
        "n_nodes": nodes_needed_of(gpus, gpus_per_node).tolist(),
        "duration_s": floats("duration_s"),
        "kind": texts("kind"),
        "min_runtime_s": repeated("min_runtime_s"),
        "priority": ordered["priority"].to_numpy(np.int64).tolist(),
        "preemptible": ordered["preemptible"].to_numpy(bool).tolist(),
        "checkpoint_s": repeated("checkpoint_s"),
        "util": repeated("util"),
        "patience_s": floats("patience_s"),
    }
    # Positional, in the fields' declared order (keywords for seventeen fields took twice as long).
    return [Job(*row) for row in zip(*(columns[name] for name in JOB_FIELDS))]
