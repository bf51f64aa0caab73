#!/usr/bin/env python3
"""The local hot path's instruction count under callgrind (issue 30's check).

    bench/bench_callgrind.py build/rollout-node [--repeats 1] [--out docs/benchmarks]

Runs, for the MLP and the random policy,

    valgrind --tool=callgrind --trace-children=yes rollout-node --steps 1000000
        --workers 2 --num-envs 256 --seed 1 --seconds 0 --quiet --policy P

--repeats times each, sums the instructions (Ir) of every process callgrind
followed (the node is one), and compares the median with the baseline: the
figures of issue 30's earlier check (2026-11-28, the build before the ABI 1
paths were moved onto the ABI 2 ones). The target is within 1 %. Instruction
counts do not depend on the machine's load, but two workers interleave
differently from run to run, which moves the random policy's count by up to
about 1 % (its steps are cheap, so the exchange's share is large); hence the
median. The load average before and after is printed.

Writes OUT/callgrind.csv and OUT/callgrind.md (the table, as printed).
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile

# Issue 30's earlier callgrind check (the "after" of its stop 3): the
# instructions of the node's process, as this script sums them.
BASELINE = {"mlp": 1927384363, "random": 393412386}
TARGET = 0.01
ARGS = ["--steps", "1000000", "--workers", "2", "--num-envs", "256", "--seed", "1",
        "--seconds", "0", "--quiet"]


def total_ir(path: str) -> int:
    """The Ir total of one callgrind output file (its summary line)."""
    with open(path) as fh:
        for line in fh:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    sys.exit(f"{path}: no summary line: callgrind did not finish")


def run_once(node: str, policy: str, d: str) -> int:
    """One run under callgrind: the sum of Ir over the processes it followed."""
    for f in glob.glob(os.path.join(d, "cg.*")):
        os.unlink(f)
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           "--callgrind-out-file=" + os.path.join(d, "cg.%p"), node, *ARGS,
           "--policy", policy]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-2000:]}")
    files = glob.glob(os.path.join(d, "cg.*"))
    if not files:
        sys.exit(f"{' '.join(cmd)}: no callgrind output")
    return sum(total_ir(f) for f in files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("node", help="the rollout-node binary")
    ap.add_argument("--repeats", type=int, default=1, help="runs per policy (median)")
    ap.add_argument("--out", default=None, help="write callgrind.csv and callgrind.md here")
    a = ap.parse_args()
    if a.repeats < 1:
        sys.exit("--repeats must be at least 1")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "?"
    load0 = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_callgrind_") as d:
        for policy in ("mlp", "random"):
            runs = [run_once(a.node, policy, d) for _ in range(a.repeats)]
            med = statistics.median(runs)
            rows.append((policy, runs, med, med / BASELINE[policy] - 1.0))
    load1 = os.getloadavg()[0]
    lines = [f"callgrind of rollout-node {' '.join(ARGS)} at {rev} "
             f"(load average {load0:.1f} before, {load1:.1f} after)", "",
             "| policy | baseline Ir | runs Ir | median Ir | change | within 1 % |",
             "| --- | --- | --- | --- | --- | --- |"]
    csv = ["policy,baseline_ir,runs_ir,median_ir,change,within_target,commit"]
    for policy, runs, med, ch in rows:
        ok = abs(ch) <= TARGET
        lines.append(f"| {policy} | {BASELINE[policy]:,} | {', '.join(f'{r:,}' for r in runs)} | "
                     f"{med:,.0f} | {ch * 100:+.3f} % | {'yes' if ok else 'no'} |")
        csv.append(f"{policy},{BASELINE[policy]},{';'.join(map(str, runs))},{med:.0f},"
                   f"{ch:.6f},{int(ok)},{rev}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "callgrind.md"), "w") as fh:
            fh.write(text)
        with open(os.path.join(a.out, "callgrind.csv"), "w") as fh:
            fh.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()
