"""The tree's layering, checked from its #include lines (docs/architecture.md).

Layers, lowest first: src/runtime; src/spaces; src/wire; src/policy, src/trajectory and
src/envs (peers: none includes another; a folder inside a layer's folder, as
src/envs/mujoco, is part of that layer); src/metrics (its event files are
framed with trajectory's CRC-32C); src/vecenv and actors/; the programs
programs/node, programs/learner and programs/replay, the top layer (none
includes another, and nothing below includes from programs/). A file may
include its own folder and any lower layer, never a higher one or a peer. And no two modules
(a .c with its .h) may depend on each other, directly or around a longer
circle. Also: no C file in the tree is over 650 lines, and the root holds only
the files of ROOT_FILES.

With a build directory, the calls are checked too: every object file's
undefined symbols are matched with the objects that define them (nm), which
finds circles that go through a shared header (two files calling each other
through declarations in a third).

Run as: check_layers.py SOURCE_ROOT [BUILD_DIR]. Prints every violation;
exits 1 if any.
"""
import os
import re
import subprocess
import sys

RANK = {
    "src/runtime": 0,
    "src/spaces": 0.5,
    "src/wire": 1,
    "src/policy": 2,
    "src/trajectory": 2,
    "src/envs": 2,
    "src/metrics": 2.5,
    "src/vecenv": 3,
    "actors": 3,
    "programs/node": 4,
    "programs/learner": 4,
    "programs/replay": 4,
}
# Where an include's name is looked for: the build's include path (the
# root, src/, and programs/ for what builds on the programs).
INCLUDE_BASES = ("", "src", "programs")
MAX_LINES = 650
# The files the repository's root holds on purpose; anything else tracked
# there (a stray log, a forgotten output) is a problem.
ROOT_FILES = {".clang-format", ".gitignore", "LICENSE", "README.md", "meson.build",
              "meson_options.txt", "pyproject.toml"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """The layer a file is in: its folder, or the nearest enclosing folder
    that is a layer (src/envs/mujoco/ is part of src/envs)."""
    d = os.path.dirname(path)
    while d and d not in RANK:
        d = os.path.dirname(d)
    return d if d else os.path.dirname(path)


def resolve(root, inc):
    """The tree path an include names, or None for system/generated headers."""
    for base in INCLUDE_BASES:
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def sources(root):
    out = []
    for top in ("src", "actors", "programs"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def module(path):
    return os.path.splitext(path)[0]


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def call_graph(root, build, srcs):
    """{source: {source it calls}} from the objects' symbol tables. meson
    names an object after its source's path from the folder of the
    meson.build that lists it, '/' as '_' (BUILD/programs/node/X.p/run.c.o
    for programs/node/run.c; BUILD/X.p/src_wire_frame.c.o for src/wire/frame.c)."""
    by_stem = {}
    for p in srcs:
        if p.endswith(".c"):
            parts = p.split("/")
            for i in range(len(parts)):
                by_stem.setdefault(("/".join(parts[:i]), "_".join(parts[i:])), p)
    objects = {}
    for d, _, files in os.walk(build):
        folder = os.path.dirname(os.path.relpath(d, build))
        for f in files:
            key = (folder, f[:-2])
            if f.endswith(".c.o") and key in by_stem:
                objects.setdefault(by_stem[key], os.path.join(d, f))
    defined, used = {}, {}
    for src, obj in objects.items():
        out = subprocess.run(["nm", obj], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = src
            elif len(parts) == 2 and parts[0] == "U":
                used.setdefault(src, set()).add(parts[1])
    graph = {}
    for src, syms in used.items():
        for sym in syms:
            dst = defined.get(sym)
            if dst and dst != src:
                graph.setdefault(module(src), set()).add(module(dst))
    return graph, len(objects)


def stray_root_files(root):
    """Tracked files at the root outside ROOT_FILES (git ls-files; none
    when the tree is not a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return []
    return [f"{f}: a file at the repository's root that is not on its list "
            "(tests/check_layers.py ROOT_FILES)" for f in out if f and "/" not in f
            and f not in ROOT_FILES]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    graph = {}
    for path in sources(root):
        with open(os.path.join(root, path)) as f:
            text = f.read()
        lines = text.count("\n")
        if path.endswith(".c") and lines > MAX_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_LINES})")
        src_folder = folder_of(path)
        if src_folder not in RANK:
            problems.append(f"{path}: in no layer (add its folder to tests/check_layers.py)")
            continue
        for inc in INCLUDE.findall(text):
            target = resolve(root, inc)
            if target is None or target.startswith("include/"):
                continue  # system, generated, or the installed env ABI
            dst_folder = folder_of(target)
            if module(target) != module(path):
                graph.setdefault(module(path), set()).add(module(target))
            if dst_folder == src_folder or dst_folder not in RANK:
                continue
            a, b = RANK[src_folder], RANK[dst_folder]
            if b > a:
                problems.append(f"{path} includes {inc}: {dst_folder} is above {src_folder}")
            elif b == a:
                problems.append(f"{path} includes {inc}: {dst_folder} is a peer of {src_folder}")
    for comp in cycles(graph):
        problems.append("modules that include each other in a circle: " + " -> ".join(comp))
    if len(sys.argv) > 2:
        calls, nobj = call_graph(root, sys.argv[2], sources(root))
        if nobj == 0:
            problems.append(f"no object files of the tree under {sys.argv[2]}")
        for src, dsts in sorted(calls.items()):
            for dst in sorted(dsts):
                a, b = RANK.get(folder_of(src)), RANK.get(folder_of(dst))
                if a is not None and b is not None and b > a:
                    problems.append(f"{src}.c calls into {dst}.c, a higher layer")
        for comp in cycles(calls):
            problems.append("files that call each other in a circle: " + " -> ".join(comp))
    problems += stray_root_files(root)
    for p in problems:
        print(p)
    print(f"{len(sources(root))} files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
