"""The node's recurrent cells against torch.nn.GRUCell and LSTMCell with the
same weights (src/policy/policy_cell.c, kernel_cell.h).

Run as: test_python_cell_torch.py CELL_PROBE BUILD_DIR. For each cell, a
torch actor (Linear, Tanh, Linear, Tanh, the cell, a Linear head) is
written with rollout_client.policy_params (format 3), then run over 12
steps of 9 rows by tests/policy/cell_probe.c, each row keeping its state
and zeroing it where is_first is set, and by torch doing the same. The head
outputs must agree to 2e-5 (the node's tanh and sigmoid are a few ulp from
torch's; docs/policy.md). Exits 77 (skipped) when torch cannot be imported.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

T, N, OBS, HID, NACT = 12, 9, 4, 24, 3


def main():
    probe, build = sys.argv[1], sys.argv[2]
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(build, "proto"))
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch cannot be imported ({e})")
        return 77
    import numpy as np
    import rollout_client as rc
    from rollout_client.framing import encode_frame

    torch.manual_seed(3)
    rng = np.random.default_rng(4)
    x = rng.uniform(-2, 2, (T, N, OBS)).astype(np.float32)
    first = (rng.uniform(size=(T, N)) < 0.2).astype(np.uint8)
    first[0] = 1
    bad = []
    for kind, Cell in (("gru", torch.nn.GRUCell), ("lstm", torch.nn.LSTMCell)):
        torso = [torch.nn.Linear(OBS, 16), torch.nn.Linear(16, 16)]
        cell, head = Cell(16, HID), torch.nn.Linear(HID, NACT)
        with torch.no_grad():  # biases away from 0, so that they count
            for p in cell.parameters():
                p.mul_(3.0)
        layers = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in torso + [head]]
        params = rc.policy_params(layers, cell=(kind, cell.weight_ih.detach().numpy(),
                                                cell.weight_hh.detach().numpy(),
                                                cell.bias_ih.detach().numpy(),
                                                cell.bias_hh.detach().numpy()))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, kind + ".pb")
            with open(path, "wb") as f:
                f.write(encode_frame(params.SerializeToString()))
            out = subprocess.run([probe, path, str(T), str(N)], input=x.tobytes() + first.tobytes(),
                                 capture_output=True, timeout=120)
        if out.returncode != 0:
            bad.append(f"{kind}: cell_probe failed: {out.stderr.decode(errors='replace')}")
            continue
        node = np.frombuffer(out.stdout, np.float32).reshape(T, N, NACT)
        want = np.zeros((T, N, NACT), np.float32)
        with torch.no_grad():
            h = torch.zeros(N, HID)
            c = torch.zeros(N, HID)
            for t in range(T):
                keep = torch.from_numpy(1.0 - first[t].astype(np.float32))[:, None]
                h, c = h * keep, c * keep
                z = torch.from_numpy(x[t])
                for m in torso:
                    z = torch.tanh(m(z))
                if kind == "gru":
                    h = cell(z, h)
                else:
                    h, c = cell(z, (h, c))
                want[t] = head(h).numpy()
        err = float(np.abs(node - want).max())
        print(f"{kind}: largest difference from torch over {T} steps x {N} rows: {err:.3g}")
        if not err < 2e-5:
            bad.append(f"{kind}: the node's outputs differ from torch's by {err:.3g}")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
