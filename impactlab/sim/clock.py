"""The simulation clock: the one module that knows simpy's internals.

simpy is the event queue. The engine needs three things simpy's public API does not give:

* a call at *exactly* time ``t`` (``env.timeout(t - now)`` can land one ulp off ``t``);
* a call that keeps a sequence number drawn earlier (the engine's job timers wait in its own
  agenda and reach simpy's queue later, yet must fire in the order they were set);
* whether another event is due at the current instant (the scheduling pass runs after the
  last one).

So a call goes straight onto ``env._queue`` as ``(t, NORMAL, seq, event)``, with ``seq`` drawn
from ``env._eid``, the counter simpy itself numbers events with. That is how
``Environment.schedule`` does it, minus the ``now + delay`` sum. Everything that depends on
those internals is here; tests/test_clock.py fails with a clear message if a simpy release
changes them (pyproject.toml bounds simpy below 5 for that reason).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import simpy
from simpy.core import NORMAL


class Call(simpy.Event):
    """A triggered simpy event that carries ``fn(*args)``; the clock's ``fire`` runs it."""

    def __init__(
        self,
        env: simpy.Environment,
        fn: Callable[..., None],
        args: tuple,
        fire: Callable[[Call], None],
    ) -> None:
        # The state ``Event.succeed()`` leaves, set directly: no trip through ``schedule``.
        self.env, self.callbacks, self._ok, self._value = env, [fire], True, None
        self.fn, self.args = fn, args


class Clock:
    """Simulated time and the event queue; every due ``Call`` is handed to ``fire``."""

    def __init__(self, fire: Callable[[Call], None]) -> None:
        self._env = simpy.Environment()
        self._queue: list = self._env._queue
        self._fire = fire
        #: The next sequence number (from simpy's own counter, so order is simpy's order).
        self.next_seq: Callable[[], int] = self._env._eid.__next__

    def sibling(self, fire: Callable[[Call], None]) -> Clock:
        """A clock on the same time and queue whose calls go to ``fire``: several engines (the
        clusters of a fleet) share one clock this way, each handed its own calls."""
        twin = object.__new__(Clock)
        twin._env, twin._queue, twin._fire, twin.next_seq = (
            self._env,
            self._queue,
            fire,
            self.next_seq,
        )
        return twin

    @property
    def now(self) -> float:
        """The current simulated time in seconds."""
        return self._env._now  # what ``env.now`` returns, without a second property call

    def call_at(self, t: float, fn: Callable[..., None], args: tuple) -> None:
        """Call ``fn(*args)`` at exactly ``t`` (>= now), after the calls already set for ``t``."""
        heapq.heappush(
            self._queue, (t, NORMAL, self.next_seq(), Call(self._env, fn, args, self._fire))
        )

    def call_at_seq(self, t: float, seq: int, fn: Callable[..., None], args: tuple) -> None:
        """Call ``fn(*args)`` at ``t`` in the place of sequence number ``seq`` (from ``next_seq``)."""
        heapq.heappush(self._queue, (t, NORMAL, seq, Call(self._env, fn, args, self._fire)))

    def due_at(self, t: float) -> bool:
        """True if another call is queued for time ``t`` (the current instant is not over)."""
        queue = self._queue
        return bool(queue) and queue[0][0] == t

    def run(self, until: float) -> None:
        """Fire every call due before ``until``, in time then sequence order."""
        self._env.run(until=until)
