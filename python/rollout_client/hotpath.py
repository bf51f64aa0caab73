"""The client's C part, ``rollout_client._hotpath`` (python/hotpath/): the
per-step array work of the remote VecEnv in one pass per frame. Found as
_native.py says."""
from . import _native

hot = _native.load("_hotpath")
