#!/usr/bin/python3
"""Soak: a long run of cartpole + MLP served by a remote rollout-learner that
is replaced every --reattach-s seconds (alternately SIGKILLed mid-stream and
stopped with SIGTERM), while the node's RSS, open fds, threads and steps/s
are sampled from /proc and its progress lines.

With --python-env ID the node instead runs the Python env `gym:ID` in
--env-procs worker processes with its local policy, and every
--kill-worker-s seconds one worker (a child of the node, found in
/proc/PID/task/*/children) is SIGKILLed; the workers' count and summed RSS
are sampled beside the node's, and each kill is followed until a new worker
process takes its place (the node's restart).

The figures that matter are flatness: RSS, fds and threads after warm-up
against the end, and steps/s per learner generation against the first.

usage: soak.py BUILD_DIR [--minutes M] [--reattach-s S] [--sample-s S]
               [--num-envs N] [--csv FILE] [--summary FILE] [--plot PNG] [--check]
               [--python-env ID [--env-procs K] [--kill-worker-s S]]

The published run (docs/benchmarks.md#soak):

    bench/soak.py build --csv docs/benchmarks/soak.csv \
        --summary docs/benchmarks/soak_summary.txt --plot docs/benchmarks/soak.png

The Python env run (docs/benchmarks.md#soak):

    bench/soak.py build --python-env CartPole-v1 --env-procs 2 --kill-worker-s 60 \
        --csv docs/benchmarks/soak_pyenv.csv \
        --summary docs/benchmarks/soak_pyenv_summary.txt --plot docs/benchmarks/soak_pyenv.png

--check exits 1 unless fds and threads stay flat, RSS grows less than
--max-rss-growth-kib after warm-up, and every learner generation stepped the
node (with --python-env: the worker count stays --env-procs, every kill is
followed by a new worker, the node counts at least one env failure per kill
and the node stepped between every two kills) (the short form: `meson test -C build --benchmark soak_short`, see
bench/meson.build; the test suite's check is tests/integration/test_replace.py).
Steps/s stability is reported, never checked: timing belongs to benchmarks.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

# "[  12.0s] steps   12345 | ...": the node's own clock with its step count.
STATUS = re.compile(r"\[\s*([0-9.]+)s\]\s+steps\s+(\d+)\s+\|")


def worker_pids(pid):
    """The node's Python env workers (its children running env_worker) and
    the count of all its children (a dead worker left unreaped shows here)."""
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass  # the thread ended meanwhile
    out = []
    for k in kids:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                if b"env_worker" in f.read():
                    out.append(k)
        except OSError:
            pass  # it ended meanwhile
    return sorted(out), len(kids)


def workers_rss(pids):
    total = 0
    for k in pids:
        try:
            total += proc_sample(k)[0]
        except (OSError, KeyError):
            pass  # it ended meanwhile
    return total


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(line.split(":", 1) for line in f if ":" in line)
    rss = int(st["VmRSS"].split()[0])
    threads = int(st["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds, threads


class Node:
    """rollout-node --learner remote (or, with a Python env, its local
    policy); a thread follows its progress lines."""

    def __init__(self, build, num_envs, extra, python_env=None):
        if python_env:
            mode = ["--env", f"gym:{python_env}"]
            ready = "rollout-node: running:"
        else:
            mode = ["--env", "cartpole", "--learner", "remote", "--listen", "127.0.0.1:0",
                    "--learner-timeout", "5"]
            ready = "listening for learners on"
        self.p = subprocess.Popen(
            [f"{build}/rollout-node", *mode, "--num-envs", str(num_envs), "--seconds", "0",
             "--json", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addr = None
        started = False
        for line in self.p.stderr:
            if ready in line:
                self.addr = line.split()[-1]
                started = True
                break
        if not started:
            raise SystemExit(f"soak: the node did not start (exit {self.p.wait()})")
        # (the node's clock, its step count) from the latest progress line,
        # replaced as one tuple: rates use the node's clock, not ours.
        self.progress = (0.0, 0)
        self.log = []
        self.t = threading.Thread(target=self.follow, daemon=True)
        self.t.start()

    def follow(self):
        for line in self.p.stderr:
            m = STATUS.search(line)
            if m:
                self.progress = (float(m.group(1)), int(m.group(2)))
            elif line.strip():
                self.log.append(line.rstrip())


def await_restart(pid, before, procs, guard_s):
    """await_restart waits, after a worker was killed, until the node runs
    procs workers again, one of them not among those running at the kill
    (before), its restart: pids wrap, so one seen long ago may come back;
    the linux allocator reaches the killed pid again only after a full wrap.
    Returns the seconds that took, or None if the guard ran out first."""
    t = time.monotonic()
    while time.monotonic() - t < guard_s:
        workers = worker_pids(pid)[0]
        if len(workers) == procs and set(workers) - before:
            return time.monotonic() - t
        time.sleep(0.1)
    return None


def start_learner(build, addr, gen):
    return subprocess.Popen([f"{build}/rollout-learner", "--connect", addr, "--quiet",
                             "--name", f"soak-{gen}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def plot(csv, png, title, workers):
    """steps/s over time above; RSS, open fds and threads below (gnuplot),
    with the env workers' count and summed RSS when workers."""
    wplot = (", \\\n     \"" + csv + "\" using 1:($10/1024) every ::1 with lines lw 2 title \"env workers' RSS (sum)\", \\\n     \"" + csv + "\" using 1:9 every ::1 axes x1y2 with points pt 7 ps 0.4 title \"env workers\""
             if workers else "")
    script = f"""
set datafile separator ","
set terminal pngcairo size 900,650 font ",11"
set output "{png}"
set multiplot layout 2,1 title "{title}"
set grid
set key bottom right
set ylabel "env steps/s"
set yrange [0:*]
plot "{csv}" using 1:5 every ::1 with lines lw 1.5 title "steps/s (between progress lines, node clock)"
set xlabel "seconds"
set ylabel "RSS (MiB)"
set y2label "fds, threads"
set y2tics
set ytics nomirror
set yrange [0:*]
set y2range [0:{24 if workers else 16}]
plot "{csv}" using 1:($6/1024) every ::1 with lines lw 2 title "RSS", \
     "{csv}" using 1:7 every ::1 axes x1y2 with lines lw 2 title "open fds", \
     "{csv}" using 1:8 every ::1 axes x1y2 with lines lw 2 dt 2 title "threads"{wplot}
unset multiplot
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"soak: no plot ({e}); bash .ci/install-deps installs gnuplot", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--reattach-s", type=float, default=60.0)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=None,
                    help="RSS baseline taken this long after start (default: one reattach)")
    ap.add_argument("--num-envs", type=int, default=None,
                    help="envs (default 256; with --python-env 16)")
    ap.add_argument("--python-env", metavar="ID",
                    help="run gym:ID in env worker processes and kill one every --kill-worker-s")
    ap.add_argument("--env-procs", type=int, default=2)
    ap.add_argument("--kill-worker-s", type=float, default=60.0)
    ap.add_argument("--restart-guard-s", type=float, default=120.0,
                    help="hang guard: a killed worker not replaced within this fails --check")
    ap.add_argument("--workers", type=int, default=1,
                    help="node workers; the learner gets the other CPU (default 1)")
    ap.add_argument("--csv")
    ap.add_argument("--summary")
    ap.add_argument("--plot", help="PNG of steps/s, RSS, fds and threads over time (needs --csv)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--max-rss-growth-kib", type=int, default=4096)
    a = ap.parse_args()
    py = a.python_env
    period = a.kill_worker_s if py else a.reattach_s
    warmup = period if a.warmup_s is None else a.warmup_s
    if a.num_envs is None:
        a.num_envs = 16 if py else 256

    extra = ["--workers", str(a.workers)] + (["--env-procs", str(a.env_procs)] if py else [])
    node = Node(a.build, a.num_envs, extra, py)
    gen = 0  # learner generations, or with --python-env worker kills so far
    learner = None if py else start_learner(a.build, node.addr, gen)
    restart_s = []  # per kill: seconds until a new worker appeared (None: never)
    t0 = time.monotonic()
    end = t0 + a.minutes * 60.0
    next_swap = t0 + period
    # (t, generation, steps, node_t, sps, rss, fds, threads, workers,
    #  workers' RSS, node's children)
    rows = []
    gen_start_steps = {0: 0}
    kills = {"SIGKILL": 0, "SIGTERM": 0}
    last_steps, last_node_t = 0, 0.0
    while time.monotonic() < end:
        time.sleep(a.sample_s)
        now = time.monotonic()
        if node.p.poll() is not None:
            raise SystemExit(f"soak: the node exited early ({node.p.returncode}): {node.log}")
        rss, fds, threads = proc_sample(node.p.pid)
        workers, children = worker_pids(node.p.pid)
        wrss = workers_rss(workers)
        # The progress lines come every 2 s: a rate between two of them,
        # timed by the node, does not alias with this loop's period.
        node_t, steps = node.progress
        sps = (steps - last_steps) / (node_t - last_node_t) if node_t > last_node_t else 0.0
        rows.append((now - t0, gen, steps, node_t, sps, rss, fds, threads, len(workers), wrss,
                     children))
        last_steps, last_node_t = steps, node_t
        if py and now >= next_swap and now < end and workers:
            os.kill(workers[gen % len(workers)], signal.SIGKILL)
            kills["SIGKILL"] += 1
            restart_s.append(await_restart(node.p.pid, set(workers), a.env_procs,
                                           a.restart_guard_s))
            gen += 1
            gen_start_steps[gen] = node.progress[1]
            next_swap = now + period
        elif not py and now >= next_swap and now < end:
            sig = signal.SIGKILL if gen % 2 == 0 else signal.SIGTERM
            learner.send_signal(sig)
            learner.wait(timeout=30)
            kills[sig.name] += 1
            gen += 1
            gen_start_steps[gen] = node.progress[1]
            learner = start_learner(a.build, node.addr, gen)
            next_swap = now + a.reattach_s
    node.p.send_signal(signal.SIGINT)
    out, _ = node.p.communicate(timeout=60)
    if learner:
        learner.wait(timeout=60)
    node.t.join(timeout=5)

    if a.csv:
        with open(a.csv, "w") as f:
            f.write(f"t_s,{'kills' if py else 'learner'},steps,node_t_s,sps,rss_kib,fds,threads,"
                    "workers,workers_rss_kib,children\n")
            for r in rows:
                f.write(f"{r[0]:.1f},{r[1]},{r[2]},{r[3]:.1f},{r[4]:.0f},{r[5]},{r[6]},{r[7]},"
                        f"{r[8]},{r[9]},{r[10]}\n")

    base = [r for r in rows if r[0] >= warmup] or rows
    rss0, rss_max, rss_end = base[0][5], max(r[5] for r in base), base[-1][5]
    fds_set = sorted({r[6] for r in base})
    thr_set = sorted({r[7] for r in base})
    # Steps/s per learner generation, over its whole life (reattach gaps
    # included: they are part of what a user sees).
    by_gen = {}
    for r in rows:
        by_gen.setdefault(r[1], []).append(r)
    gen_sps = []
    for g, rs in sorted(by_gen.items()):
        if len(rs) >= 2 and rs[-1][3] > rs[0][3]:
            gen_sps.append((rs[-1][2] - rs[0][2]) / (rs[-1][3] - rs[0][3]))
    mean = statistics.mean(gen_sps) if gen_sps else 0.0
    cv = statistics.pstdev(gen_sps) / mean if len(gen_sps) > 1 and mean else 0.0
    stepped = [g for g, rs in by_gen.items() if rs[-1][2] > gen_start_steps[g]]
    what = "interval between worker kills" if py else "learner generation"
    if py:
        head = (f"soak: {a.minutes:g} min, gym:{py} + MLP(64,64) (local policy), {a.num_envs} "
                f"envs in {a.env_procs} env worker processes, node {a.workers} worker(s), one "
                f"worker SIGKILLed every {a.kill_worker_s:g} s ({kills['SIGKILL']} kills), "
                f"{len(rows)} samples")
    else:
        head = (f"soak: {a.minutes:g} min, cartpole + MLP(64,64), {a.num_envs} envs, node "
                f"{a.workers} worker(s), learner replaced every {a.reattach_s:g} s "
                f"({kills['SIGKILL']} SIGKILL, {kills['SIGTERM']} SIGTERM), {len(rows)} samples")
    summary = {}
    for line in reversed(out.strip().splitlines()):
        try:
            summary = json.loads(line)
            break
        except ValueError:
            continue
    wk_set = sorted({r[8] for r in base})
    ch_set = sorted({r[10] for r in base})
    wrss0, wrss_max, wrss_end = base[0][9], max(r[9] for r in base), base[-1][9]
    restarted = [x for x in restart_s if x is not None]
    restart_lines = sum("restarting it" in line for line in node.log)
    lines = [
        head,
        f"steps: {rows[-1][2] if rows else 0}; steps/s per {what}: mean {mean:.0f}, "
        f"min {min(gen_sps, default=0):.0f}, max {max(gen_sps, default=0):.0f}, "
        f"coefficient of variation {cv:.3f}; first {gen_sps[0] if gen_sps else 0:.0f}, "
        f"last {gen_sps[-1] if gen_sps else 0:.0f}",
        f"RSS after {warmup:g} s warm-up: {rss0} KiB, max {rss_max} KiB, end {rss_end} KiB "
        f"(growth {rss_end - rss0:+d} KiB)",
        f"open fds: {fds_set}; threads: {thr_set}",
        f"{what.replace('interval', 'intervals').replace('generation', 'generations')} that "
        f"stepped the node: {len(stepped)} of {len(by_gen)}",
    ]
    if py:
        lines += [
            f"env workers: {wk_set} (node's children: {ch_set}); their summed RSS after warm-up "
            f"{wrss0} KiB, max {wrss_max} KiB, end {wrss_end} KiB",
            f"kills: {len(restart_s)}, followed by a new worker: {len(restarted)} (seconds to it: "
            f"mean {statistics.mean(restarted) if restarted else 0:.2f}, "
            f"max {max(restarted, default=0):.2f}); node's env_failures: "
            f"{summary.get('env_failures')}; its 'restarting it' log lines: {restart_lines} "
            f"(it logs {a.env_procs} x 8 at most)",
            f"node summary: steps {summary.get('steps')}, seconds {summary.get('seconds')}, "
            f"episodes {summary.get('episodes')}, mean return {summary.get('mean_return')}, "
            f"env_error: {str(summary.get('env_error'))[:120]!r}",
        ]
    else:
        lines.append(
            f"node summary: {out.strip().splitlines()[-1] if out.strip() else '(none)'}"[:400])
    text = "\n".join(lines)
    print(text)
    if a.summary:
        with open(a.summary, "w") as f:
            f.write(text + "\n")
    if a.plot and a.csv:
        title = (f"soak: gym:{py} + MLP(64,64), {a.env_procs} env workers, one SIGKILLed every "
                 f"{a.kill_worker_s:g} s" if py else
                 "soak: cartpole + MLP(64,64), remote learner replaced every minute")
        plot(a.csv, a.plot, title, bool(py))
    if not a.check:
        return 0
    bad = []
    if len(fds_set) != 1:
        bad.append(f"open fds changed: {fds_set}")
    if len(thr_set) != 1:
        bad.append(f"threads changed: {thr_set}")
    libs = subprocess.run(["ldd", f"{a.build}/rollout-node"], capture_output=True,
                          text=True).stdout
    if "libasan" in libs or "libtsan" in libs:
        # ASan's quarantine keeps freed memory on purpose; TSan's shadow
        # and history grow with the run.
        print("soak: RSS not checked: the node is built with a sanitizer")
    elif rss_max - rss0 > a.max_rss_growth_kib:
        bad.append(f"RSS grew {rss_max - rss0} KiB (limit {a.max_rss_growth_kib})")
    if len(stepped) != len(by_gen):
        bad.append(f"only {len(stepped)} of {len(by_gen)} {what}s stepped the node")
    if py:
        if wk_set != [a.env_procs] or ch_set != [a.env_procs]:
            bad.append(f"workers {wk_set}, children {ch_set}, not {a.env_procs} throughout")
        if len(restarted) != len(restart_s) or not restart_s:
            bad.append(f"{len(restart_s)} kills, {len(restarted)} followed by a new worker "
                       f"within {a.restart_guard_s:g} s")
        if (summary.get("env_failures") or 0) < len(restart_s):
            bad.append(f"node counted {summary.get('env_failures')} env failures for "
                       f"{len(restart_s)} kills")
    if node.p.returncode != 0:
        bad.append(f"node exited {node.p.returncode}")
    for b in bad:
        print(f"soak: FAIL: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
