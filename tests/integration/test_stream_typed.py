"""Stream mode carries env ABI 2 (issue 20; docs/protocol.md "Stream mode"):
the example plugins gridworld (a Dict observation of uint8 and int32 tensors,
an action mask, two agents) and catch (84x84 uint8 pixels; Discrete, or
MultiDiscrete with --env-arg action=multidiscrete) stream segments of their
own tensors to rollout-learner over TCP and over a Unix socket (segments in
shared memory), and to rollout_client.Stream, which sees every tensor by
name with its dtype and shape, every transition once, and no masked action;
a learner's push of the env's format-2 weights is taken, a format-1 push to
a composite action refused by name.

Each run ends by its own --steps and the node's goodbye; every wait has the
hang guard of nodeutil; nothing here decides by the clock.

Run as: test_stream_typed.py ROLLOUT_NODE PLUGIN_SO GRIDWORLD_SO CATCH_SO
(rollout-learner lies beside the node; rollout_pb2 comes from
$ROLLOUT_PROTO_OUT).
"""
import json
import os
import signal
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

LEARNER = GRID = CATCH = None


def start_node(env, *args, listen="127.0.0.1:0"):
    """A stream node of env: (Popen, address, stderr Lines)."""
    return nu.start_listening("stream", "--env", env, "--quiet", *args, listen=listen)


summary = nu.json_summary


def envs():
    """(name, env, env args, agents, tensors (name, dtype, shape of a row),
    discrete entries, mask bytes per row) of each run."""
    return (
        ("gridworld", GRID, [], 2,
         [("view", np.uint8, (7, 7)), ("pos", np.int32, (2,)), ("goal", np.int32, (2,))], 1, 5),
        ("catch", CATCH, [], 1, [("pixels", np.uint8, (1, 84, 84))], 1, 0),
        ("catch multidiscrete", CATCH, ["--env-arg", "action=multidiscrete"], 1,
         [("pixels", np.uint8, (1, 84, 84))], 2, 0),
    )


class CLearner(nu.TempDirCase):
    def test_every_transition_counted_once(self):
        # rollout-learner checks every segment against the welcome's layout
        # (a bad one would end it with status 1) and counts rows: the node's
        # steps, episodes and mean return, over TCP and in shared memory.
        for name, env, env_args, agents, _, _, _ in envs():
            num_envs = 8
            n = num_envs * agents * 120
            for via, listen in (("tcp", "127.0.0.1:0"),
                                ("unix", "unix:" + self.path(name.replace(" ", "_") + ".sock"))):
                with self.subTest(env=name, via=via):
                    p, addr, log = start_node(env, *env_args, "--num-envs", num_envs,
                                              "--workers", 2, "--shard", 2, "--unroll", 16,
                                              "--steps", n, "--seed", 4, listen=listen)
                    # TCP stays TCP (--no-upgrade): the segments carry their bytes.
                    q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet",
                                    *(["--no-upgrade"] if via == "tcp" else [])],
                                   capture_output=True, text=True)
                    s = summary(p, log)
                    self.assertEqual(q.returncode, 0, q.stderr)
                    ls = json.loads(q.stdout.strip().splitlines()[-1])
                    node = ls["nodes"][0]
                    self.assertEqual(node["mode"], "stream")
                    self.assertEqual(s["env_failures"], 0)
                    # Steps are rows (agent steps), as the node counts them.
                    self.assertEqual(s["steps"], n)
                    self.assertEqual(node["steps"], n)
                    self.assertEqual(s["stream_transitions_acked"], n)
                    self.assertGreater(s["episodes"], 0)
                    self.assertEqual(node["episodes"], s["episodes"])
                    self.assertAlmostEqual(node["mean_return"], s["mean_return"], places=6)
                    self.assertEqual((node["duplicates"], node["gaps"]), (0, 0))
                    self.assertGreater(node["segments"], 0)
                    self.assertEqual(node["segments_in_memory"],
                                     node["segments"] if via == "unix" else 0)

    def test_pushed_policies_of_the_envs_layout(self):
        # A learner pushes a format-2 file of gridworld's policy (saved by a
        # local run): the node takes it and its version stamps the rows it
        # chose. A format-1 push (one plain head) is refused by name and the
        # node goes on. Every wait is for a segment or a log line.
        w = self.path("g.pb")
        nu.run("--env", GRID, "--num-envs", 4, "--steps", 4 * 2 * 20, "--seed", 3,
               "--save-policy", w)
        with open(w, "rb") as f:
            data = f.read()
        n, k = rc.decode_varint(data, 0)
        params = rc.pb2().PolicyParams()
        params.ParseFromString(data[k:k + n])
        self.assertEqual(params.format_version, 2)
        self.assertEqual(params.action_kind, "composite")
        params.version = 9
        p, addr, log = start_node(GRID, "--num-envs", 4, "--unroll", 4, "--seconds", 0)
        with rc.Stream([addr]) as st:
            self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
            st.push_policy(params)
            while True:
                b = st.recv(timeout=nu.HANG_GUARD_S)
                self.assertIsNotNone(b, "no segment of the pushed version within the hang guard")
                if b.policy_version_min == 9:
                    break
            self.assertEqual(st.accepted_version(0), 9)
            plain = rc.policy_params([(np.zeros((8, 4)), np.zeros(8)),
                                      (np.zeros((5, 8)), np.zeros(5))])
            st.push_policy(plain)
            with self.assertRaises(rc.RemoteError) as e:
                while True:
                    self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S),
                                         "no answer to the push within the hang guard")
            self.assertIn("action_kind is one plain head (format 1) but the env's action is "
                          "composite", str(e.exception))
        nu.wait_for(lambda: "one plain head (format 1)" in log.text(),
                    "the node's log of the refused push", proc=p)
        p.send_signal(signal.SIGINT)
        s = summary(p, log)
        self.assertEqual(s["policy_pushes"], 1)
        self.assertEqual(s["policy_version"], 9)
        self.assertEqual(s["env_failures"], 0)


class PythonStream(nu.TempDirCase):
    def collect(self, env, env_args, n, listen, shared=True):
        """Every segment of a run, checked as it comes; the node's summary."""
        p, addr, log = start_node(env, *env_args, "--num-envs", 4, "--shard", 2, "--unroll", 8,
                                  "--steps", n, "--seed", 9, listen=listen)
        got = []
        # TCP stays TCP (upgrade=False): the segments carry their bytes.
        with rc.Stream([addr], shared_memory=shared, upgrade=False) as st:
            while True:
                try:
                    b = st.recv(timeout=nu.HANG_GUARD_S)
                except rc.ConnectionClosed as e:
                    self.assertTrue(e.clean, e)
                    break
                self.assertIsNotNone(b, "no segment and no goodbye within the hang guard")
                got.append(b)
        return got, summary(p, log)

    def check_batch(self, b, agents, tensors, ndisc, mask_width):
        t, n = b.t, b.n
        k = len(b.final_index)
        self.assertIsNotNone(b.layout)
        self.assertEqual(b.agents, agents)
        self.assertEqual(n % agents, 0)
        want = {"action": (np.int32, (t, n, ndisc)), "logp": (np.float32, (t, n)),
                "reward": (np.float32, (t, n)), "terminated": (np.uint8, (t, n)),
                "truncated": (np.uint8, (t, n)), "is_first": (np.uint8, (t, n)),
                "episode": (np.uint32, (t, n)), "step": (np.uint32, (t, n)),
                "policy_version": (np.uint64, (t,)), "final_index": (np.int32, (k,))}
        if mask_width:
            want["mask"] = (np.uint8, (t, n, mask_width))
        for name, dt, shape in tensors:
            want["obs/" + name] = (dt, (t, n) + shape)
            want["next_obs/" + name] = (dt, (n,) + shape)
            want["final_obs/" + name] = (dt, (k,) + shape)
        self.assertEqual(sorted(b.tensors), sorted(want))
        for name, (dt, shape) in want.items():
            a = b.tensors[name]
            self.assertEqual((a.dtype, a.shape), (np.dtype(dt), shape), name)
        for name, _, _ in tensors:
            self.assertIs(b.obs[name], b.tensors["obs/" + name])
            self.assertIs(b.next_obs[name], b.tensors["next_obs/" + name])
            self.assertIs(b.final_obs[name], b.tensors["final_obs/" + name])
        self.assertIs(b.action, b.tensors["action"])
        self.assertIsNone(b.action_box)
        self.assertTrue(np.isfinite(b.logp).all())
        self.assertTrue((b.logp <= 0).all())
        self.assertEqual(b.env_ids.tolist(),
                         [b.first_env + r // agents for r in range(n)])
        # Agents of one env share its episode, step and flags.
        for col in (b.episode, b.step, b.terminated, b.truncated, b.is_first):
            rows = col.reshape(t, n // agents, agents)
            self.assertTrue((rows == rows[:, :, :1]).all())

    def test_gridworld_tensors_masks_and_every_transition_once(self):
        n = 4 * 2 * 150
        for via, listen, shared in (("tcp", "127.0.0.1:0", True),
                                    ("unix shared memory", "unix:" + self.path("g.sock"), True),
                                    ("unix bytes", "unix:" + self.path("h.sock"), False)):
            with self.subTest(via):
                got, s = self.collect(GRID, [], n, listen, shared)
                self.assertEqual(s["env_failures"], 0)
                seen = set()
                masked = 0
                for b in got:
                    self.assertEqual(b.in_memory, via == "unix shared memory")
                    self.check_batch(b, 2, [("view", np.uint8, (7, 7)),
                                            ("pos", np.int32, (2,)),
                                            ("goal", np.int32, (2,))], 1, 5)
                    # The mask each action was chosen under allows it.
                    a = b.action[:, :, 0]
                    self.assertTrue(((a >= 0) & (a < 5)).all())
                    allowed = np.take_along_axis(b.mask, a[:, :, None], axis=2)[:, :, 0]
                    self.assertTrue((allowed != 0).all(), "a masked action was taken")
                    masked += int((b.mask == 0).sum())
                    for t in range(b.t):
                        for r in range(b.n):
                            key = (int(b.env_ids[r]), int(b.agent_ids[r]),
                                   int(b.episode[t, r]), int(b.step[t, r]))
                            self.assertNotIn(key, seen, "a transition came twice")
                            seen.add(key)
                # Every transition once: the node's steps are rows.
                self.assertEqual(len(seen), n)
                self.assertEqual(s["steps"], n)
                self.assertGreater(masked, 0, "no move was ever masked: the check checked nothing")
                ends = sum(int((b.terminated[:, ::2] | b.truncated[:, ::2]).sum()) for b in got)
                self.assertEqual(ends, s["episodes"])

    def test_catch_pixels_and_multidiscrete(self):
        n = 4 * 60
        for label, args, ndisc in (("discrete", [], 1),
                                   ("multidiscrete", ["--env-arg", "action=multidiscrete"], 2)):
            with self.subTest(label):
                got, s = self.collect(CATCH, args, n, "unix:" + self.path(label + ".sock"))
                total = 0
                for b in got:
                    self.assertTrue(b.in_memory)
                    self.check_batch(b, 1, [("pixels", np.uint8, (1, 84, 84))], ndisc, 0)
                    self.assertIsNone(b.mask)
                    hi = (3, 2)[:ndisc]
                    self.assertTrue(((b.action >= 0) & (b.action < np.array(hi))).all())
                    # One ball pixel and a paddle: never a blank frame.
                    self.assertTrue((b.obs["pixels"].reshape(b.t * b.n, -1).max(1) > 0).all())
                    # A final observation is where its row's step ended an
                    # episode (auto-reset: the next obs is a fresh one).
                    ended = np.flatnonzero((b.terminated | b.truncated).ravel())
                    self.assertEqual(b.final_index.tolist(), ended.tolist())
                    total += b.num_transitions
                self.assertEqual(total, n)
                self.assertEqual(s["stream_transitions_acked"], n)
                # Every episode of catch is 20 steps: 60 steps of 4 envs end 12.
                self.assertEqual(s["episodes"], 12)


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH = sys.argv[1:3]
    del sys.argv[1:3]
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
