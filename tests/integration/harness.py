"""Starts a real `space dev` on port 0 with its own data dir and talks to it over HTTP.

Standard library only. Used by every integration test and by run_contract.py.
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

SPACE_BIN = os.environ.get("SPACE_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/space"))


def is_root():
    return os.geteuid() == 0


def delete_snapshots(server):
    """Deletes, through the API and newest first, every snapshot of the admin key's team in
    `server`'s data dir. The shared test data dir (SPACE_TEST_DATA_DIR) is reused by every run
    for its cached `base` template; the snapshots each run's contract left behind piled up
    there, and with each one btrfs's quota accounting at every commit grew slower (an inode
    filler then took longer to reach its quota than the abuse test waits). Returns how many
    went."""
    db = os.path.join(server.data_dir, "state.db")
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        ids = [r[0] for r in conn.execute("SELECT id FROM snapshots WHERE team = 'default' AND state != 'deleted' "
                                          "ORDER BY created_at_ms DESC")]
    finally:
        conn.close()
    gone = 0
    for sid in ids:
        st, _, _ = server.call("DELETE", "/v1/snapshots/" + sid)
        gone += 1 if st in (200, 202, 204) else 0
    return gone


class Server:
    """One `space dev` process. `data_dir=None` makes a temporary one, removed by cleanup().
    `extra_args` are appended to the `space dev` command line (e.g. ["--store", url])."""

    def __init__(self, data_dir=None, extra_args=None):
        self.extra_args = list(extra_args or [])
        self.owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="space-it-", dir="/var/tmp")
        self.proc = None
        self.url = None
        self.key = None
        self.log_path = os.path.join(self.data_dir, "server.log")

    def start(self, timeout=60):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [SPACE_BIN, "dev", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir, *self.extra_args],
            stdout=subprocess.PIPE, stderr=log, text=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("space dev exited: " + self.log_tail())
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("space dev did not start: " + self.log_tail())
        with open(os.path.join(self.data_dir, "api-key")) as f:
            self.key = f.read().strip()
        return self

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def env(self):
        return dict(os.environ, SPACE_URL=self.url, SPACE_API_KEY=self.key)

    def call(self, method, path, body=None, raw=None, accept=None, key=True, timeout=120, headers=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if key:
            req.add_header("Authorization", "Bearer " + self.key)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if accept:
            req.add_header("Accept", accept)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def json(self, method, path, body=None, **kw):
        st, _, b = self.call(method, path, body, **kw)
        try:
            return st, json.loads(b) if b else None
        except ValueError:
            return st, b

    def create(self, template="busybox", **extra):
        st, d = self.json("POST", "/v1/sandboxes?wait=true", {"template": template, **extra})
        if st != 201:
            raise AssertionError("create failed: %s %s\n%s" % (st, d, self.log_tail()))
        return d["sandbox"]["id"]

    def exec(self, sid, cmd, **kw):
        st, d = self.json("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, **kw})
        return st, d

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def cleanup(self):
        """Stops the server and, for a temporary data dir, unmounts its pool (the loop device
        frees itself) and removes the dir."""
        self.stop()
        if not self.owns_dir:
            return
        pool = os.path.join(self.data_dir, "pool")
        if os.path.ismount(pool):
            subprocess.run(["umount", pool], check=False)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def sse_events(raw):
    """Parses an SSE body into [(event, data_dict)]."""
    out, name, data = [], None, ""
    for line in raw.decode(errors="replace").splitlines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data += line.split(":", 1)[1].strip()
        elif line == "" and name:
            out.append((name, json.loads(data) if data else None))
            name, data = None, ""
    if name:
        out.append((name, json.loads(data) if data else None))
    return out


def node_cgroup_name(data_dir):
    """The parent cgroup of a node's sandboxes: "space-" + FNV-1a of its data dir (node.cc)."""
    h = 1469598103934665603
    for c in data_dir.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "space-%016x" % h


def space_cgroups(sid=None, data_dir=None):
    """Sandbox cgroup dirs left on the host (all hierarchies); only one node's with data_dir."""
    want = node_cgroup_name(data_dir) if data_dir else None
    found = []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if not os.path.isdir(root):
            continue
        parents = [os.path.join(root, h) for h in os.listdir(root)] + [root]
        for base in parents:
            if not os.path.isdir(base):
                continue
            for name in os.listdir(base):
                d = os.path.join(base, name)
                if not name.startswith("space") or (want and name != want) or not os.path.isdir(d):
                    continue
                for leaf in os.listdir(d):
                    if leaf.startswith("sbx_") and (sid is None or leaf == sid):
                        found.append(os.path.join(d, leaf))
    return found


def node_cgroup_parents(data_dir):
    """The parent cgroups a node made (its sandboxes' and its VMs'), in every hierarchy."""
    names = (node_cgroup_name(data_dir), node_cgroup_name(data_dir) + "-vm")
    found = []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if not os.path.isdir(root):
            continue
        for base in [os.path.join(root, h) for h in os.listdir(root)] + [root]:
            found += [os.path.join(base, n) for n in names if os.path.isdir(os.path.join(base, n))]
    return sorted(set(os.path.realpath(p) for p in found))


def sandbox_pids(sid, data_dir):
    """Host pids of every process of sandbox `sid` (from its cgroups, v1 or v2)."""
    pids = set()
    for cg in space_cgroups(sid, data_dir):
        for name in ("cgroup.procs", "tasks"):
            try:
                with open(os.path.join(cg, name)) as f:
                    pids.update(int(x) for x in f.read().split())
            except OSError:
                pass
    return pids


def mounts_under(path):
    """Mount points at or below `path` in this mount namespace."""
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if l.split()[4].startswith(path)]


def processes_of_data_dir(data_dir):
    """Pids whose command line names `data_dir`: the node, its broker (a fork of it) and any
    helper forked from it that has not executed yet."""
    out = []
    needle = data_dir.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(pid))
        except OSError:
            pass
    return out


def processes_with_uid_at_least(uid):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) >= uid:
                            out.append(int(pid))
                        break
        except OSError:
            pass
    return out


def children_running(server_pid, subcommand):
    """Pids of the children of the server process that run `space <subcommand>`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server_pid and len(argv) > 1 and argv[1] == subcommand.encode():
            found.append(int(entry))
    return found


def gateway_workers(server_pid):
    """Pids of the `space gateway-worker` children of the server process (its egress gateway)."""
    return children_running(server_pid, "gateway-worker")


def root_brokers(server_pid):
    """Pids of the `space broker` children of the server process (its root broker)."""
    return children_running(server_pid, "broker")


def api_fronts(server_pid):
    """Pids of the `space api-front` children of the server process (its API front)."""
    return children_running(server_pid, "api-front")


def socket_holders(inode):
    """Pids with an open descriptor on socket `inode`."""
    holders = set()
    target = "socket:[%d]" % inode
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % entry):
                if os.readlink("/proc/%s/fd/%s" % (entry, fd)) == target:
                    holders.add(int(entry))
        except OSError:
            continue
    return holders


def tcp_socket_inode(local_port, remote_port):
    """The inode of the established IPv4 TCP socket local_port -> remote_port on this host."""
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split()
            local, remote = cols[1], cols[2]
            if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
                return int(cols[9])
    return None


def pid_alive(pid):
    """Whether `pid` runs and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def proc_status(pid):
    """/proc/<pid>/status as a dict of its fields (values as text)."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


class HostService:
    """A TCP service on the host, on every address, that answers b"HOST-SERVICE": a sandbox
    that reads those bytes reached the host. `hits` lists the peers that connected."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, peer = self.sock.accept()
            except OSError:
                return
            self.hits.append(peer)
            c.sendall(b"HOST-SERVICE")
            c.close()

    def probe_code(self, targets, connect_s=2, read_s=3):
        """Python that connects to the service at each of `targets` and prints one line each."""
        return ("import socket\nfor ip in %r:\n try:\n  s=socket.create_connection((ip,%d),%d); s.settimeout(%d)\n"
                "  print(ip, s.recv(100))\n except OSError as e: print(ip, 'refused', e)\n"
                % (list(targets), self.port, connect_s, read_s))

    def close(self):
        self.sock.close()
