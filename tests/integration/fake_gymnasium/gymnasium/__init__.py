"""A stand-in for gymnasium >= 1.1, for tests only (tests/integration/
test_python_vecenv.py): Debian 12 has no python3-gymnasium. It has the parts
of gymnasium's API that rollout_client.VecEnv uses (spaces.Box, Discrete,
MultiDiscrete; vector.VectorEnv, AutoresetMode, utils.batch_space), with
gymnasium's names and behaviour, so that the subclass path is exercised.
"""
from . import spaces, vector  # noqa: F401

__version__ = "1.1.1"
