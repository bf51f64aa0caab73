"""Bad flags and values exit with status 2 and one clear line."""
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

    def test_plugin_errors(self):
        self.expect_error(["--env", self.path("nothere.so")], "nothere.so")


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
