"""Golden event logs: a small generated trace per policy. A change of any policy's decisions,
of the engine or of the generator shows up here. Regenerate only on purpose:

    python tests/test_golden.py
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import impactlab as il
from impactlab.base.registry import BUILTIN

GOLDEN = Path(__file__).parent / "golden"
CONFIG = il.SimConfig(gpus=16, days=1.5, seed=3)


def events_of(policy: str) -> pd.DataFrame:
    """The event log of the golden scenario under one policy, as written to CSV."""
    work = il.generate(CONFIG.generator())
    events = il.simulate(replace(CONFIG, policy=policy), trace=work.trace, budgets=work.tree).events
    return events


@pytest.mark.parametrize("policy", sorted(BUILTIN))
def test_event_log_matches_the_golden_file(policy):
    golden = pd.read_csv(
        GOLDEN / f"{policy}.csv", keep_default_na=False, dtype={"nodes": str, "detail": str}
    )
    actual = events_of(policy)
    assert len(actual) == len(golden)
    for col in ("event", "job_id", "nodes", "detail"):
        assert actual[col].astype(str).tolist() == golden[col].astype(str).tolist(), col
    assert actual["gpus"].tolist() == golden["gpus"].tolist()
    for col in ("t_s", "overhead_s", "lost_s"):
        pd.testing.assert_series_equal(
            actual[col], golden[col], check_exact=False, rtol=0, atol=1e-6
        )


if __name__ == "__main__":
    for name in sorted(BUILTIN):
        events_of(name).to_csv(GOLDEN / f"{name}.csv", index=False, float_format="%.6f")
        print(f"wrote {GOLDEN / name}.csv")
