"""A learner whose action depends only on (env, step): (env * 7 + step) % n.
A run served by any sequence of such learners steps every env exactly as a
run served by one of them, so a test can compare them.

usage: fixed_learner.py ADDR [--token T]
Prints one line per answered frame ("answered SEQ ROWS") and exits when the
node says goodbye or closes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wireutil as w  # noqa: E402


def main():
    addr = sys.argv[1]
    token = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--token" else ""
    c = w.Conn(addr, timeout=60)
    welcome = c.hello(token=token, name="fixed")
    if welcome is None or welcome.WhichOneof("body") != "welcome":
        print("refused", welcome, flush=True)
        return 1
    n = welcome.welcome.spec.action.n
    while True:
        f = c.recv()
        if f is None or f.WhichOneof("body") != "observations":
            return 0
        o = f.observations
        try:
            c.send(actions=w.pb2().Actions(
                seq=o.seq, discrete=[(e * 7 + s) % n for e, s in zip(o.env, o.step)]))
        except OSError:
            return 0  # the node stopped while we answered
        os.write(1, f"answered {o.seq} {len(o.env)}\n".encode())


if __name__ == "__main__":
    sys.exit(main())
