"""The client's C part, ``rollout_client._hotpath`` (python/hotpath/): the
per-step array work of VecEnv in one pass per frame.

It is found, in order: inside the package (an installed package has it,
built by ``pip install ./python``: python/setup.py compiles it), then in the
build tree next to the rollout_pb2 the package loads (``<build>/python/``,
which ``meson compile`` builds; see _proto.py for how that build is found).
Raises ImportError saying how to get one when there is none.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys

from . import _proto

_NAME = __package__ + "._hotpath"


def _build_candidates():
    """<build>/python/_hotpath<suffix> of each build tree _proto looks in."""
    out = []
    for proto in _proto._candidates():
        root = os.path.dirname(os.path.dirname(proto))
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            out.append(os.path.join(root, "python", "_hotpath" + suffix))
    return out


def load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    if importlib.util.find_spec(_NAME) is not None:
        return importlib.import_module(_NAME)
    for path in _build_candidates():
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader(_NAME, path)
            spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[_NAME] = module
            return module
    raise ImportError(
        "rollout_client has no compiled _hotpath: install the package (pip install "
        "--no-build-isolation ./python compiles it; Debian: python3-dev), or build the "
        "repository (meson compile -C build writes build/python/_hotpath*.so) and set "
        "ROLLOUT_BUILD_DIR to that build directory; looked in the package and in "
        + ", ".join(_build_candidates()))


hot = load()
