"""VecEnv: the envs of one or more nodes as one vectorized env.

Envs are ordered by (node index, env index): global env ``k`` is env
``k - offset[node]`` of its node. ``step(actions)`` answers every
outstanding batch with the matching slice of ``actions`` and waits until
every env has delivered its next observation.

The protocol has no remote reset: the node resets envs itself when an
episode ends (auto-reset, docs/env-api.md). ``reset()`` therefore only
waits for the first observation of every env.

VecEnv needs to receive every env of its nodes; when other learners share a
node's envs it waits until ``timeout`` and raises TimeoutError naming the
envs that never came. Use :class:`Client` directly in that case.
"""
import numpy as np

from .client import Client
from .errors import ConnectionClosed, ProtocolError


class VecEnv:
    """``VecEnv(["127.0.0.1:7000"])`` or ``VecEnv(client)``; keyword
    arguments other than ``timeout`` go to :class:`Client`. ``timeout`` bounds
    each wait for observations, in seconds."""

    def __init__(self, nodes, timeout=60.0, **client_kwargs):
        self.client = nodes if isinstance(nodes, Client) else Client(nodes, **client_kwargs)
        self.timeout = timeout
        infos = self.client.nodes
        first = infos[0]
        for info in infos[1:]:
            same = (info.obs_shape == first.obs_shape and info.action_kind == first.action_kind
                    and info.action_n == first.action_n
                    and info.action_shape == first.action_shape)
            if not same:
                raise ValueError(f"node {info.address} has other spaces than {first.address}: "
                                 "a VecEnv needs the same observation and action spaces")
        self.nodes = infos
        self.obs_dim = first.obs_dim
        self.action_kind = first.action_kind
        self.action_n = first.action_n
        self.action_shape = first.action_shape
        self.offsets = np.cumsum([0] + [i.num_envs for i in infos])
        self.num_envs = int(self.offsets[-1])
        n, d = self.num_envs, self.obs_dim
        self._obs = np.zeros((n, d), np.float32)
        self._reward = np.zeros(n, np.float32)
        self._terminated = np.zeros(n, bool)
        self._truncated = np.zeros(n, bool)
        self._start = np.zeros(n, bool)
        self._final = np.full((n, d), np.nan, np.float32)
        self._has_final = np.zeros(n, bool)
        self._step = np.zeros(n, np.uint64)
        self._have = np.zeros(n, bool)
        self._outstanding = []  # (batch, global indices of its rows)
        self._ep_return = np.zeros(n, np.float64)
        self._ep_length = np.zeros(n, np.int64)
        self._started = False
        self.episode_returns = []  # every finished episode's return, in order seen
        self.episode_lengths = []
        self.total_steps = 0       # env transitions received after reset()

    def env_ids(self):
        """[(node index, env index)] in global order."""
        return [(i.index, e) for i in self.nodes for e in range(i.num_envs)]

    def _collect(self):
        """Receive until every env has one observation waiting."""
        while not self._have.all():
            gone = [i.address for i in self.nodes if i.index not in self.client.open_nodes]
            if gone:
                raise ConnectionClosed(f"node(s) {', '.join(gone)} closed: this VecEnv "
                                       "cannot step their envs any more",
                                       clean=True, reason="node closed")
            b = self.client.recv(self.timeout)
            if b is None:
                missing = [self.env_ids()[k] for k in np.flatnonzero(~self._have)[:8]]
                raise TimeoutError(
                    f"no observation for {int((~self._have).sum())} of {self.num_envs} envs "
                    f"after {self.timeout:g}s (first (node, env): {missing}); is another "
                    "learner sharing these envs?")
            g = self.offsets[b.node] + b.env.astype(np.int64)
            if self._have[g].any():
                raise ProtocolError(f"node {self.nodes[b.node].address} sent a second "
                                    "observation for an env before its action was answered")
            self._have[g] = True
            self._obs[g] = b.obs
            self._reward[g] = b.reward
            self._terminated[g] = b.terminated
            self._truncated[g] = b.truncated
            self._start[g] = b.episode_start
            self._final[g] = b.final_obs
            self._has_final[g] = b.has_final_obs
            self._step[g] = b.step
            self._outstanding.append((b, g))

    def reset(self):
        """Observations [num_envs, obs_dim] of every env. The first call
        waits for them; later calls return the current ones (no env is
        reset: the node resets envs itself at episode ends)."""
        self._collect()
        self._started = True
        return self._obs.copy()

    def step(self, actions):
        """Send one action per env (shape [num_envs] for discrete spaces,
        [num_envs, *action_shape] for box) and wait for the next
        transition of every env.

        Returns (obs, reward, terminated, truncated, infos). ``obs`` rows of
        envs whose episode ended are the first observation of the next
        episode. ``infos`` holds arrays over envs: ``final_obs`` (the ended
        episode's last observation, NaN rows where absent),
        ``has_final_obs``, ``episode_start``, ``step``, and
        ``episode_return`` / ``episode_length`` (NaN / 0 where no episode
        ended).
        """
        if not self._started:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(actions)
        if a.shape[:1] != (self.num_envs,):
            raise ValueError(f"step needs one action per env ({self.num_envs}), "
                             f"got shape {a.shape}")
        outstanding, self._outstanding = self._outstanding, []
        for b, g in outstanding:
            self.client.send_actions(b, a[g])
        self._have[:] = False
        self._collect()
        n = self.num_envs
        self.total_steps += n
        self._ep_return += self._reward
        self._ep_length += 1
        done = self._terminated | self._truncated
        # A truncation without final_obs is an env failure (docs/env-api.md):
        # the cut episode is not counted as a finished one.
        counted = done & (self._terminated | self._has_final)
        ep_ret = np.full(n, np.nan)
        ep_len = np.zeros(n, np.int64)
        ep_ret[counted] = self._ep_return[counted]
        ep_len[counted] = self._ep_length[counted]
        for k in np.flatnonzero(counted):
            self.episode_returns.append(float(self._ep_return[k]))
            self.episode_lengths.append(int(self._ep_length[k]))
        self._ep_return[done] = 0.0
        self._ep_length[done] = 0
        infos = {"final_obs": self._final.copy(), "has_final_obs": self._has_final.copy(),
                 "episode_start": self._start.copy(), "step": self._step.copy(),
                 "episode_return": ep_ret, "episode_length": ep_len}
        return (self._obs.copy(), self._reward.copy(), self._terminated.copy(),
                self._truncated.copy(), infos)

    def close(self, reason="learner done"):
        self.client.close(reason)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
