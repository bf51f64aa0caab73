"""Finding the package's compiled modules (``_hotpath``, ``_engine``).

In order: inside the package (an installed package has them), then in the
build tree next to the rollout_pb2 the package loads (``<build>/python/``,
which ``meson compile`` builds; _proto.py says how that build is found).
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

from . import _proto


def _build_candidates(name: str) -> list[str]:
    """<build>/python/<name><suffix> of each build tree _proto looks in."""
    out = []
    for proto in _proto._candidates():
        root = os.path.dirname(os.path.dirname(proto))
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            out.append(os.path.join(root, "python", name + suffix))
    return out


def load(name: str) -> ModuleType:
    """The compiled module ``rollout_client.<name>``; ImportError saying how
    to get one when there is none."""
    full = f"{__package__}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    if importlib.util.find_spec(full) is not None:
        return importlib.import_module(full)
    for path in _build_candidates(name):
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader(full, path)
            spec = importlib.util.spec_from_file_location(full, path, loader=loader)
            assert spec is not None
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[full] = module
            return module
    raise ImportError(
        f"rollout_client has no compiled {name}: install the package (pip install . at the repository's root "
        f"compiles it), or build the repository (meson compile -C build writes "
        f"build/python/{name}*.so) and set ROLLOUT_BUILD_DIR to that build directory; looked "
        "in the package and in " + ", ".join(_build_candidates(name)))
