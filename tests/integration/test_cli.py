"""The `space` CLI against a real server: create, exec (streaming, exit code), cp, ls, rm."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root  # noqa: E402


@unittest.skipUnless(is_root(), "needs root")
class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def space(self, *args, stdin=None):
        return subprocess.run([SPACE_BIN, *args], env=self.s.env(), input=stdin, capture_output=True, timeout=120)

    def test_workflow(self):
        r = self.space("create", "--template", "busybox")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.assertTrue(sid.startswith("sbx_"), sid)
        r = self.space("exec", sid, "--", "sh", "-c", "echo hi; echo oops >&2; exit 7")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (7, b"hi\n", b"oops\n"))
        r = self.space("exec", sid, "--", "cat", stdin=b"from-stdin")
        self.assertEqual(r.stdout, b"from-stdin")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "in.bin")
            with open(src, "wb") as f:
                f.write(os.urandom(5000))
            self.assertEqual(self.space("cp", src, sid + ":/tmp/in.bin").returncode, 0)
            back = os.path.join(d, "out.bin")
            self.assertEqual(self.space("cp", sid + ":/tmp/in.bin", back).returncode, 0)
            self.assertEqual(open(src, "rb").read(), open(back, "rb").read())
        r = self.space("--json", "ls")
        self.assertIn(sid, [x["id"] for x in json.loads(r.stdout)["sandboxes"]])
        r = self.space("logs", sid)
        self.assertIn(b"echo hi", r.stdout)
        r = self.space("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.space("exec", sid, "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"destroyed", r.stderr)


@unittest.skipUnless(is_root(), "needs root")
class OverlayPoolTest(unittest.TestCase):
    def test_an_overlay_pool_is_refused_at_start_saying_why(self):
        # Sandboxes cannot start on one (overlayfs refuses idmapped mounts): the server says so
        # and exits instead of failing every create; nothing stays mounted.
        data_dir = tempfile.mkdtemp(prefix="space-overlay-", dir="/var/tmp")
        try:
            r = subprocess.run([SPACE_BIN, "dev", "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--overlay"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("overlayfs refuses idmapped mounts", r.stderr)
            with open("/proc/self/mountinfo") as f:
                self.assertNotIn(data_dir, f.read())
        finally:
            subprocess.run(["rm", "-rf", data_dir])


if __name__ == "__main__":
    unittest.main()
