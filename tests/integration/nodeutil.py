"""Helpers for driving rollout-node in tests."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

NODE = None
PLUGIN = None


def setup_from_argv():
    """The test files are run as: test_x.py ROLLOUT_NODE PLUGIN_SO."""
    global NODE, PLUGIN
    NODE, PLUGIN = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]


def linked_with(lib):
    """Whether the node binary links a library (e.g. a sanitizer runtime)."""
    p = subprocess.run(["ldd", NODE], capture_output=True, text=True)
    return lib in p.stdout


def run(*args, timeout=240, check=True):
    """Run the node with --json --quiet; return (summary dict, completed)."""
    cmd = [NODE, "--json", "--quiet", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}: {p.stderr}")
    summary = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    return summary, p


def read_metrics(path):
    """Parse a metrics file; every line must be one JSON object."""
    out = []
    with open(path) as f:
        for line in f:
            out.append(json.loads(line))
    return out


def episodes_by_env(records):
    """{env: [(episode, return, length), ...]} in episode order."""
    by = {}
    for r in records:
        if r["type"] == "episode":
            by.setdefault(r["env"], []).append((r["episode"], r["return"], r["length"]))
    for v in by.values():
        v.sort()
    return by


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)
