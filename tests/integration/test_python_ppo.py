"""PPO from python/examples/ppo_cartpole.py learns from a real node.

Run as: test_python_ppo.py ROLLOUT_NODE [BUILD_DIR]. A short run (--quick:
60000 env steps at most, stops once the last 20 episodes average 150) must
end with a last-20 mean return clearly above a random policy's ~22. Exits
77 (skipped) when torch cannot be imported.
"""
import json
import os
import sys
import time

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
EXAMPLE = os.path.join(ROOT, "python", "examples", "ppo_cartpole.py")
SKIP = 77


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

    with NodeProcess(node, "--env", "cartpole", "--num-envs", 8, "--seconds", 0, "--quiet",
                     "--json") as n:
        t0 = time.monotonic()  # reported, never judged
        # The run ends on its own (a step budget, or the target return); the
        # timeout is only a hang guard.
        p = nu.run_cmd([sys.executable, EXAMPLE, "--node", n.address, "--quick", "--seed", "1"],
                       capture_output=True, text=True, timeout=480)
        wall = time.monotonic() - t0
        code = n.stop()
    print(p.stdout, end="")
    if p.stderr:
        print(p.stderr, end="", file=sys.stderr)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if not lines:
        print(f"FAIL: ppo_cartpole printed no JSON result (exit {p.returncode})")
        return 1
    r = json.loads(lines[-1])
    ok = True
    if r["last20_mean_return"] <= 60:
        print(f"FAIL: last-20 mean return {r['last20_mean_return']:.1f} <= 60 after "
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
    print(f"{'PASS' if ok else 'FAIL'}: last-20 mean return {r['last20_mean_return']:.1f} "
          f"after {r['steps']} steps in {wall:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
