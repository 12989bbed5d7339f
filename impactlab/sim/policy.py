"""The policy protocol: policies decide, the engine acts (docs/model.md section 5).

A policy is a small dataclass whose fields are its knobs. The engine calls it:

* ``setup(ctx)`` once, with the static facts of the run (jobs, budget tree, cluster shape);
* ``enqueue(j, now)`` when job ``j`` becomes pending (submitted, or requeued after a
  preemption or failure), ``dequeue(j, now)`` when a pending job is withdrawn;
* ``on_start(j, now)`` / ``on_stop(j, now)`` when a job starts or stops running, whoever
  decided it (for usage accounting);
* ``schedule(now, sched)`` whenever something changed. The pass reads the current state from
  ``sched`` and makes decisions with ``sched.start(j, nodes)`` and ``sched.preempt(j, by, reason)``. The
  engine validates every decision, applies it at once (so the next read sees it) and raises
  ``PolicyError`` on an impossible one. A policy never mutates engine state otherwise. With a
  preemption grace period, a victim's GPUs are free to the pass at once; a job started on them
  holds them then and begins when they are released (its ``started_at`` is ahead of ``now``
  until then, so it is not yet a victim).
* ``protection_s(job)`` is the contract: for how long after an attempt starts the job may not
  be preempted. The engine enforces it. ``start_note(j)``, asked right after it, is logged in
  the start row's detail column (``impactful``: why an attempt that would be protected is not).

* ``vacate_at(j, sched)``: when nodes are announced for maintenance, from when a job running
  there may be stopped (requeued) to free them; by default never (it runs until it ends or
  the deadline). ``impactful`` answers the end of its contract, ``legacy`` now for preemptible
  jobs and never for those that opted out.

* ``explainer(nodes)`` answers the questions a job's story asks after the run
  (``impactlab.analysis.explain``), from the event log's facts alone: how long an attempt was
  protected, whether the policy preempts for a job, and why it spared the unprotected running
  jobs a waiting job could have displaced. ``Explainer``'s defaults fit a policy whose contract
  reads the job alone and that never preempts; a policy with more to say returns a subclass.

A policy's knobs are its dataclass fields; declare each with ``impactlab.base.params.knob`` (default,
type, help, unit, range) so that the CLI, the widgets and sweeps can offer and check it. To add
a policy, write one file with a class like this and call
``impactlab.register_policy("name", MyPolicy)``, or name it by its ``"module:Class"`` spec; the
invariant tests cover every registered policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from ..base.params import check_fields
from ..inputs.budgets import BudgetTree
from .cluster import Cluster
from .events import Job

#: Why a victim was chosen, as policies log it after ``by=<job_id>; `` (``Scheduler.preempt``).
BACKFILL_REASON = "unallocated backfill yields to funded work"
RESERVE_REASON = "borrowed the interactive reserve (debug and interactive work reclaim it)"
DRAIN_REASON = "on nodes draining for a large gang (unprotected work there yields to it)"
#: The start note of an attempt left unprotected because it runs on nodes draining for a gang.
DRAIN_NOTE = "unprotected: on nodes draining for job "


class PolicyError(RuntimeError):
    """A policy asked for something impossible (a bug in the policy)."""


class Scheduler(Protocol):
    """What a scheduling pass may read and do (implemented by the engine)."""

    now: float
    jobs: Sequence[Job]
    cluster: Cluster  # read only: free GPUs per node and best-fit placement
    pending: set[int]
    running: set[int]
    on_node: list[set[int]]  # running jobs per node
    nodes: list[tuple[int, ...]]  # nodes of each running job
    started_at: list[float]
    shielded: list[bool]  # protected right now (cleared by the event that ends protection)
    epoch: int  # changes whenever GPUs are freed or a protection ends
    # The latest start (ahead of now for a start waiting for GPUs in a grace period): jobs
    # starting at or after ``now`` are not yet victims.
    last_start_s: float
    # Nodes announced for maintenance: they take no new work, and room made on them is no room
    # (``victims.choose_victims`` leaves them out); their jobs leave when ``vacate_at`` says.
    cordoned: frozenset[int]
    protected_until: list[float]  # when each running attempt's protection ends (or ended)

    def protected(self, j: int) -> bool:
        """True while job ``j``'s current attempt is protected from preemption (``shielded[j]``)."""

    def expected_end(self, j: int) -> float:
        """When running job ``j`` will finish if nothing interrupts it."""

    def work_left(self, j: int) -> float:
        """Seconds pending job ``j`` needs once started (restart overhead included)."""

    def start(self, j: int, nodes: tuple[int, ...]) -> None:
        """Start pending job ``j`` on ``nodes``."""

    def preempt(self, j: int, by: int, reason: str = "") -> None:
        """Preempt running job ``j`` to make room for job ``by``; it is requeued. A short
        ``reason`` (why this victim) is logged after ``by=<job_id>``."""

    def wake_at(self, t: float) -> None:
        """Ask for a scheduling pass at time ``t`` even if nothing else happens."""


@dataclass(frozen=True)
class Organisation:
    """What the clusters of a fleet share, for policies that share state between clusters:
    the fleet's GPUs, and ``shared``, where the first cluster's policy puts what the others
    find (``impactlab.policies.fair`` keeps one usage meter there for organisation-wide fair
    share). Clusters that share nothing get no ``Organisation``."""

    capacity: int
    shared: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """Facts of a run, handed to ``Policy.setup``; ``view`` is the live (read-only) state;
    ``org`` is what this cluster shares with the others of its fleet (None: nothing)."""

    jobs: Sequence[Job]
    tree: BudgetTree
    capacity: int
    gpus_per_node: int
    view: Scheduler
    org: Organisation | None = None


class Policy(Protocol):
    """The protocol every policy implements (see the module docstring)."""

    name: ClassVar[str]
    repair: ClassVar[str]  # "automatic" or "manual": how failed nodes are repaired by default

    def setup(self, ctx: Context) -> None: ...
    def protection_s(self, job: Job) -> float: ...
    def start_note(self, j: int) -> str: ...
    def enqueue(self, j: int, now: float) -> None: ...
    def dequeue(self, j: int, now: float) -> None: ...
    def on_start(self, j: int, now: float) -> None: ...
    def on_stop(self, j: int, now: float) -> None: ...
    def schedule(self, now: float, sched: Scheduler) -> None: ...
    def explainer(self, nodes: int) -> Explainer: ...
    def vacate_at(self, j: int, sched: Scheduler) -> float: ...


#: A running attempt as a story sees it: the job and the nodes it runs on.
Attempt = tuple[Job, tuple[int, ...]]


class Explainer:
    """What a job's story asks a policy about a run of ``nodes`` nodes, answered from the log's
    facts (a story is told after the run, with no live state). The defaults fit a policy whose
    contract reads the job alone (``protection_s``) and that never preempts."""

    def __init__(self, policy: Policy | BasePolicy, nodes: int):
        self.policy, self.nodes = policy, nodes

    def protection_s(self, job: Job, nodes: tuple[int, ...], note: str) -> float:
        """Seconds the attempt of ``job`` on ``nodes`` was protected (``note``: its start note)."""
        return self.policy.protection_s(job)

    def unprotected_because(self, job: Job, nodes: tuple[int, ...], note: str) -> str:
        """Why an attempt that ``job``'s contract would protect was not, in words; "" if none."""
        return ""

    def preempts_for(self, job: Job) -> bool:
        """Whether the policy ever preempts running jobs to make room for ``job``."""
        return False

    def no_preemption(self, job: Job) -> str:
        """Why no running job is ever preempted for ``job`` (asked when ``preempts_for`` is not)."""
        return f"{self.policy.name} never preempts: it waits for room"

    def spared(
        self, job: Job, unprotected: Sequence[Attempt], had_room: bool
    ) -> list[tuple[str, str]]:
        """Why none of the ``unprotected`` running attempts was preempted for waiting ``job``
        (``had_room``: a block of its size was free), as (reason, words) pairs; none by default."""
        return []


class BasePolicy:
    """Do-nothing defaults for the optional hooks."""

    name: ClassVar[str] = "base"
    repair: ClassVar[str] = "automatic"  # how failed nodes are repaired unless the run says
    ctx: Context

    def __post_init__(self) -> None:
        """Check every declared knob against its range (a dataclass calls this after init)."""
        check_fields(self)

    def setup(self, ctx: Context) -> None:
        """Remember the run's static facts."""
        self.ctx = ctx

    def protection_s(self, job: Job) -> float:
        """No protection contract by default."""
        return 0.0

    def start_note(self, j: int) -> str:
        """Nothing to note on a start."""
        return ""

    def enqueue(self, j: int, now: float) -> None:
        """Ignore: the pass can read ``sched.pending``."""

    def dequeue(self, j: int, now: float) -> None:
        """Ignore: the pass can read ``sched.pending``."""

    def on_start(self, j: int, now: float) -> None:
        """Ignore."""

    def on_stop(self, j: int, now: float) -> None:
        """Ignore."""

    def explainer(self, nodes: int) -> Explainer:
        """The default answers to a story's questions (``Explainer``)."""
        return Explainer(self, nodes)

    def vacate_at(self, j: int, sched: Scheduler) -> float:
        """When running job ``j``, on a node announced for maintenance, may be stopped to free
        it (requeued from its last checkpoint): a time, now or later, or ``math.inf`` to let it
        run until it ends or the maintenance's deadline. By default never: a policy that does
        not preempt gives nobody the right to stop a job early."""
        return math.inf
