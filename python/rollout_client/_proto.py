"""Generated protobuf code for proto/rollout.proto.

The ``rollout_pb2`` module is never committed. The build generates it
(``meson compile`` writes ``<build>/proto/rollout_pb2.py``); a ready module is
used as is from, in order:

- ``$ROLLOUT_PROTO_OUT/rollout_pb2.py`` (the tests point it at ``<build>/proto``);
- ``$ROLLOUT_BUILD_DIR/proto/rollout_pb2.py``;
- ``<repo>/build/proto/rollout_pb2.py``.

Without one, it is generated on first use with ``protoc --python_out`` from
the repository's proto/rollout.proto into a cache directory: the first of
``$ROLLOUT_PROTO_OUT``, ``$ROLLOUT_BUILD_DIR/python-proto``,
``<repo>/build/python-proto`` (when ``<repo>/build`` exists) and
``$XDG_CACHE_HOME/rollout-client`` (default ``~/.cache/rollout-client``), in a
subdirectory named after a hash of the .proto text and the protoc version, so
an edited .proto is regenerated, and two processes generating at once each
write a private directory and rename it into place.

``$ROLLOUT_PROTO`` overrides the .proto path and ``$PROTOC`` the compiler.
"""
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MODULE_NAME = "rollout_pb2"
_pb2 = None


def proto_path():
    """The rollout.proto this client speaks."""
    return os.environ.get("ROLLOUT_PROTO") or os.path.join(_REPO, "proto", "rollout.proto")


def _ready_module():
    """A rollout_pb2.py the build generated, or None."""
    dirs = []
    if os.environ.get("ROLLOUT_PROTO_OUT"):
        dirs.append(os.environ["ROLLOUT_PROTO_OUT"])
    if os.environ.get("ROLLOUT_BUILD_DIR"):
        dirs.append(os.path.join(os.environ["ROLLOUT_BUILD_DIR"], "proto"))
    dirs.append(os.path.join(_REPO, "build", "proto"))
    for d in dirs:
        path = os.path.join(d, _MODULE_NAME + ".py")
        if os.path.isfile(path):
            return path
    return None


def _out_root():
    if os.environ.get("ROLLOUT_PROTO_OUT"):
        return os.environ["ROLLOUT_PROTO_OUT"]
    if os.environ.get("ROLLOUT_BUILD_DIR"):
        return os.path.join(os.environ["ROLLOUT_BUILD_DIR"], "python-proto")
    build = os.path.join(_REPO, "build")
    if os.path.isdir(build):
        return os.path.join(build, "python-proto")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "rollout-client")


def _protoc():
    exe = os.environ.get("PROTOC") or shutil.which("protoc")
    if not exe:
        raise RuntimeError(
            "rollout_client needs protoc to generate rollout_pb2 from "
            f"{proto_path()}: install protobuf-compiler or set $PROTOC")
    return exe


def _generate(proto, root):
    """Run protoc into root/<hash>/ unless already there; return that directory."""
    with open(proto, "rb") as f:
        text = f.read()
    exe = _protoc()
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    key = hashlib.sha256(text + b"\0" + version.encode()).hexdigest()[:16]
    final = os.path.join(root, key)
    if os.path.isfile(os.path.join(final, _MODULE_NAME + ".py")):
        return final
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".gen-", dir=root)
    try:
        p = subprocess.run(
            [exe, f"--python_out={tmp}", "-I", os.path.dirname(os.path.abspath(proto)),
             os.path.basename(proto)],
            capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"protoc failed on {proto} (exit {p.returncode}): {p.stderr.strip()}")
        generated = os.path.join(tmp, os.path.splitext(os.path.basename(proto))[0] + "_pb2.py")
        if not os.path.isfile(generated):
            raise RuntimeError(f"protoc produced no {os.path.basename(generated)} in {tmp}")
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process renamed its copy first: same input, same output.
            if not os.path.isfile(os.path.join(final, _MODULE_NAME + ".py")):
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def load():
    """Return the rollout_pb2 module, generating it first if needed."""
    global _pb2
    if _pb2 is not None:
        return _pb2
    path = None if os.environ.get("ROLLOUT_PROTO") else _ready_module()
    if path is None:
        proto = proto_path()
        if not os.path.isfile(proto):
            raise RuntimeError(f"rollout.proto not found at {proto} (set $ROLLOUT_PROTO)")
        path = os.path.join(_generate(proto, _out_root()), _MODULE_NAME + ".py")
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = module
    spec.loader.exec_module(module)
    _pb2 = module
    return module
