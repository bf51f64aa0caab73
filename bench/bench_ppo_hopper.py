#!/usr/bin/env python3
"""CleanRL's continuous PPO on rollout/Hopper-v5 (python/examples/ppo_hopper.py):
its learning curve and wall time, written to docs/benchmarks/ppo_hopper.{csv,md,png}.

    .venv/bin/python bench/bench_ppo_hopper.py                 # runs 1 M steps
    .venv/bin/python bench/bench_ppo_hopper.py --from-log LOG  # a run's --json output

The run is the example as it is (its defaults: 8 envs, 256 steps per update,
1 M steps, seed 1, one torch thread); the figure of issue 29 is the first
global step at which the mean return of the last 20 episodes reaches 1000.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET = 1000.0


def summary_of(text: str) -> dict:
    """The run's JSON summary; for a run still going (or cut), the same
    figures from its per-update lines."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    curve, wall = [], 0.0
    for m in re.finditer(r"step (\d+) mean_return_20 (\S+) wall (\d+)s", text):
        curve.append((int(m.group(1)), float(m.group(2))))
        wall = float(m.group(3))
    if not curve:
        raise SystemExit("bench_ppo_hopper: the log holds no update line")
    finite = [r for _, r in curve if r == r]
    return {"steps": curve[-1][0], "wall_s": wall, "final_mean_return": curve[-1][1],
            "best_mean_return": max(finite) if finite else float("nan"), "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-log", help="a log of ppo_hopper.py --json (no run)")
    ap.add_argument("--total-steps", type=int, default=1_000_000)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    args = ap.parse_args()
    if args.from_log:
        with open(args.from_log) as f:
            s = summary_of(f.read())
    else:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "python", "examples",
                                                         "ppo_hopper.py"), "--json",
                            "--total-steps", str(args.total_steps)],
                           capture_output=True, text=True, check=True)
        s = summary_of(p.stdout)
    curve = [(int(a), float(b)) for a, b in s["curve"]]
    first = next((step for step, ret in curve if ret >= TARGET), None)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ppo_hopper.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["global_step", "mean_return_last_20"])
        w.writerows(curve)
    lines = ["# PPO on rollout/Hopper-v5 (bench/bench_ppo_hopper.py)", "",
             "`python/examples/ppo_hopper.py`: CleanRL's continuous PPO with Gymnasium's "
             "wrappers on `gym.make_vec(\"rollout/Hopper-v5\", num_envs=8)`, its defaults.", "",
             "| steps | wall time | first step with mean return (last 20) >= 1000 | final mean "
             "return | best mean return |", "| --- | --- | --- | --- | --- |",
             f"| {s['steps']} | {s['wall_s']:.0f} s | {first if first else 'not reached'} | "
             f"{s['final_mean_return']:.1f} | {s['best_mean_return']:.1f} |", "",
             "![curve](ppo_hopper.png)"]
    with open(os.path.join(args.out, "ppo_hopper.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([c[0] for c in curve], [c[1] for c in curve], label="mean return, last 20 episodes")
    ax.axhline(TARGET, color="gray", linestyle="--", label="1000")
    ax.set_xlabel("env steps")
    ax.set_ylabel("return")
    ax.set_title("CleanRL PPO on rollout/Hopper-v5")
    ax.ticklabel_format(axis="x", style="plain")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1e6:g} M"))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "ppo_hopper.png"), dpi=110)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
