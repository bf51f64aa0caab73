#!/usr/bin/python3
"""The Python VecEnv over a --learner remote node: its own cost, and how much
of a torch policy's speed it keeps, in one run.

One rollout-node (--learner remote --listen 127.0.0.1:0, cartpole,
--num-envs N) and one VecEnv on it. Each repeat runs, in turn, for S seconds:

  random  env.step() with random actions (numpy), nothing else;
  mlp     env.step() with actions sampled from a torch MLP(64,64) (tanh,
          Categorical over the logits, as python/examples/ppo_cartpole.py);
  forward that policy's forward pass and sampling alone, on a fixed batch of
          N observations (no env): the speed the mlp case would have if the
          transport cost nothing.

For each case it prints the median over repeats of env-steps/s (wall clock),
the Python process's CPU time per step() (user + system, every thread), the
env-steps per Python CPU second, and the node's CPU time per step()
(/proc/PID/stat); and the ratio mlp ÷ forward, taken per repeat (the two run
back to back) and then the median. The machine may be shared: wall-clock
rates swing with its load, CPU time per step much less; the load average is
printed before and after.

usage: bench_vecenv.py BUILD_DIR [--num-envs N] [--seconds S] [--repeats R]
       [--workers W] [--torch-threads T] [--pkg DIR] [--profile STEPS] [--csv FILE]

--pkg DIR imports rollout_client from DIR (default: this tree's python/), e.g.
an older version exported with `git archive`, for before/after figures.
--profile STEPS runs cProfile over that many random-action steps first and
prints where the time goes.
"""
import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def node_cpu_s(pid):
    """utime + stime of a process, seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Timed:
    """Wall, Python CPU and node CPU over a block; steps counted by the caller."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        self.n = node_cpu_s(self.pid) if self.pid else 0.0
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c
        self.node = (node_cpu_s(self.pid) - self.n) if self.pid else 0.0


def run_for(seconds, body):
    """Call body() until seconds pass (checked every 16 calls); returns calls."""
    calls = 0
    end = time.perf_counter() + seconds
    while True:
        for _ in range(16):
            body()
        calls += 16
        if time.perf_counter() >= end:
            return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=0, help="node workers (0: the node's default)")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--pkg", default=os.path.join(HERE, "..", "python"))
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS")
    ap.add_argument("--csv")
    a = ap.parse_args()
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(a.build, "proto"))
    sys.path.insert(0, os.path.abspath(a.pkg))
    import numpy as np
    import rollout_client as rc
    try:
        import torch
    except ImportError:
        torch = None
        print("torch cannot be imported: the mlp and forward cases are skipped")

    n = a.num_envs
    args = ["--env", "cartpole", "--num-envs", n, "--seconds", 0, "--quiet"]
    if a.workers:
        args += ["--workers", a.workers]
    print(f"rollout_client from {os.path.dirname(rc.__file__)}; {n} envs; "
          f"{a.repeats} x {a.seconds:g} s per case; load average {loadavg()}", flush=True)
    with rc.NodeProcess(os.path.join(a.build, "rollout-node"), *args) as node:
        env = rc.VecEnv(node.address, timeout=120)
        pid = node.proc.pid if hasattr(node, "proc") else node.pid
        obs, _ = env.reset()
        rng = np.random.default_rng(1)
        actions = env.single_action_space.n

        def random_step():
            env.step(rng.integers(0, actions, n))

        for _ in range(32):  # warm-up: every env list seen, buffers grown
            random_step()
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(a.profile):
                random_step()
            pr.disable()
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(16)
            print(f"cProfile, {a.profile} steps of random actions, by own time:")
            print("\n".join(out.getvalue().strip().splitlines()[2:]))

        cases = {"random": random_step}
        if torch is not None:
            torch.set_num_threads(a.torch_threads)
            torch.manual_seed(0)
            d = env.single_observation_space.shape[0]
            actor = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.Tanh(),
                                        torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                        torch.nn.Linear(64, actions))
            state = {"obs": torch.from_numpy(obs.reshape(n, d).astype(np.float32))}
            fixed = state["obs"].clone()

            def policy(x):
                with torch.no_grad():
                    return torch.distributions.Categorical(logits=actor(x)).sample().numpy()

            def mlp_step():
                o = env.step(policy(state["obs"]))[0]
                state["obs"] = torch.from_numpy(o.reshape(n, d).astype(np.float32, copy=False))

            def forward():
                policy(torch.from_numpy(fixed.numpy()))

            cases["mlp"] = mlp_step
            cases["forward"] = forward
            for _ in range(32):
                mlp_step()
        res = {k: [] for k in cases}
        for r in range(a.repeats):
            for name, body in cases.items():
                with Timed(pid if name != "forward" else 0) as t:
                    calls = run_for(a.seconds, body)
                res[name].append({"sps": calls * n / t.wall, "cpu_us": t.cpu / calls * 1e6,
                                  "node_us": t.node / calls * 1e6})
            print(f"  repeat {r + 1}: " + ", ".join(
                f"{k} {v[-1]['sps'] / 1e6:.2f} M/s ({v[-1]['cpu_us']:.0f} us CPU)"
                for k, v in res.items()), flush=True)
        env.close()
    print(f"load average at the end {loadavg()}")
    print()
    print("| case | env-steps/s (wall) | Python CPU per step() | env-steps per Python CPU s "
          "| node CPU per step() |")
    print("|---|---|---|---|---|")
    rows = []
    for name, v in res.items():
        sps = statistics.median(x["sps"] for x in v)
        cpu = statistics.median(x["cpu_us"] for x in v)
        nd = statistics.median(x["node_us"] for x in v)
        rows.append((name, sps, cpu, n / cpu * 1e6, nd))
        node_col = f"{nd:.0f} us" if name != "forward" else "-"
        print(f"| {name} | {sps / 1e6:.3f} M | {cpu:.0f} us | {n / cpu:.2f} M | {node_col} |")
    ratio = None
    if "mlp" in res:
        ratio = statistics.median(m["sps"] / f["sps"] for m, f in zip(res["mlp"], res["forward"]))
        cratio = statistics.median(f["cpu_us"] / m["cpu_us"]
                                   for m, f in zip(res["mlp"], res["forward"]))
        print(f"\nmlp ÷ forward alone: {ratio:.3f} (wall), {cratio:.3f} (Python CPU per step)")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("case,num_envs,sps_wall,python_cpu_us_per_step,sps_per_python_cpu_s,"
                    "node_cpu_us_per_step\n")
            for r in rows:
                f.write("%s,%d,%.1f,%.2f,%.1f,%.2f\n" % (r[0], n, r[1], r[2], r[3], r[4]))
            if ratio is not None:
                f.write("mlp/forward,%d,%.4f,%.4f,,\n" % (n, ratio, cratio))


if __name__ == "__main__":
    main()
