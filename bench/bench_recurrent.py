#!/usr/bin/python3
"""Recurrent policies' speed, in one run (issue 34, point 6): a local node
acting with MLP(64,64) then GRU(128) on CartPole against the same node with
the MLP alone, and stream mode's delivered ratio (transitions rollout-learner
received per second over the node's own local steps/s) with and without the
state tensors. The cases run in turn, round after round (--rounds), and each
ratio is the median of its per-round ratios, so that a figure and its
reference are measured seconds apart on a machine whose load drifts. Each
ratio is given twice: of steps/s, and of steps per CPU second of the run's
processes (from their rusage), which other processes' load disturbs less
on a shared machine.

  local-mlp        rollout-node, CartPole, MLP(64,64) tanh, W workers
  local-gru128     the same with --recurrent gru:128 (the ratio: >= 0.5 asked)
  local-lstm128    the same with --recurrent lstm:128
  stream-mlp       --learner stream + rollout-learner on a Unix socket, the
                   segments in the node's shared memory: received/s over
                   local-mlp's steps/s
  stream-gru128    the same with the GRU: received/s over local-gru128's;
                   its segments carry state/h ([N, 128] floats each)

Writes recurrent.csv and recurrent.md into --out (default docs/benchmarks).

usage: bench_recurrent.py BUILD_DIR [--seconds S] [--rounds N] [--envs N]
                          [--workers W] [--out DIR] [--quick]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_learners import fmt_rate, run_local, run_stream_c  # noqa: E402

ROOT = os.path.dirname(HERE)
GRU = ("--recurrent", "gru:128")
LSTM = ("--recurrent", "lstm:128")
# case -> (its reference case, the target of its ratio or None)
REFS = {"local-gru128": ("local-mlp", 0.5), "local-lstm128": ("local-mlp", None),
        "stream-mlp": ("local-mlp", 0.9), "stream-gru128": ("local-gru128", 0.9)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--quick", action="store_true", help="one short round: a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 0.5, 1
    b, s, w, e = a.build, a.seconds, a.workers, a.envs
    cases = {
        "local-mlp": lambda: run_local(b, e, w, s),
        "local-gru128": lambda: run_local(b, e, w, s, GRU),
        "local-lstm128": lambda: run_local(b, e, w, s, LSTM),
        "stream-mlp": lambda: run_stream_c(b, e, w, s, unix=True),
        "stream-gru128": lambda: run_stream_c(b, e, w, s, unix=True, node_args=GRU),
    }
    load0 = os.getloadavg()
    res = {k: [] for k in cases}
    for r in range(a.rounds):
        for name, fn in cases.items():
            res[name].append(fn())
            print(f"round {r + 1}: {name:14s} {fmt_rate(res[name][-1][0]):>11s}", flush=True)
    load1 = os.getloadavg()
    rows = []
    for name, runs in res.items():
        ref, target = REFS.get(name, (None, None))
        ratio = statistics.median(x[0] / y[0] for x, y in zip(runs, res[ref])) if ref else None
        cpu_ratio = statistics.median(y[1] / x[1] for x, y in zip(runs, res[ref])) if ref else None
        rows.append((name, statistics.median(x[0] for x in runs),
                     statistics.median(x[1] for x in runs), ratio, cpu_ratio, ref or "", target))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "recurrent.csv"), "w") as f:
        f.write("case,sps,cpu_ms_per_msteps,ratio,cpu_ratio,reference,target\n")
        for name, sps, cpu, ratio, cr, ref, target in rows:
            f.write(f"{name},{sps:.0f},{cpu:.1f},{'' if ratio is None else f'{ratio:.3f}'},"
                    f"{'' if cr is None else f'{cr:.3f}'},{ref},{'' if target is None else target}\n")
    with open(os.path.join(a.out, "recurrent.md"), "w") as f:
        f.write(f"Measured by `bench/bench_recurrent.py` ({a.rounds} rounds of {s:g} s, "
                f"{e} envs, {w} workers; load average {load0[0]:.1f} at the start, "
                f"{load1[0]:.1f} at the end; {os.cpu_count()} CPUs).\n\n")
        f.write("| case | steps/s (median) | CPU ms per M steps | ratio | ratio (CPU) | against | "
                "target | met |\n|---|---|---|---|---|---|---|---|\n")
        for name, sps, cpu, ratio, cr, ref, target in rows:
            met = "" if target is None or ratio is None else ("yes" if ratio >= target else "no")
            f.write(f"| {name} | {fmt_rate(sps)} | {cpu:.0f} | "
                    f"{'' if ratio is None else f'{ratio:.3f}'} | "
                    f"{'' if cr is None else f'{cr:.3f}'} | {ref} | "
                    f"{'' if target is None else f'>= {target:g}'} | {met} |\n")
    print(open(os.path.join(a.out, "recurrent.md")).read())


if __name__ == "__main__":
    main()
