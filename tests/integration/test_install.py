"""`meson install --destdir` puts everything a user needs in place (issue
16): the three programs, <rollout/env.h>, rollout.pc, the .proto, the man
pages and the licence; a plugin builds against the installed tree with
`pkg-config --cflags rollout` alone, and the installed node runs it.

Run as: test_install.py SOURCE_ROOT BUILD_DIR. The build is installed with
--no-rebuild (meson test has built it) into a scratch directory.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import unittest

import nodeutil as nu

ROOT, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
PROGRAMS = ("rollout-node", "rollout-learner", "rollout-replay")


def meson_command():
    """How this build runs meson (meson sets MESONINTROSPECT for tests)."""
    intro = os.environ.get("MESONINTROSPECT", "")
    if intro.endswith(" introspect"):
        return intro[: -len(" introspect")].split()
    found = shutil.which("meson")
    return [found] if found else None


def project_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        for line in f:
            if line.strip().startswith("version:"):
                return line.split("'")[1]
    return None


class Install(nu.TempDirCase):
    def setUp(self):
        super().setUp()
        meson = meson_command()
        if meson is None:
            self.fail("meson not found (neither MESONINTROSPECT nor meson on PATH)")
        self.dest = self.path("dest")
        p = nu.run_cmd([*meson, "install", "-C", BUILD, "--no-rebuild", "--destdir", self.dest],
                       capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        bins = glob.glob(os.path.join(self.dest, "**", "bin", "rollout-node"), recursive=True)
        self.assertEqual(len(bins), 1, f"rollout-node installed {len(bins)} times")
        self.prefix = os.path.dirname(os.path.dirname(bins[0]))

    def find(self, pattern):
        hits = glob.glob(os.path.join(self.prefix, pattern), recursive=True)
        self.assertEqual(len(hits), 1, f"{pattern}: {hits}")
        return hits[0]

    def test_tree(self):
        for prog in PROGRAMS:
            self.assertTrue(os.access(self.find(f"bin/{prog}"), os.X_OK))
            man = self.find(f"share/man/man1/{prog}.1")
            with open(man) as f:
                text = f.read()
            self.assertIn(f".TH {prog.upper()} \"1\"", text)
            self.assertIn("\\-\\-help", text)  # the flag table made it in
        with open(self.find("share/man/man1/rollout-node.1")) as f:
            self.assertIn("\\fB\\-\\-num\\-envs\\fR", f.read())
        with open(self.find("include/rollout/env.h")) as f:
            self.assertIn("RO_ENV_ABI_VERSION", f.read())
        with open(self.find("share/rollout/rollout.proto")) as f:
            self.assertIn("message Observations", f.read())
        self.find("share/doc/rollout/LICENSE")
        self.find("lib*/**/pkgconfig/rollout.pc")
        # Nothing built only for tests or benchmarks is installed.
        installed = {os.path.basename(p) for p in glob.glob(os.path.join(self.prefix, "bin", "*"))}
        self.assertEqual(installed, set(PROGRAMS))

    def test_plugin_builds_with_pkg_config(self):
        if not shutil.which("pkg-config"):
            self.fail("pkg-config not found (.ci/install-deps installs it)")
        pcdir = os.path.dirname(self.find("lib*/**/pkgconfig/rollout.pc"))
        env = {**os.environ, "PKG_CONFIG_PATH": pcdir, "PKG_CONFIG_SYSROOT_DIR": self.dest,
               "PKG_CONFIG_LIBDIR": pcdir}

        def pkg(*args):
            p = subprocess.run(["pkg-config", *args, "rollout"], capture_output=True, text=True,
                               env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stdout.strip()
        cflags = pkg("--cflags")
        self.assertEqual(cflags, f"-I{os.path.join(self.prefix, 'include')}")
        self.assertEqual(pkg("--modversion"), project_version())
        self.assertEqual(pkg("--variable=env_abi"), "1")
        self.assertTrue(pkg("--variable=protodir").endswith("share/rollout"))
        # The example plugin, copied out of the tree so that only the
        # installed header can be found.
        src = self.path("myenv.c")
        shutil.copy(os.path.join(ROOT, "examples", "plugin_env", "mountaincar.c"), src)
        so = self.path("libmyenv.so")
        cc = os.environ.get("CC", "cc")
        p = nu.run_cmd([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", *cflags.split(), src,
                        "-o", so, "-lm"], capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        node = self.find("bin/rollout-node")
        p = nu.run_cmd([node, "--env", so, "--policy", "random", "--num-envs", 4, "--steps",
                        4 * 400, "--json", "--quiet"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(s["steps"], 1600)
        self.assertGreater(s["episodes"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
