"""What the API front costs (src/front/front.h): the same requests against two `space dev`
binaries side by side, one that serves HTTP itself (the baseline: a build from before the
front, SPACE_BIN_BASE) and one behind its front (SPACE_BIN). Rounds alternate between the two,
so the host's drift weighs on both alike.

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/prev-build/bin/space python3 bench/api_front.py [--rounds 8]

Prints p50/p90/p99 in milliseconds per request kind and the p50 ratio front/baseline.
"""
import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402


class Conn:
    def __init__(self, url, key, keep_alive=True):
        self.host, port = url[len("http://"):].rsplit(":", 1)
        self.port = int(port)
        self.keep_alive = keep_alive
        self.c = None
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        if self.c is None or not self.keep_alive:
            self.c = http.client.HTTPConnection(self.host, self.port)
        self.c.request(method, path, json.dumps(body) if body is not None else None, self.h)
        r = self.c.getresponse()
        data = r.read()
        if not self.keep_alive:
            self.c.close()
        return r.status, (json.loads(data) if data else None)


def round_on(server, sid, n, out):
    keep = Conn(server.url, server.key)
    fresh = Conn(server.url, server.key, keep_alive=False)
    for _ in range(n):
        out.setdefault("GET /healthz (keep-alive)", []).append(timed(lambda: keep.call("GET", "/healthz")))
        out.setdefault("GET /healthz (new connection each)", []).append(timed(lambda: fresh.call("GET", "/healthz")))
        out.setdefault("exec `true` (keep-alive)", []).append(
            timed(lambda: keep.call("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]})))
    for _ in range(max(1, n // 5)):
        created = {}

        def create():
            st, d = keep.call("POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
            assert st == 201, d
            created["id"] = d["sandbox"]["id"]
        out.setdefault("create-to-ready (wait=true)", []).append(timed(create))
        keep.call("DELETE", "/v1/sandboxes/%s?wait=true" % created["id"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE must name a `space` binary from before the front")
    servers = {}
    for name, binary in (("front", harness.SPACE_BIN), ("baseline", base_bin)):
        harness.SPACE_BIN = binary
        servers[name] = harness.Server(extra_args=["--no-egress"]).start()
    try:
        sids = {name: s.create() for name, s in servers.items()}
        results = {name: {} for name in servers}
        for name, s in servers.items():  # warm up
            round_on(s, sids[name], 10, {})
        for r in range(args.rounds):
            order = ["front", "baseline"] if r % 2 == 0 else ["baseline", "front"]
            for name in order:
                round_on(servers[name], sids[name], args.n, results[name])
    finally:
        for s in servers.values():
            s.cleanup()
    print("| request | n | front p50 / p90 / p99 ms | baseline p50 / p90 / p99 ms | p50 front/baseline |")
    print("|---|---|---|---|---|")
    for kind in results["front"]:
        f, b = results["front"][kind], results["baseline"][kind]
        print("| %s | %d | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2fx |" % (
            kind, len(f), pct(f, 50), pct(f, 90), pct(f, 99), pct(b, 50), pct(b, 90), pct(b, 99),
            pct(f, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
