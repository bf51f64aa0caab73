#!/usr/bin/python3
"""Pixels: the env ABI 2 `catch` plugin (84x84 uint8 observations,
examples/plugin_env/catch.c) with the random and the MLP(64,64) policy, in
one run:

  local        rollout-node alone, W workers: steps/s (the reference)
  stream-tcp   rollout-node --learner stream + rollout-learner over TCP on
               127.0.0.1: the steps/s the learner received, and the ratio
               to local
  stream-unix  the same over unix:PATH with the segments in the node's
               shared memory (every segment checked to be)
  seed-tcp, seed-unix  rollout-node --learner remote (MLP) + rollout-learner,
               a thread each, the learner's batch the node's frame, over TCP
               and over unix:PATH with the typed columns in shared memory:
               measured when the node accepts the env (else its refusal is
               reported), ratio to local MLP
  bytes/step   a stream run of a fixed number of steps through a byte-counting
               relay (TCP): the bytes the node sent per step, against what
               float32 observations alone would take (84*84*4 bytes)

The cases run in turn, round after round (--rounds), each ratio the median
of its per-round ratios. Bytes per step are counted, not timed. Writes
pixels.csv, pixels.md and pixels.png (gnuplot) into --out.

usage: bench_pixels.py BUILD_DIR [--seconds S] [--rounds N] [--envs N]
                       [--workers W] [--out DIR] [--quick]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_learners as bl  # noqa: E402  (Proc, node, finish, listening, plot style)

ROOT = bl.ROOT
F32_BYTES = 84 * 84 * 4


def catch(build):
    return os.path.join(build, "examples", "libro_env_catch.so")


def policy_args(policy):
    return ["--policy", policy]


def run_local(build, policy, envs, workers, secs):
    pr = bl.node(build, "--env", catch(build), *policy_args(policy), "--num-envs", envs,
                 "--workers", workers, "--seconds", secs)
    s = bl.finish(pr)
    if s["env_failures"]:
        raise RuntimeError(f"local: {s['env_failures']} env failures")
    return s["sps"]


def run_stream(build, policy, envs, workers, secs, unix):
    sock = f"/tmp/bench_pixels.{os.getpid()}.sock"
    if os.path.exists(sock):
        os.unlink(sock)
    pr = bl.node(build, "--env", catch(build), *policy_args(policy), "--learner", "stream",
                 "--num-envs", envs, "--workers", workers, "--seconds", secs,
                 listen=f"unix:{sock}" if unix else True)
    addr = bl.listening(pr.p)
    lr = bl.Proc([f"{build}/rollout-learner", "--connect", addr, "--json", "--quiet"],
                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = bl.finish(pr)
    ls = bl.finish(lr)
    if ls["steps"] != s["steps"]:
        raise RuntimeError(f"stream: the learner got {ls['steps']} of {s['steps']} steps")
    nd = ls["nodes"][0]
    if unix and nd.get("segments_in_memory", 0) != nd["segments"]:
        raise RuntimeError(f"stream-unix: {nd.get('segments_in_memory', 0)} of "
                           f"{nd['segments']} segments came in shared memory")
    return ls["sps"]


def try_seed(build, envs, secs, unix=False):
    """SEED mode (the learner's MLP chooses: a thread each, the learner's
    batch the node's frame), over TCP or over unix:PATH with the typed
    columns in shared memory, if the node takes an ABI 2 env: (steps/s,
    None), else (None, the node's refusal)."""
    batch = max(1, (envs + 1) // 2)
    sock = f"/tmp/bench_pixels.{os.getpid()}.sock"
    pr = bl.node(build, "--env", catch(build), "--learner", "remote", "--batch", batch,
                 "--num-envs", envs, "--workers", 0, "--seconds", secs,
                 listen=f"unix:{sock}" if unix else True)
    said = []
    for line in pr.p.stderr:
        if "listening for learners on" in line:
            break
        said.append(line.strip())
    else:
        pr.p.stdout.read()
        pr.wait()
        return None, said[-1] if said else "the node exited before listening"
    addr = line.strip().rsplit(" ", 1)[1]
    lr = bl.Proc([f"{build}/rollout-learner", "--connect", addr, "--json", "--quiet",
                  "--workers", "0", "--batch", str(batch)], stdout=subprocess.PIPE,
                 stderr=subprocess.DEVNULL, text=True)
    s = bl.finish(pr)
    bl.finish(lr)
    return s["sps"], None


class Relay:
    """A TCP relay on 127.0.0.1 that counts the bytes each way."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.down = self.up = 0
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def pipe(self, a, b, down):
        while True:
            try:
                d = a.recv(1 << 20)
            except OSError:
                d = b""
            if not d:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if down:
                self.down += len(d)
            else:
                self.up += len(d)
            b.sendall(d)

    def serve(self):
        c, _ = self.srv.accept()
        n = socket.create_connection(self.target)
        t = threading.Thread(target=self.pipe, args=(c, n, False), daemon=True)
        t.start()
        self.pipe(n, c, True)
        t.join()
        c.close()
        n.close()


def bytes_per_step(build, envs, steps):
    """A stream run of `steps` steps through Relay: node->learner bytes per
    step (frames as the node sends them over TCP)."""
    pr = bl.node(build, "--env", catch(build), "--policy", "random", "--learner", "stream",
                 "--num-envs", envs, "--workers", 1, "--steps", steps, listen=True)
    addr = bl.listening(pr.p)
    relay = Relay(addr)
    lr = bl.Proc([f"{build}/rollout-learner", "--connect", relay.addr, "--json", "--quiet"],
                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = bl.finish(pr)
    ls = bl.finish(lr)
    relay.t.join(60)
    if ls["steps"] != s["steps"]:
        raise RuntimeError(f"bytes: the learner got {ls['steps']} of {s['steps']} steps")
    return relay.down / s["steps"], relay.up / s["steps"]


def fmt_k(x):
    return f"{x / 1e3:.1f} k/s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--quick", action="store_true", help="one short round: a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 0.5, 1
    os.makedirs(a.out, exist_ok=True)
    b, e, w, s = a.build, a.envs, a.workers, a.seconds
    load0 = os.getloadavg()
    res = {}
    seed_sps, seed_why = try_seed(b, e, min(s, 1.0))  # does the node take it at all?
    for r in range(a.rounds):
        for pol in ("random", "mlp"):
            cases = [("local", lambda: run_local(b, pol, e, w, s)),
                     ("stream-tcp", lambda: run_stream(b, pol, e, w, s, False)),
                     ("stream-unix", lambda: run_stream(b, pol, e, w, s, True))]
            if pol == "mlp" and seed_sps is not None:
                cases += [("seed-tcp", lambda: try_seed(b, e, s)[0]),
                          ("seed-unix", lambda: try_seed(b, e, s, unix=True)[0])]
            for case, fn in cases:
                res.setdefault((pol, case), []).append(fn())
                print(f"round {r + 1}: {pol:6s} {case:11s} {fmt_k(res[(pol, case)][-1])}",
                      flush=True)
    down, up = bytes_per_step(b, e, e * 200)
    load1 = os.getloadavg()
    rows = []
    for pol in ("random", "mlp"):
        loc = res[(pol, "local")]
        for case in ("local", "stream-tcp", "stream-unix", "seed-tcp", "seed-unix"):
            if (pol, case) not in res:
                continue
            runs = res[(pol, case)]
            ratio = None if case == "local" else statistics.median(
                x / y for x, y in zip(runs, loc))
            rows.append((f"{pol} {case}", statistics.median(runs), ratio))

    with open(os.path.join(a.out, "pixels.csv"), "w") as f:
        f.write("case,sps,ratio_to_local\n")
        for name, sps, ratio in rows:
            f.write(f"{name},{sps:.0f},{'' if ratio is None else f'{ratio:.3f}'}\n")
        f.write(f"bytes_per_step_node_to_learner,{down:.1f},\n")
        f.write(f"bytes_per_step_learner_to_node,{up:.2f},\n")
        f.write(f"float32_obs_bytes_per_step,{F32_BYTES},\n")
    with open(os.path.join(a.out, "pixels.md"), "w") as f:
        f.write(f"Measured by `bench/bench_pixels.py` ({a.rounds} rounds of {s:g} s; {e} catch "
                f"envs (84x84 uint8), {w} worker(s); load average {load0[0]:.1f} at the start, "
                f"{load1[0]:.1f} at the end; {os.cpu_count()} CPUs). Stream cases: the steps/s "
                "rollout-learner received; ratio: median of the per-round ratios to local "
                "with the same policy.\n\n")
        f.write("| case | steps/s (median) | ratio to local |\n|---|---|---|\n")
        for name, sps, ratio in rows:
            f.write(f"| {name} | {fmt_k(sps)} | "
                    f"{'' if ratio is None else f'{ratio:.2f}'} |\n")
        f.write(f"\nBytes on the wire per step (stream over TCP, {e * 200} steps through a "
                f"counting relay): node to learner {down:.0f} B, learner to node {up:.2f} B; "
                f"float32 observations alone would be {F32_BYTES} B per step "
                f"({down / F32_BYTES:.2f}x of that). Over unix:PATH the segments stay in "
                "shared memory and the socket carries only references to them.\n")
        if seed_sps is None:
            f.write(f"\nSEED mode (`--learner remote`) not measured: the node refused the env: "
                    f"`{seed_why}`\n")
    plot(a.out, rows)
    print(open(os.path.join(a.out, "pixels.md")).read())


def plot(out, rows):
    """Steps/s of every case (gnuplot), as bench_learners.py plots."""
    bl.bar_plot(out, "pixels", "catch (84x84 uint8): steps/s per case (medians)", "k steps/s",
                [(name, sps / 1e3) for name, sps, _ratio in rows], prog="bench_pixels")


if __name__ == "__main__":
    main()
