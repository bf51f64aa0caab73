#!/usr/bin/env python3
"""The TensorBoard picture of docs/operations.md, from a real run: two
rollout-nodes write event files (--tensorboard), TensorBoard (the pinned
tensorboard package) serves them, and Debian's chromium, headless, takes a
screenshot of its Scalars page.

    bench/tensorboard_shot.py build/rollout-node [--seconds 20]
        [--out docs/benchmarks/tensorboard.png]

Needs chromium (apt-get install chromium); exits 2 saying so without it.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("node")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "benchmarks", "tensorboard.png"))
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("tensorboard_shot.py: chromium not found (apt-get install chromium)")
    tb = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    with tempfile.TemporaryDirectory(prefix="ro_tb_shot_") as d:
        for name, env in (("cartpole", "cartpole"), ("pendulum", "pendulum")):
            subprocess.run([a.node, "--env", env, "--seconds", str(a.seconds), "--quiet",
                            "--metrics-interval", "0.5", "--tensorboard",
                            os.path.join(d, name)], check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        srv = subprocess.Popen([tb, "--logdir", d, "--port", str(port), "--host", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(1200):  # until TensorBoard has read both runs' scalars
                try:
                    with urllib.request.urlopen(base + "/data/plugin/scalars/tags",
                                                timeout=5) as r:
                        if {"cartpole", "pendulum"} <= set(json.load(r)):
                            break
                except OSError:
                    pass
                time.sleep(0.1)
            else:
                sys.exit("tensorboard_shot.py: TensorBoard never listed both runs")
            url = (base + "/?darkMode=false#scalars&tagFilter="
                   "steps_per_s%7Creturn_mean%7Clength_mean")
            subprocess.run([chromium, "--headless=new", "--no-sandbox",
                            "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
                            "--hide-scrollbars", "--window-size=1500,1000",
                            "--virtual-time-budget=20000", f"--screenshot={a.out}", url],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=300)
        finally:
            srv.terminate()
            srv.wait()
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
