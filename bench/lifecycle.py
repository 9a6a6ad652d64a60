"""Snapshot, fork and rollback latency against how much data a sandbox holds, export
throughput to the snapshot store, and stored bytes per snapshot against changed bytes.

    SPACE_BIN=build/bin/space python3 bench/lifecycle.py [--sizes 10,100,1024] [--n 20]

Latencies are client-observed over HTTP (keep-alive). The baseline measured in the same run is
a fresh create from the template (what a fork costs at least).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from create_exec import Conn, pct  # noqa: E402
from harness import Server  # noqa: E402
from stats import timed_result  # noqa: E402


def row(name, xs, base=None):
    ratio = "" if base is None else "%.2fx" % (pct(xs, 50) / pct(base, 50))
    return "| %s | %d | %.2f | %.2f | %.2f | %s |" % (name, len(xs), pct(xs, 50), pct(xs, 90), pct(xs, 99), ratio)


def wait_restorable(c, snap_id, timeout=600):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        st, d = c.call("GET", "/v1/snapshots/" + snap_id)
        if d["state"] in ("restorable", "failed"):
            return d, time.perf_counter() - t0
        time.sleep(0.02)
    raise RuntimeError("export of %s did not finish" % snap_id)


def du(path):
    return sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1024")
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    s = Server().start()
    rows, notes = [], []
    try:
        c = Conn(s.url, s.key)
        base = []
        for _ in range(args.n):
            ms, (st, d) = timed_result(lambda: c.call("POST", "/v1/sandboxes?wait=true", {"template": "busybox"}))
            base.append(ms)
            c.call("DELETE", "/v1/sandboxes/%s?wait=true" % d["sandbox"]["id"])
        rows.append(row("baseline: create from template", base, base))
        for mib in sizes:
            st, d = c.call("POST", "/v1/sandboxes?wait=true", {"template": "busybox", "disk_mb": 4 * mib + 512})
            sid = d["sandbox"]["id"]
            st, d = c.call("POST", "/v1/sandboxes/%s/exec" % sid,
                           {"cmd": ["sh", "-c", "head -c %d /dev/urandom > /root/data; sync" % (mib << 20)],
                            "timeout_s": 600})
            assert d["exit_code"] == 0, d
            st, first = c.call("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "first"})
            done, secs = wait_restorable(c, first["id"])
            notes.append("full export of %d MiB (incompressible): %.2f s, %.0f MiB/s, %.1f MiB stored"
                         % (mib, secs, mib / secs, done["size_bytes"] / 2**20))
            snaps, forks, rollbacks = [], [], []
            for i in range(args.n):
                c.call("POST", "/v1/sandboxes/%s/exec" % sid,
                       {"cmd": ["sh", "-c", "head -c 65536 /dev/urandom > /root/small%d" % i]})
                ms, (st, snap) = timed_result(lambda: c.call("POST", "/v1/sandboxes/%s/snapshots" % sid, {}))
                assert st == 201, snap
                snaps.append(ms)
                ms, (st, f) = timed_result(lambda: c.call("POST", "/v1/sandboxes/%s/fork?wait=true" % sid,
                                                          {"snapshot": first["id"]}))
                assert st == 201, f
                forks.append(ms)
                c.call("DELETE", "/v1/sandboxes/%s?wait=true" % f["sandboxes"][0]["id"])
                ms, (st, r) = timed_result(lambda: c.call("POST", "/v1/sandboxes/%s/rollback" % sid,
                                                          {"snapshot": first["id"]}))
                assert st == 200, r
                rollbacks.append(ms)
            rows.append(row("snapshot, %d MiB written" % mib, snaps, base))
            rows.append(row("fork (wait=true), %d MiB written" % mib, forks, base))
            rows.append(row("rollback, %d MiB written" % mib, rollbacks, base))
            c.call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)
        # Stored bytes against changed bytes: 20 incremental snapshots, 1 MiB changed each.
        st, d = c.call("POST", "/v1/sandboxes?wait=true", {"template": "busybox", "disk_mb": 1024})
        sid = d["sandbox"]["id"]
        c.call("POST", "/v1/sandboxes/%s/exec" % sid,
               {"cmd": ["sh", "-c", "for i in $(seq 1 20); do head -c 1048576 /dev/urandom > /root/f$i; done"]})
        st, snap = c.call("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        wait_restorable(c, snap["id"])
        before = du(os.path.join(s.data_dir, "store"))
        per = []
        for i in range(20):
            c.call("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"cmd": ["sh", "-c", "head -c 1048576 /dev/urandom > /root/f%d" % (i + 1)]})
            st, snap = c.call("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
            done, _ = wait_restorable(c, snap["id"])
            per.append(done["size_bytes"])
        grown = du(os.path.join(s.data_dir, "store")) - before
        notes.append("20 snapshots each after changing 1 MiB: store grew %.1f MiB (%.2f MiB per snapshot; "
                     "per-snapshot size_bytes p50 %.2f MiB)" % (grown / 2**20, grown / 20 / 2**20, pct(per, 50) / 2**20))
    finally:
        s.cleanup()
    print("| what | n | p50 ms | p90 ms | p99 ms | p50 vs create |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    print()
    for n in notes:
        print("- " + n)


if __name__ == "__main__":
    main()
