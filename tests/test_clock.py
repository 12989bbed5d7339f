"""The clock adapter and the simpy internals it relies on.

If one of these fails after a simpy upgrade, simpy changed something impactlab/sim/clock.py uses
privately: fix the adapter (and only it), or keep simpy below the version that changed it.
"""

from __future__ import annotations

import pathlib

import pytest
import simpy

from impactlab.sim import clock as clock_module
from impactlab.sim.clock import Clock

UPGRADE_HINT = (
    "simpy {version} changed an internal that impactlab/sim/clock.py relies on: {what}. "
    "Adapt impactlab/sim/clock.py or pin simpy to a version that passes tests/test_clock.py."
)


def require(ok: bool, what: str) -> None:
    """Fail with a message that names the simpy internal and says what to do."""
    if not ok:
        pytest.fail(UPGRADE_HINT.format(version=simpy.__version__, what=what), pytrace=False)


def recorder() -> tuple[Clock, list[tuple[float, str]]]:
    """A clock whose calls append ``(now, label)`` to a log."""
    log: list[tuple[float, str]] = []
    clock = Clock(lambda call: call.fn(*call.args))
    return clock, log


def test_simpy_still_has_the_internals_the_clock_uses():
    env = simpy.Environment()
    require(
        isinstance(getattr(env, "_queue", None), list),
        "Environment._queue is no longer a list (the heap)",
    )
    require(
        hasattr(getattr(env, "_eid", None), "__next__"), "Environment._eid is no longer an iterator"
    )
    require(isinstance(getattr(simpy.core, "NORMAL", None), int), "simpy.core.NORMAL is gone")
    env.run(until=2.5)
    require(
        getattr(env, "_now", None) == env.now == 2.5, "Environment._now no longer holds the time"
    )
    require(simpy.core.URGENT < simpy.core.NORMAL, "URGENT no longer sorts before NORMAL")
    first, second = next(env._eid), next(env._eid)
    require(second == first + 1, "Environment._eid no longer counts up by one")
    event = simpy.Event(env).succeed()
    require(
        event._ok is True and event._value is None and isinstance(event.callbacks, list),
        "a succeeded Event no longer has _ok=True, _value=None and a callbacks list "
        "(clock.Call sets that state directly)",
    )


def test_simpy_queue_entries_are_time_priority_sequence_event():
    env = simpy.Environment()
    env.timeout(5.0)
    require(len(env._queue) == 1, "a timeout no longer lands on Environment._queue")
    entry = env._queue[0]
    require(
        len(entry) == 4
        and entry[0] == 5.0
        and entry[1] == simpy.core.NORMAL
        and isinstance(entry[2], int)
        and isinstance(entry[3], simpy.Event),
        f"queue entries are no longer (time, priority, eid, event): {entry!r}",
    )


def test_a_call_fires_exactly_at_its_time():
    clock, log = recorder()
    t = 0.1 + 0.2  # 0.30000000000000004: a timeout of (t - now) from another time could miss it
    clock.call_at(1.7, lambda: clock.call_at(t + 1.7, lambda: log.append((clock.now, "b")), ()), ())
    clock.call_at(t, lambda: log.append((clock.now, "a")), ())
    clock.run(until=10.0)
    require(log == [(t, "a"), (t + 1.7, "b")], f"a call no longer fires exactly at its time: {log}")


def test_calls_at_one_time_fire_in_the_order_they_were_set():
    clock, log = recorder()
    for label in "abcde":
        clock.call_at(3.0, log.append, ((3.0, label),))
    clock.call_at(1.0, log.append, ((1.0, "first"),))
    clock.run(until=10.0)
    require(
        log == [(1.0, "first"), *((3.0, c) for c in "abcde")],
        f"calls at one time no longer fire in insertion order: {log}",
    )


def test_a_call_keeps_the_place_of_its_sequence_number():
    # A timer drawn first but put on the queue last still fires first at its instant.
    clock, log = recorder()
    early = clock.next_seq()
    clock.call_at(2.0, log.append, ("later",))
    clock.call_at_seq(2.0, early, log.append, ("drawn first",))
    clock.run(until=10.0)
    require(
        log == ["drawn first", "later"],
        f"the sequence number no longer orders calls at one time: {log}",
    )


def test_the_clock_knows_whether_the_instant_is_over():
    clock, seen = Clock(lambda call: call.fn(*call.args)), []
    clock.call_at(4.0, lambda: seen.append(clock.due_at(4.0)), ())
    clock.call_at(4.0, lambda: seen.append(clock.due_at(4.0)), ())
    clock.call_at(6.0, lambda: None, ())
    clock.run(until=10.0)
    require(
        seen == [True, False], f"the queue head no longer tells whether the instant is over: {seen}"
    )


def test_the_run_stops_before_its_end_and_calls_set_during_a_call_fire():
    clock, log = recorder()

    def tick(n: int) -> None:
        log.append((clock.now, str(n)))
        clock.call_at(clock.now + 1.0, tick, (n + 1,))

    clock.call_at(0.0, tick, (0,))
    clock.run(until=3.0)
    assert log == [(0.0, "0"), (1.0, "1"), (2.0, "2")]
    assert clock.now == 3.0


def test_the_clock_is_the_only_module_that_imports_simpy():
    package = pathlib.Path(clock_module.__file__).parent
    users = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "import simpy" in p.read_text() or "from simpy" in p.read_text()
    )
    assert users == ["clock.py"]
