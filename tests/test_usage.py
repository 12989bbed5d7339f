"""Charged usage over a sliding window and with a half-life, against hand integrals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from impactlab.policies.usage import DecayedUsage, WindowUsage


# ----- sliding window --------------------------------------------------------------------------
def test_window_usage_of_one_pulse():
    u = WindowUsage(leaves=2, window_s=100.0)
    u.change(0, 10.0, +4)
    u.change(0, 30.0, -4)  # 4 GPUs for 20 s = 80 GPU-s
    assert u.cumulative(0, 20.0) == pytest.approx(40.0)
    np.testing.assert_allclose(u.usage(25.0), [60.0, 0.0])  # window [-75, 25]: 4 x 15
    np.testing.assert_allclose(u.usage(50.0), [80.0, 0.0])
    np.testing.assert_allclose(u.usage(120.0), [40.0, 0.0])  # window [20, 120]: 4 x 10
    np.testing.assert_allclose(u.usage(130.0), [0.0, 0.0])
    np.testing.assert_allclose(u.usage(500.0), [0.0, 0.0])


def test_window_usage_of_a_job_still_running():
    u = WindowUsage(leaves=1, window_s=100.0)
    u.change(0, 0.0, +2)
    assert u.usage(50.0)[0] == pytest.approx(100.0)
    assert u.usage(250.0)[0] == pytest.approx(200.0)  # full window at 2 GPUs


def test_window_usage_adds_overlapping_jobs():
    u = WindowUsage(leaves=1, window_s=100.0)
    u.change(0, 0.0, +2)
    u.change(0, 40.0, +3)
    u.change(0, 60.0, -3)
    u.change(0, 100.0, -2)
    assert u.cumulative(0, 100.0) == pytest.approx(2 * 100 + 3 * 20)
    assert u.usage(150.0)[0] == pytest.approx(2 * 50 + 3 * 10)  # window [50, 150]
    assert u.usage(45.0)[0] == pytest.approx(2 * 45 + 3 * 5)


def test_window_usage_merges_changes_at_the_same_instant():
    u = WindowUsage(leaves=1, window_s=1000.0)
    u.change(0, 0.0, +2)
    u.change(0, 0.0, +3)
    u.change(0, 50.0, -5)
    u.change(0, 50.0, +1)
    u.change(0, 80.0, -1)
    assert u.cumulative(0, 50.0) == pytest.approx(250.0)
    assert u.usage(200.0)[0] == pytest.approx(250.0 + 30.0)


def exact_window(
    changes: list[tuple[float, int, float]], leaves: int, t: float, window_s: float
) -> np.ndarray:
    """Integral of each leaf's rate over [t - window, t], summing whole constant pieces."""
    out = np.zeros(leaves)
    for leaf in range(leaves):
        mine = [(s, d) for s, lf, d in changes if lf == leaf]
        rate, last = 0.0, 0.0
        for s, d in [*mine, (math.inf, 0.0)]:
            lo, hi = max(last, t - window_s), min(s, t)
            if hi > lo:
                out[leaf] += rate * (hi - lo)
            rate, last = rate + d, s
    return out


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_window_usage_matches_the_exact_integral(data):
    leaves = data.draw(st.integers(1, 3))
    window_s = data.draw(st.sampled_from([50.0, 100.0, 1000.0]))
    steps = data.draw(
        st.lists(
            st.tuples(
                st.integers(0, 40).map(lambda k: k * 7.5),
                st.integers(0, leaves - 1),
                st.integers(1, 8),
            ),
            max_size=12,
        )
    )
    # each (time, leaf, gpus) is a job starting then; it ends 10-60 s later
    changes = []
    for k, (t, leaf, gpus) in enumerate(steps):
        changes += [(t, leaf, float(gpus)), (t + 10.0 + 5 * (k % 11), leaf, -float(gpus))]
    changes.sort(key=lambda c: c[0])
    u = WindowUsage(leaves, window_s)
    queries = data.draw(st.lists(st.floats(0, 600), min_size=1, max_size=5))
    for t, leaf, d in changes:
        u.change(leaf, t, d)
    for q in queries:
        np.testing.assert_allclose(
            u.usage(q), exact_window(changes, leaves, q, window_s), atol=1e-6
        )


# ----- half-life decay -------------------------------------------------------------------------
def test_decayed_usage_of_one_pulse():
    u = DecayedUsage(leaves=2, half_life_s=100.0)
    u.change(0, 0.0, +4)
    u.change(0, 100.0, -4)
    # integral over s in [0, 100] of 4 * 2^(-(100 - s) / 100) ds = 4 * 100 / ln 2 * (1 - 1/2)
    at_100 = 200.0 / math.log(2)
    np.testing.assert_allclose(u.usage(100.0), [at_100, 0.0])
    np.testing.assert_allclose(u.usage(200.0), [at_100 / 2, 0.0])  # one half-life later
    np.testing.assert_allclose(u.usage(400.0), [at_100 / 8, 0.0])


def test_decayed_usage_of_a_constant_rate_tends_to_rate_over_decay():
    u = DecayedUsage(leaves=1, half_life_s=100.0)
    u.change(0, 0.0, +3)
    assert u.usage(50.0)[0] == pytest.approx(3 * 100 / math.log(2) * (1 - 2**-0.5))
    assert u.usage(1e5)[0] == pytest.approx(3 * 100 / math.log(2))


def test_decayed_usage_adds_pulses():
    u = DecayedUsage(leaves=1, half_life_s=100.0)
    u.change(0, 0.0, +1)
    u.change(0, 100.0, -1)  # 50/ln2 at t=100
    u.change(0, 200.0, +2)
    u.change(0, 300.0, -2)  # 100/ln2 at t=300
    expected = 100 / math.log(2) * 0.5 / 4 + 200 / math.log(2) * 0.5
    assert u.usage(300.0)[0] == pytest.approx(expected)
