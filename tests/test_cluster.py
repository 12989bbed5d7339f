"""Gang placement by best fit, and the cluster's bookkeeping (docs/model.md section 1)."""

from __future__ import annotations

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from impactlab.base.gangs import held_gpus, nodes_needed
from impactlab.sim.cluster import Cluster, best_fit_on


def cluster_with(free: list[int], per: int = 8) -> Cluster:
    """A cluster whose nodes have exactly ``free`` GPUs free (by taking single-node gangs)."""
    c = Cluster(len(free), per)
    for n, f in enumerate(free):
        if f < per:
            c.take((n,), per - f)
    return c


# ----- sizes -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "gpus, per, nodes, held",
    [
        (1, 8, 1, 1),
        (3, 8, 1, 3),
        (8, 8, 1, 8),
        (9, 8, 2, 16),
        (12, 8, 2, 16),
        (16, 8, 2, 16),
        (17, 8, 3, 24),
        (12, 4, 3, 12),
        (5, 4, 2, 8),
        (4, 4, 1, 4),
    ],
)
def test_multi_node_gangs_hold_whole_nodes(gpus, per, nodes, held):
    assert nodes_needed(gpus, per) == nodes
    assert held_gpus(gpus, per) == held


def test_a_12_gpu_job_holds_two_whole_nodes():
    c = Cluster(3, 8)
    nodes = c.best_fit(12)
    assert nodes == (0, 1)
    c.take(nodes, 12)
    assert c.free == [0, 0, 8]
    assert c.free_total == 8
    assert c.best_fit(12) is None  # one whole node left
    c.give_back(nodes, 12)
    assert c.free == [8, 8, 8] and c.free_total == 24


# ----- best fit --------------------------------------------------------------------------------
def test_best_fit_picks_the_fullest_node_that_fits():
    c = cluster_with([3, 6, 8, 8])
    assert c.best_fit(1) == (0,)
    assert c.best_fit(3) == (0,)
    assert c.best_fit(4) == (1,)
    assert c.best_fit(6) == (1,)
    assert c.best_fit(7) == (2,)  # only the empty nodes fit: the lowest id
    assert c.best_fit(8) == (2,)


def test_best_fit_breaks_ties_by_lowest_node_id():
    c = cluster_with([8, 5, 2, 5, 2])
    assert c.best_fit(2) == (2,)
    assert c.best_fit(3) == (1,)
    assert c.best_fit(6) == (0,)


def test_multi_node_gang_takes_the_lowest_numbered_whole_free_nodes():
    c = cluster_with([3, 8, 0, 8, 8, 8])
    assert c.best_fit(12) == (1, 3)
    assert c.best_fit(16) == (1, 3)
    assert c.best_fit(17) == (1, 3, 4)
    assert c.best_fit(32) == (1, 3, 4, 5)
    assert c.best_fit(33) is None


def test_nothing_fits_when_free_gpus_are_fragmented():
    c = cluster_with([4, 4])
    assert c.free_total == 8
    assert c.best_fit(5) is None
    assert c.best_fit(4) == (0,)
    c = cluster_with([8, 4, 4])
    assert c.free_total == 16
    assert c.best_fit(12) is None  # needs two whole nodes; only one is free


def test_best_fit_with_four_gpus_per_node():
    c = cluster_with([1, 4, 2, 4], per=4)
    assert c.best_fit(2) == (2,)
    assert c.best_fit(3) == (1,)
    assert c.best_fit(5) == (1, 3)
    assert c.best_fit(9) is None


@settings(max_examples=examples(60), deadline=None)
@given(per=st.sampled_from([4, 8]), data=st.data())
def test_best_fit_agrees_with_a_scan_of_every_node(per, data):
    nodes = data.draw(st.integers(1, 6))
    free = data.draw(st.lists(st.integers(0, per), min_size=nodes, max_size=nodes))
    c = cluster_with(free, per)
    assert c.free == free and c.free_total == sum(free)
    for gpus in range(1, nodes * per + 1):
        if gpus <= per:
            fits = sorted((f, n) for n, f in enumerate(free) if f >= gpus)
            expected = (fits[0][1],) if fits else None
        else:
            whole = [n for n, f in enumerate(free) if f == per]
            need = -(-gpus // per)
            expected = tuple(whole[:need]) if len(whole) >= need else None
        assert c.best_fit(gpus) == expected, (free, gpus)
        assert best_fit_on(free, gpus, per) == expected, (free, gpus)


# ----- take and give back ----------------------------------------------------------------------
def test_take_then_give_back_restores_the_cluster():
    c = Cluster(2, 8)
    c.take((0,), 3)
    c.take((0,), 5)
    assert c.free == [0, 8] and c.best_fit(1) == (1,)
    c.give_back((0,), 3)
    assert c.free == [3, 8] and c.best_fit(2) == (0,)
    c.give_back((0,), 5)
    assert c.free == [8, 8] and c.free_total == 16


def test_take_on_a_node_without_room_raises_and_changes_nothing():
    c = cluster_with([8, 2])
    with pytest.raises(RuntimeError, match="node 1"):
        c.take((1,), 3)
    with pytest.raises(RuntimeError):
        c.take((0, 1), 12)  # node 0 has room, node 1 has not: neither is touched
    assert c.free == [8, 2] and c.free_total == 10
    assert c.best_fit(8) == (0,)


@pytest.mark.parametrize("nodes, gpus", [((0,), 12), ((0, 1), 3), ((0, 0), 12), ((0, 1, 2), 12)])
def test_take_on_the_wrong_number_of_nodes_raises(nodes, gpus):
    c = Cluster(3, 8)
    with pytest.raises(RuntimeError, match="cannot be placed"):
        c.take(nodes, gpus)
    assert c.free == [8, 8, 8]


def test_give_back_of_gpus_never_taken_raises_and_changes_nothing():
    c = Cluster(2, 8)
    c.take((0,), 3)
    with pytest.raises(RuntimeError):
        c.give_back((0,), 5)  # only 3 were taken
    with pytest.raises(RuntimeError):
        c.give_back((1,), 1)  # node 1 is already empty
    with pytest.raises(RuntimeError):
        c.give_back((0, 1), 3)  # a 3-GPU gang never holds two nodes
    assert c.free == [5, 8] and c.free_total == 13
    assert c.best_fit(5) == (0,) and c.best_fit(8) == (1,)


@pytest.mark.parametrize("nodes, per", [(0, 8), (2, 0), (-1, 8)])
def test_a_cluster_needs_at_least_one_node_and_one_gpu(nodes, per):
    with pytest.raises(ValueError):
        Cluster(nodes, per)


# ----- protected GPUs per node ----------------------------------------------------------------
@settings(max_examples=examples(60), deadline=None)
@given(per=st.sampled_from([4, 8]), data=st.data())
def test_shield_counts_follow_every_change(per, data):
    # A model of protected GPUs per node (a down node counts as wholly protected), against
    # the cluster's counts per level, its set of nodes without protected GPUs and could_free.
    nodes = data.draw(st.integers(1, 5))
    c = Cluster(nodes, per)
    model, down = [0] * nodes, set()
    for _ in range(data.draw(st.integers(0, 25))):
        n = data.draw(st.integers(0, nodes - 1))
        op = data.draw(st.sampled_from(["protect", "release", "drain", "restore"]))
        gpus = data.draw(st.integers(1, per))
        if op == "protect" and n not in down and model[n] + gpus <= per:
            c.shield((n,), gpus, +1)
            model[n] += gpus
        elif op == "release" and n not in down and model[n] >= gpus:
            c.shield((n,), gpus, -1)
            model[n] -= gpus
        elif op == "drain" and n not in down and model[n] == 0:  # (only an idle node is drained)
            c.take_out(n)
            down.add(n)
            model[n] = per
        elif op == "restore" and n in down:
            c.restore(n)
            down.discard(n)
            model[n] = 0
        else:
            continue
        assert c.shielded == model
        assert c.by_shield == [model.count(level) for level in range(per + 1)]
        assert c.unshielded == {k for k in range(nodes) if model[k] == 0}
        for g in range(1, nodes * per + 1):
            if g <= per:
                expected = any(per - model[k] >= g for k in range(nodes))
            else:
                expected = model.count(0) >= nodes_needed(g, per)
            assert c.could_free(g) == expected, (model, g)
