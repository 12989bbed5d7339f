"""The ranking a fair-share pass follows, refreshed over time, computed by hand (docs/model.md
sections 4 and 5). The oracle tests cannot see a fault here: the plain reference policies use the
same ``FairTree`` as the fast ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import small_tree

from impactlab.policies.fair import FairTree
from impactlab.sim.policy import Context

# Node ids of the small tree, in the order written (depth first); leaves pa1, pa2, pb1, pc.
ROOT, PROG_A, PA1, PA2, PROG_B, PB1, PC = range(7)
CAPACITY = 16
WINDOW_S = 1000.0


@pytest.fixture
def fair() -> FairTree:
    """A 16-GPU cluster's fair share over a hard 1,000 s window, refreshed every 100 s."""
    ctx = Context(jobs=[], tree=small_tree(), capacity=CAPACITY, gpus_per_node=8, view=None)  # type: ignore[arg-type]
    return FairTree(ctx, WINDOW_S, None, 100.0)


def job(leaf: int, held: int) -> SimpleNamespace:
    """What ``FairTree.charge`` reads of a job."""
    return SimpleNamespace(leaf=leaf, held=held)


def test_the_ranking_follows_the_window_usage_refresh_by_refresh(fair):
    # Nobody has used anything: ties go to the larger share, then to the order written.
    fair.refresh(0.0)
    assert fair.order == [PA2, PA1, PC, PB1]

    x = job(PA2, 8)
    fair.charge(x, 0.0, +1)
    fair.refresh(50.0)  # (not due: the ranking stays as it was)
    assert fair.order == [PA2, PA1, PC, PB1]
    fair.refresh(100.0)
    # progA used 800 GPU-s (share 3), progB and pc nothing: pc first (larger share), then
    # progB, then progA, where pa1 (nothing) comes before pa2 (800 over share 2).
    assert fair.order == [PC, PB1, PA1, PA2]
    ranked = fair.order
    fair.refresh(200.0)
    assert fair.order is ranked  # (the same ranking keeps its list: the lanes stay sorted)

    fair.charge(x, 250.0, -1)
    y = job(PC, 16)
    fair.charge(y, 250.0, +1)
    fair.refresh(300.0)
    # pa2 used 2,000 GPU-s (progA: 2000/3), pc 800 (800/2), progB nothing.
    assert fair.order == [PB1, PC, PA1, PA2]
    assert fair.order is not ranked
    # served = (window usage / (capacity x window) + held now / capacity) / entitlement; pa2 and
    # pc are both entitled to a third.
    assert fair.served(PA2) == pytest.approx((2000 / 16_000 + 0) * 3)
    assert fair.served(PC) == pytest.approx((800 / 16_000 + 16 / 16) * 3)

    fair.charge(y, 400.0, -1)
    fair.refresh(1300.0)
    # The window is [300, 1300]: pa2's use has left it; pc's 100 s x 16 GPUs are in it.
    assert fair.order == [PA2, PA1, PB1, PC]
    assert fair.served(PC) == pytest.approx(1600 / 16_000 * 3)
    assert fair.served(PA2) == 0.0
