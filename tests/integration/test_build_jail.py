"""Template builds run in the build jail (src/node/build_jail.h): `space template build base`
in a fresh data dir runs debootstrap, and the maintainer scripts of every package it installs,
as root of a user namespace of its own that maps to a leased uid slot, never as host root; the
template it builds then serves sandboxes. About 60-70 s (debootstrap from the host's mirror)."""
import os
import subprocess
import threading
import unittest

from harness import SPACE_BIN, Server, is_root, proc_status


def debootstrap_processes():
    """{pid: (host uid, uid_map, NSpid)} of every running debootstrap."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            if b"/usr/sbin/debootstrap" not in argv[:2]:
                continue
            with open("/proc/%s/uid_map" % pid) as f:
                uid_map = f.read().split()
            st = proc_status(int(pid))
            found[int(pid)] = (int(st["Uid"].split()[0]), uid_map, st["NSpid"].split())
        except (OSError, KeyError, ValueError):
            continue
    return found


@unittest.skipUnless(is_root(), "needs root")
class BuildJailTest(unittest.TestCase):
    def test_base_builds_in_the_jail_as_an_unprivileged_uid(self):
        s = Server(extra_args=["--no-egress"]).start()
        seen = {}
        done = threading.Event()

        def watch():
            while not done.is_set():
                seen.update(debootstrap_processes())
                done.wait(0.2)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=s.env(), capture_output=True, text=True,
                               timeout=900)
            done.set()
            watcher.join()
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:] + s.log_tail())
            self.assertIn("Base system installed successfully", r.stdout + r.stderr)
            self.assertTrue(seen, "never saw debootstrap run")
            for pid, (uid, uid_map, nspid) in seen.items():
                # A slot's base on the host, root of its own namespace for 65536 ids, and pid 1
                # of a PID namespace of its own (or one of its children).
                self.assertGreaterEqual(uid, 1 << 20, (pid, uid, uid_map))
                self.assertEqual(uid % 65536, 0, (pid, uid))
                self.assertEqual(uid_map, ["0", str(uid), "65536"], pid)
                self.assertEqual(len(nspid), 2, (pid, nspid))
            self.assertIn("1", [nspid[1] for (_, _, nspid) in seen.values()], seen)
            # The jail's mounts ended with it.
            with open("/proc/self/mountinfo") as f:
                self.assertNotIn("/build-", f.read())
            sid = s.create("base")
            st, d = s.exec(sid, ["python3", "-c", "import os; print(os.getuid(), os.path.exists('/usr/bin/git'))"],
                           timeout_s=60)
            self.assertEqual(st, 200, d)
            self.assertEqual(d["stdout"].strip(), "0 True", d)
            st, d = s.exec(sid, ["bash", "-c", "stat -c '%u:%g %a' /etc/shadow /usr/bin/passwd"], timeout_s=30)
            self.assertEqual(d["stdout"].split(), ["0:42", "640", "0:0", "4755"], d)
            # The sandbox conventions the node adds after debootstrap, and no .deb cache kept.
            st, d = s.exec(sid, ["bash", "-c", "grep ^user: /etc/passwd; grep -c ^user: /etc/shadow; "
                                 "grep -c ^VERSION_CODENAME=bookworm /etc/os-release; ls /var/cache/apt/archives | grep -c '[.]deb$'"],
                           timeout_s=30)
            self.assertEqual(d["stdout"].split("\n")[:4],
                             ["user:x:1000:1000:user:/home/user:/bin/bash", "1", "1", "0"], d)
        finally:
            done.set()
            watcher.join()
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
