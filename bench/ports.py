"""What a preview URL costs: request latency and download throughput through a sandbox's
preview port (front, node, guest channel, spaced, the sandbox's loopback), beside the same
server program run directly on the host and reached on the host's loopback, in the same run,
interleaved.

    SPACE_BIN=build/bin/space python3 bench/ports.py [--n 300] [--mib 256] [--runtime ns|vm]

The server is tests/integration/ports/preview_server.py (Python's http.server) in both places,
so what differs is only the path. The client is this process: one new connection per request
on both paths (a preview connection carries one request), plus the direct server with
keep-alive as a second baseline. Prints Markdown: p50/p90/p99 in milliseconds, the p50
difference, and throughput in MiB/s with its ratio to direct.
"""
import argparse
import http.client
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
sys.path.insert(0, HERE)
from harness import SPACE_BIN, Server  # noqa: E402
from stats import pct  # noqa: E402
from test_ports import SERVER_PY, PortsTest  # noqa: E402

DIRECT_PORT = 18765


def one_request(addr, host, path, conn=None):
    c = conn or http.client.HTTPConnection(*addr, timeout=60)
    t = time.perf_counter()
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    body = r.read()
    ms = (time.perf_counter() - t) * 1000
    if conn is None:
        c.close()
    assert r.status == 200, (r.status, body[:200])
    return ms


def download(addr, host, nbytes):
    c = http.client.HTTPConnection(*addr, timeout=300)
    t = time.perf_counter()
    c.request("GET", "/blob/%d" % nbytes, headers={"Host": host})
    r = c.getresponse()
    got = 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    s = time.perf_counter() - t
    c.close()
    assert got == nbytes, got
    return nbytes / (1 << 20) / s


def row(name, xs, base=None):
    p50 = pct(xs, 50)
    extra = "" if base is None else "%+.2f" % (p50 - pct(base, 50))
    return "| %s | %.2f | %.2f | %.2f | %s |" % (name, p50, pct(xs, 90), pct(xs, 99), extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runtime", default="ns")
    args = ap.parse_args()
    data_dir = os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test")
    os.makedirs(data_dir, exist_ok=True)
    s = Server(data_dir).start()
    direct = None
    try:
        r = subprocess.run([SPACE_BIN, "template", "build", "base"], env=s.env(), capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("building base failed: " + r.stderr[-2000:])
        extra = {"runtime": "vm", "memory_mb": 512} if args.runtime == "vm" else {}
        sid = s.create("base", timeout_s=3600, **extra)
        PortsTest.s = s
        PortsTest.start_servers(sid)
        st, d = s.json("POST", "/v1/sandboxes/%s/ports" % sid, {"port": 8765, "public": True})
        assert st == 201, d
        preview_host = d["url"].split("/")[2]
        u = s.url.split("/")[2]
        api_addr = (u.split(":")[0], int(u.split(":")[1]))
        direct = subprocess.Popen([sys.executable, SERVER_PY, str(DIRECT_PORT)])
        direct_addr = ("127.0.0.1", DIRECT_PORT)
        for _ in range(100):
            try:
                one_request(direct_addr, "127.0.0.1", "/headers")
                break
            except OSError:
                time.sleep(0.05)
        keep = http.client.HTTPConnection(*direct_addr, timeout=60)
        # Warm both paths, then interleave: preview, direct (new connection), direct (kept).
        for _ in range(20):
            one_request(api_addr, preview_host, "/headers")
            one_request(direct_addr, "127.0.0.1", "/headers")
        lat = {"preview": [], "direct": [], "direct_keepalive": []}
        for _ in range(args.n):
            lat["preview"].append(one_request(api_addr, preview_host, "/headers"))
            lat["direct"].append(one_request(direct_addr, "127.0.0.1", "/headers"))
            lat["direct_keepalive"].append(one_request(direct_addr, "127.0.0.1", "/headers", keep))
        nbytes = args.mib << 20
        tput = {"preview": [], "direct": []}
        for _ in range(args.rounds):
            tput["preview"].append(download(api_addr, preview_host, nbytes))
            tput["direct"].append(download(direct_addr, "127.0.0.1", nbytes))
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        print("Preview ports, runtime %s, commit %s, n=%d requests per path (interleaved), %d downloads of %d MiB "
              "per path\n" % (args.runtime, commit, args.n, args.rounds, args.mib))
        print("| path | p50 ms | p90 ms | p99 ms | p50 vs direct |")
        print("|---|---|---|---|---|")
        print(row("direct, new connection each", lat["direct"]))
        print(row("direct, keep-alive", lat["direct_keepalive"]))
        print(row("preview URL (one connection each)", lat["preview"], lat["direct"]))
        pv, dv = pct(tput["preview"], 50), pct(tput["direct"], 50)
        print("\n| download | p50 MiB/s | min | max | vs direct |")
        print("|---|---|---|---|---|")
        print("| direct | %.0f | %.0f | %.0f | |" % (dv, min(tput["direct"]), max(tput["direct"])))
        print("| preview URL | %.0f | %.0f | %.0f | %.2fx |" % (pv, min(tput["preview"]), max(tput["preview"]), pv / dv))
        s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
    finally:
        if direct:
            direct.kill()
        s.stop()


if __name__ == "__main__":
    main()
