"""A minimal learner for tests: raw frames over a socket, so tests can also
send malformed ones. rollout_pb2 is the module the build generated
(<build>/proto/rollout_pb2.py, named by $ROLLOUT_PROTO_OUT in the meson
tests), loaded by the Python client's own loader."""
import importlib.util
import os
import socket
import subprocess

import nodeutil as nu

_HERE = os.path.dirname(os.path.abspath(__file__))
_LOADER = os.path.join(_HERE, "..", "..", "python", "rollout_client", "_proto.py")
_pb2 = None


def pb2():
    global _pb2
    if _pb2 is None:
        # The loader file alone: the rollout_client package would import numpy.
        spec = importlib.util.spec_from_file_location("_rollout_proto_loader", _LOADER)
        loader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loader)
        _pb2 = loader.load()
    return _pb2


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame_bytes(frame):
    body = frame.SerializeToString()
    return varint(len(body)) + body


class Conn:
    """One connection to a node, speaking frames."""

    def __init__(self, addr, timeout=nu.HANG_GUARD_S):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = b""

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, **body):
        f = pb2().Frame(**body)
        self.send_raw(frame_bytes(f))

    def hello(self, token="", version=1, role="learner", name="test"):
        self.send(hello=pb2().Hello(protocol_version=version, role=role, token=token, name=name))
        return self.recv()

    def recv(self):
        """The next frame, or None when the node closed the connection."""
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
                body = self.buf[i:i + n]
                self.buf = self.buf[i + n:]
                f = pb2().Frame()
                f.ParseFromString(body)
                return f
            try:
                chunk = self.sock.recv(1 << 20)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            self.buf += chunk

    def act(self, obs_frame, action_fn):
        o = obs_frame.observations
        acts = [action_fn(o, i) for i in range(len(o.env))]
        self.send(actions=pb2().Actions(seq=o.seq, discrete=acts))

    def close(self):
        self.sock.close()


def start_node(node, *args, env=None):
    """Start rollout-node listening on a free loopback port; returns
    (Popen, address). The node prints the bound address on stderr; it is
    killed at exit if the test left it running."""
    p = nu.spawn([node, "--learner", "remote", "--listen", "127.0.0.1:0", "--quiet", "--json",
                  *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return p, listen_address(p)


listen_address = nu.listen_address


# ---- trajectory files, read and rewritten by hand ----

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


_CRC = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        n |= (b & 0x7F) << shift
        shift += 7
        i += 1
        if not b & 0x80:
            return n, i


def read_header(path):
    """The TrajectoryHeader of trajectory file path (record 0, after the
    8-byte magic)."""
    with open(path, "rb") as f:
        data = f.read()
    n, i = read_varint(data, 8)
    h = pb2().TrajectoryHeader()
    h.ParseFromString(data[i:i + n])
    return h


def rewrite_header(src, dst, **fields):
    """Copy trajectory file src to dst with header fields changed (a valid
    file otherwise: the header's CRC is recomputed)."""
    with open(src, "rb") as f:
        data = f.read()
    n, i = read_varint(data, 8)
    h = pb2().TrajectoryHeader()
    h.ParseFromString(data[i:i + n])
    for k, v in fields.items():
        setattr(h, k, v)
    body = h.SerializeToString()
    out = data[:8] + varint(len(body)) + body + crc32c(body).to_bytes(4, "little")
    with open(dst, "wb") as f:
        f.write(out + data[i + n + 4:])
