#!/usr/bin/env python3
"""Snapshots (rollout-node --snapshot-every) and seeking (rollout-replay --from).

    bench/bench_snapshots.py build/rollout-node build/rollout-replay [--seconds 3]
        [--repeats 5] [--dir DIR] [--seek-steps 1e6,1e7,1e8] [--out docs/benchmarks]

1. Cost: each case records with and without --snapshot-every 10000,
   alternately, --repeats times (--seconds each, or a step count that
   gives every env 3 snapshots); the medians of steps/s (and of the node's
   CPU time per step, less sensitive to other load) are compared: on / off.
2. Seek: for each size N in --seek-steps, records a cartpole run of N steps
   with --snapshot-every 10000, then times rollout-replay --verify --from
   N-1000 (reaching the recording's last steps) three times, the median and, for sizes up to 1e7,
   a full --verify for comparison. The files go to --dir and are deleted.

The load average before and after is printed: the machine may be shared.
Writes OUT/snapshots.csv and OUT/snapshots.md (the tables, as printed).
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

K = 10000
# (name, node args, env steps per run: None for --seconds). A case must
# take several K steps per env in a run, or it writes no snapshot and
# measures nothing: the fast envs do so within --seconds on any machine.
CASES = [
    ("cartpole + MLP(64,64), 64 envs", ["--env", "cartpole", "--num-envs", "64"], None),
    ("pendulum + MLP(64,64), 64 envs", ["--env", "pendulum", "--num-envs", "64"], None),
    # MuJoCo's full state (warm start included): 4 envs of 3 K steps each,
    # by step count (a loaded machine takes fewer in --seconds).
    ("hopper + MLP(64,64), 4 envs", ["--env", "hopper", "--num-envs", "4"], 4 * 3 * K),
]


def node_run(node, args, seconds=None, steps=None, record=None, every=0):
    cmd = [node, "--json", "--quiet", *args]
    cmd += ["--seconds", str(seconds)] if seconds else ["--steps", str(steps)]
    if record:
        cmd += ["--record", record]
    if every:
        cmd += ["--snapshot-every", str(every)]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{cmd}: exit {p.returncode}: {p.stderr}")
    s = json.loads(p.stdout.strip().splitlines()[-1])
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    s["cpu_ns_per_step"] = cpu * 1e9 / max(s["steps"], 1)
    return s


def timed(cmd):
    """Runs cmd: (wall seconds, its stderr, its CPU seconds: user + system,
    what other load on a shared machine does not add to)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{cmd}: exit {p.returncode}: {p.stderr}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return dt, p.stderr, cpu


def load():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("node")
    ap.add_argument("replay")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", default=".")
    ap.add_argument("--seek-steps", default="1e6,1e7")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-snapshots-", dir=a.dir)
    lines = [f"{os.uname().nodename}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}; "
             f"before: {load()}", ""]
    csv = ["kind,case,off_sps,on_sps,ratio,off_cpu_ns,on_cpu_ns,ratio_cpu,snapshots,bytes_off,"
           "bytes_on"]
    lines += [f"Cost of --snapshot-every {K} on a recording run (medians of {a.repeats}, "
              f"{a.seconds:g} s each or hopper's {CASES[2][2]:,} steps, alternating; CPU time: the "
              f"node's user + system per step, which others' load does not add to):", "",
              "| case | record steps/s | + snapshots steps/s | on ÷ off | on ÷ off, CPU time |"
              " snapshots | bytes off | bytes on |",
              "|---|---|---|---|---|---|---|---|"]
    for name, args, steps in CASES:
        off, on = [], []
        for _ in range(a.repeats):
            for every, acc in ((0, off), (K, on)):
                f = os.path.join(d, "t.traj")
                acc.append(node_run(a.node, args, seconds=None if steps else a.seconds,
                                    steps=steps, record=f, every=every))
                os.unlink(f)
        o_sps = statistics.median(x["sps"] for x in off)
        n_sps = statistics.median(x["sps"] for x in on)
        o_cpu = statistics.median(x["cpu_ns_per_step"] for x in off)
        n_cpu = statistics.median(x["cpu_ns_per_step"] for x in on)
        m_off = sorted(off, key=lambda x: x["sps"])[len(off) // 2]
        m_on = sorted(on, key=lambda x: x["sps"])[len(on) // 2]
        row = (name, o_sps, n_sps, n_sps / o_sps, o_cpu, n_cpu, o_cpu / n_cpu,
               m_on["record_snapshots"], m_off["record_bytes"], m_on["record_bytes"])
        csv.append("cost,%s,%.0f,%.0f,%.4f,%.1f,%.1f,%.4f,%d,%d,%d" % row)
        lines.append("| %s | %s | %s | %.3f | %.3f | %d | %d | %d |" % (
            name, f"{o_sps:,.0f}", f"{n_sps:,.0f}", n_sps / o_sps, o_cpu / n_cpu,
            m_on["record_snapshots"], m_off["record_bytes"], m_on["record_bytes"]))
        print(lines[-1], flush=True)
    lines += ["", f"Seeking: rollout-replay --verify --from N-1000 on a cartpole recording of N "
              f"steps (64 envs, --snapshot-every {K}), the median of 3 seeks: wall time and "
              f"rollout-replay's CPU time (user + system):", "",
              "| N steps | file bytes | record s | --from N-1000 s | --from N-1000 CPU s |"
              " steps re-stepped | full --verify s |",
              "|---|---|---|---|---|---|---|"]
    for n in [int(float(x)) for x in a.seek_steps.split(",") if x]:
        f = os.path.join(d, "seek.traj")
        s = node_run(a.node, ["--env", "cartpole", "--num-envs", "64", "--policy", "random"],
                     steps=n, record=f, every=K)
        size = os.path.getsize(f)
        # Three seeks: the median (the slowest in the CSV), so that one
        # descheduling on a shared machine does not make the figure.
        seeks = sorted(timed([a.replay, "--verify", "--from", str(n - 1000), f])
                       for _ in range(3))
        seek_s, err, seek_cpu = seeks[1]
        slowest = seeks[2][0]
        m = re.search(r"verify OK: (\d+) steps", err)
        restepped = int(m.group(1)) if m else -1
        full_s = timed([a.replay, "--verify", f])[0] if n <= 10_000_000 else float("nan")
        os.unlink(f)
        csv.append("seek,%d,%d,%.3f,%.4f,%.4f,%.4f,%d,%.3f" % (
            n, size, s["seconds"], seek_s, seek_cpu, slowest, restepped, full_s))
        full = "%.2f" % full_s if full_s == full_s else "not run"
        lines.append("| %s | %s | %.1f | %.3f | %.3f | %s | %s |" % (
            f"{n:,}", f"{size:,}", s["seconds"], seek_s, seek_cpu, f"{restepped:,}", full))
        print(lines[-1], flush=True)
    os.rmdir(d)
    lines += ["", f"after: {load()}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(os.path.join(a.out, "snapshots.md"), "w") as fh:
            fh.write(text)
        with open(os.path.join(a.out, "snapshots.csv"), "w") as fh:
            fh.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()
