"""Charged GPU usage per budget leaf, integrated lazily (docs/model.md sections 5 and 8).

Each leaf's charge rate (GPUs held by its running funded jobs) is piecewise constant, so its
cumulative usage is piecewise linear. Both trackers update in O(1) when a rate changes and
answer a query without scanning history (the window tracker bisects its breakpoints).
"""

from __future__ import annotations

import bisect
import math

import numpy as np


class WindowUsage:
    """GPU-seconds charged per leaf over the sliding window [t - window_s, t]."""

    def __init__(self, leaves: int, window_s: float):
        self.window_s = window_s
        self.rate = [0.0] * leaves
        self._times: list[list[float]] = [[0.0] for _ in range(leaves)]
        self._cum: list[list[float]] = [[0.0] for _ in range(leaves)]

    def change(self, leaf: int, t: float, delta_gpus: float) -> None:
        """The leaf's charge rate changes by ``delta_gpus`` at time ``t``."""
        times, cum = self._times[leaf], self._cum[leaf]
        value = cum[-1] + self.rate[leaf] * (t - times[-1])
        if times[-1] == t:
            cum[-1] = value
        else:
            times.append(t)
            cum.append(value)
        self.rate[leaf] += delta_gpus

    def cumulative(self, leaf: int, t: float) -> float:
        """GPU-seconds charged to the leaf in [0, t]."""
        return _cumulative(self._times[leaf], self._cum[leaf], self.rate[leaf], t)

    def usage(self, t: float) -> np.ndarray:
        """Windowed usage of every leaf at time ``t``."""
        return np.array(self.usage_list(t))

    def usage_list(self, t: float) -> list[float]:
        """``usage(t)`` as plain floats (the fair-share refresh reads them one by one)."""
        start = t - self.window_s
        out = []
        for times, cum, rate in zip(self._times, self._cum, self.rate):
            if len(times) == 1 and not rate:
                out.append(0.0)  # never charged
            else:
                out.append(_cumulative(times, cum, rate, t) - _cumulative(times, cum, rate, start))
        return out


def _cumulative(times: list[float], cum: list[float], rate: float, t: float) -> float:
    """Charged GPU-seconds in [0, t], given the breakpoints of a piecewise-linear integral."""
    if t >= times[-1]:
        return cum[-1] + rate * (t - times[-1])
    k = bisect.bisect_right(times, t) - 1
    if k < 0:
        return 0.0
    slope = (cum[k + 1] - cum[k]) / (times[k + 1] - times[k])
    return cum[k] + slope * (t - times[k])


class DecayedUsage:
    """GPU-seconds charged per leaf with exponential decay (Slurm's half-life)."""

    def __init__(self, leaves: int, half_life_s: float):
        self.decay = math.log(2) / half_life_s
        self.rate = [0.0] * leaves
        self._value = [0.0] * leaves
        self._at = [0.0] * leaves

    def change(self, leaf: int, t: float, delta_gpus: float) -> None:
        """The leaf's charge rate changes by ``delta_gpus`` at time ``t``."""
        self._value[leaf] = self._value_at(leaf, t)
        self._at[leaf] = t
        self.rate[leaf] += delta_gpus

    def _value_at(self, leaf: int, t: float) -> float:
        keep = math.exp(-self.decay * (t - self._at[leaf]))
        return self._value[leaf] * keep + self.rate[leaf] * (1.0 - keep) / self.decay

    def usage(self, t: float) -> np.ndarray:
        """Decayed usage of every leaf at time ``t``."""
        return np.array(self.usage_list(t))

    def usage_list(self, t: float) -> list[float]:
        """``usage(t)`` as plain floats."""
        return [self._value_at(i, t) for i in range(len(self.rate))]
