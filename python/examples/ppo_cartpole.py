#!/usr/bin/python3
"""PPO on CartPole, learning from the envs of one or more rollout nodes.

Start a node that leaves the forward passes to remote learners, then this:

    build/rollout-node --env cartpole --num-envs 8 --learner remote \\
        --listen 127.0.0.1:5555 --seconds 0 &
    /usr/bin/python3 python/examples/ppo_cartpole.py --node 127.0.0.1:5555

or let it start its own node: ``ppo_cartpole.py --launch 8``.

PPO with the clipped surrogate objective, GAE(lambda), advantage
normalisation per minibatch, a value loss, an entropy bonus and Adam. The
node auto-resets envs (Gymnasium's same-step mode, docs/env-api.md), so at an
episode end the next observation already belongs to the next episode: a
terminated step is not bootstrapped, a truncated one is bootstrapped from
V(final_obs), the ended episode's real last observation, and GAE never
crosses an episode end. Shared with ppo_pendulum.py: ppo_common.py.

It stops when the mean return of the last 20 finished episodes reaches
--target (or after --total-steps) and prints one JSON line last.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppo_common as pc  # noqa: E402  (before torch: one thread)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

DEFAULTS = dict(total_steps=300_000, target=475.0, quick_steps=60_000, quick_target=150.0,
                num_steps=32, minibatch=256, epochs=20, lr=1e-3, gamma=0.98, gae_lambda=0.8,
                ent_coef=0.001)


class ActorCritic(nn.Module):
    """Separate tanh MLPs for the policy logits and the value."""

    def __init__(self, obs_dim, n_actions, hidden):
        super().__init__()
        self.actor = pc.mlp(obs_dim, hidden, n_actions, 0.01)
        self.critic = pc.mlp(obs_dim, hidden, 1, 1.0)

    def value(self, obs):
        return self.critic(obs).squeeze(-1)

    def dist(self, obs):
        return torch.distributions.Categorical(logits=self.actor(obs))


def main(argv=None):
    ap = pc.parser(__doc__.split("\n\n")[0], DEFAULTS)
    args = pc.finish_args(ap, DEFAULTS, argv)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    env, node = pc.open_env(args, "ppo_cartpole", "cartpole", "discrete")
    model = ActorCritic(env.obs_dim, env.action_n, args.hidden)
    print(f"ppo: {len(env.nodes)} node(s) {', '.join(i.address for i in env.nodes)}: "
          f"{env.nodes[0].env}, {env.num_envs} envs, obs_dim {env.obs_dim}, {env.action_n} "
          f"actions; {args.num_steps} steps x {env.num_envs} envs per update", flush=True)
    steps, updates, reached, wall = pc.train(args, env, model, lambda a: a.numpy(), (),
                                             torch.long)
    if args.save_policy:
        pc.save_policy(args.save_policy, model.actor, env.obs_dim, "discrete", env.action_n,
                       updates)
    return pc.report(args, env, node, steps, updates, reached, wall)


if __name__ == "__main__":
    sys.exit(main())
