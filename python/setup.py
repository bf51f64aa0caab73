"""Build step of the rollout-client package (metadata: pyproject.toml).

``build_py`` also generates ``rollout_client/rollout_pb2.py`` into the build
directory with protoc, from the repository's proto/rollout.proto (or
``$ROLLOUT_PROTO``), so the package ships the module and never needs protoc
at run time. The generated file is never written into the source tree.
``$PROTOC`` names the compiler (default: protoc on PATH).

It also compiles ``rollout_client._hotpath`` (hotpath/*.c, the
VecEnv's per-step array work) against Python's and numpy's headers (Debian:
python3-dev, python3-numpy).
"""
import os
import shutil
import subprocess

import numpy
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithProto(build_py):
    def run(self):
        super().run()
        proto = os.environ.get("ROLLOUT_PROTO") or os.path.join(HERE, "..", "proto",
                                                                 "rollout.proto")
        proto = os.path.abspath(proto)
        if not os.path.isfile(proto):
            raise SystemExit(f"rollout-client: {proto} not found: build the package from the "
                             "repository's python/ folder (it needs ../proto/rollout.proto) "
                             "or set ROLLOUT_PROTO")
        protoc = os.environ.get("PROTOC") or shutil.which("protoc")
        if not protoc:
            raise SystemExit("rollout-client: protoc not found: install protobuf-compiler "
                             "(Debian) or set PROTOC")
        out = os.path.join(self.build_lib, "rollout_client")
        os.makedirs(out, exist_ok=True)
        p = subprocess.run([protoc, f"--proto_path={os.path.dirname(proto)}",
                            f"--python_out={out}", proto], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"rollout-client: protoc failed on {proto} (exit "
                             f"{p.returncode}): {p.stderr.strip()}")
        generated = os.path.join(out, "rollout_pb2.py")
        if not os.path.isfile(generated):
            raise SystemExit(f"rollout-client: protoc wrote no {generated}")


hotpath = Extension("rollout_client._hotpath",
                    ["hotpath/module.c", "hotpath/frames.c", "hotpath/envs.c",
                     "hotpath/lane.c", "hotpath/lane_state.c", "hotpath/lane_io.c",
                     "hotpath/lane_gather.c"],
                    depends=["hotpath/hotpath.h", "hotpath/lane.h"], include_dirs=[numpy.get_include()],
                    extra_compile_args=["-O3"])  # the lane's per-env passes vectorise

setup(cmdclass={"build_py": BuildPyWithProto}, ext_modules=[hotpath])
