#!/usr/bin/python3
"""Remote learner over loopback / in-process learner, in one run.

For each case, alternately (--repeats times): a node with the local learner
(W workers), and the same node with --learner remote plus rollout-learner
attached over 127.0.0.1. The node's steps/s are compared (medians). Both
sides get the same CPUs: the local node W workers; the remote node
--remote-workers workers plus the learner's one thread.

usage: bench_remote.py BUILD_DIR [--seconds S] [--repeats N] [--csv FILE]
"""
import argparse
import json
import os
import statistics
import subprocess

CASES = [
    ("cartpole+mlp64x64, 256 envs", ["--env", "cartpole", "--num-envs", "256"]),
    ("cartpole+mlp64x64, 2048 envs, batch 256",
     ["--env", "cartpole", "--num-envs", "2048", "--batch", "256"]),
    ("burn50us+mlp64x64, 64 envs", ["--env", "burn", "--env-arg", "cost_us=50",
                                    "--num-envs", "64"]),
]


def node_json(p):
    out, _ = p.communicate(timeout=120)
    return json.loads(out.strip().splitlines()[-1])


def local(build, args, workers, seconds):
    p = subprocess.Popen([f"{build}/rollout-node", *args, "--workers", str(workers),
                          "--seconds", str(seconds), "--json", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return node_json(p)["sps"]


def remote(build, args, workers, seconds):
    p = subprocess.Popen([f"{build}/rollout-node", *args, "--workers", str(workers),
                          "--learner", "remote", "--listen", "127.0.0.1:0",
                          "--seconds", str(seconds), "--json", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    addr = None
    for line in p.stderr:
        if "listening for learners on" in line:
            addr = line.split()[-1]
            break
    l = subprocess.Popen([f"{build}/rollout-learner", "--connect", addr, "--quiet", "--json",
                          "--workers", str(LEARNER_WORKERS)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = node_json(p)
    l.communicate(timeout=60)
    # The node's clock starts before the learner attaches (about a
    # millisecond on loopback): a slight understatement of the remote side.
    return s["sps"]


LEARNER_WORKERS = 1


def main():
    global LEARNER_WORKERS
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--remote-workers", type=int, default=max(1, os.cpu_count() - 1))
    ap.add_argument("--learner-workers", type=int, default=1)
    ap.add_argument("--csv")
    a = ap.parse_args()
    LEARNER_WORKERS = a.learner_workers
    rows = []
    print("| case | local W | local steps/s | remote W + learner | remote steps/s | remote / local |")
    print("|---|---|---|---|---|---|")
    for name, args in CASES:
        ls, rs = [], []
        for _ in range(a.repeats):
            ls.append(local(a.build, args, a.workers, a.seconds))
            rs.append(remote(a.build, args, a.remote_workers, a.seconds))
        lm, rm = statistics.median(ls), statistics.median(rs)
        rows.append((name, a.workers, lm, a.remote_workers, rm, rm / lm))
        print(f"| {name} | {a.workers} | {lm:.0f} | {a.remote_workers} + {a.learner_workers} | "
              f"{rm:.0f} | "
              f"{rm / lm:.3f} |", flush=True)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("case,local_workers,local_sps,remote_workers,remote_sps,ratio\n")
            for r in rows:
                f.write("\"%s\",%d,%.1f,%d,%.1f,%.4f\n" % r)


if __name__ == "__main__":
    main()
