#!/usr/bin/env python3
"""Fuzz target (atheris, libFuzzer's engine for Python): the Python client's
parsing of what a node sends, from the bytes on the socket to the checked
batch. A node is untrusted; whatever it sends, the client may raise
ProtocolError (FrameTooLarge, VersionMismatch are kinds of it), RemoteError
or ConnectionClosed, and nothing else: an IndexError, ValueError,
MemoryError or OverflowError is a finding. Bounded memory is libFuzzer's
-rss_limit_mb.

The first byte picks the path:
  0: a welcome (protobuf) through welcome.node_info, the handshake's checks;
  1: frames on a SEED connection (the length prefixes through FrameReader,
     Observations through wire.parse_observations and Client._checked, other
     frames through protobuf and _dispatch), each batch made as recv() does;
  2: frames on a stream connection: Stream._segment, the segment walk and
     its checks against a welcome (and a small segment memory).

    .venv/bin/python3 tests/fuzz/fuzz_python_client.py -max_total_time=60 CORPUS_DIR
    (.ci/run's run_fuzz runs it briefly; python/requirements.txt pins atheris)
"""
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import atheris  # noqa: E402

with atheris.instrument_imports():
    import numpy as np
    import rollout_client as rc
    from rollout_client import client as rcc
    from rollout_client import stream as rcs
    from rollout_client import welcome as rcw
    from rollout_client.errors import ConnectionClosed, ProtocolError, RemoteError

pb = rc._proto.load()
ALLOWED = (ProtocolError, RemoteError, ConnectionClosed)


def welcome(mode="seed"):
    w = pb.Welcome(protocol_version=rcc.PROTOCOL_VERSION, node_id=1, seed=1, max_frame=1 << 20,
                   mode=mode, unroll=4, window=4,
                   spec=pb.EnvSpec(env="cartpole", num_envs=8,
                                   observation=pb.Space(kind="box", shape=[4]),
                                   action=pb.Space(kind="discrete", n=2)))
    return w


class FakeSock:
    """The node's bytes, a few at a time (frames cut anywhere)."""

    def __init__(self, data, chunk):
        self.data, self.pos, self.chunk = data, 0, chunk

    def recv_into(self, view):
        n = min(len(view), self.chunk, len(self.data) - self.pos)
        view[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n

    def close(self):
        pass

    def setblocking(self, flag):
        pass

    def settimeout(self, t):
        pass

    def sendall(self, data):  # what the client tells the node: dropped
        pass


def seed_connection(data):
    cl = rc.Client(["127.0.0.1:1"], connect=False)
    c = cl._conns[0]
    c.info = rcw.node_info(c, welcome())
    c.open = True
    sock = FakeSock(data, 1 + (data[0] if data else 0) % 97)
    c.sock = sock
    cl._sel = type("Sel", (), {"unregister": lambda self, s: None})()
    while c.open and c.reader.fill(sock):
        cl._drain(c)
        while cl._ready:
            cl._batch(cl._ready.popleft())


def stream_connection(data):
    st = rcs.Stream.__new__(rcs.Stream)
    st._max_frame = 1 << 20
    st._poison = False
    st._pb = pb
    nd = rcs._Node(0, "fuzz")
    nd.welcome = welcome("stream")
    nd.shm = np.zeros(4096, np.uint8)
    nd.block = np.frombuffer(bytearray(data), np.uint8)
    nd.mv = memoryview(nd.block)
    nd.end = len(data)
    while True:
        body = st._next_frame(nd)
        if body is None:
            return
        st._segment(nd, body, nd.span)


def one_input(data):
    if not data:
        return
    kind, rest = data[0] % 3, data[1:]
    try:
        if kind == 0:
            w = pb.Welcome()
            try:
                w.ParseFromString(rest)
            except Exception:  # protobuf's DecodeError: the client's _parse says ProtocolError
                return
            cl = rc.Client(["127.0.0.1:1"], connect=False)
            rcw.node_info(cl._conns[0], w)
        elif kind == 1:
            seed_connection(rest)
        else:
            stream_connection(rest)
    except ALLOWED:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
