"""A learner whose action depends only on (env, step): (env * 7 + step) % n.
A run served by any sequence of such learners steps every env exactly as a
run served by one of them, so a test can compare them.

usage: fixed_learner.py ADDR [--token T] [--paced]
Prints one line per answered frame ("answered SEQ ROWS") and exits when the
node says goodbye or closes. --paced makes it a learner as slow as the test
wants: before answering each frame it reads one line from stdin (at the end
of stdin it answers freely), so the test decides when each frame is answered."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wireutil as w  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("--token", default="")
    ap.add_argument("--paced", action="store_true")
    a = ap.parse_args()
    c = w.Conn(a.addr, timeout=None)  # the test bounds the run, and it waits for us
    welcome = c.hello(token=a.token, name="fixed")
    if welcome is None or welcome.WhichOneof("body") != "welcome":
        print("refused", welcome, flush=True)
        return 1
    n = welcome.welcome.spec.action.n
    while True:
        f = c.recv()
        if f is None or f.WhichOneof("body") != "observations":
            return 0
        o = f.observations
        if a.paced and not sys.stdin.readline():
            a.paced = False  # stdin closed: answer freely from now on
        try:
            c.send(actions=w.pb2().Actions(
                seq=o.seq, discrete=[(e * 7 + s) % n for e, s in zip(o.env, o.step)]))
        except OSError:
            return 0  # the node stopped while we answered
        os.write(1, f"answered {o.seq} {len(o.env)}\n".encode())


if __name__ == "__main__":
    sys.exit(main())
