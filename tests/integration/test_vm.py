"""The `vm` runtime end to end: a QEMU microVM per sandbox, with full memory checkpoints.

Slow (TCG emulation where the host has no /dev/kvm: each boot takes seconds), so kept to a
few tests that each cover several behaviours. Skipped without root or qemu-system-x86_64.
"""
import os
import re
import stat
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root, node_cgroup_name  # noqa: E402

QEMU = "/usr/bin/qemu-system-x86_64"
VM = {"runtime": "vm", "memory_mb": 256}
RAND = "head -c 16 /dev/urandom | od -An -tx1"
# The counter renames a whole file into place: a plain `echo > count` truncates first, and a
# read between the truncate and the write saw an empty file (count 0 after a resume, in CI).
COUNTER = ("i=0; while true; do i=$((i+1)); echo $i > /dev/shm/count.tmp; "
           "mv /dev/shm/count.tmp /dev/shm/count; sleep 0.2; done")


def vm_pids(data_dir):
    """Host pids in the node's vm cgroups ("space-<fnv>-vm/<sandbox>"), v1 or v2."""
    parent = node_cgroup_name(data_dir) + "-vm"
    pids = set()
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"):
        d = os.path.join(root, parent)
        if not os.path.isdir(d):
            continue
        for leaf in os.listdir(d):
            for name in ("cgroup.procs", "tasks"):
                try:
                    with open(os.path.join(d, leaf, name)) as f:
                        pids.update(int(x) for x in f.read().split())
                except OSError:
                    pass
    return pids


def vm_leaves(data_dir):
    parent = node_cgroup_name(data_dir) + "-vm"
    out = []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"):
        d = os.path.join(root, parent)
        if os.path.isdir(d):
            out += [os.path.join(d, x) for x in os.listdir(d) if x.startswith("sbx_")]
    return out


def qemu_running(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"qemu-system" in f.read()
    except OSError:
        return False


@unittest.skipUnless(is_root() and os.path.exists(QEMU), "needs root and qemu-system-x86_64")
class VmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def sh(self, sid, script):
        st, d = self.s.exec(sid, ["sh", "-c", script])
        self.assertEqual(st, 200, d)
        return d["stdout"]

    def count(self, sid, missing_ok=False):
        st, d = self.s.exec(sid, ["cat", "/dev/shm/count"])
        self.assertEqual(st, 200, d)
        if missing_ok and d["exit_code"] != 0:
            return 0  # not written yet (a lost file ends in the timeout below)
        self.assertEqual(d["exit_code"], 0, d)  # after a restore: the guest lost its memory
        return int(d["stdout"].strip())

    def wait_count_above(self, sid, floor, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            c = self.count(sid, missing_ok=True)
            if c > floor:
                return c
            time.sleep(0.3)
        self.fail("count in %s stayed at or below %d" % (sid, floor))

    def test_1_exec_files_pause_resume_and_destroy(self):
        t = time.time()
        sid = self.s.create(**VM)
        sys.stderr.write("[vm create %.1fs] " % (time.time() - t))
        st, sb = self.s.json("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(sb["runtime"], "vm")
        # Its own kernel: Debian's cloud kernel, not the host's.
        guest = self.sh(sid, "uname -r").strip()
        self.assertTrue(guest.endswith("-cloud-amd64"), guest)
        self.assertNotEqual(guest, os.uname().release)
        # A second sandbox restored from the same template checkpoint: the node reseeds each
        # restored guest's CRNG, so the first bytes they read differ.
        other = self.s.create(**VM)
        a, b = self.sh(sid, RAND), self.sh(other, RAND)
        self.assertTrue(a.strip(), a)
        self.assertNotEqual(a, b)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % other)
        # A template checkpoint that no longer loads is dropped and the create boots cold.
        ckdir = os.path.join(self.s.data_dir, "pool", "vm-images", "checkpoints")
        cks = [d for d in os.listdir(ckdir) if ".tmp-" not in d and ".stale-" not in d]
        self.assertEqual(len(cks), 1, cks)
        with open(os.path.join(ckdir, cks[0], "memory.state"), "r+b") as f:
            f.truncate(4096)
        cold = self.s.create(**VM)
        self.assertEqual(self.sh(cold, "echo up"), "up\n")
        self.assertFalse(os.path.exists(os.path.join(ckdir, cks[0])), os.listdir(ckdir))
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % cold)
        # Files both ways.
        st, _, _ = self.s.call("PUT", "/v1/sandboxes/%s/files?path=/root/in.txt" % sid, raw=b"from host\n")
        self.assertIn(st, (200, 201))
        self.assertEqual(self.sh(sid, "cat /root/in.txt"), "from host\n")
        self.sh(sid, "echo from guest > /root/out.txt")
        st, _, body = self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/out.txt" % sid)
        self.assertEqual((st, body), (200, b"from guest\n"))
        # Pause stops the vCPUs (QMP stop): a counter does not move; resume continues it.
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": ["sh", "-c", COUNTER]})
        self.assertIn(st, (200, 201), d)
        first = self.wait_count_above(sid, 0)
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)
        self.assertEqual((st, sb["state"]), (200, "paused"))
        self.assertEqual(self.s.exec(sid, ["true"])[0], 409)
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)
        self.assertEqual((st, sb["state"]), (200, "running"))
        self.wait_count_above(sid, first)
        # Audit and command history go through the same node paths as ns.
        st, cmds = self.s.json("GET", "/v1/sandboxes/%s/commands" % sid)
        self.assertTrue(any("uname -r" in " ".join(c["cmd"]) for c in cmds["commands"]), cmds)
        pids = vm_pids(self.s.data_dir)
        self.assertTrue(any(qemu_running(p) for p in pids), pids)
        self.check_vmm_credentials(pids)
        st, _ = self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertIn(st, (200, 204))
        self.assertFalse(any(qemu_running(p) for p in pids), "a VMM outlived destroy")
        self.assertEqual(vm_leaves(self.s.data_dir), [])

    def check_vmm_credentials(self, pids):
        # QEMU and its reaper: one host uid, no capability, in a user namespace of their own
        # that maps that uid and nothing else (the broker wrote it: userns_map, shape one_id).
        host_userns = os.readlink("/proc/self/ns/user")
        for pid in pids:
            try:
                with open("/proc/%d/status" % pid) as f:
                    st = dict(l.split(":", 1) for l in f.read().splitlines())
                with open("/proc/%d/uid_map" % pid) as f:
                    uid_map = f.read().split()
                userns = os.readlink("/proc/%d/ns/user" % pid)
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone meanwhile
            uid = int(st["Uid"].split()[0])
            self.assertGreaterEqual(uid, 1 << 20, (pid, st["Uid"]))
            self.assertEqual(set(st["Uid"].split()), {str(uid)}, (pid, st["Uid"]))
            self.assertEqual(uid_map, [str(uid), str(uid), "1"], pid)
            self.assertNotEqual(userns, host_userns, pid)
            for field in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
                self.assertEqual(int(st[field], 16), 0, (pid, field, st[field]))
            self.assertEqual(st["NoNewPrivs"].strip(), "1", pid)

    def test_2_counter_survives_suspend_resume_and_fork(self):
        sid = self.s.create(**VM)
        st, d = self.s.json("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": ["sh", "-c", COUNTER]})
        self.assertIn(st, (200, 201), d)
        before = self.wait_count_above(sid, 5)
        # /dev/shm is guest memory: only a memory checkpoint keeps both the file and the
        # process that writes it.
        t = time.time()
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/suspend?wait=true" % sid, timeout=300)
        self.assertEqual((st, sb["state"]), (200, "suspended"), sb)
        sys.stderr.write("[suspend %.1fs] " % (time.time() - t))
        self.assertEqual(vm_pids(self.s.data_dir), set())
        t = time.time()
        st, sb = self.s.json("POST", "/v1/sandboxes/%s/resume?wait=true" % sid, timeout=300)
        self.assertEqual((st, sb["state"]), (200, "running"), sb)
        sys.stderr.write("[resume %.1fs] " % (time.time() - t))
        resumed = self.count(sid)
        self.assertGreaterEqual(resumed, before)
        after_resume = self.wait_count_above(sid, resumed)
        # A full snapshot, then a fork from it: the child's counter goes on from there too.
        st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "full"}, timeout=300)
        self.assertEqual(st, 201, snap)
        self.assertEqual(snap["kind"], "full")
        t = time.time()
        st, d = self.s.json("POST", "/v1/sandboxes/%s/fork" % sid, {"snapshot": snap["id"]}, timeout=300)
        self.assertIn(st, (200, 201, 202), d)
        child = d["sandboxes"][0]["id"]
        for _ in range(600):
            st, sb = self.s.json("GET", "/v1/sandboxes/" + child)
            if sb["state"] in ("running", "failed"):
                break
            time.sleep(0.1)
        self.assertEqual(sb["state"], "running", sb)
        sys.stderr.write("[fork %.1fs] " % (time.time() - t))
        # The fork and its origin got different randomness after the restore.
        self.assertNotEqual(self.sh(child, RAND), self.sh(sid, RAND))
        forked = self.count(child)
        self.assertGreaterEqual(forked, after_resume)
        self.wait_count_above(child, forked)
        self.assertEqual(sb["runtime"], "vm")
        for x in (sid, child):
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % x)
        self.assertEqual(vm_pids(self.s.data_dir), set())
        self.assertEqual(vm_leaves(self.s.data_dir), [])

    def test_2b_ram_is_a_file_and_a_checkpoint_is_device_state(self):
        # 2 GiB of guest RAM in a root whose disk quota is the default 2 GiB: the RAM file counts
        # beside the disk, not against it (a cold boot used to stall on EDQUOT).
        sid = self.s.create(runtime="vm", memory_mb=2048)
        digest = self.sh(sid, "head -c 64m /dev/urandom > /dev/shm/blob && sha256sum /dev/shm/blob").split()[0]
        st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "ram"}, timeout=300)
        self.assertEqual(st, 201, snap)
        m = re.findall(r"checkpoint %s of %s: memory state (\d+) bytes" % (snap["id"], sid), self.s.log_tail(200000))
        self.assertEqual(len(m), 1, self.s.log_tail())
        # Device state only: the 64 MiB the guest wrote is in memory.ram, not in the stream.
        self.assertLess(int(m[0]), 4 << 20)
        ram = os.path.join(self.s.data_dir, "pool", "sandboxes", sid, ".space-vm", "memory.ram")
        self.assertEqual(os.stat(ram).st_size, 2048 << 20)
        restored = self.s.create(from_snapshot=snap["id"])
        self.assertEqual(self.sh(restored, "sha256sum /dev/shm/blob").split()[0], digest)
        for x in (sid, restored):
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % x)

    def df_mib(self, sid):
        # Total size of the guest's root filesystem, as the guest sees it.
        return int(self.sh(sid, "df -k / | tail -1").split()[1]) // 1024

    def test_2c_the_disk_is_the_size_asked_for(self):
        images = os.path.join(self.s.data_dir, "pool", "vm-images", "disks")
        # A restore of the template checkpoint (QEMU block_resize, then spaced grows ext4).
        sid = self.s.create(runtime="vm", memory_mb=256, disk_mb=1024)
        image_mib = max(os.stat(os.path.join(images, f)).st_size for f in os.listdir(images)) >> 20
        self.assertLess(image_mib, 600)  # so the 600 MiB below fit only on the grown disk
        self.assertTrue(880 <= self.df_mib(sid) <= 1024, self.df_mib(sid))  # less ext4 overhead
        disk = os.path.join(self.s.data_dir, "pool", "sandboxes", sid, ".space-vm", "disk.img")
        self.assertEqual(os.stat(disk).st_size, 1024 << 20)
        st, d = self.s.exec(sid, ["sh", "-c", "dd if=/dev/zero of=/root/big bs=1M count=600 2>&1 && sync"], timeout_s=300)
        self.assertEqual((st, d["exit_code"]), (200, 0), d)
        # A restore of its snapshot asking the same size keeps it (nothing to grow); one asking
        # for more (the default 2048) grows the disk it restored, data in place.
        st, snap = self.s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "disk"}, timeout=300)
        self.assertEqual(st, 201, snap)
        same = self.s.create(from_snapshot=snap["id"], disk_mb=1024)
        self.assertTrue(880 <= self.df_mib(same) <= 1024, self.df_mib(same))
        restored = self.s.create(from_snapshot=snap["id"])
        self.assertTrue(1800 <= self.df_mib(restored) <= 2048, self.df_mib(restored))
        self.assertIn("/root/big", self.sh(restored, "ls /root/big"))
        # Smaller than the template's image: the disk keeps the image's size (ext4 cannot shrink
        # while mounted); the root's quota still bounds what it writes on the host.
        small = self.s.create(runtime="vm", memory_mb=256, disk_mb=64)
        self.assertTrue(image_mib - 64 <= self.df_mib(small) <= image_mib, (self.df_mib(small), image_mib))
        for x in (sid, same, restored, small):
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % x)
        # A cold boot: the image file is grown before QEMU opens it, and the guest grows ext4 at boot.
        os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"] = "0"
        try:
            cold = Server(extra_args=["--no-egress"]).start()
        finally:
            del os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"]
        try:
            sid = cold.create(runtime="vm", memory_mb=256, disk_mb=768)
            st, d = cold.exec(sid, ["sh", "-c", "df -k / | tail -1"])
            self.assertTrue(660 <= int(d["stdout"].split()[1]) // 1024 <= 768, d)
            cold.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        finally:
            cold.cleanup()

    def test_2d_limits_hit_says_what_the_guest_kernel_saw(self):
        # The node sees the VMM from outside; the guest's own disk filling up and its kernel's
        # OOM kills are what spaced reports (kLimitsQuery).
        sid = self.s.create(runtime="vm", memory_mb=256, disk_mb=64)

        def hits():
            st, d = self.s.json("GET", "/v1/sandboxes/" + sid)
            self.assertEqual(st, 200, d)
            return {h["kind"]: h for h in d["limits_hit"]}

        self.assertEqual(hits(), {})  # the control: nothing hit yet
        fill = ("avail=$(df -k / | tail -1 | awk '{print $4}'); "
                "fallocate -l ${avail}k /root/fill 2>/dev/null || dd if=/dev/zero of=/root/fill bs=1M 2>/dev/null; "
                "sync; df -k / | tail -1")
        st, d = self.s.exec(sid, ["sh", "-c", fill], timeout_s=600)
        self.assertEqual(st, 200, d)
        hit = hits()
        self.assertIn("disk", hit, d)
        self.assertIn("ENOSPC", hit["disk"]["message"])
        self.assertNotIn("memory", hit)
        # A buffer larger than the guest's memory, which its kernel lets dd have (overcommit) and
        # then cannot back: its OOM killer ends dd.
        st, d = self.s.exec(sid, ["sh", "-c", "rm /root/fill; sync; echo 1 > /proc/sys/vm/overcommit_memory; "
                                  "dd if=/dev/zero of=/dev/null bs=400M count=1"], timeout_s=600)
        self.assertEqual(st, 200, d)
        self.assertNotEqual(d["exit_code"], 0, d)
        hit = hits()
        self.assertNotIn("disk", hit)  # a level, not an event: freed, it is no longer reported
        self.assertGreaterEqual(hit["memory"]["count"], 1, hit)
        self.assertIn("out-of-memory", hit["memory"]["message"])
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_3_kill9_of_the_node_leaves_no_vmm(self):
        s = Server().start()
        try:
            sid = s.create(**VM)
            pids = [p for p in vm_pids(s.data_dir) if qemu_running(p)]
            self.assertTrue(pids)
            s.kill9()
            deadline = time.time() + 10
            while time.time() < deadline and any(qemu_running(p) for p in pids):
                time.sleep(0.1)
            self.assertFalse(any(qemu_running(p) for p in pids), "the VMM outlived its node")
            # The next start reconciles: the sandbox boots again from its disk, nothing else.
            s.start()
            st, sb = s.json("GET", "/v1/sandboxes/" + sid)
            self.assertEqual(sb["state"], "running", sb)
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
            self.assertEqual(vm_pids(s.data_dir), set())
            self.assertEqual(vm_leaves(s.data_dir), [])
        finally:
            s.cleanup()


def vmm_could_open_kvm():
    """What the node's static probe says (kvm_probe.h): open to all, or read-write for a group
    other than root's, which the VMM joins."""
    try:
        st = os.stat("/dev/kvm")
    except OSError:
        return False
    if not stat.S_ISCHR(st.st_mode):
        return False
    return (st.st_mode & 0o006) == 0o006 or (st.st_gid != 0 and (st.st_mode & 0o060) == 0o060)


def metric_accelerator(server):
    st, _, body = server.call("GET", "/metrics")
    m = re.search(r'space_vm_accelerator\{accelerator="([a-z-]+)"\} 1', body.decode())
    return m.group(1) if m else None


@unittest.skipUnless(is_root() and os.path.exists(QEMU), "needs root and qemu-system-x86_64")
class VmAcceleratorTest(unittest.TestCase):
    """--accel: KVM is proven by the first vm launch and a create never fails for it."""

    def test_forced_kvm_that_cannot_run_falls_back_to_tcg_and_the_create_succeeds(self):
        if vmm_could_open_kvm():
            self.skipTest("the VMM could open /dev/kvm here: KVM may well work, so nothing to fall back from")
        s = Server(extra_args=["--accel", "kvm"]).start()
        try:
            self.assertEqual(metric_accelerator(s), "kvm-unproven")
            sid = s.create(**VM)
            st, d = s.exec(sid, ["echo", "up"])
            self.assertEqual((st, d["stdout"]), (200, "up\n"), d)
            self.assertEqual(metric_accelerator(s), "tcg")
            st, sb = s.json("GET", "/v1/sandboxes/" + sid)
            self.assertIn("vm.vm_accel_tcg", sb["timings"]["steps"], sb["timings"])
            log = s.log_tail(200000)
            # Why, in the log: the VMM (the sandbox's uid, no group) was refused the device.
            self.assertIn("KVM did not run the guest", log)
            self.assertRegex(log, r"(?s)KVM did not run the guest.*(kvm|KVM)")
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        finally:
            s.cleanup()

    def test_bad_accel_is_refused_at_start(self):
        s = Server(extra_args=["--accel", "hvf"])
        with self.assertRaises(RuntimeError) as e:
            s.start()
        self.assertIn("accelerator must be auto, kvm or tcg", str(e.exception))
        s.cleanup()


def vm_pool_metric(server, family, template="busybox"):
    st, _, body = server.call("GET", "/metrics")
    m = re.search(r'%s\{template="%s",runtime="vm"\} (\d+)' % (family, template), body.decode())
    return int(m.group(1)) if m else None


@unittest.skipUnless(is_root() and os.path.exists(QEMU), "needs root and qemu-system-x86_64")
class VmWarmPoolTest(unittest.TestCase):
    """--warm-pool busybox:vm=1: a VM restored from the template checkpoint waits; a vm create
    with the pool's resources takes it and gets what it asked for; the pool refills."""

    def wait_pool(self, s, size, timeout=240):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if vm_pool_metric(s, "space_warm_pool_size") == size:
                return
            time.sleep(0.2)
        self.fail("vm pool never reached %d\n%s" % (size, s.log_tail()))

    def test_vm_create_takes_a_pooled_vm_and_the_pool_refills(self):
        s = Server(extra_args=["--warm-pool", "busybox:vm=1"]).start()
        try:
            self.wait_pool(s, 1)
            # The ns series of the same template is a different pool: not made.
            st, _, body = s.call("GET", "/metrics")
            self.assertNotIn('space_warm_pool_size{template="busybox"}', body.decode())
            t = time.time()
            st, d = s.json("POST", "/v1/sandboxes?wait=true",
                           {"template": "busybox", "runtime": "vm", "env": {"FROM_CREATE": "yes"}})
            took = time.time() - t
            self.assertEqual(st, 201, d)
            sb = d["sandbox"]
            sys.stderr.write("[warm vm create %.0f ms] " % (took * 1000))
            self.assertEqual(sb["runtime"], "vm")
            self.assertIn("warm_pool", sb["timings"]["steps"], sb["timings"])
            self.assertEqual(vm_pool_metric(s, "space_warm_pool_hits_total"), 1)
            st, r = s.exec(sb["id"], ["sh", "-c", "echo $FROM_CREATE; uname -r"])
            self.assertEqual(st, 200, r)
            lines = r["stdout"].split()
            self.assertEqual(lines[0], "yes", r)
            self.assertTrue(lines[1].endswith("-cloud-amd64"), r)
            # Other memory than the pool's: served cold, counted as a miss.
            cold = s.create(runtime="vm", memory_mb=256)
            st, c = s.json("GET", "/v1/sandboxes/" + cold)
            self.assertNotIn("warm_pool", c["timings"]["steps"], c["timings"])
            self.assertEqual(vm_pool_metric(s, "space_warm_pool_misses_total"), 1)
            self.wait_pool(s, 1)  # refilled
            for sid in (sb["id"], cold):
                s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
            pids = vm_pids(s.data_dir)
            # Only the pooled VM's cgroup is left (the two destroyed ones went).
            self.assertEqual(len({os.path.basename(p) for p in vm_leaves(s.data_dir)}), 1, vm_leaves(s.data_dir))
            s.stop()
            self.assertFalse(any(qemu_running(p) for p in pids), "a pooled VMM outlived the node")
            self.assertEqual(vm_leaves(s.data_dir), [])
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main()
