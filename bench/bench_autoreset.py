#!/usr/bin/python3
"""What Gymnasium's NEXT_STEP autoreset costs the remote VecEnv over its
same-step mode, in one run: CPU time per call, A/B interleaved.

One rollout-node (--learner remote, cartpole, --workers 0, a unix: socket:
the lane, python/hotpath/lane.c) per mode and per way of stepping; each
round runs every case for --calls calls, one after the other, so that the
machine's drift falls on all alike:

  step-<mode>   env.step() of N envs with random actions;
  async-<mode>  send()/recv() of batches of N envs on a node of 2N envs
                (random actions), one recv() and one send() a call.

CPU time is the Python process's (user + system, every thread) per call,
which the machine's other work disturbs much less than wall time (the
client does not spin: spin_us=0, so a wait sleeps and costs no CPU); the
figure is the median over rounds, and the ratio next-step / same-step the
median of per-round ratios. Random actions end CartPole's episodes every
~20 steps, so about one env in twenty is held in each call.

Writes autoreset.md into --out (default docs/benchmarks).

usage: bench_autoreset.py BUILD_DIR [--num-envs N] [--calls C] [--rounds R]
       [--ways step,async] [--out DIR]

--ways step measures step() alone (a tree before send()/recv() had NEXT_STEP).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu():
    """The process's CPU time, user + system, every thread (ns resolution)."""
    return time.process_time()


def step_case(env, calls, rng):
    n = env.num_envs
    start = cpu()
    for _ in range(calls):
        env.step(rng.integers(0, 2, n))
    return (cpu() - start) / calls


def async_case(env, calls, rng):
    n = env.batch_size
    start = cpu()
    for _ in range(calls):
        _, _, _, _, infos = env.recv()
        env.send(rng.integers(0, 2, n), infos["env_id"])
    return (cpu() - start) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--num-envs", type=int, default=64)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ways", default="step,async")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "benchmarks"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(a.build, "proto"))
    import numpy as np
    import rollout_client as rc

    node_bin = os.path.join(a.build, "rollout-node")
    n = a.num_envs
    tmp = tempfile.mkdtemp(prefix="bench_autoreset.")
    nodes, envs = [], {}
    ways = a.ways.split(",")
    load0 = os.getloadavg()
    try:
        for mode in ("same_step", "next_step"):
            for way in ways:
                num = n if way == "step" else 2 * n
                node = rc.launch_node(env="cartpole", num_envs=num, seed=1, node=node_bin,
                                      listen=f"unix:{tmp}/{way}-{mode}.sock",
                                      extra_args=["--workers", 0, "--batch", n])
                nodes.append(node)
                # spin_us=0: a wait sleeps at once, so that CPU time is the
                # VecEnv's work, not its spinning while the node steps.
                env = rc.VecEnv(node.address, timeout=120, autoreset_mode=mode,
                                batch_size=None if way == "step" else n, spin_us=0)
                if way == "step":
                    env.reset(seed=1)
                else:
                    env.async_reset()
                envs[f"{way}-{mode}"] = env
        rng = np.random.default_rng(0)
        for name, env in envs.items():  # warm up, and take the lane
            (step_case if name.startswith("step") else async_case)(env, 200, rng)
        for name, env in envs.items():
            if env._lane is None:
                raise SystemExit(f"{name}: the VecEnv did not take the lane")
        per = {name: [] for name in envs}
        for _ in range(a.rounds):
            for name, env in envs.items():
                case = step_case if name.startswith("step") else async_case
                per[name].append(case(env, a.calls, rng))
    finally:
        for env in envs.values():
            env.close()
        for node in nodes:
            node.stop()
    load1 = os.getloadavg()
    rows = []
    for way in ways:
        same, nxt = per[f"{way}-same_step"], per[f"{way}-next_step"]
        ratio = statistics.median(x / y for x, y in zip(nxt, same))
        rows.append((way, statistics.median(same) * 1e6, statistics.median(nxt) * 1e6, ratio))
    cmd = (f"bench/bench_autoreset.py BUILD --num-envs {n} --calls {a.calls} "
           f"--rounds {a.rounds}" + (f" --ways {a.ways}" if a.ways != "step,async" else ""))
    lines = [
        f"Measured by `{cmd}` (CartPole, rollout-node --learner remote --workers 0 over a "
        f"Unix-domain socket, the lane, spin_us=0; random actions; load average {load0[0]:.2f} at the "
        f"start, {load1[0]:.2f} at the end, 2 CPUs shared with other work). Python CPU time "
        "per call (user + system), median over rounds; the ratio is the median of per-round "
        "ratios, the cases interleaved.",
        "",
        "| way | envs a call | same-step CPU per call | next-step CPU per call | next ÷ same |",
        "|---|---|---|---|---|",
    ]
    for way, same, nxt, ratio in rows:
        what = "step()" if way == "step" else "recv() + send()"
        lines.append(f"| {what} | {n} | {same:.1f} us | {nxt:.1f} us | {ratio:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "autoreset.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
