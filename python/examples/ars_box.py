#!/usr/bin/python3
"""Augmented Random Search (ARS, Mania et al. 2018) on a node's box-action envs.

A linear policy, action = clip(M @ obs, low, high), learned from the episode
returns of perturbed copies of M, with numpy only. Start a node that leaves
the actions to remote learners, then this:

    build/rollout-node --env inverted_pendulum --num-envs 16 --learner remote \\
        --listen 127.0.0.1:5555 --seconds 0 &
    /usr/bin/python3 python/examples/ars_box.py --node 127.0.0.1:5555

or let it start its own node: ``ars_box.py --launch 16`` (``--env`` picks
the env, inverted_pendulum by default).

Each iteration draws --directions random directions d_k; env 2k runs
M + nu d_k and env 2k+1 runs M - nu d_k, one episode each, started after the
iteration began (an episode already under way when a new iteration starts
finishes with its old policy and is not counted). When every env has
reported, M moves by step / (b * sigma_R) * sum_k (R+_k - R-_k) d_k over the
b best directions (V1-t). The node auto-resets envs (docs/env-api.md): an
episode's return is the sum of the rewards delivered up to the step flagged
terminated or truncated.

Before the first iteration every env plays one episode with uniform random
actions in the box: the random baseline. It stops when the mean return of
an iteration reaches --target (or after --iterations) and prints one JSON
line last: the baseline, the return of each iteration, the env steps used.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rollout_client as rc  # noqa: E402


class Episodes:
    """Per-env episode bookkeeping over the node's auto-reset stream."""

    def __init__(self, n):
        self.ret = np.zeros(n)
        self.tag = np.full(n, -1)  # what the env's current episode is counted as

    def feed(self, b, on_end, on_start):
        """Account one batch: rewards, ended episodes, new episodes."""
        for j, i in enumerate(b.env):
            self.ret[i] += b.reward[j]
            if b.terminated[j] or b.truncated[j]:
                on_end(i, self.tag[i], self.ret[i])
                self.ret[i] = 0.0
            if b.episode_start[j]:
                self.ret[i] = 0.0
                self.tag[i] = on_start(i)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node", metavar="HOST:PORT",
                    help="the node to learn from (default 127.0.0.1:5555)")
    ap.add_argument("--launch", type=int, metavar="NUM_ENVS",
                    help="start a local rollout-node with this many envs instead of --node "
                         "(rollout_client.launch_node; $ROLLOUT_NODE or rollout-node on PATH)")
    ap.add_argument("--env", default="inverted_pendulum",
                    help="the env of the node --launch starts (default inverted_pendulum)")
    ap.add_argument("--directions", type=int, default=8, help="directions per iteration")
    ap.add_argument("--top", type=int, default=4, help="best directions used per update")
    ap.add_argument("--nu", type=float, default=0.1, help="exploration noise")
    ap.add_argument("--step", type=float, default=0.2, help="step size")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--target", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--recv-timeout", type=float, default=60.0,
                    help="seconds without observations before giving up")
    args = ap.parse_args()
    if args.launch is not None and args.node:
        ap.error("give --node or --launch, not both")
    rng = np.random.default_rng(args.seed)
    node = None
    if args.launch is not None:
        node = rc.launch_node(env=args.env, num_envs=args.launch, seed=args.seed)
    try:
        run(args, rng, [node.address] if node else [args.node or "127.0.0.1:5555"])
    finally:
        if node is not None:
            node.stop()


def run(args, rng, addresses):
    """ARS against the nodes at addresses; prints the JSON line."""
    client = rc.Client(addresses, connect_timeout=30.0)
    info = client.nodes[0]
    if info.action_kind != "box":
        sys.exit(f"ars_box.py: env {info.env} has {info.action_kind} actions, not a box")
    n, k = info.num_envs, args.directions
    if n < 2 * k:
        sys.exit(f"ars_box.py: {2 * k} envs needed for {k} directions, the node has {n}")
    low, high = info.action_low, info.action_high
    M = np.zeros((info.action_size, info.obs_dim))
    eps = Episodes(n)
    state = {"phase": "random", "it": 0, "deltas": None, "params": [None] * n,
             "returns": np.full(n, np.nan), "steps": 0}
    baseline, history = [], []

    def on_start(i):
        """The policy an env's new episode runs, and the tag it is counted under."""
        if state["phase"] == "random":
            state["params"][i] = None
            return -2 if i < 2 * k else -1
        if i >= 2 * k:
            state["params"][i] = M
            return -1
        d = state["deltas"][i // 2]
        state["params"][i] = M + (args.nu if i % 2 == 0 else -args.nu) * d
        return state["it"]

    def on_end(i, tag, ret):
        if tag == -2 and state["phase"] == "random" and len(baseline) < 2 * k:
            baseline.append(ret)
        elif tag == state["it"] and state["phase"] == "ars" and np.isnan(state["returns"][i]):
            state["returns"][i] = ret

    def new_iteration():
        state["deltas"] = rng.standard_normal((k,) + M.shape)
        state["returns"][:] = np.nan

    try:
        for b in client.batches(timeout=args.recv_timeout):
            eps.feed(b, on_end, on_start)
            state["steps"] += b.n
            if state["phase"] == "random" and len(baseline) >= 2 * k:
                state["phase"] = "ars"
                new_iteration()
            elif state["phase"] == "ars" and not np.isnan(state["returns"][:2 * k]).any():
                r = state["returns"][:2 * k].reshape(k, 2)
                history.append(float(r.mean()))
                best = np.argsort(-r.max(axis=1))[:args.top]
                sigma = r[best].std() or 1.0
                grad = sum((r[j, 0] - r[j, 1]) * state["deltas"][j] for j in best)
                M += args.step / (args.top * sigma) * grad
                state["it"] += 1
                if history[-1] >= args.target or state["it"] >= args.iterations:
                    break
                new_iteration()
            acts = np.empty((b.n, info.action_size), np.float32)
            for j, i in enumerate(b.env):
                p = state["params"][i]
                if p is None:
                    acts[j] = rng.uniform(low, high)
                else:
                    acts[j] = np.clip(p @ b.obs[j], low, high)
            client.send_actions(b, acts)
    finally:
        client.close("ars done")
    print(json.dumps({"env": info.env, "random_mean_return": float(np.mean(baseline)),
                      "iteration_mean_returns": history, "iterations": len(history),
                      "steps": state["steps"], "policy": M.tolist()}))


if __name__ == "__main__":
    main()
