"""send()/recv() in one C call each: the lane (python/hotpath/lane.c).

With a torch policy of about 1 ms per batch of 1024 envs, the Python of
vecenv_async.py's recv() and send() cost 160-240 us per batch on a 2-CPU
VM, most of it cold after the policy; the lane does the same work (frames
read and checked, per-env states, rows copied out of the node's memory,
episodes counted, actions written into it, answers sent) in one call each
way (docs/python.md "The fast path").

It serves the common case: one node, env ABI 1, float32 observations in
the node's shared memory (a Unix-domain socket, Hello.shared_memory). A
VecEnv takes it when it first goes asynchronous and keeps it until it
closes; in every other case, vecenv_async.py's Python does the work, with
the same results (the tests compare the two).

The lane reads the connection's socket from then on. A frame it does not
take (an error, a goodbye, anything unexpected) comes back here whole and
goes to the client's dispatcher, as before; an observations frame outside
the shared memory agreed is a protocol error here.
"""
import numpy as np

from .client import check_actions
from .errors import ConnectionClosed, ProtocolError
from .hotpath import hot

_READY, _HANDED = 1, 2  # vecenv_async.py's states


def _conn(env):
    """The connection a lane may serve, or None."""
    if env.layout is not None or len(env.nodes) != 1 or env._obs_dtype != np.float32:
        return None
    c = env.client._conns[0]
    if not c.open or c.mem is None or c.sock is None:
        return None
    frames = [b for b, _ in env._outstanding] + list(env.client._ready)
    if any(not getattr(b, "in_memory", False) or getattr(b, "ranges", None) is None
           for b in frames):
        return None
    return c


class LaneMixin:
    """The lane of VecEnv (vecenv.py, vecenv_async.py): _lane is None or
    the hot.Lane serving send()/recv()."""

    _lane = None

    def _lane_start(self):
        """Take the lane when this VecEnv may (see the module): the frames
        handed out by reset()/step() become HANDED in it, those the client
        queued READY, and the bytes read but not framed yet move to it.
        True when it was taken."""
        c = _conn(self)
        if c is None:
            return False
        m = c.mem
        keep = (c.sock, m, self._state, self._frame_of, self._ep_return, self._ep_length)
        lane = hot.Lane(c.sock.fileno(), tuple(self.obs_shape), m.obs, m.final_obs, m.reward,
                        m.flags, m.step, m.act, self.action_kind == "discrete",
                        self.action_n or 0, self._state, self._frame_of, self._ep_return,
                        self._ep_length, self._nflight, c.last_seq, c.reader.max_frame,
                        self.client._spin, keep)
        for b, _ in self._outstanding:
            lane.adopt(b.seq, b.ranges, _HANDED)
        self._outstanding.clear()
        cl = self.client
        while cl._ready:
            b = cl._ready.popleft()
            lane.adopt(b.seq, b.ranges, _READY)
        rd = c.reader
        if rd.end > rd.start:
            lane.feed(bytes(rd.mv[rd.start:rd.end]))
        rd.start = rd.end = 0
        if c in cl._early:
            cl._early.remove(c)
        self._lane = lane
        self._lane_conn = c
        return True

    def _lane_counts(self):
        """(READY envs, envs in flight) as the lane counts them."""
        ready, flight, _ = self._lane.counts
        return ready, flight

    def _lane_recv(self, want, timeout):
        """recv()'s transitions through the lane."""
        lane, c = self._lane, self._lane_conn
        while True:
            if not c.open:
                raise ConnectionClosed(f"node(s) {c.address} closed: this VecEnv cannot step "
                                       "their envs any more", clean=True, reason="node closed")
            got = lane.recv(want, -1.0 if timeout is None else float(timeout))
            if got is None:
                raise TimeoutError(f"recv(): no observation after {timeout:g}s "
                                   f"({self._lane_counts()[1]} envs are stepping at their "
                                   "nodes)")
            if len(got) == 14:
                return self._lane_transitions(got)
            self._lane_event(got, want)

    def _lane_event(self, got, want):
        """What the lane handed back: handled as the client always did."""
        what, detail = got
        cl, c = self.client, self._lane_conn
        if what == "frame":
            frame = cl._parse(c, detail)
            if frame.WhichOneof("body") == "observations":
                cl._fail(c, f"observations seq {frame.observations.seq} not in the shared "
                            "memory agreed")
            cl._dispatch(c, frame)  # an error raises; a goodbye closes
        elif what == "bad":
            cl._fail(c, detail)
        elif what == "closed":
            cl._close_conn(c)
            raise ConnectionClosed(f"node {c.address}: {detail}")
        elif what == "short":
            self._recv_short(want, detail)
        else:  # pragma: no cover - lane.c says only these
            raise ProtocolError(f"lane: {what!r}")

    def _lane_transitions(self, got):
        (obs, reward, terminated, truncated, ids, final, has_final, start, step, ep_ret,
         ep_len, counted, stepped, ended) = got
        self.total_steps += stepped
        if ended:
            self.episode_returns.extend(ep_ret[counted].tolist())
            self.episode_lengths.extend(ep_len[counted].tolist())
        infos = {"env_id": ids, "final_obs": final, "_final_obs": has_final,
                 "has_final_obs": has_final, "episode": {"r": ep_ret, "l": ep_len},
                 "_episode": counted, "episode_return": ep_ret, "episode_length": ep_len,
                 "episode_start": start, "step": step}
        return obs, reward, terminated, truncated, infos

    def _lane_send(self, actions, ids):
        """send() through the lane: ids (int64) checked there, discrete
        actions too; anything it does not take goes through check_actions
        first (the messages, the conversions, box clipping)."""
        lane = self._lane
        wire = actions
        if self.action_kind != "discrete":
            wire = self._lane_checked(actions, ids)
        r = lane.send(ids, wire)
        if r is not None and r[0] == "actions":
            wire = self._lane_checked(actions, ids)
            r = lane.send(ids, wire)
        if r is None:
            return
        if r[0] == "closed":
            self.client._close_conn(self._lane_conn)
            raise ConnectionClosed(f"node {self._lane_conn.address}: {r[1]}")
        if r[0] == "bad":
            self.client._fail(self._lane_conn, r[1])
        self._refuse(ids, int(r[0]), r[1])

    def _lane_checked(self, actions, ids):
        wire = check_actions(self.nodes[0], actions, len(ids), self.clip_box,
                             lambda r: self._env_label(int(ids[r])))
        return np.ascontiguousarray(wire)

    def _lane_detach(self):
        """Close time: the answers the lane has not written go first in the
        client's output, before its goodbye."""
        if self._lane is not None:
            rest = self._lane.detach()
            self._lane = None
            if rest and self._lane_conn.open:
                self._lane_conn.outbuf[:0] = rest


__all__ = ["LaneMixin"]
