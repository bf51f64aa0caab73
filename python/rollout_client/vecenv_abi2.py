"""VecEnv over env ABI 2 nodes (docs/python.md "Env ABI 2 nodes"): the
rows of every node (envs x agents, env e's agents consecutive) as one
Gymnasium vector env with Gymnasium-shaped spaces.

``single_observation_space`` is a Dict of Boxes (each tensor's dtype and
shape; a single tensor: that Box), ``single_action_space`` a Discrete,
MultiDiscrete, MultiBinary, Box or a Tuple of them. Observations come as a
dict of batched arrays (or one array); ``infos["env_id"]`` and
``infos["agent_id"]`` say which env and agent each row is,
``infos["action_mask"]`` (uint8 [num_envs, width]) which discrete values
each row may take. ``step(actions)`` takes the action space's batched form
(an int array [num_envs] or [num_envs, k], a float array [num_envs, ...],
a tuple of them for a Tuple) and refuses, with ValueError naming the env
and agent, an action that is out of range or masked. A mixin of VecEnv
(vecenv.py), which calls it when its nodes have a layout.
"""
import numpy as np

from . import abi2, spaces
from .errors import ConnectionClosed, ProtocolError


class Abi2Mixin:
    """The env ABI 2 half of VecEnv: _abi2_init, _collect2, _abi2_step."""

    def _abi2_init(self, infos, batch_size):
        first = infos[0]
        lay = first.layout
        for info in infos[1:]:
            if info.layout is None or not lay.same(info.layout):
                raise ValueError(f"node {info.address} has other spaces than {first.address}: "
                                 "a VecEnv needs the same observation and action spaces")
        self.layout = lay
        self.nodes = infos
        self.agents = lay.agents
        self.offsets = np.cumsum([0] + [i.num_envs for i in infos])
        self.num_envs = n = int(self.offsets[-1])
        self.metadata = {"autoreset_mode": spaces.same_step_mode()}
        self.single_observation_space, self.single_action_space = abi2.spaces_of(lay)
        self.observation_space = spaces.batch(self.single_observation_space, n)
        self.action_space = spaces.batch(self.single_action_space, n)
        self._dict_obs = len(lay.tensors) > 1
        # Row k: env (global, over the nodes' envs in order) and agent.
        self._agent_id = np.arange(n, dtype=np.int64) % lay.agents
        self._env_id = np.arange(n, dtype=np.int64) // lay.agents
        self._have = np.zeros(n, bool)
        self._outstanding = []
        self._ep_return = np.zeros(n, np.float64)
        self._ep_length = np.zeros(n, np.int64)
        self._started = False
        self.episode_returns = []
        self.episode_lengths = []
        self.total_steps = 0
        self._fresh2()
        self._async_init(batch_size)  # vecenv_async.py, over rows

    def _label2(self, k):
        node = int(np.searchsorted(self.offsets, k, side="right")) - 1
        r = k - int(self.offsets[node])
        return (f"env {int(self._env_id[k])} agent {int(self._agent_id[k])} (row {k}: node "
                f"{self.nodes[node].address} env {r // self.agents})")

    def _fresh2(self):
        """New arrays for the next transitions (handed out as they are)."""
        n, lay = self.num_envs, self.layout
        self._t = {name: np.empty((n,) + shape, dt) for name, dt, shape in lay.tensors}
        self._final = {name: np.zeros((n,) + shape, dt) for name, dt, shape in lay.tensors}
        self._has_final = np.zeros(n, bool)
        self._reward = np.empty(n, np.float32)
        self._flags = np.empty((3, n), bool)
        self._step = np.empty(n, np.uint64)
        self._mask = np.ones((n, lay.mask_width), np.uint8) if lay.mask_width else None

    def _collect2(self):
        """Receive until every row has one observation waiting."""
        missing, have = self.num_envs, self._have
        while missing > 0:
            if len(self.client.open_nodes) != len(self.nodes):
                gone = [i.address for i in self.nodes if i.index not in self.client.open_nodes]
                raise ConnectionClosed(f"node(s) {', '.join(gone)} closed: this VecEnv "
                                       "cannot step their envs any more",
                                       clean=True, reason="node closed")
            b = self.client.recv(self.timeout)
            if b is None:
                left = [self._label2(int(k)) for k in np.flatnonzero(~have)[:4]]
                raise TimeoutError(f"no observation for {missing} of {self.num_envs} rows "
                                   f"after {self.timeout:g}s (first: {left}); is another "
                                   "learner sharing these envs?")
            g = int(self.offsets[b.node]) + b.env.astype(np.int64)
            if have[g].any():
                raise ProtocolError(f"node {self.nodes[b.node].address}: a row came twice "
                                    "before its action was answered")
            have[g] = True
            for name, a in b.tensors.items():
                self._t[name][g] = a
            if len(b.final_index):
                rows = g[b.final_index]
                for name, a in b.final_tensors.items():
                    self._final[name][rows] = a
                self._has_final[rows] = True
            self._reward[g] = b.reward
            self._flags[:, g] = (b.terminated, b.truncated, b.episode_start)
            self._step[g] = b.step
            if self._mask is not None:
                self._mask[g] = b.mask
            self._outstanding.append((b, g))
            missing -= b.n

    def _obs2(self, arrays):
        return arrays if self._dict_obs else next(iter(arrays.values()))

    def _infos2(self):
        infos = {"env_id": self._env_id.copy(), "agent_id": self._agent_id.copy(),
                 "step": self._step, "episode_start": self._flags[2]}
        if self._mask is not None:
            infos["action_mask"] = self._mask
        return infos

    def _abi2_step(self, actions):
        # Checked as a whole before anything is sent: a refused action
        # leaves every batch outstanding and the VecEnv as it was.
        disc, box = abi2.check_actions(self.layout, actions, self.num_envs, self._mask,
                                       self.clip_box, self._label2)
        conns, queued = {}, 0
        try:
            for b, g in self._outstanding:
                c = self.client._queue_checked(b, (disc[g], box[g]), self._hold_of(b, g))
                conns[id(c)] = c
                queued += 1
        finally:
            del self._outstanding[:queued]
            for c in conns.values():
                if c.open:
                    self.client._flush(c)
        self._have[:] = False
        self._fresh2()
        self._collect2()
        n = self.num_envs
        self.total_steps += n
        terminated, truncated = self._flags[0], self._flags[1]
        self._ep_return += self._reward
        self._ep_length += 1
        done = terminated | truncated
        counted = done & (terminated | self._has_final)
        ep_ret = np.where(counted, self._ep_return, np.nan)
        ep_len = np.where(counted, self._ep_length, 0)
        if done.any():
            self.episode_returns.extend(ep_ret[counted].tolist())
            self.episode_lengths.extend(ep_len[counted].tolist())
            self._ep_return[done] = 0.0
            self._ep_length[done] = 0
        infos = self._infos2()
        infos.update({"final_obs": self._obs2(self._final), "_final_obs": self._has_final,
                      "has_final_obs": self._has_final, "rollout_episode": {"r": ep_ret, "l": ep_len},
                      "_rollout_episode": counted, "episode_return": ep_ret,
                      "episode_length": ep_len})
        return self._obs2(self._t), self._reward, terminated, truncated, infos


__all__ = ["Abi2Mixin"]
