#!/usr/bin/python3
"""Learning curves on partially observed CartPole (issue 34, point 5):
python/examples/appo_recurrent.py with its GRU actor against the same
learner's MLP actor (--recurrent none), both on
``cartpole --env-arg observe_velocity=false`` (x and theta observed), one
launched stream node each, the same seed. Each run's progress lines give
its curve (env steps, wall seconds, last-20 mean return); runs stop at a
last-20 mean of 475 or after their step budget.

Writes recurrent_learning.csv (every point), recurrent_learning.md (each
run's result, the machine's load) and recurrent_learning.png (gnuplot) into
--out (default docs/benchmarks).

usage: bench_recurrent_learning.py [--gru-steps N] [--mlp-steps N] [--envs N]
                                   [--seed S] [--out DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "python", "examples", "appo_recurrent.py")


def run(cell, steps, envs, seed):
    """One example run: its JSON result (with the curve)."""
    cmd = [sys.executable, EXAMPLE, "--launch", str(envs), "--recurrent", cell,
           "--total-steps", str(steps), "--seed", str(seed), "--log-interval", "5"]
    print("+", " ".join(cmd), flush=True)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as p:
        lines = []
        for line in p.stdout:  # progress as it comes
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    result = [x for x in lines if x.startswith("{")]
    if not result:
        raise SystemExit(f"{cell}: no result (exit {p.returncode})")
    return json.loads(result[-1])


def plot(out, results):
    gp = shutil.which("gnuplot")
    if not gp:
        print("bench_recurrent_learning: gnuplot not found: no plot", file=sys.stderr)
        return
    data = []
    for name, r in results:
        path = os.path.join(out, f"recurrent_learning_{name}.dat")
        with open(path, "w") as f:
            for steps, _wall, ret in r["curve"]:
                if ret is not None:
                    f.write(f"{steps / 1e6:.4f} {ret:.2f}\n")
        data.append((name, path))
    plots = ", ".join(f"'{p}' using 1:2 with lines lw 2 title '{n}'" for n, p in data)
    script = f"""
set terminal pngcairo size 900,480 noenhanced
set output '{os.path.join(out, 'recurrent_learning.png')}'
set title 'APPO on CartPole observing x and theta only: last-20 mean return'
set xlabel 'env steps (M)'
set ylabel 'return'
set yrange [0:520]
set grid
set key left top
plot {plots}, 475 with lines dt 2 lc rgb '#888888' title 'target 475'
"""
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        print(f"bench_recurrent_learning: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)
    for _, path in data:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gru-steps", type=int, default=2_000_000)
    ap.add_argument("--mlp-steps", type=int, default=600_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    load0 = os.getloadavg()
    results = [("gru64", run("gru:64", a.gru_steps, a.envs, a.seed)),
               ("mlp", run("none", a.mlp_steps, a.envs, a.seed))]
    load1 = os.getloadavg()
    with open(os.path.join(a.out, "recurrent_learning.csv"), "w") as f:
        f.write("case,steps,wall_s,last20_return\n")
        for name, r in results:
            for steps, wall, ret in r["curve"]:
                f.write(f"{name},{steps},{wall},{'' if ret is None else ret}\n")
    with open(os.path.join(a.out, "recurrent_learning.md"), "w") as f:
        f.write(f"Measured by `bench/bench_recurrent_learning.py` (CartPole, observe_velocity="
                f"false, {a.envs} envs on one stream node, seed {a.seed}; load average "
                f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end; {os.cpu_count()} "
                "CPUs).\n\n| actor | env steps | wall s | best last-20 return | last-20 at the "
                "end | reached 475 |\n|---|---|---|---|---|---|\n")
        for name, r in results:
            f.write(f"| {r['cell']} | {r['steps']} | {r['wall_s']} | {r['best_last20']} | "
                    f"{r['last20_mean_return']} | {'yes' if r['reached_target'] else 'no'} |\n")
    plot(a.out, results)
    print(open(os.path.join(a.out, "recurrent_learning.md")).read())


if __name__ == "__main__":
    main()
