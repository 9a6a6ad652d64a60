"""Create-to-ready and exec round-trip latency of `space dev`, beside baselines measured in the
same run: `bwrap --unshare-all true` and `unshare ... true` (a bare namespace sandbox that runs
one command), and a plain fork/exec of `true` (the floor of spawning anything).

    SPACE_BIN=build/bin/space python3 bench/create_exec.py [--n 200]

Prints p50/p90/p99 in milliseconds and ratios against the baselines, as a Markdown table.
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Server  # noqa: E402
from stats import pct  # noqa: E402


def row(name, xs, base=None):
    p50, p90, p99 = pct(xs, 50), pct(xs, 90), pct(xs, 99)
    ratio = "" if base is None else "%.2fx" % (p50 / pct(base, 50))
    return "| %s | %d | %.2f | %.2f | %.2f | %s |" % (name, len(xs), p50, p90, p99, ratio)


def timed_cmd(argv, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((time.perf_counter() - t) * 1000)
    return out


class Conn:
    """One keep-alive HTTP connection, as a real client would hold."""

    def __init__(self, url, key):
        host, port = url[len("http://"):].rsplit(":", 1)
        self.c = http.client.HTTPConnection(host, int(port))
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.c.request(method, path, json.dumps(body) if body is not None else None, self.h)
        r = self.c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--template", default="busybox")
    args = ap.parse_args()
    n = args.n

    s = Server().start()
    try:
        c = Conn(s.url, s.key)
        for _ in range(5):  # warm up: template build, page cache
            st, d = c.call("POST", "/v1/sandboxes?wait=true", {"template": args.template})
            assert st == 201, d
            c.call("DELETE", "/v1/sandboxes/%s?wait=true" % d["sandbox"]["id"])

        create, server_create, ids = [], [], []
        steps = {}
        for _ in range(n):
            t = time.perf_counter()
            st, d = c.call("POST", "/v1/sandboxes?wait=true", {"template": args.template})
            create.append((time.perf_counter() - t) * 1000)
            assert st == 201, d
            sb = d["sandbox"]
            ids.append(sb["id"])
            server_create.append(sb["timings"]["create_ms"])
            for k, v in sb["timings"]["steps"].items():
                steps.setdefault(k, []).append(v)

        exec_rt = []
        sid = ids[0]
        for _ in range(n):
            t = time.perf_counter()
            st, d = c.call("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]})
            exec_rt.append((time.perf_counter() - t) * 1000)
            assert st == 200 and d["exit_code"] == 0, d

        destroy = []
        for sid in ids:
            t = time.perf_counter()
            st, _ = c.call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
            destroy.append((time.perf_counter() - t) * 1000)
            assert st == 204, st
    finally:
        s.cleanup()

    fork_exec = timed_cmd(["true"], n)
    bwrap = timed_cmd(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], n)
    unshare = timed_cmd(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--uts",
                         "--ipc", "--cgroup", "true"], n)

    print("| what | n | p50 ms | p90 ms | p99 ms | p50 vs bwrap |")
    print("|---|---|---|---|---|---|")
    print(row("SPACE create-to-ready (client, HTTP, wait=true)", create, bwrap))
    print(row("SPACE create (server timings.create_ms)", server_create, bwrap))
    print(row("SPACE exec round trip `true` (HTTP, buffered)", exec_rt, bwrap))
    print(row("SPACE destroy (wait=true)", destroy, bwrap))
    print(row("baseline: bwrap --unshare-all true", bwrap, bwrap))
    print(row("baseline: unshare (user,pid,mnt,net,uts,ipc,cgroup) true", unshare, bwrap))
    print(row("floor: fork+exec true", fork_exec, bwrap))
    print()
    print("Server-side create steps (p50 ms): " +
          ", ".join("%s %.2f" % (k, pct(v, 50)) for k, v in sorted(steps.items(), key=lambda kv: -pct(kv[1], 50))))


if __name__ == "__main__":
    main()
