"""Hostile nodes against the learners (issue 31): what a node says or puts
in memory that rollout-learner and the Python client must refuse by name,
without using it and without allocating what it asks for.

usage: test_python_hostile.py ROLLOUT_NODE BUILD_DIR [unittest args]"""
import os
import resource
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_POSITIONAL = [a for a in sys.argv[1:3] if not a.startswith("-")]
NODE = _POSITIONAL[0] if _POSITIONAL else None
BUILD = _POSITIONAL[1] if len(_POSITIONAL) > 1 else None
del sys.argv[1:1 + len(_POSITIONAL)]
if BUILD:
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import hostile_node as hn  # noqa: E402
import nodeutil as nu  # noqa: E402

import rollout_client as rc  # noqa: E402
from rollout_client import hotpath  # noqa: E402

GUARD = nu.HANG_GUARD_S


def nan_obs(cols):
    cols["obs"][2 * 4 + 1] = np.nan  # env 2's second value


def inf_reward(cols):
    cols["reward"][3] = np.inf


def odd_flags(cols):
    cols["flags"][1] = 0x44


POISONS = ((nan_obs, "the observation of env 2 holds NaN"),
           (inf_reward, "the reward of env 3 is infinite"),
           (odd_flags, "the flags of env 1 are 0x44, bits no node sets"))


class ValuesInMemory(nu.TempDirCase):
    """A: a learner that reads NaN or out-of-range values from a node's
    memory reports them by name and uses none of them."""

    def test_rollout_learner_names_what_it_refuses(self):
        learner = os.path.join(BUILD, "rollout-learner")
        for poison, says in POISONS:
            with self.subTest(poison.__name__):
                path = self.path(poison.__name__ + ".sock")
                node = hn.seed_node(path, poison=poison)
                p = nu.run_cmd([learner, "--connect", "unix:" + path, "--workers", 0, "--steps",
                                100, "--quiet"], timeout=GUARD, capture_output=True,
                               text=True)
                node.close()
                self.assertNotEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"observations 1 in memory: {says}", p.stderr)
                # Nothing was answered: the values were never used.
                self.assertFalse([f for f in node.got if f.WhichOneof("body") == "actions"])

    def test_the_client_names_what_it_refuses(self):
        for poison, says in POISONS:
            with self.subTest(poison.__name__):
                path = self.path(poison.__name__ + ".sock")
                node = hn.seed_node(path, poison=poison)
                with rc.Client("unix:" + path, connect_timeout=GUARD) as c:
                    self.assertIsNotNone(c._conns[0].mem)  # the memory came with the welcome
                    with self.assertRaises(rc.ProtocolError) as cm:
                        c.recv(timeout=GUARD)
                    self.assertIn(f"observations seq 1 in memory: {says}", str(cm.exception))
                node.close()

    def test_vecenv_hotpath_names_what_it_refuses(self):
        n, d = 4, 3
        m_obs = np.zeros((n, d), np.float32)
        m_final = np.zeros((n, d), np.float32)
        m_reward = np.zeros(n, np.float32)
        m_flags = np.zeros(n, np.uint8)
        m_step = np.zeros(n, np.uint64)

        def take():
            return hotpath.hot.take_frame(
                np.array([0, n], np.uint32), 0, m_obs, m_final, m_reward, m_flags, m_step,
                np.zeros((n, d), np.float32), np.zeros((n, d), np.float32),
                np.zeros(n, np.float32), np.zeros((3, n), bool), np.zeros(n, np.uint64),
                np.zeros(n, bool))
        self.assertEqual(take(), n)
        m_obs[1, 2] = np.nan
        with self.assertRaisesRegex(ValueError, "observation of env 1 in shared memory holds NaN"):
            take()
        m_obs[1, 2] = 0
        m_reward[3] = -np.inf
        with self.assertRaisesRegex(ValueError, "reward of env 3 .* holds an infinity"):
            take()
        m_reward[3] = 0
        m_flags[0] = 8  # a final observation
        m_final[0, 0] = np.nan
        with self.assertRaisesRegex(ValueError, "final observation of env 0"):
            take()
        m_flags[0] = 0x80
        with self.assertRaisesRegex(ValueError, "flags of env 0 .* 0x80"):
            take()

    def test_abi2_memory_values_are_named(self):
        """Env ABI 2's typed columns (abi2.SeedMemory2): the same refusals,
        naming the column and the row, on the copies the learner would use."""
        from rollout_client import abi2
        pb = hn.w.pb2()
        n = 6
        mem = object.__new__(abi2.SeedMemory2)
        mem.num_envs = n
        mem.tensors = {"pos": np.zeros((n, 2), np.float32), "grid": np.zeros((n, 3), np.uint8)}
        mem.final_tensors = {k: np.zeros_like(v) for k, v in mem.tensors.items()}
        mem.mask = None
        mem.step = np.zeros(n, np.uint64)
        mem.reward = np.zeros(n, np.float32)
        mem.flags = np.zeros(n, np.uint8)

        def take():
            return mem.batch(pb.Observations(seq=1, in_memory=True, ranges=[1, 4]), 0, "peer")
        self.assertEqual(take().n, 4)
        mem.tensors["grid"][:] = 255  # any integer value is a value
        self.assertEqual(take().n, 4)
        for poison, says in (
                (lambda: mem.tensors["pos"].__setitem__((3, 1), np.nan),
                 "the tensor 'pos' of row 3 is not finite"),
                (lambda: mem.reward.__setitem__(2, -np.inf), "the reward of row 2 is infinite"),
                (lambda: mem.flags.__setitem__(4, 0x48), "the flags of row 4 is 0x48"),
                (lambda: (mem.flags.__setitem__(1, 8),
                          mem.final_tensors["pos"].__setitem__((1, 0), np.inf)),
                 "the final tensor 'pos' of row 1 is not finite")):
            with self.subTest(says):
                poison()
                with self.assertRaises(rc.ProtocolError) as cm:
                    take()
                self.assertIn(f"observations seq 1 in memory: {says}", str(cm.exception))
                for a in (mem.tensors["pos"], mem.final_tensors["pos"], mem.reward, mem.flags):
                    a[:] = 0
        # Rows outside the frame are not read: a NaN there is not this frame's.
        mem.reward[0] = np.nan
        self.assertEqual(take().n, 4)


def welcome(num_envs=4, obs_shape=(4,), obs_dtype="", action=None):
    pb = hn.w.pb2()
    return pb.Frame(welcome=pb.Welcome(
        protocol_version=1, node_id=7, seed=1, max_frame=1 << 20, mode="seed",
        spec=pb.EnvSpec(env="cartpole", num_envs=num_envs,
                        observation=pb.Space(kind="box", shape=list(obs_shape), dtype=obs_dtype),
                        action=action or pb.Space(kind="discrete", n=2))))


def maxrss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10


class WelcomeSizes(nu.TempDirCase):
    """B: a small welcome that asks for gigabytes is refused, naming the
    field, before anything of its size is allocated (no MemoryError)."""

    def test_a_welcome_too_large_is_named_not_allocated(self):
        pb = hn.w.pb2()
        cases = (
            (welcome(obs_shape=(1 << 26,)), "spec.observation.shape [67108864]"),
            (welcome(num_envs=1 << 25), "spec.num_envs 33554432"),
            (welcome(obs_shape=(1024, 1024, 1024)), "spec.observation.shape [1024, 1024, 1024]"),
            (welcome(obs_shape=(2, 0)), "spec.observation.shape [2, 0]"),
            (welcome(obs_shape=(1,) * 5), "spec.observation.shape [1, 1, 1, 1, 1]"),
            (welcome(num_envs=1 << 20, obs_shape=(1024,), obs_dtype="float64"),
             "spec.num_envs 1048576 x spec.observation.shape [1024] (float64) is over 1024 MiB"),
            (welcome(action=pb.Space(kind="discrete", n=1 << 30)), "spec.action.n 1073741824"),
            (welcome(action=pb.Space(kind="box", shape=[1 << 21])),
             "spec.action.shape [2097152]"),
        )
        before = maxrss_mib()
        for k, (frame, says) in enumerate(cases):
            for make in (rc.Client, rc.VecEnv):
                with self.subTest(case=k, via=make.__name__):
                    path = self.path(f"n{k}{make.__name__}.sock")
                    node = hn.HostileNode(path, frame)
                    with self.assertRaises(rc.ProtocolError) as cm:
                        make("unix:" + path, shared_memory=False, connect_timeout=GUARD)
                    self.assertIn(says, str(cm.exception))
                    node.close()
        # Each of them once drove the client to gigabytes (5.1 GB for
        # [2^26]); refused from the numbers, they cost nothing.
        self.assertLess(maxrss_mib() - before, 256)

    def test_batch_refuses_before_allocating(self):
        box = rc.spaces.box(np.zeros(4, np.float32), np.ones(4, np.float32), (4,), np.float32)
        self.assertEqual(rc.spaces.batch(box, 3).shape, (3, 4))
        for n in (0, (1 << 20) + 1):
            with self.assertRaisesRegex(ValueError, f"cannot batch {n} samples"):
                rc.spaces.batch(box, n)
        big = rc.spaces.box(np.zeros(1 << 10, np.float32), np.ones(1 << 10, np.float32), (1 << 10,),
                              np.float32)
        with self.assertRaisesRegex(ValueError, "268435456 values in all"):
            rc.spaces.batch(big, 1 << 19)


def stream_node(path, segment):
    """A stream node of CartPole-shaped envs (4 envs, unroll 4) at path
    whose welcome hands over a 64 MiB segment memory, then sends the
    Segment segment."""
    pb = hn.w.pb2()
    fd, _ = hn.sealed_memory("hostile-segments", 64 << 20)
    space = pb.Space(kind="box", shape=[4], low=[-1e9] * 4, high=[1e9] * 4)
    welcome = pb.Frame(welcome=pb.Welcome(
        protocol_version=1, node_id=7, seed=1, max_frame=1 << 20, mode="stream", unroll=4,
        window=8, segment_memory_fd=1, segment_memory_bytes=64 << 20,
        spec=pb.EnvSpec(env="cartpole", observation=space,
                        action=pb.Space(kind="discrete", n=2), num_envs=4)))
    node = hn.HostileNode(path, welcome, [fd], [pb.Frame(segment=segment)])
    node.keep = fd
    return node


class SegmentSizes(nu.TempDirCase):
    """C and D: a segment frame of a few hundred bytes that names far more
    than a segment holds (references into the node's memory, or shapes
    without bytes) is refused from its numbers, before anything is
    allocated or copied."""

    def test_amplifying_segments_are_refused_before_allocating(self):
        pb = hn.w.pb2()
        T = pb.NamedTensor

        def seg(*tensors, in_memory=True):
            return pb.Segment(seq=1, t=4, n=4, in_memory=in_memory, tensors=list(tensors))
        whole = 64 << 20
        cases = (
            # C: 24 references to the whole 64 MiB memory, under names the
            # welcome does not give (1.6 GB before the fix) ...
            (seg(*(T(name=f"x{i}", dtype=3, shape=[whole], offset=0) for i in range(24))),
             "segment 1 has tensors the welcome does not name of over"),
            # ... or under a name it gives, with another shape.
            (seg(T(name="obs", dtype=1, shape=[4, 4, whole // 64], offset=0)),
             "segment 1 tensor 'obs' is float32 (4, 4, 1048576); expected float32 (4, 4, 4)"),
            (seg(T(name="reward", dtype=1, shape=[4, 4], offset=whole - 8)),
             "segment tensor 'reward' lies at 67108856..+64, outside the node's shared memory"),
            (seg(T(name="obs", dtype=1, shape=[4, 4, 4]), T(name="obs", dtype=1, shape=[4, 4, 4])),
             "segment 1 tensor 'obs' comes twice"),
            # D: a tensor of no bytes and a huge shape (a 4 EiB request), and
            # one of 40 dims.
            (seg(T(name="obs", dtype=5, shape=[1 << 31, 1 << 31]), in_memory=False),
             "segment 1 tensor 'obs' is uint64 (2147483648, 2147483648); expected float32"),
            (seg(T(name="junk", dtype=1, shape=[1] * 40), in_memory=False),
             "segment 1 tensor 'junk' has 9 dims, over 8"),
            (pb.Segment(seq=1, t=5, n=4),
             "segment 1 of 5 steps of 4 rows (unroll 4, 4 rows)"),
        )
        before = maxrss_mib()
        for k, (segment, says) in enumerate(cases):
            with self.subTest(case=k):
                self.assertLess(len(segment.SerializeToString()), 1024)
                path = self.path(f"s{k}.sock")
                node = stream_node(path, segment)
                with rc.Stream("unix:" + path, connect_timeout=GUARD) as st:
                    with self.assertRaises(rc.ProtocolError) as cm:
                        st.recv(timeout=GUARD)
                    self.assertIn(says, str(cm.exception))
                node.close()
        self.assertLess(maxrss_mib() - before, 256)


class UnclippedActions(unittest.TestCase):
    """Issue 31: clip_box=False with an action outside the box is refused
    by the client, naming the env, before anything is sent: one env's bad
    action does not end the session of every env (the node would close it
    with error 34)."""

    def test_an_unclipped_action_outside_the_box_is_refused_here(self):
        with rc.launch_node("pendulum", 4, node=NODE) as node, \
                rc.Client(node.address, connect_timeout=GUARD) as c:
            b = c.recv(timeout=GUARD)
            acts = np.zeros((b.n, 1), np.float32)
            acts[-1] = 5.0  # pendulum's box is [-2, 2]
            with self.assertRaisesRegex(ValueError, rf"env {int(b.env[-1])} .* has \[5.0\]"):
                c.send_actions(b, acts, clip_box=False)
            c.send_actions(b, np.clip(acts, -2, 2), clip_box=False)  # the session goes on
            self.assertIsNotNone(c.recv(timeout=GUARD))


if __name__ == "__main__":
    unittest.main(verbosity=2)
