"""Loading is vectorised: time load + validate of a large CSV in the impactlab schema.

    python benchmarks/bench_loading.py               # 1,000,000 rows (the issue's target: < 20 s)
    python benchmarks/bench_loading.py --rows 200000

The rows are a synthetic trace repeated with fresh ids, so every column is realistic.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import impactlab as il

log = logging.getLogger("bench_loading")


def make_csv(path: Path, rows: int) -> None:
    """Write ``rows`` jobs in the schema (a generated trace, tiled) to ``path``."""
    base = il.generate(il.GeneratorConfig(gpus=256, days=7, seed=0)).trace
    reps = -(-rows // len(base))
    big = pd.concat([base] * reps, ignore_index=True).iloc[:rows]
    shift = np.repeat(np.arange(reps) * 7 * 86_400.0, len(base))[:rows]
    big = big.assign(
        job_id=[f"j{i:07d}" for i in range(rows)], submit_s=big["submit_s"].to_numpy() + shift
    )
    big.to_csv(path, index=False)


def main(rows: int) -> float:
    """Seconds to load and validate ``rows`` rows."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.csv"
        began = time.perf_counter()
        make_csv(path, rows)
        log.info(
            "wrote %d rows (%.0f MB) in %.1f s",
            rows,
            path.stat().st_size / 1e6,
            time.perf_counter() - began,
        )
        began = time.perf_counter()
        trace = il.load_trace(path)
        took = time.perf_counter() - began
    assert len(trace) == rows
    log.info("load_trace + validate: %d rows in %.2f s (%.0f rows/s)", rows, took, rows / took)
    return took


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(parser.parse_args().rows)
