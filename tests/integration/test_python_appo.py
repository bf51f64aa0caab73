"""The APPO example learns from real stream nodes: python/examples/appo_cartpole.py
(rollout-node --learner stream; the learner pushes weights back).

Run as: test_python_appo.py ROLLOUT_NODE [BUILD_DIR]. A short run (--quick:
at most 500000 env steps, stop at a last-20 mean return of 150, where
random play scores ~22; 80 000 to 180 000 steps were enough for seeds 1-15)
against a token-protected stream node must reach that mean, and show that
the weights went round: the node's log-probabilities equal those of the
actor pushed as the version stamped on each step (--check-logp), the last
pushed version was accepted and chose streamed actions, no step carries a
version we never pushed, and versions never go back within a shard. Then
--launch with two nodes. Learning here is asynchronous, so a run's figures
vary; none is judged by the clock (the timeout is only a hang guard).
Exits 77 (skipped) when torch cannot be imported.
"""
import os
import sys

import nodeutil as nu
from test_python_ppo import SKIP, run_example

HERE = os.path.dirname(os.path.abspath(__file__))


def check_versions(r, what):
    """The push bookkeeping of a result line: failures as strings."""
    bad = []
    if r["accepted_versions"] != [r["last_version"]] * len(r["nodes"]):
        bad.append(f"{what}: nodes accepted {r['accepted_versions']}, the last push was "
                   f"{r['last_version']}")
    if not r["last_version_shown"]:
        bad.append(f"{what}: no segment showed the last pushed version {r['last_version']}")
    if r["foreign_versions"]:
        bad.append(f"{what}: steps stamped with versions never pushed: {r['foreign_versions']}")
    if r["version_regressions"]:
        bad.append(f"{what}: {r['version_regressions']} segments older than one before them "
                   "in their shard")
    if r["versions_seen"] < 1 or r["versions_pushed"] < 2:
        bad.append(f"{what}: {r['versions_pushed']} pushes, {r['versions_seen']} seen")
    return bad


def main():
    node = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    if build:
        os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(build, "proto"))
    probe = nu.run_cmd([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: torch cannot be imported by {sys.executable} ({last}); "
              "install python3-torch to run the APPO test")
        return SKIP
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    from rollout_client.testing import NodeProcess

    fails = []
    tmp = nu.temp_dir("appo")
    token_file = os.path.join(tmp, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("s3cret-token\n")

    # A token on the command line is refused, as in the PPO examples.
    r, p = run_example("appo_cartpole.py", ["--node", "127.0.0.1:1", "--token", "s3cret-token"])
    if p.returncode != 2 or "--token" not in p.stderr:
        fails.append(f"--token on the command line gave exit {p.returncode}, not 2 naming it")

    # A stream node of the learner's network (64-64 tanh), the token from
    # $ROLLOUT_TOKEN_FILE; --connect is --node's other name.
    with NodeProcess(node, "--env", "cartpole", "--num-envs", 64, "--shard", 32, "--unroll", 16,
                     "--hidden", "64,64", "--activation", "tanh", "--seconds", 0, "--quiet",
                     "--json", "--seed", 1, "--token-file", token_file, learner="stream") as n:
        r, p = run_example("appo_cartpole.py", ["--connect", n.address, "--quick", "--seed", 1,
                                                "--check-logp"],
                           env={"ROLLOUT_TOKEN_FILE": token_file})
        code = n.stop()
    if r is None:
        print(f"FAIL: appo_cartpole printed no JSON result (exit {p.returncode})")
        return 1
    if not r["reached_target"] or r["steps"] > 500_000:
        fails.append(f"last-20 mean return {r['last20_mean_return']} after {r['steps']} steps: "
                     f"the quick target {r['target']} not reached within 500000 (random ~22)")
    if r["logp_err_rows"] < 1000 or r["logp_err_max"] > 1e-4:
        fails.append(f"the node's log-probs differ from the pushed actor's by up to "
                     f"{r['logp_err_max']} over {r['logp_err_rows']} steps: not our network")
    fails += check_versions(r, "quick run")
    summary = n.summary()
    if code != 0 or summary is None:
        fails.append(f"the stream node exited {code} after the learner said goodbye")
    else:
        if summary["policy_version"] != r["last_version"]:
            fails.append(f"the node ends on version {summary['policy_version']}, the learner "
                         f"pushed up to {r['last_version']}")
        if summary.get("learners_rejected", 0) != 0:
            fails.append("the node rejected a learner: the token did not arrive")
        if summary["steps"] < r["steps"]:
            fails.append(f"node stepped {summary['steps']} < the learner's {r['steps']}")

    # --launch: two stream nodes started by the example, learnt from at once.
    rl, p = run_example("appo_cartpole.py", ["--launch", 16, "--launch-nodes", 2, "--total-steps",
                                             20_000, "--no-target", "--seed", 2],
                        env={"ROLLOUT_NODE": node})
    if rl is None or p.returncode != 0:
        fails.append(f"appo_cartpole --launch 16 --launch-nodes 2 (exit {p.returncode}): {rl}")
    else:
        if len(rl["nodes"]) != 2 or rl["num_envs"] != 32 or rl["steps"] < 20_000:
            fails.append(f"--launch-nodes 2: {rl['nodes']}, {rl['num_envs']} envs, "
                         f"{rl['steps']} steps")
        for s in rl["node_summaries"]:
            if s["exit"] != 0 or s["policy_version"] != rl["last_version"]:
                fails.append(f"a launched node: {s}, the last push {rl['last_version']}")
        fails += check_versions(rl, "--launch-nodes 2")

    for f in fails:
        print(f"FAIL: {f}")
    print(f"{'PASS' if not fails else 'FAIL'}: APPO last-20 {r['last20_mean_return']:.1f} after "
          f"{r['steps']} steps, {r['versions_pushed']} pushes ({r['versions_seen']} seen in "
          f"segments), log-prob error {r['logp_err_max']:.2g} over {r['logp_err_rows']} steps")
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
