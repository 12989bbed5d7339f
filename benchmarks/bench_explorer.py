"""What a slider change in the Explorer costs, stage by stage, on the workshop scenario.

    python benchmarks/bench_explorer.py              # workshop scenario (88 GPUs x 7 days)
    python benchmarks/bench_explorer.py --gpus 256   # a larger cluster, same knobs
    python benchmarks/bench_explorer.py --gpus 256 --days 14   # the default scenario's size

For each change (a new seed, so nothing is cached) it times the stages the app runs: workload
generation, the simulation, the metrics and tables behind the charts, building the chart of the
open tab, and its Vega-Lite serialisation (what the widget sends to the browser); then the
whole ``Explorer`` round trip as the app does it (best of ``--repeat``). Rendering in the browser
is not included (Vega draws a few thousand marks in well under 100 ms).
"""

from __future__ import annotations

import argparse
import time

import impactlab as il
from impactlab.widgets import TABS, Explorer, default_config


def timed(fn, *args, **kwargs) -> tuple[object, float]:
    """``fn(*args)`` and its wall time."""
    began = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - began


def stages(config: il.SimConfig, tab: str) -> dict[str, float]:
    """Seconds per stage of one Explorer run with ``tab`` open."""
    inputs, t_gen = timed(il.prepare, config)
    results, t_sim = timed(il.compare, config, [config.policy], inputs=inputs)
    _, t_metrics = timed(lambda: [r.summary() for r in results])  # type: ignore[attr-defined]
    chart, t_chart = timed(TABS[tab], results)
    _, t_json = timed(chart.to_dict)  # type: ignore[attr-defined]
    return {
        "generate": t_gen,
        "simulate": t_sim,
        "metrics": t_metrics,
        "chart": t_chart,
        "to_dict": t_json,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, help="cluster size (default: the workshop scenario's)")
    parser.add_argument("--days", type=float, help="simulated days (default: the scenario's)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = default_config()
    if args.gpus:
        base = base.with_params(gpus=args.gpus, budgets_path=None)
    if args.days:
        base = base.with_params(days=args.days)
    print(f"{base.gpus} GPUs x {base.days:g} days, demand {base.demand:g}, policy {base.policy}")
    print(
        f"{'tab':12} {'generate':>9} {'simulate':>9} {'metrics':>8} {'chart':>7} {'to_dict':>8} {'total':>7}"
    )
    for tab in TABS:
        best = min(
            (stages(base.with_params(seed=seed), tab) for seed in range(1, args.repeat + 1)),
            key=lambda s: sum(s.values()),
        )
        cells = " ".join(f"{best[k]:>{w}.3f}" for k, w in zip(best, (9, 9, 8, 7, 8)))
        print(f"{tab:12} {cells} {sum(best.values()):7.3f}")
    app = Explorer(config=base)
    rounds = []
    for seed in range(10, 10 + args.repeat):
        _, wall = timed(app.set, seed=seed)
        rounds.append(wall)
    print(
        f"Explorer round trip (slider change -> charts replaced), best of {args.repeat}: {min(rounds):.3f} s"
        f" (worst {max(rounds):.3f} s)"
    )
    app.set(seed=10)
    _, cached = timed(app.set, seed=10)
    print(f"back to a setting seen before (cache): {cached * 1000:.1f} ms")


if __name__ == "__main__":
    main()
