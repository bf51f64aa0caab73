"""python/examples/ppo_hopper.py learns on rollout/Hopper-v5 (issue 29): a
short run (32 updates of 8 envs x 128 steps) whose mean return must climb
well above where it started. Asserts learning, not time: the run's wall
time is printed, never judged.

Run as: test_python_ppo_hopper.py BUILD_DIR. Exits 77 (skipped), saying
why, when the build has no MuJoCo.
"""
import json
import os
import subprocess
import sys

BUILD = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "python", "examples", "ppo_hopper.py")


def main() -> int:
    env = dict(os.environ, ROLLOUT_BUILD_DIR=BUILD)
    env.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import rollout_client as rc; rc.make_vec('rollout/Hopper-v5', 1)",
                            os.path.join(HERE, "..", "..", "python")], env=env,
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0 and "MuJoCo" in probe.stderr:
        print(f"SKIP: no MuJoCo in this build: {probe.stderr.strip().splitlines()[-1]}")
        return 77
    p = subprocess.run([sys.executable, EXAMPLE, "--total-steps", str(32 * 8 * 128),
                        "--num-steps", "128", "--json"], env=env, capture_output=True,
                       text=True, timeout=1800)
    print(p.stdout[-3000:])
    if p.returncode != 0:
        print(p.stderr[-3000:])
        return 1
    s = json.loads(p.stdout.strip().splitlines()[-1])
    means = [m for _, m in s["curve"] if m == m]  # NaN until an episode ended
    first, best = means[0], s["best_mean_return"]
    print(f"first mean return {first:.1f}, best {best:.1f}, {s['steps']} steps in "
          f"{s['wall_s']} s")
    if not best > 2.0 * first or not best > 150.0:
        print(f"FAIL: no learning: the mean return went from {first:.1f} to at best {best:.1f} "
              "(expected more than twice the first, and over 150)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
