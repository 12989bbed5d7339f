"""``victims.reach``: the largest gang that could be placed if every possible victim were
preempted. legacy's scan trusts it to skip searches (a job beyond its level's reach is never
searched, and nor is any larger job after it), so it must be exact: here it is checked against
best fit itself, size by size, on the room left once the victims are gone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from impactlab.policies.victims import reach
from impactlab.sim.cluster import best_fit_on


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """(free GPUs per node, GPUs of possible victims per node, GPUs per node)."""
    per = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 12))
    free, victims = [], []
    for _ in range(nodes):
        f = draw(st.integers(0, per))
        free.append(f)
        victims.append(draw(st.integers(0, per - f)))
    return free, victims, per


@given(clusters())
def test_reach_is_the_largest_gang_best_fit_places_once_every_victim_is_gone(cluster):
    free, victims, per = cluster
    rooms = [f + v for f, v in zip(free, victims)]
    placeable = [g for g in range(1, per * len(free) + 1) if best_fit_on(rooms, g, per)]
    expected = max(placeable, default=0)
    assert reach(free, victims, per) == expected
    # and every smaller gang is placeable too, so "gpus <= reach" is the whole test
    assert placeable == list(range(1, expected + 1))


def test_reach_by_hand():
    # 8-GPU nodes: two wholly clearable -> gangs of up to 16 GPUs
    assert reach([8, 0, 3], [0, 8, 2], 8) == 16
    # none wholly clearable: the roomiest node, 3 free + 4 in victims
    assert reach([3, 0, 1], [4, 6, 0], 8) == 7
    # one whole node: any single-node size, no gang
    assert reach([0, 2], [8, 0], 8) == 8
    # a full cluster without victims
    assert reach([0, 0], [0, 0], 8) == 0
