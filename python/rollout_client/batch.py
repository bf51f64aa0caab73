"""Batch: one Observations frame of an env ABI 1 node as numpy arrays (what
Client.recv() returns; an env ABI 2 node's is abi2.Abi2Batch)."""
import numpy as np


class Batch:
    """One Frame{observations}: the transitions of some envs of one node.

    Row i is env ``env[i]`` of node ``node``. Per docs/env-api.md, a row
    whose step ended an episode carries the reward and flags of the ended
    episode, the first observation of the next one (``episode_start``) and,
    in ``final_obs[i]``, the ended episode's last observation
    (``has_final_obs[i]``; NaN rows where absent). The same rows come
    compact as ``final_index`` (positions 0..n-1, int64) and ``final_rows``
    (one observation each); ``final_obs`` and ``has_final_obs`` are made
    from them when first read. Every array is the batch's own.

    ``is_first`` (bool [n]) says which rows a recurrent learner starts from
    a zero state: the episode starts, and the rows whose previous step this
    Client did not deliver (envs it takes over from another learner that
    left, a restarted node's envs, a step sent again after a reconnect), so
    that no state is carried into a step it was not computed for
    (docs/python.md "Recurrent learners").
    """

    __slots__ = ("node", "seq", "env", "step", "obs", "reward", "terminated", "truncated",
                 "episode_start", "final_index", "final_rows", "env_range", "_final_obs",
                 "_has_final_obs", "in_memory", "is_first")

    def __init__(self, node, seq, env, step, obs, reward, terminated, truncated,
                 episode_start, final_obs=None, has_final_obs=None, final_index=None,
                 final_rows=None, env_range=None, in_memory=False):
        self.in_memory = in_memory  # came in the node's shared memory: answered there
        self.node = node
        self.seq = seq
        self.env = env                      # uint32 [n]
        self.step = step                    # uint64 [n]
        self.obs = obs                      # [n, obs_dim] of the node's obs_dtype
        self.reward = reward                # float32 [n]
        self.terminated = terminated        # bool [n]
        self.truncated = truncated          # bool [n]
        self.episode_start = episode_start  # bool [n]
        self.is_first = episode_start       # bool [n]; the Client widens it (_mark_first)
        if final_index is None:  # given as final_obs / has_final_obs
            final_index = np.flatnonzero(has_final_obs)
            final_rows = final_obs[final_index]
        self.final_index = final_index      # int64 [k]: rows with a final observation
        self.final_rows = final_rows        # [k, obs_dim]: their final observations
        # (first, stop) when env is the range first .. stop - 1 in order, else None.
        self.env_range = env_range
        self._final_obs = final_obs
        self._has_final_obs = has_final_obs

    @property
    def final_obs(self):
        """[n, obs_dim]: the final observation of rows that have one; NaN
        (float dtypes) or 0 elsewhere."""
        if self._final_obs is None:
            o = self.obs
            f = np.full(o.shape, np.nan if o.dtype.kind == "f" else 0, o.dtype)
            f[self.final_index] = self.final_rows
            self._final_obs = f
        return self._final_obs

    @property
    def has_final_obs(self):
        """bool [n]: the rows that carry a final observation."""
        if self._has_final_obs is None:
            h = np.zeros(len(self.env), bool)
            h[self.final_index] = True
            self._has_final_obs = h
        return self._has_final_obs

    @property
    def n(self):
        return len(self.env)

    def __len__(self):
        return len(self.env)

    def __repr__(self):
        return f"Batch(node={self.node}, seq={self.seq}, n={len(self.env)})"


__all__ = ["Batch"]
