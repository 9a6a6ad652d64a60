"""A fleet on one machine for the multi-node tests: a throwaway PostgreSQL cluster, a throwaway
S3 server (Ceph RGW) holding the snapshot store, `space node` agents each in its own data dir
and network namespace (reached over a veth pair), and `space server` replicas on loopback. The
nodes share nothing but the database and the bucket. Standard library only."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from harness import SPACE_BIN

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
# Link-local /30s for the node namespaces: nothing on the host routes there.
NET_BASE = "169.254.231."


def run(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


class Pg:
    def __init__(self):
        out = run(os.path.join(REPO, "scripts/pg-test-cluster.sh"), "start").stdout
        self.dir = re.search(r"SPACE_TEST_PG_DIR=(\S+)", out).group(1)
        self.url = re.search(r"SPACE_TEST_PG_URL=(\S+)", out).group(1)

    def stop(self):
        run(os.path.join(REPO, "scripts/pg-test-cluster.sh"), "stop", self.dir, check=False)


class S3:
    """scripts/s3-test-cluster.sh, listening also on `addrs` (the nodes' way to the host)."""

    def __init__(self, addrs):
        env = dict(os.environ, S3_TEST_LISTEN=" ".join(addrs))
        out = subprocess.run([os.path.join(REPO, "scripts/s3-test-cluster.sh"), "start"], check=True,
                             capture_output=True, text=True, env=env).stdout
        vals = dict(re.findall(r"^(SPACE_TEST_S3_\w+)=(\S+)$", out, re.M))
        self.dir = vals["SPACE_TEST_S3_DIR"]
        self.port = int(re.search(r"endpoint=http://127\.0\.0\.1:(\d+)", vals["SPACE_TEST_S3_URL"]).group(1))
        self.access_key, self.secret_key = vals["SPACE_TEST_S3_ACCESS_KEY"], vals["SPACE_TEST_S3_SECRET_KEY"]

    def url(self, addr, prefix):
        return "s3://space-test/%s?endpoint=http://%s:%d&region=us-east-1" % (prefix, addr, self.port)

    def request(self, method, key, data=None):
        """(status, body bytes) of one signed request on `key` in the bucket (curl signs SigV4)."""
        cmd = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3",
               "--user", "%s:%s" % (self.access_key, self.secret_key), "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
               "http://127.0.0.1:%d/space-test/%s" % (self.port, key)]
        if method == "HEAD":
            cmd[cmd.index("-X"):cmd.index("-X") + 2] = ["-I"]
        if data is not None:
            cmd += ["--data-binary", "@-"]
        out = subprocess.run(cmd, input=data, capture_output=True, check=True).stdout
        body, _, code = out.rpartition(b"\n")
        return int(code), body

    def stop(self):
        run(os.path.join(REPO, "scripts/s3-test-cluster.sh"), "stop", self.dir, check=False)


class Proc:
    """One `space server` or `space node` process; its log goes to <dir>/log."""

    def __init__(self, args, log_path, netns=None, env=None):
        self.args, self.log_path, self.netns, self.env = args, log_path, netns, env
        self.proc, self.url = None, None

    def start(self, timeout=90):
        cmd = [SPACE_BIN] + self.args
        if self.netns:
            cmd = ["nsenter", "--net=/run/netns/" + self.netns, "--"] + cmd
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("%s exited: %s" % (self.args[0], self.log_tail()))
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                return self
        raise RuntimeError("%s did not start: %s" % (self.args[0], self.log_tail()))

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and not self.proc.stdout.closed:
            self.proc.stdout.close()


class Fleet:
    def __init__(self, nodes=2, servers=2, lost_after_ms=3000):
        self.root = tempfile.mkdtemp(prefix="space-fleet-", dir="/var/tmp")
        # The nodes run as their own uid: they must be able to reach their data dirs below.
        os.chmod(self.root, 0o711)
        self.pg = Pg()
        self.token_file = os.path.join(self.root, "fleet-token")
        with open(self.token_file, "w") as f:
            f.write(os.urandom(24).hex())
        os.chmod(self.token_file, 0o600)
        self.lost_after_ms = lost_after_ms
        self.nodes, self.servers, self.netns = {}, [], []
        self.s3 = None
        try:
            for i in range(nodes):
                self.add_netns("node-%c" % (ord("a") + i), i)
            self.s3 = S3([self.host_ip(i) for i in range(nodes)])
            self.store_prefix = "fleet-%d" % os.getpid()
            for i in range(nodes):
                self.add_node("node-%c" % (ord("a") + i), i)
            for i in range(servers):
                self.add_server(i)
        except Exception:
            self.cleanup()
            raise
        with open(os.path.join(self.nodes["node-a"].data_dir, "api-key")) as f:
            self.key = f.read().strip()

    def store_get(self, key):
        """The bytes under `key` in the fleet's snapshot store (None when absent)."""
        st, body = self.s3.request("GET", self.store_prefix + "/" + key)
        return body if st == 200 else None

    def store_put(self, key, data):
        st, body = self.s3.request("PUT", self.store_prefix + "/" + key, data)
        if st != 200:
            raise RuntimeError("put %s: %d %r" % (key, st, body))

    @staticmethod
    def host_ip(index):
        return NET_BASE + str(index * 4 + 1)

    @staticmethod
    def netns_name(name):
        return "spfleet-%d-%s" % (os.getpid() % 10000, name[-1])

    def add_netns(self, name, index):
        ns = self.netns_name(name)
        host_if, node_if = "spf%d%sh" % (os.getpid() % 10000, name[-1]), "spf%d%sn" % (os.getpid() % 10000, name[-1])
        host_ip, node_ip = self.host_ip(index), NET_BASE + str(index * 4 + 2)
        run("ip", "netns", "add", ns)
        self.netns.append((ns, host_if))
        run("ip", "link", "add", host_if, "type", "veth", "peer", "name", node_if)
        run("ip", "link", "set", node_if, "netns", ns)
        run("ip", "addr", "add", host_ip + "/30", "dev", host_if)
        run("ip", "link", "set", host_if, "up")
        run("ip", "-n", ns, "addr", "add", node_ip + "/30", "dev", node_if)
        run("ip", "-n", ns, "link", "set", node_if, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")

    def add_node(self, name, index):
        ns, node_ip = self.netns_name(name), NET_BASE + str(index * 4 + 2)
        data_dir = os.path.join(self.root, name)
        os.makedirs(data_dir)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.s3.access_key, AWS_SECRET_ACCESS_KEY=self.s3.secret_key)
        p = Proc(["node", "--name", name, "--listen", node_ip + ":7780", "--data-dir", data_dir,
                  "--store", self.pg.url, "--fleet-token-file", self.token_file,
                  "--object-store", self.s3.url(self.host_ip(index), self.store_prefix), "--no-egress"],
                 os.path.join(data_dir, "node.log"), netns=ns, env=env)
        p.data_dir, p.name, p.netns_name = data_dir, name, ns
        self.nodes[name] = p.start()

    def add_server(self, index):
        p = Proc(["server", "--listen", "127.0.0.1:0", "--store", self.pg.url, "--fleet-token-file",
                  self.token_file, "--replica", "server-%d" % index, "--lost-after-ms", str(self.lost_after_ms),
                  "--job-lease-ms", "12000"],
                 os.path.join(self.root, "server-%d.log" % index))
        self.servers.append(p.start())

    def call(self, url, method, path, body=None, timeout=120):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.key)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw

    def logs(self):
        out = ""
        for p in list(self.nodes.values()) + self.servers:
            out += "\n--- %s\n%s" % (p.log_path, p.log_tail())
        return out

    def cleanup(self):
        for p in self.servers:
            p.stop()
        for p in self.nodes.values():
            p.stop()
            pool = os.path.join(p.data_dir, "pool")
            if os.path.ismount(pool):
                run("umount", pool, check=False)
        for ns, host_if in self.netns:
            run("ip", "link", "del", host_if, check=False)
            run("ip", "netns", "del", ns, check=False)
        if self.s3:
            self.s3.stop()
        self.pg.stop()
        shutil.rmtree(self.root, ignore_errors=True)
