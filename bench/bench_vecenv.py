#!/usr/bin/python3
"""The Python VecEnv over a --learner remote node: its own cost, and how much
of a torch policy's speed it keeps, in one run.

One rollout-node (--learner remote --listen 127.0.0.1:0, cartpole,
--num-envs N) and one VecEnv on it. Each repeat runs these cases:

  random  env.step() with random actions (numpy), nothing else;
  mlp     env.step() with actions sampled from a torch MLP(64,64) (tanh,
          Categorical over the logits, as python/examples/ppo_cartpole.py);
  forward that policy's forward pass and sampling alone, on a fixed batch of
          N observations (no env): the speed the mlp case would have if the
          transport cost nothing.
  mlp-async  the same policy through send()/recv() (EnvPool style) on a
          second node of 2N envs: batches of N envs, so that the node steps
          one batch while the policy works on the other (the transport hidden
          behind the policy); run interleaved with its own forward case (the
          same batch of N), which is its reference.

BLAS and OpenMP run at one thread (OPENBLAS_NUM_THREADS etc. =1, set here
before torch loads, as python/examples do): torch's default, a thread per
CPU, makes its forward pass busy-wait on both CPUs for the speed of one.

The mlp and forward cases run interleaved, 8 calls of one then 8 of the
other, for 2 S seconds per repeat, so that the machine's drift falls on
both alike. For each case it prints the median over repeats of env-steps/s (wall clock),
the Python process's CPU time per step() (user + system, every thread), the
env-steps per Python CPU second, and the node's CPU time per step()
(/proc/PID/stat); and the ratio mlp ÷ forward, taken per repeat (the two
interleaved) and then the median. The machine may be shared: wall-clock
rates swing with its load, CPU time per step much less; the load average is
printed before and after.

Writes vecenv.csv, vecenv.md and vecenv.png (gnuplot, when installed) into
--out (default docs/benchmarks); --csv FILE writes the CSV there instead and
the other two beside it (bench/bench_learners.py calls it so and reads the
rows vecenv-random and vecenv-mlp: sps, cpu_ms_per_msteps, ratio,
reference).

usage: bench_vecenv.py BUILD_DIR [--num-envs N] [--seconds S] [--repeats R]
       [--workers W] [--torch-threads T] [--pkg DIR] [--profile STEPS]
       [--out DIR] [--csv FILE]

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
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy and torch load


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
    ap.add_argument("--workers", type=int, default=1,
                    help="node workers (default 1: the other core is the learner's)")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--unix", action="store_true",
                    help="the nodes listen on a Unix-domain socket: observations and actions "
                         "in shared memory (docs/protocol.md), one frame per step")
    ap.add_argument("--async-spin-us", type=int, default=None, metavar="US",
                    help="the mlp-async node's --spin-us (default: the node's own)")
    ap.add_argument("--pkg", default=os.path.join(HERE, "..", "python"))
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "benchmarks"))
    ap.add_argument("--csv", help="the CSV file (default OUT/vecenv.csv)")
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
    if a.workers is not None:
        args += ["--workers", a.workers]
    listen = {}
    if a.unix:
        import tempfile
        sockdir = tempfile.mkdtemp(prefix="bench_vecenv.")
        args += ["--batch", n]  # VecEnv waits for every env: one frame, one wake-up
        listen = {"listen": f"unix:{sockdir}/node.sock"}
        listen2 = {"listen": f"unix:{sockdir}/node2.sock"}
    if torch is None:
        print("(no torch: the mlp and forward cases are skipped)")
    load0 = loadavg()
    print(f"rollout_client from {os.path.dirname(rc.__file__)}; {n} envs; "
          f"{a.repeats} x {a.seconds:g} s per case; load average {load0}", flush=True)
    with rc.NodeProcess(os.path.join(a.build, "rollout-node"), *args, **listen) as node:
        # TCP stays TCP (upgrade=False), as its label says.
        env = rc.VecEnv(node.address, timeout=120, autoreset_mode="same_step", upgrade=False)
        pid = node.proc.pid
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
        state = {"policy_s": 0.0, "step_s": 0.0}
        if torch is not None:
            torch.set_num_threads(a.torch_threads)
            torch.manual_seed(0)
            d = env.single_observation_space.shape[0]
            actor = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.Tanh(),
                                        torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                        torch.nn.Linear(64, actions))
            state.update(obs=torch.from_numpy(obs.reshape(n, d).astype(np.float32)))

            def policy(x):
                with torch.no_grad():
                    return torch.distributions.Categorical(logits=actor(x)).sample().numpy()

            clock = time.perf_counter

            def mlp_step():  # wall time in the policy and in step(), apart
                t0 = clock()
                act = policy(state["obs"])
                t1 = clock()
                o = env.step(act)[0]
                state["obs"] = torch.from_numpy(o.reshape(n, d).astype(np.float32, copy=False))
                state["policy_s"] += t1 - t0
                state["step_s"] += clock() - t1

            def forward():
                policy(torch.from_numpy(state["fixed"]))

            cases["mlp"] = mlp_step
            cases["forward"] = forward
            args2 = [str(x) for x in args]
            args2[args2.index("--num-envs") + 1] = str(2 * n)
            if a.unix:  # two batches in flight: frames of n envs each
                args2[args2.index("--batch") + 1] = str(n)
            if a.async_spin_us is not None:
                args2 += ["--spin-us", str(a.async_spin_us)]
            node2 = rc.NodeProcess(os.path.join(a.build, "rollout-node"), *args2,
                                   **(listen2 if a.unix else {}))
            env2 = rc.VecEnv(node2.address, timeout=120, batch_size=n, upgrade=False)
            env2.async_reset()
            state2 = {"policy_s": 0.0, "step_s": 0.0}

            def mlp_async_step():  # n env-steps, as a call of the other cases
                t0 = clock()
                o, _, _, _, inf = env2.recv()
                t1 = clock()
                act = policy(torch.from_numpy(o.reshape(n, d)))
                t2 = clock()
                env2.send(act, inf["env_id"])
                state2["policy_s"] += t2 - t1
                state2["step_s"] += clock() - t2 + t1 - t0

            async_cases = {"mlp": mlp_async_step, "forward": forward}
            for _ in range(64):
                mlp_step()
            # The forward case's batch: observations of envs mid-episode,
            # like those the mlp case sees (not the first ones of reset()).
            state["fixed"] = state["obs"].numpy().copy()
        res = {k: [] for k in cases}
        if "mlp" in cases:
            res["mlp-async"] = []
            for _ in range(64):
                mlp_async_step()
        for r in range(a.repeats):
            state["policy_s"] = state["step_s"] = 0.0
            with Timed(pid) as t:
                calls = run_for(a.seconds, random_step)
            res["random"].append({"sps": calls * n / t.wall, "cpu_us": t.cpu / calls * 1e6,
                                  "node_us": t.node / calls * 1e6})
            if "mlp" in cases:
                res["mlp"].append({})
                res["forward"].append({})
                pair(a.seconds * 2, pid, n, state, cases, res["mlp"][-1], res["forward"][-1])
                state2["policy_s"] = state2["step_s"] = 0.0
                m, f = {}, {}
                pair(a.seconds * 2, node2.proc.pid, n, state2, async_cases, m, f)
                m["fwd_sps"] = f["sps"]
                res["mlp-async"].append(m)
            ratio = (f", mlp-async / its forward {m['sps'] / m['fwd_sps']:.3f}"
                     if "mlp" in cases else "")
            print(f"  repeat {r + 1}: " + ", ".join(
                f"{k} {v[-1]['sps'] / 1e6:.2f} M/s ({v[-1]['cpu_us']:.0f} us CPU)"
                for k, v in res.items()) + ratio, flush=True)
        env.close()
        if "mlp" in cases:
            env2.close()
            node2.stop()
    if a.unix:
        shutil.rmtree(sockdir, ignore_errors=True)
    load1 = loadavg()
    print(f"load average at the end {load1}")
    report(a, n, res, load0, load1)


def malloc_note():
    """Says which glibc malloc settings the environment gave (they change
    torch's page faults per call, docs/python.md)."""
    tuned = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")]
    return f" glibc malloc: {' '.join(tuned)}." if tuned else " glibc malloc: defaults."


def pair(seconds, pid, n, state, cases, mlp, fwd, chunk=8):
    """mlp and forward alone, interleaved chunk calls at a time for
    seconds: the machine's drift falls on both alike, so their ratio is
    steadier than that of two blocks run one after the other. Fills mlp
    and fwd with sps, Python CPU per call (cpu_us), node CPU per call
    (node_us: the node works only for mlp) and mlp's policy/step split."""
    clock, cpu = time.perf_counter, time.process_time
    wall = {"mlp": 0.0, "forward": 0.0}
    used = {"mlp": 0.0, "forward": 0.0}
    calls = 0
    node0 = node_cpu_s(pid)
    end = clock() + seconds
    while calls < chunk or clock() < end:
        for name in ("mlp", "forward"):
            body = cases[name]
            w, c = clock(), cpu()
            for _ in range(chunk):
                body()
            wall[name] += clock() - w
            used[name] += cpu() - c
        calls += chunk
    node = node_cpu_s(pid) - node0
    for name, out in (("mlp", mlp), ("forward", fwd)):
        out.update(sps=calls * n / wall[name], cpu_us=used[name] / calls * 1e6,
                   node_us=(node if name == "mlp" else 0.0) / calls * 1e6)
    mlp.update(policy_us=state["policy_s"] / calls * 1e6, step_us=state["step_s"] / calls * 1e6)


TARGETS = {"vecenv-random": ("rate", 3e6), "vecenv-mlp": ("ratio", 0.9),
           "vecenv-mlp-async": ("ratio", 0.9)}


def report(a, n, res, load0, load1):
    """Medians over repeats, printed and written as CSV, Markdown and a plot."""
    rows = []  # case, sps, Python CPU us/step, node CPU us/step, ratio, reference
    for name, v in res.items():
        sps = statistics.median(x["sps"] for x in v)
        cpu = statistics.median(x["cpu_us"] for x in v)
        nd = statistics.median(x["node_us"] for x in v) if name != "forward" else 0.0
        ratio, ref = None, ""
        if name == "mlp":  # per repeat (measured back to back), then the median
            ratio = statistics.median(m["sps"] / f["sps"] for m, f in zip(v, res["forward"]))
            ref = "vecenv-forward"
        if name == "mlp-async":  # against the forward case run interleaved with it
            ratio = statistics.median(m["sps"] / m["fwd_sps"] for m in v)
            ref = "vecenv-forward"
        rows.append(("vecenv-" + name, sps, cpu, nd, ratio, ref))
    out = os.path.dirname(os.path.abspath(a.csv)) if a.csv else a.out
    os.makedirs(out, exist_ok=True)
    csv = a.csv or os.path.join(out, "vecenv.csv")
    with open(csv, "w") as f:
        f.write("case,num_envs,sps,cpu_ms_per_msteps,python_cpu_us_per_step,"
                "node_cpu_us_per_step,ratio,reference,target\n")
        for name, sps, cpu, nd, ratio, ref in rows:
            t = TARGETS.get(name)
            f.write(f"{name},{n},{sps:.0f},{(cpu + nd) / n * 1e3:.1f},{cpu:.1f},{nd:.1f},"
                    f"{'' if ratio is None else f'{ratio:.3f}'},{ref},{t[1] if t else ''}\n")
    how = (f"over a Unix-domain socket, observations and actions in shared memory, "
           f"--batch {n}" if a.unix else "over TCP on 127.0.0.1")
    lines = [f"Measured by `bench/bench_vecenv.py {a.build} --num-envs {n} --workers {a.workers} "
             f"--seconds {a.seconds:g} --repeats {a.repeats}{' --unix' if a.unix else ''}"
             f"{f' --async-spin-us {a.async_spin_us}' if a.async_spin_us is not None else ''}` "
             f"(CartPole, rollout-node --learner remote with {a.workers} worker(s), {how}; "
             f"{os.cpu_count()} CPUs shared with "
             f"other work: load average {load0} at the start, {load1} at the end). Each repeat: "
             f"random for {a.seconds:g} s, then mlp and forward interleaved (8 calls each in "
             f"turn) for {2 * a.seconds:g} s; figures are medians over repeats, the ratio the "
             "median of per-repeat ratios." + malloc_note(), "",
             "| case | env-steps/s (wall) | Python CPU per step() | node CPU per step() | "
             "ratio | against | target | met |", "|---|---|---|---|---|---|---|---|"]
    for name, sps, cpu, nd, ratio, ref in rows:
        t = TARGETS.get(name)
        met, tgt = "", ""
        if t:
            got = ratio if t[0] == "ratio" else sps
            met = "" if got is None else ("yes" if got >= t[1] else "no")
            tgt = f">= {t[1]:g}" if t[0] == "ratio" else f">= {t[1] / 1e6:g} M/s"
        lines.append(f"| {name} | {sps / 1e6:.3f} M | {cpu:.0f} us | "
                     f"{f'{nd:.0f} us' if name != 'vecenv-forward' else '-'} | "
                     f"{'' if ratio is None else f'{ratio:.3f}'} | {ref} | {tgt} | {met} |")
    if "mlp" in res:
        pol = statistics.median(x["policy_us"] for x in res["mlp"])
        stp = statistics.median(x["step_us"] for x in res["mlp"])
        fwd = statistics.median(n / x["sps"] * 1e6 for x in res["forward"])
        rnd = statistics.median(n / x["sps"] * 1e6 for x in res["random"])
        fcpu = statistics.median(x["cpu_us"] for x in res["forward"])
        mcpu = statistics.median(x["cpu_us"] for x in res["mlp"])
        lines += ["", f"Python CPU per step: forward alone {fcpu:.0f} us, mlp {mcpu:.0f} us "
                  f"(forward ÷ mlp {fcpu / mcpu:.3f}; CPU time is less disturbed by the "
                  "machine's other work than wall time)."]
        lines += ["", f"Where the mlp case's wall time goes, per step of {n} envs (medians): "
                  f"{pol:.0f} us in the policy (forward and sampling; alone: {fwd:.0f} us), "
                  f"{stp:.0f} us in env.step() (random actions: {rnd:.0f} us per step). "
                  "step() returns only when every env's next observation is in, so the "
                  "node's stepping and the transport add to the policy's time instead of "
                  "overlapping it."]
    if res.get("mlp-async"):
        v = res["mlp-async"]
        pol = statistics.median(x["policy_us"] for x in v)
        stp = statistics.median(x["step_us"] for x in v)
        fwd = statistics.median(x["fwd_sps"] for x in v)
        lines += ["", f"mlp-async, per batch of {n} envs ({2 * n} envs, two batches in flight): "
                  f"{pol:.0f} us in the policy, {stp:.0f} us in recv() and send() (waiting "
                  f"included); its interleaved forward case ran at {fwd / 1e6:.3f} M samples/s. "
                  "The node steps one batch while the policy works on the other."]
    md = os.path.join(out, "vecenv.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(out, rows, n)


def plot(out, rows, n):
    """env-steps/s of each case (gnuplot, as bench_learners.py plots)."""
    gp = shutil.which("gnuplot")
    if not gp:
        print("bench_vecenv: gnuplot not found: no plot", file=sys.stderr)
        return
    data = os.path.join(out, "vecenv.dat")
    with open(data, "w") as f:
        for name, sps, *_ in rows:
            f.write(f"\"{name}\" {sps / 1e6:.3f}\n")
    script = f"""
set terminal pngcairo size 700,400 noenhanced
set output '{os.path.join(out, 'vecenv.png')}'
set title 'VecEnv, CartPole, {n} envs: env-steps/s (medians)'
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel 'M env-steps/s'
set yrange [0:*]
set grid ytics
plot '{data}' using 2:xtic(1) title 'env-steps/s' lc rgb '#4477aa'
"""
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        print(f"bench_vecenv: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)
    os.unlink(data)

if __name__ == "__main__":
    main()
