#!/usr/bin/env python3
"""What --tensorboard and --prometheus cost: rollout-node steps/s with both
on (an event file per run, the endpoint scraped once a second, as a
Prometheus server would) divided by steps/s with both off, in one run.

    bench/bench_metrics_cost.py build/rollout-node [--seconds 2] [--rounds 7]
        [--out docs/benchmarks]

The machine is shared, so off and on runs are interleaved (off, on, then on,
off, ...) and the ratio is the ratio of the medians; each sample also says
the load (the 1-minute load average and the CPU time other processes used
during it, from /proc/stat less our own). Steps per CPU-second of the node
process (every thread) is given beside wall-clock steps/s: it is less
sensitive to other processes taking the CPUs.

Writes OUT/metrics_cost.csv (every sample), OUT/metrics_cost.md (the table
docs/benchmarks.md quotes) and OUT/metrics_cost.png (matplotlib).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request

CASES = [
    ("cartpole + MLP(64,64)", ["--env", "cartpole"]),
    ("pendulum + MLP(64,64)", ["--env", "pendulum"]),
]
TARGET = 0.98


def cpu_jiffies():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def scrape_every(addr, stop, counts):
    """GET /metrics once a second until stop is set (a Prometheus server's
    work, at a shorter interval than its default 1 min)."""
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
                r.read()
            counts[0] += 1
        except OSError:
            pass


def run(node, args, seconds, on, tmp):
    cmd = [node, "--json", "--quiet", "--seconds", str(seconds), *args]
    if on:
        cmd += ["--tensorboard", tempfile.mkdtemp(dir=tmp), "--prometheus", "127.0.0.1:0"]
    hz = os.sysconf("SC_CLK_TCK")
    b0, t0 = cpu_jiffies()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop, scrapes, th = threading.Event(), [0], None
    if on:
        for line in p.stderr:
            if "serving Prometheus metrics on" in line:
                addr = line.split(" on ")[1].split()[0]
                th = threading.Thread(target=scrape_every, args=(addr, stop, scrapes))
                th.start()
                break
    out, err = p.communicate(timeout=seconds + 120)
    stop.set()
    if th:
        th.join()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b1, t1 = cpu_jiffies()
    if p.returncode != 0:
        sys.exit(f"{cmd}: exit {p.returncode}: {err}")
    s = json.loads(out.strip().splitlines()[-1])
    ours = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    others = max(0.0, (b1 - b0) / hz - ours)
    return {
        "sps": s["sps"],
        "cpu_sps": s["steps"] / ours if ours > 0 else 0.0,
        "others_cpus": others / s["seconds"] if s["seconds"] > 0 else 0.0,
        "load1": os.getloadavg()[0],
        "scrapes": scrapes[0],
    }


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(CASES), figsize=(5.5 * len(CASES), 3.8))
    for ax, (case, _) in zip(axes, CASES):
        for mode, color in (("off", "tab:gray"), ("on", "tab:blue")):
            pts = [(r["round"], r["sps"] / 1e6) for r in rows
                   if r["case"] == case and r["mode"] == mode]
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=color,
                    label="--tensorboard --prometheus" if mode == "on" else "off")
        ratio = median(rows, case, "on", "sps") / median(rows, case, "off", "sps")
        ax.set_title(f"{case}\non ÷ off (medians) = {ratio:.3f} (target ≥ {TARGET})")
        ax.set_xlabel("round (off and on interleaved)")
        ax.set_ylabel("env steps/s (millions)")
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def median(rows, case, mode, key):
    return statistics.median(r[key] for r in rows if r["case"] == case and r["mode"] == mode)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("node")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "benchmarks"))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ro_bench_metrics_") as tmp:
        for rnd in range(a.rounds):
            for case, args in CASES:
                order = (False, True) if rnd % 2 == 0 else (True, False)
                for on in order:
                    r = run(a.node, args, a.seconds, on, tmp)
                    r.update(round=rnd, case=case, mode="on" if on else "off")
                    rows.append(r)
                    print(f"round {rnd} {case} {r['mode']}: {r['sps'] / 1e6:.3f} M steps/s, "
                          f"{r['cpu_sps'] / 1e6:.3f} M per CPU-s, others {r['others_cpus']:.2f} "
                          f"CPUs, load {r['load1']:.2f}", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    keys = ["round", "case", "mode", "sps", "cpu_sps", "others_cpus", "load1", "scrapes"]
    with open(os.path.join(a.out, "metrics_cost.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(f"{r[k]:.1f}" if isinstance(r[k], float) and k.endswith("sps")
                             else f"{r[k]:.2f}" if isinstance(r[k], float) else f'"{r[k]}"'
                             if k == "case" else str(r[k]) for k in keys) + "\n")
    lines = [
        f"`bench/bench_metrics_cost.py build/rollout-node --seconds {a.seconds:g} --rounds "
        f"{a.rounds}`: {a.rounds} rounds, off and on interleaved, {a.seconds:g} s each; on = "
        "`--tensorboard DIR --prometheus 127.0.0.1:0` with `/metrics` scraped every second. "
        f"{os.cpu_count()} CPUs; other processes used "
        f"{statistics.median(r['others_cpus'] for r in rows):.2f} CPUs (median over the "
        f"samples, {min(r['others_cpus'] for r in rows):.2f} to "
        f"{max(r['others_cpus'] for r in rows):.2f}); load average "
        f"{min(r['load1'] for r in rows):.2f} to {max(r['load1'] for r in rows):.2f}.",
        "",
        "| case | off, M steps/s | on, M steps/s | on ÷ off, wall-clock | on ÷ off, CPU time "
        "| target | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case, _ in CASES:
        off, on = median(rows, case, "off", "sps"), median(rows, case, "on", "sps")
        coff, con = median(rows, case, "off", "cpu_sps"), median(rows, case, "on", "cpu_sps")
        lines.append(f"| {case} | {off / 1e6:.3f} | {on / 1e6:.3f} | **{on / off:.3f}** | "
                     f"{con / coff:.3f} | ≥ {TARGET} | {'yes' if on / off >= TARGET else 'no'} |")
    with open(os.path.join(a.out, "metrics_cost.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(rows, os.path.join(a.out, "metrics_cost.png"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
