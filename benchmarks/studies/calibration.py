"""Generated workload statistics against the calibration targets in docs/calibration.md, as Markdown.

    python benchmarks/studies/calibration.py [--gpus 256] [--days 14] [--seeds 0 1 2]

The output is pasted into docs/calibration.md when the generator changes.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import impactlab as il
from impactlab.base.gangs import held_gpus

TARGETS = {  # kind -> (share of funded GPU time, GPUs, duration)
    "debug+interactive": ("2-5%", "1-8", "minutes to hours; interactive often > 8 h"),
    "eval": ("2-10%", "mostly 1, <= 8", "1-30 min, in bursts"),
    "training": ("20-40%", "8-64", "1-24 h"),
    "pretrain": ("50-70%", "128-1024, a fraction of the cluster", "days, in chains"),
}


def kind_table(trace: pd.DataFrame) -> pd.DataFrame:
    """Per kind: share of funded GPU time, job share, GPU and duration quantiles."""
    funded = trace[trace["project"] != ""].copy()
    funded["group"] = funded["kind"].replace(
        {"debug": "debug+interactive", "interactive": "debug+interactive"}
    )
    funded["gpu_h"] = funded["gpus"] * funded["duration_s"] / 3600
    rows = []
    for group, g in funded.groupby("group"):
        rows.append(
            {
                "kind": group,
                "target share": TARGETS[group][0],
                "share of funded GPU-h": f"{g['gpu_h'].sum() / funded['gpu_h'].sum():.1%}",
                "jobs": len(g),
                "target GPUs": TARGETS[group][1],
                "GPUs p50 / max": f"{g['gpus'].median():.0f} / {g['gpus'].max()}",
                "target duration": TARGETS[group][2],
                "duration p50 / p90": f"{_dur(g['duration_s'].median())} / {_dur(g['duration_s'].quantile(0.9))}",
                "over 8 h": f"{(g['duration_s'] > 8 * 3600).mean():.0%}",
            }
        )
    return pd.DataFrame(rows)


def overall(trace: pd.DataFrame, config: il.GeneratorConfig) -> dict[str, str]:
    """Whole-trace statistics and the offered load."""
    held = np.array([held_gpus(int(g), config.gpus_per_node) for g in trace["gpus"]])
    gpu_s = held * trace["duration_s"].to_numpy()
    funded = (trace["project"] != "").to_numpy()
    long = trace["duration_s"].to_numpy() > 8 * 3600
    span = config.gpus * config.days * 86400
    return {
        "jobs (funded / unallocated)": f"{funded.sum()} / {(~funded).sum()}",
        "median job duration (funded / all)": f"{_dur(trace['duration_s'][funded].median())} / {_dur(trace['duration_s'].median())}",
        "median GPUs per job": f"{trace['gpus'].median():.0f}",
        "jobs over 8 h (funded / all)": f"{long[funded].mean():.1%} / {long.mean():.1%}",
        "GPU time in jobs over 8 h (funded / all)": f"{gpu_s[funded & long].sum() / gpu_s[funded].sum():.0%} / {gpu_s[long].sum() / gpu_s.sum():.0%}",
        "offered load (demand): target / generated": f"{config.demand:g} / {gpu_s.sum() / span:.2f}",
        "funded load: target / generated": f"{config.funded_load:g} / {gpu_s[funded].sum() / span:.2f}",
    }


def _dur(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=float, default=14)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    for seed in args.seeds:
        config = il.GeneratorConfig(gpus=args.gpus, days=args.days, seed=seed)
        trace = il.generate(config).trace
        print(f"\n### {args.gpus} GPUs, {args.days:g} days, seed {seed}\n")
        print(kind_table(trace).to_markdown(index=False))
        print()
        print(pd.Series(overall(trace, config)).to_frame("value").to_markdown())


if __name__ == "__main__":
    main()
