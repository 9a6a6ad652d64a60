"""A fleet on one machine (issue 7): PostgreSQL, two `space server` replicas and two `space node`
agents, each node in its own data dir and network namespace. A client spreads 200 creates and
execs across both servers while one server and then one node are killed with SIGKILL: every
acknowledged sandbox is accounted for, the dead server's operations complete, the dead node's
suspended sandboxes resume on the other node with their files, and nothing leaks once the
dead node has restarted and reconciled. A drain moves a node's sandboxes to the other node."""
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import is_root, mounts_under, space_cgroups  # noqa: E402

TOTAL = 200
CLIENTS = 8


@unittest.skipUnless(is_root(), "needs root (namespaces, cgroups, loop devices)")
class FleetTest(unittest.TestCase):
    def setUp(self):
        from fleet import Fleet
        self.f = Fleet(nodes=2, servers=2, lost_after_ms=3000)

    def tearDown(self):
        self.f.cleanup()

    def call_any(self, method, path, body=None, servers=None, attempts=60):
        """Tries the live servers in turn, retrying while no node can take the request (a node
        just died and is not yet declared lost)."""
        last = None
        for i in range(attempts):
            for url in servers or self.live_servers():
                try:
                    st, d = self.f.call(url, method, path, body)
                except OSError as e:  # the server died under us
                    last = e
                    continue
                if st == 503:
                    last = (st, d)
                    continue
                return st, d
            time.sleep(0.25)
        raise AssertionError("no server answered %s %s: %s" % (method, path, last))

    def live_servers(self):
        return [s.url for s in self.f.servers if s.proc.poll() is None]

    def node_of(self, sid):
        st, d = self.call_any("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 200, d)
        return d

    def wait_node_state(self, name, state, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, d = self.call_any("GET", "/v1/nodes")
            states = {n["name"]: n["state"] for n in d["nodes"]}
            if states.get(name) == state:
                return
            time.sleep(0.2)
        self.fail("node %s never became %s: %s" % (name, state, states))

    def test_spread_kill_server_and_node(self):
        f = self.f
        acked = {}  # sandbox id -> node it was created on
        failed_execs = {}  # sandbox id -> (status, body) of an exec that did not answer 200
        lock = threading.Lock()
        errors = []
        counter = iter(range(TOTAL))
        events = {"kill_server": threading.Event(), "kill_node": threading.Event()}

        def client(n):
            servers = [s.url for s in f.servers]
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                if i == TOTAL // 3:
                    events["kill_server"].set()
                if i == 2 * TOTAL // 3:
                    events["kill_node"].set()
                try:
                    # Alternate servers; a dead one is skipped by call_any.
                    order = servers[i % 2:] + servers[:i % 2]
                    st, d = self.call_any("POST", "/v1/sandboxes?wait=true", {"template": "busybox"},
                                          servers=[u for u in order if u in self.live_servers()])
                    if st != 201:
                        errors.append(("create", st, d))
                        continue
                    sid = d["sandbox"]["id"]
                    with lock:
                        acked[sid] = d["sandbox"]["node"]
                    st, d = self.call_any("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", str(i)]})
                    # A sandbox on the node about to die may fail its exec: noted, and below it
                    # must be one of that node's.
                    if st != 200:
                        with lock:
                            failed_execs[sid] = (st, d)
                    elif d["stdout"] != "%d\n" % i:
                        errors.append(("exec", sid, d))
                except Exception as e:  # noqa: BLE001 - collected and reported below
                    errors.append(("exception", repr(e)))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for t in threads:
            t.start()

        # A third of the way: operations started on server 0 just before it dies still finish.
        events["kill_server"].wait(600)
        pending_ops = []
        for _ in range(3):
            st, d = f.call(f.servers[0].url, "POST", "/v1/sandboxes", {"template": "busybox"})
            self.assertEqual(st, 202, d)
            pending_ops.append((d["sandbox"]["id"], d["operation"]["id"]))
        f.servers[0].kill9()

        # Two thirds: suspend two of node-b's sandboxes with a file each, then kill node-b.
        events["kill_node"].wait(600)
        with lock:
            on_b = [sid for sid, node in acked.items() if node == "node-b"][:2]
        self.assertEqual(len(on_b), 2, acked)
        for sid in on_b:
            st, d = self.call_any("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "echo %s > /root/kept" % sid]})
            self.assertEqual(st, 200, d)
            st, d = self.call_any("POST", "/v1/sandboxes/%s/suspend?wait=true" % sid, {})
            self.assertEqual(st, 200, d)
            self.assertEqual(d["state"], "suspended")
        f.nodes["node-b"].kill9()

        for t in threads:
            t.join(900)
        self.assertEqual(errors, [], f.logs())
        self.assertGreater(len(acked), TOTAL * 0.9, "too few creates acknowledged")
        self.assertEqual(set(acked.values()), {"node-a", "node-b"}, "the scheduler used one node only")

        # Only the killed node's sandboxes may have failed an exec.
        self.assertEqual({sid: e for sid, e in failed_execs.items() if acked.get(sid) != "node-b"}, {})

        # The dead server's operations completed (on the nodes that ran them).
        for sid, op in pending_ops:
            for _ in range(200):
                st, d = self.call_any("GET", "/v1/operations/" + op)
                if d["state"] in ("succeeded", "failed"):
                    break
                time.sleep(0.1)
            self.assertEqual(st, 200, d)
            rec = self.node_of(sid)
            if rec["node"] == "node-b":
                self.assertIn(rec["state"], ("failed", "running", "suspended"), rec)
            else:
                self.assertEqual(d["state"], "succeeded", d)
                self.assertEqual(rec["state"], "running", rec)

        # node-b is declared lost; its running sandboxes are failed, its suspended ones resume on node-a.
        self.wait_node_state("node-b", "lost")
        for sid, node in acked.items():
            rec = self.node_of(sid)
            if sid in on_b:
                self.assertEqual(rec["state"], "suspended", rec)
            elif node == "node-b":
                self.assertEqual(rec["state"], "failed", rec)
                self.assertIn("lost", rec.get("error", ""))
            else:
                self.assertEqual(rec["state"], "running", rec)
        for sid in on_b:
            st, d = self.call_any("POST", "/v1/sandboxes/%s/resume?wait=true" % sid, {})
            self.assertEqual(st, 200, (d, f.logs()))
            self.assertEqual((d["state"], d["node"]), ("running", "node-a"))
            st, d = self.call_any("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/root/kept"]})
            self.assertEqual((st, d["stdout"]), (200, sid + "\n"), d)

        # node-b comes back (same data dir): it reconciles away what it left and rejoins.
        node_b = f.nodes["node-b"]
        node_b.start()
        self.wait_node_state("node-b", "ready")
        self.assertEqual(space_cgroups(data_dir=node_b.data_dir), [])
        self.assertEqual(os.listdir(os.path.join(node_b.data_dir, "pool", "sandboxes")), [])

        # Destroy everything through the surviving server: nothing is left on either node.
        st, d = self.call_any("GET", "/v1/sandboxes?limit=1000")
        for s in d["sandboxes"]:
            if s["state"] != "destroyed":
                st, dd = self.call_any("DELETE", "/v1/sandboxes/%s?wait=true" % s["id"])
                self.assertIn(st, (200, 202, 204), dd)
        for node in f.nodes.values():
            self.assertEqual(space_cgroups(data_dir=node.data_dir), [], node.name)
            self.assertEqual(os.listdir(os.path.join(node.data_dir, "pool", "sandboxes")), [], node.name)
            self.assertEqual(mounts_under(node.data_dir), [os.path.join(node.data_dir, "pool")])

    def test_drain_moves_sandboxes_to_the_other_node(self):
        f = self.f
        s = f.servers[0].url
        sids = []
        for i in range(4):
            st, d = self.f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
            self.assertEqual(st, 201, d)
            sid = d["sandbox"]["id"]
            st, d = self.f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "echo %d > /root/n" % i]})
            self.assertEqual(st, 200, d)
            sids.append(sid)
        on_a = [sid for sid in sids if self.node_of(sid)["node"] == "node-a"]
        self.assertTrue(on_a, "the scheduler put nothing on node-a")

        # Through the CLI, as an operator would. Server 1 is killed as its controllers start on
        # the jobs: server 0 takes them over once their leases run out.
        from harness import SPACE_BIN
        env = dict(os.environ, SPACE_URL=f.servers[1].url, SPACE_API_KEY=f.key)
        out = subprocess.run([SPACE_BIN, "node", "drain", "node-a"], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        deadline = time.time() + 30
        while time.time() < deadline:
            st, d = f.call(f.servers[1].url, "GET", "/v1/jobs")
            if any(j["holder"] == "server-1" and j["state"] == "pending" for j in d["jobs"]):
                break
            time.sleep(0.05)
        f.servers[1].kill9()
        env["SPACE_URL"] = s
        deadline = time.time() + 180
        while time.time() < deadline:
            if all(self.node_of(sid)["node"] == "node-b" and self.node_of(sid)["state"] == "running" for sid in on_a):
                break
            time.sleep(0.5)
        for i, sid in enumerate(sids):
            rec = self.node_of(sid)
            self.assertEqual((rec["state"], rec["node"]), ("running", "node-b"), (rec, f.logs()))
            st, d = self.f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/root/n"]})
            self.assertEqual((st, d["stdout"]), (200, "%d\n" % i), d)
        # A sandbox can be running on node-b before its job says so: server 1 may have moved it
        # and died before recording that, and server 0 records it only once the lease is out.
        while True:
            st, d = self.f.call(s, "GET", "/v1/jobs")
            if {j["state"] for j in d["jobs"]} == {"succeeded"} or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual({j["state"] for j in d["jobs"]}, {"succeeded"}, d)
        self.assertEqual(len(d["jobs"]), len(on_a))
        # The job server 1 held when it died was finished by server 0.
        self.assertTrue(any(j["attempts"] >= 2 and j["holder"] == "server-0" for j in d["jobs"]), d)
        # A drained node takes no new sandboxes until it is ready again.
        st, d = self.f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual(d["sandbox"]["node"], "node-b")
        out = subprocess.run([SPACE_BIN, "node", "ready", "node-a"], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        out = subprocess.run([SPACE_BIN, "node", "ls"], env=env, capture_output=True, text=True)
        self.assertIn("node-a", out.stdout)
        self.assertEqual(space_cgroups(data_dir=f.nodes["node-a"].data_dir), [])

    @unittest.skipUnless(os.path.exists("/usr/bin/qemu-system-x86_64"), "needs qemu-system-x86_64")
    def test_vm_suspended_on_one_node_resumes_on_the_other_with_its_memory(self):
        # A vm sandbox's suspend exports its disk, RAM file and device state to the store; with
        # its node drained, the resume runs on the other node from the store alone, and the
        # process counting in guest memory (/dev/shm, tmpfs) goes on from where it was.
        # The nodes' namespaces have no route to the package mirror: the guest kernel is
        # fetched ahead, as an operator of such nodes would.
        from harness import SPACE_BIN
        out = subprocess.run([SPACE_BIN, "node", "prepare"], capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stderr)
        f = self.f
        s = f.servers[0].url
        st, d = f.call(s, "POST", "/v1/sandboxes?wait=true",
                       {"template": "busybox", "runtime": "vm", "memory_mb": 256}, timeout=300)
        self.assertEqual(st, 201, (d, f.logs()))
        sid, origin = d["sandbox"]["id"], d["sandbox"]["node"]
        other = "node-b" if origin == "node-a" else "node-a"
        script = "i=0; while true; do i=$((i+1)); echo $i > /dev/shm/n.tmp; mv /dev/shm/n.tmp /dev/shm/n; sleep 0.1; done"
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": ["sh", "-c", script]})
        self.assertIn(st, (200, 201), d)
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "echo kept > /root/f"]})
        self.assertEqual((st, d["exit_code"]), (200, 0), d)

        def count():
            st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/dev/shm/n"]})
            self.assertEqual((st, d["exit_code"]), (200, 0), d)
            return int(d["stdout"])

        deadline = time.time() + 30
        while count() < 5 and time.time() < deadline:
            time.sleep(0.3)
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/suspend?wait=true" % sid, {}, timeout=300)
        self.assertEqual((st, d["state"]), (200, "suspended"), d)
        from harness import SPACE_BIN
        env = dict(os.environ, SPACE_URL=s, SPACE_API_KEY=f.key)
        out = subprocess.run([SPACE_BIN, "node", "drain", origin], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.wait_node_state(origin, "draining")
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/resume?wait=true" % sid, {}, timeout=300)
        self.assertEqual((st, d["state"]), (200, "running"), (d, f.logs()))
        self.assertEqual(self.node_of(sid)["node"], other)
        resumed = count()
        self.assertGreaterEqual(resumed, 5)
        deadline = time.time() + 30
        while count() <= resumed and time.time() < deadline:
            time.sleep(0.3)
        self.assertGreater(count(), resumed)  # the counting process came back, not just its file
        sys.stderr.write("[vm %s -> %s, count %d after resume] " % (origin, other, resumed))
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/root/f"]})
        self.assertEqual((st, d["stdout"]), (200, "kept\n"), d)
        st, d = f.call(s, "DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertIn(st, (200, 204), d)

    def build_on_fleet(self, name, text):
        """Builds template `name` (busybox + one step writing /built.txt) on whichever node the
        server picks; returns (digest, node that built it)."""
        f = self.f
        recipe = {"name": name, "from": "busybox", "steps": [{"run": "echo %s > /built.txt" % text}]}
        st, d = f.call(f.servers[0].url, "POST", "/v1/templates?wait=true", recipe, timeout=600)
        self.assertEqual(st, 201, (d, f.logs()))
        said = "published template %s (%s)" % (name, d["template"]["digest"])
        builders = [n for n, p in f.nodes.items() if said in p.log_tail(10 ** 7)]
        return d["template"]["digest"], builders

    def create_on(self, node, template, body=None):
        """Creates from `template` (or with `body`) with every other node drained, so `node` takes it."""
        f = self.f
        from harness import SPACE_BIN
        env = dict(os.environ, SPACE_URL=f.servers[0].url, SPACE_API_KEY=f.key)
        for other in f.nodes:
            verb = "ready" if other == node else "drain"
            out = subprocess.run([SPACE_BIN, "node", verb, other], env=env, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.wait_node_state(other, "ready" if other == node else "draining")
        st, d = f.call(f.servers[0].url, "POST", "/v1/sandboxes?wait=true", body or {"template": template}, timeout=300)
        if st == 201:
            self.assertEqual(d["sandbox"]["node"], node)
        return st, d

    def wait_snapshot(self, snap_id, states, timeout=120, poll=0.05):
        deadline = time.time() + timeout
        d = None
        while time.time() < deadline:
            st, d = self.call_any("GET", "/v1/snapshots/" + snap_id)
            if st == 200 and d.get("state") in states:
                return d
            time.sleep(poll)
        self.fail("snapshot %s never reached %s: %s\n%s" % (snap_id, states, d, self.f.logs()))

    def assert_store_consistent(self):
        """Every manifest in the bucket parses and every object it names is there."""
        f = self.f
        # SigV4: the query sorted and percent-encoded, '/' included.
        st, body = f.s3.request("GET", "?list-type=2&prefix=" + urllib.parse.quote(f.store_prefix + "/manifests/", safe=""))
        self.assertEqual(st, 200, body)
        keys = re.findall(r"<Key>([^<]+)</Key>", body.decode())
        self.assertNotIn(b"<IsTruncated>true", body)
        chunks = set()
        for key in keys:
            m = json.loads(f.store_get(key[len(f.store_prefix) + 1:]))
            for e in m["entries"]:
                chunks.update(e.get("chunks", []))
        for h in chunks:
            st, _ = f.s3.request("HEAD", "%s/objects/%s/%s" % (f.store_prefix, h[:2], h))
            self.assertEqual(st, 200, "object %s named by a manifest is missing" % h)
        return len(keys), len(chunks)

    def test_volume_follows_its_sandbox_to_the_other_node(self):
        # The bucket is the nodes' only shared storage: the suspend syncs the volume there, the
        # resume on the other node pulls it, and the destroy there syncs it back for node-a.
        f = self.f
        s = f.servers[0].url
        st, d = f.call(s, "PUT", "/v1/volumes/travels", {"size_mb": 64})
        self.assertEqual(st, 201, d)
        st, d = self.create_on("node-a", None, {"template": "busybox", "volumes": [{"name": "travels", "path": "/data"}]})
        self.assertEqual(st, 201, (d, f.logs()))
        sid = d["sandbox"]["id"]
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid,
                       {"cmd": ["sh", "-c", "echo on-a > /data/f && echo root > /root/g && sync"]})
        self.assertEqual((st, d["exit_code"]), (200, 0), d)
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/suspend?wait=true" % sid, {}, timeout=300)
        self.assertEqual((st, d["state"]), (200, "suspended"), (d, f.logs()))
        st, v = f.call(s, "GET", "/v1/volumes/travels")
        self.assertEqual((v["synced"], v["node"]), (True, None), v)
        from harness import SPACE_BIN
        env = dict(os.environ, SPACE_URL=s, SPACE_API_KEY=f.key)
        for verb, node in (("drain", "node-a"), ("ready", "node-b")):
            out = subprocess.run([SPACE_BIN, "node", verb, node], env=env, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
        self.wait_node_state("node-a", "draining")
        self.wait_node_state("node-b", "ready")
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/resume?wait=true" % sid, {}, timeout=300)
        self.assertEqual(st, 200, (d, f.logs()))
        self.assertEqual((st, d["state"]), (200, "running"), (d, f.logs()))
        self.assertEqual(self.node_of(sid)["node"], "node-b")
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", "cat /data/f /root/g; echo on-b >> /data/f"]})
        self.assertEqual((st, d["stdout"]), (200, "on-a\nroot\n"), d)
        self.assertIn("pulled volume travels", f.nodes["node-b"].log_tail(10 ** 7))
        st, d = f.call(s, "DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertIn(st, (200, 204), d)
        st, d = self.create_on("node-a", None, {"template": "busybox", "volumes": [{"name": "travels", "path": "/v"}]})
        self.assertEqual(st, 201, (d, f.logs()))
        st, d = f.call(s, "POST", "/v1/sandboxes/%s/exec" % d["sandbox"]["id"], {"cmd": ["cat", "/v/f"]})
        self.assertEqual((st, d["stdout"]), (200, "on-a\non-b\n"), d)
        self.assert_store_consistent()

    def test_kill9_of_a_node_mid_export_leaves_the_store_consistent(self):
        # The bucket is the only shared storage. A node killed while it exports a snapshot
        # leaves no manifest for it; restarted, it exports again; GC then runs (it must wait
        # for no lease of the dead node's); every manifest names only objects that are there,
        # and the snapshot restores on the other node byte for byte.
        f = self.f
        st, d = self.create_on("node-a", "busybox")
        self.assertEqual(st, 201, (d, f.logs()))
        sid = d["sandbox"]["id"]

        def sh(cmd):
            st, r = self.call_any("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", cmd], "timeout_s": 120, "user": "root"})
            self.assertEqual((st, r.get("exit_code")), (200, 0), r)
            return r["stdout"].split()[0]

        sum1 = sh("head -c 40000000 /dev/urandom > /root/one && sha256sum /root/one")
        st, a = self.call_any("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "a"})
        self.assertIn(st, (200, 201), a)
        self.wait_snapshot(a["id"], ("restorable",))
        sum2 = sh("head -c 200000000 /dev/urandom > /root/two && sha256sum /root/two")
        st, b = self.call_any("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "b"})
        self.assertIn(st, (200, 201), b)
        seen = self.wait_snapshot(b["id"], ("exporting", "restorable"), poll=0.01)["state"]
        f.nodes["node-a"].kill9()
        self.assertEqual(seen, "exporting", "the export finished before the kill: nothing was interrupted")
        st, body = f.s3.request("HEAD", "%s/manifests/%s.json" % (f.store_prefix, b["id"]))
        self.assertEqual(st, 404, "the interrupted export wrote its manifest")
        self.assert_store_consistent()

        f.nodes["node-a"].start()
        self.wait_node_state("node-a", "ready")
        self.wait_snapshot(b["id"], ("restorable",))
        # Deleting a collects the garbage: under the exclusive lease, after the export.
        st, d = self.call_any("DELETE", "/v1/snapshots/" + a["id"])
        self.assertIn(st, (200, 204), (d, f.logs()))
        manifests, objects = self.assert_store_consistent()
        self.assertGreaterEqual(manifests, 1)
        self.assertGreater(objects, 50)

        st, d = self.create_on("node-b", None, {"from_snapshot": b["id"]})
        self.assertEqual(st, 201, (d, f.logs()))
        sid = d["sandbox"]["id"]
        self.assertEqual(sh("sha256sum /root/one"), sum1)
        self.assertEqual(sh("sha256sum /root/two"), sum2)

    def test_template_built_on_one_node_is_created_on_the_other(self):
        # A template built on one node is published to the shared store; the other node pulls
        # it on its first create, digests the tree itself, and pulls again once it is rebuilt.
        f = self.f
        s = f.servers[0].url
        digest1, builders = self.build_on_fleet("shared1", "v1")
        self.assertEqual(len(builders), 1, f.logs())
        builder = builders[0]
        other = "node-b" if builder == "node-a" else "node-a"
        self.assertNotIn("pulled template shared1", f.nodes[other].log_tail(10 ** 7))
        st, d = self.create_on(other, "shared1")
        self.assertEqual(st, 201, (d, f.logs()))
        self.assertEqual(d["sandbox"]["template_digest"], digest1)
        self.assertGreater(d["sandbox"]["timings"]["steps"]["pull_template"], 0, d)
        sys.stderr.write("[pull_template %.1f ms] " % d["sandbox"]["timings"]["steps"]["pull_template"])
        sid = d["sandbox"]["id"]
        st, r = f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["cat", "/built.txt"]})
        self.assertEqual((st, r["stdout"]), (200, "v1\n"), r)
        self.assertIn("pulled template shared1", f.nodes[other].log_tail(10 ** 7))
        st, d = f.call(s, "DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        self.assertIn(st, (200, 204), d)

        # Rebuilt on `other` (the builder is drained, so the server sends the build there): the
        # first builder's copy is stale, and its next create pulls the new tree.
        digest2, builders = self.build_on_fleet("shared1", "v2")
        self.assertNotEqual(digest1, digest2)
        self.assertIn(other, builders)
        st, d = self.create_on(builder, "shared1")
        self.assertEqual(st, 201, (d, f.logs()))
        self.assertEqual(d["sandbox"]["template_digest"], digest2)
        st, r = f.call(s, "POST", "/v1/sandboxes/%s/exec" % d["sandbox"]["id"], {"cmd": ["cat", "/built.txt"]})
        self.assertEqual((st, r["stdout"]), (200, "v2\n"), r)

        # The store is untrusted: a record that does not check out is refused with a reason,
        # and a template no node published is not found.
        f.store_put("templates/forged.json",
                    b'{"name": "forged", "team": "default", "digest": "sha256:%s", "manifest": "../x"}' % (b"0" * 64))
        st, d = f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "forged"})
        self.assertEqual(st, 500, d)
        self.assertIn("malformed", d["message"])
        # A record is MACed with the fleet token: shared1's record under another name is refused;
        # the same record with a MAC made with the token (the positive control) is taken.
        record = json.loads(f.store_get("templates/shared1.json"))
        record["name"] = "copied"
        f.store_put("templates/copied.json", json.dumps(record).encode())
        st, d = f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "copied"})
        self.assertEqual((st, d["code"]), (403, "permission_denied"), d)
        self.assertIn("MAC does not check out", d["message"])
        with open(f.token_file) as t:
            token = t.read().strip()
        msg = "\n".join(["space template record v1", "copied", record["team"], record["digest"], record["manifest"]])
        record["mac"] = hmac.new(token.encode(), msg.encode(), hashlib.sha256).hexdigest()
        f.store_put("templates/copied.json", json.dumps(record).encode())
        st, d = f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "copied"})
        self.assertEqual(st, 201, d)
        self.assertEqual(d["sandbox"]["template_digest"], digest2)
        st, d = f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "nobody-built-this"})
        self.assertEqual((st, d["code"]), (404, "not_found"), d)
        self.assertIn("no node published it", d["message"])

        # Removed on one node, the record goes: no node pulls it any more.
        st, d = f.call(s, "DELETE", "/v1/templates/shared1?force=true")
        self.assertIn(st, (200, 204), d)
        self.assertIsNone(f.store_get("templates/shared1.json"))
        # Its tree's manifest stays while another record (copied) names it, then goes with it.
        manifest = "manifests/snap_%s.json" % digest2[7:29]
        self.assertIsNotNone(f.store_get(manifest))
        st, d = f.call(s, "DELETE", "/v1/templates/copied?force=true")
        self.assertIn(st, (200, 204), d)
        self.assertIsNone(f.store_get(manifest))

    def test_node_declared_lost_while_alive_ends_its_failed_sandboxes(self):
        """A node that stalls (SIGSTOP) past lost-after is declared lost and its sandboxes are
        failed; when it runs again it ends them rather than keep running what the fleet gave up."""
        st, d = self.call_any("POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual(st, 201, d)
        sid, name = d["sandbox"]["id"], d["sandbox"]["node"]
        node = self.f.nodes[name]
        self.assertEqual(len(space_cgroups(sid, node.data_dir)) > 0, True)
        node.proc.send_signal(signal.SIGSTOP)
        try:
            self.wait_node_state(name, "lost")
            self.assertEqual(self.node_of(sid)["state"], "failed")
        finally:
            node.proc.send_signal(signal.SIGCONT)
        self.wait_node_state(name, "ready")
        deadline = time.time() + 30
        while time.time() < deadline and space_cgroups(sid, node.data_dir):
            time.sleep(0.2)
        self.assertEqual(space_cgroups(sid, node.data_dir), [], node.log_tail())
        self.assertNotIn(sid, os.listdir(os.path.join(node.data_dir, "pool", "sandboxes")))
        self.assertEqual(self.node_of(sid)["state"], "failed")

    def test_preview_port_console_and_terminal_through_a_server(self):
        # A preview host sent to a server reaches the sandbox's server on whichever node holds
        # it (controlplane/preview_relay.cc); the node checks the port's token. The server also
        # serves the console, and relays its terminal's WebSocket to the sandbox's node.
        import http.client
        import urllib.parse
        s = self.f.servers[0].url
        st, d = self.f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        self.assertEqual(st, 201, d)
        sid = d["sandbox"]["id"]
        st, d = self.f.call(s, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c",
                            "mkdir -p /www && echo fleet-preview > /www/index.html && httpd -p 127.0.0.1:8080 -h /www"]})
        self.assertEqual((st, d.get("exit_code")), (200, 0), d)
        st, port = self.f.call(s, "POST", "/v1/sandboxes/%s/ports" % sid, {"port": 8080})
        self.assertEqual(st, 201, port)
        server = urllib.parse.urlsplit(s)
        # The node names its own listen port in URLs (space node --preview-port changes that);
        # a client of the fleet uses the server's.
        host = urllib.parse.urlsplit(port["url"]).hostname + ":%d" % server.port

        def get(headers):
            c = http.client.HTTPConnection(server.hostname, server.port, timeout=60)
            c.request("GET", "/index.html", headers={"Host": host, **headers})
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, body
        self.assertEqual(get({})[0], 401)  # no key was checked by the server: the node wants the token
        st, body = get({"X-Space-Port-Token": port["token"]})
        self.assertEqual((st, body), (200, b"fleet-preview\n"))

        c = http.client.HTTPConnection(server.hostname, server.port, timeout=60)
        c.request("GET", "/console")
        r = c.getresponse()
        page = r.read()
        c.close()
        self.assertEqual(r.status, 200)
        self.assertIn("script-src 'self'", r.getheader("Content-Security-Policy"))
        self.assertIn(b"/console/app.js", page)
        from wsclient import WsClient, b64url
        ws = WsClient(s, "/v1/sandboxes/%s/terminal" % sid,
                      protocols=["space.terminal.v1", "space.bearer." + b64url(self.f.key)],
                      headers={"Origin": s})
        op, payload = ws.recv()
        self.assertEqual((op, json.loads(payload)["type"]), (0x1, "started"))
        ws.send_bytes(b"echo fleet-$((6*7))\r")
        ws.read_until("fleet-42")
        ws.send_text({"type": "end"})
        ws.close()
        self.f.call(s, "DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_server_refuses_unknown_keys_and_other_teams_and_revoked_keys(self):
        # Started as root, a server serves as nobody, with no capabilities.
        with open("/proc/%d/status" % self.f.servers[1].proc.pid) as f:
            status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        self.assertNotEqual(status["Uid"].split()[0], "0")
        self.assertEqual(int(status["CapEff"].strip(), 16), 0)
        s = self.f.servers[1].url
        self.f.key, key = "space_wrong", self.f.key
        st, d = self.f.call(s, "GET", "/v1/sandboxes")
        self.assertEqual((st, d["code"]), (401, "unauthenticated"))
        self.f.key = key
        st, d = self.f.call(s, "GET", "/v1/sandboxes/sbx_doesnotexist")
        self.assertEqual((st, d["code"]), (404, "not_found"))
        st, d = self.f.call(s, "GET", "/v1/operations/op_nope")
        self.assertEqual(st, 404)

        # A key made on one server works through every server and node; revoked on one, its
        # next call is refused on every server (each checks the shared store on every call).
        s0 = self.f.servers[0].url
        self.assertEqual(self.f.call(s0, "POST", "/v1/teams", {"name": "fleet-b"})[0], 201)
        st, k = self.f.call(s0, "POST", "/v1/keys", {"team": "fleet-b", "name": "ci"})
        self.assertEqual(st, 201, k)
        self.f.key = k["key"]
        try:
            st, d = self.f.call(s, "POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
            self.assertEqual((st, d["sandbox"]["team"]), (201, "fleet-b"), d)
            sid = d["sandbox"]["id"]
            st, d = self.f.call(s0, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "b"]})
            self.assertEqual((st, d.get("stdout")), (200, "b\n"), d)
            self.assertEqual(self.f.call(s0, "DELETE", "/v1/sandboxes/%s?wait=true" % sid)[0], 204)
        finally:
            self.f.key = key
        self.assertEqual(self.f.call(s, "DELETE", "/v1/keys/" + k["id"])[0], 204)
        self.f.key = k["key"]
        try:
            for url in (s0, s):
                st, d = self.f.call(url, "GET", "/v1/sandboxes")
                self.assertEqual((st, d["code"]), (401, "unauthenticated"), url)
                self.assertIn("revoked", d["message"])
        finally:
            self.f.key = key


if __name__ == "__main__":
    unittest.main()
