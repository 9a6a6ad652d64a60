"""What reading snapshots in the tree jail costs (node/tree_jail.h): snapshot diffs and exports
against two `space dev` binaries side by side, one that reads in the node itself (the baseline,
SPACE_BIN_BASE: a build from before the jail) and one that spawns the jail (SPACE_BIN: a helper
in a user namespace of its own, a broker id map and read-only idmapped clones; an export's
objects and manifest cross a socket to the node, which verifies each object's hash). Rounds
alternate between the two, so the host's drift weighs on both alike.

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/base-build/bin/space python3 bench/tree_jail.py [--rounds 6] [--n 20] [--files 2000]

Per server, once: a sandbox with --files small files (half of them a user's, mode 0600, below a
0700 directory), snapshot one, a tenth of them rewritten and a few added and removed, snapshot
two. Each round: n diffs of two against one, n of one against itself (nothing differs: the
fixed cost), and n snapshots timed from the request to `restorable` (the export: incremental,
one file changed each time). Prints p50/p90/p99 in milliseconds and the p50 ratio jail/baseline.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402


def prepare(s, files):
    st, d = s.json("POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
    assert st == 201, d
    sid = d["sandbox"]["id"]
    half = files // 2

    def sh(script):
        st, d = s.exec(sid, ["sh", "-c", script])
        assert st == 200 and d["exit_code"] == 0, d

    sh("mkdir -p /root/pub /root/priv; i=0; while [ $i -lt %d ]; do echo file $i > /root/pub/f$i; "
       "echo secret $i > /root/priv/f$i; i=$((i+1)); done; chown -R 1000:1000 /root/priv; "
       "chmod 700 /root/priv; chmod 600 /root/priv/*" % half)
    snaps = []

    def snapshot():
        st, d = s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {}, timeout=300)
        assert st == 201, d
        snaps.append(d["id"])

    snapshot()
    sh("i=0; while [ $i -lt %d ]; do echo changed > /root/pub/f$i; echo changed > /root/priv/f$i; i=$((i+10)); done; "
       "rm /root/pub/f1 /root/priv/f1; echo new > /root/pub/added" % half)
    snapshot()
    return snaps + [sid]


def snapshot_to_restorable(s, sid):
    st, d = s.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {}, timeout=300)
    assert st == 201, d
    for _ in range(60000):
        st, snap = s.json("GET", "/v1/snapshots/" + d["id"])
        if snap.get("state") in ("restorable", "failed"):
            break
        time.sleep(0.002)
    assert snap["state"] == "restorable", snap


def round_on(s, snaps, n, out):
    one, two, sid = snaps

    def diff(a, b):
        st, d = s.json("GET", "/v1/snapshots/%s/diff?against=%s" % (a, b), timeout=300)
        assert st == 200, d

    for _ in range(n):
        out.setdefault("diff two against one", []).append(timed(lambda: diff(two, one)))
        out.setdefault("diff one against itself", []).append(timed(lambda: diff(one, one)))
    for i in range(n):
        st, d = s.exec(sid, ["sh", "-c", "echo %d > /root/priv/f0" % i])
        assert st == 200, d
        out.setdefault("snapshot to restorable (export)", []).append(timed(lambda: snapshot_to_restorable(s, sid)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE must name a `space` binary from before the tree jail")
    servers, snaps = {}, {}
    for name, binary in (("jail", harness.SPACE_BIN), ("baseline", base_bin)):
        harness.SPACE_BIN = binary
        servers[name] = harness.Server(extra_args=["--no-egress"]).start()
    try:
        for name, s in servers.items():
            snaps[name] = prepare(s, args.files)
            round_on(s, snaps[name], 3, {})  # warm up
        results = {name: {} for name in servers}
        for r in range(args.rounds):
            order = ["jail", "baseline"] if r % 2 == 0 else ["baseline", "jail"]
            for name in order:
                round_on(servers[name], snaps[name], args.n, results[name])
    finally:
        for s in servers.values():
            s.cleanup()
    print("| operation | n | jail p50 / p90 / p99 ms | baseline p50 / p90 / p99 ms | p50 jail/baseline |")
    print("|---|---|---|---|---|")
    for kind in results["jail"]:
        f, b = results["jail"][kind], results["baseline"][kind]
        print("| %s | %d | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2fx |" % (
            kind, len(f), pct(f, 50), pct(f, 90), pct(f, 99), pct(b, 50), pct(b, 90), pct(b, 99),
            pct(f, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
