#!/usr/bin/env python3
"""Recording overhead: rollout-node steps/s with --record on vs off, bytes
per transition, and the write rate the disk sustained.

    bench/bench_record.py build/rollout-node [--seconds 2] [--repeats 3] [--dir DIR]

Each case runs off and on alternately --repeats times; medians are compared.
The trajectory file goes to --dir (default: the current directory's disk)
and is deleted after each run. A raw sequential write (1 MiB writes, then
fsync) of 512 MiB to the same directory gives the disk's own figure.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [
    ("cartpole + MLP(64,64)", ["--env", "cartpole", "--num-envs", "256"]),
    ("burn(cost_us=50) + MLP(64,64)", ["--env", "burn", "--env-arg", "cost_us=50",
                                       "--num-envs", "64"]),
    ("burn(cost_us=5, obs_dim=64) + MLP(64,64)", ["--env", "burn", "--env-arg", "cost_us=5",
                                                  "--env-arg", "obs_dim=64", "--num-envs", "128"]),
]


def run(node, args, seconds, record=None):
    cmd = [node, "--json", "--quiet", "--seconds", str(seconds), *args]
    if record:
        cmd += ["--record", record]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{cmd}: exit {p.returncode}: {p.stderr}")
    s = json.loads(p.stdout.strip().splitlines()[-1])
    # CPU time of the whole process per env step: less sensitive than
    # steps/s to other load on a shared machine.
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    s["cpu_ns_per_step"] = cpu * 1e9 / max(s["steps"], 1)
    return s


def raw_disk(d, mib=512):
    path = os.path.join(d, "raw-write.bin")
    buf = os.urandom(1 << 20)
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(mib):
        os.write(fd, buf)
    t_written = time.perf_counter() - t
    os.fsync(fd)
    os.close(fd)
    t_synced = time.perf_counter() - t
    os.unlink(path)
    return mib * 1.048576 / t_written, mib * 1.048576 / t_synced


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("node")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=".")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-record-", dir=a.dir)
    cached, synced = raw_disk(d)
    print(f"raw sequential write to {a.dir}: {cached:.0f} MB/s into the page cache, "
          f"{synced:.0f} MB/s including the final fsync")
    print("| case | off steps/s | on steps/s | on ÷ off | CPU ns/step off | on |"
          " bytes/transition | written MB/s | I/O thread busy | waits/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, args in CASES:
        off, on = [], []
        for _ in range(a.repeats):
            off.append(run(a.node, args, a.seconds))
            f = os.path.join(d, "t.traj")
            s = run(a.node, args, a.seconds, record=f)
            os.unlink(f)
            on.append(s)
        on_sps = statistics.median(x["sps"] for x in on)
        off_sps = statistics.median(x["sps"] for x in off)
        off_cpu = statistics.median(x["cpu_ns_per_step"] for x in off)
        on_cpu = statistics.median(x["cpu_ns_per_step"] for x in on)
        m = sorted(on, key=lambda x: x["sps"])[len(on) // 2]
        bpt = m["record_bytes"] / max(m["record_transitions"], 1)
        mbs = m["record_bytes"] / m["seconds"] / 1e6
        busy = m["record_io_busy_s"] / m["seconds"]
        print(f"| {name} | {off_sps:,.0f} | {on_sps:,.0f} | {on_sps / off_sps:.3f} |"
              f" {off_cpu:.0f} | {on_cpu:.0f} | {bpt:.1f} |"
              f" {mbs:.0f} | {busy:.0%} | {m['record_waits'] / m['seconds']:,.0f} |")
    os.rmdir(d)


if __name__ == "__main__":
    main()
