"""SEED mode carries env ABI 2 (issue 20; docs/protocol.md "SEED mode and
env ABI 2"): the example plugins gridworld (a Dict observation of uint8 and
int32 tensors, an action mask, two agents) and catch (84x84 uint8 pixels;
Discrete, or MultiDiscrete with --env-arg action=multidiscrete) run with
--learner remote, served by rollout-learner over TCP and over a Unix socket,
and by rollout_client's VecEnv (Gymnasium-shaped spaces, masks in infos).

The plugins fail any step given a masked move (gridworld: into a wall), so
a node's env_failures of 0 says no masked action reached them. Each run
ends by its own --steps and the node's goodbye; every wait has the hang
guard of nodeutil; nothing here decides by the clock.

Run as: test_seed_typed.py ROLLOUT_NODE PLUGIN_SO GRIDWORLD_SO CATCH_SO
(rollout-learner lies beside the node; rollout_pb2 comes from
$ROLLOUT_PROTO_OUT).
"""
import json
import signal
import os
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

LEARNER = GRID = CATCH = None


def start_node(env, *args, listen="127.0.0.1:0"):
    """A SEED node of env: (Popen, address, stderr Lines)."""
    return nu.start_listening("remote", "--env", env, "--quiet", *args, listen=listen)


summary = nu.json_summary


def envs():
    """(name, env, env args, agents) of each run."""
    return (
        ("gridworld", GRID, [], 2),
        ("catch", CATCH, [], 1),
        ("catch multidiscrete", CATCH, ["--env-arg", "action=multidiscrete"], 1),
    )


class CLearner(nu.TempDirCase):
    def test_every_step_served_no_masked_move(self):
        # rollout-learner checks every frame against the welcome's layout
        # (a bad one would end it with status 1), acts with the layout's
        # policy (masks applied) and counts rows; the node checks every
        # action entry (a masked or out-of-range one would close the
        # learner's session: learners_rejected).
        for name, env, env_args, agents in envs():
            num_envs = 8
            n = num_envs * agents * 150
            for via, listen in (("tcp", "127.0.0.1:0"),
                                ("unix", "unix:" + self.path(name.replace(" ", "_") + ".sock"))):
                for policy in ("mlp", "random"):
                    with self.subTest(env=name, via=via, policy=policy):
                        p, addr, log = start_node(env, *env_args, "--num-envs", num_envs,
                                                  "--workers", 2, "--shard", 2, "--steps", n,
                                                  "--seed", 4, listen=listen)
                        # TCP stays TCP (--no-upgrade): the frames carry the columns.
                        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet",
                                        "--policy", policy,
                                        *(["--no-upgrade"] if via == "tcp" else [])],
                                       capture_output=True, text=True)
                        s = summary(p, log)
                        self.assertEqual(q.returncode, 0, q.stderr)
                        ls = json.loads(q.stdout.strip().splitlines()[-1])
                        node = ls["nodes"][0]
                        self.assertEqual(node["mode"], "seed")
                        self.assertEqual(s["env_failures"], 0, log.text())
                        self.assertEqual((s["learners_attached"], s["learners_rejected"]),
                                         (1, 0))
                        self.assertEqual(s["agents"], agents)
                        # Steps are rows (agent steps), on both sides.
                        self.assertEqual(s["steps"], n)
                        self.assertEqual(node["steps"], n)
                        self.assertGreater(s["episodes"], 0)
                        # Episodes are envs', once however many agents.
                        self.assertEqual(node["episodes"], s["episodes"])
                        self.assertAlmostEqual(node["mean_return"], s["mean_return"], places=4)
                        # Over the Unix socket the columns lie in the node's memory.
                        self.assertGreater(node["frames"], 0)
                        self.assertEqual(node["frames_in_memory"],
                                         node["frames"] if via == "unix" else 0)

    def test_remote_run_repeats_the_local_one(self):
        # With the node's seed the learner samples each row from the stream
        # the node's own lanes would (env e's agent a: row e x agents + a),
        # through the same layout policy and masks: the run is the local one,
        # over TCP (frames) and over a Unix socket (shared memory) alike.
        for (name, env, env_args, agents), listen in (
                (e, l) for e in envs() for l in ("127.0.0.1:0", "unix")):
            if listen == "unix":
                listen = "unix:" + self.path(name.replace(" ", "_") + ".local.sock")
            with self.subTest(env=name, listen=listen):
                steps = 8 * agents * 200
                local, _ = nu.run("--env", env, *env_args, "--num-envs", 8, "--steps", steps,
                                  "--seed", 5)
                p, addr, log = start_node(env, *env_args, "--num-envs", 8, "--steps", steps,
                                          "--seed", 5, "--workers", 0, listen=listen)
                q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet", "--workers",
                                0, "--seed", 5], capture_output=True, text=True)
                s = summary(p, log)
                self.assertEqual(q.returncode, 0, q.stderr)
                self.assertEqual(s["env_failures"], 0)
                for k in ("steps", "episodes", "mean_return", "metrics"):
                    self.assertEqual(s[k], local[k], k)


def masked_random(rng, mask):
    """One allowed value per row of a Discrete action's mask."""
    return np.array([rng.choice(np.flatnonzero(m)) for m in mask])


class PythonVecEnv(nu.TempDirCase):
    def spaces_of(self, name):
        """(observation tensors (name, dtype, shape), action space check) of a run."""
        if name == "gridworld":
            return ([("view", np.uint8, (7, 7)), ("pos", np.int32, (2,)),
                     ("goal", np.int32, (2,))], lambda a: self.assertEqual(a.n, 5))
        if name == "catch":
            return ([("pixels", np.uint8, (1, 84, 84))], lambda a: self.assertEqual(a.n, 3))
        return ([("pixels", np.uint8, (1, 84, 84))],
                lambda a: self.assertEqual(a.nvec.tolist(), [3, 2]))

    def test_gymnasium_shaped_run(self):
        # Spaces, dtypes and shapes as the env declares them; rows as envs
        # (env_id, agent_id); a masked random policy (gridworld's masks in
        # infos) never makes the plugin fail a step; every step arrives.
        for name, env, env_args, agents in envs():
            for via, listen in (("tcp", "127.0.0.1:0"),
                                ("unix", "unix:" + self.path(name.replace(" ", "_") + ".sock"))):
                with self.subTest(env=name, via=via):
                    num_envs, per_row = 4, 120
                    n = num_envs * agents * per_row
                    p, addr, log = start_node(env, *env_args, "--num-envs", num_envs,
                                              "--steps", n, "--seed", 9, listen=listen)
                    tensors, check_action = self.spaces_of(name)
                    rng = np.random.default_rng(3)
                    rows = num_envs * agents
                    # TCP stays TCP (upgrade=False): the frames carry the columns.
                    with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step",
                                   upgrade=via == "unix") as v:
                        self.assertEqual(v.num_envs, rows)
                        ospace = v.single_observation_space
                        boxes = ospace.spaces if len(tensors) > 1 else {tensors[0][0]: ospace}
                        self.assertEqual(list(boxes), [t[0] for t in tensors])
                        for tname, dt, shape in tensors:
                            self.assertEqual(boxes[tname].dtype, dt)
                            self.assertEqual(boxes[tname].shape, shape)
                        check_action(v.single_action_space)
                        obs, infos = v.reset()
                        self.assertEqual(infos["env_id"].tolist(),
                                         [r // agents for r in range(rows)])
                        self.assertEqual(infos["agent_id"].tolist(),
                                         [r % agents for r in range(rows)])
                        steps = 0
                        while True:
                            got = obs if len(tensors) > 1 else {tensors[0][0]: obs}
                            for tname, dt, shape in tensors:
                                self.assertEqual(got[tname].dtype, dt)
                                self.assertEqual(got[tname].shape, (rows,) + shape)
                            if name == "gridworld":
                                m = infos["action_mask"]
                                self.assertEqual((m.dtype, m.shape), (np.uint8, (rows, 5)))
                                a = masked_random(rng, m)
                            else:
                                self.assertNotIn("action_mask", infos)
                                a = v.action_space.sample()
                            try:
                                obs, r, te, tr, infos = v.step(a)
                            except rc.ConnectionClosed as e:
                                self.assertTrue(e.clean, e)
                                break
                            steps += rows
                            self.assertEqual(r.shape, (rows,))
                        # The node's last step is not served: it stops there.
                        self.assertEqual(steps + rows, n)
                        self.assertEqual(v.total_steps, steps)
                        self.assertGreater(len(v.episode_returns), 0)
                        if name != "gridworld":  # catch: every episode is 20 steps
                            self.assertEqual(set(v.episode_lengths), {20})
                    s = summary(p, log)
                    self.assertEqual(s["env_failures"], 0, log.text())
                    self.assertEqual(s["steps"], n)
                    self.assertEqual((s["learners_attached"], s["learners_rejected"]), (1, 0))

    def run_record(self, env, env_args, listen):
        """Every step of a masked random run (seeded), as bytes; whether the
        VecEnv had the node's memory; the node's summary."""
        p, addr, log = start_node(env, *env_args, "--num-envs", 4, "--steps", 4 * 2 * 60,
                                  "--seed", 6, "--shard", 2, listen=listen)
        rng = np.random.default_rng(5)
        seen = []
        # TCP stays TCP (upgrade=False): the frames carry the columns.
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step",
                       upgrade=False) as v:
            in_memory = v.client._conns[0].mem is not None
            obs, infos = v.reset()
            while True:
                if "action_mask" in infos:
                    a = masked_random(rng, infos["action_mask"])
                else:
                    a = np.stack([rng.integers(0, n, v.num_envs)
                                  for n in v.single_action_space.nvec], axis=1)
                got = obs if isinstance(obs, dict) else {"obs": obs}
                seen.append(b"".join(x.tobytes() for x in got.values()) + a.tobytes())
                try:
                    obs, r, te, tr, infos = v.step(a)
                except rc.ConnectionClosed:
                    break
                fin = infos["final_obs"] if isinstance(obs, dict) else {"f": infos["final_obs"]}
                seen.append(r.tobytes() + te.tobytes() + tr.tobytes() +
                            b"".join(x.tobytes() for x in fin.values()))
        return seen, in_memory, summary(p, log)

    def test_shared_memory_equals_socket(self):
        # Over a Unix socket the VecEnv reads the node's memory (typed
        # columns by row) and writes its actions there; the run is the one
        # the TCP frames give, step for step, byte for byte.
        for name, env, env_args in (("gridworld", GRID, []),
                                    ("catch", CATCH, ["--env-arg", "action=multidiscrete"])):
            with self.subTest(env=name):
                tcp, mem_tcp, s1 = self.run_record(env, env_args, "127.0.0.1:0")
                unix, mem_unix, s2 = self.run_record(env, env_args,
                                                     "unix:" + self.path(name + ".sock"))
                self.assertEqual((mem_tcp, mem_unix), (False, True))
                self.assertGreater(len(tcp), 50)
                self.assertEqual(len(tcp), len(unix))
                self.assertTrue(tcp == unix, "the shared-memory run differs from the TCP one")
                for s in (s1, s2):
                    self.assertEqual(s["env_failures"], 0)
                self.assertEqual((s1["episodes"], s1["mean_return"]),
                                 (s2["episodes"], s2["mean_return"]))

    def test_autoreset_disabled_dict_observations(self):
        # Gridworld's Dict observation in autoreset_mode "disabled": against
        # a same-step VecEnv on a node of the same seed with the same
        # (masked random) actions, an ended row is the same-step final_obs
        # of every tensor, and reset(options={"reset_mask": done}) gives the
        # same-step observation of the next episode, tensor by tensor.
        pa, a_addr, la = start_node(GRID, "--num-envs", 4, "--seconds", 0, "--seed", 8)
        pb, b_addr, lb = start_node(GRID, "--num-envs", 4, "--seconds", 0, "--seed", 8,
                                    listen="127.0.0.1:0")
        rng = np.random.default_rng(1)
        ended = 0
        with rc.VecEnv([a_addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step") as same, \
                rc.VecEnv([b_addr], timeout=nu.HANG_GUARD_S, autoreset_mode="disabled") as dis:
            oa, ia = same.reset()
            dis.reset()
            while ended < 6:
                act = masked_random(rng, ia["action_mask"])
                oa, _, ta, tra, ia = same.step(act)
                ob, _, tb, trb, ib = dis.step(act)
                np.testing.assert_array_equal(ta | tra, tb | trb)
                done = ta | tra
                for k in oa:
                    np.testing.assert_array_equal(ob[k][~done], oa[k][~done])
                    np.testing.assert_array_equal(ob[k][done], ia["final_obs"][k][done])
                if done.any():
                    ended += int(done.sum())
                    ob2, ib2 = dis.reset(options={"reset_mask": done})
                    for k in oa:
                        np.testing.assert_array_equal(ob2[k], oa[k])
                    np.testing.assert_array_equal(ib2["action_mask"], ia["action_mask"])
        for p, log in ((pa, la), (pb, lb)):
            p.send_signal(signal.SIGINT)
            self.assertEqual(summary(p, log)["env_failures"], 0)

    def test_masked_action_refused_by_name(self):
        p, addr, log = start_node(GRID, "--num-envs", 4, "--steps", 4 * 2 * 30, "--seed", 2)
        rng = np.random.default_rng(0)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step") as v:
            obs, infos = v.reset()
            m = infos["action_mask"]
            a = masked_random(rng, m)
            rows, values = np.nonzero(m == 0)  # a wall next to some agent, at the start
            self.assertGreater(len(rows), 0, "no masked move at the start")
            k, bad = int(rows[0]), int(values[0])
            a2 = a.copy()
            a2[k] = bad
            with self.assertRaises(ValueError) as e:
                v.step(a2)
            self.assertIn(f"env {k // 2} agent {k % 2} (row {k}", str(e.exception))
            self.assertIn(f"is {bad}, which its action mask forbids", str(e.exception))
            with self.assertRaises(ValueError):
                v.step(np.full(8, 5))  # out of range
            obs, r, te, tr, infos = v.step(a)  # still usable: nothing was sent
            self.assertEqual(obs["view"].shape, (8, 7, 7))
            while True:
                try:
                    obs, r, te, tr, infos = v.step(masked_random(rng, infos["action_mask"]))
                except rc.ConnectionClosed:
                    break
        s = summary(p, log)
        self.assertEqual(s["env_failures"], 0)

    def test_tuple_multibinary_box_actions_checked(self):
        # Parts the example plugins lack, through the same checks: a Tuple
        # of a MultiBinary(2) and a Box(2) in [-1, 1] with a mask.
        pb = rc.pb2()
        lay = pb.TrajectoryLayout(agents=1, mask_width=4)
        lay.tensors.add(name="obs", dtype=pb.DTYPE_FLOAT32, shape=[3])
        lay.parts.add(kind="multi_binary", n=2)
        lay.parts.add(kind="box", n=2, shape=[2], low=[-1, -1], high=[1, 1])
        sl = rc.abi2.SeedLayout(lay)
        ospace, aspace = rc.abi2.spaces_of(sl)
        self.assertEqual(ospace.shape, (3,))
        self.assertEqual(len(aspace.spaces), 2)
        mask = np.array([[1, 1, 1, 0], [0, 1, 1, 1]], np.uint8)
        d, b = rc.abi2.check_actions(sl, (np.array([[0, 0], [1, 1]]),
                                          np.array([[0.5, 2.0], [-3.0, 0.0]])), 2, mask)
        self.assertEqual(d.tolist(), [[0, 0], [1, 1]])
        self.assertEqual(b.tolist(), [[0.5, 1.0], [-1.0, 0.0]])  # clipped
        with self.assertRaises(ValueError) as e:
            rc.abi2.check_actions(sl, (np.array([[0, 1], [1, 1]]), np.zeros((2, 2))), 2, mask)
        self.assertIn("row 0 entry 1 is 1, which its action mask forbids", str(e.exception))
        with self.assertRaises(ValueError):
            rc.abi2.check_actions(sl, (np.array([[0, 2], [1, 1]]), np.zeros((2, 2))), 2, None)
        with self.assertRaises(ValueError):
            rc.abi2.check_actions(sl, (np.zeros((2, 2), int), np.full((2, 2), np.nan)), 2, None)
        with self.assertRaises(ValueError):
            rc.abi2.check_actions(sl, np.zeros((2, 2), int), 2, None)  # not a tuple
        with self.assertRaises(ValueError):
            rc.abi2.check_actions(sl, (np.zeros((2, 2), int), np.full((2, 2), 2.0)), 2, None,
                                  clip_box=False)


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH = sys.argv[1:3]
    del sys.argv[1:3]
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
