#!/usr/bin/python3
"""Regenerate docs/python.md's table of the PPO examples (seeds 1-5).

    bench/ppo_table.py                     # runs them, rewrites the table in docs/python.md
    bench/ppo_table.py --seeds 1 2 --print # runs two seeds, prints the table only
    bench/ppo_table.py --rows r.json       # keeps the measurements (--render --rows r.json
                                           # rewrites the table from them, running nothing)

For each seed S: ``ppo_pendulum.py --launch 16 --seed S --save-policy F``,
then ``rollout-node --env pendulum --policy F --num-envs 64`` for 4
episodes per env (256) with the node's --json summary, then
``ppo_cartpole.py --launch 8 --seed S``; every figure in the table and the
paragraph after it is read from those JSON lines. The text between the
``<!-- bench/ppo_table.py -->`` markers of docs/python.md is replaced; the
rest of the file is left alone. A seed gives the same steps run after run
with one build on one machine (the node seeds its envs, torch runs on one
thread), but torch's kernels differ between CPUs, so the steps differ
between machines: the table names the CPU it was measured on.
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "python", "examples")
DOC = os.path.join(ROOT, "docs", "python.md")
BEGIN, END = "<!-- bench/ppo_table.py: begin -->", "<!-- bench/ppo_table.py: end -->"
PENDULUM_EPISODE = 200  # steps (the env's max_episode_steps)


def cpu_s():
    """CPU seconds of the children waited for so far (an example, and the
    node it launched and waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_json(cmd, env):
    """The last line of cmd's stdout, parsed (it must print one), with
    "cpu_s": the CPU time it and its children took."""
    t0 = cpu_s()
    p = subprocess.run([str(a) for a in cmd], capture_output=True, text=True, env=env)
    lines = [x for x in p.stdout.strip().splitlines() if x.startswith("{")]
    if not lines:
        raise SystemExit(f"ppo_table: {' '.join(map(str, cmd[:3]))} printed no JSON line "
                         f"(exit {p.returncode}): {(p.stdout + p.stderr).strip()[-400:]}")
    out = json.loads(lines[-1])
    out["cpu_s"] = cpu_s() - t0
    return out


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "an unknown CPU"


def measure(seed, node, env, tmp):
    """One seed's row: the two examples' JSON lines and the saved policy's
    return in the node."""
    pb = os.path.join(tmp, f"pend-{seed}.pb")
    pend = run_json([sys.executable, os.path.join(EXAMPLES, "ppo_pendulum.py"), "--launch", 16,
                     "--seed", seed, "--save-policy", pb], env)
    run = run_json([node, "--env", "pendulum", "--policy", pb, "--num-envs", 64, "--steps",
                    64 * PENDULUM_EPISODE * 4, "--seed", seed, "--json", "--quiet"], env)
    cart = run_json([sys.executable, os.path.join(EXAMPLES, "ppo_cartpole.py"), "--launch", 8,
                     "--seed", seed], env)
    return {"seed": seed, "pend": pend, "policy_return": run["mean_return"], "cart": cart}


def num(x, sep=" "):
    """12 345 (the docs' thousands separator; a no-break space where the
    text is wrapped, so that a number stays on one line)."""
    return f"{int(x):,}".replace(",", sep)


def signed(x):
    return f"{x:.1f}".replace("-", "−")


def render(rows, torch_version):
    out = ["| seed | Pendulum, 16 envs: steps to a last-20 mean ≥ −200 | CPU time | last-20 mean "
           "| the saved policy in `rollout-node`, 256 episodes | CartPole, 8 envs: steps to ≥ 475 "
           "| CPU time | last-20 mean |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        p, c = r["pend"], r["cart"]
        mark = lambda d: "" if d["reached_target"] else " (not reached)"  # noqa: E731
        out.append(f"| {r['seed']} | {num(p['steps'])}{mark(p)} | {p['cpu_s']:.1f} s | "
                   f"{signed(p['last20_mean_return'])} | {signed(r['policy_return'])} | "
                   f"{num(c['steps'])}{mark(c)} | {c['cpu_s']:.1f} s | "
                   f"{c['last20_mean_return']:.1f} |")
    ps = [r["pend"]["steps"] for r in rows]
    cs = [r["cart"]["steps"] for r in rows]
    pol = [r["policy_return"] for r in rows]
    stds = [s for r in rows for s in r["pend"].get("action_std", [])]
    nb = "\u00a0"
    out += ["", "\n".join(textwrap.wrap(
            f"Pendulum reached a last-20 mean of at least −200 in {num(min(ps), nb)} to "
            f"{num(max(ps), nb)} env steps, CartPole 475 in {num(min(cs), nb)} to "
            f"{num(max(cs), nb)}. The "
            f"saved Pendulum policy, run by the node itself (`--policy pend.pb`, 64 envs, 4 "
            f"episodes each, actions sampled with the learnt standard deviation"
            + (f", {min(stds):.2f} to {max(stds):.2f}" if stds else "")
            + f"), averaged {signed(max(pol))} to {signed(min(pol))}: the last 20 episodes of "
            "training are the ones that crossed the target, a selected sample. CPU time is the "
            "example's and its node's together (user + system), which the load of other work "
            "on the machine changes little, unlike the wall time. Measured by "
            f"`bench/ppo_table.py` on {cpu_name()} (torch {torch_version}), the machine shared "
            "with other work: a seed gives the same steps run after run with one build on one "
            "machine, but torch's kernels differ between CPUs, and a change to the client's "
            "batching changes the order of the samples, so another machine or version gives "
            "other steps: run the script there.", width=100, break_on_hyphens=False))]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--node", default=os.environ.get("ROLLOUT_NODE",
                                                     os.path.join(ROOT, "build", "rollout-node")),
                    help="rollout-node (default $ROLLOUT_NODE or build/rollout-node)")
    ap.add_argument("--print", action="store_true", help="print the table; leave the doc alone")
    ap.add_argument("--rows", metavar="JSON",
                    help="write the measured rows there (or, with --render, read them: no runs)")
    ap.add_argument("--render", action="store_true", help="render --rows without running")
    args = ap.parse_args(argv)
    env = dict(os.environ, ROLLOUT_NODE=os.path.abspath(args.node))
    import torch  # the version goes into the text; the examples import it too
    if args.render:
        with open(args.rows, encoding="utf-8") as f:
            rows = json.load(f)
    else:
        with tempfile.TemporaryDirectory(prefix="ppo-table-") as tmp:
            rows = []
            for s in args.seeds:
                rows.append(measure(s, args.node, env, tmp))
                print(f"ppo_table: seed {s}: pendulum {rows[-1]['pend']['steps']} steps, "
                      f"cartpole {rows[-1]['cart']['steps']} steps", file=sys.stderr)
                if args.rows:
                    with open(args.rows, "w", encoding="utf-8") as f:
                        json.dump(rows, f)
    text = render(rows, torch.__version__)
    if args.print:
        print(text)
        return 0
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if doc.count(BEGIN) != 1 or doc.count(END) != 1:
        raise SystemExit(f"ppo_table: {DOC} needs one {BEGIN} and one {END}")
    head, rest = doc.split(BEGIN)
    _, tail = rest.split(END)
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    print(f"ppo_table: rewrote the table in {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
