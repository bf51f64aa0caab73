#!/usr/bin/env python3
"""The learning curve of python/examples/appo_breakout.py, from its JSON lines.

    python python/examples/appo_breakout.py --num-envs 16 --report-every 20 > run.jsonl
    python bench/plot_appo_breakout.py run.jsonl

Each progress line holds ``steps`` and ``mean_return_last20`` (the mean
return of the last 20 finished episodes); the last line, if the run ended,
the whole run. Writes appo_breakout.csv, appo_breakout.md and
appo_breakout.png into --out (default docs/benchmarks), with the load
average at the time of plotting and the command line given by --command.
"""
from __future__ import annotations

import argparse
import csv
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--command", default="python/examples/appo_breakout.py --num-envs 16")
    args = ap.parse_args()
    points, final = [], None
    with open(args.log) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "updates" in r and "mean_lag" in r and "wall_s" not in r:
                points.append(r)
            elif "wall_s" in r:
                final = r
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "appo_breakout.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["steps", "updates", "episodes", "mean_return_last20", "mean_lag"])
        for r in points:
            w.writerow([r["steps"], r["updates"], r["episodes"], r["mean_return_last20"],
                        r["mean_lag"]])
    load = os.getloadavg()
    first = points[0]["mean_return_last20"] if points else float("nan")
    best = max((r["mean_return_last20"] for r in points), default=float("nan"))
    last = points[-1] if points else None
    lines = ["# APPO with a CNN on Breakout (python/examples/appo_breakout.py)", "",
             f"`{args.command}`; curve from its progress lines by `bench/plot_appo_breakout.py` "
             f"(load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} when plotted). Mean "
             "return of the last 20 finished episodes (full games, 5 lives, no reward "
             "clipping in the figure).", "",
             "| first point | best | last point | steps at the last point | updates | episodes "
             "| mean policy lag (updates) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    if last:
        lines.append(f"| {first:.2f} | {best:.2f} | {last['mean_return_last20']:.2f} | "
                     f"{last['steps']} | {last['updates']} | {last['episodes']} | "
                     f"{last['mean_lag']:.2f} |")
    if final is None:
        lines += ["", "The run was stopped before its --total-steps: the table ends at its last "
                  "progress line."]
    else:
        lines += ["", f"The run ended after {final['steps']} steps and {final['wall_s']:.0f} s "
                  "wall clock; its last line: mean return of the first 20 episodes "
                  f"{final['mean_return_first20']:.2f}, of the last 20 "
                  f"{final['mean_return_last20']:.2f}."]
    with open(os.path.join(args.out, "appo_breakout.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([r["steps"] for r in points], [r["mean_return_last20"] for r in points])
    ax.set_xlabel("env steps (agent steps, 4 frames each)")
    ax.set_ylabel("mean return, last 20 episodes")
    ax.set_title("APPO, small CNN, ALE Breakout (rollout env workers)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "appo_breakout.png"), dpi=110)


if __name__ == "__main__":
    main()
