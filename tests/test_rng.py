"""The run's named random streams (impactlab/base/rng.py)."""

from __future__ import annotations

import numpy as np
import pytest

from impactlab.base import rng


def draws(generator: np.random.Generator) -> list[float]:
    """A few draws, enough to tell two generators apart."""
    return generator.random(5).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2**40 + 3])
def test_generator_streams_are_the_spawned_children_used_before_the_helper(seed):
    # generate() drew from SeedSequence(seed).spawn(4) in this order; saved logs depend on it.
    old = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]
    new = rng.streams(seed, ["organisation", "arrivals", "jobs", "habits"])
    assert [draws(g) for g in new] == [draws(g) for g in old]


@pytest.mark.parametrize("seed", [0, 7])
def test_health_streams_are_one_per_node_as_before_the_helper(seed):
    old = [np.random.default_rng(s) for s in np.random.SeedSequence(seed, spawn_key=(7,)).spawn(6)]
    assert [draws(g) for g in rng.family(seed, "health", 6)] == [draws(g) for g in old]


def test_every_stream_has_its_own_key():
    keys = list(rng.STREAMS.values())
    assert len(set(keys)) == len(keys)
    assert all(
        b[: len(a)] != a for a in keys for b in keys if a is not b
    )  # no key prefixes another


def test_same_seed_same_draws_other_seed_other_draws():
    assert draws(rng.stream(3, "arrivals")) == draws(rng.stream(3, "arrivals"))
    assert draws(rng.stream(3, "arrivals")) != draws(rng.stream(4, "arrivals"))
    assert draws(rng.stream(3, "arrivals")) != draws(rng.stream(3, "jobs"))


def test_an_unknown_stream_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown random stream 'failures'.*health"):
        rng.stream(0, "failures")
