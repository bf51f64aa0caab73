"""The env ABI 2 half of VecEnv's asynchronous stepping (vecenv_async.py):
``recv()`` hands out rows (envs x agents, env e's agents consecutive) and
``send(actions, env_ids)`` takes the action space's batched form for them.

The states, frames and batching are vecenv_async.py's, over rows: an
Observations frame's rows are answered whole, each row's action held in
its frame's answer (int32 [rows, ndisc] and float32 [rows, nbox], the
layout's parts in order) until the frame's last row has one. Actions are
checked (shapes, ranges, each row's mask, bounds) by abi2.check_actions
against the masks those rows came with, before anything is held.

What recv() returns for rows ``ids`` (copies, the caller's): observations
as the space's batched form (a dict of arrays for a Dict),
``infos["env_id"]`` the rows (what send() takes), ``infos["agent_id"]``,
``infos["action_mask"]`` (with a mask), ``final_obs`` (zeros where absent)
with ``_final_obs``, and episode counters per row as step() keeps them.
A mixin of VecEnv, called by vecenv_async.py when the nodes have a layout.
"""
import numpy as np

from . import abi2
from .errors import ProtocolError
from .vecenv_async import IN_FLIGHT


class Abi2AsyncMixin:
    """_async2_own, _async2_acts, _async2_check, _async2_hold, _async2_ingest,
    _async2_transitions for VecEnv."""

    def _async2_own(self):
        """On entering async mode: the per-row arrays become this VecEnv's
        own (reset() handed out views of its infos' arrays), written by
        every frame received from now on."""
        self._t = {k: v.copy() for k, v in self._t.items()}
        self._final = {k: v.copy() for k, v in self._final.items()}
        self._has_final = self._has_final.copy()
        self._reward = self._reward.copy()
        self._flags = self._flags.copy()
        self._step = self._step.copy()
        if self._mask is not None:
            self._mask = self._mask.copy()

    def _async2_acts(self, n):
        """A frame's answer of n rows, before its actions come."""
        lay = self.layout
        return (np.zeros((n, lay.ndisc), np.int32), np.zeros((n, lay.nbox), np.float32))

    def _async2_check(self, actions, ids):
        """actions for rows ids (handed out), checked against the masks they
        came with: (int32 [k, ndisc], float32 [k, nbox]); ValueError."""
        mask = self._mask[ids] if self._mask is not None else None
        return abi2.check_actions(self.layout, actions, len(ids), mask, self.clip_box,
                                  lambda r: self._label2(int(ids[r])))

    @staticmethod
    def _async2_hold(fr, pos, wire, mine):
        fr.acts[0][pos[mine]] = wire[0][mine]
        fr.acts[1][pos[mine]] = wire[1][mine]

    def _async2_ingest(self, timeout):
        """Receive one frame into the per-row arrays: (its rows as global row
        ids, the batch), or None when timeout passes first."""
        b = self.client.recv(timeout)
        if b is None:
            return None
        g = int(self.offsets[b.node]) + b.env.astype(np.int64)
        if (self._state[g] != IN_FLIGHT).any():
            k = int(g[self._state[g] != IN_FLIGHT][0])
            raise ProtocolError(f"{self._label2(k)} came again before its action was sent")
        for name, a in b.tensors.items():
            self._t[name][g] = a
            self._final[name][g] = 0
        self._has_final[g] = False
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
        return g, b

    def _async2_transitions(self, ids):
        """What recv() returns for rows ids (increasing or not): copies."""
        g = self._rows(ids)
        copy = isinstance(g, slice)  # a slice's rows are views: copied

        def take(a):
            return a[g].copy() if copy else a[g]
        obs = {k: take(v) for k, v in self._t.items()}
        final = {k: take(v) for k, v in self._final.items()}
        reward, step, has_final = take(self._reward), take(self._step), take(self._has_final)
        flags = self._flags[:, g].copy()
        terminated, truncated, start = flags[0], flags[1], flags[2]
        stepped = step != 0  # a first observation is no transition
        self.total_steps += int(np.count_nonzero(stepped))
        self._ep_return[ids] += np.where(stepped, reward, 0.0)
        self._ep_length[ids] += stepped
        done = terminated | truncated
        counted = done & (terminated | has_final)
        ep_ret = np.where(counted, self._ep_return[ids], np.nan)
        ep_len = np.where(counted, self._ep_length[ids], 0)
        if done.any():
            self.episode_returns.extend(ep_ret[counted].tolist())
            self.episode_lengths.extend(ep_len[counted].tolist())
            self._ep_return[ids[done]] = 0.0
            self._ep_length[ids[done]] = 0
        infos = {"env_id": ids.copy(), "agent_id": self._agent_id[ids],
                 "step": step, "episode_start": start,
                 "final_obs": self._obs2(final), "_final_obs": has_final,
                 "has_final_obs": has_final, "rollout_episode": {"r": ep_ret, "l": ep_len},
                 "_rollout_episode": counted, "episode_return": ep_ret, "episode_length": ep_len}
        if self._mask is not None:
            infos["action_mask"] = take(self._mask)
        return self._obs2(obs), reward, terminated, truncated, infos


__all__ = ["Abi2AsyncMixin"]
