"""The PPO examples learn from a real node: python/examples/ppo_cartpole.py
and ppo_pendulum.py (a Gaussian policy on box actions), and take their
token the way the C tools do (a file or the environment, never a flag).

Run as: test_python_ppo.py ROLLOUT_NODE [BUILD_DIR]. Short runs (--quick):
CartPole, at most 60000 env steps, must end with a last-20 mean return
clearly above a random policy's ~22; Pendulum, at most 40000 steps, must
reach its quick target (-700; random play is about -1200). A run is
deterministic for a seed (node seeds, torch seed, one thread), so these are
not flaky. Exits 77 (skipped) when torch cannot be imported.
"""
import json
import os
import sys
import time

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
EXAMPLES = os.path.join(ROOT, "python", "examples")
SKIP = 77


def run_example(name, args, env=None):
    """Run an example to its end (the timeout is only a hang guard); returns
    (its JSON result or None, the process)."""
    t0 = time.monotonic()  # reported, never judged
    p = nu.run_cmd([sys.executable, os.path.join(EXAMPLES, name), *map(str, args)],
                   capture_output=True, text=True, timeout=480,
                   env={**os.environ, **(env or {})})
    print(f"--- {name} {' '.join(map(str, args))} ({time.monotonic() - t0:.1f} s, exit "
          f"{p.returncode})")
    print(p.stdout, end="")
    if p.stderr:
        print(p.stderr, end="", file=sys.stderr)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if lines else None), p


def main():
    node = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    if build:
        os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(build, "proto"))
    probe = nu.run_cmd([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: torch cannot be imported by {sys.executable} ({last}); "
              "install python3-torch to run the PPO test")
        return SKIP
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from rollout_client.testing import NodeProcess

    ok = True
    tmp = nu.temp_dir("ppo")
    token_file = os.path.join(tmp, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("s3cret-token\n")

    # A token on the command line is refused: other users can read it there.
    r, p = run_example("ppo_cartpole.py", ["--node", "127.0.0.1:1", "--token", "s3cret-token"])
    if p.returncode != 2 or "--token" not in p.stderr:
        print(f"FAIL: --token on the command line gave exit {p.returncode}, not 2 naming it")
        ok = False

    # CartPole, the token from $ROLLOUT_TOKEN_FILE. The nodes run --seed 1 so
    # that a run is the same every time (without it each draws a fresh seed).
    with NodeProcess(node, "--env", "cartpole", "--num-envs", 8, "--seconds", 0, "--quiet",
                     "--json", "--seed", 1, "--token-file", token_file) as n:
        r, p = run_example("ppo_cartpole.py", ["--node", n.address, "--quick", "--seed", 1],
                           env={"ROLLOUT_TOKEN_FILE": token_file})
        code = n.stop()
    if r is None:
        print(f"FAIL: ppo_cartpole printed no JSON result (exit {p.returncode})")
        return 1
    if r["last20_mean_return"] is None or r["last20_mean_return"] <= 60:
        print(f"FAIL: CartPole last-20 mean return {r['last20_mean_return']} <= 60 after "
              f"{r['steps']} steps (random play is ~22)")
        ok = False
    if r["steps"] > 60_000:
        print(f"FAIL: --quick ran {r['steps']} steps, more than its 60000 bound")
        ok = False
    if code != 0:
        print(f"FAIL: the node exited {code} after the learner said goodbye")
        ok = False
    summary = n.summary()
    if summary is not None and summary.get("steps", 0) < r["steps"]:
        print(f"FAIL: node stepped {summary['steps']} < learner's {r['steps']} steps")
        ok = False
    if summary is not None and summary.get("learners_rejected", 0) != 0:
        print("FAIL: the node rejected a learner: the token did not arrive")
        ok = False

    # Pendulum, the token itself in $ROLLOUT_TOKEN.
    with NodeProcess(node, "--env", "pendulum", "--num-envs", 16, "--seconds", 0, "--quiet",
                     "--json", "--seed", 1, "--token-file", token_file) as n:
        rp, p = run_example("ppo_pendulum.py", ["--node", n.address, "--quick", "--seed", 1,
                                                "--save-policy", os.path.join(tmp, "pend.pb"),
                                                "--tensorboard", os.path.join(tmp, "tb")],
                            env={"ROLLOUT_TOKEN": "s3cret-token"})
        code = n.stop()
    if rp is None:
        print(f"FAIL: ppo_pendulum printed no JSON result (exit {p.returncode})")
        return 1
    if not rp["reached_target"] or rp["steps"] > 40_000:
        print(f"FAIL: Pendulum last-20 mean return {rp['last20_mean_return']} after "
              f"{rp['steps']} steps: the quick target {rp['target']} not reached within 40000")
        ok = False
    if code != 0:
        print(f"FAIL: the pendulum node exited {code}")
        ok = False
    # --tensorboard: its curves, read back with TensorBoard's own reader.
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(os.path.join(tmp, "tb"), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    curve = acc.Scalars("charts/last20_return") if "charts/last20_return" in \
        acc.Tags()["scalars"] else []
    if not curve or curve[-1].step != rp["steps"] or \
            abs(curve[-1].value - rp["last20_mean_return"]) > 1e-3 * abs(rp["last20_mean_return"]):
        print(f"FAIL: --tensorboard: charts/last20_return {[(e.step, e.value) for e in curve][-3:]}"
              f" does not end at the result's {rp['steps']} steps, "
              f"{rp['last20_mean_return']}")
        ok = False
    if not {"losses/policy", "losses/value", "charts/steps_per_s"} <= set(acc.Tags()["scalars"]):
        print(f"FAIL: --tensorboard: tags {acc.Tags()['scalars']}")
        ok = False

    # The saved Gaussian policy runs in the node itself.
    q = nu.run_cmd([node, "--env", "pendulum", "--policy", os.path.join(tmp, "pend.pb"),
                    "--num-envs", 16, "--steps", 16 * 200 * 4, "--seed", 1, "--json", "--quiet"],
                   capture_output=True, text=True)
    node_run = json.loads([x for x in q.stdout.splitlines() if x.startswith("{")][-1]) \
        if q.returncode == 0 else None
    if node_run is None or node_run["episodes"] != 64:
        print(f"FAIL: rollout-node --policy pend.pb (exit {q.returncode}): {q.stderr[-500:]}")
        ok = False
    else:
        print(f"rollout-node --policy pend.pb: mean return {node_run['mean_return']:.1f} over "
              f"{node_run['episodes']} episodes")

    # --launch: the example starts its own node (launch_node).
    rl, p = run_example("ppo_cartpole.py", ["--launch", 4, "--total-steps", 512, "--no-target"],
                        env={"ROLLOUT_NODE": node})
    if rl is None or p.returncode != 0 or rl["steps"] != 512:
        print(f"FAIL: ppo_cartpole --launch 4 (exit {p.returncode}): {rl}")
        ok = False

    print(f"{'PASS' if ok else 'FAIL'}: CartPole last-20 {r['last20_mean_return']:.1f} after "
          f"{r['steps']} steps; Pendulum last-20 {rp['last20_mean_return']:.1f} after "
          f"{rp['steps']} steps")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
