#!/usr/bin/env python3
"""make_vec against the vector envs Python users would pick instead, side by
side in one run (issue 29): rollout's in-process engine with its defaults
(``gymnasium.make_vec("rollout/<id>", num_envs=N)``, no flag), EnvPool
(``envpool.make(id, env_type="gymnasium", num_envs=N, num_threads=CPUS)``),
Gymnasium's own vector envs (its numpy CartPoleVectorEnv where it has one;
SyncVectorEnv; AsyncVectorEnv at N <= --async-max, one process per env),
and two references: the envs alone (the engine's envs stepped in C on its
own threads with the same 16 action batches as ``step()``, cycled, no
Python between steps: ``Engine.run_steps``), and for MuJoCo
a raw loop of the same MuJoCo's ``mj_step`` (``bench_mujoco --raw-envs N``:
C, N simulations of the env's model, the env's termination and reset,
nothing else) on one core times the cores rollout steps on (its threads:
the same number of cores on both sides), on every CPU at once, and on
every CPU at once with a barrier after each step (``--raw-threads``: what
a synchronous step() costs at the least, whoever implements it).

Cases per (env, N), for CartPole-v1, Pendulum-v1, Hopper-v5, HalfCheetah-v5
and N = 8, 64, 1024: ``step()`` with random actions (16 batches drawn
before timing, cycled: the actions' sampling is no one's cost); and a torch
MLP(64,64) policy (tanh; Categorical samples for discrete actions, the mean
plus Gaussian noise for boxes; one torch thread) choosing every action,
through EnvPool's asynchronous API (``send``/``recv``, batches of N/2, so
the envs of one batch step while the policy works on the other) for rollout
and EnvPool alike, through ``step()`` for Gymnasium (it has no such API),
and the policy alone on a batch of N/2 as the reference
(``mlp:forward-alone``: the rate the others would reach if the envs cost
nothing).
Every case runs --seconds per round, rounds interleaved (--rounds), so the
machine's drift falls on all alike; the figure is the median over rounds of
env-steps per second (wall clock). The load average is printed and written.

Writes gym.csv, gym.md and gym.png into --out (default docs/benchmarks).

usage: bench_gym.py [--seconds S] [--rounds R] [--envs ID,...] [--sizes N,...]
       [--async-max N] [--out DIR] [--build DIR]
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import gymnasium as gym  # noqa: E402

import rollout_client as rc  # noqa: E402

CPUS = len(os.sched_getaffinity(0))
Stepper = Callable[[], Callable[[], int]]  # makes a closure that does one step, returns envs


def actions_for(space: Any, n: int, k: int = 16) -> list[Any]:
    space.seed(0)
    return [space.sample() for _ in range(k)]


def timed(step: Callable[[], int], seconds: float) -> tuple[float, float]:
    """(env-steps/s, CPU seconds per env step) of repeated calls for about
    `seconds` (after a warm-up). The CPU time is this process's, every
    thread: other processes on a shared machine take wall time from a case
    and change its CPU time per step much less."""
    measure = getattr(step, "measure", None)
    if measure is not None:
        return measure(seconds)  # type: ignore[no-any-return]
    for _ in range(3):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    steps, calls = 0, 0
    while True:
        steps += step()
        calls += 1
        if calls % 8 == 0 and time.perf_counter() - t0 >= seconds:
            break
    return steps / (time.perf_counter() - t0), (time.process_time() - c0) / steps


def cycling(env: Any, acts: list[Any], n: int) -> Callable[[], int]:
    """One env.step() per call with the next of the drawn action batches."""
    i = [0]

    def step() -> int:
        env.step(acts[i[0] & 15])
        i[0] += 1
        return n
    step.env = env  # type: ignore[attr-defined]
    return step


def rollout_case(gid: str, n: int) -> Callable[[], int]:
    env = gym.make_vec(f"rollout/{gid}", num_envs=n)
    env.reset(seed=0)
    acts = actions_for(env.action_space, n)
    return cycling(env, acts, n)


def envs_alone_case(gid: str, n: int) -> Callable[[], int]:
    env = gym.make_vec(f"rollout/{gid}", num_envs=n)
    env.reset(seed=0)
    # The actions step() is timed with, cycled in C: one action repeated
    # would visit other states (a MuJoCo body that falls or not) at another
    # cost per step.
    split = getattr(env.unwrapped, "_split_actions")
    engine = getattr(env.unwrapped, "_engine")
    engine.run_steps(0, [split(a) for a in actions_for(env.action_space, n)])  # kept
    k = 64

    def step() -> int:
        engine.run_steps(k)
        return n * k
    step.env = env  # type: ignore[attr-defined]
    return step


def step_over_alone_us(step: Callable[[], int], n: int, sps: float, rounds: int = 15) -> float:
    """What one ``step()`` costs over the envs alone, in microseconds, on one
    engine: bursts of ``step()`` calls (the case's, cycling its action
    batches) and of ``Engine.run_steps`` (the same batches, cycled in C, no
    Python between steps) of about 20 ms each (from `sps`, the case's rate)
    alternate on the same envs and threads, `rounds` times; the median of
    the per-call differences. Two cases timed a second
    apart would carry the machine's drift of a few percent, more than the
    difference itself for envs that cost 100 µs a call."""
    env = getattr(step, "env")
    u = env.unwrapped
    engine = getattr(u, "_engine")
    acts = actions_for(env.action_space, n)
    engine.run_steps(0, [getattr(u, "_split_actions")(a) for a in acts])
    calls = 16 * max(1, min(125, round(0.02 * sps / n / 16)))  # whole cycles of the 16
    diffs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            step()
        t1 = time.perf_counter()
        engine.run_steps(calls)
        t2 = time.perf_counter()
        diffs.append(((t1 - t0) - (t2 - t1)) / calls * 1e6)
    return statistics.median(diffs)


def envpool_case(gid: str, n: int) -> Callable[[], int]:
    import envpool
    env = envpool.make(gid, env_type="gymnasium", num_envs=n, num_threads=min(CPUS, n), seed=0)
    env.reset()
    env.action_space.seed(0)  # EnvPool's is the single env's space
    acts = [np.stack([env.action_space.sample() for _ in range(n)]) for _ in range(16)]
    return cycling(env, acts, n)


def gym_case(gid: str, n: int, mode: str) -> Callable[[], int]:
    env = gym.make_vec(gid, num_envs=n, vectorization_mode=mode)
    env.reset(seed=0)
    acts = actions_for(env.action_space, n)
    return cycling(env, acts, n)


MJ_NAMES = {"Hopper-v5": "hopper", "HalfCheetah-v5": "half_cheetah", "Walker2d-v5": "walker2d",
            "Ant-v5": "ant", "InvertedPendulum-v5": "inverted_pendulum"}


def mj_raw_case(gid: str, n: int, build: str, cores: int,
                barrier: bool = False) -> Callable[[], int]:
    """The machine's limit for N MuJoCo envs: bench_mujoco's raw loop (C,
    one thread) over the same simulations of the env's model, each its own
    mjData as each env has, uniform random controls, mj_step x frame_skip per
    env step and the env's own termination test and reset, so that it visits
    the states and touches the memory the envs do; no observations, rewards
    or Python. With cores > 1, one loop pinned to each of that many CPUs at
    once, N/cores simulations each, their rates summed: what the cores give
    together (two vCPUs may share one physical core's units, or its caches
    and memory bandwidth). With barrier, one process of that many threads
    instead (``--raw-threads``: each pinned, N/cores simulations each) that
    meet at a spin barrier after every step: the least a synchronous
    ``step()`` (every env's result before it returns) costs on these CPUs.
    It times itself: the case has `measure` instead of steps."""
    exe = os.path.join(build, "bench", "bench_mujoco")
    if not os.access(exe, os.X_OK):
        raise FileNotFoundError(f"{exe} (build the project first: meson compile -C {build})")
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    per = max(1, -(-n // cores))

    def measure(seconds: float) -> tuple[float, float]:
        if barrier:
            p = subprocess.run([exe, "--env", MJ_NAMES[gid], "--raw-envs", str(n),
                                "--raw-threads", str(cores), "--seconds", str(seconds)],
                               capture_output=True, text=True, check=True)
            o = p.stdout.split()
            return float(o[1]), float(o[2])
        # taskset pins each loop: a preexec_fn would make Popen fork this
        # process, whose address space (torch, EnvPool) the kernel may refuse
        # to duplicate (ENOMEM); without one it spawns with vfork.
        procs = [subprocess.Popen(["taskset", "-c", str(c), exe, "--env", MJ_NAMES[gid],
                                   "--raw-envs", str(per), "--seconds", str(seconds)],
                                  stdout=subprocess.PIPE, text=True) for c in cpus]
        outs = [p.communicate()[0].split() for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"{exe} failed: {outs}")
        sps = sum(float(o[1]) for o in outs)
        cpu = statistics.mean(float(o[2]) for o in outs)
        return sps, cpu

    def step() -> int:
        raise RuntimeError("the raw loop is measured whole (measure)")
    step.measure = measure  # type: ignore[attr-defined]
    return step


class Policy:
    """A torch MLP(64,64) for a Gymnasium env's single spaces."""

    def __init__(self, obs_space: Any, act_space: Any) -> None:
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        obs_dim = int(np.prod(obs_space.shape))
        self.discrete = isinstance(act_space, gym.spaces.Discrete)
        out = int(act_space.n) if self.discrete else int(np.prod(act_space.shape))
        self.net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 64), torch.nn.Tanh(),
                                       torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                       torch.nn.Linear(64, out))

    def __call__(self, obs: Any) -> np.ndarray:
        torch = self.torch
        with torch.no_grad():
            x = self.net(torch.as_tensor(np.asarray(obs), dtype=torch.float32).reshape(
                len(obs), -1))
            if self.discrete:
                return torch.distributions.Categorical(logits=x).sample().numpy()
            return (x + torch.randn_like(x)).numpy()


def mlp_async_case(make: Callable[[], Any], n: int, single: Callable[[Any], tuple[Any, Any]]
                   ) -> Callable[[], int]:
    """recv -> policy -> send, EnvPool's loop, batches of n/2."""
    env = make()
    obs_space, act_space = single(env)
    policy = Policy(obs_space, act_space)
    env.async_reset()
    half = max(1, n // 2)

    def step() -> int:
        obs, rew, term, trunc, info = env.recv()
        env.send(policy(obs), info["env_id"])
        return half
    step.env = env  # type: ignore[attr-defined]
    return step


def mlp_sync_case(env: Any, n: int) -> Callable[[], int]:
    policy = Policy(env.single_observation_space, env.single_action_space)
    obs, _ = env.reset(seed=0)
    box = [obs]

    def step() -> int:
        box[0] = env.step(policy(box[0]))[0]
        return n
    step.env = env  # type: ignore[attr-defined]
    return step


def forward_alone_case(gid: str, n: int) -> Callable[[], int]:
    ref = gym.make(gid)
    policy = Policy(ref.observation_space, ref.action_space)
    half = max(1, n // 2)
    obs = np.stack([ref.observation_space.sample() for _ in range(half)]).astype(np.float32)
    ref.close()

    def step() -> int:
        policy(obs)
        return half
    return step


def mlp_cases(gid: str, n: int) -> dict[str, Callable[[], Callable[[], int]]]:
    import envpool
    half = max(1, n // 2)

    def gym_best() -> Callable[[], int]:
        mode = "vector_entry_point" if gym.spec(gid).vector_entry_point else "sync"
        return mlp_sync_case(gym.make_vec(gid, num_envs=n, vectorization_mode=mode), n)

    return {
        "mlp:rollout": lambda: mlp_async_case(
            lambda: gym.make_vec(f"rollout/{gid}", num_envs=n, batch_size=half), n,
            lambda e: (e.single_observation_space, e.single_action_space)),
        "mlp:envpool": lambda: mlp_async_case(
            lambda: envpool.make(gid, env_type="gymnasium", num_envs=n, batch_size=half,
                                 num_threads=min(CPUS, n), seed=0), n,
            lambda e: (e.observation_space, e.action_space)),
        "mlp:gymnasium": gym_best,
        "mlp:forward-alone": lambda: forward_alone_case(gid, n),
    }


def cases_for(gid: str, n: int, async_max: int, build: str) -> dict[str, Callable[[], Callable[[], int]]]:
    out: dict[str, Callable[[], Callable[[], int]]] = {
        "rollout": lambda: rollout_case(gid, n),
        "envs-alone": lambda: envs_alone_case(gid, n),
        "envpool": lambda: envpool_case(gid, n),
    }
    if gym.spec(gid).vector_entry_point is not None:
        out["gymnasium-vector"] = lambda: gym_case(gid, n, "vector_entry_point")
    out["gymnasium-sync"] = lambda: gym_case(gid, n, "sync")
    if n <= async_max:
        out["gymnasium-async"] = lambda: gym_case(gid, n, "async")
    if gid in MJ_NAMES:
        out["mj_step-raw-1core"] = lambda: mj_raw_case(gid, n, build, 1)
        if CPUS > 1:
            out["mj_step-raw-all-cores"] = lambda: mj_raw_case(gid, n, build, CPUS)
            out["mj_step-raw-barrier"] = lambda: mj_raw_case(gid, n, build, CPUS, barrier=True)
    out.update(mlp_cases(gid, n))
    return out


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--envs", default="CartPole-v1,Pendulum-v1,Hopper-v5,HalfCheetah-v5")
    ap.add_argument("--sizes", default="8,64,1024")
    ap.add_argument("--async-max", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="the build folder with bench/bench_mujoco (MuJoCo's raw loop)")
    args = ap.parse_args()
    load0 = loadavg()
    rows: list[dict[str, Any]] = []
    for gid in args.envs.split(","):
        for n in [int(x) for x in args.sizes.split(",")]:
            makers = cases_for(gid, n, args.async_max, args.build)
            steppers: dict[str, Callable[[], int]] = {}
            for name, make in makers.items():
                try:
                    steppers[name] = make()
                except Exception as e:  # a peer that will not run here: say which and why
                    print(f"{gid} N={n} {name}: not run: {type(e).__name__}: {e}",
                          file=sys.stderr)
            secs = args.seconds * (3 if n >= 1024 else 1)
            figures: dict[str, list[float]] = {k: [] for k in steppers}
            cpus: dict[str, list[float]] = {k: [] for k in steppers}
            for _ in range(args.rounds):
                for name, step in steppers.items():
                    sps, cpu = timed(step, secs)
                    figures[name].append(sps)
                    cpus[name].append(cpu)
            threads = getattr(steppers.get("rollout"), "env").unwrapped.num_threads \
                if "rollout" in steppers else 0
            over = step_over_alone_us(steppers["rollout"], n, statistics.median(
                figures["rollout"])) if "rollout" in steppers else float("nan")
            for name, step in steppers.items():
                env = getattr(step, "env", None)
                if env is not None:
                    env.close()
                sps = statistics.median(figures[name])
                rows.append({"env": gid, "num_envs": n, "case": name, "steps_per_s": sps,
                             "us_per_call": (n / sps * 1e6) if not name.startswith("mj_step-raw")
                             else 1e6 / sps, "cpu_us_per_step":
                             statistics.median(cpus[name]) * 1e6, "rollout_threads": threads,
                             "us_over_alone": over if name == "rollout" else ""})
                print(f"{gid:15s} N={n:5d} {name:18s} {sps / 1e6:9.3f} M steps/s", flush=True)
    load1 = loadavg()
    write(args.out, rows, load0, load1, f"--seconds {args.seconds:g} --rounds {args.rounds}")


def ratio(rows: list[dict[str, Any]], gid: str, n: int, a: str, b: str) -> float | None:
    va = [r["steps_per_s"] for r in rows if (r["env"], r["num_envs"], r["case"]) == (gid, n, a)]
    vb = [r["steps_per_s"] for r in rows if (r["env"], r["num_envs"], r["case"]) == (gid, n, b)]
    return va[0] / vb[0] if va and vb else None


def write(out: str, rows: list[dict[str, Any]], load0: str, load1: str, how: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gym.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    envs = list(dict.fromkeys(r["env"] for r in rows))
    sizes = sorted({r["num_envs"] for r in rows})
    lines = ["# make_vec against EnvPool and Gymnasium (bench/bench_gym.py)", "",
             f"One run of `bench/bench_gym.py {how}` on {CPUS} CPUs; load average {load0} before, "
             f"{load1} after. Env-steps per second (median over rounds), `step()` with random "
             "actions, rollout with its defaults. µs per step() over the envs alone: one "
             "engine's `step()` calls and its envs alone (`Engine.run_steps`, the same action "
             "batches) in alternating bursts of about 20 ms, the median of 15 differences per "
             "call (two cases timed a second apart differ by the machine's drift).", "",
             "| env | N | rollout | envs alone | EnvPool | Gymnasium | rollout ÷ EnvPool | "
             "rollout ÷ Gymnasium | µs per step() over the envs alone | rollout threads |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def fig(gid: str, n: int, case: str) -> float | None:
        v = [r["steps_per_s"] for r in rows if (r["env"], r["num_envs"], r["case"]) ==
             (gid, n, case)]
        return v[0] if v else None

    def cpu_of(gid: str, n: int, case: str) -> float | None:
        v = [r["cpu_us_per_step"] for r in rows if (r["env"], r["num_envs"], r["case"]) ==
             (gid, n, case)]
        return v[0] if v else None

    def m(x: float | None) -> str:
        return f"{x / 1e6:.3f} M" if x else "—"

    for gid in envs:
        for n in sizes:
            best_gym_case = max((c for c in ("gymnasium-vector", "gymnasium-sync",
                                             "gymnasium-async") if fig(gid, n, c)),
                                key=lambda c: fig(gid, n, c) or 0.0, default=None)
            g = fig(gid, n, best_gym_case) if best_gym_case else None
            ro, alone, ep = fig(gid, n, "rollout"), fig(gid, n, "envs-alone"), fig(gid, n,
                                                                                   "envpool")
            ov = [r["us_over_alone"] for r in rows if (r["env"], r["num_envs"], r["case"]) ==
                  (gid, n, "rollout")]
            over = ov[0] if ov else None
            thr = [r["rollout_threads"] for r in rows if r["env"] == gid and r["num_envs"] == n]
            lines.append(
                f"| {gid} | {n} | {m(ro)} | {m(alone)} | {m(ep)} | {m(g)} "
                f"({(best_gym_case or '').replace('gymnasium-', '')}) | "
                f"{(ro / ep if ro and ep else float('nan')):.2f} | "
                f"{(ro / g if ro and g else float('nan')):.2f} | "
                f"{over if over is not None else float('nan'):.1f} | {thr[0] if thr else ''} |")
    lines += ["", "With a torch MLP(64,64) choosing every action: rollout and EnvPool through "
              "`send`/`recv` in batches of N/2, Gymnasium through `step()`; the policy alone "
              "on a batch of N/2 is the ceiling.", "",
              "| env | N | rollout | EnvPool | Gymnasium | policy alone | rollout ÷ EnvPool | "
              "rollout ÷ policy alone |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for gid in envs:
        for n in sizes:
            ro, ep = fig(gid, n, "mlp:rollout"), fig(gid, n, "mlp:envpool")
            g, fw = fig(gid, n, "mlp:gymnasium"), fig(gid, n, "mlp:forward-alone")
            if not ro:
                continue
            lines.append(f"| {gid} | {n} | {m(ro)} | {m(ep)} | {m(g)} | {m(fw)} | "
                         f"{(ro / ep if ep else float('nan')):.2f} | "
                         f"{(ro / fw if fw else float('nan')):.2f} |")
    mj = [(gid, n) for gid in envs for n in sizes if fig(gid, n, "mj_step-raw-1core")]
    if mj:
        lines += ["", "MuJoCo against the machine: bench_mujoco's raw loop in C over N "
                  "simulations of the same model (one mjData each, as each env has), random "
                  "controls, mj_step × frame skip and the env's termination and reset, nothing "
                  f"else; on one core alone, and on all {CPUS} CPUs at once (one loop pinned to "
                  f"each, N/{CPUS} simulations each, rates summed). Per core: rollout ÷ (the "
                  "one-core loop × the cores rollout steps on, its threads), the issue's figure, "
                  "and the same for the envs alone (the engine's threads with no Python between "
                  "steps); against all cores: rollout ÷ the loops on every core at once, what "
                  "the cores give together. The CPU-time ratio is the one-core loop's CPU time "
                  "per env step ÷ rollout's (its process, every thread). A barrier per step: "
                  f"one process of {CPUS} pinned threads, N/{CPUS} simulations each, that meet "
                  "at a spin barrier after every step (`bench_mujoco --raw-threads`): the least "
                  "a synchronous `step()`, which returns every env's result, costs on these "
                  "CPUs; its per-core figure is what the machine leaves to any vector env's "
                  "`step()`, and rollout ÷ it what rollout's engine and Python add.", "",
                  "| env | N | rollout | raw, 1 core | raw, all cores at once | raw, a barrier "
                  "per step | rollout threads | ratio (per core) | envs alone (per core) | "
                  "barrier loop (per core) | rollout ÷ barrier loop | ratio (all cores at once) "
                  "| CPU-time ratio |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for gid, n in mj:
            ro, raw = fig(gid, n, "rollout"), fig(gid, n, "mj_step-raw-1core")
            alone, allc = fig(gid, n, "envs-alone"), fig(gid, n, "mj_step-raw-all-cores")
            bar = fig(gid, n, "mj_step-raw-barrier")
            c_ro, c_raw = cpu_of(gid, n, "rollout"), cpu_of(gid, n, "mj_step-raw-1core")
            thr = [r["rollout_threads"] for r in rows if (r["env"], r["num_envs"]) == (gid, n)]
            cores = thr[0] if thr and thr[0] else CPUS
            nan = float("nan")
            lines.append(f"| {gid} | {n} | {m(ro)} | {m(raw)} | {m(allc)} | {m(bar)} | {cores} | "
                         f"{(ro / (raw * cores) if ro and raw else nan):.2f} | "
                         f"{(alone / (raw * cores) if alone and raw else nan):.2f} | "
                         f"{(bar / (raw * CPUS) if bar and raw else nan):.2f} | "
                         f"{(ro / bar if ro and bar else nan):.2f} | "
                         f"{(ro / allc if ro and allc else nan):.2f} | "
                         f"{(c_raw / c_ro if c_ro and c_raw else nan):.2f} |")
    with open(os.path.join(out, "gym.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(out, rows, envs, sizes)


def plot(out: str, rows: list[dict[str, Any]], envs: list[str], sizes: list[int]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = ["rollout", "envs-alone", "envpool", "gymnasium-vector", "gymnasium-sync",
             "gymnasium-async"]
    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 4), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, gid in zip(axes, envs):
        width = 0.8 / len(cases)
        for k, case in enumerate(cases):
            ys = []
            for n in sizes:
                v = [r["steps_per_s"] for r in rows
                     if (r["env"], r["num_envs"], r["case"]) == (gid, n, case)]
                ys.append(v[0] / 1e6 if v else 0.0)
            ax.bar(np.arange(len(sizes)) + k * width, ys, width, label=case)
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(sizes)) + 0.4 - width / 2)
        ax.set_xticklabels([f"N={n}" for n in sizes])
        ax.set_title(gid)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("env steps per second (millions, log)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gym.png"), dpi=110)


if __name__ == "__main__":
    main()
