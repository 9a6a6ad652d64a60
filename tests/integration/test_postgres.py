"""`space dev --store postgres://...`: the state lives in PostgreSQL (a throwaway cluster from
scripts/pg-test-cluster.sh), survives a restart of the server, and nothing is written to SQLite."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Server, is_root  # noqa: E402

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/pg-test-cluster.sh")


def start_cluster():
    out = subprocess.run([CLUSTER, "start"], check=True, capture_output=True, text=True, timeout=120).stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return env["SPACE_TEST_PG_DIR"], env["SPACE_TEST_PG_URL"]


@unittest.skipUnless(is_root(), "needs root")
class PostgresStoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # No skip when PostgreSQL is missing: the cluster script fails and so does the test.
        cls.pg_dir, cls.pg_url = start_cluster()
        cls.addClassCleanup(subprocess.run, [CLUSTER, "stop", cls.pg_dir], check=False)
        cls.s = Server(extra_args=["--store", cls.pg_url])
        cls.addClassCleanup(cls.s.cleanup)
        cls.s.start()

    def psql(self, sql, **variables):
        """One value from the test database; values go in as psql variables (:'name'), not text."""
        args = ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", self.pg_url]
        for k, v in variables.items():
            args += ["-v", "%s=%s" % (k, v)]
        r = subprocess.run(args, input=sql, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def test_sandbox_survives_restart(self):
        sid = self.s.create()
        st, d = self.s.exec(sid, ["sh", "-c", "echo kept > /root/f; echo hi"])
        self.assertEqual((st, d["stdout"]), (200, "hi\n"), d)
        self.assertEqual(self.psql("SELECT state FROM sandboxes WHERE id = :'id'", id=sid), "running")
        self.assertGreaterEqual(int(self.psql("SELECT max(version) FROM schema_migrations")), 4)
        self.assertFalse(os.path.exists(os.path.join(self.s.data_dir, "state.db")))

        self.s.stop()
        self.s.start()
        st, d = self.s.json("GET", "/v1/sandboxes/" + sid)
        self.assertEqual((st, d.get("state")), (200, "running"), d)
        st, d = self.s.exec(sid, ["cat", "/root/f"])
        self.assertEqual((st, d["stdout"]), (200, "kept\n"), d)
        st, lst = self.s.json("GET", "/v1/sandboxes")
        self.assertIn(sid, [x["id"] for x in lst["sandboxes"]])
        # The execs were recorded as commands in PostgreSQL.
        self.assertGreaterEqual(int(self.psql("SELECT count(*) FROM commands WHERE sandbox = :'id'", id=sid)), 2)
        st, _, body = self.s.call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertEqual(st, 204, body)
        self.assertEqual(self.psql("SELECT state FROM sandboxes WHERE id = :'id'", id=sid), "destroyed")


if __name__ == "__main__":
    unittest.main()
