#!/usr/bin/env python3
"""Python envs in worker processes, side by side in one run (issue 33 point 6):
rollout (``rollout_client.make_vec("gym:ID", N, num_threads=P)``: P env
worker processes behind the in-process engine, one command each way per
process and step), Gymnasium's ``AsyncVectorEnv(shared_memory=True)`` (its
design: one process per env), PufferLib's multiprocessing vectorization
(``pufferlib.vector.make(..., backend=Multiprocessing, num_workers=P,
batch_size=N)``) and the reference: a raw loop of the same N envs in this
one process (``env.step``, a reset when an episode ends, nothing else),
times P. Three more references (bench/pyenv_refs.py) say what P processes
reach on these CPUs: the raw loop run by P processes at once over N/P envs
each, free, with a barrier after every step (the least a synchronous
``step()`` of any P-process vector env costs), and handed each step by a
caller process that waits for every answer, all spinning on shared memory
(the least a vector env whose envs live in worker processes, as issue 33
asks, costs: a third party on the same CPUs).

Envs: Gymnasium's Python CartPole-v1 and Pendulum-v1, and ALE Pong with the
standard preprocessing (84x84 gray, frame skip 4, 4 stacked frames, uint8
[4, 84, 84]). Every system makes its envs with the same factory, except on
the ``Pong`` row: rollout runs its own Atari (``rollout_client.atari.make``,
AtariStack: the wrappers fused, equal bit for bit), the others and the
references Gymnasium's AtariPreprocessing + FrameStackObservation, as each
is used. The ``Pong-AtariStack`` row runs AtariStack everywhere: the
vectorization alone. N = 8 and 64, random actions (16 batches drawn before
timing, cycled), P = 2 processes. Every case runs --seconds per round,
rounds interleaved (--rounds) so the machine's drift falls on all alike; the
figure is the median over rounds of env-steps per second (wall clock). The
load average before and after is printed and written.

PufferLib: ``pip install pufferlib==3.0.0`` fails here (its setup.py
downloads raylib from the network at build time); ``pufferlib-core`` ships a
wheel with the same ``pufferlib.vector`` but pins torch 2.9.0 (this project
pins 2.13.0), so it is not in python/requirements.txt: install it apart,
``pip install --no-deps --target DIR pufferlib-core==3.0.23 psutil==7.1.3``,
and pass ``--pufferlib-path DIR``. Without it the PufferLib column says why.
Its idle workers poll without sleeping for 0.5 s after their last step, so
the case timed after it starts 0.6 s later (it would otherwise share the
CPUs with two busy loops).

Writes pyenv.csv, pyenv.md and pyenv.png into --out (default
docs/benchmarks).

usage: bench_pyenv.py [--seconds S] [--rounds R] [--envs CartPole-v1,...]
       [--sizes 8,64] [--procs P] [--pufferlib-path DIR] [--out DIR]
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OPENCV_FOR_THREADS_NUM", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import gymnasium as gym  # noqa: E402

import rollout_client as rc  # noqa: E402
from pyenv_refs import RefPool, actions, step_all  # noqa: E402
from rollout_client import atari  # noqa: E402

Step = Callable[[], int]  # one step of every env; returns the env steps taken
Run = Callable[[float], float]  # a case run for so many seconds: env-steps per second
# PufferLib's Multiprocessing workers poll their semaphore without sleeping
# for 0.5 s after their last command (pufferlib/vector.py, _worker_process):
# the case after it waits this long first.
PUFFER_IDLE_S = 0.6


def factory(name: str) -> Callable[[], Any]:
    """The env as the peers and the references make it."""
    if name == "Pong":
        return lambda: atari.gymnasium_stack(game="Pong")
    if name == "Pong-AtariStack":
        return lambda: atari.make(game="Pong")
    return lambda: gym.make(name)


def rollout_spec(name: str) -> tuple[str, dict[str, Any]]:
    if name.startswith("Pong"):
        return "py:rollout_client.atari:make", {"game": "Pong"}
    return f"gym:{name}", {}


def make_raw(name: str, n: int) -> tuple[Step, Callable[[], None]]:
    envs = [factory(name)() for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    acts = actions(envs[0].action_space, n)
    k = [0]

    def step() -> int:
        step_all(envs, acts[k[0] % 16])
        k[0] += 1
        return n
    return step, lambda: [e.close() for e in envs] and None


def make_vector(v: Any, n: int) -> tuple[Step, Callable[[], None]]:
    acts = actions(v.single_action_space, n)
    k = [0]

    def step() -> int:
        v.step(acts[k[0] % 16])
        k[0] += 1
        return n
    return step, v.close


def make_rollout(name: str, n: int, procs: int) -> tuple[Step, Callable[[], None]]:
    spec, kw = rollout_spec(name)
    v = rc.make_vec(spec, n, num_threads=procs, seed=0, **kw)
    v.reset(seed=0)
    return make_vector(v, n)


def make_async(name: str, n: int) -> tuple[Step, Callable[[], None]]:
    v = gym.vector.AsyncVectorEnv([factory(name)] * n, shared_memory=True)
    v.reset(seed=0)
    return make_vector(v, n)


def make_puffer(name: str, n: int, procs: int) -> tuple[Step, Callable[[], None]]:
    import pufferlib.emulation
    import pufferlib.vector
    make = factory(name)

    def creator(buf: Any = None, seed: int = 0) -> Any:
        return pufferlib.emulation.GymnasiumPufferEnv(env_creator=make, buf=buf, seed=seed)
    v = pufferlib.vector.make(creator, backend=pufferlib.vector.Multiprocessing, num_envs=n,
                              num_workers=procs, batch_size=n)
    v.reset(seed=0)
    acts = actions(v.single_action_space, n)
    k = [0]

    def step() -> int:
        v.step(acts[k[0] % 16])
        k[0] += 1
        return n
    return step, v.close


def make_refs(name: str, n: int, procs: int, mode: str) -> tuple[Run, Callable[[], None]]:
    pool = RefPool(factory(name), n, procs, mode)
    return pool.run, pool.close


def timed(step: Step, seconds: float) -> float:
    step()  # warm
    steps, t0 = 0, time.perf_counter()
    while True:
        steps += step()
        t = time.perf_counter() - t0
        if t >= seconds:
            return steps / t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--envs", default="CartPole-v1,Pendulum-v1,Pong,Pong-AtariStack")
    ap.add_argument("--sizes", default="8,64")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--pufferlib-path", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    args = ap.parse_args()
    if args.pufferlib_path:
        sys.path.insert(0, os.path.abspath(args.pufferlib_path))
    try:
        import pufferlib.vector  # noqa: F401
        puffer_why = ""
    except ImportError as e:
        puffer_why = (f"not importable ({e}): pufferlib 3.0.0 does not build here (its setup.py "
                      "downloads raylib); see --pufferlib-path")
    envs, sizes, P = args.envs.split(","), [int(s) for s in args.sizes.split(",")], args.procs
    load0 = os.getloadavg()
    print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    rows: list[dict[str, Any]] = []
    for name in envs:
        for n in sizes:
            # The references fork first: their processes hold none of the
            # other cases' pipes, memory or worker descriptors.
            refs = {f"raw-procs-{m}": make_refs(name, n, P, m)
                    for m in ("free", "barrier", "handoff")}
            stepped: dict[str, tuple[Step, Callable[[], None]]] = {
                "raw-1proc": make_raw(name, n),
                "rollout": make_rollout(name, n, P),
                "gymnasium-async": make_async(name, n),
            }
            if not puffer_why:
                stepped["pufferlib"] = make_puffer(name, n, P)
            cases: dict[str, tuple[Run, Callable[[], None]]] = {
                c: (lambda s, step=step: timed(step, s), close)
                for c, (step, close) in stepped.items()}
            cases.update(refs)
            figs: dict[str, list[float]] = {c: [] for c in cases}
            for _ in range(args.rounds):
                for c, (run, _) in cases.items():
                    figs[c].append(run(args.seconds))
                    if c == "pufferlib":
                        # Its idle workers busy-poll for 0.5 s after their last
                        # step before they nap: not during the next case.
                        time.sleep(PUFFER_IDLE_S)
            for c, (_, close) in cases.items():
                close()
                med = statistics.median(figs[c])
                rows.append({"env": name, "num_envs": n, "case": c, "steps_per_s": med,
                             "rounds": ";".join(f"{x:.0f}" for x in figs[c])})
                print(f"{name:12s} N={n:<3d} {c:16s} {med:12.0f} steps/s", flush=True)
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}", flush=True)
    write(args, rows, envs, sizes, P, load0, load1, puffer_why)


def write(args: Any, rows: list[dict[str, Any]], envs: list[str], sizes: list[int], P: int,
          load0: tuple[float, ...], load1: tuple[float, ...], puffer_why: str) -> None:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pyenv.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["env", "num_envs", "case", "steps_per_s", "rounds"])
        w.writeheader()
        w.writerows(rows)

    def fig(name: str, n: int, case: str) -> float:
        v = [r["steps_per_s"] for r in rows if (r["env"], r["num_envs"], r["case"]) ==
             (name, n, case)]
        return v[0] if v else float("nan")

    def k(x: float) -> str:
        return "n/a" if x != x else f"{x / 1e3:.1f} k"

    cpus = len(os.sched_getaffinity(0))
    lines = ["# Python envs in worker processes (bench/bench_pyenv.py)", "",
             f"One run of `bench/bench_pyenv.py --seconds {args.seconds} --rounds {args.rounds}` "
             f"on {cpus} CPUs, {P} processes; load average {' '.join(f'{x:.2f}' for x in load0)} "
             f"before, {' '.join(f'{x:.2f}' for x in load1)} after. Env-steps per second "
             "(median over rounds), random actions. Gymnasium's AsyncVectorEnv runs one process "
             "per env (its design); rollout and PufferLib run "
             f"{P}; the raw loop is the same envs stepped in one process, and the target's "
             f"reference is it × {P}. The machine's limits: the raw loop in {P} processes at once "
             f"over N/{P} envs each, free, with a barrier after every step (what a "
             f"synchronous step() of any {P}-process vector env could reach), and handed each "
             "step by a caller process that waits for every answer, all spinning on shared "
             f"memory (what any vector env whose envs live in {P} worker processes could "
             "reach). On the Pong row "
             "rollout runs its AtariStack (Gymnasium's Atari wrappers fused, equal bit for bit), "
             "every other column Gymnasium's wrappers; on Pong-AtariStack every column runs "
             "AtariStack.", ""]
    if puffer_why:
        lines += [f"PufferLib: {puffer_why}.", ""]
    lines += ["| env | N | rollout | AsyncVectorEnv | PufferLib | raw loop (1 process) | "
              f"raw, {P} processes free | raw, {P} processes, a barrier per step | "
              f"raw, {P} processes handed each step | "
              "rollout ÷ Async (≥ 2) | rollout ÷ PufferLib (≥ 1) | "
              f"rollout ÷ (raw × {P}) (≥ 0.9) | free ÷ (raw × {P}) | barrier ÷ (raw × {P}) | "
              f"handoff ÷ (raw × {P}) | rollout ÷ handoff |",
              "|" + " --- |" * 16]
    for name in envs:
        for n in sizes:
            ro, asy = fig(name, n, "rollout"), fig(name, n, "gymnasium-async")
            pu, raw = fig(name, n, "pufferlib"), fig(name, n, "raw-1proc")
            free, bar = fig(name, n, "raw-procs-free"), fig(name, n, "raw-procs-barrier")
            hand = fig(name, n, "raw-procs-handoff")
            lines.append(f"| {name} | {n} | {k(ro)} | {k(asy)} | {k(pu)} | {k(raw)} | {k(free)} | "
                         f"{k(bar)} | {k(hand)} | {ro / asy:.2f} | {ro / pu:.2f} | "
                         f"{ro / (raw * P):.2f} | {free / (raw * P):.2f} | {bar / (raw * P):.2f} | "
                         f"{hand / (raw * P):.2f} | {ro / hand:.2f} |")
    with open(os.path.join(args.out, "pyenv.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(args.out, rows, envs, sizes)


def plot(out: str, rows: list[dict[str, Any]], envs: list[str], sizes: list[int]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = ["rollout", "gymnasium-async", "pufferlib", "raw-1proc", "raw-procs-free",
             "raw-procs-barrier", "raw-procs-handoff"]
    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 4))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, envs):
        width = 0.8 / len(cases)
        for j, case in enumerate(cases):
            ys = []
            for n in sizes:
                v = [r["steps_per_s"] for r in rows
                     if (r["env"], r["num_envs"], r["case"]) == (name, n, case)]
                ys.append(v[0] / 1e3 if v else 0.0)
            ax.bar(np.arange(len(sizes)) + j * width, ys, width, label=case)
        ax.set_xticks(np.arange(len(sizes)) + 0.4 - width / 2)
        ax.set_xticklabels([f"N={n}" for n in sizes])
        ax.set_title(name)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("env steps per second (thousands)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "pyenv.png"), dpi=110)


if __name__ == "__main__":
    main()
