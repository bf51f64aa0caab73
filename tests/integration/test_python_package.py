"""The rollout-client package installs offline into a fresh venv and imports
from any folder, with no build tree (issue 16).

Run as: test_python_package.py SOURCE_ROOT. Copies python/ and proto/ into a
scratch directory, makes `/usr/bin/python3 -m venv --system-site-packages`,
installs with `pip install --no-build-isolation --no-index`, then, from
another empty folder, with no ROLLOUT_* variables, no PYTHONPATH and a
fresh HOME: imports rollout_client, loads the shipped rollout_pb2 and runs
a VecEnv against the package's FakeNode. Checks that the generated module
is inside the installed package and not in the source tree, that the import
wrote nothing (no ~/.cache, no build/), that the package depends only on
numpy and protobuf, and that its version is the project's.

Exits 77 (skipped), saying why, only when venv or pip are missing (Debian:
python3-venv, python3-pip), and never under CI=true, where that fails:
.ci/install-deps installs both.
"""
import json
import os
import re
import shutil
import sys

import nodeutil as nu

# Under CI the tools are installed (.ci/install-deps): a missing one fails.
SKIP = 1 if os.environ.get("CI") == "true" else 77
SKIPPING = "FAIL (CI=true)" if SKIP == 1 else "SKIP"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

IMPORT_CHECK = r"""
import json, os, sys
import numpy as np
import rollout_client as rc
from rollout_client.testing import FakeNode
pb = rc.pb2()
with FakeNode(num_envs=4, groups=2) as node, rc.VecEnv(node.address, timeout=120) as env:
    obs, infos = env.reset()
    for _ in range(20):
        obs, rew, term, trunc, infos = env.step(env.action_space.sample())
print(json.dumps({"package": rc.__file__, "pb2": pb.__file__, "version": rc.__version__,
                  "obs_shape": list(obs.shape), "torch": "torch" in sys.modules,
                  "gymnasium_path": rc.spaces.GYMNASIUM is not None}))
"""


def files_under(path):
    out = set()
    for root, dirs, names in os.walk(path):
        for n in names + dirs:
            out.add(os.path.relpath(os.path.join(root, n), path))
    return out


def main():
    root = os.path.abspath(sys.argv[1])
    probe = nu.run_cmd([PY, "-c", "import venv, ensurepip"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"{SKIPPING}: {PY} has no venv/ensurepip (install python3-venv): "
              f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")
        return SKIP
    tmp = nu.temp_dir("pkg")
    src = os.path.join(tmp, "src")
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "rollout_pb2.py")
    shutil.copytree(os.path.join(root, "python"), os.path.join(src, "python"), ignore=ignore)
    shutil.copytree(os.path.join(root, "proto"), os.path.join(src, "proto"), ignore=ignore)
    home = os.path.join(tmp, "home")
    elsewhere = os.path.join(tmp, "elsewhere")
    scratch = os.path.join(tmp, "tmp")  # pip's own temporary files stay in ours
    for d in (home, elsewhere, scratch):
        os.makedirs(d)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROLLOUT_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME",
                                                         "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HOME=home, TMPDIR=scratch, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_CACHE_DIR="1")
    venv = os.path.join(tmp, "venv")
    p = nu.run_cmd([PY, "-m", "venv", "--system-site-packages", venv], capture_output=True,
                   text=True, env=env, cwd=tmp)
    if p.returncode != 0:
        print(f"{SKIPPING}: {PY} -m venv failed (install python3-venv): {p.stderr.strip()}")
        return SKIP
    vpy = os.path.join(venv, "bin", "python")
    p = nu.run_cmd([vpy, "-m", "pip", "--version"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print(f"{SKIPPING}: the venv has no pip (install python3-pip): {p.stderr.strip()}")
        return SKIP

    ok = True
    p = nu.run_cmd([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                    os.path.join(src, "python")], capture_output=True, text=True, env=env,
                   cwd=tmp, timeout=600)
    print(p.stdout[-3000:], end="")
    if p.returncode != 0:
        print(f"FAIL: pip install exited {p.returncode}:\n{p.stderr[-3000:]}")
        return 1
    if os.path.exists(os.path.join(src, "python", "rollout_client", "rollout_pb2.py")):
        print("FAIL: the build wrote rollout_pb2.py into the source tree")
        ok = False

    home_before = files_under(home)
    p = nu.run_cmd([vpy, "-c", IMPORT_CHECK], capture_output=True, text=True, env=env,
                   cwd=elsewhere)
    if p.returncode != 0:
        print(f"FAIL: importing the installed package failed:\n{p.stderr[-3000:]}")
        return 1
    r = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"imported: {r}")
    site = os.path.join(venv, "lib")
    if not r["package"].startswith(site):
        print(f"FAIL: rollout_client came from {r['package']}, not the venv")
        ok = False
    if os.path.dirname(r["pb2"]) != os.path.dirname(r["package"]):
        print(f"FAIL: rollout_pb2 came from {r['pb2']}, not from inside the package")
        ok = False
    if r["obs_shape"] != [4, 4]:
        print(f"FAIL: VecEnv observations of shape {r['obs_shape']}")
        ok = False
    if r["torch"]:
        print("FAIL: importing rollout_client imported torch")
        ok = False
    new = files_under(home) - home_before
    if new:
        print(f"FAIL: the import wrote into HOME: {sorted(new)[:10]}")
        ok = False
    left = files_under(elsewhere)
    if left:
        print(f"FAIL: the import wrote into the working folder: {sorted(left)[:10]}")
        ok = False

    p = nu.run_cmd([vpy, "-m", "pip", "show", "rollout-client"], capture_output=True, text=True,
                   env=env)
    requires = re.search(r"^Requires: (.*)$", p.stdout, re.M)
    got = sorted(x.strip() for x in requires.group(1).split(",")) if requires else None
    if got != ["numpy", "protobuf"]:
        print(f"FAIL: rollout-client requires {got}, expected numpy and protobuf only")
        ok = False
    with open(os.path.join(root, "meson.build")) as f:
        project_version = re.search(r"version:\s*'([^']+)'", f.read()).group(1)
    if r["version"] != project_version:
        print(f"FAIL: package version {r['version']} != project version {project_version}")
        ok = False
    print(f"{'PASS' if ok else 'FAIL'}: rollout-client {r['version']} installed in a venv, "
          "imported with no build tree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
