"""rollout from Python (docs/python.md).

- :func:`make_vec` / ``gymnasium.make_vec("rollout/CartPole-v1", num_envs=N)``:
  rollout's envs as a Gymnasium vector env, stepped in this process by
  rollout's C engine (:class:`RolloutVectorEnv`). Importing the package
  registers the ``rollout/`` ids.

The advanced paths, for nodes on other hosts (the remote-learner protocol):

- :class:`Client`: connections to one or more nodes; batches of
  transitions as numpy arrays; ``send_actions`` answers them.
- :class:`VecEnv`: the envs of those nodes as one Gymnasium vector env (a
  real ``gymnasium.vector.VectorEnv`` when gymnasium is importable).
- :class:`Stream`: trajectory segments from stream nodes (--learner stream).
- :func:`launch_node`: a local rollout-node, as a context manager.
- :mod:`rollout_client.spaces`: Box / Discrete / MultiDiscrete / MultiBinary /
  Tuple / Dict spaces.
- :mod:`rollout_client.abi2`: env ABI 2 nodes' layouts, batches and actions.
- :mod:`rollout_client.framing`: length-delimited frames.
- :func:`pb2`: the generated ``rollout_pb2`` module (shipped in the package).
"""
from . import _proto, abi2, spaces
from .actions import check_actions
from .address import parse_address, read_token
from .batch import Batch
from .client import PROTOCOL_VERSION, Client
from .errors import (AuthenticationError, ConnectionClosed, FrameTooLarge, ProtocolError,
                     RemoteError, RolloutError, VersionMismatch)
from .framing import DEFAULT_MAX_FRAME, FrameDecoder, decode_varint, encode_frame, encode_varint
from .launch import NodeProcess, find_node, launch_node
from .spaces import AutoresetMode
from .stream import SegmentBatch, Stream, policy_params
from .vecenv import VecEnv
from .welcome import OBS_DTYPES, NodeInfo
from .vector import RolloutVectorEnv
from .registration import make_vec, register_envs

register_envs()

__version__ = "0.1.0"


def pb2():
    """The rollout_pb2 module generated from proto/rollout.proto."""
    return _proto.load()


__all__ = [
    "AuthenticationError", "AutoresetMode", "abi2", "Batch", "Client", "ConnectionClosed",
    "DEFAULT_MAX_FRAME", "FrameDecoder", "FrameTooLarge", "NodeInfo", "NodeProcess",
    "OBS_DTYPES", "PROTOCOL_VERSION", "ProtocolError", "RemoteError", "RolloutError",
    "SegmentBatch", "Stream", "VecEnv", "VersionMismatch", "check_actions", "decode_varint",
    "encode_frame", "encode_varint", "find_node", "launch_node", "parse_address", "pb2",
    "policy_params", "read_token", "spaces", "make_vec", "register_envs", "RolloutVectorEnv",
]
