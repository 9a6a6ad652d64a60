"""Templates built from a recipe (POST /v1/templates with from/steps, docs/templates.md): each
step runs in a sandbox of the previous layer, each layer is cached by (parent digest, step), and
a create may pin `name@sha256:...`. Drives the real `space dev` over HTTP and the CLI."""
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import unittest
import uuid

from harness import SPACE_BIN, Server, is_root, sse_events


def context_tar(files):
    """An uncompressed tarball of {path: text}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def multipart(recipe, context):
    boundary = "b-" + uuid.uuid4().hex
    parts = [b"--" + boundary.encode() + b'\r\nContent-Disposition: form-data; name="recipe"\r\n\r\n' +
             json.dumps(recipe).encode() + b"\r\n"]
    if context is not None:
        parts.append(b"--" + boundary.encode() +
                     b'\r\nContent-Disposition: form-data; name="context"; filename="c.tar"\r\n\r\n' +
                     context + b"\r\n")
    body = b"".join(parts) + b"--" + boundary.encode() + b"--\r\n"
    return body, "multipart/form-data; boundary=" + boundary


RECIPE_STEPS = [
    {"run": "echo built-by-run > /ran.txt"},
    {"env": {"GREETING": "hello-env"}},
    {"copy": {"src": "app/", "dest": "/app"}},
    {"workdir": "/app"},
]


@unittest.skipUnless(is_root(), "needs root")
class TemplateBuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(extra_args=["--no-egress"]).start()
        cls.context = context_tar({"app/main.txt": "from-the-context\n", "other.txt": "not copied\n"})

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def build(self, recipe, context=None, wait=True, query=""):
        body, ctype = multipart(recipe, context)
        path = "/v1/templates" + ("?wait=true" if wait else "") + query
        st, _, raw = self.s.call("POST", path, raw=body, headers={"Content-Type": ctype}, timeout=600)
        return st, json.loads(raw) if raw else None

    def logs(self, name, op, sse=True):
        st, _, raw = self.s.call("GET", "/v1/templates/%s/builds/%s/logs" % (name, op),
                                 accept="text/event-stream" if sse else None, timeout=600)
        self.assertEqual(st, 200, raw)
        return sse_events(raw) if sse else raw.decode()

    def recipe(self, name, start):
        return {"name": name, "from": "busybox", "steps": RECIPE_STEPS,
                "start": start}

    def test_build_create_rebuild_pin_and_remove(self):
        start1 = "echo started-1 > /tmp/started; sleep 1000"
        st, d = self.build(self.recipe("app1", start1), self.context)
        self.assertEqual(st, 201, (d, self.s.log_tail()))
        first = d["template"]["digest"]
        self.assertTrue(first.startswith("sha256:"))
        events = self.logs("app1", d["operation"]["id"])
        states = [(e["step"], e["state"]) for n, e in events if n == "step" and e.get("state") != "layer"]
        self.assertIn((1, "running"), states, events)
        self.assertEqual(events[-1][0], "done", events)

        # A sandbox of it sees the run, the env, the copy and the start command.
        sid = self.s.create(template="app1")
        st, sbx = self.s.json("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(sbx["template"], "app1")
        self.assertEqual(sbx["template_digest"], first)
        st, r = self.s.exec(sid, ["cat", "/ran.txt"])
        self.assertEqual(r["stdout"], "built-by-run\n", r)
        st, r = self.s.exec(sid, ["sh", "-c", "echo $GREETING"])
        self.assertEqual(r["stdout"], "hello-env\n", r)
        st, r = self.s.exec(sid, ["cat", "/app/main.txt"])
        self.assertEqual(r["stdout"], "from-the-context\n", r)
        st, r = self.s.exec(sid, ["ls", "/app"])
        self.assertEqual(r["stdout"].split(), ["main.txt"], r)  # only app/ was copied
        deadline = time.time() + 10
        while time.time() < deadline:
            st, r = self.s.exec(sid, ["cat", "/tmp/started"])
            if r["exit_code"] == 0:
                break
            time.sleep(0.2)
        self.assertEqual(r["stdout"], "started-1\n", r)

        # A rebuild that changes only the last part (start) runs nothing else: all four steps
        # come from the cache, and the log says so.
        st, d2 = self.build(self.recipe("app1", "echo started-2 > /tmp/started; sleep 1000"), self.context)
        self.assertEqual(st, 201, (d2, self.s.log_tail()))
        second = d2["template"]["digest"]
        self.assertNotEqual(first, second)
        events = self.logs("app1", d2["operation"]["id"])
        cached = sorted(e["step"] for n, e in events if n == "step" and e.get("state") == "cached")
        ran = sorted(e["step"] for n, e in events if n == "step" and e.get("state") == "running")
        self.assertEqual(cached, [1, 2, 3, 4], events)
        self.assertEqual(ran, [5], events)
        text = self.logs("app1", d2["operation"]["id"], sse=False)
        self.assertIn("cached", text)

        # Changing step 4 reruns only step 4 (and the start layer after it).
        steps = RECIPE_STEPS[:3] + [{"workdir": "/srv"}]
        st, d3 = self.build({"name": "app1b", "from": "busybox", "steps": steps}, self.context)
        self.assertEqual(st, 201, (d3, self.s.log_tail()))
        events = self.logs("app1b", d3["operation"]["id"])
        cached = sorted(e["step"] for n, e in events if n == "step" and e.get("state") == "cached")
        ran = sorted(e["step"] for n, e in events if n == "step" and e.get("state") == "running")
        self.assertEqual(cached, [1, 2, 3], events)
        self.assertEqual(ran, [4], events)

        # no_cache runs every step again.
        st, d4 = self.build({"name": "app1c", "from": "busybox", "steps": RECIPE_STEPS[:2], "no_cache": True},
                            self.context)
        self.assertEqual(st, 201, d4)
        events = self.logs("app1c", d4["operation"]["id"])
        self.assertFalse([e for n, e in events if n == "step" and e.get("state") == "cached"], events)

        # Pinning: the earlier digest still creates; an unknown one is not_found.
        pinned = self.s.create(template="app1@" + first)
        st, sbx = self.s.json("GET", "/v1/sandboxes/" + pinned)
        self.assertEqual(sbx["template_digest"], first)
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "app1@sha256:" + "0" * 64})
        self.assertEqual(st, 404, d)
        self.assertEqual(d["code"], "not_found")
        st, d = self.s.json("POST", "/v1/sandboxes?wait=true", {"template": "app1@sha256:xyz"})
        self.assertEqual(st, 400, d)

        # Remove: refused while sandboxes use it, then forced.
        st, d = self.s.json("DELETE", "/v1/templates/app1")
        self.assertEqual(st, 409, d)
        self.assertEqual(d["code"], "conflict")
        st, _ = self.s.json("DELETE", "/v1/templates/app1?force=true")
        self.assertEqual(st, 204)
        st, d = self.s.json("GET", "/v1/templates/app1")
        self.assertEqual(st, 404, d)
        st, d = self.s.json("DELETE", "/v1/templates/busybox")
        self.assertEqual(st, 409, d)
        # The sandbox made from it lives on (its root is its own copy).
        st, r = self.s.exec(sid, ["cat", "/ran.txt"])
        self.assertEqual(r["stdout"], "built-by-run\n", r)
        for x in (sid, pinned):
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % x)

    def test_failed_step_fails_with_index_and_exit_code(self):
        recipe = {"name": "broken", "from": "busybox", "steps": [{"run": "true"}, {"run": "echo oops >&2; exit 7"}]}
        st, d = self.build(recipe, wait=False)
        self.assertEqual(st, 202, d)
        self.assertEqual(d["template"]["name"], "broken")
        op = d["operation"]["id"]
        events = self.logs("broken", op)
        self.assertEqual(events[-1][0], "error", events)
        self.assertIn("step 2", events[-1][1]["message"])
        self.assertIn("code 7", events[-1][1]["message"])
        failed = [e for n, e in events if n == "step" and e.get("state") == "failed"]
        self.assertEqual(failed[0]["exit_code"], 7, events)
        self.assertIn("oops", "".join(e["data"] for n, e in events if n == "log"))
        st, o = self.s.json("GET", "/v1/operations/%s?wait=true" % op)
        self.assertEqual(o["state"], "failed", o)
        self.assertIn("step 2", o["error"])
        st, d = self.s.json("GET", "/v1/templates/broken")
        self.assertEqual(st, 404, d)

    def test_steps_never_run_as_host_root(self):
        # The step's root is root of the sandbox's user namespace only: its uid map sends 0 to
        # an unprivileged host uid.
        recipe = {"name": "whoami", "from": "busybox",
                  "steps": [{"run": "cat /proc/self/uid_map > /uidmap; id -u > /uid"}]}
        st, d = self.build(recipe)
        self.assertEqual(st, 201, d)
        sid = self.s.create(template="whoami")
        st, r = self.s.exec(sid, ["cat", "/uidmap"])
        inside, outside, _count = r["stdout"].split()[:3]
        self.assertEqual(inside, "0")
        self.assertNotEqual(outside, "0", r)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_ready_command_gates_the_create(self):
        recipe = {"name": "readyt", "from": "busybox", "steps": [],
                  "start": "sleep 1; touch /tmp/up; sleep 1000", "ready": "test -e /tmp/up"}
        st, d = self.build(recipe)
        self.assertEqual(st, 201, d)
        sid = self.s.create(template="readyt")
        st, r = self.s.exec(sid, ["test", "-e", "/tmp/up"])
        self.assertEqual(r["exit_code"], 0, r)
        st, sbx = self.s.json("GET", "/v1/sandboxes/" + sid)
        self.assertIn("template.ready", sbx["timings"]["steps"], sbx)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_hostile_requests_answer_errors(self):
        cases = [
            ({"name": "h1", "from": "busybox", "steps": [{"copy": {"src": "../etc", "dest": "/x"}}]}, b"x" * 512),
            ({"name": "h2", "from": "busybox", "steps": [{"copy": {"src": "app", "dest": "rel"}}]}, self.context),
            ({"name": "h3", "from": "busybox", "steps": [{"copy": {"src": "app", "dest": "/x"}}]}, None),
            ({"name": "h4", "from": "busybox", "steps": [{"copy": {"src": "nothere", "dest": "/x"}}]}, self.context),
            ({"name": "h5", "from": "busybox", "steps": [{"run": "true"}]}, b"not a tarball" * 100),
            ({"name": "h6", "from": "busybox", "steps": [{"teleport": "x"}]}, None),
            ({"name": "h7", "from": "nosuch"}, None),
            ({"name": "base", "from": "busybox"}, None),
            ({"name": "h8", "from": "busybox", "steps": [{"run": "x" * 70000}]}, None),
        ]
        for recipe, ctx in cases:
            st, d = self.build(recipe, ctx)
            self.assertIn(st, (400, 404, 409), (recipe["name"], st, d))
            self.assertIn("code", d)
            self.assertIn("message", d)
        # A context with a device node or an absolute member is refused before anything runs.
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("dev/evil")
            info.type = tarfile.CHRTYPE
            info.devmajor, info.devminor = 1, 3
            tar.addfile(info)
        st, d = self.build({"name": "h9", "from": "busybox", "steps": [{"copy": {"src": ".", "dest": "/x"}}]},
                           buf.getvalue())
        self.assertEqual(st, 400, d)
        st, d = self.s.json("GET", "/v1/templates/nosuch/builds/op_abc/logs")
        self.assertEqual(st, 404, d)

    def test_cli_builds_a_dockerfile(self):
        tmp = tempfile.mkdtemp(prefix="space-df-", dir="/var/tmp")
        try:
            os.makedirs(os.path.join(tmp, "src"))
            with open(os.path.join(tmp, "src", "hello.txt"), "w") as f:
                f.write("hi from docker\n")
            with open(os.path.join(tmp, "Dockerfile"), "w") as f:
                f.write("FROM busybox\nARG WHO=world\nENV WHO=$WHO\nCOPY src/ /srv/\n"
                        "RUN echo hello-$WHO > /srv/greeting\nWORKDIR /srv\nCMD [\"sleep\", \"1000\"]\n")
            r = subprocess.run([SPACE_BIN, "template", "build", "dock", "-f", os.path.join(tmp, "Dockerfile"),
                                tmp, "--build-arg", "WHO=space"],
                               env=self.s.env(), capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr + self.s.log_tail())
            self.assertTrue(r.stdout.startswith("dock sha256:"), r.stdout)
            self.assertIn("[1/", r.stderr)
            sid = self.s.create(template="dock")
            st, out = self.s.exec(sid, ["sh", "-c", "cat /srv/hello.txt /srv/greeting; echo $WHO"])
            self.assertEqual(out["stdout"], "hi from docker\nhello-space\nspace\n", out)
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
            # Refused with its line number.
            with open(os.path.join(tmp, "Dockerfile.bad"), "w") as f:
                f.write("FROM busybox\nEXPOSE 80\n")
            r = subprocess.run([SPACE_BIN, "template", "build", "bad", "-f", os.path.join(tmp, "Dockerfile.bad")],
                               env=self.s.env(), capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("line 2", r.stderr)
            r = subprocess.run([SPACE_BIN, "template", "rm", "dock"], env=self.s.env(), capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_zz_layer_gc_frees_unnamed_layers(self):
        # Named last (zz): it frees every cached layer of the server the other tests share.
        recipe = {"name": "gc1", "from": "busybox",
                  "steps": [{"run": "echo one > /one.txt"}, {"run": "echo two > /two.txt"}]}
        st, d = self.build(recipe)
        self.assertEqual(st, 201, (d, self.s.log_tail()))

        def states(d):
            events = self.logs("gc1", d["operation"]["id"])
            return sorted((e["step"], e["state"]) for n, e in events
                          if n == "step" and e.get("state") in ("cached", "running"))

        st, d = self.build(recipe)
        self.assertEqual(states(d), [(1, "cached"), (2, "cached")])
        st, d = self.s.json("POST", "/v1/templates/gc", {})
        self.assertEqual(st, 200, d)
        self.assertGreaterEqual(d["layers_removed"], 1, d)  # at least step 1's layer: no name holds it
        # The named template is kept: a sandbox of it has both files.
        sid = self.s.create(template="gc1")
        st, r = self.s.exec(sid, ["cat", "/one.txt", "/two.txt"])
        self.assertEqual(r["stdout"], "one\ntwo\n", r)
        self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        # Step 1's layer went, so a rebuild runs it again (step 2's layer is gc1's own tree: if
        # step 1 makes the same tree again, step 2 is still cached).
        st, d = self.build(recipe)
        self.assertEqual(st, 201, d)
        self.assertIn((1, "running"), states(d))
        r = subprocess.run([SPACE_BIN, "template", "gc"], env=self.s.env(), capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("layers removed", r.stdout)


if __name__ == "__main__":
    unittest.main()
