"""A numpy reference of the node's recurrent policy (docs/policy.md
"Recurrent policies"), read from a PolicyParams file (--save-policy), for the
recurrent integration tests: the torso, the cell, the head, in float64."""
import numpy as np

from rollout_client import _proto


class RefPolicy:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        n = shift = i = 0
        while True:  # the varint length prefix
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        p = _proto.load().PolicyParams.FromString(data[i:i + n])
        self.act = np.tanh if p.activation == "tanh" else (lambda z: np.maximum(z, 0.0))

        def arr(t):
            return np.asarray(t.data, np.float64).reshape(tuple(t.shape))

        self.torso, self.cell = [], None
        for L in p.layers[:-1]:
            if L.kind:
                self.cell = (L.kind, arr(L.weight), arr(L.weight_hh), arr(L.bias), arr(L.bias_hh))
            else:
                self.torso.append((arr(L.weight), arr(L.bias)))
        self.head = (arr(p.layers[-1].weight), arr(p.layers[-1].bias))
        self.hid = self.cell[2].shape[1]
        self.floats = self.hid * (2 if self.cell[0] == "lstm" else 1)

    def step(self, obs, state, first):
        """One step of rows: obs [N, obs_dim], state [N, floats] (h, then an
        LSTM's c), first [N] (zero those rows' state first). Returns (logits
        [N, nout], the new state)."""
        z = np.asarray(obs, np.float64)
        for w, b in self.torso:
            z = self.act(z @ w.T + b)
        state = np.where(np.asarray(first, bool)[:, None], 0.0, np.asarray(state, np.float64))
        kind, wi, wh, bi, bh = self.cell
        H = self.hid
        h = state[:, :H]
        gi, gh = z @ wi.T + bi, h @ wh.T + bh
        sig = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731
        if kind == "gru":
            r, u = sig(gi[:, :H] + gh[:, :H]), sig(gi[:, H:2 * H] + gh[:, H:2 * H])
            n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
            h = n + u * (h - n)
            new = h
        else:
            g = gi + gh
            i, f, o = sig(g[:, :H]), sig(g[:, H:2 * H]), sig(g[:, 3 * H:])
            c = f * state[:, H:] + i * np.tanh(g[:, 2 * H:3 * H])
            h = o * np.tanh(c)
            new = np.concatenate([h, c], axis=1)
        w, b = self.head
        return h @ w.T + b, new


def log_softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))
