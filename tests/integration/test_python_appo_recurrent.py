"""The recurrent APPO example on partially observed CartPole
(python/examples/appo_recurrent.py): its state handling, not its speed.

Run as: test_python_appo_recurrent.py ROLLOUT_NODE [BUILD_DIR]. A short run
(--launch 16 envs, 40000 steps, no target, --max-policy-lag 2: segments
lagging more are dropped, the others keep the state that acted) with
--check-state: the example
replays every segment from its state/h with the actors it pushed, per step
the actor of that step's version, and the node's log-probabilities must be
theirs (the GRU's weights went out in format 3, the node kept each env's
state and zeroed it at episode starts, and the segments carry the state
that acted). Then the node must have accepted the pushes and versions never
go back; and --recurrent none (the MLP baseline) runs on the same task.
Learning is judged by the docs' curve (bench/bench_recurrent_learning.py),
never here. Exits 77 (skipped) when torch cannot be imported.
"""
import os
import sys

import nodeutil as nu
from test_python_ppo import SKIP, run_example


def main():
    node = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    if build:
        os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(build, "proto"))
    probe = nu.run_cmd([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: torch cannot be imported by {sys.executable}")
        return SKIP
    env = {"ROLLOUT_NODE": node}
    fails = []
    r, p = run_example("appo_recurrent.py", ["--launch", 16, "--total-steps", 40000,
                                             "--batch", 1024, "--no-target", "--check-state",
                                             "--max-policy-lag", 2], env=env)
    if r is None:
        print(f"FAIL: appo_recurrent printed no JSON result (exit {p.returncode})")
        return 1
    if r["logp_err_rows"] < 10000 or r["logp_err_max"] > 1e-4:
        fails.append(f"the node's log-probs differ from the pushed GRU actors unrolled from "
                     f"state/h by up to {r['logp_err_max']} over {r['logp_err_rows']} steps")
    if r["versions_pushed"] < 3 or r["accepted_version"] < r["last_version"] - 1:
        fails.append(f"{r['versions_pushed']} pushes, the node accepted up to "
                     f"{r['accepted_version']} of {r['last_version']}")
    if r["version_regressions"]:
        fails.append(f"{r['version_regressions']} segments older than one before them")
    # The learner trains a GRU; a node acting with an MLP is refused, by name.
    r, p = run_example("appo_recurrent.py", ["--launch", 8, "--total-steps", 1000,
                                             "--recurrent", "none", "--no-target"], env=env)
    if r is None or p.returncode != 0:
        fails.append(f"--recurrent none (the MLP baseline) failed: exit {p.returncode}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
