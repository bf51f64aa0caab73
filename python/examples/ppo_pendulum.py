#!/usr/bin/python3
"""PPO on Pendulum (continuous actions), learning from rollout nodes.

    build/rollout-node --env pendulum --num-envs 16 --learner remote \\
        --listen 127.0.0.1:5555 --seconds 0 &
    /usr/bin/python3 python/examples/ppo_pendulum.py --node 127.0.0.1:5555

or ``ppo_pendulum.py --launch 16`` to start its own node.

A Gaussian policy: a tanh MLP gives the mean of each action dimension and a
state-independent log standard deviation is learnt beside it, the head that
``rollout-node --policy FILE`` runs for box actions (docs/policy.md), so
``--save-policy`` writes weights the node can run. Sampled actions are sent
as they are; the client clips them to the action bounds ([-2, 2]) and the
log-probabilities are those of the unclipped samples. Rewards are scaled
by --reward-scale for learning. Pendulum's episodes are 200 steps, always
truncated: each is bootstrapped from V(final_obs). The rest is
ppo_common.py, shared with ppo_cartpole.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppo_common as pc  # noqa: E402  (before torch: one thread)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

DEFAULTS = dict(total_steps=1_000_000, target=-200.0, quick_steps=40_000, quick_target=-700.0,
                num_steps=64, minibatch=256, epochs=10, lr=1e-3, gamma=0.9, gae_lambda=0.95,
                ent_coef=0.0, reward_scale=0.1)


class GaussianActorCritic(nn.Module):
    """mean = actor(obs), std = exp(log_std); a separate value MLP."""

    def __init__(self, obs_dim, action_dim, hidden, log_std0):
        super().__init__()
        self.actor = pc.mlp(obs_dim, hidden, action_dim, 0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std0)))
        self.critic = pc.mlp(obs_dim, hidden, 1, 1.0)

    def value(self, obs):
        return self.critic(obs).squeeze(-1)

    def dist(self, obs):
        normal = torch.distributions.Normal(self.actor(obs), self.log_std.exp())
        return torch.distributions.Independent(normal, 1)


def main(argv=None):
    ap = pc.parser(__doc__.split("\n\n")[0], DEFAULTS)
    ap.add_argument("--log-std", type=float, default=0.0,
                    help="initial log standard deviation of the actions (default 0)")
    args = pc.finish_args(ap, DEFAULTS, argv)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    env, node = pc.open_env(args, "ppo_pendulum", "pendulum", "box")
    action_dim = int(np.prod(env.action_shape))
    model = GaussianActorCritic(env.obs_dim, action_dim, args.hidden, args.log_std)
    print(f"ppo: {len(env.nodes)} node(s) {', '.join(i.address for i in env.nodes)}: "
          f"{env.nodes[0].env}, {env.num_envs} envs, obs_dim {env.obs_dim}, action "
          f"{env.single_action_space}; {args.num_steps} steps x {env.num_envs} envs per update",
          flush=True)
    shape = (action_dim,)
    steps, updates, reached, wall = pc.train(
        args, env, model, lambda a: a.numpy().reshape((env.num_envs,) + env.action_shape),
        shape, torch.float32)
    if args.save_policy:
        pc.save_policy(args.save_policy, model.actor, env.obs_dim, "box", action_dim, updates,
                       log_std=model.log_std)
    return pc.report(args, env, node, steps, updates, reached, wall,
                     {"action_std": [round(float(v), 4) for v in model.log_std.exp()]})


if __name__ == "__main__":
    sys.exit(main())
