"""Isolation checks run inside a real sandbox: what the sandbox can see and do."""
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import (Server, api_fronts, is_root, proc_status, root_brokers, socket_holders,  # noqa: E402
                     space_cgroups, tcp_socket_inode)


def thread_statuses(pid):
    """(tid, /proc/<pid>/task/<tid>/status as a dict) for each thread of `pid` still alive."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                yield tid, dict(l.split(":", 1) for l in f.read().splitlines())
        except FileNotFoundError:
            continue  # a thread that ended meanwhile


@unittest.skipUnless(is_root(), "needs root")
class IsolationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()
        cls.sid = cls.s.create()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def sh(self, script, **kw):
        st, d = self.s.exec(self.sid, ["sh", "-c", script], **kw)
        self.assertEqual(st, 200, d)
        return d

    def test_host_processes_invisible(self):
        pids = self.sh("ls /proc | grep -E '^[0-9]+$'")["stdout"].split()
        self.assertIn("1", pids)
        self.assertLess(len(pids), 10, pids)  # spaced, sh, ls, grep: not the host's hundreds
        comm = self.sh("cat /proc/1/comm")["stdout"].strip()
        self.assertEqual(comm, "spaced")

    def test_host_files_unreachable(self):
        marker = "/tmp/space-isolation-%d" % os.getpid()
        open(marker, "w").close()
        try:
            self.assertNotEqual(self.sh("test -e %s; echo $?" % marker)["stdout"], "0\n")
            # The host root is not mounted anywhere inside.
            mounts = self.sh("cat /proc/self/mounts")["stdout"]
            self.assertNotIn("/var/lib/space", mounts)
            self.assertNotIn(self.s.data_dir, mounts)
        finally:
            os.unlink(marker)

    def assertLastLine(self, want, out):
        """`out`'s last line is exactly `want` (so "rc=1" does not pass for rc=127)."""
        lines = out.strip().splitlines()
        self.assertEqual(lines[-1] if lines else "", want, out)

    def test_no_network(self):
        ifaces = [l.split(":")[0].strip() for l in self.sh("cat /proc/net/dev")["stdout"].splitlines()[2:]]
        self.assertEqual(ifaces, ["lo"])
        # The API port on the host's loopback is not the sandbox's loopback.
        port = self.s.url.rsplit(":", 1)[1]
        d = self.sh("nc -w 1 127.0.0.1 %s </dev/null; echo rc=$?" % port)
        self.assertLastLine("rc=1", d["stdout"])
        d = self.sh("ping -c 1 -W 1 10.0.2.2 2>&1; echo rc=$?")
        self.assertNotIn("rc=0", d["stdout"])

    def test_host_only_capabilities_dropped(self):
        # Modules, raw I/O, clock, syslog, BPF, perf and the rest that act only on the host
        # (src/daemon/dev.cc kHostOnlyCapabilities): gone from every thread of the node, bounding
        # set included, so nothing it runs regains them. (A sandbox's bounding set is full
        # again: a new user namespace gets one, and its capabilities act only inside it.)
        host_only = [9, 16, 17, 20, 22, 25, 26, 28, 30, 32, 33, 34, 35, 36, 37, 38, 39]
        # ... and those it does not use (kUnusedCapabilities): IPC_LOCK, IPC_OWNER,
        # SYS_RESOURCE, CHECKPOINT_RESTORE; NET_BIND_SERVICE, once the API socket is bound.
        host_only += [14, 15, 24, 40, 10]
        mask = sum(1 << c for c in host_only)
        statuses = list(thread_statuses(self.s.proc.pid))
        self.assertGreater(len(statuses), 1)
        for tid, st in statuses:
            for field in ("CapBnd", "CapEff", "CapPrm"):
                self.assertEqual(int(st[field], 16) & mask, 0, (tid, field, st[field]))

    def test_network_privileges_only_in_the_root_broker(self):
        # The root broker (src/broker/broker.h) keeps CAP_NET_ADMIN, CAP_SYS_ADMIN,
        # CAP_SYS_PTRACE, CAP_KILL (v1 cgroup kills, the node's children), CAP_SYS_NICE
        # (v1 cpuset attach), CAP_SETGID and CAP_SETUID (the id maps of the user namespaces
        # of sandboxes and VMMs), CAP_FOWNER (snapshots of roots a sandbox chowned),
        # CAP_DAC_OVERRIDE (the node's parent cgroups under the 0555 v1 roots) and nothing else; the node gives up the network capabilities,
        # CAP_SYS_PTRACE (with which it could trace the broker) and CAP_KILL (its kills of
        # children under other uids go through the broker), bounding set included.
        brokers = root_brokers(self.s.proc.pid)
        self.assertEqual(len(brokers), 1, brokers)
        st = proc_status(brokers[0])
        broker_mask = (1 << 5) | (1 << 6) | (1 << 7) | (1 << 12) | (1 << 19) | (1 << 21) | (1 << 23) | (1 << 3) | (1 << 1)
        broker_mask |= 1 << 0  # CHOWN: a vm root's .space-vm, given to the node's uid (vm_state_dir)
        for field in ("CapEff", "CapPrm", "CapBnd"):
            self.assertEqual(int(st[field], 16), broker_mask, (field, st[field]))
        for field in ("CapInh", "CapAmb"):
            self.assertEqual(int(st[field], 16), 0, (field, st[field]))
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")  # its own filter (broker.h LoadBrokerSeccomp)
        # Not dumpable: its /proc files stay root's, and the node cannot trace it.
        self.assertEqual(os.stat("/proc/%d/mem" % brokers[0]).st_uid, 0)
        gone = (1 << 11) | (1 << 12) | (1 << 13) | (1 << 19)  # NET_BROADCAST, NET_ADMIN, NET_RAW, SYS_PTRACE
        gone |= 1 << 5  # KILL
        gone |= (1 << 6) | (1 << 7)  # SETGID, SETUID: id maps through the broker; helpers start unprivileged
        # SYS_ADMIN, on a btrfs pool (this one: loop-backed): idmapped clones, subvolume deletes,
        # qgroup limits and rescans go through the broker; the pool was mounted before the drop.
        gone |= 1 << 21
        # SYS_CHROOT, AUDIT_WRITE, SETPCAP: unused once it has started (daemon/dev.cc kNodeUnusedAfterStart).
        gone |= (1 << 18) | (1 << 29) | (1 << 8)
        # SYS_NICE: a warm-pool refill's nice values go back to normal through the broker.
        gone |= 1 << 23
        # CHOWN, FSETID, MKNOD, SETFCAP: every step that writes a new template (an import's tar,
        # busybox's layout, base's finish) runs in the build jail.
        gone |= (1 << 0) | (1 << 4) | (1 << 27) | (1 << 31)
        # FOWNER, on a btrfs pool: the snapshots of roots it does not own are the broker's.
        gone |= 1 << 3
        # DAC_OVERRIDE: the parent cgroups are the broker's to make and remove (cgroup_parents).
        gone |= 1 << 1
        for tid, ts in thread_statuses(self.s.proc.pid):
            for field in ("CapBnd", "CapEff", "CapPrm"):
                self.assertEqual(int(ts[field], 16) & gone, 0, (tid, field, ts[field]))

    def test_node_runs_as_its_own_uid(self):
        # Not root: the base of the uid range past the last slot (common/host_slots.h
        # HostSlots::NodeUid), with no groups and no capability in any set, on every thread
        # (CAP_DAC_READ_SEARCH went last: an import's source is the broker's to open and the
        # build jail's to read, a vm disk image is made in the build jail). It owns its data dir
        # and what it writes there; the pool image, which root attaches at the next start,
        # stays root's.
        node_uid = (16 + 16384) * 65536
        for tid, ts in thread_statuses(self.s.proc.pid):
            for field in ("Uid", "Gid"):
                self.assertEqual(ts[field].split(), [str(node_uid)] * 4, (tid, field, ts[field]))
            self.assertEqual(ts["Groups"].strip(), "", tid)
            for field in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
                self.assertEqual(int(ts[field], 16), 0, (tid, field, ts[field]))
        for name in ("", "api-key", "state.db", "store", "pool", "pool/sandboxes"):
            self.assertEqual(os.stat(os.path.join(self.s.data_dir, name)).st_uid, node_uid, name)
        img = os.path.join(self.s.data_dir, "pool.img")
        if os.path.exists(img):
            self.assertEqual(os.stat(img).st_uid, 0)
        # A sandbox root stays its own root's (uid 0 on disk), not the node's.
        roots = os.listdir(os.path.join(self.s.data_dir, "pool", "sandboxes"))
        self.assertIn(self.sid, roots)
        self.assertEqual(os.stat(os.path.join(self.s.data_dir, "pool", "sandboxes", self.sid)).st_uid, 0)

    def test_node_has_its_own_seccomp_filter(self):
        # src/node/node_seccomp.h: bpf, perf, io_uring, keyrings, file handles... refused in the
        # node and everything it starts.
        self.assertEqual(proc_status(self.s.proc.pid)["Seccomp"], "2")

    def test_api_front_is_unprivileged(self):
        # The API front (src/front/front.h) is the process clients talk to: a uid slot of its
        # own (started as it, in a user namespace of its own: never root), no capability in
        # any set, no_new_privs, its own seccomp filter, chrooted into an empty directory.
        fronts = api_fronts(self.s.proc.pid)
        self.assertEqual(len(fronts), 1, fronts)
        st = proc_status(fronts[0])
        uid = int(st["Uid"].split()[0])
        self.assertGreaterEqual(uid, 1 << 20, st["Uid"])
        self.assertEqual(uid % 65536, 0, st["Uid"])
        for field in ("Uid", "Gid"):
            self.assertEqual(st[field].split(), [str(uid)] * 4, (field, st[field]))
        self.assertNotEqual(os.readlink("/proc/%d/ns/user" % fronts[0]), os.readlink("/proc/self/ns/user"))
        self.assertEqual(st["Groups"].strip(), "")
        for field in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
            self.assertEqual(int(st[field], 16), 0, (field, st[field]))
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        root = os.readlink("/proc/%d/root" % fronts[0])
        self.assertTrue(root.endswith("/space/empty"), root)
        self.assertEqual(os.listdir(root), [])
        # A client's connection is the front's socket, never the node's: hold one open and
        # find which processes have its server side.
        port = int(self.s.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b"200", c.recv(4096))
            inode = tcp_socket_inode(port, c.getsockname()[1])
            self.assertIsNotNone(inode)
            self.assertEqual(socket_holders(inode), {fronts[0]})

    def test_root_is_not_host_root(self):
        uid_map = self.sh("cat /proc/self/uid_map")["stdout"].split()
        self.assertEqual(uid_map[0], "0")
        self.assertGreaterEqual(int(uid_map[1]), 1 << 20)  # sandbox root is a high host uid
        self.assertEqual(self.sh("id -u")["stdout"], "0\n")
        # Root inside cannot touch what the host owns: /proc/sys is read-only, sysfs too.
        self.assertLastLine("rc=1", self.sh("echo 1 > /proc/sys/kernel/sysrq; echo rc=$?")["stdout"])
        self.assertLastLine("rc=1", self.sh("touch /sys/x 2>/dev/null; echo rc=$?")["stdout"])

    def test_masked_proc_paths(self):
        # Whichever of the masked files this kernel has read as empty inside.
        checked = 0
        for path in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/sysrq-trigger"):
            if os.path.exists(path):
                self.assertEqual(self.sh("wc -c < %s" % path)["stdout"].strip(), "0", path)
                checked += 1
        self.assertGreater(checked, 0)
        self.assertLastLine("rc=1", self.sh("echo b > /proc/sysrq-trigger; echo rc=$?")["stdout"])

    def test_seccomp_refusals(self):
        # A new user namespace is refused (and with it most kernel attack surface).
        d = self.sh("unshare -U true 2>&1; echo rc=$?")
        self.assertNotIn("rc=0", d["stdout"])
        d = self.sh("grep -E 'Seccomp|NoNewPrivs' /proc/self/status")
        self.assertIn("NoNewPrivs:\t1", d["stdout"])
        self.assertIn("Seccomp:\t2", d["stdout"])

    def test_unprivileged_user_has_no_capabilities(self):
        d = self.sh("grep -E 'Cap(Eff|Bnd|Prm)' /proc/self/status", user="user")
        for line in d["stdout"].splitlines():
            self.assertTrue(line.endswith("0000000000000000"), line)
        self.assertLastLine("rc=1", self.sh("touch /root/x 2>/dev/null; echo rc=$?", user="user")["stdout"])

    def test_memory_limit(self):
        sid = self.s.create(memory_mb=64)
        hog = "x=$(head -c %d /dev/zero | tr '\\0' a); echo survived"
        # The control: the same command with 10 MB fits and says so.
        st, d = self.s.exec(sid, ["sh", "-c", hog % 10000000], timeout_s=60)
        self.assertEqual((st, d.get("stdout")), (200, "survived\n"), d)
        # A shell variable of 150 MB does not fit in 64 MB: the cgroup's OOM killer ends it, and
        # the sandbox says so.
        st, d = self.s.exec(sid, ["sh", "-c", hog % 150000000], timeout_s=60)
        self.assertEqual(st, 200, d)
        self.assertNotEqual(d.get("stdout"), "survived\n", d)
        st, rec = self.s.json("GET", "/v1/sandboxes/" + sid)
        hits = {h["kind"]: h for h in rec["limits_hit"]}
        self.assertGreaterEqual(hits.get("memory", {}).get("count") or 0, 1, rec["limits_hit"])

    def test_pids_limit_and_fork_bomb_contained(self):
        # Its own sandbox: once the bomb holds every task slot, that sandbox cannot fork even
        # the command that would kill the bomb, and the class's other tests must not see that.
        sid = self.s.create()
        st, p = self.s.json("POST", "/v1/sandboxes/%s/processes" % sid,
                            {"cmd": ["sh", "-c", "for i in $(seq 1 3000); do sleep 30 & done; wait"]})
        self.assertEqual(st, 201, p)
        # Read the sandbox's task count from the host: pids.max (runtime::PidsMaxFor, 256 for
        # the default 512 MiB) holds it.
        cg = [p for p in space_cgroups(sid, self.s.data_dir)
              if os.path.exists(os.path.join(p, "pids.current"))][0]
        with open(cg + "/pids.max") as f:
            limit = int(f.read())
        self.assertEqual(limit, 256)
        peak = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and peak < limit - 10:
            with open(cg + "/pids.current") as f:
                peak = max(peak, int(f.read()))
            time.sleep(0.05)
        self.assertGreater(peak, limit // 2)
        self.assertLessEqual(peak, limit)
        # The node and the other sandbox still answer.
        self.assertEqual(self.s.call("GET", "/healthz", key=False)[0], 200)
        self.assertEqual(self.sh("echo ok")["stdout"], "ok\n")
        # The bomb's sandbox says why, and the host can still destroy it with every slot taken.
        deadline = time.monotonic() + 30
        while True:
            st, info = self.s.json("GET", "/v1/sandboxes/%s" % sid)
            self.assertEqual(st, 200, info)
            reasons = [h.get("kind") for h in info.get("limits_hit", [])]
            if "pids" in reasons or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertIn("pids", reasons, info)
        st, op = self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid, timeout=60)
        self.assertIn(st, (200, 202, 204), op)
        self.assertEqual(self.s.json("GET", "/v1/sandboxes/" + sid)[1]["state"], "destroyed")
        self.assertFalse(os.path.exists(cg))

if __name__ == "__main__":
    unittest.main()
