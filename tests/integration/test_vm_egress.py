"""A `vm` sandbox's network, end to end: its NIC is a tap on the host under the same link name
an ns sandbox's veth has, so the same firewall, gateway, egress profile and credentials apply.

The test builds its own network (egress/testnet.py: upstream servers in a network namespace it
creates, a test CA, a DNS zone), runs the Debian `base` template in a microVM (TCG emulation
where the host has no usable /dev/kvm), and checks from inside the guest: the allowed host
answers, every other address and the host's own services do not; a credential's secret
reaches the upstream in the request header and is nowhere in the guest; a fork gets its own
address and MAC and keeps the policy. Skipped without root or qemu-system-x86_64."""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "egress"))
from harness import SPACE_BIN, HostService, Server, is_root  # noqa: E402
from testnet import HOST_IP, UPSTREAM_IP, TestNet  # noqa: E402

QEMU = "/usr/bin/qemu-system-x86_64"
SECRET = "s3cr3t-VM-EGRESS-5d2e81"
LIMITED_SECRET = "limited-VM-SECRET-7a19c4"
PROFILE = {"allow": [{"host": "api.test.example"}, {"host": "cred.test.example"}]}
VM = {"template": "base", "runtime": "vm", "memory_mb": 512, "timeout_s": 1800}


@unittest.skipUnless(is_root() and os.path.exists(QEMU), "needs root and qemu-system-x86_64")
class VmEgressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._created = []
        try:
            cls.start_all()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_all(cls):
        cls.net = TestNet().start()
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        os.makedirs(data_dir, exist_ok=True)
        cls.s = Server(data_dir, extra_args=["--egress-dns", cls.net.dns, "--egress-upstream-ca", cls.net.ca]).start()
        r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=cls.s.env(), capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("building base failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
        assert cls.s.json("PUT", "/v1/egress-profiles/vmnet", PROFILE)[0] == 200
        assert cls.s.json("PUT", "/v1/credentials/vmtok", {
            "secret": SECRET, "hosts": ["cred.test.example"], "env": "TOKEN"})[0] == 200
        assert cls.s.json("PUT", "/v1/credentials/vmlimited", {
            "secret": LIMITED_SECRET, "hosts": ["cred.test.example"], "header": "X-Api-Key", "format": "{secret}",
            "env": "LIMITED", "rate_limit_per_min": 2})[0] == 200
        st, d = cls.s.json("POST", "/v1/sandboxes?wait=true", dict(VM, credentials=["vmtok", "vmlimited"]),
                           headers={"X-Space-Egress-Profile": "vmnet"}, timeout=600)
        assert st == 201, (st, d, cls.s.log_tail())
        cls.sid = d["sandbox"]["id"]
        cls._created.append(cls.sid)

    @classmethod
    def tearDownClass(cls):
        try:
            for sid in getattr(cls, "_created", []):
                cls.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
            if getattr(cls, "s", None):
                cls.s.stop()
        finally:
            if getattr(cls, "net", None):
                cls.net.stop()

    def sh(self, script, sid=None, timeout_s=60):
        st, d = self.s.exec(sid or self.sid, ["sh", "-c", script], timeout_s=timeout_s)
        self.assertEqual(st, 200, d)
        return d

    def paths(self):
        return [r.get("path") for r in self.net.requests()]

    def identity(self, sid):
        """(MAC, address) of the guest's NIC, as the guest sees them."""
        d = self.sh("cat /sys/class/net/eth0/address; python3 -c 'import socket; "
                    "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((\"100.64.0.1\", 9)); "
                    "print(s.getsockname()[0])'", sid=sid)
        mac, address = d["stdout"].split()
        return mac, address

    def test_1_the_guest_kernel_is_its_own(self):
        # The guest runs its own kernel (the cloud image's), not the host's.
        d = self.sh("uname -r")
        self.assertIn("cloud-amd64", d["stdout"], d)
        self.assertNotEqual(d["stdout"].strip(), os.uname().release)

    def test_2_allowed_host_answers(self):
        d = self.sh("curl -sS -m 30 http://api.test.example/vm-allowed")
        self.assertEqual(json.loads(d["stdout"])["path"], "/vm-allowed", d)
        self.assertIn("/vm-allowed", self.paths())

    def test_3_other_hosts_raw_addresses_and_the_host_refused(self):
        before = len(self.net.requests())
        d = self.sh("curl -sS -m 20 --resolve other.test.example:80:%s http://other.test.example/x" % UPSTREAM_IP)
        self.assertIn("egress_denied", d["stdout"] + d["stderr"], d)
        d = self.sh("curl -sS -m 20 http://%s/x" % UPSTREAM_IP)
        self.assertIn("egress_denied", d["stdout"] + d["stderr"], d)
        d = self.sh("getent hosts other.test.example; echo rc=$?")
        self.assertIn("rc=2", d["stdout"], d)
        self.assertEqual(len(self.net.requests()), before, "a refused request reached the upstream")
        # A service on the host, on every address: nothing of it reaches the guest.
        srv = HostService()
        targets = ["100.64.0.1", HOST_IP, "192.0.2.2", "127.0.0.1"]
        d = self.sh("python3 -c \"%s\"" % srv.probe_code(targets, connect_s=3, read_s=5).replace('"', '\\"'))
        self.assertNotIn("HOST-SERVICE", d["stdout"], d)
        self.assertEqual(len(d["stdout"].splitlines()), len(targets), d)
        time.sleep(0.2)
        srv.close()
        self.assertEqual(srv.hits, [])

    def test_4_secret_reaches_the_upstream_and_never_the_guest(self):
        # TLS to the credential's host: the gateway terminates it with the node's CA, which
        # must be in the guest's trust store (no --cacert here).
        d = self.sh("echo $TOKEN; curl -sS -m 30 https://cred.test.example/vm-cred -H \"Authorization: Bearer $TOKEN\"")
        self.assertEqual(len(d["stdout"].splitlines()), 2, d)
        placeholder = d["stdout"].splitlines()[0]
        self.assertTrue(placeholder.startswith("space-cred-"), d)
        self.assertEqual(json.loads(d["stdout"].splitlines()[1])["path"], "/vm-cred", d)
        got = [r for r in self.net.requests() if r.get("path") == "/vm-cred"]
        self.assertEqual(got[-1]["headers"].get("Authorization"), "Bearer " + SECRET)
        # Not in any process's environment, nor in any file of the guest ...
        d = self.sh("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '%s'; "
                    "grep -rl --no-messages '%s' / --exclude-dir=proc --exclude-dir=sys | head -3; echo done"
                    % (SECRET, SECRET), timeout_s=300)
        self.assertEqual(d["stdout"].split(), ["0", "done"], d)
        # ... nor on its disk, as the host sees it.
        disk = os.path.join(self.s.data_dir, "pool", "sandboxes", self.sid, ".space-vm", "disk.img")
        self.assertTrue(os.path.exists(disk), disk)
        r = subprocess.run(["grep", "-c", "-a", SECRET, disk], capture_output=True, text=True)
        self.assertEqual(r.stdout.strip(), "0", "secret on the guest's disk")

    def test_5_fork_gets_its_own_identity_and_keeps_the_policy(self):
        parent = self.identity(self.sid)
        st, d = self.s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % self.sid, {"count": 1}, timeout=600)
        self.assertIn(st, (200, 201, 202), d)
        child = (d.get("sandboxes") or [d.get("sandbox")])[0]
        cid = child["id"] if isinstance(child, dict) else child
        self._created.append(cid)
        for _ in range(600):
            st, info = self.s.json("GET", "/v1/sandboxes/" + cid)
            if info["state"] != "creating":
                break
            time.sleep(0.5)
        self.assertEqual(info["state"], "running", info)
        self.assertEqual(info["egress_profiles"], ["vmnet"], info)
        theirs = self.identity(cid)
        self.assertNotEqual(parent[0], theirs[0], (parent, theirs))
        self.assertNotEqual(parent[1], theirs[1], (parent, theirs))
        self.assertTrue(theirs[1].startswith("100.96."), theirs)
        d = self.sh("curl -sS -m 30 http://api.test.example/vm-forked", sid=cid)
        self.assertEqual(json.loads(d["stdout"])["path"], "/vm-forked", d)
        d = self.sh("curl -sS -m 20 http://%s/x" % UPSTREAM_IP, sid=cid)
        self.assertIn("egress_denied", d["stdout"] + d["stderr"], d)

    def audit(self, kind):
        st, d = self.s.json("GET", "/v1/audit?kind=%s&sandbox=%s&limit=1000" % (kind, self.sid))
        self.assertEqual(st, 200, d)
        return d["events"]

    def test_6_rate_limit_and_audit_hold_as_for_ns(self):
        # A credential's rate limit: 2 of 5 requests get the secret, 3 are refused (429).
        codes = []
        for i in range(5):
            d = self.sh("curl -s -o /dev/null -w '%%{http_code}' -m 20 https://cred.test.example/vm-limited-%d "
                        "-H \"X-Api-Key: $LIMITED\"" % i)
            codes.append(d["stdout"])
        self.assertEqual((codes.count("200"), codes.count("429")), (2, 3), codes)
        injected = [r for r in self.net.requests() if str(r.get("path", "")).startswith("/vm-limited-")]
        self.assertEqual(len(injected), 2)
        self.assertTrue(all(r["headers"].get("X-Api-Key") == LIMITED_SECRET for r in injected))
        # Each egress decision and each refusal is in the audit, under this sandbox, with no secret.
        self.sh("curl -s -m 20 http://api.test.example/vm-audited; curl -s -m 20 http://%s/vm-denied; true" % UPSTREAM_IP)
        deadline = time.monotonic() + 15
        while True:
            limited = [e for e in self.audit("credential") if e["action"] == "rate_limited"]
            events = self.audit("egress")
            allowed = [e for e in events if e["action"] == "allow" and e["detail"].get("host") == "api.test.example"]
            denied = [e for e in events if e["action"] == "deny" and e["detail"].get("host") == UPSTREAM_IP]
            if (len(limited) >= 3 and allowed and denied) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(len(limited), 3, limited)
        self.assertTrue(allowed and denied, events[:5])
        # (test_4's own exec names the secret it greps for: the exec audit quotes commands.)
        recorded = json.dumps(self.audit("egress") + self.audit("credential"))
        self.assertNotIn(SECRET, recorded)
        self.assertNotIn(LIMITED_SECRET, recorded)


if __name__ == "__main__":
    unittest.main()
