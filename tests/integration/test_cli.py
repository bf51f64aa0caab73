"""Bad flags and values exit with status 2 and one clear line."""
import os
import unittest

import nodeutil as nu


def node(*args):
    return nu.run_cmd([nu.NODE, *args], capture_output=True, text=True)


class Cli(nu.TempDirCase):
    def expect_error(self, args, *needles):
        p = node(*args)
        self.assertEqual(p.returncode, 2, f"{args}: {p.stderr}")
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"{args}: expected one line, got {p.stderr!r}")
        for n in needles:
            self.assertIn(n, lines[0], f"{args}")
        self.assertEqual(p.stdout, "")

    def test_help_and_version(self):
        p = node("--help")
        self.assertEqual(p.returncode, 0)
        for flag in ("--env", "--env-arg", "--num-envs", "--workers", "--batch", "--max-wait-us",
                     "--policy", "--hidden", "--seed", "--steps", "--seconds", "--metrics",
                     "--json"):
            self.assertIn(flag, p.stdout)
        p = node("--version")
        self.assertEqual(p.returncode, 0)
        self.assertTrue(p.stdout.startswith("rollout-node "))

    def test_unknown_env(self):
        self.expect_error(["--env", "nosuch"], "unknown env 'nosuch'", "cartpole")

    def test_bad_numbers(self):
        self.expect_error(["--num-envs", "0"], "--num-envs '0'")
        self.expect_error(["--batch", "-4"], "--batch '-4'")
        self.expect_error(["--workers", "two"], "--workers 'two'")
        self.expect_error(["--seconds", "-1"], "--seconds '-1'")

    def test_unknown_env_arg(self):
        self.expect_error(["--env-arg", "foo=1"], "no arg 'foo'", "max_episode_steps")
        self.expect_error(["--env", "burn", "--env-arg", "cost_us=abc"], "cost_us")

    def test_unreadable_policy_file(self):
        self.expect_error(["--policy", self.path("missing.pb")], "missing.pb")
        with open(self.path("junk.pb"), "wb") as f:
            f.write(b"\xff\xff\xff\xff not a policy")
        self.expect_error(["--policy", self.path("junk.pb")], "junk.pb")

    def test_unknown_flag(self):
        self.expect_error(["--frobnicate"], "unknown option '--frobnicate'")

    def test_oversubscription_refused(self):
        self.expect_error(["--workers", "1000"], "--workers 1000", "--overcommit")

    def test_metrics_unwritable(self):
        self.expect_error(["--metrics", self.path("no/such/dir/m.jsonl")], "--metrics")

    def test_remote_listen_errors(self):
        self.expect_error(["--learner", "remote", "--listen", "0.0.0.0:0"], "--token-file")
        self.expect_error(["--learner", "remote", "--listen", "localhost"], "--listen 'localhost'")
        self.expect_error(["--learner", "both"], "--learner 'both'")
        self.expect_error(["--learner", "remote", "--listen", "127.0.0.1:0", "--token-file",
                           self.path("none")], "--token-file")

    def test_conflicting_flags_refused(self):
        """Flags the others would make meaningless exit 2 with one line
        (issue 16, defect 7), before anything starts."""
        w = self.path("w.pb")
        nu.run("--num-envs", 4, "--steps", 4, "--hidden", "8,8", "--save-policy", w)
        for args, needles in (
                (["--policy", w, "--hidden", "64,64"], ["--hidden", "w.pb"]),
                (["--policy", w, "--activation", "relu"], ["--activation"]),
                (["--policy", "random", "--hidden", "8"], ["--hidden", "--policy random"]),
                (["--record-full", "drop"], ["--record-full", "--record PATH"]),
                (["--record-max-bytes", "8192"], ["--record-max-bytes", "--record PATH"]),
                (["--record-error", "continue"], ["--record-error", "--record PATH"]),
                (["--metrics-every", "1"], ["--metrics-every", "--metrics FILE"]),
                (["--learner", "remote", "--policy", "random"], ["--policy", "remote"]),
                (["--token-file", self.path("t")], ["--token-file", "--listen"]),
                (["--num-envs", 8, "--workers", 2, "--overcommit", "--shard", 5],
                 ["--shard 5", "lane's 4 envs"]),
                (["--num-envs", 64, "--shard", 16, "--batch", 8],
                 ["--shard 16", "--batch 8"])):
            self.expect_error(args, *needles)

    def test_learner_conflicting_flags_refused(self):
        learner = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
        for args, needle in ((["--policy", "random", "--gemm", "openblas"], "--gemm"),
                             (["--push-policy", self.path("w.pb"), "--batch", 8], "--batch")):
            p = nu.run_cmd([learner, "--connect", "127.0.0.1:1", *args], capture_output=True,
                           text=True)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(needle, p.stderr)

    def test_small_batch_sets_the_shard(self):
        """--batch below the automatic shard size is honoured (the shard
        shrinks), not raised to the shard."""
        s, _ = nu.run("--num-envs", 256, "--workers", 1, "--batch", 4, "--steps", 256 * 4)
        self.assertEqual((s["batch"], s["shard"]), (4, 4))

    def test_plugin_errors(self):
        self.expect_error(["--env", self.path("nothere.so")], "nothere.so")


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
