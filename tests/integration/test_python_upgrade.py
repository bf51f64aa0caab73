"""The Python client's same-host upgrade (docs/protocol.md "Same-host
upgrade"; python/rollout_client/upgrade.py): over TCP to a node on this
host, Client, the remote VecEnv and Stream move to the node's private
socket and shared memory by default; ``upgrade=False`` stays on TCP; an
offer that fails (a path nobody serves, another node's socket, a welcome
from another node) leaves the learner on TCP with a named log line, and a
malformed or unasked offer is a ProtocolError.

Run as: test_python_upgrade.py ROLLOUT_NODE BUILD_DIR. Every wait is for a
batch, a frame or an exit, with GUARD as the only clock.
"""
import os
import socket
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE, BUILD = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import nodeutil as nu  # noqa: E402  (processes killed at exit and on SIGTERM)

import rollout_client as rc  # noqa: E402
from rollout_client.testing import FakeNode  # noqa: E402

GUARD = nu.HANG_GUARD_S  # only a lost event takes this long
NONCE = bytes(range(16))


class RealNode(nu.TempDirCase):
    def launch(self, **kw):
        node = rc.launch_node(num_envs=8, node=NODE, **kw)
        self.addCleanup(node.stop)
        return node

    def step_client(self, c, steps=20):
        """Answer `steps` batches; the batches' in_memory flags."""
        seen = []
        for _ in range(steps):
            b = c.recv(timeout=GUARD)
            self.assertIsNotNone(b, "no batch within the hang guard")
            seen.append(b.in_memory)
            c.send_actions(b, np.zeros(b.n, np.int64))
        return seen

    def test_client_upgrades_on_one_host(self):
        node = self.launch()
        with self.assertLogs("rollout_client", "INFO") as logs:
            c = rc.Client(node.address, connect_timeout=GUARD)
        with c:
            self.assertEqual(c.upgraded, [True])
            conn = c._conns[0]
            self.assertEqual(conn.sock.family, socket.AF_UNIX)
            self.assertIsNotNone(conn.mem, "no shared memory after the upgrade")
            self.assertEqual(self.step_client(c), [True] * 20)
            path = conn.sock.getpeername()
        self.assertIn(f"node {node.address}: on this host: moved from TCP to unix:{path}, "
                      "shared memory", "\n".join(logs.output))
        self.assertEqual(node.stop(), 0)
        s = node.summary()
        self.assertEqual((s["learners_upgraded"], s["learners_rejected"]), (1, 0))

    def test_upgrade_false_stays_on_tcp(self):
        node = self.launch()
        with self.assertNoLogs("rollout_client", "INFO"):
            c = rc.Client(node.address, connect_timeout=GUARD, upgrade=False)
        with c:
            self.assertEqual(c.upgraded, [False])
            self.assertNotEqual(c._conns[0].sock.family, socket.AF_UNIX)
            self.assertIsNone(c._conns[0].mem)
            self.assertEqual(self.step_client(c), [False] * 20)
        self.assertEqual(node.stop(), 0)
        self.assertEqual(node.summary()["learners_upgraded"], 0)

    def test_vecenv_upgrades_and_keeps_tcp_when_told(self):
        for up in (True, False):
            with self.subTest(upgrade=up):
                node = self.launch(seed=3)
                with rc.VecEnv(node.address, timeout=GUARD, upgrade=up) as env:
                    self.assertEqual(env.client.upgraded, [up])
                    self.assertEqual(env.client._conns[0].mem is not None, up)
                    env.reset(seed=3)
                    for _ in range(30):
                        env.step(np.zeros(env.num_envs, np.int64))
                self.assertEqual(node.stop(), 0)
                self.assertEqual(node.summary()["learners_upgraded"], int(up))

    def test_stream_upgrades_and_keeps_tcp_when_told(self):
        for up in (True, False):
            with self.subTest(upgrade=up):
                node = self.launch(learner="stream", extra_args=["--unroll", 8])
                with rc.Stream(node.address, connect_timeout=GUARD, upgrade=up) as st:
                    self.assertEqual(st.upgraded, [up])
                    for _ in range(5):
                        b = st.recv(timeout=GUARD)
                        self.assertIsNotNone(b, "no segment within the hang guard")
                        self.assertEqual(b.in_memory, up)
                self.assertEqual(node.stop(), 0)
                self.assertEqual(node.summary()["learners_upgraded"], int(up))

    def test_another_nodes_socket_stays_on_tcp(self):
        # A hostile node offers a real node's private socket: that node
        # refuses the nonce it never offered, and the learner stays with
        # the node it asked, over TCP.
        real = self.launch()
        with rc.Client(real.address, connect_timeout=GUARD) as c:
            path = c._conns[0].sock.getpeername()  # the real node's private socket
        with FakeNode(num_envs=4, offer=(path, NONCE, 1234)) as fake:
            with self.assertLogs("rollout_client", "WARNING") as logs:
                c = rc.Client(fake.address, connect_timeout=GUARD)
            with c:
                self.assertEqual(c.upgraded, [False])
                self.assertEqual(c.nodes[0].node_id, 1234)
                self.assertIsNone(c._conns[0].mem)
                self.assertEqual(self.step_client(c, 4), [False] * 4)
            self.assertEqual([h.upgrade for h in fake.hellos], [True, False])
        self.assertRegex("\n".join(logs.output),
                         f"node {fake.address}: staying on TCP: the node's private socket "
                         f"{path}: refused: .*no upgrade was offered with this nonce")
        self.assertEqual(real.stop(), 0)
        s = real.summary()
        self.assertEqual((s["learners_upgraded"], s["learners_rejected"]), (1, 1))


class FakeOffers(nu.TempDirCase):
    def test_a_path_nobody_serves_stays_on_tcp(self):
        path = self.path("nobody.sock")
        with FakeNode(num_envs=4, offer=(path, NONCE, 1234)) as fake:
            with self.assertLogs("rollout_client", "WARNING") as logs:
                c = rc.Client(fake.address, connect_timeout=GUARD)
            with c:
                self.assertEqual(c.upgraded, [False])
                b = c.recv(timeout=GUARD)
                self.assertIsNotNone(b)
                c.send_actions(b, np.zeros(b.n, np.int64))
            self.assertEqual([h.upgrade for h in fake.hellos], [True, False])
        self.assertIn(f"node {fake.address}: staying on TCP: the node's private socket {path}: ",
                      "\n".join(logs.output))
        self.assertIn("No such file", "\n".join(logs.output))

    def test_a_welcome_from_another_node_stays_on_tcp(self):
        # Whoever answers on the offered path welcomes us, but with its own
        # node id: not the node that made the offer.
        path = self.path("other.sock")
        with FakeNode(num_envs=4, unix_path=path, node_id=999) as other, \
                FakeNode(num_envs=4, offer=(path, NONCE, 1234)) as fake:
            with self.assertLogs("rollout_client", "WARNING") as logs:
                c = rc.Client(fake.address, connect_timeout=GUARD)
            with c:
                self.assertEqual(c.upgraded, [False])
                self.assertEqual(c.nodes[0].address, fake.address)
                b = c.recv(timeout=GUARD)
                self.assertIsNotNone(b)
                c.send_actions(b, np.zeros(b.n, np.int64))
            self.assertEqual([h.upgrade_nonce for h in other.hellos], [NONCE])
            self.assertEqual([h.upgrade for h in fake.hellos], [True, False])
        self.assertIn(f"staying on TCP: the node's private socket {path}: welcomed by node id "
                      "00000000000003e7, not 00000000000004d2: not its socket",
                      "\n".join(logs.output))

    def test_stream_goes_back_to_tcp(self):
        # The stream client's way back: the fake then welcomes as a SEED
        # node, which a Stream refuses by name after saying it stayed.
        path = self.path("nobody.sock")
        with FakeNode(num_envs=4, offer=(path, NONCE, 1234)) as fake:
            with self.assertLogs("rollout_client", "WARNING") as logs, \
                    self.assertRaisesRegex(rc.ProtocolError, "not stream"):
                rc.Stream(fake.address, connect_timeout=GUARD)
            self.assertEqual([h.upgrade for h in fake.hellos], [True, False])
        self.assertIn(f"node {fake.address}: staying on TCP: the node's private socket {path}: ",
                      "\n".join(logs.output))

    def test_malformed_offers_are_protocol_errors(self):
        # As rollout-learner: an offer it cannot take as given is the
        # node's protocol error, not a reason to try a path it never named.
        long = "/" + "a" * 107
        for offer, why in (
                (("rel.sock", NONCE, 1), "a path of 8 bytes, not an absolute socket path of "
                                         "at most 107"),
                ((long, NONCE, 1), "a path of 108 bytes"),
                (("", NONCE, 1), "a path of 0 bytes"),
                (("/tmp/a\nb.sock", NONCE, 1), "a control character"),
                (("/tmp/a\x00b.sock", NONCE, 1), "a control character"),
                (("/tmp/x.sock", NONCE[:15], 1), "nonce of 15 bytes, not 16"),
                (("/tmp/x.sock", NONCE + b"!", 1), "nonce of 17 bytes, not 16")):
            with self.subTest(why=why), FakeNode(num_envs=4, offer=offer) as fake:
                with self.assertRaisesRegex(rc.ProtocolError, why):
                    rc.Client(fake.address, connect_timeout=GUARD)
                with self.assertRaisesRegex(rc.ProtocolError, why):
                    rc.Stream(fake.address, connect_timeout=GUARD)
                self.assertEqual(len(fake.hellos), 2)  # no second hello anywhere

    def test_an_offer_not_asked_for_is_a_protocol_error(self):
        with FakeNode(num_envs=4, offer=(self.path("x.sock"), NONCE, 1234),
                      offer_unasked=True) as fake:
            with self.assertRaisesRegex(rc.ProtocolError, "an upgrade we did not ask for"):
                rc.Client(fake.address, connect_timeout=GUARD, upgrade=False)
            with self.assertRaisesRegex(rc.ProtocolError, "an upgrade we did not ask for"):
                rc.Stream(fake.address, connect_timeout=GUARD, upgrade=False)
            self.assertEqual([h.upgrade for h in fake.hellos], [False, False])

    def test_a_unix_address_never_asks(self):
        path = self.path("n.sock")
        with FakeNode(num_envs=4, unix_path=path) as fake, \
                rc.Client(fake.address, connect_timeout=GUARD) as c:
            self.assertEqual(c.upgraded, [False])
            b = c.recv(timeout=GUARD)
            self.assertIsNotNone(b)
            self.assertEqual([h.upgrade for h in fake.hellos], [False])


if __name__ == "__main__":
    unittest.main(verbosity=2)
