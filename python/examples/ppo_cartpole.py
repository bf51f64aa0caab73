#!/usr/bin/python3
"""PPO on CartPole, learning from the envs of one or more rollout nodes.

Start a node that leaves the forward passes to remote learners, then this:

    build/rollout-node --env cartpole --num-envs 8 --learner remote \\
        --listen 127.0.0.1:5555 --seconds 0 &
    /usr/bin/python3 python/examples/ppo_cartpole.py --node 127.0.0.1:5555

PPO with the clipped surrogate objective, GAE(lambda), advantage
normalisation per minibatch, a value loss, an entropy bonus and Adam. The
node auto-resets envs (docs/env-api.md), so at an episode end the next
observation already belongs to the next episode: a terminated step is not
bootstrapped, a truncated one is bootstrapped from V(final_obs), the ended
episode's real last observation, and GAE never crosses an episode end.

It stops when the mean return of the last 20 finished episodes reaches
--target (or after --total-steps) and prints one JSON line last.
"""
import argparse
import json
import os
import sys
import time

# One thread for torch's intra-op pool, set before torch is imported: the
# nodes' workers already use the cores, and nested pools oversubscribe them
# (our threading post-mortems). torch reads OMP_NUM_THREADS when it loads.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass  # already set (only allowed once, before any inter-op work)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rollout_client as rc  # noqa: E402


def layer(n_in, n_out, gain):
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


class ActorCritic(nn.Module):
    """Separate tanh MLPs for the policy logits and the value."""

    def __init__(self, obs_dim, n_actions, hidden):
        super().__init__()
        g = np.sqrt(2.0)
        self.actor = nn.Sequential(layer(obs_dim, hidden, g), nn.Tanh(),
                                   layer(hidden, hidden, g), nn.Tanh(),
                                   layer(hidden, n_actions, 0.01))
        self.critic = nn.Sequential(layer(obs_dim, hidden, g), nn.Tanh(),
                                    layer(hidden, hidden, g), nn.Tanh(),
                                    layer(hidden, 1, 1.0))

    def value(self, obs):
        return self.critic(obs).squeeze(-1)

    def dist(self, obs):
        return torch.distributions.Categorical(logits=self.actor(obs))


def save_policy(model, path, obs_dim, n_actions, version):
    """Write the actor as a PolicyParams file that `rollout-node --policy
    FILE` runs (tanh hidden layers, logits head)."""
    pb = rc.pb2()
    p = pb.PolicyParams(format_version=1, activation="tanh", obs_dim=obs_dim,
                        action_kind="discrete", action_dim=n_actions, version=version)
    for lin in (m for m in model.actor if isinstance(m, nn.Linear)):
        L = p.layers.add()
        L.weight.shape.extend(lin.weight.shape)
        L.weight.data.extend(lin.weight.detach().reshape(-1).tolist())
        L.bias.shape.extend(lin.bias.shape)
        L.bias.data.extend(lin.bias.detach().tolist())
    with open(path, "wb") as f:
        f.write(rc.encode_frame(p.SerializeToString()))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node", action="append", metavar="HOST:PORT",
                    help="a node to learn from (repeatable; default 127.0.0.1:5555)")
    ap.add_argument("--token", help="the nodes' shared token")
    ap.add_argument("--token-file", help="file holding the nodes' shared token")
    ap.add_argument("--connect-timeout", type=float, default=30.0,
                    help="seconds to wait for a node that is still starting (default 30)")
    ap.add_argument("--total-steps", type=int, default=300_000,
                    help="env steps at most, over all envs (default 300000)")
    ap.add_argument("--target", type=float, default=475.0,
                    help="stop once the last 20 episodes average this (0: never; default 475)")
    ap.add_argument("--quick", action="store_true",
                    help="a short run for tests: 60000 steps at most, stop at mean 150")
    ap.add_argument("--num-steps", type=int, default=32, help="steps per env per update")
    ap.add_argument("--minibatch", type=int, default=256, help="samples per minibatch")
    ap.add_argument("--epochs", type=int, default=20, help="passes over each rollout")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam step size, annealed to 0")
    ap.add_argument("--gamma", type=float, default=0.98)
    ap.add_argument("--gae-lambda", type=float, default=0.8)
    ap.add_argument("--clip", type=float, default=0.2, help="PPO clip range")
    ap.add_argument("--ent-coef", type=float, default=0.001, help="entropy bonus weight")
    ap.add_argument("--vf-coef", type=float, default=0.5, help="value loss weight")
    ap.add_argument("--max-grad-norm", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=64, help="hidden width (two layers)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save-policy", metavar="FILE",
                    help="write the trained actor as PolicyParams for rollout-node --policy")
    ap.add_argument("--log-interval", type=float, default=2.0, help="seconds between progress lines")
    args = ap.parse_args(argv)
    if args.quick:
        args.total_steps = min(args.total_steps, 60_000)
        args.target = 150.0
    args.node = args.node or ["127.0.0.1:5555"]
    return args


def last20(returns):
    return float(np.mean(returns[-20:])) if returns else float("nan")


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    t0 = time.monotonic()
    env = rc.VecEnv(args.node, token=args.token, token_file=args.token_file,
                    name="ppo_cartpole", connect_timeout=args.connect_timeout)
    if env.action_kind != "discrete":
        sys.exit(f"ppo_cartpole needs a discrete action space, the node has {env.action_kind}")
    N, T, D = env.num_envs, args.num_steps, env.obs_dim
    model = ActorCritic(D, env.action_n, args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
    print(f"ppo: {len(env.nodes)} node(s) {', '.join(args.node)}: {env.nodes[0].env}, "
          f"{N} envs, obs_dim {D}, {env.action_n} actions; {T} steps x {N} envs per update",
          flush=True)

    obs_buf = torch.zeros(T, N, D)
    act_buf = torch.zeros(T, N, dtype=torch.long)
    logp_buf = torch.zeros(T, N)
    val_buf = torch.zeros(T, N)
    rew_buf = torch.zeros(T, N)   # reward, plus gamma * V(final_obs) on truncation
    done_buf = torch.zeros(T, N)  # 1 where the step ended an episode: GAE stops there

    obs = torch.from_numpy(env.reset())
    steps, updates = 0, 0
    num_updates = max(1, args.total_steps // (T * N))
    last_log = t0
    reached = False
    for update in range(num_updates):
        frac = 1.0 - update / num_updates
        for g in opt.param_groups:
            g["lr"] = args.lr * frac
        for t in range(T):
            with torch.no_grad():
                d = model.dist(obs)
                a = d.sample()
                obs_buf[t] = obs
                act_buf[t] = a
                logp_buf[t] = d.log_prob(a)
                val_buf[t] = model.value(obs)
            nobs, rew, term, trunc, info = env.step(a.numpy())
            rew = torch.from_numpy(rew)
            # Truncated, not terminated: the episode would have gone on, so
            # its last step is worth r + gamma * V(final_obs). An env failure
            # (truncated, no final_obs) bootstraps from the last observation.
            cut = trunc & ~term
            if cut.any():
                has = info["has_final_obs"] & cut
                with torch.no_grad():
                    if has.any():
                        fin = torch.from_numpy(info["final_obs"][has])
                        rew[torch.from_numpy(has)] += args.gamma * model.value(fin)
                    bad = cut & ~info["has_final_obs"]
                    if bad.any():
                        rew[torch.from_numpy(bad)] += args.gamma * val_buf[t][torch.from_numpy(bad)]
            rew_buf[t] = rew
            done_buf[t] = torch.from_numpy((term | trunc).astype(np.float32))
            obs = torch.from_numpy(nobs)
        steps += T * N

        with torch.no_grad():
            next_val = model.value(obs)
            adv = torch.zeros(T, N)
            gae = torch.zeros(N)
            for t in reversed(range(T)):
                nv = next_val if t == T - 1 else val_buf[t + 1]
                live = 1.0 - done_buf[t]
                delta = rew_buf[t] + args.gamma * nv * live - val_buf[t]
                gae = delta + args.gamma * args.gae_lambda * live * gae
                adv[t] = gae
            ret = adv + val_buf

        b_obs, b_act = obs_buf.reshape(-1, D), act_buf.reshape(-1)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), adv.reshape(-1), ret.reshape(-1)
        size = T * N
        mb = min(args.minibatch, size)
        for _ in range(args.epochs):
            perm = torch.randperm(size)
            for s in range(0, size - mb + 1, mb):
                i = perm[s:s + mb]
                d = model.dist(b_obs[i])
                logp = d.log_prob(b_act[i])
                ratio = torch.exp(logp - b_logp[i])
                A = b_adv[i]
                A = (A - A.mean()) / (A.std() + 1e-8)
                pg = -torch.min(ratio * A, torch.clamp(ratio, 1 - args.clip, 1 + args.clip) * A)
                v_loss = 0.5 * ((model.value(b_obs[i]) - b_ret[i]) ** 2).mean()
                ent = d.entropy().mean()
                loss = pg.mean() + args.vf_coef * v_loss - args.ent_coef * ent
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                opt.step()
        updates += 1

        now = time.monotonic()
        mean20 = last20(env.episode_returns)
        reached = args.target > 0 and len(env.episode_returns) >= 20 and mean20 >= args.target
        if now - last_log >= args.log_interval or reached or update == num_updates - 1:
            last_log = now
            print(f"steps {steps:7d}  episodes {len(env.episode_returns):5d}  "
                  f"last-20 return {mean20:6.1f}  {steps / (now - t0):7.0f} steps/s  "
                  f"{now - t0:6.1f} s", flush=True)
        if reached:
            break

    wall = time.monotonic() - t0
    if args.save_policy:
        save_policy(model, args.save_policy, D, env.action_n, updates)
    env.close("ppo done")
    print(json.dumps({"steps": steps, "wall_s": round(wall, 2),
                      "last20_mean_return": last20(env.episode_returns),
                      "episodes": len(env.episode_returns), "updates": updates,
                      "target": args.target, "reached_target": bool(reached),
                      "num_envs": N, "nodes": args.node}), flush=True)
    return 0 if reached or args.target <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
