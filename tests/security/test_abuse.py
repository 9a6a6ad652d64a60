"""Abuse (issue 9): a fork bomb, a memory bomb, a disk filler, an inode filler and an output
flood, each in its own abusive sandbox, while a neighbour sandbox keeps answering. For each:
the neighbour's exec latency under abuse stays within 2x of its idle latency (medians of many
samples, idle measured right before each abuse, so a shared 2-core machine's drift between
abuses does not count), the node keeps answering, and the abuser's own result says which limit
it hit.

Needs root and the Debian `base` template (cached in SPACE_TEST_DATA_DIR)."""
import os
import statistics
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import SPACE_BIN, Server, is_root  # noqa: E402

SAMPLES = 40
ABUSE_S = 25


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

    def latency(self, n=SAMPLES):
        return statistics.median(self.exec_ms(self.victim) for _ in range(n))

    def abuse(self, name, script, resources, check, timeout_s=ABUSE_S):
        """Runs `script` in a fresh sandbox with `resources` while sampling the victim; `check`
        asserts on the abuser's exec result."""
        for _ in range(5):
            self.exec_ms(self.victim)  # warm
        idle = self.latency()
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "base", **resources})
        self.assertEqual(st, 201, d)
        sid = d["sandbox"]["id"]
        out = {}

        def run():
            out["result"] = self.s.exec(sid, ["bash", "-c", script], timeout_s=timeout_s)

        try:
            t = threading.Thread(target=run)
            t.start()
            time.sleep(2)  # let the abuse reach its limit
            busy = []
            while t.is_alive() and len(busy) < SAMPLES:
                busy.append(self.exec_ms(self.victim))
            self.assertGreaterEqual(len(busy), 10, "the abuse ended before the neighbour was measured")
            under = statistics.median(busy)
            t.join(timeout_s + 60)
            self.assertFalse(t.is_alive(), "the abuser's exec never returned")
            st, res = out["result"]
            self.assertEqual(st, 200, res)
            st, rec = self.s.json("GET", "/v1/sandboxes/%s" % sid)
            self.assertEqual(st, 200, rec)
            self.assertEqual(st, 200)
            self.results.append("%-14s idle %.1f ms, under abuse %.1f ms (x%.2f, %d samples); abuser: exit %s signal %s "
                                "timed_out %s truncated %s state %s; %s" % (
                                    name, idle, under, under / idle, len(busy), res.get("exit_code"), res.get("signal"),
                                    res.get("timed_out"), res.get("truncated"), rec["state"],
                                    (res.get("stderr") or "").strip().splitlines()[-1:] if res.get("stderr") else ""))
            self.assertLessEqual(under, 2 * idle, self.results[-1])
            st, _, _ = self.s.call("GET", "/healthz", key=False)
            self.assertEqual(st, 200)
            check(res, rec)
        finally:
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_fork_bomb(self):
        def check(res, rec):
            # pids.max stops it: fork fails with EAGAIN, which bash reports.
            self.assertIn("Resource temporarily unavailable", res["stderr"], res["stderr"][-500:])
            self.assertEqual(rec["state"], "running")
        self.abuse("fork bomb", "bomb() { bomb | bomb & }; bomb; sleep %d" % (ABUSE_S - 5), {"cpus": 1}, check)

    def test_memory_bomb(self):
        def check(res, rec):
            # The cgroup's OOM killer ends it: SIGKILL and exit 137 from the shell.
            self.assertTrue(res["signal"] == "SIGKILL" or res["exit_code"] == 137, res)
            self.assertIn(rec["state"], ("running",), rec)
        # Re-offends for the whole window: each run is OOM-killed, then starts again.
        self.abuse("memory bomb", "end=$((SECONDS+%d)); while [ $SECONDS -lt $end ]; do "
                   "python3 -c 'a=[]\nwhile True: a.append(bytearray(8<<20))'; rc=$?; done; echo rc=$rc >&2; exit $rc"
                   % (ABUSE_S - 8), {"memory_mb": 256}, check)

    def test_disk_filler(self):
        def check(res, rec):
            self.assertRegex(res["stderr"], "No space left on device|Disk quota exceeded", res["stderr"][-500:])
        # Keeps writing against the full quota for the whole window.
        self.abuse("disk filler", "end=$((SECONDS+%d)); while [ $SECONDS -lt $end ]; do "
                   "dd if=/dev/zero of=/root/fill bs=1M 2>/dev/shm/dd.err >/dev/null; rm -f /root/fill2; "
                   "dd if=/dev/zero of=/root/fill2 bs=1M 2>>/dev/shm/dd.err >/dev/null; done; tail -2 /dev/shm/dd.err >&2"
                   % (ABUSE_S - 8), {"disk_mb": 256}, check)

    def test_inode_filler(self):
        def check(res, rec):
            self.assertTrue(res["timed_out"] or "No space left" in res["stderr"] or "quota" in res["stderr"], res)
        self.abuse("inode filler", "mkdir -p /root/i && cd /root/i && python3 -c '\nimport os\ni=0\n"
                   "while True:\n  open(str(i),\"w\").close(); i+=1' 2>&1 | tail -1 >&2",
                   {"disk_mb": 256}, check, timeout_s=20)

    def test_output_flood(self):
        def check(res, rec):
            self.assertTrue(res["truncated"], {k: v for k, v in res.items() if k not in ("stdout", "stderr")})
            self.assertLess(len(res["stdout"]), 64 << 20)
        self.abuse("output flood", "yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA | head -c 3000000000", {}, check,
                   timeout_s=20)


if __name__ == "__main__":
    unittest.main(verbosity=2)
