#!/usr/bin/python3
"""Every relative link in the repository's Markdown files points at a file
that exists, and every #anchor at a heading of that file (GitHub's slugs);
no Markdown file cites a .md file that the repository does not have (as
results.md once cited a "DESIGN.md"); and every file or folder of the tree
a document names in `code` spans (`src/wire/conn.c`, `actors/hub/`, or a
source named from its layer as its #include names it, `wire/conn.c`) exists.

Run as: check_docs.py SOURCE_ROOT. Prints one line per broken link, exits 1
if there is any.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CITE = re.compile(r"\b([A-Za-z][\w-]*\.md)\b")
# A path in a code span: from the root's folders, or a source named as its
# #include names it (from src/ or programs/: "wire/conn.c", "node/node.h").
CODE = re.compile(r"`([^`\s]+)`")
TOP = ("src/", "actors/", "programs/", "include/", "proto/", "tests/", "bench/", "python/",
       "examples/", "docs/", ".ci/")
LAYER = re.compile(r"^(runtime|spaces|wire|policy|trajectory|envs|metrics|vecenv|node|learner|"
                   r"replay)/[\w/]+\.[ch]$")
PATH = re.compile(r"^[\w./-]+$")


def named_path_missing(root, token):
    """The tree path a code span names, if it names one that is missing;
    None for a path that exists or a span that names none."""
    token = token.rstrip(".,:;")
    if not PATH.match(token) or any(re.fullmatch(r"[A-Z_]+", part) for part in token.split("/")):
        return None  # not a path, or a pattern (tests/fuzz/corpus/NAME/)
    if token.startswith(TOP) and ("." in os.path.basename(token.rstrip("/"))
                                  or token.endswith("/")):
        return None if os.path.exists(os.path.join(root, token)) else token
    if LAYER.match(token):
        for base in ("src", "programs"):
            if os.path.exists(os.path.join(root, base, token)):
                return None
        return token
    return None


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[`*_]", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        out, fence = set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    fence = not fence
                elif not fence and line.startswith("#"):
                    out.add(slug(line.lstrip("#")))
        cache[path] = out
    return cache[path]


def main():
    root = os.path.abspath(sys.argv[1])
    files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True,
                           text=True).stdout.split()
    if not files:  # not a git checkout: walk the tree
        files = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                 for f in fs if f.endswith(".md") and "/build" not in d]
    names = {os.path.basename(f) for f in files}
    bad = []
    for rel in files:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            continue
        fence = False
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        for no, line in enumerate(lines, 1):
            if line.startswith("```"):
                fence = not fence
                continue
            if fence:
                continue
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, mailto:, ...
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if not os.path.exists(dest):
                    bad.append(f"{rel}:{no}: link to {target}: no such file")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{rel}:{no}: link to {target}: no heading with that anchor")
            for m in CODE.finditer(line):
                missing = named_path_missing(root, m.group(1))
                if missing:
                    bad.append(f"{rel}:{no}: names {missing}, which the tree lacks")
            for m in CITE.finditer(line):
                if m.group(1) not in names and not m.group(1).startswith("rollout-"):
                    bad.append(f"{rel}:{no}: cites {m.group(1)}, which the repository lacks")
    for b in bad:
        print(b)
    print(f"check_docs: {len(files)} Markdown files, {len(bad)} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
