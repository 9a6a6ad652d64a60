"""Abuse (issue 9): a fork bomb, a memory bomb, a disk filler, an inode filler and an output
flood, each in its own abusive sandbox, while a neighbour sandbox keeps answering. For each:
the neighbour's exec latency under abuse stays within 2x of its idle latency, the node keeps
answering, and the abuser hits its limit with the reason in its own result and in
GET /v1/sandboxes/{id} `limits_hit`.

How latency is compared: idle and abused samples are interleaved in the same run, so the load
of whatever else shares the machine weighs on both alike. While the abuse runs, the test
alternates windows: the abuser paused (its cgroup frozen: the "idle" samples) and resumed
(the "abused" samples), WINDOWS times; the statistic is the median (p50) of each side's
samples, and the bound is p50(abused) <= MAX_RATIO * p50(idle). A set over the bound is measured
again (the abuse still running), up to RETRIES times, and the last set decides; every set is
printed. A starved neighbour fails every set; a one-off spike on this noisy 2-vCPU host (single
sets have measured up to x2.9, docs/security.md "Abuse") does not. MAX_RATIO is 2, the issue's
bound, for `make abuse` and `make test` alike.

Needs root and the Debian `base` template (cached in SPACE_TEST_DATA_DIR)."""
import os
import statistics
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import SPACE_BIN, Server, delete_snapshots, is_root  # noqa: E402

MAX_RATIO = float(os.environ.get("SPACE_ABUSE_MAX_RATIO", "2"))
RETRIES = 2          # window sets measured again when one is over the bound; the last decides
WINDOWS = 6          # idle/abused window pairs per abuse
PER_WINDOW = 8       # neighbour execs per window
SETTLE_S = 0.25      # after a pause/resume, before sampling
LIMIT_WAIT_S = 45    # how long an abuse may take to reach its limit before the windows start (the inode
#                      filler took about 13 s on a quiet host; more while btrfs is busy). The abuser's
#                      own exec ends at 60 s, and the windows must fit before that.
# Abusers loop until the test creates this file (tmpfs: writable with the disk quota full).
STOP = "/dev/shm/stop-abuse"
UNTIL_STOP = "while [ ! -e %s ]; do " % STOP


@unittest.skipUnless(is_root(), "needs root")
class AbuseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
        os.makedirs(data_dir, exist_ok=True)
        cls.s = Server(data_dir, extra_args=["--no-egress"]).start()
        r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=cls.s.env(), capture_output=True, text=True)
        if r.returncode != 0:
            cls.s.stop()
            raise AssertionError("building base failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
        # Earlier runs' snapshots in the shared data dir slow every btrfs commit's quota
        # accounting, and so the disk and inode fillers (harness.delete_snapshots).
        delete_snapshots(cls.s)
        cls.victim = cls.s.create("base")
        cls.results = []

    @classmethod
    def tearDownClass(cls):
        cls.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % cls.victim)
        cls.s.stop()
        for line in cls.results:
            print(line)

    def exec_ms(self, sid):
        t = time.perf_counter()
        st, d = self.s.exec(sid, ["true"], timeout_s=30)
        self.assertEqual(st, 200, d)
        self.assertEqual(d["exit_code"], 0, d)
        return (time.perf_counter() - t) * 1000

    def set_paused(self, sid, paused):
        st, d = self.s.json("POST", "/v1/sandboxes/%s/%s?wait=true" % (sid, "pause" if paused else "resume"))
        self.assertEqual(st, 200, d)
        time.sleep(SETTLE_S)

    def abuse(self, name, script, resources, check, limit=None, timeout_s=60):
        """Runs `script` in a fresh sandbox with `resources`; once the abuser has hit its
        `limit` (a limits_hit kind; None: after 2 s), samples the victim in alternating
        paused/resumed windows, then creates STOP. `check` asserts on the abuser's exec result
        and on its sandbox record (read before STOP), whose limits_hit holds every kind seen
        while the abuser ran and once its exec ended: a limit is a level the abuser may leave and reach again (a disk
        quota's reservations are released at each btrfs commit), and reaching it once with a
        clear reason is what the sandbox must show."""
        for _ in range(5):
            self.exec_ms(self.victim)  # warm
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "base", **resources})
        self.assertEqual(st, 201, d)
        sid = d["sandbox"]["id"]
        out = {}

        def run():
            out["result"] = self.s.exec(sid, ["bash", "-c", script], timeout_s=timeout_s)

        try:
            t = threading.Thread(target=run)
            t.start()
            deadline = time.monotonic() + (LIMIT_WAIT_S if limit else 2)
            seen = {}
            while time.monotonic() < deadline and t.is_alive():
                st, rec = self.s.json("GET", "/v1/sandboxes/%s" % sid)
                for h in rec.get("limits_hit", []):
                    seen.setdefault(h["kind"], h)
                if limit and limit in seen:
                    break
                time.sleep(0.2)
            def measure():
                idle, busy = [], []
                while t.is_alive() and len(busy) < WINDOWS * PER_WINDOW:
                    self.set_paused(sid, True)
                    idle += [self.exec_ms(self.victim) for _ in range(PER_WINDOW)]
                    self.set_paused(sid, False)
                    busy += [self.exec_ms(self.victim) for _ in range(PER_WINDOW)]
                self.assertGreaterEqual(len(busy), 3 * PER_WINDOW, "the abuse ended before the neighbour was measured")
                return idle, busy
            idle, busy = measure()
            earlier = []
            while (statistics.median(busy) > MAX_RATIO * statistics.median(idle) and t.is_alive()
                   and len(earlier) < RETRIES):
                # A noisy host (this one is two paravirtualized vCPUs) sometimes measures one
                # window set far above the rest; a starved neighbour fails every set.
                earlier.append("x%.2f" % (statistics.median(busy) / statistics.median(idle)))
                idle, busy = measure()
            first = " (earlier sets %s, measured again)" % ", ".join(earlier) if earlier else ""
            st, rec = self.s.json("GET", "/v1/sandboxes/%s" % sid)
            self.assertEqual(st, 200, rec)
            for h in rec.get("limits_hit", []):
                seen[h["kind"]] = h  # the latest word on a kind
            rec["limits_hit"] = list(seen.values())
            st, d = self.s.json("PUT", "/v1/sandboxes/%s/files?path=%s" % (sid, STOP), raw=b"")
            self.assertIn(st, (200, 201), d)
            t.join(timeout_s + 60)
            self.assertFalse(t.is_alive(), "the abuser's exec never returned")
            # And once more after its exec ended: a filler slowed by the measurement's frozen
            # windows may reach its quota only in the run it was in when STOP came, which its
            # stderr then shows; a quota is a level the record reports while it holds.
            st, after = self.s.json("GET", "/v1/sandboxes/%s" % sid)
            self.assertEqual(st, 200, after)
            for h in after.get("limits_hit", []):
                seen.setdefault(h["kind"], h)
            rec["limits_hit"] = list(seen.values())
            st, res = out["result"]
            self.assertEqual(st, 200, res)
            p50_idle, p50_busy = statistics.median(idle), statistics.median(busy)
            self.results.append("%-13s neighbour exec p50 idle %.1f ms, abused %.1f ms: x%.2f%s (%d+%d samples, "
                                "%d windows); abuser: exit %s signal %s timed_out %s truncated %s; limits_hit %s" % (
                                    name, p50_idle, p50_busy, p50_busy / p50_idle, first, len(idle), len(busy),
                                    len(busy) // PER_WINDOW, res.get("exit_code"), res.get("signal"),
                                    res.get("timed_out"), res.get("truncated"),
                                    [(h["kind"], h["count"]) for h in rec.get("limits_hit", [])]))
            self.assertLessEqual(p50_busy, MAX_RATIO * p50_idle, self.results[-1])
            st, _, _ = self.s.call("GET", "/healthz", key=False)
            self.assertEqual(st, 200)
            check(res, rec)
        finally:
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def quota_state(self):
        """The pool's btrfs quota accounting flag: limits do not hold while it is inconsistent."""
        pool = os.path.join(self.s.data_dir, "pool")
        uuid = subprocess.run(["findmnt", "-no", "UUID", pool], capture_output=True, text=True).stdout.strip()
        try:
            with open("/sys/fs/btrfs/%s/qgroups/inconsistent" % uuid) as f:
                return "qgroups inconsistent=" + f.read().strip()
        except OSError as e:
            return "qgroups: %s" % e

    def limit_hit(self, rec, kind):
        hits = [h for h in rec.get("limits_hit", []) if h["kind"] == kind]
        self.assertEqual(len(hits), 1, "%s (%s)" % (rec.get("limits_hit"), self.quota_state()))
        self.assertTrue(hits[0]["message"], hits[0])
        return hits[0]

    def test_fork_bomb(self):
        def check(res, rec):
            # pids.max stops it: fork fails with EAGAIN, which bash reports; the sandbox says so.
            self.assertIn("Resource temporarily unavailable", res["stderr"], res["stderr"][-500:])
            self.assertEqual(rec["state"], "running")
            self.assertGreater(self.limit_hit(rec, "pids")["count"], 0)
        # The bomb's shells outlive any stop signal, so its exec ends at its timeout.
        self.abuse("fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 60", {"cpus": 1}, check, limit="pids",
                   timeout_s=20)

    def test_memory_bomb(self):
        def check(res, rec):
            # The cgroup's OOM killer ends each run: SIGKILL, exit 137 from the shell.
            self.assertIn("rc=137", res["stderr"], res)
            self.assertEqual(rec["state"], "running")
            self.assertGreater(self.limit_hit(rec, "memory")["count"], 0)
        # Re-offends for the whole measurement: each run is OOM-killed, then starts again.
        self.abuse("memory bomb", UNTIL_STOP + "python3 -c 'a=[]\nwhile True: a.append(bytearray(8<<20))'; "
                   "rc=$?; done; echo rc=$rc >&2", {"memory_mb": 256}, check, limit="memory")

    def test_disk_filler(self):
        def check(res, rec):
            self.assertRegex(res["stderr"], "No space left on device|Disk quota exceeded", res["stderr"][-500:])
            self.limit_hit(rec, "disk")
        # Keeps writing against the full quota (rewriting what the quota lets it) until stopped.
        self.abuse("disk filler", UNTIL_STOP + "dd if=/dev/zero of=/root/fill bs=1M 2>/dev/shm/dd.err >/dev/null; "
                   "rm -f /root/fill2; dd if=/dev/zero of=/root/fill2 bs=1M 2>>/dev/shm/dd.err >/dev/null; done; "
                   "tail -2 /dev/shm/dd.err >&2", {"disk_mb": 256}, check, limit="disk")

    def test_inode_filler(self):
        def check(res, rec):
            # btrfs has no inode table to exhaust: every inode is metadata the quota counts.
            self.assertRegex(res["stderr"], "No space left on device|Disk quota exceeded", res["stderr"][-500:])
            self.limit_hit(rec, "disk")
        # The smallest quota (16 MiB): ~46,000 empty files fill it.
        self.abuse("inode filler", "mkdir -p /root/i && cd /root/i && " + UNTIL_STOP +
                   "python3 -c '\nimport os,itertools\nfor i in itertools.count(): "
                   "open(\"%d-%d\" % (os.getpid(), i),\"w\").close()' 2>/dev/shm/py.err; done; tail -1 /dev/shm/py.err >&2",
                   {"disk_mb": 16}, check, limit="disk")

    def test_output_flood(self):
        def check(res, rec):
            # The node caps what it keeps of an exec's output and says so.
            self.assertTrue(res["truncated"], {k: v for k, v in res.items() if k not in ("stdout", "stderr")})
            self.assertLess(len(res["stdout"]), 64 << 20)
            self.assertGreater(self.limit_hit(rec, "output")["count"], 0)
            # What the guest dropped past the cap is still counted (kDropOutput).
            st, p = self.s.json("GET", "/v1/sandboxes/%s/processes/%s" % (rec["id"], res["pid"]))
            self.assertEqual(st, 200, p)
            self.assertGreater(p["stdout_bytes"], 300000000, p)
        self.abuse("output flood", UNTIL_STOP + "yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA | "
                   "head -c 300000000; done", {}, check)


if __name__ == "__main__":
    unittest.main(verbosity=2)
