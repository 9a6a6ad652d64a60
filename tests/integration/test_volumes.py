"""Volumes end to end (issue 26): named, team-owned data in btrfs subvolumes of the node's pool,
mounted into real ns sandboxes. Written in one sandbox and read in another after the first is
destroyed; one writer at a time (409) while read-only mounts fan out, which btrfs refuses to
write even after the sandbox's root remounts them read-write; delete refused while mounted;
fork; a size limit the kernel enforces; suspend and resume keeping the volume; a node killed
with -9 and restarted; and hostile input."""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root, mounts_under  # noqa: E402


@unittest.skipUnless(is_root(), "needs root")
class VolumesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def sh(self, sid, script, ok=True):
        st, d = self.s.exec(sid, ["sh", "-c", script])
        self.assertEqual(st, 200, d)
        if ok:
            self.assertEqual(d["exit_code"], 0, d)
        return d

    def volume(self, name, size_mb=64):
        st, d = self.s.json("PUT", "/v1/volumes/" + name, {"size_mb": size_mb})
        self.assertEqual(st, 201, d)
        self.addCleanup(self.s.call, "DELETE", "/v1/volumes/" + name)
        return d

    def create(self, volumes, template="busybox"):
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": template, "volumes": volumes})
        self.assertEqual(st, 201, d)
        sid = d["sandbox"]["id"]
        self.addCleanup(self.destroy, sid)
        return sid

    def destroy(self, sid):
        self.s.call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_written_in_one_sandbox_read_in_another_after_the_first_is_destroyed(self):
        v = self.volume("shared")
        self.assertEqual(v["size_mb"], 64)
        self.assertEqual(v["mounts"], [])
        a = self.create([{"name": "shared", "path": "/data"}])
        self.sh(a, "echo from-a > /data/note && mkdir -p /data/d && echo x > /data/d/f && sync")
        st, d = self.s.json("GET", "/v1/sandboxes/" + a)
        self.assertEqual(d["volumes"], [{"name": "shared", "path": "/data", "read_only": False}])
        self.destroy(a)
        b = self.create([{"name": "shared", "path": "/mnt/deep/data"}])
        out = self.sh(b, "cat /mnt/deep/data/note /mnt/deep/data/d/f")["stdout"]
        self.assertEqual(out, "from-a\nx\n")
        # The volume is not part of the sandbox root: another sandbox without it sees nothing.
        c = self.create([])
        self.assertNotEqual(self.sh(c, "ls /data/note", ok=False)["exit_code"], 0)

    def test_one_writer_at_a_time_and_read_only_mounts_that_stay_read_only(self):
        self.volume("fanout")
        w = self.create([{"name": "fanout", "path": "/data"}])
        self.sh(w, "echo v1 > /data/f && sync")
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true",
                            {"template": "busybox", "volumes": [{"name": "fanout", "path": "/data"}]})
        self.assertEqual(st, 409, d)
        self.assertEqual(d["code"], "conflict")
        self.assertIn("one writer", d["message"])
        r = self.create([{"name": "fanout", "path": "/in", "read_only": True}])
        self.assertEqual(self.sh(r, "cat /in/f")["stdout"], "v1\n")
        # Positive control: the writer writes to the same volume.
        self.sh(w, "echo v2 > /data/g")
        bad = self.sh(r, "echo no > /in/f", ok=False)
        self.assertNotEqual(bad["exit_code"], 0, bad)
        # Root of the sandbox tries to remount it read-write (mount(2) is its own): whether the
        # kernel lets it or not, the view is a read-only subvolume, which btrfs never writes.
        d = self.sh(r, "mount -o remount,rw,bind /in; echo rc=$?; echo no > /in/f; echo write=$?; cat /in/f", ok=False)
        self.assertIn("write=1", d["stdout"], d)
        self.assertIn("v1\n", d["stdout"])
        st, v = self.s.json("GET", "/v1/volumes/fanout")
        self.assertEqual(sorted((m["sandbox"], m["read_only"]) for m in v["mounts"]), sorted([(w, False), (r, True)]))
        # The writer gone, a second writer is welcome.
        self.destroy(w)
        w2 = self.create([{"name": "fanout", "path": "/data"}])
        self.assertEqual(self.sh(w2, "cat /data/f /data/g")["stdout"], "v1\nv2\n")

    def test_delete_is_refused_while_mounted(self):
        self.volume("busy")
        a = self.create([{"name": "busy", "path": "/data"}])
        st, d = self.s.json("DELETE", "/v1/volumes/busy")
        self.assertEqual(st, 409, d)
        self.assertIn(a, d["message"])
        self.destroy(a)
        st, _, _ = self.s.call("DELETE", "/v1/volumes/busy")
        self.assertEqual(st, 204)
        st, d = self.s.json("GET", "/v1/volumes/busy")
        self.assertEqual(st, 404, d)
        st, d = self.s.json("GET", "/v1/volumes")
        self.assertNotIn("busy", [v["name"] for v in d["volumes"]])

    def test_fork_copies_what_the_volume_holds_now(self):
        self.volume("origin")
        a = self.create([{"name": "origin", "path": "/data"}])
        self.sh(a, "echo before > /data/f && sync")
        st, f = self.s.json("POST", "/v1/volumes/origin/fork", {"name": "origin-fork"})
        self.assertEqual(st, 201, f)
        self.addCleanup(self.s.call, "DELETE", "/v1/volumes/origin-fork")
        self.assertEqual(f["size_mb"], 64)
        self.sh(a, "echo after > /data/f")
        b = self.create([{"name": "origin-fork", "path": "/data"}])
        self.assertEqual(self.sh(b, "cat /data/f")["stdout"], "before\n")
        self.sh(b, "echo fork-only > /data/g")
        self.assertNotEqual(self.sh(a, "cat /data/g", ok=False)["exit_code"], 0)
        st, d = self.s.json("POST", "/v1/volumes/origin/fork", {"name": "origin-fork"})
        self.assertEqual(st, 409, d)
        st, d = self.s.json("POST", "/v1/volumes/nope/fork", {"name": "x"})
        self.assertEqual(st, 404, d)

    def test_the_size_limit_holds(self):
        self.volume("small", size_mb=8)
        a = self.create([{"name": "small", "path": "/data"}])
        d = self.sh(a, "dd if=/dev/zero of=/data/big bs=1M count=32 2>&1; echo rc=$?; sync", ok=False)
        self.assertNotIn("rc=0", d["stdout"], d)
        self.assertRegex(d["stdout"], "(Disk quota exceeded|No space left)")
        # Positive control: the sandbox's own root takes the same 32 MiB.
        self.sh(a, "dd if=/dev/zero of=/tmp/big bs=1M count=32 2>/dev/null")

    def test_suspend_and_resume_keep_the_volume(self):
        self.volume("kept")
        a = self.create([{"name": "kept", "path": "/data"}])
        self.sh(a, "echo kept > /data/f && sync")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/suspend?wait=true" % a)
        self.assertEqual(st, 200, d)
        st, v = self.s.json("GET", "/v1/volumes/kept")
        self.assertTrue(v["synced"], v)
        self.assertIsNone(v["node"])
        self.assertEqual([m["sandbox"] for m in v["mounts"]], [a], "a suspended sandbox keeps its mount")
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true",
                            {"template": "busybox", "volumes": [{"name": "kept", "path": "/data"}]})
        self.assertEqual(st, 409, "the suspended writer still holds it")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % a)
        self.assertEqual(st, 200, d)
        self.assertEqual(self.sh(a, "cat /data/f")["stdout"], "kept\n")
        self.sh(a, "echo more >> /data/f")

    def test_a_node_killed_and_restarted_mounts_its_volumes_again(self):
        self.volume("restart")
        a = self.create([{"name": "restart", "path": "/data"}])
        r = self.create([{"name": "restart", "path": "/ro", "read_only": True}])
        self.sh(a, "echo survives > /data/f && sync")
        self.s.kill9()
        self.s.start()
        deadline = time.time() + 60
        while time.time() < deadline:
            st, d = self.s.json("GET", "/v1/sandboxes/" + a)
            if d.get("state") == "running":
                break
            time.sleep(0.5)
        self.assertEqual(self.sh(a, "cat /data/f")["stdout"], "survives\n")
        self.assertEqual(self.sh(r, "cat /ro/f")["stdout"], "survives\n", "the view is taken again at boot")
        self.destroy(a)
        self.destroy(r)
        # No view of the destroyed reader is left in the pool.
        pool = os.path.join(self.s.data_dir, "pool", "volumes")
        self.assertEqual([n for n in os.listdir(pool) if ".ro-" in n], [])
        self.assertEqual(mounts_under(os.path.join(self.s.data_dir, "run")), [])

    def test_e2b_volume_mounts_map_onto_volumes(self):
        # The E2B control API's create body (reference/e2b-protocol.md): volumeMounts [{name, path}].
        self.volume("e2b")
        a = self.create([{"name": "e2b", "path": "/data"}])
        self.sh(a, "echo via-v1 > /data/f && sync")
        self.destroy(a)
        hdr = {"X-API-KEY": self.s.key}
        st, body = self.s.json("POST", "/v2/sandboxes", {"templateID": "busybox", "volumeMounts": [{"name": "e2b", "path": "/mnt/e2b"}]},
                               headers=hdr)
        self.assertEqual(st, 201, body)
        sid = body["sandboxID"]
        self.addCleanup(self.destroy, sid)
        st, info = self.s.json("GET", "/sandboxes/" + sid, headers=hdr)
        self.assertEqual(info["volumeMounts"], [{"name": "e2b", "path": "/mnt/e2b"}], info)
        self.assertEqual(self.sh(sid, "cat /mnt/e2b/f")["stdout"], "via-v1\n")
        st, body = self.s.json("POST", "/v2/sandboxes", {"templateID": "busybox", "volumeMounts": [{"name": "e2b", "path": "/x"}]},
                               headers=hdr)
        self.assertEqual((st, body.get("code")), (409, 409), body)
        st, body = self.s.json("POST", "/v2/sandboxes", {"templateID": "busybox", "volumeMounts": [{"name": "e2b", "path": "rel"}]},
                               headers=hdr)
        self.assertEqual(st, 400, body)

    def cli(self, *args, ok=True):
        out = subprocess.run([SPACE_BIN, *args], env=self.s.env(), capture_output=True, text=True, timeout=120)
        if ok:
            self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def test_cli(self):
        self.addCleanup(self.s.call, "DELETE", "/v1/volumes/cli-vol")
        self.addCleanup(self.s.call, "DELETE", "/v1/volumes/cli-copy")
        out = self.cli("volume", "create", "cli-vol", "--size-mb", "32")
        self.assertIn("cli-vol\t32 MiB\tempty", out.stdout)
        sid = self.cli("create", "--template", "busybox", "--volume", "cli-vol:/data").stdout.strip()
        self.addCleanup(self.destroy, sid)
        self.sh(sid, "echo cli > /data/f && sync")
        ro = self.cli("create", "--template", "busybox", "--volume", "cli-vol:/in:ro").stdout.strip()
        self.addCleanup(self.destroy, ro)
        self.assertNotEqual(self.sh(ro, "echo x > /in/f", ok=False)["exit_code"], 0)
        out = self.cli("volume", "ls")
        self.assertIn(sid + ":/data", out.stdout)
        self.assertIn(ro + ":/in:ro", out.stdout)
        self.cli("volume", "fork", "cli-vol", "cli-copy")
        listed = json.loads(self.cli("--json", "volume", "ls").stdout)
        self.assertEqual(sorted(v["name"] for v in listed["volumes"] if v["name"].startswith("cli-")), ["cli-copy", "cli-vol"])
        out = self.cli("volume", "rm", "cli-vol", ok=False)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("mounted by sandbox", out.stderr)
        self.cli("volume", "rm", "cli-copy")
        out = self.cli("create", "--template", "busybox", "--volume", "no-path", ok=False)
        self.assertNotEqual(out.returncode, 0)

    def test_hostile_input(self):
        self.volume("good")
        for name, body, code in [
            ("Bad", {"size_mb": 8}, 400),
            ("a" * 64, {"size_mb": 8}, 400),
            ("ok", {"size_mb": 0}, 400),
            ("ok", {"size_mb": 1 << 21}, 400),
            ("ok", {"size_mb": "8"}, 400),
            ("ok", {"size_mb": 8, "extra": 1}, 400),
        ]:
            st, d = self.s.json("PUT", "/v1/volumes/" + name, body)
            self.assertEqual(st, code, (name, body, d))
            self.assertIn("code", d)
        st, d = self.s.json("PUT", "/v1/volumes/good", {"size_mb": 64})
        self.assertEqual(st, 200, "the same volume again")
        st, d = self.s.json("PUT", "/v1/volumes/good", {"size_mb": 32})
        self.assertEqual(st, 409, d)
        bad_mounts = [
            [{"name": "good", "path": "data"}],
            [{"name": "good", "path": "/"}],
            [{"name": "good", "path": "/proc/x"}],
            [{"name": "good", "path": "/dev"}],
            [{"name": "good", "path": "/a/../etc"}],
            [{"name": "good", "path": "/a//b"}],
            [{"name": "good", "path": "/a/"}],
            [{"name": "good", "path": "/a\u0000b"}],
            [{"name": "good", "path": "/a" * 600}],
            [{"name": "good", "path": "/a"}, {"name": "good", "path": "/b"}],
            [{"name": "good", "path": "/a"}, {"name": "other", "path": "/a/b"}],
            [{"name": "good", "path": "/a", "rw": True}],
            [{"name": "good"}],
            "good",
            [{"name": "x%d" % i, "path": "/m%d" % i} for i in range(9)],
        ]
        for vols in bad_mounts:
            st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "busybox", "volumes": vols})
            self.assertEqual(st, 400, (vols, d))
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true",
                            {"template": "busybox", "volumes": [{"name": "missing", "path": "/m"}]})
        self.assertEqual(st, 404, d)
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true",
                            {"template": "busybox", "runtime": "vm", "volumes": [{"name": "good", "path": "/m"}]})
        self.assertIn(st, (400, 503), d)
        # Nothing was left mounted by the refused creates.
        st, v = self.s.json("GET", "/v1/volumes/good")
        self.assertEqual(v["mounts"], [])


if __name__ == "__main__":
    unittest.main()
