#!/usr/bin/python3
"""Learners against the node's own speed, in one run (issues: learners at
local speed; fast by default). Every case runs CartPole with an MLP(64,64)
policy; the cases run in turn, round after round (--rounds), and each ratio
is the median of its per-round ratios, so that a figure and its reference
are measured minutes apart at most on a machine whose speed drifts.

The default-flag cases (docs/operations.md "What the defaults do"): nothing
but the mode, the envs and the address, as the README shows them:

  seed-256     rollout-node --learner remote --num-envs 256 --listen
               127.0.0.1:P + rollout-learner --connect 127.0.0.1:P, against
               local-256 (rollout-node --num-envs 256)
  seed-2048    the same at 2048 envs, against local-2048
  stream->C    rollout-node --learner stream --num-envs N --listen 127.0.0.1:P
               + rollout-learner --connect 127.0.0.1:P: the transitions the
               learner received per second, against local (N envs)
  *-netns      the same three with the node and the learner in two network
               namespaces joined by a veth pair (as root, with iproute2; the
               learner reaches the node's private socket file, which refuses
               it: it stays on TCP), against *-netns-before: the defaults of
               before the same-host upgrade and threads chosen for the work,
               spelled out (node --workers <CPUs> --spin-us 0, learner
               --workers 1 --spin-us 0 --no-upgrade), in the same namespaces

The recipe's cases, flags spelled out:

  local        rollout-node, W workers (the reference)
  stream->C-unix  rollout-node --learner stream (W workers) + rollout-learner
               on the same cores, over a Unix-domain socket: the transitions the
               learner received per second, read in the node's shared memory
  stream->C-sock, stream->C-tcp  the same with the segments' bytes on the
               socket (--no-shared-memory), and over TCP on 127.0.0.1
               (--no-upgrade)
  stream->py   the same node + rollout_client.Stream in Python (received/s)
  seed-256-unix  --learner remote, 256 envs: node --workers 0 + rollout-learner
               --workers 0 (one thread each: a core's worth each; their loops
               spin while an answer is due, --spin-us 50), the learner's
               batch the node's frame (128: two frames in flight), against
               local 256 envs on 2 workers, over a Unix-domain socket (--listen unix:PATH),
               observations and actions in shared memory (every frame
               checked to be), the node's frames in the frame ring while
               the learner is awake
  seed-256-unix-noring  the same with every frame on the socket
               (rollout-learner --no-ring)
  seed-256-unix-bytes  the same with the columns in the frames
               (rollout-learner --no-shared-memory)
  seed-256-unix-nospin  seed-256-unix with --spin-us 0 on both sides
  seed-2048-unix(-bytes) the same at 2048 envs, batch 256
  bound-*      bench_roundtrip: SEED-sized frames bounced between two
               processes with every batch in flight and no work: the most
               steps/s a SEED node could reach on this machine then
  vecenv-*     rollout_client.VecEnv on a remote node (1024 envs) at unix:PATH,
               in shared memory (bench_vecenv.py --unix --workers 0): random
               actions, and a torch MLP(64,64) policy against that torch
               forward pass alone, through step() and through send()/recv()
               with two batches in flight (the node at --spin-us 2000)
               (bench/bench_vecenv.py measures them; this script runs it when
               it is there)

Each case also reports the CPU seconds its processes used per million
steps (from their rusage), which the machine's load disturbs less than
steps/s. Writes learners.csv, learners.md and learners.png (gnuplot) into
--out.

usage: bench_learners.py BUILD_DIR [--seconds S] [--rounds N] [--out DIR]
                         [--envs N] [--workers W] [--only LIST] [--quick]
"""
import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Targets from the issue: a ratio against the reference, or an absolute rate.
TARGETS = {
    "seed-256": ("ratio", 0.5),
    "seed-2048": ("ratio", 0.6),
    "stream->C": ("ratio", 0.85),
    "seed-256-netns": ("ratio", 1.0),
    "seed-2048-netns": ("ratio", 1.0),
    "stream->C-netns": ("ratio", 1.0),
    "stream->C-unix": ("ratio", 0.9),
    "stream->py": ("rate", 5e6),
    "seed-256-unix": ("ratio", 0.5),
    "seed-2048-unix": ("ratio", 0.85),
    "vecenv-random": ("rate", 3e6),
    "vecenv-mlp": ("ratio", 0.9),
    "vecenv-mlp-async": ("ratio", 0.9),
}


class Proc:
    """A child process whose rusage we collect when it exits."""

    def __init__(self, argv, **kw):
        self.p = subprocess.Popen(argv, **kw)
        self.cpu = None

    def wait(self, timeout=300):
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(self.p.pid, os.WNOHANG)
            if pid:
                self.p.returncode = os.waitstatus_to_exitcode(status)
                self.cpu = ru.ru_utime + ru.ru_stime
                return self.p.returncode
            if time.monotonic() > deadline:
                self.p.kill()
                raise RuntimeError(f"{self.p.args[0]} did not finish")
            time.sleep(0.02)


def last_json(text):
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON summary in: {text[-500:]!r}")
    return json.loads(lines[-1])


def listening(p):
    for line in p.stderr:
        if "listening for learners on" in line:
            return line.strip().rsplit(" ", 1)[1]
    raise RuntimeError("the node did not start")


def node(build, *args, listen=False):
    argv = [f"{build}/rollout-node", "--json", "--quiet", *map(str, args)]
    if listen:
        argv += ["--listen", "127.0.0.1:0" if listen is True else listen]
    return Proc(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(pr):
    out = pr.p.stdout.read()
    pr.wait()
    return last_json(out)


def run_local(build, envs, workers, secs, extra=()):
    pr = node(build, "--num-envs", envs, "--workers", workers, "--seconds", secs, *extra)
    s = finish(pr)
    return s["sps"], pr.cpu / s["steps"] * 1e9


def run_stream_c(build, envs, workers, secs, unix=False, learner_args=(), node_args=()):
    sock = f"/tmp/bench_learners.{os.getpid()}.sock"
    if unix and os.path.exists(sock):
        os.unlink(sock)
    pr = node(build, "--learner", "stream", "--num-envs", envs, "--workers", workers,
              "--seconds", secs, *node_args, listen=f"unix:{sock}" if unix else True)
    addr = listening(pr.p)
    lr = Proc([f"{build}/rollout-learner", "--connect", addr, "--json", "--quiet", *learner_args],
              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = finish(pr)
    ls = finish(lr)
    if ls["steps"] != s["steps"]:
        raise RuntimeError(f"stream->C: the learner got {ls['steps']} of {s['steps']} steps")
    shared = ls["nodes"][0].get("segments_in_memory", 0)
    if unix and "--no-shared-memory" not in learner_args and shared != ls["nodes"][0]["segments"]:
        raise RuntimeError(f"stream->C: {shared} of {ls['nodes'][0]['segments']} segments "
                           "came in shared memory")
    return ls["sps"], (pr.cpu + lr.cpu) / s["steps"] * 1e9


PY_STREAM = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import rollout_client as rc
n, t0 = 0, None
with rc.Stream([sys.argv[1]]) as st:
    while True:
        try:
            b = st.recv(timeout=120)
        except rc.ConnectionClosed:
            break
        if t0 is None:
            t0 = time.monotonic()
        n += b.num_transitions
print(n, n / (time.monotonic() - t0))
"""


def run_stream_py(build, envs, workers, secs):
    pr = node(build, "--learner", "stream", "--num-envs", envs, "--workers", workers,
              "--seconds", secs, listen=True)
    addr = listening(pr.p)
    env = dict(os.environ, ROLLOUT_PROTO_OUT=f"{build}/proto")
    py = Proc([sys.executable, "-c", PY_STREAM, addr, os.path.join(ROOT, "python")],
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    s = finish(pr)
    out = py.p.stdout.read()
    err = py.p.stderr.read()
    py.wait()
    if py.p.returncode != 0:
        raise RuntimeError(f"stream->py failed: {err[-500:]}")
    got, rate = out.split()
    if int(got) != s["steps"]:
        raise RuntimeError(f"stream->py: Python got {got} of {s['steps']} steps")
    return float(rate), (pr.cpu + py.cpu) / s["steps"] * 1e9


def run_roundtrip(build, envs, batch, transport, secs):
    """bench_roundtrip: frames of SEED's size bounced between two processes,
    every env's batch in flight, nothing else done: the steps/s no SEED node
    can pass on this machine at that moment."""
    p = subprocess.run([f"{build}/bench/bench_roundtrip", "--envs", str(envs), "--batch",
                        str(batch), "--seconds", str(min(secs, 1.0))],
                       capture_output=True, text=True, check=True)
    for line in p.stdout.splitlines():
        r = json.loads(line)
        if r["transport"] == transport:
            return r["bound_sps"], float("nan")
    raise RuntimeError(f"bench_roundtrip printed no {transport} line")


def run_seed(build, envs, batch, secs, unix=False, learner_args=(), spin=None):
    """A SEED node and rollout-learner, one thread each (--workers 0: the
    node's envs and the learner's forward passes on their loop threads),
    frames of `batch` envs and the learner's batch the same (so that frames
    stay in flight while it computes); over unix:PATH the columns are in
    shared memory unless learner_args say --no-shared-memory. spin: both
    sides' --spin-us (None: their default)."""
    sock = f"/tmp/bench_learners.{os.getpid()}.sock"
    spin_args = () if spin is None else ("--spin-us", spin)
    pr = node(build, "--learner", "remote", "--num-envs", envs, "--workers", 0, "--batch", batch,
              "--seconds", secs, *spin_args, listen=f"unix:{sock}" if unix else True)
    addr = listening(pr.p)
    lr = Proc([f"{build}/rollout-learner", "--connect", addr, "--json", "--quiet",
               "--workers", "0", "--batch", str(batch), *map(str, spin_args), *learner_args],
              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = finish(pr)
    ls = finish(lr)["nodes"][0]
    want = ls["frames"] if unix and "--no-shared-memory" not in learner_args else 0
    if ls["frames_in_memory"] != want:
        raise RuntimeError(f"seed: {ls['frames_in_memory']} of {ls['frames']} frames came in "
                           f"shared memory, expected {want}")
    if want and "--no-ring" not in learner_args:
        print(f"  {ls['frames_in_ring'] / max(ls['frames'], 1):.0%} of the frames came in the ring",
              flush=True)
    return s["sps"], (pr.cpu + lr.cpu) / s["steps"] * 1e9


class Netns:
    """Two network namespaces joined by a veth pair, for the cross-namespace
    cases: the node's (10.N.1.2) and the learner's (10.N.1.1). Deleted at
    exit. why says why there are none (not root, no iproute2)."""

    def __init__(self):
        self.ok, self.why = False, ""
        self.ip = shutil.which("ip") or ("/usr/sbin/ip" if os.access("/usr/sbin/ip", os.X_OK)
                                         else None)
        pid = os.getpid()
        self.node_ns, self.learner_ns = f"robn{pid}", f"robl{pid}"
        net = 1 + pid % 250
        self.node_ip, learner_ip = f"10.{net}.1.2", f"10.{net}.1.1"
        if self.ip is None:
            self.why = "iproute2's ip is not installed"
            return
        steps = [["netns", "add", self.node_ns], ["netns", "add", self.learner_ns],
                 ["-n", self.learner_ns, "link", "add", "v0", "type", "veth", "peer", "name",
                  "v0", "netns", self.node_ns],
                 ["-n", self.learner_ns, "addr", "add", f"{learner_ip}/24", "dev", "v0"],
                 ["-n", self.node_ns, "addr", "add", f"{self.node_ip}/24", "dev", "v0"]]
        for ns in (self.learner_ns, self.node_ns):
            steps += [["-n", ns, "link", "set", "v0", "up"], ["-n", ns, "link", "set", "lo", "up"]]
        atexit.register(self.delete)
        for st in steps:
            p = subprocess.run([self.ip, *st], capture_output=True, text=True)
            if p.returncode != 0:
                self.why = f"ip {' '.join(st)}: {p.stderr.strip()}"
                return
        self.token = f"/tmp/bench_learners.{pid}.token"
        with open(os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("bench-netns\n")
        self.ok = True

    def prefix(self, ns):
        return [self.ip, "netns", "exec", ns]

    def delete(self):
        for ns in (self.node_ns, self.learner_ns):
            subprocess.run([self.ip, "netns", "del", ns], capture_output=True)
        if self.ok and os.path.exists(self.token):
            os.unlink(self.token)


NETNS = None


def run_default(build, mode, envs, secs, netns=False, before=False):
    """A default-flag case: node --learner MODE --num-envs ENVS --listen
    127.0.0.1:0 and rollout-learner --connect ADDR, nothing else. netns: the
    node and the learner in two network namespaces (a token, which any
    non-loopback listener needs, on both); before: the defaults of before
    the same-host upgrade and the threads chosen, spelled out."""
    node_args = ["--learner", mode, "--num-envs", envs, "--seconds", secs]
    learner_args = []
    if before:
        if mode == "remote":
            node_args += ["--workers", os.cpu_count(), "--spin-us", 0]
        learner_args += ["--workers", 1, "--spin-us", 0, "--no-upgrade"]
    node_pre = learner_pre = []
    listen = True
    if netns:
        node_pre, learner_pre = NETNS.prefix(NETNS.node_ns), NETNS.prefix(NETNS.learner_ns)
        listen = f"{NETNS.node_ip}:0"
        node_args += ["--token-file", NETNS.token]
        learner_args += ["--token-file", NETNS.token]
    argv = [*node_pre, f"{build}/rollout-node", "--json", "--quiet", *map(str, node_args),
            "--listen", "127.0.0.1:0" if listen is True else listen]
    pr = Proc(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    addr = listening(pr.p)
    lr = Proc([*learner_pre, f"{build}/rollout-learner", "--connect", addr, "--json", "--quiet",
               *map(str, learner_args)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
              text=True)
    s = finish(pr)
    ls = finish(lr)
    ln = ls["nodes"][0]
    want_up = not netns and not before
    if ln["upgraded"] != want_up:
        raise RuntimeError(f"{mode} {envs}: upgraded {ln['upgraded']}, expected {want_up}")
    if mode == "stream":
        if ls["steps"] != s["steps"]:
            raise RuntimeError(f"stream: the learner got {ls['steps']} of {s['steps']} steps")
        got, shared = ln["segments"], ln["segments_in_memory"]
        sps = ls["sps"]
    else:
        got, shared = ln["frames"], ln["frames_in_memory"]
        sps = s["sps"]
    if got == 0 or shared != (got if want_up else 0):
        raise RuntimeError(f"{mode} {envs}: {shared} of {got} in shared memory")
    return sps, (pr.cpu + lr.cpu) / s["steps"] * 1e9


def vecenv_cases(build, secs, rounds, out):
    """bench_vecenv.py's figures (random, MLP, forward alone), if present."""
    script = os.path.join(HERE, "bench_vecenv.py")
    if not os.path.exists(script):
        return {}
    csv = os.path.join(out, "vecenv.csv")
    # Over unix:PATH, in shared memory, the node's loop stepping the envs:
    # the same-host path (bench_vecenv.py alone runs TCP too).
    p = subprocess.run([sys.executable, script, build, "--seconds", str(secs),
                        "--repeats", str(rounds), "--csv", csv, "--unix", "--workers", "0",
                        # The async node spins across the policy's ~1 ms turn
                        # (docs/python.md): its answers then wake no one.
                        "--async-spin-us", "2000"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"bench_vecenv.py failed: {p.stderr[-800:]}", file=sys.stderr)
        return {}
    import csv as csvmod
    with open(csv) as f:
        rows = {r["case"]: r for r in csvmod.DictReader(f)}
    return rows


def fmt_rate(x):
    return f"{x / 1e6:.2f} M/s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--envs", type=int, default=1024, help="envs of the local/stream cases")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--quick", action="store_true", help="one short round: a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 0.5, 1
    os.makedirs(a.out, exist_ok=True)
    b, s, w, e = a.build, a.seconds, a.workers, a.envs
    global NETNS
    NETNS = Netns()
    if not NETNS.ok:
        print(f"bench_learners: no cross-namespace cases: {NETNS.why}", file=sys.stderr)
    cases = {
        # The defaults: what the README's commands do.
        "local": lambda: run_local(b, e, w, s),
        "stream->C": lambda: run_default(b, "stream", e, s),
        "local-256": lambda: run_local(b, 256, 2, s),
        "seed-256": lambda: run_default(b, "remote", 256, s),
        "local-2048": lambda: run_local(b, 2048, 2, s),
        "seed-2048": lambda: run_default(b, "remote", 2048, s),
    }
    if NETNS.ok:
        for name, mode, envs in (("seed-256", "remote", 256), ("seed-2048", "remote", 2048),
                                 ("stream->C", "stream", e)):
            cases[name + "-netns-before"] = (
                lambda mode=mode, envs=envs: run_default(b, mode, envs, s, True, True))
            cases[name + "-netns"] = (
                lambda mode=mode, envs=envs: run_default(b, mode, envs, s, True))
    cases.update({
        # The recipe, flags spelled out.
        "stream->C-unix": lambda: run_stream_c(b, e, w, s, unix=True),
        "stream->C-sock": lambda: run_stream_c(b, e, w, s, True, ("--no-shared-memory",)),
        "stream->C-tcp": lambda: run_stream_c(b, e, w, s, learner_args=("--no-upgrade",)),
        "stream->py": lambda: run_stream_py(b, e, w, s),
        "seed-256-unix": lambda: run_seed(b, 256, 128, s, unix=True),
        "seed-256-unix-noring": lambda: run_seed(b, 256, 128, s, True, ("--no-ring",)),
        "seed-256-unix-bytes": lambda: run_seed(b, 256, 128, s, True, ("--no-shared-memory",)),
        "seed-256-unix-nospin": lambda: run_seed(b, 256, 128, s, unix=True, spin=0),
        "bound-256-tcp": lambda: run_roundtrip(b, 256, 128, "tcp", s),
        "bound-256-unix": lambda: run_roundtrip(b, 256, 128, "unix", s),
        "local-2048-b256": lambda: run_local(b, 2048, 2, s, ("--batch", 256)),
        "seed-2048-unix": lambda: run_seed(b, 2048, 256, s, unix=True),
        "seed-2048-unix-bytes": lambda: run_seed(b, 2048, 256, s, True, ("--no-shared-memory",)),
        "bound-2048-tcp": lambda: run_roundtrip(b, 2048, 256, "tcp", s),
    })
    refs = {"stream->C": "local", "stream->C-unix": "local", "stream->C-sock": "local",
            "stream->C-tcp": "local", "seed-256": "local-256", "seed-256-unix": "local-256",
            "seed-256-unix-noring": "local-256", "seed-256-unix-bytes": "local-256",
            "seed-256-unix-nospin": "local-256", "bound-256-tcp": "local-256",
            "bound-256-unix": "local-256", "seed-2048": "local-2048",
            "seed-2048-unix": "local-2048-b256", "seed-2048-unix-bytes": "local-2048-b256",
            "bound-2048-tcp": "local-2048-b256",
            "seed-256-netns": "seed-256-netns-before", "seed-2048-netns": "seed-2048-netns-before",
            "stream->C-netns": "stream->C-netns-before"}
    only = set(filter(None, a.only.split(",")))
    if only:
        need = only | {refs[c] for c in only if c in refs}
        cases = {k: v for k, v in cases.items() if k in need}
    load0 = os.getloadavg()
    res = {k: [] for k in cases}
    for r in range(a.rounds):
        for name, fn in cases.items():
            res[name].append(fn())
            print(f"round {r + 1}: {name:11s} {fmt_rate(res[name][-1][0]):>11s} "
                  f"{res[name][-1][1]:7.0f} CPU-ms/Msteps", flush=True)
    load1 = os.getloadavg()
    rows = []
    for name, runs in res.items():
        sps = statistics.median(x[0] for x in runs)
        cpu = statistics.median(x[1] for x in runs)
        ratio = None
        if name in refs and refs[name] in res:
            ratio = statistics.median(x[0] / y[0] for x, y in zip(runs, res[refs[name]]))
        rows.append((name, sps, cpu, ratio, refs.get(name, "")))
    vec = vecenv_cases(b, s, a.rounds, a.out) if not only or only & {"vecenv-random",
                                                                      "vecenv-mlp"} else {}
    for name, r in vec.items():
        rows.append((name, float(r["sps"]), float(r.get("cpu_ms_per_msteps") or "nan"),
                     float(r["ratio"]) if r.get("ratio") else None, r.get("reference", "")))
    with open(os.path.join(a.out, "learners.csv"), "w") as f:
        f.write("case,sps,cpu_ms_per_msteps,ratio,reference,target\n")
        for name, sps, cpu, ratio, ref in rows:
            t = TARGETS.get(name)
            f.write(f"{name},{sps:.0f},{cpu:.1f},{'' if ratio is None else f'{ratio:.3f}'},"
                    f"{ref},{'' if not t else t[1]}\n")
    with open(os.path.join(a.out, "learners.md"), "w") as f:
        cmd = " ".join(["bench/bench_learners.py", *sys.argv[1:]])
        f.write(f"Measured by `{cmd}` ({a.rounds} rounds of {s:g} s; "
                f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
                f"{os.cpu_count()} CPUs).\n\n")
        f.write("| case | steps/s (median) | CPU ms per M steps | ratio | against | target | "
                "met |\n|---|---|---|---|---|---|---|\n")
        for name, sps, cpu, ratio, ref in rows:
            t = TARGETS.get(name)
            met = ""
            if t and t[0] == "ratio" and ratio is not None:
                met = "yes" if ratio >= t[1] else "no"
            elif t and t[0] == "rate":
                met = "yes" if sps >= t[1] else "no"
            tgt = "" if not t else (f">= {t[1]:g}" if t[0] == "ratio" else f">= {fmt_rate(t[1])}")
            f.write(f"| {name} | {fmt_rate(sps)} | {cpu:.0f} | "
                    f"{'' if ratio is None else f'{ratio:.3f}'} | {ref} | {tgt} | {met} |\n")
    plot(a.out, rows)
    print(open(os.path.join(a.out, "learners.md")).read())


def bar_plot(out, stem, title, ylabel, bars, prog="bench_learners"):
    """One bar per (name, value) of bars (gnuplot) into OUT/STEM.png; also
    bench_pixels.py's."""
    gp = shutil.which("gnuplot")
    if not gp:
        print(f"{prog}: gnuplot not found: no plot", file=sys.stderr)
        return
    data = os.path.join(out, stem + ".dat")
    with open(data, "w") as f:
        for name, value in bars:
            f.write(f"\"{name}\" {value:.3f}\n")
    script = f"""
set terminal pngcairo size 900,420 noenhanced
set output '{os.path.join(out, stem + '.png')}'
set title '{title}'
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel '{ylabel}'
set yrange [0:*]
set grid ytics
set xtics rotate by 35 right
plot '{data}' using 2:xtic(1) title 'steps/s' lc rgb '#4477aa'
"""
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        print(f"{prog}: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)
    os.unlink(data)


def plot(out, rows):
    """Steps/s of every case (gnuplot)."""
    bar_plot(out, "learners", "CartPole + MLP(64,64): steps/s per case (medians)", "M steps/s",
             [(name, sps / 1e6) for name, sps, _cpu, _ratio, _ref in rows])


if __name__ == "__main__":
    main()
