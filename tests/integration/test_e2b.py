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

    def test_sdk_template_build(self):
        # tests/e2b/template.mjs: the SDK's Template builder against SPACE's template builds.
        env = dict(os.environ, E2B_API_URL=self.s.url, E2B_SANDBOX_URL=self.s.url, E2B_API_KEY=self.s.key)
        env.pop("E2B_DEBUG", None)
        r = subprocess.run(["node", "template.mjs"], cwd=E2B_DIR, env=env, timeout=900,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print("\n" + r.stdout.rstrip())
        if r.returncode != 0:
            self.fail("template.mjs failed (exit %d)\n--- server log ---\n%s" % (r.returncode, self.s.log_tail()))
        self.assertEqual(len(json.loads(r.stdout.strip().splitlines()[-1])["steps"]), 5)

    def test_template_uploads_refuse_bad_links_and_hostile_archives(self):
        key = {"X-API-KEY": self.s.key}
        st, b = self.s.json("POST", "/v3/templates", {"name": "e2e-hostile"}, headers=key)
        self.assertEqual(st, 202, b)
        tid, bid = b["templateID"], b["buildID"]
        h = "c" * 64
        st, link = self.s.json("GET", "/templates/%s/files/%s" % (tid, h), headers=key)
        self.assertEqual((st, link["present"]), (201, False), link)
        path = link["url"].split("/", 3)[3]  # the link names this listener: keep its path

        def put(p, data):
            st, _, body = self.s.call("PUT", "/" + p, raw=data, key=False)
            return st, json.loads(body) if body else None
        import gzip
        import io
        import tarfile
        good = io.BytesIO()
        with tarfile.open(fileobj=good, mode="w") as t:
            info = tarfile.TarInfo("app/ok.txt")
            info.size = 2
            t.addfile(info, io.BytesIO(b"ok"))
        climb = io.BytesIO()
        with tarfile.open(fileobj=climb, mode="w") as t:
            info = tarfile.TarInfo("../../etc/passwd")
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
        self.assertEqual(put(path.replace("token=", "token=0"), good.getvalue())[0], 401)  # a forged token
        self.assertEqual(put(path.split("&token=")[0], good.getvalue())[0], 401)           # none
        self.assertEqual(put(path.replace("c" * 64, "d" * 64), good.getvalue())[0], 401)   # another hash
        self.assertEqual(put(path, b"not a tar")[0], 400)
        self.assertEqual(put(path, climb.getvalue())[0], 400)
        self.assertEqual(put(path, gzip.compress(b"\0" * (80 << 20)))[0], 400)  # inflates past 64 MiB
        self.assertEqual(put(path, gzip.compress(good.getvalue()))[0], 200)
        # A trigger that names files never uploaded, or an image, fails with its reason.
        body = {"fromTemplate": "busybox", "steps": [
            {"type": "COPY", "args": ["app", "/app", "", ""], "filesHash": "e" * 64, "force": False}]}
        st, b = self.s.json("POST", "/v2/templates/%s/builds/%s" % (tid, bid), body, headers=key)
        self.assertEqual((st, b["code"]), (400, 400), b)
        self.assertIn("were not uploaded", b["message"])
        st, b = self.s.json("POST", "/v2/templates/%s/builds/%s" % (tid, "bld_nope"), body, headers=key)
        self.assertEqual(st, 404, b)
        st, b = self.s.json("GET", "/templates/%s/builds/%s/status" % (tid, bid), headers=key)
        self.assertEqual((st, b["status"], b["logEntries"]), (200, "waiting", []), b)
        # Without an API key nothing but the upload is served.
        st, _, _ = self.s.call("POST", "/v3/templates", raw=b'{"name":"x"}', key=False)
        self.assertEqual(st, 401)

    def test_sdk_flow(self):
        self.assertEqual(len(self.run_e2e()["steps"]), 17)

    def test_sdk_flow_on_vm(self):
        # The same flow with metadata space.runtime=vm: every sandbox is a QEMU guest (TCG
        # here), and one more step checks it runs its own kernel. On a fresh data dir the first
        # vm create of base makes its disk image and template checkpoint: done here over /v1,
        # which waits as long as that takes, so the SDK's create does not race its 60 s limit.
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % self.s.create(template="base", runtime="vm"))
        self.assertEqual(len(self.run_e2e("vm")["steps"]), 18)
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
