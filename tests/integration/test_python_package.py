"""`pip install .` builds rollout's C core with the Python package
(meson-python over the project's meson.build, issue 29), and the installed
package works with no build tree.

Run as: test_python_package.py SOURCE_ROOT. Copies the tracked tree into a
scratch directory, builds a wheel there with this interpreter's pip
(`pip wheel --no-build-isolation --no-deps`: meson-python, meson and ninja
pinned in python/requirements.txt), installs it into a fresh venv that sees
this interpreter's packages (numpy, gymnasium, mujoco: a .pth file), and,
from another empty folder, with no ROLLOUT_* variables, no PYTHONPATH and a
fresh HOME: imports rollout_client, steps gymnasium.make_vec("rollout/...")
and a remote VecEnv against the package's FakeNode. Checks that everything
imported came from the venv, that the extension finds MuJoCo beside it
($ORIGIN/../mujoco), that nothing was written into the source copy, HOME or
the working folder, and the package's requirements and version.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import nodeutil as nu

IMPORT_CHECK = r"""
import json, sys
import gymnasium as gym
import numpy as np
import rollout_client as rc
from rollout_client.testing import FakeNode
env = gym.make_vec("rollout/CartPole-v1", num_envs=8)
obs, _ = env.reset(seed=0)
for _ in range(50):
    obs, *_ = env.step(env.action_space.sample())
# Python envs: the workers import this package, and run its compiled loop.
py = rc.make_vec("gym:CartPole-v1", 4, num_threads=2, seed=0)
py.reset(seed=0)
py_failed = 0
for _ in range(50):
    py_obs, _, _, _, info = py.step(py.action_space.sample())
    py_failed += int("rollout_env_failure" in info)
py.close()
mujoco = None
try:
    h = gym.make_vec("rollout/Hopper-v5", num_envs=2)
    mujoco = list(h.reset(seed=0)[0].shape)
except ValueError as e:
    mujoco = str(e)
with FakeNode(num_envs=4, groups=2) as node, \
        rc.VecEnv(node.address, timeout=120, autoreset_mode="same_step") as venv:
    venv.reset()
    for _ in range(10):
        venv.step(venv.action_space.sample())
print(json.dumps({"package": rc.__file__, "pb2": rc.pb2().__file__,
                  "engine": sys.modules["rollout_client._engine"].__file__,
                  "version": rc.__version__, "obs_shape": list(obs.shape), "mujoco": mujoco,
                  "py_obs_shape": list(py_obs.shape), "py_failed": py_failed,
                  "torch": "torch" in sys.modules}))
"""


def files_under(path):
    out = set()
    for root, dirs, names in os.walk(path):
        for n in names + dirs:
            out.add(os.path.relpath(os.path.join(root, n), path))
    return out


def main():
    root = os.path.abspath(sys.argv[1])
    tmp = nu.temp_dir("pkg")
    src = os.path.join(tmp, "src")
    listed = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    for rel in filter(None, listed):
        if rel.startswith("build") or not os.path.isfile(os.path.join(root, rel)):
            continue
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        shutil.copy2(os.path.join(root, rel), os.path.join(src, rel))
    before_src = files_under(src)
    home, elsewhere, scratch, wheels = (os.path.join(tmp, d) for d in
                                        ("home", "elsewhere", "tmp", "wheels"))
    for d in (home, elsewhere, scratch):
        os.makedirs(d)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROLLOUT_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME",
                                                         "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HOME=home, TMPDIR=scratch, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_CACHE_DIR="1")
    p = nu.run_cmd([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                    "-w", wheels, src], capture_output=True, text=True, env=env, cwd=tmp,
                   timeout=3000)
    if p.returncode != 0:
        print(f"FAIL: pip wheel exited {p.returncode}:\n{p.stdout[-4000:]}\n{p.stderr[-3000:]}")
        return 1
    ok = True
    made = files_under(src) - before_src
    if made:
        print(f"FAIL: the build wrote into the source tree: {sorted(made)[:10]}")
        ok = False
    wheel = [os.path.join(wheels, w) for w in os.listdir(wheels) if w.endswith(".whl")]
    venv = os.path.join(tmp, "venv")
    base = subprocess.run([sys.executable, "-c", "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    p = nu.run_cmd([os.path.join(base, "bin", "python3"), "-m", "venv", venv],
                   capture_output=True, text=True, env=env, cwd=tmp)
    if p.returncode != 0:
        print(f"FAIL: python -m venv failed (python3-venv): {p.stderr.strip()}")
        return 1
    vpy = os.path.join(venv, "bin", "python")
    p = nu.run_cmd([vpy, "-m", "pip", "install", "--no-deps", "--no-index"] + wheel,
                   capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    if p.returncode != 0:
        print(f"FAIL: pip install of {wheel} exited {p.returncode}:\n{p.stderr[-3000:]}")
        return 1
    site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = subprocess.run([sys.executable, "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "rollout_deps.pth"), "w") as f:
        f.write(deps + "\n")  # numpy, gymnasium, mujoco, protobuf: this interpreter's
    home_before = files_under(home)
    p = nu.run_cmd([vpy, "-c", IMPORT_CHECK], capture_output=True, text=True, env=env,
                   cwd=elsewhere, timeout=600)
    if p.returncode != 0:
        print(f"FAIL: using the installed package failed:\n{p.stderr[-3000:]}")
        return 1
    r = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"installed and used: {r}")
    for key in ("package", "pb2", "engine"):
        if not r[key].startswith(site):
            print(f"FAIL: {key} came from {r[key]}, not the venv's {site}")
            ok = False
    if r["obs_shape"] != [8, 4]:
        print(f"FAIL: make_vec observations of shape {r['obs_shape']}")
        ok = False
    if r["py_obs_shape"] != [4, 4] or r["py_failed"]:
        print(f"FAIL: make_vec('gym:CartPole-v1') from the installed package: observations "
              f"{r['py_obs_shape']}, {r['py_failed']} steps with env failures")
        ok = False
    if r["mujoco"] != [2, 11]:
        print(f"FAIL: rollout/Hopper-v5 from the installed package: {r['mujoco']}")
        ok = False
    if r["torch"]:
        print("FAIL: importing rollout_client imported torch")
        ok = False
    rpath = subprocess.run(["patchelf", "--print-rpath", r["engine"]], capture_output=True,
                           text=True).stdout
    if "$ORIGIN/../mujoco" not in rpath:
        print(f"FAIL: the installed _engine's rpath is {rpath.strip()!r}: no $ORIGIN/../mujoco")
        ok = False
    new = files_under(home) - home_before
    if new:
        print(f"FAIL: using the package wrote into HOME: {sorted(new)[:10]}")
        ok = False
    if files_under(elsewhere):
        print(f"FAIL: using the package wrote into the working folder")
        ok = False
    p = nu.run_cmd([vpy, "-m", "pip", "show", "rollout"], capture_output=True, text=True, env=env)
    requires = re.search(r"^Requires: (.*)$", p.stdout, re.M)
    got = sorted(x.strip() for x in requires.group(1).split(",")) if requires else None
    if got != ["gymnasium", "mujoco", "numpy", "protobuf"]:
        print(f"FAIL: rollout requires {got}, expected gymnasium, mujoco, numpy, protobuf")
        ok = False
    with open(os.path.join(root, "meson.build")) as f:
        project_version = re.search(r"version:\s*'([^']+)'", f.read()).group(1)
    if r["version"] != project_version:
        print(f"FAIL: package version {r['version']} != project version {project_version}")
        ok = False
    print(f"{'PASS' if ok else 'FAIL'}: rollout {r['version']} built by pip (meson-python), "
          "installed in a venv, used with no build tree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
