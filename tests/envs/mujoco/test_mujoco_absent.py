"""A build without MuJoCo: naming a MuJoCo env fails at start-up with a
message that says how to get the envs (the package and the meson option),
not "unknown env"; --json's mujoco_version is null.

Run as: test_mujoco_absent.py ROLLOUT_NODE.
"""
import json
import subprocess
import sys


def main():
    node = sys.argv[1]
    ok = True
    for env in ("hopper", "walker2d", "half_cheetah", "ant", "inverted_pendulum"):
        p = subprocess.run([node, "--env", env, "--steps", "10", "--quiet"],
                           capture_output=True, text=True, timeout=60)
        msg = p.stderr.strip()
        for want in (f"env '{env}' needs MuJoCo", "python/requirements.txt", "-Dmujoco=enabled"):
            if p.returncode == 0 or want not in msg:
                print(f"FAIL: --env {env}: exit {p.returncode}, stderr {msg!r} lacks {want!r}")
                ok = False
    # --json names no MuJoCo version: this build has none.
    p = subprocess.run([node, "--env", "cartpole", "--steps", "10", "--quiet", "--json"],
                       capture_output=True, text=True, timeout=60)
    s = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    if s.get("mujoco_version", "missing") is not None:
        print(f"FAIL: --json's mujoco_version is {s.get('mujoco_version', 'missing')!r}, not null"
              f" (exit {p.returncode}, stderr {p.stderr.strip()!r})")
        ok = False
    print("ok" if ok else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
