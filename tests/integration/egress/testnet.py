"""The egress tests' own network: a network namespace holding upstream HTTP/HTTPS/TCP/UDP
servers at 198.51.100.2 (reached from the host through a veth, host end 198.51.100.1; a /30, since
this machine reaches its package mirrors at other TEST-NET addresses), a test
CA that signed the upstream's certificate, and a DNS zone served on loopback to the gateway.
Nothing here talks to any address outside this machine."""
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

def _reserve_subnet():
    """A /30 of 198.51.100.0/24 that no other test network on this host holds (an flock per
    /30, released when this process exits), so concurrent test runs do not route into each
    other's upstreams."""
    for k in range(64):
        f = open("/run/space-testnet-%d.lock" % k, "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _held.append(f)
        return "198.51.100.%d" % (4 * k + 1), "198.51.100.%d" % (4 * k + 2)
    raise RuntimeError("no free test subnet")


_held = []
HOST_IP, UPSTREAM_IP = _reserve_subnet()
ZONE = {
    "api.test.example": UPSTREAM_IP,     # allowed
    "cred.test.example": UPSTREAM_IP,    # allowed, a credential is bound to it
    "other.test.example": UPSTREAM_IP,   # not in any profile
    "rebind.test.example": "127.0.0.1",  # allowed name, resolves to loopback
    "private.test.example": "10.1.2.3",  # allowed name, resolves to a private address
    "meta.test.example": "169.254.169.254",
}
HERE = os.path.dirname(os.path.abspath(__file__))


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class TestNet:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="space-egress-", dir="/var/tmp")
        tag = "%d" % (os.getpid() % 100000)
        self.ns = "spt-" + tag
        self.veth = "spth" + tag
        self.procs = []
        self.log = os.path.join(self.dir, "upstream.log")
        self.ca = os.path.join(self.dir, "ca.pem")

    @staticmethod
    def _reap_stale():
        """Removes what a test run killed before its cleanup left behind: the netns, veth and
        orphaned servers of test networks whose owning process is gone."""
        def alive(pid):
            return os.path.exists("/proc/%d" % pid)
        for name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
            if name.startswith("spt-") and name[4:].isdigit() and not alive(int(name[4:])):
                subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
        for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith("spth") and name[4:].isdigit() and not alive(int(name[4:])):
                subprocess.run(["ip", "link", "del", name], stderr=subprocess.DEVNULL)
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/stat" % pid) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == 1 and (b"egress/upstream.py" in cmd or b"egress/dns_zone.py" in cmd):
                os.kill(int(pid), 9)

    def start(self):
        self._reap_stale()
        self._certs()
        run("ip", "netns", "add", self.ns)
        run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        run("ip", "addr", "add", HOST_IP + "/30", "dev", self.veth)
        run("ip", "link", "set", self.veth, "up")
        run("ip", "-n", self.ns, "addr", "add", UPSTREAM_IP + "/30", "dev", "eth0")
        run("ip", "-n", self.ns, "link", "set", "eth0", "up")
        run("ip", "-n", self.ns, "link", "set", "lo", "up")
        open(self.log, "w").close()
        up = subprocess.Popen(["ip", "netns", "exec", self.ns, "python3", os.path.join(HERE, "upstream.py"), self.log,
                               os.path.join(self.dir, "server.pem"), os.path.join(self.dir, "server.key")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(up)
        assert up.stdout.readline().strip() == "ready"
        dns = subprocess.Popen(["python3", os.path.join(HERE, "dns_zone.py")] + ["%s=%s" % kv for kv in ZONE.items()],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(dns)
        self.dns = "127.0.0.1:" + dns.stdout.readline().strip()
        # An open resolver beyond the gateway (on the upstream, port 53) that answers every name
        # of the zone: what a sandbox asking DNS past the gateway would want to reach.
        outside = subprocess.Popen(["ip", "netns", "exec", self.ns, "python3", os.path.join(HERE, "dns_zone.py")] +
                                   ["%s=%s" % kv for kv in ZONE.items()], env=dict(os.environ, DNS_BIND=UPSTREAM_IP + ":53"),
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(outside)
        assert outside.stdout.readline().strip() == "53"
        return self

    def _certs(self):
        d = self.dir
        ossl = lambda *a: run("openssl", *a)  # noqa: E731
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=SPACE egress test CA", "-keyout", d + "/ca.key", "-out", self.ca,
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=test.example",
             "-keyout", d + "/server.key", "-out", d + "/server.csr")
        with open(d + "/ext.cnf", "w") as f:
            f.write("subjectAltName=" + ",".join("DNS:" + n for n in ZONE) + ",IP:" + UPSTREAM_IP + "\n")
        ossl("x509", "-req", "-in", d + "/server.csr", "-CA", self.ca, "-CAkey", d + "/ca.key", "-CAcreateserial",
             "-days", "2", "-out", d + "/server.pem", "-extfile", d + "/ext.cnf")

    def requests(self):
        """What reached the upstream, oldest first."""
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", self.ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", self.veth], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)
