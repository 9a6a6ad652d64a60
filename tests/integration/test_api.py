"""The v1 API against a real `space dev`: sandboxes, exec, processes, files, bad input."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root, sse_events  # noqa: E402


@unittest.skipUnless(is_root(), "needs root (namespaces, cgroups, loop devices)")
class ApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()
        cls.sid = cls.s.create(env={"SANDBOX_WIDE": "yes"}, metadata={"suite": "api"})

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def test_sandbox_object_and_list(self):
        st, sb = self.s.json("GET", "/v1/sandboxes/" + self.sid)
        self.assertEqual(st, 200)
        self.assertEqual(sb["state"], "running")
        self.assertTrue(sb["template_digest"].startswith("sha256:"))
        self.assertIn("create_ms", sb["timings"])
        for step in ("template", "clone_root", "uid_slot", "guest_hello"):
            self.assertIn(step, sb["timings"]["steps"])
        st, d = self.s.json("GET", "/v1/sandboxes?metadata.suite=api")
        self.assertIn(self.sid, [x["id"] for x in d["sandboxes"]])
        st, d = self.s.json("GET", "/v1/sandboxes?metadata.suite=other")
        self.assertNotIn(self.sid, [x["id"] for x in d["sandboxes"]])

    def test_exec_buffered(self):
        st, d = self.s.exec(self.sid, ["sh", "-c", "echo out; echo err >&2; echo $SANDBOX_WIDE $X; exit 3"],
                            env={"X": "req"})
        self.assertEqual(st, 200, d)
        self.assertEqual(d["exit_code"], 3)
        self.assertEqual(d["stdout"], "out\nyes req\n")
        self.assertEqual(d["stderr"], "err\n")
        self.assertFalse(d["truncated"])

    def test_exec_stdin_cwd_user(self):
        self.assertEqual(self.s.exec(self.sid, ["cat"], stdin="piped\n")[1]["stdout"], "piped\n")
        self.assertEqual(self.s.exec(self.sid, ["cat"], stdin_b64="AAEC")[1]["stdout"], "\x00\x01\x02")
        self.assertEqual(self.s.exec(self.sid, ["pwd"], cwd="/tmp")[1]["stdout"], "/tmp\n")
        self.assertEqual(self.s.exec(self.sid, ["id", "-u"], user="user")[1]["stdout"], "1000\n")
        self.assertEqual(self.s.exec(self.sid, ["pwd"], user="user")[1]["stdout"], "/home/user\n")

    def test_exec_sse(self):
        st, h, b = self.s.call("POST", "/v1/sandboxes/%s/exec" % self.sid,
                               {"cmd": ["sh", "-c", "echo a; sleep 0.2; echo b >&2; printf '\\377'"]},
                               accept="text/event-stream")
        self.assertEqual(st, 200)
        self.assertIn("text/event-stream", h["Content-Type"])
        ev = sse_events(b)
        names = [e[0] for e in ev]
        self.assertEqual(names[0], "start")
        self.assertEqual(names[-1], "exit")
        self.assertTrue(ev[0][1]["pid"].startswith("proc_"))
        self.assertIn(("stdout", {"data": "a\n"}), ev)
        self.assertIn(("stderr", {"data": "b\n"}), ev)
        self.assertIn(("stdout", {"data_b64": "/w=="}), ev)
        self.assertEqual(ev[-1][1]["exit_code"], 0)

    def test_exec_timeout_and_missing_binary(self):
        t0 = time.time()
        st, d = self.s.exec(self.sid, ["sleep", "30"], timeout_s=1)
        self.assertTrue(d["timed_out"], d)
        self.assertEqual(d["signal"], "SIGKILL")
        self.assertLess(time.time() - t0, 10)
        st, d = self.s.exec(self.sid, ["/no/such/binary"])
        self.assertIn(st, (400, 404))
        self.assertIn("code", d)

    def test_output_flood_is_bounded(self):
        # 40 MiB of output: the response stays bounded and says it was truncated.
        st, d = self.s.exec(self.sid, ["sh", "-c", "head -c 41943040 /dev/zero"], timeout_s=60)
        self.assertEqual(st, 200)
        self.assertTrue(d["truncated"])
        self.assertLessEqual(len(d["stdout"]), 16 << 20)
        st, cmds = self.s.json("GET", "/v1/sandboxes/%s/commands" % self.sid)
        flood = [c for c in cmds["commands"] if c["cmd"][-1].startswith("head -c 41943040")]
        self.assertEqual(flood[0]["stdout_bytes"], 41943040)

    def test_background_process(self):
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % self.sid,
                            {"cmd": ["sh", "-c", "echo begin; cat; echo end"]})
        self.assertEqual(st, 201, d)
        pid = d["pid"]
        self.s.call("POST", "/v1/sandboxes/%s/processes/%s/stdin" % (self.sid, pid), raw=b"middle\n")
        self.s.call("POST", "/v1/sandboxes/%s/processes/%s/stdin" % (self.sid, pid), raw=b"")
        for _ in range(100):
            st, p = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (self.sid, pid))
            if p["exit_code"] is not None:
                break
            time.sleep(0.05)
        self.assertEqual(p["exit_code"], 0)
        st, _, b = self.s.call("GET", "/v1/sandboxes/%s/processes/%s/output" % (self.sid, pid),
                               accept="text/event-stream")
        text = "".join(e[1].get("data", "") for e in sse_events(b) if e[0] == "stdout")
        self.assertEqual(text, "begin\nmiddle\nend\n")

    def test_signal_process(self):
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % self.sid, {"cmd": ["sleep", "60"]})
        pid = d["pid"]
        st, _ = self.s.json("POST", "/v1/sandboxes/%s/processes/%s/signal" % (self.sid, pid), {"signal": "SIGTERM"})
        self.assertEqual(st, 200)
        for _ in range(100):
            st, p = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (self.sid, pid))
            if p["state"] == "exited":
                break
            time.sleep(0.05)
        self.assertEqual(p["signal"], "SIGTERM")

    def test_files_round_trip(self):
        blob = os.urandom(300000)
        st, _, b = self.s.call("PUT", "/v1/sandboxes/%s/files?path=/tmp/f/g/blob&mode=0600" % self.sid, raw=blob)
        self.assertEqual(st, 201, b)
        st, _, b = self.s.call("GET", "/v1/sandboxes/%s/files?path=/tmp/f/g/blob" % self.sid)
        self.assertEqual(b, blob)
        st, d = self.s.json("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/f/g/blob" % self.sid)
        self.assertEqual((d["type"], d["size"], d["mode"] & 0o777), ("file", len(blob), 0o600))
        st, d = self.s.json("GET", "/v1/sandboxes/%s/files/list?path=/tmp/f&depth=2" % self.sid)
        self.assertEqual(sorted(e["path"] for e in d["entries"]), ["/tmp/f/g", "/tmp/f/g/blob"])
        self.assertEqual(self.s.json("POST", "/v1/sandboxes/%s/files/mkdir" % self.sid, {"path": "/tmp/m/n"})[0], 200)
        st, _ = self.s.json("POST", "/v1/sandboxes/%s/files/move" % self.sid,
                            {"from": "/tmp/f/g/blob", "to": "/tmp/m/n/moved"})
        self.assertEqual(st, 200)
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/tmp/m/n/moved" % self.sid)[2], blob)
        st, _, _ = self.s.call("DELETE", "/v1/sandboxes/%s/files?path=/tmp/m&recursive=true" % self.sid)
        self.assertEqual(st, 204)
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/m" % self.sid)[0], 404)
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/tmp" % self.sid)[0], 400)

    def test_paths_stay_inside_the_sandbox(self):
        # A host file the sandbox must never reach, by '..' or by symlink.
        marker = "/var/tmp/space-marker-%d" % os.getpid()
        with open(marker, "w") as f:
            f.write("host-secret")
        try:
            name = os.path.basename(marker)
            self.s.exec(self.sid, ["ln", "-sf", marker, "/tmp/escape"])
            self.s.exec(self.sid, ["ln", "-sf", "/../../../../var/tmp", "/tmp/escape_dir"])
            for path in ["/tmp/escape", "/../../../../" + marker, "/tmp/escape_dir/" + name]:
                st, _, b = self.s.call("GET", "/v1/sandboxes/%s/files?path=%s" % (self.sid, path))
                self.assertNotIn(b"host-secret", b, path)
                self.assertEqual(st, 404, path)
            # Writing through a symlink lands inside the sandbox, never on the host.
            st, _, _ = self.s.call("PUT", "/v1/sandboxes/%s/files?path=/tmp/escape" % self.sid, raw=b"overwritten")
            with open(marker) as f:
                self.assertEqual(f.read(), "host-secret")
        finally:
            os.unlink(marker)

    def test_bad_input(self):
        s, sid = self.s, self.sid
        cases = [
            ("POST", "/v1/sandboxes", b"{oops", 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b"[1,2]", 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"cpus": "lots"}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"timeout_s": -1}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"template": "../../etc"}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"no_such_field": 1}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"env": {"A=B": "x"}}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes", b'{"template": "nope"}', 404, "not_found"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b'{"cmd": []}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b'{"cmd": "ls"}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b'{"cmd": ["ls"], "user": "x;y"}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b'{"cmd": ["ls"], "cwd": "rel"}', 400, "invalid_argument"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b'{"cmd": ["ls"], "stdin_b64": "!!"}', 400, "invalid_argument"),
            ("GET", "/v1/sandboxes/%s/files?path=relative" % sid, None, 400, "invalid_argument"),
            ("GET", "/v1/sandboxes/%s/files?path=/a%%00b" % sid, None, 400, "invalid_argument"),
            ("GET", "/v1/sandboxes/sbx_nope", None, 404, "not_found"),
            ("GET", "/v1/sandboxes/..%2f..%2fetc", None, 404, "not_found"),
            ("GET", "/v1/operations/op_nope", None, 404, "not_found"),
            ("GET", "/v1/nothing", None, 404, "not_found"),
        ]
        for method, path, raw, code, word in cases:
            st, _, b = s.call(method, path, raw=raw)
            self.assertEqual(st, code, (method, path, raw, b))
            d = __import__("json").loads(b)
            self.assertEqual(d["code"], word, (path, d))
            self.assertTrue(d["message"], (path, d))
        st, _, b = s.call("GET", "/v1/sandboxes", key=False)
        self.assertEqual(st, 401)
        st, _, b = s.call("GET", "/v1/sandboxes", headers={"Authorization": "Bearer wrong"}, key=False)
        self.assertEqual(st, 401)
        # Oversized body: refused with 413, the server stays up.
        st, _, b = s.call("PUT", "/v1/sandboxes/%s/files?path=/tmp/big" % sid, raw=b"x" * (101 << 20))
        self.assertEqual(st, 413)
        self.assertEqual(s.call("GET", "/healthz", key=False)[0], 200)

    def test_timeout_destroys(self):
        sid = self.s.create(timeout_s=1)
        for _ in range(100):
            st, d = self.s.json("GET", "/v1/sandboxes/" + sid)
            if d["state"] == "destroyed":
                break
            time.sleep(0.1)
        self.assertEqual(d["state"], "destroyed")
        st, ev = self.s.json("GET", "/v1/audit?sandbox=%s&kind=lifecycle" % sid)
        self.assertIn("timeout", [e["action"] for e in ev["events"]])

    def test_destroy(self):
        sid = self.s.create()
        st, op = self.s.json("DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 202)
        st, op = self.s.json("GET", "/v1/operations/%s?wait=true" % op["id"])
        self.assertEqual(op["state"], "succeeded")
        self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + sid)[1]["state"], "destroyed")
        self.assertEqual(self.s.exec(sid, ["true"])[0], 409)


if __name__ == "__main__":
    unittest.main()
