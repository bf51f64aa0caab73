"""VecEnv's asynchronous send/recv over env ABI 2 nodes (issue 20):
gridworld (a Dict observation, masks, two agents as rows) and catch with a
MultiDiscrete action, over TCP and over a Unix socket (shared memory).
Every row's trajectory through send/recv, for batch sizes that do and do
not divide the node's frames, is the one step() gives on a node of the
same seed with the same per-row (masked random) action stream; misuses
(rows not handed out, a masked action, a wrong shape) raise at once with a
message and leave the VecEnv usable.

Run as: test_python_vecenv_async_typed.py ROLLOUT_NODE PLUGIN_SO
GRIDWORLD_SO CATCH_SO. Every wait is for an observation or an exit, with
the hang guard of nodeutil as the only clock.
"""
import os
import signal
import sys
import unittest

import numpy as np

import nodeutil as nu
from test_seed_typed import start_node, summary

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

GRID = CATCH = None
STEPS = 40  # transitions compared per row


class Actor:
    """Per row its own seeded stream: a row's action depends only on the
    row, its step count and its mask, whatever batch it comes in."""

    def __init__(self, rows, nvec, seed=7):
        self.rngs = [np.random.default_rng([seed, r]) for r in range(rows)]
        self.nvec = nvec  # MultiDiscrete's, or None for a masked Discrete

    def act(self, rows, mask):
        if self.nvec is None:
            return np.array([self.rngs[r].choice(np.flatnonzero(m))
                             for r, m in zip(rows.tolist(), mask)], np.int64)
        return np.array([[self.rngs[r].integers(0, n) for n in self.nvec]
                         for r in rows.tolist()], np.int64)


def record(obs, j, infos, rew=None, term=None, trunc=None):
    """Row j of a transition (or of a first observation, rew None) as bytes."""
    d = obs if isinstance(obs, dict) else {"obs": obs}
    out = b"".join(v[j].tobytes() for v in d.values())
    if "action_mask" in infos:
        out += infos["action_mask"][j].tobytes()
    if rew is not None:
        out += np.float32(rew[j]).tobytes() + bytes([bool(term[j]), bool(trunc[j])])
        if infos.get("_final_obs", np.zeros(j + 1, bool))[j]:  # (same-step only)
            f = infos["final_obs"] if isinstance(obs, dict) else {"obs": infos["final_obs"]}
            out += b"F" + b"".join(v[j].tobytes() for v in f.values())
    return out


def runs():
    """(name, plugin, env args, num envs, MultiDiscrete nvec or None)."""
    return (("gridworld", GRID, [], 4, None),
            ("catch multidiscrete", CATCH, ["--env-arg", "action=multidiscrete"], 8, [3, 2]))


class AsyncTyped(nu.TempDirCase):
    def node(self, plugin, env_args, num_envs, listen):
        p, addr, log = start_node(plugin, *env_args, "--num-envs", num_envs, "--seconds", 0,
                                  "--seed", 6, "--shard", 2, listen=listen)
        return p, addr, log

    def stop(self, p, log):
        p.send_signal(signal.SIGINT)
        self.assertEqual(summary(p, log)["env_failures"], 0, log.text())

    def sync_run(self, plugin, env_args, num_envs, nvec, listen, mode):
        p, addr, log = self.node(plugin, env_args, num_envs, listen)
        # TCP stays TCP (upgrade=False): the frames carry the columns.
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode=mode,
                       upgrade=False) as v:
            rows = np.arange(v.num_envs)
            actor = Actor(v.num_envs, nvec)
            obs, infos = v.reset()
            got = [[record(obs, j, infos)] for j in rows]
            finals = 0
            for _ in range(STEPS):
                a = actor.act(rows, infos.get("action_mask"))
                obs, rew, term, trunc, infos = v.step(a)
                for j in rows:
                    got[j].append(record(obs, j, infos, rew, term, trunc))
                finals += int((term | trunc).sum())
        self.assertGreater(finals, 0, "no episode ended: episode ends untested")
        self.stop(p, log)
        return got

    def async_run(self, plugin, env_args, num_envs, nvec, listen, batch_size, start, mode):
        p, addr, log = self.node(plugin, env_args, num_envs, listen)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, batch_size=batch_size,
                       autoreset_mode=mode, upgrade=False) as v:
            in_memory = v.client._conns[0].mem is not None
            n = v.num_envs
            actor = Actor(n, nvec)
            got = [[] for _ in range(n)]
            if start == "reset":
                obs, infos = v.reset()
                rows = np.arange(n)
                for j in rows:
                    got[j].append(record(obs, j, infos))
                v.send(actor.act(rows, infos.get("action_mask")), rows)
            else:
                v.async_reset()
            seen = np.full(n, start == "reset")
            while min(len(g) for g in got) <= STEPS:
                obs, rew, term, trunc, infos = v.recv()
                ids = infos["env_id"]
                self.assertEqual(len(ids), batch_size)
                np.testing.assert_array_equal(infos["agent_id"], ids % v.agents)
                # is_first, by row: a row this VecEnv saw step on starts
                # from zeros only where its episode starts.
                np.testing.assert_array_equal(infos["is_first"][seen[ids]],
                                              infos["episode_start"][seen[ids]])
                self.assertTrue(infos["is_first"][~seen[ids]].all())
                seen[ids] = True
                for j, k in enumerate(ids.tolist()):
                    first = infos["step"][j] == 0
                    got[k].append(record(obs, j, infos) if first else
                                  record(obs, j, infos, rew, term, trunc))
                v.send(actor.act(ids, infos.get("action_mask")), ids)
            self.assertGreater(v.total_steps, 0)
        self.stop(p, log)
        return [g[:STEPS + 1] for g in got], in_memory

    def test_every_row_follows_its_synchronous_trajectory(self):
        """In SAME_STEP and in NEXT_STEP (the default: ended envs held for
        their reset step) alike."""
        for name, plugin, env_args, num_envs, nvec in runs():
            for via, mode in (("tcp", "same_step"), ("unix", "same_step"), ("tcp", "next_step")):
                def listen(tag):
                    return "127.0.0.1:0" if via == "tcp" else \
                        "unix:" + self.path(f"{name.replace(' ', '_')}.{tag}.sock")
                want = self.sync_run(plugin, env_args, num_envs, nvec, listen("sync"), mode)
                for batch_size, start in ((3, "async_reset"), (4, "reset"), (8, "async_reset")):
                    with self.subTest(env=name, via=via, mode=mode, batch_size=batch_size,
                                      start=start):
                        got, in_memory = self.async_run(plugin, env_args, num_envs, nvec,
                                                        listen(f"b{batch_size}"), batch_size,
                                                        start, mode)
                        self.assertEqual(in_memory, via == "unix")
                        self.assertEqual(len(got), len(want))
                        for k, (w, g) in enumerate(zip(want, got)):
                            for t, (x, y) in enumerate(zip(w, g)):
                                self.assertTrue(x == y, f"row {k} step {t} differs")

    def test_shapes_and_infos(self):
        p, addr, log = self.node(GRID, [], 4, "127.0.0.1:0")
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, batch_size=3,
                       autoreset_mode="same_step") as v:
            v.async_reset()
            obs, rew, term, trunc, infos = v.recv()
            self.assertEqual(sorted(obs), ["goal", "pos", "view"])
            self.assertEqual((obs["view"].dtype, obs["view"].shape), (np.uint8, (3, 7, 7)))
            self.assertEqual((obs["pos"].dtype, obs["pos"].shape), (np.int32, (3, 2)))
            self.assertEqual(infos["action_mask"].shape, (3, 5))
            self.assertEqual(infos["final_obs"]["view"].shape, (3, 7, 7))
            self.assertEqual(rew.shape, (3,))
            self.assertTrue((infos["step"] == 0).all())
        self.stop(p, log)

    def test_arrays_are_the_callers(self):
        # reset()'s arrays and every recv()'s stay as they were while later
        # frames come in (the VecEnv keeps its own per-row arrays).
        p, addr, log = self.node(GRID, [], 4, "unix:" + self.path("own.sock"))
        rng = np.random.default_rng(2)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, batch_size=4) as v:
            obs, infos = v.reset()
            kept = [(obs, infos, {k: x.copy() for k, x in obs.items()},
                     {k: x.copy() for k, x in infos.items()})]
            v.send(np.array([rng.choice(np.flatnonzero(m)) for m in infos["action_mask"]]),
                   np.arange(8))
            for _ in range(30):
                obs, rew, term, trunc, infos = v.recv()
                kept.append((obs, infos, {k: x.copy() for k, x in obs.items()},
                             {k: x.copy() for k, x in infos.items()
                              if isinstance(x, np.ndarray)}))
                v.send(np.array([rng.choice(np.flatnonzero(m)) for m in infos["action_mask"]]),
                       infos["env_id"])
            for t, (o, i, o0, i0) in enumerate(kept):
                for k in o0:
                    np.testing.assert_array_equal(o[k], o0[k], err_msg=f"recv {t} obs {k}")
                for k in i0:
                    np.testing.assert_array_equal(i[k], i0[k], err_msg=f"recv {t} infos {k}")
        self.stop(p, log)

    def test_misuse_fails_at_once_and_leaves_it_usable(self):
        for via in ("tcp", "unix"):
            with self.subTest(via=via):
                listen = "127.0.0.1:0" if via == "tcp" else "unix:" + self.path("misuse.sock")
                self.misuse(listen)

    def misuse(self, listen):
        p, addr, log = self.node(GRID, [], 4, listen)
        rng = np.random.default_rng(0)
        v = rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, batch_size=8, upgrade=False)
        self.addCleanup(v.close)
        with self.assertRaisesRegex(RuntimeError, "async_reset"):
            v.recv()
        v.async_reset()
        obs, _, _, _, infos = v.recv()
        ids, m = infos["env_id"], infos["action_mask"]
        self.assertEqual(sorted(ids.tolist()), list(range(8)))
        a = np.array([rng.choice(np.flatnonzero(r)) for r in m])
        with self.assertRaisesRegex(RuntimeError, "8 env\\(s\\) returned by recv\\(\\) have no"):
            v.recv()
        with self.assertRaisesRegex(RuntimeError, "asynchronous now"):
            v.step(a)
        with self.assertRaisesRegex(ValueError, "given twice"):
            v.send(a[:2], [ids[0], ids[0]])
        with self.assertRaisesRegex(ValueError, "not an env id"):
            v.send(a[:1], [8])
        rows, values = np.nonzero(m == 0)  # a wall next to some agent, at the start
        self.assertGreater(len(rows), 0, "no masked move at the start")
        bad = a.copy()
        bad[rows[0]] = values[0]
        r = int(ids[rows[0]])
        with self.assertRaisesRegex(ValueError, f"env {r // 2} agent {r % 2} \\(row {r}.*"
                                    f"is {int(values[0])}, which its action mask forbids"):
            v.send(bad, ids)
        with self.assertRaisesRegex(ValueError, "actions"):
            v.send(a[:, None].repeat(2, axis=1), ids)  # a wrong shape
        with self.assertRaisesRegex(ValueError, "actions"):
            v.send(np.full(8, 5), ids)  # out of range
        # One row of a frame of several (the node sends 2 envs, 4 rows, a
        # frame): its frame is held, nothing sent.
        self.assertGreaterEqual(int((v._frame_of[ids] == v._frame_of[ids[0]]).sum()), 2)
        v.send(a[:1], ids[:1])
        with self.assertRaisesRegex(ValueError, "answered already"):
            v.send(a[:1], ids[:1])
        with self.assertRaisesRegex(RuntimeError, "7 env\\(s\\) returned .* and 1 answered"):
            v.recv()
        v.send(a[1:], ids[1:])
        with self.assertRaisesRegex(ValueError, "stepping at its node"):
            v.send(a[:1], ids[:1])  # a row not handed out
        obs, rew, term, trunc, infos = v.recv()  # still usable: every row stepped once
        self.assertEqual(sorted(infos["env_id"].tolist()), list(range(8)))
        self.assertTrue((infos["step"] == 1).all())
        v.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            v.recv()
        self.stop(p, log)  # no masked move reached the env

    def test_batch_size_checked(self):
        p, addr, log = self.node(GRID, [], 4, "127.0.0.1:0")
        with self.assertRaisesRegex(ValueError, "batch_size"):
            rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, batch_size=9)  # 8 rows
        self.stop(p, log)


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH = sys.argv[1:3]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
