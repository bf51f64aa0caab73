"""Memory shared with a node on the same host (docs/protocol.md).

A node offers memory only over a Unix-domain socket, to a learner that asks
(Hello.shared_memory): stream mode's segment pool (read-only) and SEED
mode's observation columns (read-only) and action columns (one memory per
connection, which the learner writes). Each is a sealed memfd of the node's
that comes with the welcome over the socket (SCM_RIGHTS); the welcome names
each by its place among them (1-based). Memory we only read is sealed by
the node against any writable mapping (F_SEAL_FUTURE_WRITE), and the node
is not dumpable, so no other process of the user can open its memories
through /proc (docs/protocol.md "Who may touch which memory"). What a node
says of its memory is checked before anything is mapped.
"""
import array
import fcntl
import mmap
import os
import socket
import stat

import numpy as np

from .errors import ProtocolError

# The flags column of SEED memory (wire/seed_memory.h).
TERMINATED, TRUNCATED, EPISODE_START, HAS_FINAL = 1, 2, 4, 8
_FLAG_BITS = np.array([[TERMINATED], [TRUNCATED], [EPISODE_START]], np.uint8)
_PAGE = 4096


def flag_rows(flags):
    """bool [3, n]: terminated, truncated, episode_start of flags column
    bytes ``flags`` (uint8 [n])."""
    return (flags & _FLAG_BITS) != 0


# The most descriptors a welcome carries (runtime/shared_mem.h).
MAX_FDS = 4
_MAX_PEER_BYTES = 64 << 30


def local(sock):
    """Whether a node's memory can come over sock: a Unix-domain socket."""
    return sock.family == socket.AF_UNIX


def recv_into(sock, view, fds, address):
    """``sock.recv_into(view)`` that keeps, in the list ``fds``, the
    descriptors that came with the bytes (a welcome's memories). More than
    MAX_FDS in all, or ones cut off, close them all and raise
    ProtocolError."""
    got, anc, flags, _ = sock.recvmsg_into([view], socket.CMSG_SPACE(MAX_FDS * 4),
                                           socket.MSG_CMSG_CLOEXEC)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", data[:len(data) - len(data) % 4]))
    if flags & socket.MSG_CTRUNC or len(fds) > MAX_FDS:
        close_fds(fds)
        raise ProtocolError(f"node {address} sent more than {MAX_FDS} file descriptors")
    return got


def close_fds(fds):
    """Close every descriptor in the list fds and empty it."""
    for fd in fds:
        os.close(fd)
    fds.clear()


def map_peer(fds, index, size, address, what, writable=False):
    """The node's memory handed over as ``fds[index - 1]`` (the welcome
    names it by place, 1-based), ``size`` bytes, as a uint8 array:
    read-only unless ``writable``. It must be a file of that size sealed
    against shrinking (so the mapping never faults past its end). fds stay
    the caller's to close."""
    if not 0 < index <= len(fds):
        raise ProtocolError(f"node {address}: its {what} is descriptor {index} of the "
                            f"{len(fds)} that came with the welcome")
    if not 0 < size <= _MAX_PEER_BYTES:
        raise ProtocolError(f"node {address}: its {what} of {size} bytes offered")
    f = fds[index - 1]
    st = os.fstat(f)
    if not stat.S_ISREG(st.st_mode) or st.st_size != size:
        raise ProtocolError(f"node {address}: its {what} is not {size} bytes of memory")
    if not fcntl.fcntl(f, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK:
        raise ProtocolError(f"node {address}: its {what} is not sealed against shrinking")
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    try:
        return np.frombuffer(mmap.mmap(f, size, mmap.MAP_SHARED, prot), np.uint8)
    except OSError as e:
        raise ProtocolError(f"node {address}: mapping its {what}: {e.strerror}") from e


def unmap(holder):
    """Unmap the node's memories now (at close, not at garbage collection):
    every array (or dict of arrays) attribute of holder is dropped, then
    each mapping they viewed is closed. A mapping that something else still
    views (an array a caller kept) cannot close yet: it goes with that
    array. Returns how many mappings were closed."""
    maps = []
    for name, value in list(vars(holder).items()):
        arrays = value.values() if isinstance(value, dict) else (value,)
        for a in arrays:
            while isinstance(a, np.ndarray):
                a = a.base
            if isinstance(a, mmap.mmap) and all(a is not m for m in maps):
                maps.append(a)
        if isinstance(value, (np.ndarray, dict)):
            setattr(holder, name, None)
    a = value = arrays = None  # noqa: F841  (the last views held here)
    closed = 0
    for m in maps:
        try:
            m.close()
            closed += 1
        except BufferError:  # still viewed elsewhere: unmapped when that goes
            pass
    return closed


def _column(mem, off, count, dtype, name, address):
    """``count`` values of dtype at byte ``off`` of mem, checked to lie inside
    it and be aligned."""
    dtype = np.dtype(dtype)
    nbytes = count * dtype.itemsize
    if off % dtype.itemsize or off > len(mem) or nbytes > len(mem) - off:
        raise ProtocolError(f"node {address}: shared memory column {name} ({nbytes} bytes at "
                            f"{off}) is not inside its {len(mem)} bytes or not aligned")
    return mem[off:off + nbytes].view(dtype)


class SeedMemory:
    """A SEED connection's shared memory (Welcome.seed_memory): ``obs`` and
    ``final_obs`` float32 [num_envs, obs_dim], ``step`` uint64 [num_envs],
    ``reward`` float32 [num_envs] and ``flags`` uint8 [num_envs] (read-only
    views of the node's
    observation memory); ``act``: this connection's action memory, int32
    [num_envs] (discrete) or float32 [num_envs, action_size] (box), which
    the learner writes before it answers a frame."""

    def __init__(self, fds, m, num_envs, obs_dim, act_width, discrete, address):
        n = num_envs
        rows = n * obs_dim * 4
        # What a node of this build lays out, plus a page, bounds what we map.
        want_obs = 2 * rows + n * 8 + n * 4 + n + 5 * 64 + _PAGE
        want_act = n * act_width * 4 + 2 * _PAGE
        if not 0 < m.obs_bytes <= want_obs or not 0 < m.act_bytes <= want_act:
            raise ProtocolError(f"node {address}: shared memory of {m.obs_bytes} and "
                                f"{m.act_bytes} bytes offered for {n} envs")
        om = map_peer(fds, m.obs_fd, m.obs_bytes, address, "observation memory")
        am = map_peer(fds, m.act_fd, m.act_bytes, address, "action memory", writable=True)
        self.obs = _column(om, m.obs_offset, n * obs_dim, np.float32, "obs",
                           address).reshape(n, obs_dim)
        self.final_obs = _column(om, m.final_obs_offset, n * obs_dim, np.float32, "final obs",
                                 address).reshape(n, obs_dim)
        self.step = _column(om, m.step_offset, n, np.uint64, "step", address)
        self.reward = _column(om, m.reward_offset, n, np.float32, "reward", address)
        self.flags = _column(om, m.flags_offset, n, np.uint8, "flags", address)
        act = _column(am, m.act_offset, n * act_width, np.int32 if discrete else np.float32,
                      "action", address)
        self.act = act if discrete else act.reshape(n, act_width)
        self.num_envs = n

    def rows(self, ranges, address):
        """An in-memory frame's rows from its ranges ((first, count) pairs,
        uint32): (env indices, env_range), env_range (first, stop) when the
        frame is one range. Raises ProtocolError unless the pairs are whole,
        non-empty, inside the node's envs and at most num_envs rows."""
        n = self.num_envs
        if len(ranges) == 2:  # the usual: one run of envs
            first, count = int(ranges[0]), int(ranges[1])
            if count < 1 or first >= n or count > n - first:
                raise ProtocolError(f"node {address}: an in-memory frame's range of {count} "
                                    f"envs from {first} is empty or not inside [0, {n})")
            return np.arange(first, first + count, dtype=np.uint32), (first, first + count)
        if len(ranges) == 0 or len(ranges) % 2:
            raise ProtocolError(f"node {address}: an in-memory frame's ranges have "
                                f"{len(ranges)} values, not (first, count) pairs")
        first = ranges[0::2].astype(np.int64)
        count = ranges[1::2].astype(np.int64)
        if (count < 1).any() or (first >= n).any() or (count > n - first).any() or \
                count.sum() > n:
            raise ProtocolError(f"node {address}: an in-memory frame's ranges are empty, not "
                                f"inside [0, {n}) or more than {n} envs")
        env = np.concatenate([np.arange(f, f + c, dtype=np.uint32)
                              for f, c in zip(first.tolist(), count.tolist())])
        return env, None
