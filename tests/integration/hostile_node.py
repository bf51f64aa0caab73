"""A hostile node for tests: the node side of the protocol on a Unix-domain
socket, saying and sharing what a test tells it to (a welcome of its
choosing, memory it writes itself, handed over with the welcome as a real
node does, SCM_RIGHTS), so that learners can be shown what they must refuse.
It serves one connection, in its own thread, and keeps the frames the
learner sent (``got``)."""
import fcntl
import mmap
import os
import socket
import threading

import numpy as np

import wireutil as w


def seed_layout(n, obs_dim, act_width):
    """The byte offsets of SEED memory as a node lays it out
    (src/wire/seed_memory.c): obs, final, step, reward, flags; the sizes."""
    def up(x, to):
        return (x + to - 1) // to * to
    rows = n * obs_dim * 4
    at, off = 0, {}
    for name, size in (("obs", rows), ("final", rows), ("step", n * 8), ("reward", n * 4),
                       ("flags", n)):
        off[name] = at
        at = up(at + size, 64)
    return off, up(at, 4096), up(n * act_width * 4, 4096)


def sealed_memory(name, size):
    """A memfd of size bytes sealed as a node seals it (it cannot shrink or
    grow), mapped read-write: (fd, uint8 array)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd, np.frombuffer(mmap.mmap(fd, size), np.uint8)


class FrameReader:
    """Frames read from a socket, one at a time."""

    def __init__(self):
        self.buf = b""

    def next(self, sock):
        """The next frame, or None once the peer closed."""
        while True:
            n, shift, i = 0, 0, 0
            while i < len(self.buf):
                b = self.buf[i]
                n |= (b & 0x7F) << shift
                shift += 7
                i += 1
                if not b & 0x80:
                    break
            else:
                i = -1
            if i > 0 and len(self.buf) >= i + n:
                f = w.pb2().Frame()
                f.ParseFromString(self.buf[i:i + n])
                self.buf = self.buf[i + n:]
                return f
            try:
                more = sock.recv(65536)
            except OSError:
                return None
            if not more:
                return None
            self.buf += more


class HostileNode:
    """Listens at path; on a learner's hello sends welcome (a Frame
    built by the test) with the descriptors fds, then each frame of
    frames; then reads until the learner closes."""

    def __init__(self, path, welcome, fds=(), frames=()):
        self.path, self.welcome, self.fds, self.frames = path, welcome, list(fds), list(frames)
        self.got = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.srv.accept()
        with conn:
            dec = FrameReader()
            hello = dec.next(conn)
            if hello is None:
                return
            self.got.append(hello)
            body = w.frame_bytes(self.welcome)
            conn.sendmsg([body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                   np.array(self.fds, np.int32).tobytes())] if self.fds else [])
            for f in self.frames:
                conn.sendall(w.frame_bytes(f))
            while True:
                f = dec.next(conn)
                if f is None:
                    return
                self.got.append(f)

    def close(self):
        self.srv.close()
        self.thread.join(timeout=5)


def seed_node(path, num_envs=4, obs_dim=4, poison=None):
    """A SEED node of a CartPole-shaped env at path whose shared memory
    holds the first observations of num_envs envs, with poison(columns)
    applied to them first (columns: name -> numpy view of the memory), and
    one Observations frame naming all envs in memory."""
    pb = w.pb2()
    off, obs_bytes, act_bytes = seed_layout(num_envs, obs_dim, 1)
    ofd, om = sealed_memory("hostile-obs", obs_bytes)
    afd, _ = sealed_memory("hostile-act", act_bytes)
    cols = {
        "obs": om[off["obs"]:off["obs"] + num_envs * obs_dim * 4].view(np.float32),
        "reward": om[off["reward"]:off["reward"] + num_envs * 4].view(np.float32),
        "flags": om[off["flags"]:off["flags"] + num_envs],
        "step": om[off["step"]:off["step"] + num_envs * 8].view(np.uint64),
    }
    cols["obs"][:] = 0.01
    cols["flags"][:] = 4  # episode start
    if poison:
        poison(cols)
    space = pb.Space(kind="box", shape=[obs_dim], low=[-1e9] * obs_dim, high=[1e9] * obs_dim)
    welcome = pb.Frame(welcome=pb.Welcome(
        protocol_version=1, node_id=7, seed=1, max_frame=1 << 20, mode="seed",
        spec=pb.EnvSpec(env="cartpole", observation=space,
                        action=pb.Space(kind="discrete", n=2), num_envs=num_envs),
        seed_memory=pb.SeedMemory(obs_fd=1, obs_bytes=obs_bytes, act_fd=2, act_bytes=act_bytes,
                                  obs_offset=off["obs"], final_obs_offset=off["final"],
                                  step_offset=off["step"], reward_offset=off["reward"],
                                  flags_offset=off["flags"], act_offset=0)))
    obs = pb.Frame(observations=pb.Observations(seq=1, in_memory=True, ranges=[0, num_envs]))
    node = HostileNode(path, welcome, [ofd, afd], [obs])
    node.keep = (om, ofd, afd)
    return node
