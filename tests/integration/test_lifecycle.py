"""Pause/resume, snapshots, fork, rollback and diff against a real `space dev`."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root  # noqa: E402


@unittest.skipUnless(is_root(), "needs root")
class LifecycleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def sh(self, sid, script, **kw):
        st, d = self.s.exec(sid, ["sh", "-c", script], **kw)
        self.assertEqual(st, 200, d)
        return d["stdout"]

    def snapshot(self, sid, label=""):
        st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": label})
        self.assertEqual(st, 201, snap)
        self.assertTrue(snap["id"].startswith("snap_"))
        return snap

    def proc_bytes(self, sid, pid):
        st, p = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (sid, pid))
        self.assertEqual(st, 200, p)
        return p["stdout_bytes"]

    def test_pause_stops_a_counter_and_resume_continues_it(self):
        sid = self.s.create()
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % sid,
                            {"cmd": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i; sleep 0.05; done"]})
        pid = d["pid"]
        time.sleep(0.5)
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)
        self.assertEqual((st, sb["state"]), (200, "paused"))
        before = self.proc_bytes(sid, pid)
        time.sleep(1.0)
        self.assertEqual(self.proc_bytes(sid, pid), before, "the counter moved while paused")
        self.assertEqual(self.s.exec(sid, ["true"])[0], 409)
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/etc/hostname" % sid)[0], 409)
        self.assertEqual(self.s.call("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)[0], 409)
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)
        self.assertEqual((st, sb["state"]), (200, "running"))
        time.sleep(0.5)
        self.assertGreater(self.proc_bytes(sid, pid), before, "the counter did not go on after resume")
        self.assertEqual(self.s.call("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)[0], 409)
        # auto_resume: a paused sandbox is resumed by the call that needs it.
        self.s.json("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)
        st, d = self.s.json("POST", "/v1/sandboxes/%s/exec?auto_resume=true" % sid, {"cmd": ["echo", "woke"]})
        self.assertEqual((st, d.get("stdout")), (200, "woke\n"))
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_snapshot_fork_rollback_content(self):
        sid = self.s.create()
        blob = os.urandom(200000)
        self.s.call("PUT", "/v1/sandboxes/%s/files?path=/root/blob" % sid, raw=blob)
        self.sh(sid, "echo one > /root/f; mkdir -p /root/d; ln -s f /root/link")
        # A user's private file below a private directory: the diff reads it in the tree jail.
        self.sh(sid, "mkdir -p /root/p; echo aa > /root/p/s; echo bb > /root/p/t; chown -R 1000:1000 /root/p; "
                     "chmod 700 /root/p; chmod 600 /root/p/s /root/p/t")
        one = self.snapshot(sid, "one")
        self.assertIsNone(one["parent"])
        self.assertEqual(one["kind"], "filesystem")
        self.sh(sid, "echo two > /root/f; rm /root/blob; echo new > /root/d/new")
        self.sh(sid, "echo cc > /root/p/s; echo bb > /root/p/t.new; mv /root/p/t.new /root/p/t; "
                     "chown 1000:1000 /root/p/t; chmod 600 /root/p/t")
        two = self.snapshot(sid, "two")
        self.assertEqual(two["parent"], one["id"])

        st, d = self.s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % sid, {"snapshot": one["id"], "count": 2})
        self.assertEqual(st, 201, d)
        kids = [k["id"] for k in d["sandboxes"]]
        self.assertEqual(len(set(kids)), 2)
        for kid in kids:
            self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + kid)[1]["state"], "running")
            self.assertEqual(self.sh(kid, "cat /root/f; readlink /root/link"), "one\nf\n")
            self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/blob" % kid)[2], blob)
            # Fresh identity: its own hostname and uid range.
            self.assertEqual(self.sh(kid, "hostname").strip(), kid.replace("_", "-"))
        maps = {self.sh(k, "cat /proc/self/uid_map").split()[1] for k in kids + [sid]}
        self.assertEqual(len(maps), 3)
        # Forks are independent of each other and of the source.
        self.sh(kids[0], "echo changed > /root/f")
        self.assertEqual(self.sh(kids[1], "cat /root/f"), "one\n")
        self.assertEqual(self.sh(sid, "cat /root/f"), "two\n")

        st, sb = self.s.json("POST", "/v1/sandboxes/%s/rollback" % sid, {"snapshot": one["id"]})
        self.assertEqual((st, sb["state"]), (200, "running"), sb)
        self.assertEqual(self.sh(sid, "cat /root/f; test -e /root/d/new || echo gone"), "one\ngone\n")
        self.assertEqual(self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/blob" % sid)[2], blob)

        # A snapshot after rollback descends from the rolled-back-to snapshot.
        three = self.snapshot(sid, "three")
        self.assertEqual(three["parent"], one["id"])
        st, lst = self.s.json("GET", "/v1/sandboxes/%s/snapshots" % sid)
        self.assertEqual([x["id"] for x in lst["snapshots"]], [one["id"], two["id"], three["id"]])

        st, diff = self.s.json("GET", "/v1/snapshots/%s/diff?against=%s" % (two["id"], one["id"]))
        self.assertEqual(st, 200, diff)
        self.assertIn("/root/d/new", diff["added"])
        self.assertIn("/root/f", diff["changed"])
        self.assertIn("/root/blob", diff["removed"])
        # Same size, other bytes: changed; same bytes rewritten (new inode, times): not.
        self.assertIn("/root/p/s", diff["changed"])
        self.assertNotIn("/root/p/t", diff["changed"] + diff["added"] + diff["removed"])
        self.assertNotIn("/root/link", diff["changed"] + diff["added"] + diff["removed"])

        # Deleting a parent leaves its children usable.
        self.assertEqual(self.s.call("DELETE", "/v1/snapshots/" + one["id"])[0], 204)
        self.assertEqual(self.s.call("GET", "/v1/snapshots/" + one["id"])[0], 404)
        st, d = self.s.json("GET", "/v1/snapshots/" + three["id"])
        self.assertEqual((st, d["parent"]), (200, one["id"]))
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"from_snapshot": three["id"]})
        self.assertEqual(st, 201, d)
        self.assertEqual(self.sh(d["sandbox"]["id"], "cat /root/f"), "one\n")
        for k in kids + [sid, d["sandbox"]["id"]]:
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % k)

    def test_snapshot_and_fork_of_a_root_its_root_gave_away(self):
        # A sandbox's root may chown its own / away from uid 0. btrfs lets only the owner of a
        # subvolume's root (or CAP_FOWNER) snapshot it; the node holds no CAP_FOWNER, so the
        # snapshot goes through the root broker (subvol_snapshot), and so do the fork's and
        # the rollback's snapshots of it.
        sid = self.s.create()
        self.sh(sid, "echo mine > /root/f; chown 1000:1000 /; chmod 0750 /")
        snap = self.snapshot(sid, "given-away")
        self.sh(sid, "echo later > /root/f")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % sid, {"snapshot": snap["id"], "count": 1})
        self.assertEqual(st, 201, (d, self.s.log_tail()))
        kid = d["sandboxes"][0]["id"]
        self.assertEqual(self.sh(kid, "cat /root/f; stat -c '%u:%g %a' /"), "mine\n1000:1000 750\n")
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/rollback" % sid, {"snapshot": snap["id"]})
        self.assertEqual((st, sb["state"]), (200, "running"), (sb, self.s.log_tail()))
        self.assertEqual(self.sh(sid, "cat /root/f"), "mine\n")
        for x in (kid, sid):
            self.assertIn(self.s.call("DELETE", "/v1/sandboxes/" + x)[0], (202, 204))

    def test_fork_of_a_root_without_its_mount_points(self):
        # A root may lose a directory the runtime mounts over (here its root removed /tmp,
        # which nothing mounts on). The node, not the root's owner, may not make it again
        # (runtime/ns/mounts.h EnsureMountPoints): the fork's init makes it, as root of its
        # namespace, before it mounts anything.
        sid = self.s.create()
        self.assertEqual(self.sh(sid, "rm -rf /tmp && test ! -e /tmp && echo gone"), "gone\n")
        snap = self.snapshot(sid, "no-tmp")
        st, d = self.s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % sid, {"snapshot": snap["id"], "count": 1})
        self.assertEqual(st, 201, (d, self.s.log_tail()))
        kid = d["sandboxes"][0]["id"]
        self.assertEqual(self.sh(kid, "stat -c '%F %u %a' /tmp"), "directory 0 755\n")
        for x in (kid, sid):
            self.assertIn(self.s.call("DELETE", "/v1/sandboxes/" + x)[0], (202, 204))

    def test_fork_of_a_root_with_a_link_at_a_mount_point(self):
        # A sandbox's root may put a link where the runtime makes a mount point (/tmp), aimed
        # at a host path. The fork's start refuses to mount over it, whether the node checks
        # the root (readable) or, once its root made / unreadable to every other uid, the fork's
        # init does (ChildOp::kMountPoint, as root of its namespace).
        for name, lock in (("readable", ""), ("unreadable", " && chmod 0700 /")):
            with self.subTest(name):
                sid = self.s.create()
                self.sh(sid, "rm -rf /tmp && ln -s /etc /tmp" + lock)
                snap = self.snapshot(sid, "linked-tmp-" + name)
                st, d = self.s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % sid,
                                    {"snapshot": snap["id"], "count": 1})
                self.assertEqual(st, 201, d)
                kid = d["sandboxes"][0]
                self.assertEqual((kid["state"], d["operations"][0]["state"]), ("failed", "failed"), d)
                # readable: "step mount_points: rootfs/tmp is a symlink or not a directory";
                # unreadable: "step mount_proc: open /tmp: ELOOP" (the init's check).
                self.assertRegex(kid.get("error", ""), "tmp.*(symlink|ELOOP)", d)
                for x in (kid["id"], sid):
                    self.assertIn(self.s.call("DELETE", "/v1/sandboxes/%s?wait=true" % x)[0], (200, 202, 204))

    def test_background_process_survives_pause_and_snapshot(self):
        sid = self.s.create()
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": ["sh", "-c", "echo a; cat; echo z"]})
        pid = d["pid"]
        self.s.json("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)
        self.snapshot(sid)  # allowed while paused
        self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)
        self.snapshot(sid)  # running: freezes and thaws around it
        self.s.call("POST", "/v1/sandboxes/%s/processes/%s/stdin" % (sid, pid), raw=b"m\n")
        self.s.call("POST", "/v1/sandboxes/%s/processes/%s/stdin" % (sid, pid), raw=b"")
        for _ in range(100):
            st, p = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (sid, pid))
            if p["state"] == "exited":
                break
            time.sleep(0.05)
        self.assertEqual(p["exit_code"], 0)
        self.assertEqual(p["stdout_bytes"], len("a\nm\nz\n"))

    def test_bad_lifecycle_requests(self):
        sid = self.s.create()
        for method, path, body, code in [
            ("POST", "/v1/sandboxes/%s/rollback" % sid, {}, 400),
            ("POST", "/v1/sandboxes/%s/rollback" % sid, {"snapshot": "snap_nope"}, 404),
            ("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 0}, 400),
            ("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 99}, 400),
            ("POST", "/v1/sandboxes/%s/fork" % sid, {"snapshot": "../x"}, 404),
            ("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": 5}, 400),
            ("POST", "/v1/sandboxes", {"from_snapshot": "snap_nope"}, 404),
            ("GET", "/v1/snapshots/snap_nope/diff?against=snap_x", None, 404),
        ]:
            st, d = self.s.json(method, path, body)
            self.assertEqual(st, code, (path, body, d))
            self.assertIn("message", d)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertEqual(self.s.call("POST", "/v1/sandboxes/%s/pause" % sid)[0], 409)


if __name__ == "__main__":
    unittest.main()
