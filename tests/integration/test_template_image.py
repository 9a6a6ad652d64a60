"""Container images as templates (POST /v1/templates/import?name=, docs/templates.md): a `docker
save` tarball or an OCI image layout the test writes itself, layers applied with whiteouts and
opaque directories, owners and modes kept, the config's Env/WorkingDir/Cmd as the template's
defaults; hostile archives answer 400 and leave nothing behind."""
import gzip
import hashlib
import io
import json
import tarfile
import unittest

from harness import Server, is_root

BUSYBOX = "/bin/busybox"


def tar_bytes(entries, gz=False):
    """entries: (name, kind, data_or_target, mode, uid). kind: file, dir, symlink, link, chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, mode, uid in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.uid, info.gid = mode, uid, uid
            if kind == "file":
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "link": tarfile.LNKTYPE,
                         "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "link"):
                info.linkname = data
            t.addfile(info)
    raw = buf.getvalue()
    return gzip.compress(raw) if gz else raw


def base_layer():
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    e = [(d, "dir", None, 0o755, 0) for d in ("bin", "etc", "dev", "proc", "sys", "tmp", "run", "root", "home",
                                            "old", "opaque")]
    e += [("home/user", "dir", None, 0o750, 1000), ("home/user/notes", "file", b"mine\n", 0o600, 1000),
          ("bin/busybox", "file", bb, 0o755, 0),
          ("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n", 0o644, 0),
          ("etc/group", "file", b"root:x:0:\nuser:x:1000:\n", 0o644, 0),
          ("old/gone", "file", b"whited out\n", 0o644, 0), ("old/kept", "file", b"kept\n", 0o644, 0),
          ("opaque/below", "file", b"hidden by the opaque dir\n", 0o644, 0)]
    e += [("bin/" + a, "symlink", "busybox", 0o777, 0) for a in ("sh", "cat", "ls", "stat", "test", "sleep", "id")]
    return tar_bytes(e)


def top_layer():
    return tar_bytes([("old/.wh.gone", "file", b"", 0o644, 0), ("opaque/.wh..wh..opq", "file", b"", 0o644, 0),
                      ("opaque/new", "file", b"new\n", 0o644, 0), ("srv", "dir", None, 0o755, 0),
                      ("srv/app.txt", "file", b"from layer 2\n", 0o640, 0)], gz=True)


CONFIG = json.dumps({"config": {"Env": ["PATH=/bin", "IMAGE_VAR=from-config"], "WorkingDir": "/srv",
                                "Cmd": ["sh", "-c", "echo cmd-ran > /tmp/cmd"]}}).encode()


def docker_save(layers, config=CONFIG):
    files = [("config.json", config)]
    paths = []
    for i, layer in enumerate(layers):
        files.append(("l%d/layer.tar" % i, layer))
        paths.append("l%d/layer.tar" % i)
    files.append(("manifest.json", json.dumps([{"Config": "config.json", "Layers": paths}]).encode()))
    return tar_bytes([(n, "file", d, 0o644, 0) for n, d in files])


def oci_layout(layers, corrupt=False):
    def digest(b):
        return "sha256:" + hashlib.sha256(b).hexdigest()
    blobs = {digest(CONFIG): CONFIG}
    for layer in layers:
        blobs[digest(layer)] = layer + (b"x" if corrupt else b"")
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(CONFIG)},
                           "layers": [{"digest": digest(l)} for l in layers]}).encode()
    blobs[digest(manifest)] = manifest
    files = [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
             ("index.json", json.dumps({"schemaVersion": 2, "manifests": [{"digest": digest(manifest)}]}).encode())]
    files += [("blobs/sha256/" + d.split(":")[1], b) for d, b in blobs.items()]
    return tar_bytes([(n, "file", d, 0o644, 0) for n, d in files])


@unittest.skipUnless(is_root(), "needs root")
class TemplateImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(extra_args=["--no-egress"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def upload(self, name, archive):
        st, _, raw = self.s.call("POST", "/v1/templates/import?name=" + name, raw=archive,
                                 headers={"Content-Type": "application/x-tar"}, timeout=300)
        return st, json.loads(raw) if raw else None

    def check_sandbox(self, template):
        sid = self.s.create(template=template)
        try:
            def run(cmd):
                st, r = self.s.exec(sid, ["sh", "-c", cmd])
                return r
            self.assertEqual(run("cat /srv/app.txt")["stdout"], "from layer 2\n")
            self.assertNotEqual(run("test -e /old/gone")["exit_code"], 0)  # whiteout
            self.assertEqual(run("cat /old/kept")["stdout"], "kept\n")
            self.assertEqual(run("ls /opaque")["stdout"].split(), ["new"])  # opaque dir
            self.assertEqual(run("stat -c '%u %a' /home/user/notes")["stdout"], "1000 600\n")
            self.assertEqual(run("stat -c '%a' /srv/app.txt")["stdout"], "640\n")
            self.assertEqual(run("echo $IMAGE_VAR")["stdout"], "from-config\n")
            r = run("for i in 1 2 3 4 5 6 7 8 9 10; do test -e /tmp/cmd && break; sleep 0.3; done; cat /tmp/cmd")
            self.assertEqual(r["stdout"], "cmd-ran\n", r)
        finally:
            self.s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)

    def test_docker_save_and_oci_layout(self):
        layers = [base_layer(), top_layer()]
        st, d = self.upload("img-docker", docker_save(layers))
        self.assertEqual(st, 201, (d, self.s.log_tail()))
        self.check_sandbox("img-docker")
        st, d2 = self.upload("img-oci", oci_layout(layers))
        self.assertEqual(st, 201, (d2, self.s.log_tail()))
        self.assertEqual(d["digest"], d2["digest"])  # the same tree and config either way
        self.check_sandbox("img-oci")

    def test_hostile_archives_fail_cleanly(self):
        base = base_layer()
        cases = {
            "not-a-tar": b"\x00garbage" * 200,
            "not-an-image": tar_bytes([("hello", "file", b"x", 0o644, 0)]),
            "traversal": docker_save([tar_bytes([("../../etc/evil", "file", b"x", 0o644, 0)])]),
            "absolute": docker_save([tar_bytes([("/etc/evil", "file", b"x", 0o644, 0)])]),
            "below-symlink": docker_save([tar_bytes([("esc", "symlink", "/", 0o777, 0)]),
                                          tar_bytes([("esc/root/evil", "file", b"x", 0o644, 0)])]),
            "hardlink-out": docker_save([tar_bytes([("h", "link", "../../etc/shadow", 0o644, 0)])]),
            "device": docker_save([base, tar_bytes([("srv/null", "chr", None, 0o666, 0)])]),
            "bad-digest": oci_layout([base], corrupt=True),
            "missing-layer": tar_bytes([("config.json", "file", CONFIG, 0o644, 0),
                                        ("manifest.json", "file", b'[{"Config": "config.json", "Layers": ["x"]}]',
                                         0o644, 0)]),
            "truncated-gzip": docker_save([gzip.compress(base)[:5000]]),
            "bad-json": tar_bytes([("manifest.json", "file", b"{nope", 0o644, 0)]),
            "huge-owner": docker_save([tar_bytes([("f", "file", b"x", 0o644, 1 << 20)])]),
        }
        for name, archive in cases.items():
            st, d = self.upload("bad-" + name, archive)
            self.assertIn(st, (400, 500), (name, st, d))
            self.assertIn("code", d, name)
            st, _ = self.s.json("GET", "/v1/templates/bad-" + name)
            self.assertEqual(st, 404, name)
        st, d = self.upload("Bad%20Name", docker_save([base]))
        self.assertEqual(st, 400, d)


if __name__ == "__main__":
    unittest.main()
