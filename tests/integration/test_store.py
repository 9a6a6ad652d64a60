"""The snapshot store: export, suspend/resume across a restart, crash during export, rolling
snapshots and what they cost in stored bytes."""
import hashlib
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root  # noqa: E402


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def manifests(server):
    d = os.path.join(server.data_dir, "store", "manifests")
    return sorted(f[:-5] for f in os.listdir(d)) if os.path.isdir(d) else []


@unittest.skipUnless(is_root(), "needs root")
class StoreTest(unittest.TestCase):
    def setUp(self):
        self.s = Server().start()

    def tearDown(self):
        self.s.cleanup()

    def sh(self, sid, script, **kw):
        st, d = self.s.exec(sid, ["sh", "-c", script], **kw)
        self.assertEqual(st, 200, d)
        return d["stdout"]

    def wait_snapshot(self, snap_id, states=("restorable", "failed"), timeout=60):
        for _ in range(int(timeout / 0.05)):
            st, d = self.s.json("GET", "/v1/snapshots/" + snap_id)
            if d.get("state") in states:
                return d
            time.sleep(0.05)
        self.fail("snapshot %s stuck in %s" % (snap_id, d))

    def test_export_makes_snapshots_restorable(self):
        sid = self.s.create()
        self.sh(sid, "echo data > /root/f")
        st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "x"})
        d = self.wait_snapshot(snap["id"])
        self.assertEqual(d["state"], "restorable")
        self.assertGreater(d["size_bytes"], 0)
        self.assertIn(snap["id"], manifests(self.s))

    def test_suspend_restart_resume_restores_files(self):
        sid = self.s.create(on_timeout="suspend")
        blob = os.urandom(3 << 20)
        self.s.call("PUT", "/v1/sandboxes/%s/files?path=/root/blob" % sid, raw=blob)
        self.sh(sid, "echo kept > /root/f")
        # A user's private files: exported and restored by the tree jail, owners and modes kept.
        self.sh(sid, "mkdir -p /home/u && echo mine > /home/u/s && chown -R 1000:1000 /home/u && "
                     "chmod 700 /home/u && chmod 600 /home/u/s && mkdir -p /srv/g && chgrp 1000 /srv/g && "
                     "chmod 2770 /srv/g")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/suspend?wait=true" % sid)
        self.assertEqual((st, d.get("state")), (200, "suspended"), d)
        # Nothing of it is left on the node: no root, no local snapshot copy.
        self.assertNotIn(sid, os.listdir(os.path.join(self.s.data_dir, "pool", "sandboxes")))
        self.assertEqual(self.s.exec(sid, ["true"])[0], 409)
        st, snaps = self.s.json("GET", "/v1/sandboxes/%s/snapshots" % sid)
        self.assertEqual(snaps["snapshots"][-1]["kind"], "filesystem")

        self.s.kill9()
        self.s.start()
        self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + sid)[1]["state"], "suspended")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)
        self.assertEqual((st, d.get("state")), (200, "running"), d)
        self.assertEqual(self.sh(sid, "cat /root/f"), "kept\n")
        self.assertEqual(self.sh(sid, "cat /home/u/s; stat -c '%u:%g %a' /home/u /home/u/s /srv/g"),
                         "mine\n1000:1000 700\n1000:1000 600\n0:1000 2770\n")
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/blob" % sid)[2], blob)

    def test_timeout_suspends_when_asked(self):
        sid = self.s.create(timeout_s=1, on_timeout="suspend")
        self.sh(sid, "echo t > /root/t")
        for _ in range(200):
            state = self.s.json("GET", "/v1/sandboxes/" + sid)[1]["state"]
            if state == "suspended":
                break
            time.sleep(0.05)
        self.assertEqual(state, "suspended")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)
        self.assertEqual(self.sh(sid, "cat /root/t"), "t\n")

    def test_kill9_during_export_never_restores_wrong_content(self):
        sid = self.s.create(disk_mb=1024)
        expected = {}
        for i, delay in enumerate((0.0, 0.01, 0.05, 0.2)):
            self.sh(sid, "head -c 33554432 /dev/urandom > /root/big; echo %d > /root/n" % i, timeout_s=120)
            digest = self.sh(sid, "sha256sum /root/big | cut -d' ' -f1").strip()
            st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": str(i)})
            self.assertEqual(st, 201, snap)
            expected[snap["id"]] = (digest, "%d\n" % i)
            time.sleep(delay)
            self.s.kill9()
            self.s.start()
            sid_state = self.s.json("GET", "/v1/sandboxes/" + sid)[1]["state"]
            self.assertEqual(sid_state, "running")
        # After the restarts every export is redone; each snapshot restores exactly its content.
        for snap_id, (digest, n) in expected.items():
            d = self.wait_snapshot(snap_id, timeout=120)
            self.assertEqual(d["state"], "restorable", d)
        # Restore from the store, not from the local copy: drop the local copies first.
        for snap_id in expected:
            subprocess.run(["btrfs", "subvolume", "delete",
                            os.path.join(self.s.data_dir, "pool", "snapshots", snap_id)], check=True,
                           stdout=subprocess.DEVNULL)
        for snap_id, (digest, n) in expected.items():
            st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"from_snapshot": snap_id})
            self.assertEqual(st, 201, d)
            kid = d["sandbox"]["id"]
            self.assertEqual(self.sh(kid, "sha256sum /root/big | cut -d' ' -f1").strip(), digest)
            self.assertEqual(self.sh(kid, "cat /root/n"), n)
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % kid)
        # No temp files or unreferenced objects were left by the interrupted exports.
        objects = os.path.join(self.s.data_dir, "store", "objects")
        temps = [f for r, _, fs in os.walk(objects) for f in fs if f.startswith("tmp")]
        self.assertEqual(temps, [])

    def test_rolling_snapshots_store_what_changed(self):
        sid = self.s.create(disk_mb=1024)
        self.sh(sid, "for i in $(seq 1 20); do head -c 1048576 /dev/urandom > /root/f$i; done")
        ids = []
        for i in range(50):
            self.sh(sid, "head -c 1048576 /dev/urandom > /root/f%d" % (i % 20 + 1))
            st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "r%d" % i})
            ids.append(snap["id"])
        for snap_id in ids:
            self.assertEqual(self.wait_snapshot(snap_id, timeout=120)["state"], "restorable")
        stored = du(os.path.join(self.s.data_dir, "store"))
        first = 20 << 20
        changed = 50 << 20
        print("\nstore after 50 snapshots of a 20 MiB tree changing 1 MiB each: %.1f MiB" % (stored / 2**20))
        self.assertLess(stored, first + changed + (8 << 20))  # about 50 MiB plus the first
        self.assertGreater(stored, changed)                     # and the changes really are there

    def test_rolling_policy_takes_and_thins(self):
        sid = self.s.create(snapshot_policy={"every_s": 1, "keep": 2})
        seen = set()
        deadline = time.time() + 5
        while time.time() < deadline:
            st, d = self.s.json("GET", "/v1/sandboxes/%s/snapshots" % sid)
            seen |= {x["id"] for x in d["snapshots"] if x["label"] == "rolling"}
            time.sleep(0.2)
        st, d = self.s.json("GET", "/v1/sandboxes/%s/snapshots" % sid)
        rolling = {x["id"] for x in d["snapshots"] if x["label"] == "rolling"}
        self.assertGreaterEqual(len(rolling), 1)
        self.assertLessEqual(len(rolling), 2)
        thinned = seen - rolling
        self.assertTrue(thinned, "nothing was thinned in 5 s with every_s=1, keep=2")
        # Thinned ones are gone from the store too, not only from the list.
        self.assertEqual(thinned & set(manifests(self.s)), set())

    def test_snapshot_before_exec(self):
        sid = self.s.create()
        self.sh(sid, "echo precious > /root/p")
        st, d = self.s.exec(sid, ["sh", "-c", "rm -f /root/p"], snapshot_before=True)
        self.assertEqual(st, 200, d)
        snap = d["snapshot"]
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/rollback" % sid, {"snapshot": snap})
        self.assertEqual(st, 200, sb)
        self.assertEqual(self.sh(sid, "cat /root/p"), "precious\n")


if __name__ == "__main__":
    unittest.main()
