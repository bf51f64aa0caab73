"""Recording env ABI 2 envs (trajectory format version 2) and replaying them:
gridworld (uint8 and int32 tensors, masks, two agents) and catch (84x84
uint8 pixels, Discrete and MultiDiscrete actions) recorded by rollout-node
--record and verified bit for bit by rollout-replay --verify --plugin; --dump
and --stats read them, rotated parts too; a tampered tensor is reported at its env, agent,
episode, step and element; a flipped byte is a damaged record; a header
claiming a newer format version is refused by number; a version 1 file (an
ABI 1 env's, and one written before version 2 existed) still reads; --serve
serves version 2 files to rollout-learner (the recording's seed repeats every
recorded action, another seed is told where it first differs) and refuses a
file whose header bounds are not the env's; the --metrics file's throughput lines carry
the per-episode metric means. Every run ends by its own --steps, or is
stopped once the metrics file reports what the test waits for: nothing here
waits on the clock."""
import json
import os
import re
import signal
import subprocess
import sys
import unittest

import nodeutil as nu
import wireutil as wu

GRID = CATCH = REPLAY = None
HERE = os.path.dirname(os.path.abspath(__file__))
# Written by rollout-node before format version 2 existed (cartpole, seed 1).
OLD_FILE = os.path.join(HERE, "..", "fuzz", "corpus", "trajectory_reader", "small.traj")
MAGIC = b"ROTRAJ1\n"


def replay(*args):
    return nu.run_cmd([REPLAY, *map(str, args)], capture_output=True, text=True)


def record(path, env, *args):
    s, p = nu.run("--env", env, "--record", path, *args)
    return s


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def read_varint(data, i):
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def split_records(data):
    """[(offset, payload)] of every record after the magic."""
    assert data[:8] == MAGIC
    out, i = [], 8
    while i < len(data):
        n, j = read_varint(data, i)
        out.append((i, bytes(data[j:j + n])))
        i = j + n + 4
    return out


def frame(payload):
    return wu.varint(len(payload)) + payload + crc32c(payload).to_bytes(4, "little")


def rewrite(records, changed):
    """The file with the records of `changed` ({index: payload}) replaced."""
    return MAGIC + b"".join(frame(changed.get(i, p)) for i, (_, p) in enumerate(records))


def verified(stderr):
    m = re.search(r"verify OK: (\d+) steps and (\d+) resets", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


class RecordTyped(nu.TempDirCase):
    def check_verify(self, s, f, plugin):
        p = replay("--verify", "--plugin", plugin, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        steps, resets = verified(p.stderr)
        # Steps count rows (agent steps), as the node's; one reset per env
        # at the start and after every finished episode.
        self.assertEqual(steps, s["steps"])
        self.assertEqual(s["record_transitions"], s["steps"])
        self.assertEqual(resets, s["num_envs"] + s["episodes"] + s["env_failures"])

    def header(self, f):
        with open(f, "rb") as fh:
            recs = split_records(fh.read())
        h = wu.pb2().TrajectoryHeader()
        h.ParseFromString(recs[0][1])
        return h

    def test_gridworld_records_and_verifies(self):
        for policy, extra in (("mlp", ()), ("random", ("--workers", 2, "--shard", 2))):
            f = self.path(f"g_{policy}.traj")
            s = record(f, GRID, "--policy", policy, "--num-envs", 16, "--steps", 16 * 2 * 300,
                       "--seed", 3, *extra)
            self.assertEqual(s["agents"], 2)
            self.assertGreater(s["episodes"], 50)
            self.check_verify(s, f, GRID)
        h = self.header(f)
        self.assertEqual(h.format_version, 2)
        self.assertEqual(h.action_kind, "composite")
        lay = h.layout
        self.assertEqual(lay.agents, 2)
        self.assertEqual([(t.name, list(t.shape)) for t in lay.tensors],
                         [("view", [7, 7]), ("pos", [2]), ("goal", [2])])
        self.assertEqual(lay.tensors[0].dtype, wu.pb2().DTYPE_UINT8)
        self.assertEqual(lay.tensors[1].dtype, wu.pb2().DTYPE_INT32)
        self.assertGreater(lay.mask_width, 0)
        self.assertEqual(list(lay.metrics), ["success", "length"])

    def test_catch_discrete_and_multidiscrete(self):
        for action, parts in (("discrete", ["discrete"]), ("multidiscrete", ["multi_discrete"])):
            f = self.path(f"c_{action}.traj")
            s = record(f, CATCH, "--env-arg", "action=" + action, "--policy", "mlp",
                       "--num-envs", 8, "--steps", 8 * 100, "--seed", 5)
            self.assertEqual(s["episodes"], 40)
            self.check_verify(s, f, CATCH)
            lay = self.header(f).layout
            self.assertEqual([p.kind for p in lay.parts], parts)
            self.assertEqual([(t.name, list(t.shape)) for t in lay.tensors],
                             [("pixels", [1, 84, 84])])

    def test_rotation(self):
        # Every part starts with its own header and layout; the parts verify
        # in order, and a part given alone is "not verified from here".
        f = self.path("r.traj")
        s = record(f, GRID, "--num-envs", 4, "--steps", 4 * 2 * 200, "--seed", 6,
                   "--record-max-bytes", 20000)
        parts = [f] + [f"{f}.{i}" for i in range(1, s["record_files"])]
        self.assertGreater(len(parts), 2)
        p = replay("--verify", "--plugin", GRID, *parts)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(verified(p.stderr)[0], s["steps"])
        self.assertEqual(self.header(parts[1]).layout, self.header(f).layout)
        p = replay("--verify", "--plugin", GRID, parts[1])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("not verified from here", p.stderr)

    def test_dump_and_stats(self):
        f = self.path("d.traj")
        s = record(f, GRID, "--policy", "random", "--num-envs", 4, "--steps", 4 * 2 * 200,
                   "--seed", 9)
        p = replay("--dump", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [json.loads(line) for line in p.stdout.splitlines()]
        steps = [r for r in rows if not r["reset"]]
        self.assertEqual(len(steps), s["steps"])
        self.assertEqual(len(rows) - len(steps), 2 * (4 + s["episodes"]))
        for r in rows:
            self.assertIn(r["agent"], (0, 1))
            self.assertEqual(sorted(r["obs"]), ["goal", "pos", "view"])
            self.assertEqual(len(r["obs"]["view"]), 49)
            self.assertEqual(len(r["obs"]["pos"]), 2)
            self.assertTrue(all(isinstance(v, int) for v in r["obs"]["pos"]))
            self.assertIn("mask", r)
        for r in steps:
            self.assertEqual(sorted(r["action"]), ["discrete"])
            # The action came from the mask recorded with the row before.
            self.assertTrue(all(isinstance(v, int) for v in r["action"]["discrete"]))
        # An agent's rows come in order, and its agents side by side.
        e0 = [(r["episode"], r["step"], r["agent"]) for r in rows if r["env"] == 0]
        self.assertEqual(e0, sorted(e0))
        p = replay("--stats", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        total = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(total["env"], "all")
        self.assertEqual(total["episodes"], s["episodes"])
        self.assertEqual(total["steps"], s["steps"])
        # An env's return is its agents' mean, as the node counts it.
        self.assertAlmostEqual(total["return_mean"], s["mean_return"], places=9)

    def tampered(self, f, env_arg=()):
        """Changes one element of tensor 0 in a step row of agent 1 (the
        record's CRC made right again): the first one the verify reaches."""
        with open(f, "rb") as fh:
            recs = split_records(fh.read())
        pb = wu.pb2()
        for idx, (_, payload) in enumerate(recs[1:], start=1):
            b = pb.TransitionBatch()
            b.ParseFromString(payload)
            for k in range(len(b.env)):
                ended = b.flags[k] & 3
                if b.agent[k] == 1 and b.step[k] == 3 and not ended:
                    t = b.tensors[0]
                    row = len(t.data) // len(b.env)
                    data = bytearray(t.data)
                    data[k * row + 5] ^= 0x01
                    t.data = bytes(data)
                    return rewrite(recs, {idx: b.SerializeToString()}), b, k
        self.fail("no step 3 row of agent 1 in the recording")

    def test_tampered_tensor_is_reported_where_it_is(self):
        f = self.path("t.traj")
        record(f, GRID, "--policy", "random", "--num-envs", 4, "--steps", 4 * 2 * 50,
               "--seed", 4)
        data, b, k = self.tampered(f)
        bad = self.path("bad.traj")
        with open(bad, "wb") as fh:
            fh.write(data)
        p = replay("--verify", "--plugin", GRID, bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(
            p.stderr,
            r"divergence in %s \(record %d\): env %d, agent 1, episode %d, step 3, "
            r"obs 'view'\[5\]: recorded \d+, replayed \d+"
            % (re.escape(bad), b.record, b.env[k], b.episode[k]))
        self.assertIn("verify FAILED", p.stderr)
        # A flipped byte with its CRC left as it was is a damaged record.
        with open(f, "rb") as fh:
            d = bytearray(fh.read())
        d[len(d) // 2] ^= 0x01
        with open(bad, "wb") as fh:
            fh.write(d)
        p = replay("--verify", "--plugin", GRID, bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(p.stderr, r"error: .*record \d+ at byte \d+: (CRC mismatch|invalid)")

    def test_newer_version_is_refused_by_number(self):
        f = self.path("n.traj")
        record(f, CATCH, "--num-envs", 2, "--steps", 2 * 30, "--seed", 1)
        with open(f, "rb") as fh:
            recs = split_records(fh.read())
        h = wu.pb2().TrajectoryHeader()
        h.ParseFromString(recs[0][1])
        h.format_version = 4
        bad = self.path("v4.traj")
        with open(bad, "wb") as fh:
            fh.write(rewrite(recs, {0: h.SerializeToString()}))
        for mode in (("--dump",), ("--stats",), ("--verify", "--plugin", CATCH)):
            p = replay(*mode, bad)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("unsupported trajectory format version 4 (this build reads versions "
                          "1 to 3", p.stderr)
            self.assertEqual(p.stdout, "")

    def test_version_1_files_still_read(self):
        # Written before format version 2: read, verified, dumped as ever.
        p = replay("--verify", OLD_FILE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(verified(p.stderr), (40, 4))
        p = replay("--dump", OLD_FILE)
        self.assertEqual(len(p.stdout.splitlines()), 44)
        self.assertNotIn("agent", json.loads(p.stdout.splitlines()[0]))
        # An ABI 1 env's recording is still version 1.
        f = self.path("m.traj")
        s = record(f, nu.PLUGIN, "--num-envs", 2, "--steps", 2 * 40)
        h = self.header(f)
        self.assertEqual(h.format_version, 1)
        self.assertFalse(h.HasField("layout"))
        p = replay("--verify", "--plugin", nu.PLUGIN, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(verified(p.stderr)[0], s["steps"])

    def test_the_plugin_must_be_the_recorded_env(self):
        g = self.path("g.traj")
        record(g, GRID, "--num-envs", 2, "--steps", 2 * 2 * 20)
        m = self.path("m.traj")
        record(m, nu.PLUGIN, "--num-envs", 2, "--steps", 40)
        for args, msg in (
                (("--verify", "--plugin", CATCH, g), "is env 'catch', the recording is of env "
                                                     "'gridworld'"),
                (("--verify", "--plugin", nu.PLUGIN, g), "is an env ABI 1 plugin (env "
                                                         "'mountaincar'); the recording "
                                                         "(format version 2)"),
                (("--verify", "--plugin", GRID, m), "is an env ABI 2 plugin (env 'gridworld'); "
                                                    "the recording (format version 1)"),
                (("--verify", g), "the recording's env 'gridworld' is not built in"),
                (("--serve", "127.0.0.1:0", "--plugin", CATCH, g),
                 "is env 'catch', the recording is of env 'gridworld'"),
                (("--serve", "127.0.0.1:0", g), "the recording's env 'gridworld' is not built in")):
            p = replay(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(msg, p.stderr)

    def serve(self, plugin, traj, *learner_args):
        """rollout-replay --serve traj to rollout-learner: (replay's exit
        status, its stderr, the learner's CompletedProcess)."""
        p = nu.spawn([REPLAY, "--serve", "127.0.0.1:0", "--plugin", plugin, traj],
                     stderr=subprocess.PIPE, text=True)
        addr = None
        for line in p.stderr:
            if "serving on" in line:
                addr = line.split()[-1]
                break
        self.assertIsNotNone(addr, "rollout-replay never said where it serves")
        learner = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
        q = nu.run_cmd([learner, "--json", "--quiet", "--connect", addr, *map(str, learner_args)],
                       capture_output=True, text=True)
        err = p.stderr.read()
        p.wait(timeout=nu.HANG_GUARD_S)
        return p.returncode, err, q

    def check_served(self, plugin, traj, seed, steps, agents):
        # The node's seed: the learner's seeded MLP chooses every recorded
        # action, row by row (agents as rows).
        rc, err, q = self.serve(plugin, traj, "--seed", seed)
        self.assertEqual(rc, 0, err)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertIn(f"compared {steps} actions", err)
        self.assertIn(": 0 mismatch(es)", err)
        node = json.loads(q.stdout.strip().splitlines()[-1])["nodes"][0]
        self.assertEqual(node["mode"], "seed")
        self.assertFalse(node["failed"])
        # Every recorded row was served: its steps and each row's first
        # observation.
        m = re.search(r"served (\d+) observations", err)
        self.assertEqual(int(m.group(1)), steps + agents * 8, err)
        # Another seed: the mismatches are counted and the first named.
        rc, err, q = self.serve(plugin, traj, "--seed", seed + 1)
        self.assertEqual(rc, 0, err)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertRegex(err, r": [1-9][0-9]* mismatch\(es\); first: env \d+, agent \d+, "
                              r"episode \d+, step \d+, entry \d+: recorded \d+, learner \d+")

    def test_serve_gridworld_and_catch(self):
        g = self.path("g.traj")
        s = record(g, GRID, "--num-envs", 8, "--steps", 8 * 2 * 100, "--seed", 3)
        self.assertEqual(s["agents"], 2)
        self.check_served(GRID, g, 3, s["steps"], 2)
        c = self.path("c.traj")
        s = record(c, CATCH, "--env-arg", "action=multidiscrete", "--num-envs", 8,
                   "--steps", 8 * 100, "--seed", 5)
        self.assertEqual(self.header(c).layout.parts[0].kind, "multi_discrete")
        self.check_served(CATCH, c, 5, s["steps"], 1)

    def test_serve_checks_actions_as_a_node(self):
        g = self.path("g.traj")
        record(g, GRID, "--num-envs", 2, "--steps", 2 * 2 * 20)
        p = nu.spawn([REPLAY, "--serve", "127.0.0.1:0", "--plugin", GRID, g],
                     stderr=subprocess.PIPE, text=True)
        addr = None
        for line in p.stderr:
            if "serving on" in line:
                addr = line.split()[-1]
                break
        c = wu.Conn(addr)
        f = c.hello()
        self.assertEqual(f.WhichOneof("body"), "welcome")
        # The welcome carries the layout, no ABI 1 spaces.
        w = f.welcome
        self.assertEqual(w.mode, "seed")
        self.assertEqual(w.layout.agents, 2)
        self.assertEqual([t.name for t in w.layout.tensors], ["view", "pos", "goal"])
        self.assertFalse(w.spec.HasField("observation"))
        self.assertEqual(w.spec.num_envs, 2)
        f = c.recv()
        o = f.observations
        # Rows: env x agents + agent, an env's agents together.
        self.assertIn(sorted(o.env), ([0, 1], [2, 3], [0, 1, 2, 3]))
        rows = len(o.env)
        self.assertEqual([t.name for t in o.tensors], ["view", "pos", "goal"])
        self.assertEqual(list(o.tensors[0].shape), [rows, 7, 7])
        self.assertEqual(len(o.tensors[0].data), rows * 49)
        self.assertEqual(len(o.mask), rows * w.layout.mask_width)
        n = w.layout.parts[0].n
        c.send(actions=wu.pb2().Actions(seq=o.seq, discrete=[n] * len(o.env)))
        f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn(f"row 0 entry 0 is {n}, outside [0, {n})", f.error.message)
        p.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 1)

    def test_serve_refuses_bounds_that_are_not_the_envs(self):
        # Trajectory files carry no bounds; a header that claims some must
        # claim the env's (the welcome's come from the env).
        c = self.path("c.traj")
        record(c, CATCH, "--num-envs", 2, "--steps", 20)
        with open(c, "rb") as f:
            recs = split_records(f.read())
        h = self.header(c)
        h.layout.parts[0].low.append(0.0)
        bad = self.path("bad.traj")
        with open(bad, "wb") as f:
            f.write(rewrite(recs, {0: h.SerializeToString()}))
        p = replay("--serve", "127.0.0.1:0", "--plugin", CATCH, bad)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("layout parts[0] carries 1 low and 0 high bounds that are not the env's",
                      p.stderr)

    def test_drop_with_a_slow_disk(self):
        # --record-full drop on the stalling disk: steps that find no buffer
        # are counted, the file says so, and what is there still verifies.
        # Meanwhile the throughput lines carry the metric means.
        gate = nu.DiskGate(self.tmp)
        f = self.path("drop.traj")
        m = nu.Metrics(self.path("m.jsonl"))
        p = nu.spawn([nu.slow_disk_node(), "--json", "--seconds", "0", "--env", GRID,
                      "--num-envs", 16, "--workers", 2, "--record", f, "--record-full", "drop",
                      "--metrics", m.path, "--metrics-interval", 0.05],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=gate.env())
        err = nu.Lines(p.stderr)

        def metric_episodes():
            return (m.tput("metrics", {}).get("success") or {}).get("episodes", 0)

        nu.wait_for(lambda: gate.held() and m.tput("record_dropped") > 0,
                    "steps dropped while the disk is stalled (record_dropped)", proc=p)
        nu.wait_for(lambda: metric_episodes() > 0,
                    "a throughput line with the metric means while the node runs", proc=p)
        gate.open()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=nu.HANG_GUARD_S)
        out = p.stdout.read()
        err.thread.join()
        self.assertEqual(p.returncode, 0, err.text())
        s = json.loads(out.strip().splitlines()[-1])
        self.assertGreater(s["record_dropped"], 0)
        self.assertEqual(s["record_transitions"] + s["record_dropped"], s["steps"])
        r = replay("--verify", "--plugin", GRID, f)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"the recorder dropped \d+ shard steps")
        self.assertLessEqual(verified(r.stderr)[0], s["record_transitions"])

    def test_metrics_file_carries_metric_means(self):
        mf = self.path("m.jsonl")
        s, _ = nu.run("--env", GRID, "--num-envs", 8, "--steps", 8 * 2 * 200, "--seed", 2,
                      "--metrics", mf)
        lines = [r for r in nu.read_metrics(mf) if r["type"] == "throughput"]
        self.assertTrue(lines)
        # The last line is written after every env stopped: the summary's.
        last = lines[-1]["metrics"]
        self.assertEqual(sorted(last), ["length", "success"])
        for name, m in s["metrics"].items():
            self.assertEqual(last[name]["episodes"], m["episodes"])
            self.assertAlmostEqual(last[name]["mean"], m["mean"], places=12)
        self.assertEqual(sum(r["metrics"]["success"]["interval_episodes"] for r in lines),
                         s["metrics"]["success"]["episodes"])
        # An ABI 1 env has no metrics: no field.
        mf1 = self.path("m1.jsonl")
        nu.run("--env", nu.PLUGIN, "--num-envs", 2, "--steps", 400, "--metrics", mf1)
        self.assertTrue(all("metrics" not in r for r in nu.read_metrics(mf1)))


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH, REPLAY = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
