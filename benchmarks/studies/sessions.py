"""Interactive sessions under impactful: what the 8 h cap costs them, and the what-ifs.

    python benchmarks/studies/sessions.py  # 88 and 256 GPUs, seeds 0-2
    python benchmarks/studies/sessions.py --gpus 256 --seeds 0

Each row is the mean over seeds of the same traces replayed under each variant: the rule for a
preempted session (``preempted_sessions``: it ends, is restored whole, or is requeued and rerun
as the model did before), and a longer protection cap for sessions (``cap_hours_interactive``).
"Long" sessions are those longer than 8 h; shares are of the sessions that ran in the window.
The output is pasted into docs/calibration.md.
"""

from __future__ import annotations

import argparse

import numpy as np

import impactlab as il

#: Variant label -> parameter overrides of the default impactful run.
VARIANTS = {
    "end (default)": {},
    "end, cap 24 h for sessions": {"cap_hours_interactive": 24.0},
    "restore (what-if)": {"preempted_sessions": "restore"},
    "requeue (the old model)": {"preempted_sessions": "requeue"},
}
LONG_S = 8 * 3600.0


def session_row(result: il.SimResult) -> dict[str, float]:
    """Sessions of one run: preempted share (all, long), killed share, finished share, lost and
    cut shares of their GPU-hours, waits."""
    summary, jobs = result.summary(), result.jobs
    kind = summary["by_kind"]["interactive"]
    sessions = jobs[(jobs["kind"] == "interactive") & (jobs["submit_s"] >= result.window.t0)]
    durations = result.trace.set_index("job_id")["duration_s"]
    long = sessions[sessions["job_id"].map(durations).to_numpy() > LONG_S]
    held = kind["gpu_hours"] or float("nan")
    return {
        "sessions": kind["ran"],
        "preempted": kind["preempted_share"],
        "long preempted": float((long["preempts"] > 0).mean()) if len(long) else float("nan"),
        "killed": summary["sessions_killed_share"],
        "finished": float((sessions["state"] == "finished").mean())
        if len(sessions)
        else float("nan"),
        "lost / held": summary["session_lost_gpu_hours"] / held,
        "cut GPU-h": summary["session_cut_gpu_hours"],
        "wait p90 (s)": kind["wait_p90_s"] or 0.0,
        "resubmit wait p90 (s)": summary["resubmit_wait_s"]["p90"] or 0.0,
        "impact": summary["impact"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="*", default=[88, 256])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = parser.parse_args()
    columns = None
    for gpus in args.gpus:
        rows: dict[str, list[dict[str, float]]] = {label: [] for label in VARIANTS}
        for seed in args.seeds:
            config = il.SimConfig(gpus=gpus, seed=seed)
            variants = {
                label: {"policy": "impactful", **knobs} for label, knobs in VARIANTS.items()
            }
            for label, result in zip(VARIANTS, il.compare(config, variants)):
                rows[label].append(session_row(result))
        if columns is None:
            columns = list(next(iter(rows.values()))[0])
            print("| GPUs | sessions rule | " + " | ".join(columns) + " |")
            print("|---|---|" + "---|" * len(columns))
        for label, runs in rows.items():
            means = [np.nanmean([r[c] for r in runs]) for c in columns]
            cells = [
                f"{m:.0f}" if c.endswith("(s)") or c in ("sessions", "cut GPU-h") else f"{m:.2f}"
                for c, m in zip(columns, means)
            ]
            print(f"| {gpus} | {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
