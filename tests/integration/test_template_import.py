"""Template imports (POST /v1/templates {"name", "source"}) write the new tree in the build jail
(src/storage/template_builder.h ImportTree): the node reads the admin-named directory or
tarball and streams it to `tar -x`, which runs as root of a user namespace on a leased uid slot,
never with the node's capabilities (the node no longer holds CAP_CHOWN, CAP_MKNOD, CAP_FSETID
or CAP_SETFCAP). Owners, modes, setuid bits and file capabilities still come through."""
import io
import os
import shutil
import struct
import subprocess
import tarfile
import tempfile
import unittest

from harness import SPACE_BIN, Server, is_root

CAP_NET_RAW = 13


def v2_file_caps(permitted):
    # struct vfs_cap_data, revision 2, effective bit set.
    return struct.pack("<IIIII", 0x02000001, permitted, 0, 0, 0)


@unittest.skipUnless(is_root(), "needs root")
class TemplateImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(extra_args=["--no-egress"]).start()
        cls.tmp = tempfile.mkdtemp(prefix="space-import-", dir="/var/tmp")
        src = cls.src = os.path.join(cls.tmp, "src")
        for d in ("bin", "etc", "dev", "run", "home/user/private"):
            os.makedirs(os.path.join(src, d))
        shutil.copy("/bin/busybox", os.path.join(src, "bin/busybox"))
        for applet in ("sh", "stat", "cat", "ls"):
            os.symlink("busybox", os.path.join(src, "bin", applet))
        # A user's private file below a 0700 directory, all below the 0700 tmp dir of root's: the
        # node (no capability) reads none of it; the broker opens the source and the build jail
        # reads it through a read-only idmapped clone.
        private = os.path.join(src, "home/user/private")
        with open(os.path.join(private, "secret"), "w") as f:
            f.write("only mine\n")
        os.chmod(os.path.join(private, "secret"), 0o600)
        os.chmod(private, 0o700)
        for p in (private, os.path.join(private, "secret"), os.path.join(src, "home/user")):
            os.chown(p, 1000, 1000)
        setuid = os.path.join(src, "bin/setuid")
        shutil.copy("/bin/true", setuid)
        os.chown(setuid, 0, 50)
        os.chmod(setuid, 0o4750)
        capped = os.path.join(src, "bin/capped")
        shutil.copy("/bin/true", capped)
        os.setxattr(capped, "security.capability", v2_file_caps(1 << CAP_NET_RAW))
        os.mknod(os.path.join(src, "dev/null"), 0o666 | 0o020000, os.makedev(1, 3))
        os.mkfifo(os.path.join(src, "run/fifo"), 0o600)
        os.link(os.path.join(src, "bin/busybox"), os.path.join(src, "bin/busybox-link"))
        cls.tarball = os.path.join(cls.tmp, "src.tar.xz")
        subprocess.run(["tar", "--create", "--xz", "--xattrs", "--xattrs-include=security.capability",
                        "--file", cls.tarball, "--directory", src, "."], check=True)
        os.chmod(cls.tarball, 0o600)

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def template_dir(self, digest):
        return os.path.join(self.s.data_dir, "pool/templates", "sha256-" + digest.split(":", 1)[1])

    def imported(self, name, source):
        st, d = self.s.json("POST", "/v1/templates", {"name": name, "source": source}, timeout=300)
        self.assertEqual(st, 201, (d, self.s.log_tail()))
        return d

    def test_directory_and_tarball_import_alike(self):
        from_dir = self.imported("imp-dir", self.src)
        from_tar = self.imported("imp-tar", self.tarball)
        # The same tree, whichever way it came: owners, modes, links; dev/null left out of both.
        self.assertEqual(from_dir["digest"], from_tar["digest"])
        tree = self.template_dir(from_dir["digest"])
        self.assertFalse(os.path.lexists(os.path.join(tree, "dev/null")))
        self.assertTrue(os.path.isdir(os.path.join(tree, "dev")))
        caps = os.getxattr(os.path.join(tree, "bin/capped"), "security.capability")
        self.assertEqual(struct.unpack("<II", caps[:8])[1], 1 << CAP_NET_RAW, caps.hex())
        sid = self.s.create("imp-tar")
        st, d = self.s.exec(sid, ["/bin/stat", "-c", "%u:%g %a %F", "/home/user/private", "/home/user/private/secret",
                                  "/bin/setuid", "/run/fifo"])
        self.assertEqual(st, 200, d)
        self.assertEqual(d["stdout"].splitlines(), ["1000:1000 700 directory", "1000:1000 600 regular file",
                                                   "0:50 4750 regular file", "0:0 600 fifo"], d)
        st, d = self.s.exec(sid, ["/bin/stat", "-c", "%h %i", "/bin/busybox", "/bin/busybox-link"])
        links = d["stdout"].split()
        self.assertEqual((links[0], links[2], links[1] == links[3]), ("2", "2", True), d)

    def test_a_device_node_outside_dev_fails_the_import_and_leaves_nothing(self):
        bad = os.path.join(self.tmp, "bad")
        os.makedirs(os.path.join(bad, "etc"))
        os.mknod(os.path.join(bad, "etc/mem"), 0o600 | 0o020000, os.makedev(1, 1))
        st, d = self.s.json("POST", "/v1/templates", {"name": "imp-bad", "source": bad}, timeout=300)
        self.assertNotEqual(st, 201, d)
        self.assertIn("mknod", d.get("message", ""), d)
        st, d = self.s.json("GET", "/v1/templates/imp-bad")
        self.assertEqual(st, 404, d)

    def test_a_tarball_cannot_write_through_its_own_symlink(self):
        # "etc" a link to a host directory, then "etc/planted": GNU tar defers the link, and
        # were it followed, the jail's uid could not write a root-owned directory anyway.
        host = os.path.join(self.tmp, "host-dir")
        os.makedirs(host)
        path = os.path.join(self.tmp, "evil.tar")
        with tarfile.open(path, "w") as t:
            link = tarfile.TarInfo("etc")
            link.type, link.linkname = tarfile.SYMTYPE, host
            t.addfile(link)
            f = tarfile.TarInfo("etc/planted")
            f.size = 3
            t.addfile(f, io.BytesIO(b"pwn"))
        self.s.json("POST", "/v1/templates", {"name": "imp-evil", "source": path}, timeout=300)
        self.assertEqual(os.listdir(host), [])

    def test_an_owner_beyond_the_templates_ids_fails_the_import(self):
        # A template maps ids 0..65535, as a sandbox does; the jail's tar cannot chown beyond.
        path = os.path.join(self.tmp, "far.tar")
        with tarfile.open(path, "w") as t:
            f = tarfile.TarInfo("far")
            f.size, f.uid, f.gid = 2, 70000, 70000
            t.addfile(f, io.BytesIO(b"x\n"))
        st, d = self.s.json("POST", "/v1/templates", {"name": "imp-far", "source": path}, timeout=300)
        self.assertNotEqual(st, 201, d)
        self.assertIn("70000", d.get("message", ""), d)
        self.assertEqual(self.s.json("GET", "/v1/templates/imp-far")[0], 404)

    def test_only_the_admin_team_and_absolute_paths(self):
        st, d = self.s.json("POST", "/v1/templates", {"name": "imp-rel", "source": "relative/dir"})
        self.assertEqual((st, d["code"]), (400, "invalid_argument"), d)
        st, d = self.s.json("POST", "/v1/templates", {"name": "imp-none", "source": "/nonexistent/x"})
        self.assertGreaterEqual(st, 400, d)
        self.assertIn("message", d)


@unittest.skipUnless(is_root(), "needs root")
class ImportRootTest(unittest.TestCase):
    """`space dev --import-root DIR`: imports read only inside DIR, resolved as if it were the
    root (openat2 RESOLVE_IN_ROOT), so an admin key cannot copy the host's files into a
    template, whether by naming them or through a link planted below DIR."""

    def test_imports_stay_inside_the_import_root(self):
        tmp = tempfile.mkdtemp(prefix="space-import-root-", dir="/var/tmp")
        root = os.path.join(tmp, "imports")
        os.makedirs(os.path.join(root, "tree/etc"))
        shutil.copy("/bin/busybox", os.path.join(root, "tree/busybox"))
        with open(os.path.join(root, "tree/etc/motd"), "w") as f:
            f.write("inside\n")
        os.symlink("/etc", os.path.join(root, "hostetc"))
        os.symlink("../..", os.path.join(root, "up"))
        s = Server(extra_args=["--no-egress", "--import-root", root]).start()
        try:
            st, d = s.json("POST", "/v1/templates", {"name": "inside", "source": os.path.join(root, "tree")}, timeout=300)
            self.assertEqual(st, 201, (d, s.log_tail()))
            st, d = s.json("POST", "/v1/templates", {"name": "outside", "source": "/etc"})
            self.assertEqual((st, d["code"]), (403, "permission_denied"), d)
            self.assertIn("--import-root", d["message"])
            # Through links below the root: resolved inside it, where nothing of the host is.
            for name, source in (("hostetc", os.path.join(root, "hostetc")), ("up", os.path.join(root, "up/etc")),
                                 ("dotdot", os.path.join(root, "../../../etc"))):
                st, d = s.json("POST", "/v1/templates", {"name": "esc-" + name, "source": source})
                self.assertNotEqual(st, 201, (name, d))
                self.assertEqual(s.json("GET", "/v1/templates/esc-" + name)[0], 404, name)
        finally:
            s.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_imports_read_only_below_the_trusted_sources(self):
        # Two trusted sources: a tree below either imports; one below neither is refused, and
        # a link in one source to the other leads to nothing (each is a root of its own).
        tmp = tempfile.mkdtemp(prefix="space-trusted-", dir="/var/tmp")
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        for src in (a, b):
            os.makedirs(os.path.join(src, "tree/etc"))
            shutil.copy("/bin/busybox", os.path.join(src, "tree/busybox"))
        os.makedirs(os.path.join(tmp, "untrusted/tree"))
        os.symlink(os.path.join(b, "tree"), os.path.join(a, "to-b"))
        s = Server(extra_args=["--no-egress", "--trusted-template-source", a, "--trusted-template-source", b]).start()
        try:
            for name, src in (("from-a", a), ("from-b", b)):
                st, d = s.json("POST", "/v1/templates", {"name": name, "source": os.path.join(src, "tree")}, timeout=300)
                self.assertEqual(st, 201, (name, d, s.log_tail()))
            st, d = s.json("POST", "/v1/templates", {"name": "untrusted", "source": os.path.join(tmp, "untrusted/tree")})
            self.assertEqual((st, d["code"]), (403, "permission_denied"), d)
            self.assertIn("trusted template sources", d["message"])
            st, d = s.json("POST", "/v1/templates", {"name": "via-link", "source": os.path.join(a, "to-b")})
            self.assertNotEqual(st, 201, d)
            self.assertEqual(s.json("GET", "/v1/templates/via-link")[0], 404)
        finally:
            s.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)
        # Both flags at once, or a source holding ':', are refused at start.
        for flags in (["--import-root", "/tmp", "--trusted-template-source", "/tmp"],
                      ["--trusted-template-source", "/tmp:/etc"]):
            r = subprocess.run([SPACE_BIN, "dev", "--listen", "127.0.0.1:0", "--data-dir", "/nonexistent/never"] + flags,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, (flags, r.stderr))

    def test_a_bad_import_root_is_refused_before_anything_is_made(self):
        parent = tempfile.mkdtemp(prefix="space-flag-")
        data_dir = os.path.join(parent, "never")
        try:
            for bad in ("relative", "/nonexistent/imports", "/etc/hostname"):
                r = subprocess.run([SPACE_BIN, "dev", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                                    "--import-root", bad], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, (bad, r.stderr))
                self.assertIn("--import-root", r.stderr)
                self.assertFalse(os.path.exists(data_dir), bad)
        finally:
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
