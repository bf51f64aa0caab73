"""The remote VecEnv's get_state/set_state against real nodes (issue 35
point 4, docs/protocol.md "Env state"): a restored env repeats its
transitions bit for bit (cartpole, pendulum, hopper when MuJoCo is built,
the gridworld ABI 2 plugin), over the same-host lane and over TCP; blobs
travel between make_vec and a node; an env without state support is
refused by name; hostile requests (crafted blobs, env ids out of range or
named twice, envs another learner holds) are refused and the node
serves on; a shared node and a recording node refuse set_state.

Run as: test_remote_state.py ROLLOUT_NODE BUILD_DIR DRIFT_PLUGIN
GRIDWORLD_PLUGIN. Every wait is for a frame or an exit, with GUARD as the
only clock.
"""
import os
import struct
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE, BUILD, DRIFT, GRIDWORLD = sys.argv[1:5]
del sys.argv[1:5]
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import nodeutil as nu  # noqa: E402  (processes killed at exit and on SIGTERM)

import rollout_client as rc  # noqa: E402
from rollout_client import remote_state  # noqa: E402
from rollout_client.framing import encode_frame  # noqa: E402

GUARD = nu.HANG_GUARD_S  # only a lost event takes this long


def has_mujoco():
    """Whether this build has the MuJoCo envs (-Dmujoco)."""
    try:
        rc.make_vec("rollout/Hopper-v5", 1).close()
        return True
    except ValueError as e:
        if "MuJoCo" in str(e) or "mujoco" in str(e):
            return False
        raise


def run(env, actions, infos=None, seed=0):
    """(obs, reward, terminated, truncated) of each step, as copies. An
    env with action masks (infos["action_mask"], infos the last step's)
    plays a seeded random allowed action per row instead of `actions`."""
    out = []
    rng = np.random.default_rng(seed)
    for a in actions:
        if infos is not None and "action_mask" in infos:
            mask = infos["action_mask"].astype(bool)
            a = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int64)
        o, r, te, tr, infos = env.step(a)
        o = {k: v.copy() for k, v in o.items()} if isinstance(o, dict) else o.copy()
        out.append((o, r.copy(), te.copy(), tr.copy()))
    return out, infos


def ask(cl, frame):
    """Send frame on a Client's first connection and read until its
    env_states answer, keeping the batches that came meanwhile."""
    c = cl._conns[0]
    c.states = None
    c.outbuf += encode_frame(frame.SerializeToString())
    cl._flush(c)
    got = []
    guard = time.monotonic() + GUARD  # a hang guard only
    while c.states is None:
        if time.monotonic() > guard:
            raise AssertionError("no env_states answer came")
        b = cl.recv(timeout=0.05)
        if b is not None:
            got.append(b)
    return c.states, got


def assert_same(test, a, b, what):
    test.assertEqual(len(a), len(b))
    for t, (x, y) in enumerate(zip(a, b)):
        for k in range(4):
            if isinstance(x[k], dict):
                for name in x[k]:
                    np.testing.assert_array_equal(x[k][name], y[k][name],
                                                  err_msg=f"{what}: step {t} {name}")
            else:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{what}: step {t} field {k}")


class RemoteState(nu.TempDirCase):
    def launch(self, env="cartpole", num_envs=4, **kw):
        node = rc.launch_node(env=env, num_envs=num_envs, node=NODE, **kw)
        self.addCleanup(node.stop)
        return node

    def round_trip(self, env, seed, steps=40, before=7):
        """get_state after `before` steps, `steps` more, set_state, the same
        `steps` again: the two runs must be equal bit for bit."""
        _, infos = env.reset(seed=seed)
        env.action_space.seed(seed)
        acts = [env.action_space.sample() for _ in range(before + steps)]
        _, infos = run(env, acts[:before], infos)
        for _ in range(100):  # NEXT_STEP: no env between its episode's end and its reset
            if env._next is None or not env._next.pending.any():
                break
            _, infos = run(env, [env.action_space.sample()], infos)
        else:
            self.fail("an env's reset was pending at each of 100 steps")
        saved = env.get_state()
        self.assertEqual(len(saved), env.num_envs)
        first, _ = run(env, acts[before:], infos, seed=1)
        env.set_state(range(env.num_envs), saved)
        again, _ = run(env, acts[before:], infos, seed=1)
        return first, again, saved

    def test_round_trip_bit_for_bit(self):
        """Each env of a node repeats its transitions after set_state, over
        the lane (same host, the default) and over TCP, in NEXT_STEP and
        SAME_STEP modes (random play: episodes end in between)."""
        envs = ["cartpole", "pendulum"] + (["hopper"] if has_mujoco() else [])
        for name in envs:
            for upgrade, mode in ((True, "next_step"), (False, "same_step")):
                with self.subTest(env=name, upgrade=upgrade):
                    node = self.launch(env=name, num_envs=4, seed=5, workers=2,
                                       extra_args=["--shard", 2])
                    with rc.VecEnv(node.address, timeout=GUARD, upgrade=upgrade,
                                   autoreset_mode=mode) as env:
                        first, again, saved = self.round_trip(env, 5)
                        assert_same(self, first, again, name)
                        self.assertEqual(env._lane is not None, upgrade)
                        self.assertEqual(env.get_state([2]), [env.get_state()[2]])
                    self.assertEqual(node.stop(), 0)
                    self.assertEqual(node.summary()["learners_rejected"], 0)

    def test_next_step_env_between_end_and_reset(self):
        """NEXT_STEP: an env whose episode ended at the last step has
        already started its next one at its node, so its state is that
        episode's first, whose observation the reset step shows. Restored,
        it steps from there at once: its rows are the continuing run's
        from the step after the reset, for the same actions; the others'
        are the same rows."""
        node = self.launch(num_envs=4, seed=8)
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            env.reset(seed=8)
            env.action_space.seed(8)
            for _ in range(500):
                p = env._next.pending
                if p.any() and not p.all():
                    break
                env.step(env.action_space.sample())
            else:
                self.fail("no step left some envs between an episode's end and its reset")
            pending = env._next.pending.copy()
            saved = env.get_state()
            acts = [env.action_space.sample() for _ in range(31)]
            first, _ = run(env, acts)
            for k, x in enumerate(first[0][1:]):  # the reset step: reward 0, no flags
                self.assertFalse(x[pending].any(), f"field {k + 1}")
            env.set_state(range(4), saved)
            self.assertFalse(env._next.pending.any())
            again, _ = run(env, [np.where(pending, acts[t + 1], acts[t]) for t in range(30)])
            for t in range(30):
                for k in range(4):
                    np.testing.assert_array_equal(again[t][k][~pending], first[t][k][~pending],
                                                  err_msg=f"step {t} field {k}")
                    np.testing.assert_array_equal(again[t][k][pending],
                                                  first[t + 1][k][pending],
                                                  err_msg=f"step {t} field {k} (pending)")
        self.assertEqual(node.stop(), 0)

    def test_abi2_plugin(self):
        """The gridworld plugin (env ABI 2, two agents a row each): an env's
        rows share its state; restored, every row repeats."""
        node = self.launch(env=GRIDWORLD, num_envs=3, seed=2)
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            self.assertEqual(env.num_envs, 6)
            first, again, saved = self.round_trip(env, 2, steps=30, before=4)
            assert_same(self, first, again, "gridworld")
            self.assertEqual(saved[0], saved[1])  # env 0's two agent rows
            self.assertNotEqual(saved[0], saved[2])
            with self.assertRaisesRegex(ValueError, "share one state"):
                env.set_state([0, 1], [saved[0], saved[2]])
        self.assertEqual(node.stop(), 0)

    def test_blobs_travel_between_make_vec_and_a_node(self):
        """A make_vec env's state restored in a node's env (and back) goes
        on exactly as it would have in make_vec."""
        local = rc.make_vec("CartPole-v1", num_envs=2, autoreset_mode="same_step")
        self.addCleanup(local.close)
        local.reset(seed=9)
        local.action_space.seed(1)
        acts = [local.action_space.sample() for _ in range(30)]
        run(local, acts[:6])
        blobs = local.get_state()
        want, _ = run(local, acts[6:])
        node = self.launch(num_envs=2, seed=1)
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            env.reset()
            env.set_state([0, 1], blobs)
            assert_same(self, want, run(env, acts[6:])[0], "make_vec -> node")
            back = env.get_state()
        local.set_state([0, 1], back)
        self.assertEqual(local.get_state(), back)

    def test_env_without_state_refused_by_name(self):
        """The drift plugin keeps no state: NotImplementedError naming it;
        the VecEnv steps on."""
        node = self.launch(env=DRIFT, num_envs=2, seed=1)
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            env.reset()
            with self.assertRaisesRegex(NotImplementedError, "env 'drift' has no state support"):
                env.get_state()
            with self.assertRaisesRegex(NotImplementedError, "has no state support"):
                env.set_state([0], [b"\0" * 100])
            env.step(env.action_space.sample())
        self.assertEqual(node.stop(), 0)

    def test_answer_over_the_frame_limit_refused(self):
        """States that would make an answer over the node's frame limit are
        refused by the node, a set_state frame over it by the VecEnv before
        sending (RuntimeError naming the limit, the connection kept); fewer
        at a time are served."""
        node = self.launch(num_envs=8, seed=1, extra_args=["--max-frame-bytes", 1024])
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            env.reset()
            with self.assertRaisesRegex(RuntimeError, "over 1024 bytes, the frame limit"):
                env.get_state()
            half = env.get_state(range(4)) + env.get_state(range(4, 8))
            with self.assertRaisesRegex(RuntimeError, "over node .* frame limit \\(1024\\)"):
                env.set_state(range(8), half)
            env.set_state(range(4), half[:4])
            env.set_state(range(4, 8), half[4:])
            self.assertEqual(env.get_state(range(4)) + env.get_state(range(4, 8)), half)
            *_, infos = env.step(env.action_space.sample())
            # A restored env's next row is a recurrent policy's first: no state for it.
            self.assertTrue(infos["is_first"].all())
            *_, infos = env.step(env.action_space.sample())
            np.testing.assert_array_equal(infos["is_first"], infos["episode_start"])
        self.assertEqual(node.stop(), 0)

    def crafted(self, blob):
        """Blobs that are not a state of blob's env, each with the words the
        node's refusal must hold."""
        def at(off, raw):
            b = bytearray(blob)
            b[off:off + len(raw)] = raw
            return bytes(b)
        return [
            (b"junk", "not an env state: too short"),
            (at(0, b"XXXX"), "wrong magic"),
            (at(4, struct.pack("<I", 7)), "version 7"),
            (at(8, b"pendulum\0"), "not of env 'cartpole'"),
            (at(8, b"x" * 64), "not NUL-terminated"),
            (at(72, struct.pack("<Q", 12345)), "made with other args"),
            (blob + b"\0", "its header says"),
            (blob[:-1], "its header says"),
            (at(88, struct.pack("<Q", 1 << 40)), "its header says"),
        ]

    def test_hostile_states_refused_and_node_serves_on(self):
        """Crafted blobs (size, version, env name, args, magic) are refused
        with ValueError naming what is wrong, nothing restored; frames that
        break the protocol (env ids out of range, named twice, no envs,
        states not one per env) close that learner with an error frame (71),
        and the node serves the next one."""
        node = self.launch(num_envs=4, seed=3)
        with rc.VecEnv(node.address, timeout=GUARD, upgrade=False) as env:
            env.reset(seed=3)
            good = env.get_state()
            for blob, words in self.crafted(good[1]):
                with self.subTest(words=words):
                    with self.assertRaisesRegex(ValueError, words):
                        env.set_state([0, 1], [good[0], blob])
            self.assertEqual(env.get_state(), good)  # all or nothing: env 0 untouched
            with self.assertRaisesRegex(ValueError, "outside"):
                env.get_state([4])
            with self.assertRaisesRegex(ValueError, "named twice"):
                env.set_state([1, 1], [good[1], good[1]])
            env.step(env.action_space.sample())
        bad = [
            ("get_state", lambda f: f.get_state.env.extend([4]), "env 4 at 0 is outside [0, 4)"),
            ("get_state", lambda f: f.get_state.env.extend([2, 2]), "env 2 is named twice"),
            ("get_state", lambda f: f.get_state.SetInParent(), "get_state of 0 envs"),
            ("set_state", lambda f: f.set_state.env.extend([0, 1]),
             "set_state of 2 envs with 0 states"),
            ("get_state", lambda f: f.get_state.env.extend(range(5)), "get_state of 5 envs"),
        ]
        for what, fill, words in bad:
            with self.subTest(words=words):
                with rc.VecEnv(node.address, timeout=GUARD, upgrade=False) as env:
                    env.reset()
                    f = env.client._pb.Frame()
                    fill(f)
                    with self.assertRaises(rc.RemoteError) as cm:
                        remote_state._exchange(env, {0: f.SerializeToString()}, what)
                    self.assertEqual(cm.exception.code, 71)
                    self.assertIn(words, str(cm.exception))
        with rc.VecEnv(node.address, timeout=GUARD) as env:  # served on
            env.reset()
            env.step(env.action_space.sample())
            self.assertEqual(len(env.get_state()), 4)
        self.assertEqual(node.stop(), 0)
        self.assertEqual(node.summary()["learners_rejected"], len(bad))

    def test_set_state_refused_while_shared_or_recording(self):
        """set_state needs the node's sole learner (EBUSY otherwise) and a
        node that does not record (a recording cannot show a restore);
        get_state works on both. A learner asking for an env another one
        holds is refused by name (22): it is not awaiting its answer."""
        node = self.launch(num_envs=4, seed=1, extra_args=["--batch", 1])
        with rc.Client(node.address, connect_timeout=GUARD, upgrade=False) as a, \
                rc.Client(node.address, connect_timeout=GUARD, upgrade=False) as b:
            held = None
            while held is None:  # a answers until the node hands b some envs
                batch = a.recv(timeout=GUARD)
                a.send_actions(batch, np.zeros(len(batch), np.int64))
                held = b.recv(timeout=0)

            e = int(held.env[0])
            f = a._pb.Frame()
            f.get_state.env.append(e)
            refused, _ = ask(a, f)  # b holds e, unanswered: never a's
            self.assertEqual(refused.code, 22)
            self.assertEqual(len(refused.state), 0)
            self.assertIn(f"env {e} is not awaiting this learner's answer", refused.error)
            f = b._pb.Frame()
            f.get_state.env.append(e)
            got, _ = ask(b, f)
            self.assertEqual(got.code, 0)
            f = b._pb.Frame()
            f.set_state.env.append(e)
            f.set_state.state.append(got.state[0])
            a2, _ = ask(b, f)
            self.assertEqual(a2.code, 16)
            self.assertIn("2 learners share this node's envs", a2.error)
            b.send_actions(held, np.zeros(len(held), np.int64))  # b is served on
            self.assertIsNotNone(b.recv(timeout=GUARD))
        self.assertEqual(node.stop(), 0)
        rec = self.launch(num_envs=2, seed=1, extra_args=["--record", self.path("r.traj")])
        with rc.VecEnv(rec.address, timeout=GUARD) as env:
            env.reset()
            saved = env.get_state()
            with self.assertRaisesRegex(RuntimeError, "this node records"):
                env.set_state([0, 1], saved)
            env.step(env.action_space.sample())
        self.assertEqual(rec.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
