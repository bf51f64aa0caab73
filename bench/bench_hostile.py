#!/usr/bin/python3
"""A good learner's rate and the node's memory under 63 hostile connections,
in one run (docs/benchmarks.md#hardening).

One node (--learner remote, 256 CartPole envs, 1 worker) and one
rollout-learner run throughout. Quiet and attack windows alternate
(--repeats times); in an attack window 63 connections, from one thread of
this process, each once a second connect and, a third of them each, send
the length prefix of a 15 MiB frame and 1 MiB of its body; send a whole
16 MiB frame before any hello (Observations of packed bools: it decodes
into four times its size); or send nothing. Each holds its connection until
the node closes it or the window ends. The node's steps/s (from its --metrics
throughput lines) in the attack windows over the quiet ones is the rate
ratio (medians); the RSS growth is the highest VmRSS during any attack
minus the VmRSS just before it.

usage: bench_hostile.py BUILD_DIR [--window S] [--repeats N] [--csv FILE]
"""
import argparse
import json
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HOSTILE = 63
FRAME = 15 << 20
SENT = 1 << 20


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Metrics:
    def __init__(self, path):
        self.path, self.pos, self.last = path, 0, None

    def latest(self):
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return self.last
        cut = data.rfind("\n")
        if cut >= 0:
            self.pos += cut + 1
            for line in data[:cut].splitlines():
                r = json.loads(line)
                if r.get("type") == "throughput":
                    self.last = (r["t"], r["steps"])
        return self.last


def window_rate(m, seconds, during=None):
    """steps/s over a window, from the node's own throughput lines."""
    start = m.latest()
    end_at = time.monotonic() + seconds
    while time.monotonic() < end_at:
        if during:
            during()
        else:
            time.sleep(0.05)
    end = m.latest()
    return (end[1] - start[1]) / (end[0] - start[0]) if end[0] > start[0] else 0.0


def full_frame():
    """Frame{observations{terminated: 16 MiB of packed bools}}, framed."""
    n = (16 << 20) - 64
    inner = b"\x32" + varint(n) + b"\x01" * n  # field 6, packed
    obs = b"\x1a" + varint(len(inner)) + inner  # Frame field 3
    return varint(len(obs)) + obs


def attack(host, port, seconds, pid):
    """63 connections, each once a second; returns the peak RSS seen."""
    sel = selectors.DefaultSelector()
    payloads = [varint(FRAME) + b"\0" * SENT, full_frame(), b""]
    next_at = [0.0] * HOSTILE
    socks = [None] * HOSTILE
    peak = rss_kib(pid)
    end_at = time.monotonic() + seconds
    while time.monotonic() < end_at:
        now = time.monotonic()
        for i in range(HOSTILE):
            if socks[i] is None and now >= next_at[i]:
                s = socket.socket()
                s.setblocking(True)
                s.settimeout(2.0)
                try:
                    s.connect((host, port))
                    s.sendall(payloads[i % 3])
                except OSError:
                    pass  # refused from its prefix: closed while we sent
                s.setblocking(False)
                socks[i] = s
                sel.register(s, selectors.EVENT_READ, i)
                next_at[i] = now + 1.0
        for key, _ in sel.select(timeout=0.05):
            i = key.data
            try:
                data = key.fileobj.recv(1 << 16)
            except OSError:
                data = b""
            if not data:  # closed by the node
                sel.unregister(key.fileobj)
                key.fileobj.close()
                socks[i] = None
        peak = max(peak, rss_kib(pid))
    for s in socks:
        if s is not None:
            sel.unregister(s)
            s.close()
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--csv")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ro_bench_hostile_")
    mpath = os.path.join(tmp, "m.jsonl")
    # The node logs a line per stranger it closes: to a file, never to a
    # pipe nobody drains (a full pipe would stall its loop, not the attack).
    node_log = os.path.join(tmp, "node.log")
    node = subprocess.Popen([f"{a.build}/rollout-node", "--learner", "remote", "--listen",
                             "127.0.0.1:0", "--num-envs", "256", "--workers", "1",
                             "--seconds", "0", "--metrics", mpath, "--metrics-interval", "0.1",
                             "--quiet", "--json"],
                            stdout=subprocess.PIPE, stderr=open(node_log, "w"), text=True)
    addr = None
    while addr is None:
        with open(node_log) as f:
            for line in f:
                if "listening for learners on" in line:
                    addr = line.split()[-1]
        time.sleep(0.05)
    host, port = addr.rsplit(":", 1)
    learner_log = open(os.path.join(tmp, "learner.log"), "w")
    learner = subprocess.Popen([f"{a.build}/rollout-learner", "--connect", addr, "--quiet"],
                               stdout=subprocess.DEVNULL, stderr=learner_log)
    try:
        return measure(a, tmp, node, node_log, learner, host, port, Metrics(mpath))
    finally:  # never leave a node or a learner behind, even on an error
        for p in (learner, node):
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def measure(a, tmp, node, node_log, learner, host, port, m):
    while not m.latest() or m.latest()[1] == 0:
        time.sleep(0.1)
    window_rate(m, a.window)  # warm-up
    quiet, hostile, growth = [], [], []
    for _ in range(a.repeats):
        quiet.append(window_rate(m, a.window))
        before = rss_kib(node.pid)
        start = m.latest()
        peak = attack(host, int(port), a.window, node.pid)
        end = m.latest()
        hostile.append((end[1] - start[1]) / (end[0] - start[0]) if end[0] > start[0] else 0.0)
        growth.append(peak - before)
    alive = learner.poll() is None and node.poll() is None
    learner.terminate()
    node.terminate()
    node.communicate(timeout=60)
    with open(node_log) as f:
        node_err = f.read()
    learner.wait(timeout=60)
    if not alive:
        with open(os.path.join(tmp, "learner.log")) as f:
            print("a process ended early; learner:", f.read()[-2000:], "node:", node_err[-2000:],
                  file=sys.stderr)
    q, h = statistics.median(quiet), statistics.median(hostile)
    print(f"quiet steps/s (median of {a.repeats}): {q:.0f}")
    print(f"under {HOSTILE} hostile connections: {h:.0f}")
    print(f"rate ratio: {h / q:.3f} (target >= 0.9)")
    print(f"RSS growth during attacks: max {max(growth)} KiB (target < 65536)")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("window,quiet_sps,hostile_sps,rss_growth_kib\n")
            for i in range(a.repeats):
                f.write(f"{i},{quiet[i]:.0f},{hostile[i]:.0f},{growth[i]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
