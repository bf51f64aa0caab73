"""Python client for rollout nodes' remote-learner protocol (docs/protocol.md).

- :class:`Client`: connections to one or more nodes; batches of
  transitions as numpy arrays; ``send_actions`` answers them.
- :class:`VecEnv`: the envs of those nodes as one vectorized env.
- :class:`Stream`: trajectory segments from stream nodes (--learner stream).
- :mod:`rollout_client.framing`: length-delimited frames.
- :func:`pb2`: the generated ``rollout_pb2`` module (generated on first use).
"""
from . import _proto
from .client import PROTOCOL_VERSION, Batch, Client, NodeInfo, parse_address, read_token
from .errors import (AuthenticationError, ConnectionClosed, FrameTooLarge, ProtocolError,
                     RemoteError, RolloutError, VersionMismatch)
from .framing import DEFAULT_MAX_FRAME, FrameDecoder, decode_varint, encode_frame, encode_varint
from .stream import SegmentBatch, Stream, policy_params
from .vecenv import VecEnv


def pb2():
    """The rollout_pb2 module generated from proto/rollout.proto."""
    return _proto.load()


__all__ = [
    "AuthenticationError", "Batch", "Client", "ConnectionClosed", "DEFAULT_MAX_FRAME",
    "FrameDecoder", "FrameTooLarge", "NodeInfo", "PROTOCOL_VERSION", "ProtocolError",
    "RemoteError", "RolloutError", "SegmentBatch", "Stream", "VecEnv", "VersionMismatch",
    "decode_varint", "policy_params",
    "encode_frame", "encode_varint", "parse_address", "pb2", "read_token",
]
