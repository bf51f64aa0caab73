"""A minimal learner for tests: raw frames over a socket, so tests can also
send malformed ones. rollout_pb2 is generated from proto/ into a temp dir."""
import atexit
import importlib
import os
import socket
import struct
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO = os.path.join(_HERE, "..", "..", "proto")
_pb2 = None


def pb2():
    global _pb2
    if _pb2 is None:
        out = tempfile.mkdtemp(prefix="rollout_pb2_")
        subprocess.run(["protoc", f"--python_out={out}", f"-I{_PROTO}", "rollout.proto"],
                       check=True)
        sys.path.insert(0, out)
        _pb2 = importlib.import_module("rollout_pb2")
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

    def __init__(self, addr, timeout=20.0):
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


_started = []


@atexit.register
def _kill_leftovers():
    """A test that failed half-way may leave a --seconds 0 node behind."""
    for p in _started:
        if p.poll() is None:
            p.kill()
            p.wait()


def start_node(node, *args, env=None):
    """Start rollout-node listening on a free loopback port; returns
    (Popen, address). The node prints the bound address on stderr; it is
    killed at exit if the test left it running."""
    p = subprocess.Popen([node, "--learner", "remote", "--listen", "127.0.0.1:0", "--quiet",
                          "--json", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    return p, listen_address(p)


def listen_address(p):
    """The address a node started with --listen printed on stderr (it says so
    even for port 0); the node is killed at exit if the test leaves it."""
    _started.append(p)
    for line in p.stderr:
        if "listening for learners on" in line:
            return line.strip().rsplit(" ", 1)[1]
    p.wait()
    raise RuntimeError(f"node did not start: exit {p.returncode}")
