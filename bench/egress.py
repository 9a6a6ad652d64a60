"""What the egress gateway costs: request latency and download throughput from a sandbox
through the gateway, beside the same client run directly on the host against the same
upstream in the same run (the egress tests' own network: an upstream in a network namespace
reached through a veth, tests/integration/egress/testnet.py).

    SPACE_BIN=build/bin/space python3 bench/egress.py [--n 300] [--mib 256]

Creates: N cold creates of `busybox` with the egress profile, interleaved with N without (the
same run), create-to-ready as the client sees it. The difference is what joining a sandbox to
the gateway costs: the root broker's veth and addresses (one request over its socket), the
gateway registration, and the resolver and CA files written through the guest.

Paths measured: plain HTTP (transparent, port 80), HTTPS tunnelled untouched (SNI checked,
bytes relayed), and HTTPS intercepted with a credential injected (TLS terminated with the
node's CA, re-encrypted upstream). Each request opens a new connection, as a fresh curl does.
Prints Markdown tables: p50/p90/p99 in milliseconds and ratios against direct.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
sys.path.insert(0, os.path.join(HERE, "../tests/integration/egress"))
from harness import SPACE_BIN, Server  # noqa: E402
from testnet import UPSTREAM_IP, TestNet  # noqa: E402

# Runs in the sandbox and on the host alike: N requests, one connection each; prints ms.
CLIENT = r"""
import http.client, json, os, ssl, sys, time
from stats import pct  # noqa: E402
scheme, host, n, ca = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=ca if ca != "-" else None)
hdr = {"Authorization": "Bearer " + os.environ.get("TOKEN", "none")}
out = []
for i in range(n):
    t = time.perf_counter()
    c = (http.client.HTTPSConnection(host, context=ctx) if scheme == "https" else http.client.HTTPConnection(host))
    c.request("GET", "/bench", headers=hdr)
    r = c.getresponse(); r.read(); c.close()
    assert r.status == 200, r.status
    out.append((time.perf_counter() - t) * 1000)
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--creates", type=int, default=40, help="creates with and without egress, interleaved")
    args = ap.parse_args()
    net = TestNet().start()
    data_dir = os.environ.get("SPACE_BENCH_DATA_DIR", os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test"))
    os.makedirs(data_dir, exist_ok=True)
    s = Server(data_dir, extra_args=["--egress-dns", net.dns, "--egress-upstream-ca", net.ca]).start()
    sid = None
    try:
        subprocess.run([SPACE_BIN, "template", "build", "base"], env=s.env(), check=True, stdout=subprocess.DEVNULL)
        s.json("PUT", "/v1/egress-profiles/bench", {"allow": [{"host": "api.test.example"}, {"host": "cred.test.example"}]})
        s.json("PUT", "/v1/credentials/bench", {"secret": "bench-secret", "hosts": ["cred.test.example"], "env": "TOKEN"})
        st, d = s.json("POST", "/v1/sandboxes?wait=true", {"template": "base", "credentials": ["bench"]},
                       headers={"X-Space-Egress-Profile": "bench"})
        assert st == 201, d
        sid = d["sandbox"]["id"]
        with open(net.ca) as f:
            s.call("PUT", "/v1/sandboxes/%s/files?path=/tmp/testca.pem" % sid, raw=f.read().encode())
        s.call("PUT", "/v1/sandboxes/%s/files?path=/tmp/client.py" % sid, raw=CLIENT.encode())
        host_client = os.path.join(net.dir, "client.py")
        with open(host_client, "w") as f:
            f.write(CLIENT)

        def in_sandbox(scheme, host, ca):
            st, d = s.exec(sid, ["python3", "/tmp/client.py", scheme, host, str(args.n), ca], timeout_s=600)
            assert d["exit_code"] == 0, d
            return json.loads(d["stdout"])

        def direct(scheme, host):
            # The host does not know the test names: connect to the address and send the name
            # as Host (plain) or skip the name check (TLS; the test CA still verifies the chain).
            code = CLIENT.replace("http.client.HTTPSConnection(host, context=ctx)",
                                  "http.client.HTTPSConnection(%r, context=ctx)" % UPSTREAM_IP)
            code = code.replace("http.client.HTTPConnection(host)", "http.client.HTTPConnection(%r)" % UPSTREAM_IP)
            code = code.replace('c.request("GET", "/bench", headers=hdr)',
                                'c.request("GET", "/bench", headers=dict(hdr, Host=host))')
            code = code.replace("ssl.create_default_context(cafile=ca if ca != \"-\" else None)",
                                "ssl.create_default_context(cafile=ca); ctx.check_hostname = False")
            r = subprocess.run([sys.executable, "-c", code, scheme, host, str(args.n), net.ca],
                               capture_output=True, text=True, check=True)
            return json.loads(r.stdout)

        rows = []
        for label, scheme, host, ca in (("HTTP, transparent", "http", "api.test.example", "-"),
                                        ("HTTPS, tunnelled (SNI checked)", "https", "api.test.example", "/tmp/testca.pem"),
                                        ("HTTPS, intercepted + credential", "https", "cred.test.example", "-")):
            base = direct(scheme, host)
            got = in_sandbox(scheme, host, ca)
            rows.append((label, got, base))

        def download(cmd_prefix, url, extra):
            return cmd_prefix + ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}"] + extra + [url]

        size = args.mib << 20
        tp = []
        for label, url, extra_sb, extra_host in (
                ("HTTP", "http://api.test.example/big/%d" % size, [], ["--resolve", "api.test.example:80:" + UPSTREAM_IP]),
                ("HTTPS, tunnelled", "https://api.test.example/big/%d" % size, ["--cacert", "/tmp/testca.pem"],
                 ["--cacert", net.ca, "--resolve", "api.test.example:443:" + UPSTREAM_IP])):
            r = subprocess.run(download([], url, extra_host), capture_output=True, text=True, check=True)
            direct_bps = float(r.stdout)
            st, d = s.exec(sid, download([], url, extra_sb), timeout_s=600)
            gw_bps = float(d["stdout"])
            tp.append((label, gw_bps, direct_bps))

        import time
        with_egress, without = [], []
        for i in range(2 * args.creates):
            egress = i % 2 == 0
            t = time.perf_counter()
            st, d = s.json("POST", "/v1/sandboxes?wait=true", {"template": "busybox"},
                           headers={"X-Space-Egress-Profile": "bench"} if egress else None)
            ms = (time.perf_counter() - t) * 1000
            assert st == 201, d
            (with_egress if egress else without).append(ms)
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % d["sandbox"]["id"])

        print("### Create with egress vs without (ms, cold busybox, client create-to-ready, n=%d each, interleaved)\n"
              % args.creates)
        print("| create | p50 | p90 | p99 |")
        print("|---|---|---|---|")
        for label, xs in (("with egress profile", with_egress), ("without egress", without)):
            print("| %s | %.2f | %.2f | %.2f |" % (label, pct(xs, 50), pct(xs, 90), pct(xs, 99)))
        print("\nratio p50 %.2fx, added p50 +%.2f ms\n" % (pct(with_egress, 50) / pct(without, 50),
                                                           pct(with_egress, 50) - pct(without, 50)))

        print("### Egress gateway: request latency (ms, new connection per request, n=%d)\n" % args.n)
        print("| path | through gateway p50 | p90 | p99 | direct p50 | p90 | p99 | ratio p50 | added p50 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, got, base in rows:
            print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2fx | +%.2f ms |" % (
                label, pct(got, 50), pct(got, 90), pct(got, 99), pct(base, 50), pct(base, 90), pct(base, 99),
                pct(got, 50) / pct(base, 50), pct(got, 50) - pct(base, 50)))
        print("\n### Egress gateway: download throughput (%d MiB, curl)\n" % args.mib)
        print("| path | through gateway | direct | ratio |")
        print("|---|---|---|---|")
        for label, gw, dr in tp:
            print("| %s | %.0f MiB/s | %.0f MiB/s | %.2fx |" % (label, gw / 2**20, dr / 2**20, gw / dr))
    finally:
        if sid:
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        s.stop()
        net.stop()


if __name__ == "__main__":
    main()
