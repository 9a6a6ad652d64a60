"""The terminal WebSocket (GET /v1/sandboxes/{id}/terminal, docs/console.md) against the real
`space dev`: a shell on a real pty in a sandbox, through the API front. Keystrokes in as
binary frames, output back; resize reaches the pty (stty size); a dropped connection
reattaches to the same shell with ?pid= and sees its earlier output; `end` ends it; the key
as a subprotocol authenticates and a wrong one is refused; a cross-site Origin is refused
while the same request from this server's origin passes; malformed handshakes answer JSON."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root  # noqa: E402
from wsclient import HandshakeRefused, WsClient, b64url  # noqa: E402


@unittest.skipUnless(is_root(), "needs root")
class TerminalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()
        try:
            cls.sid = cls.s.create("busybox", timeout_s=600)
        except BaseException:
            cls.s.stop()
            cls.s.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()
        cls.s.cleanup()

    def path(self, query=""):
        return "/v1/sandboxes/%s/terminal%s" % (self.sid, query)

    def open(self, query="?cols=100&rows=30", key=None, headers=None):
        protocols = ["space.terminal.v1", "space.bearer." + b64url(key or self.s.key)]
        return WsClient(self.s.url, self.path(query), headers=headers, protocols=protocols)

    def started(self, ws):
        op, payload = ws.recv()
        self.assertEqual(op, 0x1, payload)
        msg = json.loads(payload)
        self.assertEqual(msg["type"], "started")
        self.assertTrue(msg["pid"].startswith("proc_"))
        return msg["pid"]

    def test_shell_echo_resize_reattach_and_end(self):
        ws = self.open()
        self.assertEqual(ws.headers.get("sec-websocket-protocol"), "space.terminal.v1")
        self.assertNotIn("bearer", json.dumps(ws.headers))  # the key is never echoed
        pid = self.started(ws)
        ws.send_bytes(b"echo $((6*7))\r")
        out, _ = ws.read_until("42\r\n")
        self.assertIn(b"42", out)
        ws.send_text({"type": "resize", "cols": 123, "rows": 45})
        ws.send_bytes(b"stty size\r")
        ws.read_until("45 123")
        ws.send_bytes(b"echo marker-$((1+1))\r")
        ws.read_until("marker-2")
        ws.close()  # a dropped connection: the shell stays

        ws = self.open("?pid=" + pid)
        self.assertEqual(self.started(ws), pid)
        out, _ = ws.read_until("marker-2")  # its recent output is replayed
        ws.send_bytes(b"echo again-$((2+3))\r")
        ws.read_until("again-5")
        # The shell is an ordinary process: it is in the command log with its tty.
        st, d = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (self.sid, pid))
        self.assertEqual(st, 200, d)
        self.assertEqual(d["state"], "running")
        ws.send_text({"type": "end"})
        deadline = time.time() + 20
        control = []
        while time.time() < deadline:
            op, payload = ws.recv()
            if op == 0x1:
                control.append(json.loads(payload))
            if op == 0x8:
                break
        self.assertIn("exit", [c["type"] for c in control], control)
        ws.close()
        st, d = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (self.sid, pid))
        self.assertEqual(d["state"], "exited")
        # An ended shell cannot be reattached.
        with self.assertRaises(HandshakeRefused) as e:
            self.open("?pid=" + pid)
        self.assertEqual(e.exception.status, 409)

    def test_ctrl_c_interrupts_the_foreground_command(self):
        ws = self.open()
        self.started(ws)
        ws.send_bytes(b"sleep 300; echo sl\"\"ept\r")  # typed, it does not say "slept"
        time.sleep(0.5)
        ws.send_bytes(b"\x03")
        ws.send_bytes(b"echo after-$((3*3))\r")
        out, _ = ws.read_until("after-9")
        self.assertNotIn(b"slept", out)  # the sleep was interrupted and the rest of its line dropped
        ws.send_text({"type": "end"})
        ws.close()

    def test_bad_control_messages_are_answered_not_fatal(self):
        ws = self.open()
        self.started(ws)
        ws.send_text("not json")
        ws.send_text({"type": "resize", "cols": 0, "rows": 10})
        errors = []
        while len(errors) < 2:
            op, payload = ws.recv()
            if op == 0x1:
                errors.append(json.loads(payload))
        self.assertTrue(all(e["type"] == "error" and e["code"] == "invalid_argument" for e in errors), errors)
        ws.send_bytes(b"echo still-$((4*4))\r")
        ws.read_until("still-16")
        ws.send_text({"type": "end"})
        ws.close()

    def test_authentication(self):
        with self.assertRaises(HandshakeRefused) as e:
            self.open(key="space_not-a-real-key")
        self.assertEqual(e.exception.status, 401)
        self.assertEqual(json.loads(e.exception.body)["code"], "unauthenticated")
        with self.assertRaises(HandshakeRefused) as e:
            WsClient(self.s.url, self.path(), protocols=["space.terminal.v1"])
        self.assertEqual(e.exception.status, 401)
        # The Authorization header works as for any call.
        ws = WsClient(self.s.url, self.path(), headers={"Authorization": "Bearer " + self.s.key})
        self.started(ws)
        ws.send_text({"type": "end"})
        ws.close()

    def test_cross_site_origin_is_refused_and_same_origin_passes(self):
        with self.assertRaises(HandshakeRefused) as e:
            self.open(headers={"Origin": "http://evil.example"})
        self.assertEqual(e.exception.status, 403)
        self.assertEqual(json.loads(e.exception.body)["code"], "permission_denied")
        host = self.s.url.split("://", 1)[1]
        ws = self.open(headers={"Origin": "http://" + host})  # the control: same request, this origin
        self.started(ws)
        ws.send_text({"type": "end"})
        ws.close()

    def test_malformed_handshakes_answer_json(self):
        cases = [("?cols=0", {}, 400), ("?rows=99999", {}, 400), ("?user=../root", {}, 400),
                 ("?pid=proc_nope", {}, 404), ("", {"Sec-WebSocket-Version": "8"}, 400),
                 ("", {"Sec-WebSocket-Key": "short"}, 400)]
        for query, headers, status in cases:
            with self.assertRaises(HandshakeRefused, msg=query) as e:
                self.open(query, headers=headers)
            self.assertEqual(e.exception.status, status, (query, headers, e.exception.body))
            self.assertIn("message", json.loads(e.exception.body))
        st, d = self.s.json("GET", self.path())  # not an upgrade
        self.assertEqual(st, 400, d)
        self.assertEqual(d["code"], "invalid_argument")
        with self.assertRaises(HandshakeRefused) as e:
            WsClient(self.s.url, "/v1/sandboxes/sbx_missing/terminal", headers={"Authorization": "Bearer " + self.s.key})
        self.assertEqual(e.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
