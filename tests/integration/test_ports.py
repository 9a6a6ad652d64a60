"""Preview ports end to end (issue 25): `python3 -m http.server` and a WebSocket echo server
run inside real sandboxes (the Debian `base` template), reached through their preview URLs on
the API listener: tokens (header, ?token= then cookie), 401/404, a closed port ending its
open connections at once, streamed responses, WebSocket echo, a paused sandbox, the CLI, and
one vm sandbox. Requests go to the listener's address with the preview Host header (what a
browser sends for http://<port>-<label>.localhost:<listen port>/: browsers resolve *.localhost
to loopback themselves, Python's resolver does not)."""
import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root  # noqa: E402

SERVER_PY = os.path.join(os.path.dirname(__file__), "ports", "preview_server.py")


def host_of(url):
    return urllib.parse.urlsplit(url).netloc


class Preview:
    """Speaks to a preview URL through the listener's own address."""

    def __init__(self, server):
        u = urllib.parse.urlsplit(server.url)
        self.addr = (u.hostname, u.port)

    def request(self, url, method="GET", headers=None, body=None):
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(*self.addr, timeout=30)
        path = u.path + ("?" + u.query if u.query else "")
        c.request(method, path or "/", body=body, headers={"Host": u.netloc, **(headers or {})})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.headers, data

    def open_stream(self, url, headers=None):
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(*self.addr, timeout=30)
        c.request("GET", u.path, headers={"Host": u.netloc, **(headers or {})})
        return c, c.getresponse()

    def websocket(self, url, headers=None):
        """A connected WebSocket (handshake checked) as a raw socket."""
        u = urllib.parse.urlsplit(url)
        s = socket.create_connection(self.addr, timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (u.path, u.netloc, key, extra)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                raise AssertionError("websocket handshake: connection closed after %r" % head)
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            s.close()
            raise AssertionError("websocket handshake answered %r" % head[:500])
        return s


def ws_send(s, text):
    data = text.encode()
    mask = os.urandom(4)
    head = bytes([0x81])
    head += bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(data))
    s.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data)))


def ws_recv(s):
    def exact(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            if not chunk:
                raise EOFError
            b += chunk
        return b
    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", exact(2))[0]
    return exact(n).decode()


@unittest.skipUnless(is_root(), "needs root")
class PortsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        os.makedirs(data_dir, exist_ok=True)
        cls.s = Server(data_dir).start()
        try:
            r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=cls.s.env(), capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError("building base failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
            cls.p = Preview(cls.s)
            cls.sid = cls.s.create("base", timeout_s=1800)
            cls.start_servers(cls.sid)
        except BaseException:
            cls.s.stop()
            raise

    @classmethod
    def start_servers(cls, sid):
        with open(SERVER_PY, "rb") as f:
            st, _, _ = cls.s.call("PUT", "/v1/sandboxes/%s/files?path=/srv/preview_server.py" % sid, raw=f.read())
        assert st in (200, 201, 204), st
        st, _, _ = cls.s.call("PUT", "/v1/sandboxes/%s/files?path=/srv/index.html" % sid, raw=b"<h1>from http.server</h1>")
        assert st in (200, 201, 204), st
        for cmd in (["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/srv"],
                    ["python3", "/srv/preview_server.py", "8765"]):
            st, d = cls.s.json("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": cmd, "user": "user"})
            assert st in (200, 201), (st, d)
        # Both listen once a connect from inside succeeds.
        st, d = cls.s.exec(sid, ["sh", "-c", "for i in $(seq 100); do python3 -c 'import socket; "
                                 "socket.create_connection((\"127.0.0.1\", 8000)).close(); "
                                 "socket.create_connection((\"127.0.0.1\", 8765)).close()' 2>/dev/null && exit 0; "
                                 "sleep 0.1; done; exit 1"])
        assert st == 200 and d["exit_code"] == 0, (st, d)

    @classmethod
    def tearDownClass(cls):
        cls.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % cls.sid)
        cls.s.stop()

    def open_port(self, port, sid=None, **kw):
        st, d = self.s.json("POST", "/v1/sandboxes/%s/ports" % (sid or self.sid), {"port": port, **kw})
        self.assertEqual(st, 201, d)
        self.addCleanup(self.s.call, "DELETE", "/v1/sandboxes/%s/ports/%d" % (sid or self.sid, port))
        return d

    def test_private_port_needs_its_token_and_the_sandbox_never_sees_it(self):
        d = self.open_port(8765)
        self.assertFalse(d["public"])
        self.assertTrue(d["token"])
        host = host_of(d["url"])
        label = host.split(".", 1)[0].split("-", 1)[1]
        self.assertEqual(label, label.lower())  # survives a browser's lowercasing
        self.assertNotIn("_", label)
        st, _, body = self.p.request(d["url"])
        self.assertEqual(st, 401, body)
        self.assertEqual(json.loads(body)["code"], "unauthenticated")
        st, _, _ = self.p.request(d["url"], headers={"X-Space-Port-Token": "not-" + d["token"]})
        self.assertEqual(st, 401)
        st, _, body = self.p.request(d["url"] + "headers", headers={"X-Space-Port-Token": d["token"],
                                                                     "Cookie": "app=1"})
        self.assertEqual(st, 200, body)
        seen = json.loads(body)
        self.assertNotIn(d["token"], body.decode())  # the sandbox's server never learns the token
        self.assertEqual(seen.get("cookie"), "app=1")
        self.assertEqual(seen.get("Host"), host)
        # ?token= sets a cookie for this host and redirects to the same address without it.
        st, h, _ = self.p.request(d["url"] + "headers?x=1&token=" + d["token"])
        self.assertEqual(st, 302)
        self.assertEqual(h["Location"], "/headers?x=1")
        cookie = h["Set-Cookie"].split(";", 1)[0]
        self.assertIn("HttpOnly", h["Set-Cookie"])
        st, _, body = self.p.request(d["url"] + "headers", headers={"Cookie": cookie + "; app=2"})
        self.assertEqual(st, 200, body)
        self.assertNotIn(d["token"], body.decode())
        self.assertEqual(json.loads(body).get("cookie"), "app=2")
        # A POST body arrives whole.
        payload = os.urandom(300_000)
        st, _, body = self.p.request(d["url"] + "upload", method="POST", body=payload,
                                     headers={"X-Space-Port-Token": d["token"]})
        self.assertEqual(st, 200)
        import hashlib
        self.assertEqual(body.decode(), hashlib.sha256(payload).hexdigest())

    def test_http_server_page_through_a_public_port(self):
        d = self.open_port(8000, public=True)
        self.assertIsNone(d["token"])
        st, _, body = self.p.request(d["url"])
        self.assertEqual(st, 200)
        self.assertIn(b"from http.server", body)
        st, lst = self.s.json("GET", "/v1/sandboxes/%s/ports" % self.sid)
        self.assertEqual(st, 200)
        mine = [p for p in lst["ports"] if p["port"] == 8000][0]
        self.assertGreaterEqual(mine["requests"], 1)
        self.assertNotIn("token", mine)

    def test_ports_not_opened_and_unknown_sandboxes_answer_404(self):
        d = self.open_port(8000, public=True)
        other = d["url"].replace("8000-", "8001-", 1)
        st, _, body = self.p.request(other)
        self.assertEqual(st, 404, body)
        self.assertEqual(json.loads(body)["code"], "not_found")
        host = host_of(d["url"])
        st, _, body = self.p.request("http://8000-sbx-nosuchsandbox." + host.split(".", 1)[1] + "/")
        self.assertEqual(st, 404, body)

    def test_nothing_listening_answers_502_and_ipv6_only_servers_answer(self):
        d = self.open_port(9999, public=True)
        st, _, body = self.p.request(d["url"])
        self.assertEqual(st, 502, body)
        self.assertIn("nothing listens on port 9999", json.loads(body)["message"])
        st, d6 = self.s.json("POST", "/v1/sandboxes/%s/processes" % self.sid, {"cmd": [
            "python3", "-c", "import http.server, socket\n"
            "class S(http.server.HTTPServer): address_family = socket.AF_INET6\n"
            "S(('::1', 9999), http.server.SimpleHTTPRequestHandler).serve_forever()"], "cwd": "/srv"})
        self.assertIn(st, (200, 201), d6)
        try:
            for _ in range(100):
                st, _, body = self.p.request(d["url"] + "index.html")
                if st == 200:
                    break
                time.sleep(0.1)
            self.assertEqual(st, 200, body)
            self.assertIn(b"from http.server", body)
        finally:
            self.s.call("POST", "/v1/sandboxes/%s/processes/%s/signal" % (self.sid, d6["pid"]), {"signal": "SIGKILL"})

    def test_websocket_echo_and_close_ends_it_at_once(self):
        d = self.open_port(8765)
        s = self.p.websocket(d["url"] + "ws", headers={"X-Space-Port-Token": d["token"]})
        try:
            ws_send(s, "ping 1")
            self.assertEqual(ws_recv(s), "ping 1")
            ws_send(s, "x" * 5000)
            self.assertEqual(ws_recv(s), "x" * 5000)
            st, _, _ = self.s.call("DELETE", "/v1/sandboxes/%s/ports/8765" % self.sid)
            self.assertEqual(st, 204)
            # The open connection ends (EOF), without waiting for anything on it.
            s.settimeout(10)
            self.assertEqual(s.recv(4096), b"")
        finally:
            s.close()
        st, _, _ = self.p.request(d["url"], headers={"X-Space-Port-Token": d["token"]})
        self.assertEqual(st, 404)

    def test_streamed_response_arrives_as_it_is_written(self):
        self.s.exec(self.sid, ["rm", "-f", "/tmp/go"])
        d = self.open_port(8765, public=True)
        c, r = self.p.open_stream(d["url"] + "sse")
        try:
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
            # The first event is here while the server still waits for /tmp/go.
            self.assertEqual(r.readline(), b"data: first\n")
            self.assertEqual(r.readline(), b"\n")
            self.s.exec(self.sid, ["touch", "/tmp/go"])
            self.assertEqual(r.readline(), b"data: second\n")
        finally:
            c.close()

    def test_paused_sandbox_answers_503_or_resumes_with_auto_resume(self):
        d = self.open_port(8000, public=True)
        st, _ = self.s.json("POST", "/v1/sandboxes/%s/pause?wait=true" % self.sid)
        self.assertIn(st, (200, 202))
        try:
            st, _, body = self.p.request(d["url"])
            self.assertEqual(st, 503, body)
            self.assertIn("paused", json.loads(body)["message"])
            self.open_port(8000, public=True, auto_resume=True)
            st, _, body = self.p.request(d["url"])
            self.assertEqual(st, 200, body)
            self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + self.sid)[1]["state"], "running")
        finally:
            self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % self.sid)

    def test_bad_requests_are_clear_errors(self):
        for body in ({}, {"port": 0}, {"port": 70000}, {"port": "80"}, {"port": 80, "public": "yes"},
                     {"port": 80, "extra": 1}):
            st, d = self.s.json("POST", "/v1/sandboxes/%s/ports" % self.sid, body)
            self.assertEqual(st, 400, (body, d))
            self.assertEqual(d["code"], "invalid_argument")
        st, d = self.s.json("DELETE", "/v1/sandboxes/%s/ports/4444" % self.sid)
        self.assertEqual(st, 404, d)
        st, d = self.s.json("DELETE", "/v1/sandboxes/%s/ports/x" % self.sid)
        self.assertEqual(st, 404, d)
        st, d = self.s.json("POST", "/v1/sandboxes/sbx_nosuch/ports", {"port": 80})
        self.assertEqual(st, 404, d)

    def test_cli_open_ls_close(self):
        env = self.s.env()
        r = subprocess.run([SPACE_BIN, "port", "open", self.sid, "8000"], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        url = r.stdout.strip()
        self.assertIn("?token=", url)
        st, h, _ = self.p.request(url)
        self.assertEqual(st, 302)
        r = subprocess.run([SPACE_BIN, "port", "ls", self.sid], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("8000\tprivate", r.stdout)
        r = subprocess.run([SPACE_BIN, "port", "close", self.sid, "8000"], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        st, _, _ = self.p.request(url)
        self.assertEqual(st, 404)

    def test_audit_records_who_opened_which_port(self):
        self.open_port(8000, public=True)
        st, d = self.s.json("GET", "/v1/audit?sandbox=%s" % self.sid)
        self.assertEqual(st, 200, d)
        events = [e for e in d["events"] if e["kind"] == "ingress" and e["action"] == "open_port"]
        self.assertTrue(events, d)
        self.assertEqual(events[0]["detail"]["port"], 8000)


@unittest.skipUnless(is_root() and os.path.exists("/usr/bin/qemu-system-x86_64"), "needs root and QEMU")
class VmPortsTest(unittest.TestCase):
    def test_vm_sandbox_serves_through_its_preview_url(self):
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        s = Server(data_dir).start()
        try:
            r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=s.env(), capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            sid = s.create("base", runtime="vm", memory_mb=512, timeout_s=1800)
            try:
                PortsTest.s = s
                PortsTest.start_servers(sid)
                st, d = s.json("POST", "/v1/sandboxes/%s/ports" % sid, {"port": 8765})
                self.assertEqual(st, 201, d)
                p = Preview(s)
                st, _, body = p.request(d["url"], headers={"X-Space-Port-Token": d["token"]})
                self.assertEqual(st, 200, body)
                self.assertIn(b"served from inside the sandbox", body)
                ws = p.websocket(d["url"] + "ws", headers={"X-Space-Port-Token": d["token"]})
                ws_send(ws, "from the host")
                self.assertEqual(ws_recv(ws), "from the host")
                ws.close()
            finally:
                s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        finally:
            s.stop()


if __name__ == "__main__":
    unittest.main()
