"""Warm pools (`space dev --warm-pool busybox=N`): creates served from the pool are fast and look
exactly like cold ones, the pool refills, /metrics shows it, and neither a clean stop nor a
kill -9 leaves anything behind (cgroups, roots, mounts, processes) for this server's data dir."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPACE_BIN, Server, is_root, mounts_under, node_cgroup_name, space_cgroups  # noqa: E402

POOL = 3


def metrics(s):
    st, _, body = s.call("GET", "/metrics")
    assert st == 200, st
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r'(space_warm_pool_\w+)\{template="([^"]+)"\} (\d+)$', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def wait_pool(s, template, size, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metrics(s).get(("space_warm_pool_size", template)) == size:
            return
        time.sleep(0.05)
    raise AssertionError("pool of %s never reached %d: %s\n%s" % (template, size, metrics(s), s.log_tail()))


def processes_in_cgroup(name):
    """Pids whose cgroup path names `name` (this node's parent cgroup): scoped to one server."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if name in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def roots(s):
    return sorted(os.listdir(os.path.join(s.data_dir, "pool", "sandboxes")))


def cgroups(s):
    return sorted({os.path.basename(p) for p in space_cgroups(data_dir=s.data_dir)})


# What a process sees of its sandbox; must be the same whether the sandbox came from the pool.
PROBE = ("echo host=$(hostname); env | grep -v '^SPACE_SANDBOX_ID=' | sort; id; ls /; "
         "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; "
         "echo nice1=$(cut -d' ' -f19 /proc/1/stat) niceself=$(cut -d' ' -f19 /proc/self/stat); "
         "echo pid1=$(cat /proc/1/comm); df -k /dev/shm | tail -1 | awk '{print $2}'; ulimit -n")


@unittest.skipUnless(is_root(), "needs root")
class WarmPoolTest(unittest.TestCase):
    def setUp(self):
        self.s = Server(extra_args=["--warm-pool", "busybox=%d" % POOL]).start()

    def tearDown(self):
        self.s.cleanup()

    def create(self, **extra):
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "busybox", **extra})
        self.assertEqual(st, 201, d)
        return d["sandbox"]

    def probe(self, sb):
        st, d = self.s.exec(sb["id"], ["sh", "-c", PROBE], env={"X": "1"})
        self.assertEqual(st, 200, d)
        self.assertEqual(d["exit_code"], 0, d)
        return d["stdout"].replace(sb["id"].replace("_", "-"), "<host>")

    def test_warm_sandbox_is_indistinguishable_from_cold(self):
        wait_pool(self.s, "busybox", POOL)
        env = {"FOO": "bar baz", "PATH": "/usr/bin:/bin:/custom", "HOME": "/nope"}
        warm = self.create(env=env, metadata={"k": "v"}, cpus=0.5, disk_mb=1024)
        self.assertIn("warm_pool", warm["timings"]["steps"], warm)
        self.assertEqual(warm["metadata"], {"k": "v"})
        # memory_mb other than the pool's is served cold (/dev/shm is sized from it at mount).
        cold = self.create(env=env, metadata={"k": "v"}, cpus=0.5, disk_mb=1024, memory_mb=512 + 0)
        self.assertIn("warm_pool", cold["timings"]["steps"])  # same memory: still warm
        cold = self.create(env=env, cpus=0.5, disk_mb=1024, memory_mb=256)
        self.assertNotIn("warm_pool", cold["timings"]["steps"], cold)

        for sb in (warm, cold):
            st, d = self.s.exec(sb["id"], ["sh", "-c", "hostname; echo $SPACE_SANDBOX_ID; echo $FOO; echo $HOME; "
                                           "echo $PATH"])
            self.assertEqual(d["stdout"].split("\n")[:5],
                             [sb["id"].replace("_", "-"), sb["id"], "bar baz", "/root", "/usr/bin:/bin:/custom"], d)
            # The request's env wins over the create's, in both.
            st, d = self.s.exec(sb["id"], ["sh", "-c", "echo $FOO"], env={"FOO": "mine"})
            self.assertEqual(d["stdout"], "mine\n")
        # Apart from /dev/shm's size (memory_mb differs on purpose), the two look the same.
        pw, pc = self.probe(warm).splitlines(), self.probe(cold).splitlines()
        self.assertIn("nice1=0 niceself=0", pw)
        # In the node only the refill thread runs at its lower priority: the pooled sandboxes'
        # channel readers it started went back to normal (node_thread_nice, through the broker).
        niced = {}
        for tid in os.listdir("/proc/%d/task" % self.s.proc.pid):
            try:
                with open("/proc/%d/task/%s/stat" % (self.s.proc.pid, tid)) as f:
                    nice = int(f.read().rsplit(")", 1)[1].split()[16])
            except (FileNotFoundError, ProcessLookupError):
                continue
            if nice != 0:
                niced[tid] = nice
        self.assertLessEqual(len(niced), 1, niced)
        shm_w, shm_c = pw.pop(-2), pc.pop(-2)
        self.assertEqual(int(shm_w), 512 * 1024)
        self.assertEqual(int(shm_c), 256 * 1024)
        self.assertEqual(pw, pc)
        # Limits: the cgroup was rewritten to the create's cpus at hand-out.
        quota = self.cpu_quota(warm["id"])
        self.assertEqual(quota, self.cpu_quota(cold["id"]))
        self.assertEqual(quota, 50000)
        # Files.
        st, _, _ = self.s.call("PUT", "/v1/sandboxes/%s/files?path=/root/x" % warm["id"], raw=b"hello")
        self.assertIn(st, (200, 201))
        st, _, body = self.s.call("GET", "/v1/sandboxes/%s/files?path=/root/x" % warm["id"])
        self.assertEqual(body, b"hello")
        # A warm sandbox survives a restart like any other: cold boot with the same env.
        self.s.stop()
        self.s.start()
        st, d = self.s.exec(warm["id"], ["sh", "-c", "echo $FOO; cat /root/x"])
        self.assertEqual(d["stdout"], "bar baz\nhello", d)

    def cpu_quota(self, sid):
        for p in space_cgroups(sid=sid, data_dir=self.s.data_dir):
            for f, parse in (("cpu.cfs_quota_us", int), ("cpu.max", lambda t: int(t.split()[0]))):
                path = os.path.join(p, f)
                if os.path.exists(path):
                    with open(path) as fh:
                        return parse(fh.read().strip())
        raise AssertionError("no cpu cgroup for " + sid)

    def test_served_warm_is_fast_and_pool_refills(self):
        wait_pool(self.s, "busybox", POOL)
        warm_ms = []
        for _ in range(POOL):
            sb = self.create()
            self.assertIn("warm_pool", sb["timings"]["steps"])
            warm_ms.append(sb["timings"]["create_ms"])
            st, d = self.s.exec(sb["id"], ["true"])
            self.assertEqual(d["exit_code"], 0)
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sb["id"])
        cold_ms = []
        for _ in range(POOL):
            sb = self.create(memory_mb=256)
            cold_ms.append(sb["timings"]["create_ms"])
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sb["id"])
        # Served warm, a create skips the clone and the whole runtime launch.
        self.assertLess(sorted(warm_ms)[POOL // 2], sorted(cold_ms)[POOL // 2], (warm_ms, cold_ms))
        wait_pool(self.s, "busybox", POOL)
        m = metrics(self.s)
        self.assertEqual(m[("space_warm_pool_target", "busybox")], POOL)
        self.assertGreaterEqual(m[("space_warm_pool_hits_total", "busybox")], POOL)
        self.assertGreaterEqual(m[("space_warm_pool_misses_total", "busybox")], POOL)
        self.assertGreaterEqual(m[("space_warm_pool_refills_total", "busybox")], 2 * POOL)
        # Pooled sandboxes are nobody's: not listed, not counted live.
        st, lst = self.s.json("GET", "/v1/sandboxes")
        self.assertEqual([x for x in lst["sandboxes"] if x["state"] not in ("destroyed",)], [])
        self.assertEqual(len(roots(self.s)), POOL)

    def test_clean_stop_destroys_pool(self):
        wait_pool(self.s, "busybox", POOL)
        keep = self.create()["id"]
        wait_pool(self.s, "busybox", POOL)
        self.assertEqual(len(cgroups(self.s)), POOL + 1)
        self.s.stop()
        # The running sandbox keeps its root (it boots again on start); the pool's are gone.
        self.assertEqual(roots(self.s), [keep])
        self.assertEqual(cgroups(self.s), [])
        self.assertEqual(processes_in_cgroup(node_cgroup_name(self.s.data_dir)), [])

    def test_kill9_leaves_nothing(self):
        wait_pool(self.s, "busybox", POOL)
        keep = self.create(env={"A": "b"})["id"]
        # Kill while a refill may be in flight, too.
        self.s.kill9()
        for _ in range(100):
            if not processes_in_cgroup(node_cgroup_name(self.s.data_dir)):
                break
            time.sleep(0.05)
        # Restarted without a pool: everything the pool had is reconciled away.
        self.s.extra_args = []
        self.s.start()
        st, d = self.s.exec(keep, ["sh", "-c", "echo $A"])
        self.assertEqual(d["stdout"], "b\n", d)
        self.assertEqual(roots(self.s), [keep])
        self.assertEqual(cgroups(self.s), [keep])
        self.assertEqual(mounts_under(self.s.data_dir), [os.path.join(self.s.data_dir, "pool")])
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % keep)
        self.s.stop()
        self.assertEqual(roots(self.s), [])
        self.assertEqual(cgroups(self.s), [])
        for _ in range(100):
            if not processes_in_cgroup(node_cgroup_name(self.s.data_dir)):
                break
            time.sleep(0.05)
        self.assertEqual(processes_in_cgroup(node_cgroup_name(self.s.data_dir)), [])


@unittest.skipUnless(is_root(), "needs root")
class WarmPoolFlagTest(unittest.TestCase):
    def test_hostile_flag_is_refused(self):
        # Refused before anything is made: no data dir, no pool image, no mount left behind.
        parent = tempfile.mkdtemp(prefix="space-flag-")
        data_dir = os.path.join(parent, "never")
        try:
            for bad in ("busybox=-1", "busybox=9999", "../x=1", "busybox", "busybox=1,busybox=2", "a" * 5000 + "=1"):
                r = subprocess.run([SPACE_BIN, "dev", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                                    "--warm-pool", bad], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, (bad, r.stderr))
                self.assertIn("--warm-pool", r.stderr)
                self.assertFalse(os.path.exists(data_dir), bad)
        finally:
            with open("/proc/self/mountinfo") as f:
                if " %s/" % parent in f.read():
                    subprocess.run(["umount", "-l", os.path.join(data_dir, "pool")])
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
