"""Recording (rollout-node --record) and replay (rollout-replay): record ->
verify for every kind of env, several workers, SIGINT/SIGTERM, rotation,
block and drop, dump/stats, a real divergence, damaged files, and a full
disk (a small tmpfs) under both --record-error policies. A slow disk is the
test build's stalling one (tests/slow_disk.c): each test waits for what the
node reports about it (record_waits, record_dropped), never for time."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest

import nodeutil as nu

REPLAY = None
DRIFT = None


def replay(*args, env=None, timeout=nu.HANG_GUARD_S):
    e = dict(os.environ)
    if env:
        e.update(env)
    return nu.run_cmd([REPLAY, *args], capture_output=True, text=True, timeout=timeout, env=e)


def record(path, *args):
    cmd = [nu.NODE, "--json", "--quiet", "--record", path, *map(str, args)]
    p = nu.run_cmd(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}: {p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def verified_steps(stderr):
    m = re.search(r"verify OK: (\d+) steps and (\d+) resets", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


class Record(nu.TempDirCase):
    def check_verify(self, s, *files, **kw):
        # A plugin env is loaded only from --plugin, never from the header.
        plugin = ("--plugin", kw.pop("plugin")) if "plugin" in kw else ()
        p = replay("--verify", *plugin, *files, **kw)
        self.assertEqual(p.returncode, 0, p.stderr)
        steps, resets = verified_steps(p.stderr)
        self.assertEqual(steps, s["steps"])
        self.assertEqual(s["record_transitions"], s["steps"])
        self.assertEqual(s["record_dropped"], 0)
        # One reset per env at the start, one after every finished episode.
        self.assertEqual(resets, s["num_envs"] + s["episodes"] + s["env_failures"])
        return p

    def test_cartpole_mlp(self):
        f = self.path("c.traj")
        s = record(f, "--num-envs", 32, "--steps", 32 * 300)
        self.check_verify(s, f)

    def test_pendulum_box_actions(self):
        f = self.path("p.traj")
        s = record(f, "--env", "pendulum", "--num-envs", 8, "--steps", 8 * 450)
        self.check_verify(s, f)

    def test_burn(self):
        f = self.path("b.traj")
        s = record(f, "--env", "burn", "--env-arg", "cost_us=1", "--env-arg", "obs_dim=24",
                   "--num-envs", 16, "--steps", 16 * 200, "--check-finite")
        self.check_verify(s, f)

    def test_plugin_env(self):
        f = self.path("m.traj")
        s = record(f, "--env", nu.PLUGIN, "--policy", "random", "--num-envs", 8,
                   "--steps", 8 * 450, "--env-arg", "max_episode_steps=150")
        self.assertEqual(s["env"], "mountaincar")
        self.check_verify(s, f, plugin=nu.PLUGIN)

    def test_several_workers_and_threads(self):
        extra = 1 if nu.linked_with("libtsan") else 0
        f = self.path("w.traj")
        s = record(f, "--workers", 2, "--num-envs", 64, "--shard", 4, "--steps", 64 * 400)
        self.assertEqual(s["threads_expected"], 1 + 2 + 1)  # loop + workers + recorder
        self.assertEqual(s["threads"], s["threads_expected"] + extra)
        self.check_verify(s, f)

    def start(self, f, *args, gate=None):
        """A node recording to f until the test stops it, with metrics
        (throughput lines every 50 ms) and its stderr drained; on the
        stalling disk when a DiskGate is given."""
        m = nu.Metrics(self.path("m.jsonl"))
        p = nu.spawn([nu.slow_disk_node() if gate else nu.NODE, "--json", "--seconds", "0",
                      "--record", f, "--metrics", m.path, "--metrics-interval", 0.05, *args],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=gate.env() if gate else None)
        return p, m, nu.Lines(p.stderr)

    def stop(self, p, err, sig=signal.SIGINT):
        """Signal the node (unless sig is 0), wait for it; returns its summary."""
        if sig:
            p.send_signal(sig)
        p.wait(timeout=nu.HANG_GUARD_S)
        out = p.stdout.read()
        err.thread.join()
        self.assertEqual(p.returncode, 0, err.text())
        return json.loads(out.strip().splitlines()[-1])

    def interrupt(self, sig):
        f = self.path("i.traj")
        p, m, err = self.start(f, "--num-envs", 64, "--workers", 2)
        nu.wait_for(lambda: m.tput("steps") > 0, "the node stepping", proc=p)
        s = self.stop(p, err, sig)
        self.assertGreater(s["steps"], 0)
        # Every step taken is in the file, whole, and replays.
        v = self.check_verify(s, f)
        self.assertNotIn("warning", v.stderr)

    def test_sigint_flushes_everything(self):
        self.interrupt(signal.SIGINT)

    def test_sigterm_flushes_everything(self):
        self.interrupt(signal.SIGTERM)

    def test_sigint_while_the_disk_is_slow(self):
        # Shards are waiting for buffers when the signal comes: each still
        # records its step in flight, and the node exits with all of them.
        gate = nu.DiskGate(self.tmp)
        f = self.path("i.traj")
        p, m, err = self.start(f, "--num-envs", 64, "--workers", 2, gate=gate)
        nu.wait_for(lambda: gate.held() and m.tput("record_waits") > 0,
                    "shards waiting for the stalled disk (record_waits)", proc=p)
        p.send_signal(signal.SIGINT)
        nu.wait_for(lambda: err.count("SIGINT: finishing the steps in flight"),
                    "the node beginning its clean stop", proc=p)
        gate.open()
        s = self.stop(p, err, sig=0)  # already signalled: just wait
        self.assertGreater(s["record_waits"], 0)
        v = self.check_verify(s, f)
        self.assertNotIn("warning", v.stderr)

    def test_killed_writer_leaves_a_readable_file(self):
        f = self.path("k.traj")
        p = nu.spawn([nu.NODE, "--quiet", "--seconds", "0", "--num-envs", "64", "--record", f],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Whole records on disk: the recorder writes its buffer out once full
        # (1 MiB) or 50 ms after its first record.
        nu.wait_for(lambda: os.path.exists(f) and os.path.getsize(f) > 64 * 1024,
                    "64 KiB of records in the file", proc=p)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=nu.HANG_GUARD_S)
        v = replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertGreater(verified_steps(v.stderr)[0], 0)
        # Cut inside a record: every complete one verified, and a warning.
        size = os.path.getsize(f)
        with open(f, "r+b") as fh:
            fh.truncate(size - 7)
        v = replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertRegex(v.stderr, r"warning: .*ends inside record \d+ at byte \d+")

    def test_rotation(self):
        f = self.path("r.traj")
        s = record(f, "--num-envs", 16, "--steps", 16 * 1000, "--record-max-bytes", 20000)
        n = s["record_files"]
        self.assertGreater(n, 3)
        parts = [f] + [f"{f}.{k}" for k in range(1, n)]
        total = 0
        for part in parts:
            size = os.path.getsize(part)
            total += size
            self.assertLessEqual(size, 20000)
            with open(part, "rb") as fh:
                self.assertEqual(fh.read(8), b"ROTRAJ1\n")
        self.assertFalse(os.path.exists(f"{f}.{n}"))
        self.assertEqual(total, s["record_bytes"])
        self.check_verify(s, *parts)
        # Parts out of order are refused.
        p = replay("--verify", parts[0], parts[2])
        self.assertEqual(p.returncode, 2)
        self.assertIn("expected part 1", p.stderr)
        # A later part alone: read, but its envs cannot be verified.
        p = replay("--verify", parts[2])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("not verified from here", p.stderr)

    def test_block_waits_for_a_slow_disk(self):
        # --record-full block (the default): with the disk stalled the envs
        # wait for it, and go on once it returns, losing nothing.
        gate = nu.DiskGate(self.tmp)
        f = self.path("slow.traj")
        p, m, err = self.start(f, "--num-envs", 32, "--workers", 2, gate=gate)
        nu.wait_for(lambda: gate.held() and m.tput("record_waits") > 0,
                    "shards waiting for the stalled disk (record_waits)", proc=p)
        stalled = m.tput("steps")
        gate.open()
        nu.wait_for(lambda: m.tput("steps") > stalled + 10000,
                    "the envs stepping again once the disk returned", proc=p)
        s = self.stop(p, err)
        self.assertGreater(s["record_waits"], 0)
        self.assertEqual(s["record_dropped"], 0)
        self.check_verify(s, f)

    def test_drop_counts(self):
        # --record-full drop: with the disk stalled the envs go on and the
        # steps that find no buffer are counted, not recorded.
        gate = nu.DiskGate(self.tmp)
        f = self.path("drop.traj")
        p, m, err = self.start(f, "--num-envs", 32, "--workers", 2, "--record-full", "drop",
                               gate=gate)
        nu.wait_for(lambda: gate.held() and m.tput("record_dropped") > 0,
                    "steps dropped while the disk is stalled (record_dropped)", proc=p)
        gate.open()
        s = self.stop(p, err)
        self.assertGreater(s["record_dropped"], 0)
        self.assertEqual(s["record_waits"], 0)
        self.assertEqual(s["record_transitions"] + s["record_dropped"], s["steps"])
        p = replay("--verify", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"the recorder dropped \d+ shard steps")
        steps, _ = verified_steps(p.stderr)
        self.assertLessEqual(steps, s["record_transitions"])

    def test_dump_and_stats(self):
        f = self.path("d.traj")
        s = record(f, "--policy", "random", "--num-envs", 4, "--steps", 4 * 300)
        p = replay("--dump", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [json.loads(line) for line in p.stdout.splitlines()]
        steps = [r for r in rows if not r["reset"]]
        resets = [r for r in rows if r["reset"]]
        self.assertEqual(len(steps), s["steps"])
        self.assertEqual(len(resets), 4 + s["episodes"])
        ends = [r for r in steps if r["terminated"] or r["truncated"]]
        self.assertEqual(len(ends), s["episodes"])
        for r in steps:
            self.assertIn(r["action"], (0, 1))
            self.assertEqual(r["reward"], 1)
            self.assertEqual(len(r["obs"]), 4)
        # Steps of one env come in order, episode by episode.
        e0 = [(r["episode"], r["step"]) for r in rows if r["env"] == 0]
        self.assertEqual(e0, sorted(e0))
        p = replay("--stats", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        stats = [json.loads(line) for line in p.stdout.splitlines()]
        total = stats[-1]
        self.assertEqual(total["env"], "all")
        self.assertEqual(total["episodes"], s["episodes"])
        self.assertEqual(total["steps"], s["steps"])
        self.assertAlmostEqual(total["return_mean"], s["mean_return"], places=9)
        self.assertEqual(total["length_mean"], total["return_mean"])  # reward 1 per step
        self.assertEqual(sum(x["episodes"] for x in stats[:-1]), s["episodes"])
        # Filters.
        p = replay("--dump", "--env", "1,2", "--episode", "0", f)
        sel = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertTrue(sel)
        self.assertTrue(all(r["env"] in (1, 2) and r["episode"] == 0 for r in sel))
        p = replay("--stats", "--env", 3, f)
        st = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertEqual([x["env"] for x in st], [3, "all"])

    def test_broken_env_is_found(self):
        f = self.path("drift.traj")
        s = record(f, "--env", DRIFT, "--num-envs", 4, "--steps", 4 * 500, "--shard", 2)
        self.check_verify(s, f, plugin=DRIFT)
        # The bug changes the env's behaviour after its 123rd step: replay
        # must point at that step of the first env to reach it in the file.
        rows = [json.loads(line) for line in replay("--dump", f).stdout.splitlines()]
        count = {}
        want = None
        for r in rows:
            if r["reset"]:
                continue
            count[r["env"]] = count.get(r["env"], 0) + 1
            if count[r["env"]] == 124:
                want = r
                break
        p = replay("--verify", "--plugin", DRIFT, f, env={"DRIFT_BUG_AFTER": "123"})
        self.assertEqual(p.returncode, 1, p.stderr)
        m = re.search(r"divergence in (\S+) \(record (\d+)\): env (\d+), episode (\d+), "
                      r"step (\d+), (\S+): recorded (\S+) \(0x[0-9a-f]+\), replayed (\S+)",
                      p.stderr)
        self.assertIsNotNone(m, p.stderr)
        self.assertEqual(m.group(1), f)
        self.assertEqual((int(m.group(3)), int(m.group(4)), int(m.group(5))),
                         (want["env"], want["episode"], want["step"]))
        self.assertEqual(m.group(6), "obs[0]")
        self.assertNotEqual(m.group(7), m.group(8))

    def test_damaged_files(self):
        f = self.path("dmg.traj")
        record(f, "--num-envs", 8, "--steps", 8 * 200, "--shard", 4)
        with open(f, "rb") as fh:
            data = bytearray(fh.read())
        # A flipped byte in the middle: a CRC mismatch (or, where the byte
        # is a record's first, a start no TransitionBatch has: records are
        # as long as the workers' batches, so where the middle falls
        # varies) with the record number, then the reader resynchronises;
        # exit 1.
        bad = self.path("flip.traj")
        d = bytearray(data)
        d[len(d) // 2] ^= 0x01
        with open(bad, "wb") as fh:
            fh.write(d)
        p = replay("--stats", bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(p.stderr, r"error: .*record \d+ at byte \d+: (CRC mismatch|invalid|"
                                   r"the record does not start like a TransitionBatch)")
        self.assertIn("resynchronised at byte", p.stderr)
        self.assertEqual(json.loads(p.stdout.splitlines()[-1])["env"], "all")
        p = replay("--verify", bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        p = replay("--stats", "--no-resync", bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("resynchronised", p.stderr)
        # Not a trajectory file, an empty file, a missing file.
        txt = self.path("t.txt")
        with open(txt, "w") as fh:
            fh.write("just some text\n")
        p = replay("--verify", txt)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a trajectory file", p.stderr)
        empty = self.path("e.traj")
        open(empty, "wb").close()
        self.assertEqual(replay("--dump", empty).returncode, 2)
        self.assertEqual(replay("--dump", self.path("missing")).returncode, 2)
        # A damaged header.
        d = bytearray(data)
        d[12] ^= 0xFF
        with open(bad, "wb") as fh:
            fh.write(d)
        p = replay("--dump", bad)
        self.assertEqual(p.returncode, 2)
        self.assertIn("header", p.stderr)

    def test_disk_error_is_reported(self):
        # /dev/full takes the header into the buffer, then fails the first write.
        _, p = nu.run("--record", "/dev/full", "--num-envs", 16, "--steps", 16 * 20000,
                      check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("recorder: writing /dev/full", p.stderr)

    def mount_small_tmpfs(self, kib):
        """A tmpfs of `kib` KiB under the test's directory, unmounted at the
        end; skips the test (with the reason) where mounting is forbidden."""
        d = tempfile.mkdtemp(prefix="rollout-small-fs-")
        self.addCleanup(os.rmdir, d)  # cleanups run last first: after the umount
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", d],
                           capture_output=True, text=True)
        if p.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs here: {p.stderr.strip() or p.returncode}")
        self.addCleanup(subprocess.run, ["umount", d])
        return d

    def check_disk_full_run(self, policy, *limit):
        d = self.mount_small_tmpfs(1024)
        f = os.path.join(d, "x.traj")
        cmd = [nu.NODE, "--json", "--quiet", "--record", f, "--record-error", policy,
               "--num-envs", 64, *limit]
        p = nu.run_cmd(cmd, capture_output=True, text=True)
        s = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertIn("No space left on device", p.stderr)
        self.assertIn("the file ends after its last whole record", p.stderr)
        self.assertIn(f"--record-error {policy}", p.stderr)
        self.assertTrue(s["record_failed"])
        # Every step was recorded or counted as not recorded.
        self.assertEqual(s["record_transitions"] + s["record_lost"], s["steps"])
        self.assertGreater(s["record_transitions"], 0)
        self.assertGreater(s["record_lost"], 0)
        self.assertEqual(os.path.getsize(f), s["record_bytes"])
        # Nothing torn: the file verifies and holds exactly what the node
        # says it recorded.
        v = replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("0 damaged record(s)", v.stderr)
        self.assertEqual(verified_steps(v.stderr)[0], s["record_transitions"])
        return p, s

    def test_disk_full_stop(self):
        # The default: the full disk stops the run, exit 1 (no other limit:
        # nothing else could have ended it).
        p, s = self.check_disk_full_run("stop", "--seconds", 0)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("the run was stopped", p.stderr)

    def test_disk_full_continue(self):
        # --record-error continue: the run goes on to its end, unrecorded.
        p, s = self.check_disk_full_run("continue", "--steps", 64 * 20000)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("the run goes on unrecorded", p.stderr)
        self.assertEqual(s["steps"], 64 * 20000)

    def test_bad_flags(self):
        f = self.path("x.traj")
        for args, msg in [((), "nothing to do"), (("--verify",), "no trajectory file"),
                          (("--bogus", f), "unknown option"),
                          (("--stats", "--env", "x", f), "--env"),
                          (("--serve", "127.0.0.1:9000", "--verify", f), "no other mode")]:
            p = replay(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(msg, p.stderr)
        _, p = nu.run("--record-full", "sometimes", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--record-full", p.stderr)
        _, p = nu.run("--record-error", "ignore", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--record-error 'ignore': expected stop or continue", p.stderr)
        _, p = nu.run("--record", "/nonexistent-dir/x.traj", "--steps", 10, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent-dir/x.traj", p.stderr)


if __name__ == "__main__":
    REPLAY, DRIFT = sys.argv[3], sys.argv[4]
    del sys.argv[3:5]
    nu.setup_from_argv()
    unittest.main(verbosity=2)
