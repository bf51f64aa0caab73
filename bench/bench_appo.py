#!/usr/bin/python3
"""APPO on a stream node vs PPO on a SEED-mode node, CartPole to the same
target, in one run.

For every seed (and --rounds times), alternately (PPO first for even runs,
APPO first for odd ones, so that drifting machine load hits both alike):
python/examples/ppo_cartpole.py --launch PPO_ENVS and appo_cartpole.py
--launch APPO_ENVS, each with --seed S and its own defaults, until the last
20 finished episodes average --target. Each run's saved actor is then run by
rollout-node itself (--policy FILE, 32 envs, 1000 steps each, sampled
actions) for an evaluation the stopping rule cannot flatter.

Figures: the learner's wall time to the target (``wall_s`` of its JSON
line: from attaching to the node(s) to the update that reached it), the
whole process's (Python and torch start-up, launching the node, closing),
env steps, updates, and the return over wall time (progress lines every
--log-interval s). Writes OUT/appo_vs_ppo.csv (one row per run),
OUT/appo_vs_ppo_curves.csv, OUT/appo_vs_ppo.md (tables) and
OUT/appo_vs_ppo.png (gnuplot; Debian: gnuplot-nox).

usage: bench_appo.py BUILD_DIR [--seeds 1,2,3,4,5] [--rounds N] [--out DIR]
       bench_appo.py BUILD_DIR --plots-only [--out DIR]
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "python", "examples")
PROGRESS = re.compile(r"^steps\s+(\d+)\s+episodes\s+(\d+)\s+last-20 return\s+(\S+)\s+\d+ "
                      r"steps/s\s+([\d.]+) s")
RUN_FIELDS = ["method", "seed", "round", "order", "reached", "wall_s", "process_s", "steps",
              "updates", "episodes", "last20", "eval_mean_return", "eval_episodes", "lag_mean",
              "load_before", "load_after"]


def run_example(method, args, seed, rnd, order, tmp):
    script = {"ppo": "ppo_cartpole.py", "appo": "appo_cartpole.py"}[method]
    envs = args.ppo_envs if method == "ppo" else args.appo_envs
    policy = os.path.join(tmp, f"{method}-{seed}-{rnd}.pb")
    cmd = [sys.executable, os.path.join(EXAMPLES, script), "--launch", str(envs), "--seed",
           str(seed), "--target", str(args.target), "--log-interval", str(args.log_interval),
           "--save-policy", policy]
    env = {**os.environ, "ROLLOUT_NODE": os.path.join(args.build, "rollout-node"),
           "ROLLOUT_PROTO_OUT": os.path.join(args.build, "proto")}
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.run_timeout)
    process_s = time.monotonic() - t0
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if not lines:
        raise SystemExit(f"bench_appo: {' '.join(cmd)} printed no result (exit {p.returncode}):"
                         f" {p.stderr[-2000:]}")
    r = json.loads(lines[-1])
    curve = [(float(m[4]), int(m[1]), float(m[3]))
             for m in map(PROGRESS.match, p.stdout.splitlines()) if m and m[3] != "nan"]
    ev = evaluate(args.build, policy, seed)
    row = {"method": method, "seed": seed, "round": rnd, "order": order,
           "reached": int(r["reached_target"]), "wall_s": r["wall_s"],
           "process_s": round(process_s, 2), "steps": r["steps"], "updates": r["updates"],
           "episodes": r["episodes"], "last20": r["last20_mean_return"],
           "eval_mean_return": ev.get("mean_return"), "eval_episodes": ev.get("episodes"),
           "lag_mean": r.get("lag_mean", 0.0), "load_before": round(load_before, 2),
           "load_after": round(os.getloadavg()[0], 2)}
    print(f"{method:4s} seed {seed} round {rnd}: {'reached' if row['reached'] else 'MISSED'} "
          f"{args.target} in {row['wall_s']:.2f} s ({row['process_s']:.2f} s process), "
          f"{row['steps']} steps, {row['updates']} updates; saved actor in the node: mean "
          f"{row['eval_mean_return']} over {row['eval_episodes']} episodes; load "
          f"{row['load_before']}", flush=True)
    return row, [(method, seed, rnd, *c) for c in curve]


def evaluate(build, policy, seed):
    """The saved actor run by rollout-node (sampled actions): its summary."""
    if not os.path.exists(policy):
        return {}
    q = subprocess.run([os.path.join(build, "rollout-node"), "--env", "cartpole", "--policy",
                        policy, "--num-envs", "32", "--steps", str(32 * 1000), "--seed",
                        str(1000 + seed), "--json", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    if q.returncode != 0:
        return {}
    return json.loads(q.stdout.strip().splitlines()[-1])


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def write_md(path, rows, args, load_start, load_end, image):
    ppo = {(r["seed"], r["round"]): r for r in rows if r["method"] == "ppo"}
    appo = {(r["seed"], r["round"]): r for r in rows if r["method"] == "appo"}
    keys = sorted(set(ppo) & set(appo))
    ratio = [float(ppo[k]["wall_s"]) / float(appo[k]["wall_s"]) for k in keys
             if int(ppo[k]["reached"]) and int(appo[k]["reached"])]
    pratio = [float(ppo[k]["process_s"]) / float(appo[k]["process_s"]) for k in keys
              if int(ppo[k]["reached"]) and int(appo[k]["reached"])]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = ["# APPO (stream node) vs PPO (SEED node) on CartPole", "",
           f"Generated by `bench/bench_appo.py` on {when}"
           f", commit {commit()}: {os.cpu_count()} CPUs, shared with other work (load average "
           f"{load_start} at the start, {load_end} at the end). Both learn CartPole to a last-20 "
           f"mean return of {args.target}, one after the other for each seed, the order "
           "alternating. `ppo_cartpole.py --launch "
           f"{args.ppo_envs}` (a SEED-mode node: every action is a round trip to the learner) "
           f"and `appo_cartpole.py --launch {args.appo_envs}` (a stream node acting with the "
           "pushed weights), each with its defaults. *wall* is the learner's time from attaching "
           "to the update that reached the target; *process* includes Python, torch and the "
           "node starting and stopping. *eval* is the saved actor run by `rollout-node --policy` "
           "(32 envs × 1000 steps, sampled actions): the mean return of its finished episodes.",
           "", "| seed | round | PPO wall s | APPO wall s | PPO ÷ APPO | PPO process s | APPO "
           "process s | PPO steps | APPO steps | PPO updates | APPO updates | PPO eval | APPO "
           "eval | APPO lag | load |", "|" + "---|" * 15]
    for k in keys:
        p, a = ppo[k], appo[k]
        mark = lambda r: "" if int(r["reached"]) else " (missed)"  # noqa: E731
        out.append(f"| {k[0]} | {k[1]} | {float(p['wall_s']):.2f}{mark(p)} | "
                   f"{float(a['wall_s']):.2f}{mark(a)} | "
                   f"{float(p['wall_s']) / float(a['wall_s']):.2f} | {p['process_s']} | "
                   f"{a['process_s']} | {p['steps']} | {a['steps']} | {p['updates']} | "
                   f"{a['updates']} | {p['eval_mean_return']} | {a['eval_mean_return']} | "
                   f"{a['lag_mean']} | {p['load_before']}/{a['load_before']} |")
    reached = {m: sum(int(r["reached"]) for r in rows if r["method"] == m) for m in ("ppo", "appo")}
    n = {m: sum(1 for r in rows if r["method"] == m) for m in ("ppo", "appo")}
    out += ["", "| | PPO (SEED) | APPO (stream) |", "|---|---|---|",
            f"| reached the target | {reached['ppo']} of {n['ppo']} | {reached['appo']} of "
            f"{n['appo']} |",
            f"| median wall s to the target | {med(float(r['wall_s']) for r in ppo.values()):.2f}"
            f" | {med(float(r['wall_s']) for r in appo.values()):.2f} |",
            f"| median process s | {med(float(r['process_s']) for r in ppo.values()):.2f} | "
            f"{med(float(r['process_s']) for r in appo.values()):.2f} |",
            f"| median env steps | {med(int(r['steps']) for r in ppo.values()):.0f} | "
            f"{med(int(r['steps']) for r in appo.values()):.0f} |",
            f"| median eval return | {med(evalf(r) for r in ppo.values()):.1f} | "
            f"{med(evalf(r) for r in appo.values()):.1f} |", "",
            f"Median of the per-seed ratios PPO wall ÷ APPO wall: **{med(ratio):.2f}** "
            f"(min {min(ratio, default=float('nan')):.2f}, max "
            f"{max(ratio, default=float('nan')):.2f}, {len(ratio)} pairs where both reached "
            f"it); process time: {med(pratio):.2f}.", "",
            f"![last-20 return vs wall seconds]({image})", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def evalf(r):
    v = r["eval_mean_return"]
    return float(v) if v not in (None, "") else None


def commit():
    p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    return p.stdout.strip() or "?"


def plot(curves_csv, out, fmt, target):
    data = {"ppo": {}, "appo": {}}
    with open(curves_csv) as f:
        for r in csv.DictReader(f):
            data[r["method"]].setdefault((r["seed"], r["round"]), []).append(
                (float(r["t"]), float(r["last20"])))
    blocks, plots = [], []
    for method, color, title in (("ppo", "#1f77b4", "PPO, SEED node"),
                                 ("appo", "#d62728", "APPO, stream node")):
        for i, pts in enumerate(data[method].values()):
            name = f"${method}{i}"
            blocks.append(f"{name} << EOD\n" + "\n".join(f"{t} {v}" for t, v in pts) + "\nEOD")
            plots.append(f"{name} using 1:2 with lines lw 1.5 lc rgb '{color}' "
                         + (f"title '{title}'" if i == 0 else "notitle"))
    term = "pngcairo size 900,520 font ',11'" if fmt == "png" else "svg size 900,520"
    script = "\n".join(blocks) + f"""
set terminal {term}
set output "{out}"
set title "CartPole to a last-20 mean return of {target}: one line per seed"
set grid
set key bottom right
set xlabel "learner wall seconds"
set ylabel "last-20 mean return"
set yrange [0:520]
set xrange [0:*]
plot {', '.join(plots)}, {target} with lines dt 2 lc rgb 'gray' title 'target'
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"bench_appo: no plot ({e}); bash .ci/install-deps installs gnuplot",
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("build", help="build directory (rollout-node, proto/)")
    ap.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated (default 1,2,3,4,5)")
    ap.add_argument("--rounds", type=int, default=1, help="passes over the seeds (default 1)")
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--ppo-envs", type=int, default=8, help="PPO's --launch (default 8, its "
                    "documented setting)")
    ap.add_argument("--appo-envs", type=int, default=64, help="APPO's --launch (default 64)")
    ap.add_argument("--log-interval", type=float, default=0.25)
    ap.add_argument("--run-timeout", type=float, default=900.0)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--plot-format", choices=("png", "svg"), default="png")
    ap.add_argument("--plots-only", action="store_true",
                    help="run nothing: redraw the plot from OUT/appo_vs_ppo_curves.csv")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs_csv = os.path.join(args.out, "appo_vs_ppo.csv")
    curves_csv = os.path.join(args.out, "appo_vs_ppo_curves.csv")
    image = os.path.join(args.out, f"appo_vs_ppo.{args.plot_format}")
    if args.plots_only:
        plot(curves_csv, image, args.plot_format, args.target)
        return 0
    seeds = [int(s) for s in args.seeds.split(",") if s]
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows, curves, i = [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench_appo") as tmp:
        for rnd in range(args.rounds):
            for seed in seeds:
                order = ("ppo", "appo") if i % 2 == 0 else ("appo", "ppo")
                i += 1
                for k, method in enumerate(order):
                    row, c = run_example(method, args, seed, rnd, k, tmp)
                    rows.append(row)
                    curves += c
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with open(runs_csv, "w", newline="") as f:
        w = csv.DictWriter(f, RUN_FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(curves_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["method", "seed", "round", "t", "steps", "last20"])
        w.writerows(curves)
    write_md(os.path.join(args.out, "appo_vs_ppo.md"), rows, args, load_start, load_end,
             os.path.basename(image))
    plot(curves_csv, image, args.plot_format, args.target)
    print(open(os.path.join(args.out, "appo_vs_ppo.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
