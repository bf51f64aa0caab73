"""Gymnasium's NEXT_STEP and DISABLED autoreset modes for a VecEnv
(``VecEnv(..., autoreset_mode="next_step" | "disabled")``), over the node's
same-step resets.

NEXT_STEP (:class:`NextStepAutoreset`): the step that ends an episode
returns its **last** observation (no ``final_obs``); the env's next step
is its reset: its action is ignored, and the VecEnv answers the env's frame
holding it (Actions.hold, docs/protocol.md "Holding an env"): the node
does not step it and sends the next episode's first observation again,
with reward 0 and no flags, which is what Gymnasium's reset step returns.
The transitions are those of the same-step mode, each episode's first
observation shown one step later.

DISABLED:
A node resets each env itself the moment its episode ends (docs/env-api.md):
there is no remote reset, and none is needed here. In DISABLED mode the
VecEnv shows the user Gymnasium's view of the same events: the step that
ends an episode returns that episode's **last** observation as the env's
observation (no ``final_obs`` in infos), the env then waits, and
``reset(options={"reset_mask": mask})`` hands out the next episode's first
observation for the envs in ``mask``: the very observation the node's
reset produced at the episode's end, kept until then. Stepping an env that
waits for its reset raises ValueError naming it (nothing is sent); so does
a mask that names an env whose episode has not ended (a node cannot cut an
episode short). The trajectories are those of the same-step mode, seen
another way.
"""
import gymnasium
import numpy as np


_MODES = {"samestep": "same_step", "nextstep": "next_step", "disabled": "disabled"}


def parse_mode(mode):
    """``"next_step"`` / ``"same_step"`` / ``"disabled"`` (any case, or
    Gymnasium's AutoresetMode members) as one of those names; None is
    ``default``."""
    name = getattr(mode, "value", mode)
    key = name.lower().replace("_", "") if isinstance(name, str) else None
    if key in _MODES:
        return _MODES[key]
    raise ValueError(f"autoreset_mode={mode!r}: 'next_step', 'same_step' or 'disabled' "
                     "(gymnasium.vector.AutoresetMode)")


def gym_mode(name):
    """Gymnasium's AutoresetMode member named name ("next_step", ...)."""
    return getattr(gymnasium.vector.AutoresetMode, name.upper())


def disabled_mode():
    """Gymnasium's DISABLED member."""
    return gym_mode("disabled")


class NextStepAutoreset:
    """The VecEnv's NEXT_STEP-mode state: which rows (envs, or env ABI 2
    rows) ended in the transition handed out last, so that their next step
    is their reset. ``pending`` is written in place only: the lane
    (python/hotpath/lane.h) keeps it itself while it serves."""

    def __init__(self, num_rows):
        self.pending = np.zeros(num_rows, bool)

    def held(self, rows):
        """Of the global rows of one frame, those whose step is a reset."""
        return rows[self.pending[rows]]

    def stepped(self, out, rows=None):
        """A same-step result (step()'s for every row, or recv()'s for
        ``rows``) shown the NEXT_STEP way (in place); returns it and a mask
        over its rows of those that were held (their step was a reset)."""
        obs, reward, terminated, truncated, infos = out
        held = self.pending.copy() if rows is None else self.pending[rows]
        has_final = infos.pop("_final_obs")
        infos.pop("has_final_obs", None)
        final = infos.pop("final_obs")
        done = terminated | truncated
        if done.any():
            # The ended episode's last observation (an env failure that cut
            # it without one keeps the next episode's first: docs/env-api.md).
            _put(obs, final, done & has_final)
        if rows is None:
            self.pending[:] = done
        else:
            self.pending[rows] = done
        return out, held


def _copy(x):
    return {k: v.copy() for k, v in x.items()} if isinstance(x, dict) else x.copy()


def _put(dst, src, mask):
    """dst[mask] = src[mask], for arrays or dicts of arrays."""
    if isinstance(dst, dict):
        for k in dst:
            dst[k][mask] = src[k][mask]
    else:
        dst[mask] = src[mask]


def _alloc(x, n):
    """Zeros of n rows shaped as x's rows (an array or a dict of them)."""
    if isinstance(x, dict):
        return {k: np.zeros((n,) + v.shape[1:], v.dtype) for k, v in x.items()}
    return np.zeros((n,) + x.shape[1:], x.dtype)


def _put_rows(dst, at, src, mask):
    """dst[at[mask]] = src[mask], for arrays or dicts of arrays."""
    if isinstance(dst, dict):
        for k in dst:
            dst[k][at[mask]] = src[k][mask]
    else:
        dst[at[mask]] = src[mask]


class DisabledAutoreset:
    """The VecEnv's DISABLED-mode state: which envs wait for their reset,
    the first observation each will get, and the last observation handed
    out (what reset() starts from; under send()/recv(), zeros for an env
    recv() has not returned yet)."""

    def __init__(self, num_envs):
        self.num_envs = num_envs
        self.waiting = np.zeros(num_envs, bool)
        self.first = None  # the next episode's first observation, rows of waiting envs
        self.last = None   # the observations last handed out

    def started(self, obs):
        """reset(): the first observations of every env."""
        self.last = _copy(obs)

    def check_send(self, ids, label):
        """Before send(): none of the envs ids may wait for its reset."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            return  # send() refuses them by name
        ids = ids[(ids >= 0) & (ids < self.num_envs)]
        bad = ids[self.waiting[ids]]
        if len(bad):
            raise ValueError(
                f"send(): {label(int(bad[0]))} ended its episode and was not reset: call "
                "reset(options={'reset_mask': mask}) for it before sending its action "
                "(autoreset_mode 'disabled')")

    def check_step(self, label):
        """Before step(): no env may be waiting for its reset."""
        if self.waiting.any():
            k = int(np.flatnonzero(self.waiting)[0])
            raise ValueError(
                f"{int(self.waiting.sum())} envs' episodes ended and were not reset "
                f"({label(k)} first): call reset(options={{'reset_mask': mask}}) for them "
                "before stepping (autoreset_mode 'disabled')")

    def stepped(self, out, rows=None):
        """A same-step result (obs, reward, terminated, truncated, infos),
        step()'s for every env or recv()'s for the envs ``rows``, shown the
        DISABLED way; returns it."""
        obs, reward, terminated, truncated, infos = out
        done = terminated | truncated
        has_final = infos.pop("_final_obs")
        infos.pop("has_final_obs", None)
        final = infos.pop("final_obs")
        at = np.arange(self.num_envs) if rows is None else np.asarray(rows, np.int64)
        if self.first is None:
            self.first = _alloc(obs, self.num_envs)
        if self.last is None:
            self.last = _alloc(obs, self.num_envs)
        if done.any():
            _put_rows(self.first, at, obs, done)
            # The ended episode's last observation (an env failure that cut
            # it without one keeps the next episode's first: docs/env-api.md).
            _put(obs, final, done & has_final)
            self.waiting[at[done]] = True
        if rows is None:
            self.last = _copy(obs)
        else:
            _put_rows(self.last, at, obs, np.ones(len(at), bool))
        return obs, reward, terminated, truncated, infos

    def reset(self, mask, n, label):
        """reset(options={"reset_mask": mask}): (obs) with the next
        episode's first observation for the envs of mask."""
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != (n,):
            raise ValueError(f"reset_mask must be a bool array of shape ({n},), got "
                             f"{m.dtype} {m.shape}")
        early = m & ~self.waiting
        if early.any():
            k = int(np.flatnonzero(early)[0])
            raise ValueError(f"reset_mask names {int(early.sum())} envs whose episode has not "
                             f"ended ({label(k)} first): a node resets an env only at the end "
                             "of its episode")
        obs = _copy(self.last)
        if m.any():
            _put(obs, self.first, m)
        self.waiting &= ~m
        self.last = _copy(obs)
        return obs
