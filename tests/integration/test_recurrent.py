"""Recurrent policies (--recurrent, docs/policy.md "Recurrent policies")
through the modes: stream segments carry each row's state at their first
step (state/h, state/c) and rollout-learner checks them; rollout-learner in
SEED mode keeps a state per env row, from zeros at episode starts and for
rows taken over from a learner that died; recordings verify and are served.

Each test waits for what the processes report (summaries, segments), with
the hang guard of nodeutil; none decides by the clock.

Run as: test_recurrent.py ROLLOUT_NODE PLUGIN_SO (rollout-learner lies
beside the node; rollout_pb2 comes from $ROLLOUT_PROTO_OUT).
"""
import json
import os
import signal
import subprocess
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402
from recurrent_ref import RefPolicy, log_softmax  # noqa: E402
from rollout_client.framing import encode_frame  # noqa: E402

LEARNER = None


def stream_segments(test, *args):
    """Every segment of a stream node run with args, by (shard, shard_seq),
    copied; and the node's summary."""
    p, addr, log = nu.start_listening("stream", "--quiet", *args)
    got = {}
    with rc.Stream([addr]) as st:
        while True:
            try:
                b = st.recv(timeout=nu.HANG_GUARD_S)
            except rc.ConnectionClosed:
                break
            test.assertIsNotNone(b, "no segment within the hang guard")
            seg = {k: v.copy() for k, v in b.tensors.items()}
            seg["state"] = {k: v.copy() for k, v in b.state.items()}
            got[(b.shard, b.shard_seq)] = seg
    return got, nu.json_summary(p, log)


class Stream(nu.TempDirCase):
    def check_segments(self, cell, unroll=8):
        # The states the node sent are the acting policy's: run the saved
        # policy over each segment from its state/h (and c), the log-
        # probabilities of the actions taken must be the node's, and the
        # state after the last step must be the next segment's first.
        weights = self.path("w.pb")
        got, s = stream_segments(self, "--num-envs", 12, "--shard", 4, "--unroll", unroll,
                                 "--steps", 12 * unroll * 30, "--recurrent", cell,
                                 "--save-policy", weights, "--seed", 5)
        ref = RefPolicy(weights)
        self.assertEqual(s["steps"], 12 * unroll * 30)
        worst_logp = worst_state = 0.0
        nonzero = 0
        for (shard, seq), seg in got.items():
            first = seg["is_first"]
            want = {"gru": ["h"], "lstm": ["h", "c"]}[cell.split(":")[0]]
            self.assertEqual(sorted(seg["state"]), sorted(want))
            state = np.concatenate([seg["state"][k] for k in want], axis=1)
            self.assertEqual(state.shape, (seg["reward"].shape[1], ref.floats))
            self.assertFalse(np.any(state[first[0] != 0]), "a first step's state is not zero")
            nonzero += int(np.any(state != 0))
            for t in range(first.shape[0]):
                logits, state = ref.step(seg["obs"][t], state, first[t])
                a = seg["action"][t]
                lp = log_softmax(logits)[np.arange(len(a)), a]
                worst_logp = max(worst_logp, float(np.abs(lp - seg["logp"][t]).max()))
            nxt = got.get((shard, seq + 1))
            if nxt is None:
                continue
            after = np.concatenate([nxt["state"][k] for k in want], axis=1)
            keep = nxt["is_first"][0] == 0
            if keep.any():
                worst_state = max(worst_state, float(np.abs(after[keep] - state[keep]).max()))
        print(f"{cell}: {len(got)} segments; largest logp difference {worst_logp:.3g}, state "
              f"difference at a segment boundary {worst_state:.3g}")
        self.assertGreater(nonzero, len(got) // 2, "the states stay zero")
        self.assertLess(worst_logp, 1e-4)
        self.assertLess(worst_state, 1e-5)

    def test_gru_segments_carry_the_acting_state(self):
        self.check_segments("gru:16")

    def test_lstm_segments_carry_the_acting_state(self):
        self.check_segments("lstm:8", unroll=5)

    def test_rollout_learner_checks_the_states(self):
        n = 16 * 8 * 40
        p, addr, log = nu.start_listening("stream", "--quiet", "--num-envs", 16, "--unroll", 8,
                                          "--steps", n, "--recurrent", "lstm:8")
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet"], capture_output=True,
                       text=True)
        s = nu.json_summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = json.loads(q.stdout.strip().splitlines()[-1])
        self.assertEqual((s["steps"], ls["steps"]), (n, n))


def write_params(path, params):
    with open(path, "wb") as f:
        f.write(encode_frame(params.SerializeToString()))


def random_gru(path, obs_dim, nact, hid=16, seed=0):
    """A GRU policy whose state matters: torch-like init, head unscaled."""
    g = np.random.default_rng(seed)

    def u(*shape, fan):
        return g.uniform(-1 / fan ** 0.5, 1 / fan ** 0.5, shape)
    layers = [(u(16, obs_dim, fan=obs_dim), u(16, fan=obs_dim)),
              (3 * u(nact, hid, fan=hid), np.zeros(nact))]
    cell = ("gru", 2 * u(3 * hid, 16, fan=hid), 2 * u(3 * hid, hid, fan=hid), u(3 * hid, fan=hid),
            u(3 * hid, fan=hid))
    write_params(path, rc.policy_params(layers, cell=cell))


def zero_detector(path, obs_dim):
    """A GRU whose action says whether its step started from a zero state:
    weights 0 but b_in = 20 and the head, so h' = 1 + (h - 1) / 2 (n = 1, z
    = 1/2): 0.5 from zeros, 0.75 and on after; logits [0, 500 (h - 0.6)]:
    action 0 from a zero state, 1 from any carried one."""
    hid = 2
    bias_ih = np.zeros(3 * hid)
    bias_ih[2 * hid:] = 20.0
    head_w = np.zeros((2, hid))
    head_w[1, 0] = 500.0
    layers = [(np.zeros((4, obs_dim)), np.zeros(4)), (head_w, np.array([0.0, -300.0]))]
    cell = ("gru", np.zeros((3 * hid, 4)), np.zeros((3 * hid, hid)), bias_ih, np.zeros(3 * hid))
    write_params(path, rc.policy_params(layers, cell=cell))


def actions_by_env(replay, rec):
    """{env: [(step, action)]} of a recording, the action that led to each
    step (rollout-replay --dump)."""
    out = nu.run_cmd([replay, "--dump", rec], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    by = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if not r["reset"]:
            by.setdefault(r["env"], []).append(r["action"])
    return by


class Seed(nu.TempDirCase):
    def test_recordings_verify_and_serve_to_the_same_learner(self):
        # A recording of a node acting with a recurrent policy replays bit
        # for bit, and served to rollout-learner with that policy and seed
        # (SEED mode: the learner keeps each row's state) it gets back
        # every recorded action: the learner's state handling is the node's.
        w, rec = self.path("w.pb"), self.path("rec.traj")
        random_gru(w, 4, 2)
        n = 16 * 400
        nu.run("--env", "cartpole", "--num-envs", 16, "--steps", n, "--policy", w, "--seed", 9,
               "--record", rec)
        replay = os.path.join(os.path.dirname(nu.NODE), "rollout-replay")
        v = nu.run_cmd([replay, "--verify", rec], capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("verify OK", v.stderr)
        srv = nu.spawn([replay, "--serve", "127.0.0.1:0", rec], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
        addr = None
        for line in srv.stderr:
            if "serving on" in line:
                addr = line.strip().rsplit(" ", 1)[1]
                break
        self.assertIsNotNone(addr, "rollout-replay did not say where it serves")
        q = nu.run_cmd([LEARNER, "--connect", addr, "--policy", w, "--seed", 9, "--json",
                        "--quiet"], capture_output=True, text=True)
        self.assertEqual(q.returncode, 0, q.stderr)
        rest = srv.stderr.read()
        srv.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(srv.returncode, 0, rest)
        self.assertIn(f"compared {n} actions with the recording: 0 mismatch(es)", rest)
        node = json.loads(q.stdout.strip().splitlines()[-1])["nodes"][0]
        self.assertEqual(node["state_resets"], 0)

    def test_fork_carries_the_state_from_zeros(self):
        # rollout-replay --fork with a recurrent policy: each forked env's
        # state starts from zeros at the fork (mid-episode: the recorded
        # policy's state is not in the recording), is carried from step to
        # step and zeroed at each episode's start. The zero detector says
        # which: action 0 from a zero state, 1 from a carried one.
        parent, w, f = self.path("p.traj"), self.path("z.pb"), self.path("f.traj")
        # One shard: every env has entries before the step.
        nu.run("--env", "cartpole", "--num-envs", 8, "--workers", 1, "--shard", 8,
               "--steps", 8 * 600, "--seed", 3, "--record", parent, "--snapshot-every", 50)
        zero_detector(w, 4)
        replay = os.path.join(os.path.dirname(nu.NODE), "rollout-replay")
        p = nu.run_cmd([replay, "--fork", 2000, "--policy", w, "--steps", 8 * 300, "--record", f,
                        parent], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gru:2", p.stderr)
        v = nu.run_cmd([replay, "--verify", f], capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stderr)
        d = nu.run_cmd([replay, "--dump", f], capture_output=True, text=True)
        rows = [json.loads(line) for line in d.stdout.splitlines()]
        episodes = 0
        for env in range(8):
            steps = [r for r in rows if r["env"] == env and not r["reset"]]
            self.assertEqual(len(steps), 300)
            got = [r["action"] for r in steps]
            want = [0 if i == 0 or r["step"] == 1 else 1 for i, r in enumerate(steps)]
            self.assertEqual(got, want, f"env {env}")
            episodes += sum(r["step"] == 1 for r in steps)
        self.assertGreater(episodes, 8, "no episode started in the fork")

    def test_failover_starts_taken_envs_from_zeros(self):
        # Learner B serves every env; A attaches and takes some (a zero
        # state for each: A never saw them); A is killed mid-episode and its
        # envs go back to B, which holds states of theirs from before A: it
        # must start them from zeros, not from those. The policy's action
        # says which (zero_detector): each env's actions show 0 where its
        # state started from zeros. Episodes never end in this run.
        w, rec, met = self.path("w.pb"), self.path("rec.traj"), self.path("m.jsonl")
        zero_detector(w, 16)
        envs = 8
        p, addr, log = nu.start_listening(
            "remote", "--quiet", "--env", "burn", "--env-arg", "cost_us=0", "--env-arg", "act_n=2",
            "--env-arg", "max_episode_steps=100000000", "--num-envs", envs, "--shard", 1,
            "--seconds", 0, "--record", rec, "--metrics", met, "--metrics-interval", 0.05)
        metrics = nu.Metrics(met)
        common = ["--connect", addr, "--policy", w, "--workers", 0]
        b = nu.spawn([LEARNER, *common, "--json", "--quiet", "--name", "B"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        nu.wait_for(lambda: metrics.tput("steps") > envs * 200, "B serving steps", proc=p)
        a = nu.spawn([LEARNER, *common, "--name", "A"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
        alog = nu.Lines(a.stderr)
        nu.wait_for(lambda: any(" steps (" in x and " 0 steps (" not in x for x in alog.lines),
                    "A answering steps (its progress line)", proc=a)
        a.send_signal(signal.SIGKILL)
        a.wait()
        at_kill = metrics.tput("steps")
        nu.wait_for(lambda: metrics.tput("steps") > at_kill + envs * 200,
                    "the envs stepping on after A died", proc=p)
        p.send_signal(signal.SIGINT)
        nu.json_summary(p, log)
        out = b.stdout.read()
        b.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(b.returncode, 0)
        by = actions_by_env(os.path.join(os.path.dirname(nu.NODE), "rollout-replay"), rec)
        zeros = {e: [i for i, x in enumerate(acts) if x == 0] for e, acts in by.items()}
        self.assertEqual(sorted(by), list(range(envs)))
        moved = [e for e, z in zeros.items() if len(z) > 1]
        print(f"zero-state steps per env: { {e: len(z) for e, z in zeros.items()} }")
        self.assertTrue(moved, "A took no env: nothing was tested")
        for e, z in zeros.items():
            self.assertEqual(z[0], 0, f"env {e}: its first step did not start from zeros")
            # 1: B only; 3: B, A from zeros, B again from zeros. A stale
            # state applied when B took env e back would leave 2.
            self.assertIn(len(z), (1, 3), f"env {e}: zero-state steps at {z}")
        node = json.loads(out.strip().splitlines()[-1])["nodes"][0]
        self.assertEqual(node["state_resets"], len(moved))


class PythonClient(nu.TempDirCase):
    def test_batches_mark_the_rows_to_start_from_zeros(self):
        # Client A serves every env, B attaches and takes some, then leaves
        # (goodbye) and they come back to A. A's batches mark is_first at
        # each env's first step and at the first step it serves after the
        # steps B served; nowhere else (no episode ends in this run).
        envs = 6
        p, addr, log = nu.start_listening(
            "remote", "--quiet", "--env", "burn", "--env-arg", "cost_us=0",
            "--env-arg", "max_episode_steps=100000000", "--num-envs", envs, "--shard", 1,
            "--seconds", 0)
        seen = {"A": {}, "B": {}}

        def serve(name, c, timeout):
            b = c.recv(timeout=timeout)
            if b is None:
                return 0
            for e, k, f, s in zip(b.env, b.step, b.is_first, b.episode_start):
                seen[name].setdefault(int(e), []).append((int(k), bool(f), bool(s)))
            c.send_actions(b, np.zeros(len(b), np.int32))
            return len(b)

        def least(name):
            return min((len(seen[name].get(e, [])) for e in range(envs)), default=0)

        a = rc.Client([addr])
        nu.wait_for(lambda: serve("A", a, 1.0) >= 0 and least("A") >= 5, "A serving every env")
        b = rc.Client([addr])
        nu.wait_for(lambda: serve("A", a, 0.01) >= 0 and serve("B", b, 0.01) >= 0 and
                    len(seen["B"]) > 0 and min(len(v) for v in seen["B"].values()) >= 5,
                    "B taking envs and serving them")
        b.close()
        moved = set(seen["B"])
        at_close = {e: len(seen["A"][e]) for e in moved}
        nu.wait_for(lambda: serve("A", a, 1.0) >= 0 and
                    all(len(seen["A"][e]) > at_close[e] + 3 for e in moved),
                    "the envs B had coming back to A")
        a.close()
        p.send_signal(signal.SIGINT)
        nu.json_summary(p, log)
        for name in ("A", "B"):
            for e, rows in seen[name].items():
                steps = [k for k, _, _ in rows]
                want = [i == 0 or steps[i] != steps[i - 1] + 1 for i in range(len(rows))]
                self.assertFalse(any(s for _, _, s in rows[1:]), "an episode ended")
                self.assertEqual([f for _, f, _ in rows], want, f"{name}, env {e}: {rows[:12]}")
        for e in moved:  # each came back to A after a gap: marked there
            firsts = [k for k, f, _ in seen["A"][e] if f]
            self.assertEqual(len(firsts), 2, f"env {e}: A's first steps {firsts}")


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
