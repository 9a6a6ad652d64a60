"""The web console (docs/console.md) in Debian's chromium driven by playwright-core: the
whole flow of tests/browser/console.mjs against a real `space dev` (login, create, terminal,
files, snapshot and fork, activity, a template built from a Dockerfile, accessibility), then
checked again over the API: the fork exists, the uploaded file is in the sandbox, the refused
lookup is in the audit, the template is listed.
Screenshots of each view go to build/screenshots/console/."""
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BROWSER_DIR = os.path.join(ROOT, "tests", "browser")


@unittest.skipUnless(is_root(), "needs root")
class BrowserConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("node", "npm", "chromium"):
            if not shutil.which(tool):
                raise AssertionError("%s is missing: make deps installs it" % tool)
        if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "axe-core")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR, check=True)
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        os.makedirs(data_dir, exist_ok=True)
        cls.s = Server(data_dir).start()
        try:
            r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=cls.s.env(), capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError("building base failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
            st, d = cls.s.json("PUT", "/v1/egress-profiles/console-net", {"allow": [{"host": "allowed.test.example"}]})
            assert st == 200, (st, d)
        except BaseException:
            cls.s.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        for sid in getattr(cls, "created", []):
            cls.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        cls.s.stop()

    def test_the_console_flow_in_chromium(self):
        shots = os.path.join(ROOT, "build", "screenshots", "console")
        shutil.rmtree(shots, ignore_errors=True)
        os.makedirs(shots)
        r = subprocess.run(["node", "console.mjs"], cwd=BROWSER_DIR, capture_output=True, text=True, timeout=900,
                           env=dict(os.environ, CONSOLE_URL=self.s.url, SPACE_API_KEY=self.s.key, SHOT_DIR=shots,
                                    TEMPLATE="base", PROFILE="console-net"))
        out = [line for line in r.stdout.splitlines() if line.startswith("{")]
        result = json.loads(out[-1]) if out else {}
        type(self).created = [x for x in (result.get("sandbox"), result.get("fork")) if x]
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-5000:] + self.s.log_tail())
        self.assertTrue(result.get("ok"), r.stdout[-2000:])
        sid, fork = result["sandbox"], result["fork"]
        # What the browser did, seen from the API.
        st, d = self.s.json("GET", "/v1/sandboxes/%s" % sid)
        self.assertEqual((st, d["state"], d["egress_profiles"]), (200, "running", ["console-net"]))
        st, d = self.s.json("GET", "/v1/sandboxes/%s" % fork)
        self.assertEqual(st, 200, d)
        self.assertEqual(d["head_snapshot"], result["snapshot"])
        st, _, body = self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/upload.txt" % sid)
        self.assertEqual(st, 200)
        self.assertTrue(body.startswith(b"hello from the browser"))
        st, d = self.s.json("GET", "/v1/audit?sandbox=%s&kind=egress" % sid)
        self.assertTrue(any(e["action"] == "deny" and "blocked.test.example" in json.dumps(e["detail"])
                            for e in d["events"]), d)
        st, d = self.s.json("GET", "/v1/templates/" + result["template"])
        self.assertEqual(st, 200, d)
        self.s.json("DELETE", "/v1/templates/" + result["template"])
        for view in ("login-wrong-key", "sandboxes", "terminal", "files", "snapshots", "activity", "templates"):
            self.assertGreater(os.path.getsize(os.path.join(shots, view + ".png")), 5000, view)


if __name__ == "__main__":
    unittest.main()
