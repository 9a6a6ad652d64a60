"""The unmodified E2B JavaScript SDKs (`e2b`, `@e2b/code-interpreter`, pinned in tests/e2b)
against a real `space dev`: tests/e2b/e2e.mjs runs the flow of issue 6 ("How we will know").

The SDK packages come from the npm registry with `npm ci` (lockfile versions) the first time.
The server keeps its state in SPACE_TEST_DATA_DIR (default /var/lib/space-test, as the contract
run) so the Debian `base` template, which the SDK's default templates map to, is built once.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root  # noqa: E402

E2B_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2b"))


@unittest.skipUnless(is_root(), "needs root (namespaces, cgroups, loop devices)")
class E2bSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("node", "npm"):
            if shutil.which(tool) is None:
                raise AssertionError("%s is missing: run scripts/install-deps.sh" % tool)
        if not os.path.isdir(os.path.join(E2B_DIR, "node_modules")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=E2B_DIR, check=True)
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        os.makedirs(data_dir, exist_ok=True)
        cls.s = Server(data_dir).start()
        # Builds `base` on first use (debootstrap, about 80 s), then it is cached.
        r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=cls.s.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            cls.s.stop()
            raise AssertionError("building base failed:\n" + r.stdout[-4000:])

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def run_e2e(self, runtime=""):
        env = dict(os.environ,
                   E2B_API_URL=self.s.url,      # control API
                   E2B_SANDBOX_URL=self.s.url,  # envd and code interpreter: same listener, plain http
                   E2B_API_KEY=self.s.key,      # a SPACE API key, sent as X-API-KEY
                   E2E_RUNTIME=runtime,
                   E2E_HOST_KERNEL=os.uname().release)
        env.pop("E2B_DEBUG", None)
        t0 = time.monotonic()
        r = subprocess.run(["node", "e2e.mjs"], cwd=E2B_DIR, env=env, timeout=900,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - t0
        print("\n" + r.stdout.rstrip() + "\ne2b end-to-end wall time (%s): %.1f s" % (runtime or "ns", wall))
        if r.returncode != 0:
            self.fail("e2e.mjs failed (exit %d)\n--- server log ---\n%s" % (r.returncode, self.s.log_tail()))
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertTrue(summary["ok"])
        return summary

    def test_sdk_flow(self):
        self.assertEqual(len(self.run_e2e()["steps"]), 16)

    def test_sdk_flow_on_vm(self):
        # The same flow with metadata space.runtime=vm: every sandbox is a QEMU guest (TCG
        # here), and one more step checks it runs its own kernel. On a fresh data dir the first
        # vm create of base makes its disk image and template checkpoint: done here over /v1,
        # which waits as long as that takes, so the SDK's create does not race its 60 s limit.
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % self.s.create(template="base", runtime="vm"))
        self.assertEqual(len(self.run_e2e("vm")["steps"]), 17)
        st, body = self.s.json("POST", "/v2/sandboxes", {"templateID": "base", "metadata": {"space.runtime": "xen"}},
                               headers={"X-API-KEY": self.s.key})
        self.assertEqual((st, body["code"]), (400, 400), body)
        self.assertIn("space.runtime must be 'ns' or 'vm'", body["message"])

    def test_envd_refuses_bad_requests(self):
        # No token: envd calls are refused before anything reaches the sandbox.
        sid = self.s.create(template="busybox")
        st, _, body = self.s.call("POST", "/filesystem.Filesystem/Stat", key=False, raw=b'{"path":"/"}',
                                  headers={"E2b-Sandbox-Id": sid, "Content-Type": "application/json"})
        self.assertEqual(st, 401)
        self.assertEqual(json.loads(body)["code"], "unauthenticated")
        # Unknown sandbox: 502, as E2B's edge answers for a sandbox that is not running.
        st, _, _ = self.s.call("GET", "/health", key=False, headers={"E2b-Sandbox-Id": "sbx_nope"})
        self.assertEqual(st, 502)
        # Control API: a missing key is 401 with E2B's numeric error code in the body.
        st, _, body = self.s.call("GET", "/v2/sandboxes", key=False)
        self.assertEqual(st, 401)
        self.assertEqual(json.loads(body)["code"], 401)
        st, _, body = self.s.call("DELETE", "/sandboxes/sbx_doesnotexist", key=False,
                                  headers={"X-API-KEY": self.s.key})
        self.assertEqual((st, json.loads(body)["code"]), (404, 404))
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)


if __name__ == "__main__":
    unittest.main()
