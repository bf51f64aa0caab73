"""Continuous control learns on a MuJoCo env: ARS (python/examples/ars_box.py,
numpy only) against a real node's inverted_pendulum envs, through the Python
client in SEED mode. The test judges returns only, never time: the best
iteration's mean return must be at least 150 and ten times the random
policy's (about 4; a zero action scores about 25). A run stops once an
iteration averages 300, or after 40 iterations (each needs every env to
finish an episode: the bound on the work). Exits 77 (skipped) when numpy
cannot be imported.

Run as: test_mujoco_train.py ROLLOUT_NODE BUILD_DIR.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
EXAMPLE = os.path.join(ROOT, "python", "examples", "ars_box.py")
SKIP = 77


def main():
    node, build = sys.argv[1], sys.argv[2]
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(build, "proto"))
    probe = subprocess.run([sys.executable, "-c", "import numpy, google.protobuf"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: numpy/protobuf cannot be imported by {sys.executable} ({last})")
        return SKIP
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from rollout_client.testing import NodeProcess

    with NodeProcess(node, "--env", "inverted_pendulum", "--num-envs", 16, "--seconds", 0,
                     "--seed", 1, "--quiet", "--json") as n:
        # The hang guard is the example's own: 60 s without observations.
        p = subprocess.run([sys.executable, EXAMPLE, "--node", n.address, "--seed", "1",
                            "--target", "300", "--iterations", "40"],
                           capture_output=True, text=True)
        code = n.stop()
    print(p.stderr, end="", file=sys.stderr)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if not lines:
        print(f"FAIL: ars_box.py printed no JSON result (exit {p.returncode})")
        return 1
    r = json.loads(lines[-1])
    hist = r["iteration_mean_returns"]
    print(f"random {r['random_mean_return']:.2f}; iterations {len(hist)}: "
          f"{[round(x) for x in hist]}; {r['steps']} env steps")
    best = max(hist) if hist else 0.0
    ok = True
    if best < 150 or best < 10 * r["random_mean_return"]:
        print(f"FAIL: best iteration mean return {best:.1f} (random play "
              f"{r['random_mean_return']:.2f}): no clear improvement")
        ok = False
    if code != 0:
        print(f"FAIL: the node exited {code} after the learner said goodbye")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
