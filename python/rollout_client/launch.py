"""launch_node: a local rollout-node for learners, as a context manager.

    with rollout_client.launch_node(env="cartpole", num_envs=64) as node:
        with rollout_client.VecEnv(node.address) as env:
            ...

starts ``rollout-node --learner remote --listen 127.0.0.1:0 --seconds 0``
(``learner="stream"``: a stream node, for ``rollout_client.Stream``),
waits until the node says where it listens (a port it picked), and on exit
stops it with SIGINT (the node finishes the steps in flight and prints its
summary), then SIGKILL after ``grace`` seconds. A node still running when
the interpreter exits is killed; one whose interpreter is killed (SIGKILL:
no atexit runs) gets SIGHUP from the kernel (Linux's parent-death signal,
sent once per thread of the dying process that was its parent) and stops
cleanly, once, removing its unix: socket file. The signal
follows the thread that launched the node: launch it from a thread that
outlives it (the main thread).
"""
import atexit
import ctypes
import ctypes.util
import json as _json
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Optional

_LISTENING = "listening for learners on "
_live: "list[NodeProcess]" = []
_PR_SET_PDEATHSIG = 1
_libc: Optional[ctypes.CDLL]
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
except OSError:  # not glibc Linux: the atexit hook alone
    _libc = None


def _die_with_parent():
    """In the child, before exec: SIGHUP when the launching thread dies.
    Only an async-signal-safe system call (prctl) runs here."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)


@atexit.register
def _kill_live_nodes():
    """Nodes the program (or a failed test) left running."""
    for p in _live:
        if p.poll() is None:
            p.kill()
            p.wait()


def find_node(node=None):
    """The rollout-node to run: ``node`` if given, else ``$ROLLOUT_NODE``,
    else ``rollout-node`` on PATH (``meson install`` puts it there), else
    ``<repository>/build/rollout-node``."""
    if node:
        return node
    if os.environ.get("ROLLOUT_NODE"):
        return os.environ["ROLLOUT_NODE"]
    found = shutil.which("rollout-node")
    if found:
        return found
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = os.path.join(repo, "build", "rollout-node")
    if os.access(built, os.X_OK):
        return built
    raise FileNotFoundError("rollout-node not found: pass node=PATH, set ROLLOUT_NODE, put "
                            "an installed rollout-node on PATH (meson install), or build the "
                            "repository (meson compile -C build)")


class NodeProcess:
    """A running rollout-node that serves learners. ``address`` is the
    HOST:PORT it listens on; ``stderr_lines`` its stderr so far (drained by a
    thread); ``stop()`` ends it and returns its exit status; ``summary()``
    parses its ``--json`` summary once it has stopped.

    ``NodeProcess(node, *args, listen="127.0.0.1:0", timeout=120,
    learner="remote")`` runs ``node --learner LEARNER --listen LISTEN *args``
    (``learner="stream"`` for a stream node). ``timeout`` bounds the wait for
    the listening line: only a node that never gets there takes it.
    """

    def __init__(self, node, *args, listen="127.0.0.1:0", timeout=120.0, learner="remote"):
        if learner not in ("remote", "stream"):
            raise ValueError(f"learner {learner!r}: a node serves learners as 'remote' (SEED "
                             "style) or 'stream'")
        cmd = [node, "--learner", learner, "--listen", listen, *map(str, args)]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=_die_with_parent)
        _live.append(self.proc)
        self.stderr_lines = []
        self.stdout = ""
        self.address = None
        self._seen = threading.Event()
        self._err = threading.Thread(target=self._drain_err, daemon=True)
        self._err.start()
        self._out = threading.Thread(target=self._drain_out, daemon=True)
        self._out.start()
        deadline = time.monotonic() + timeout
        while not self._seen.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.stop()
                self._err.join(5)
                tail = "".join(self.stderr_lines[-20:]).strip()
                raise RuntimeError(f"{' '.join(cmd)} did not start listening (exit {code}): "
                                   f"{tail or 'no output'}")

    def _drain_err(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if self.address is None and _LISTENING in line:
                self.address = line.rsplit(_LISTENING, 1)[1].strip()
                self._seen.set()

    def _drain_out(self):
        self.stdout = self.proc.stdout.read()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def summary(self) -> Optional["dict[str, Any]"]:
        """The node's --json summary line (after stop()), or None."""
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                return _json.loads(line)
        return None

    def stop(self, grace: float = 120.0) -> Optional[int]:
        """SIGINT, wait up to ``grace`` seconds, then SIGKILL. Returns the
        exit status (0 for a node that stopped cleanly)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.join(5)
        self._out.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            if not f.closed:
                f.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def launch_node(env="cartpole", num_envs=64, *, seed=None, workers=None, env_args=None,
                max_episode_steps=None, token_file=None, listen="127.0.0.1:0", json=True,
                node=None, extra_args=(), timeout=120.0, learner="remote", node_index=None):
    """Start a rollout-node serving ``num_envs`` envs of ``env`` (a built-in
    name or a plugin .so) to learners, and return its :class:`NodeProcess`
    once it listens; use it in a ``with`` block to stop it at the end.

    ``seed`` is the node's run seed (env i is seeded from (seed, node
    index, i): the same seed gives the same episodes; ``VecEnv.reset(seed=...)``
    checks it; None: a fresh seed per node, ``NodeInfo.seed`` says which),
    ``node_index`` its ``--node-index`` (nodes launched with one seed need
    different ones to play different episodes),
    ``workers`` its worker threads, ``env_args`` a dict of ``--env-arg``
    values, ``max_episode_steps`` a time limit, ``token_file`` the secret
    learners present (needed when ``listen`` is not loopback), ``json`` asks
    for the summary that :meth:`NodeProcess.summary` reads, ``extra_args``
    any other rollout-node flags, ``node`` the binary (see
    :func:`find_node`), ``learner`` the mode: ``"remote"`` (SEED style, for
    VecEnv and Client) or ``"stream"`` (the node acts and streams segments,
    for Stream; e.g. ``extra_args=["--unroll", 32]``). A bad flag or value
    fails at once with the node's one-line reason in a RuntimeError.
    """
    args = ["--env", env, "--num-envs", int(num_envs), "--seconds", 0, "--quiet"]
    if seed is not None:
        args += ["--seed", int(seed)]
    if node_index is not None:
        args += ["--node-index", int(node_index)]
    if workers is not None:
        args += ["--workers", int(workers)]
    for k, v in (env_args or {}).items():
        args += ["--env-arg", f"{k}={v}"]
    if max_episode_steps is not None:
        args += ["--env-arg", f"max_episode_steps={int(max_episode_steps)}"]
    if token_file is not None:
        args += ["--token-file", os.fspath(token_file)]
    if json:
        args.append("--json")
    args += [str(a) for a in extra_args]
    return NodeProcess(find_node(node), *args, listen=listen, timeout=timeout, learner=learner)


__all__ = ["NodeProcess", "find_node", "launch_node"]
