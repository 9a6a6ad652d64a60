"""What moving the cgroup writes into the root broker costs (runtime/cgroup_acts.h): the same
lifecycle against two `space dev` binaries side by side, one whose runtime writes cgroupfs
itself (the baseline: a build from before the move, SPACE_BIN_BASE) and one that asks its
broker (SPACE_BIN). Rounds alternate between the two, so the host's drift weighs on both alike.

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/base-build/bin/space python3 bench/broker_cgroups.py [--rounds 6]
        [--steps ns.cgroup_create,ns.cgroup_attach]

--steps names the create's `timings.steps` to report besides the wall times (e.g.
ns.id_maps for the user namespace's id maps, which moved into the broker later).

Each round, per server: N creates (wait=true; the record's own ns.cgroup_create and
ns.cgroup_attach step times are kept too), then a pause and a resume of each (freeze and thaw:
one write each, plus the node's polling), then a delete of each (kill and rmdir). Prints
p50/p90/p99 in milliseconds and the p50 ratio broker/baseline.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402


def round_on(s, n, out, steps_kept=("ns.cgroup_create", "ns.cgroup_attach")):
    ids = []

    def create():
        st, d = s.json("POST", "/v1/sandboxes?wait=true", {"template": "busybox"})
        assert st == 201, d
        ids.append(d["sandbox"]["id"])

    def call(method, path):
        st, d = s.json(method, path)
        assert st in (200, 204), (path, st, d)

    for _ in range(n):
        out.setdefault("create-to-ready (wait=true)", []).append(timed(create))
        st, rec = s.json("GET", "/v1/sandboxes/" + ids[-1])
        steps = (rec.get("timings") or {}).get("steps", {})
        for step in steps_kept:
            if step in steps:
                out.setdefault("step " + step, []).append(steps[step])
    for sid in ids:
        out.setdefault("pause (wait=true)", []).append(timed(lambda: call("POST", "/v1/sandboxes/%s/pause?wait=true" % sid)))
        out.setdefault("resume (wait=true)", []).append(timed(lambda: call("POST", "/v1/sandboxes/%s/resume?wait=true" % sid)))
    for sid in ids:
        out.setdefault("delete (wait=true)", []).append(timed(lambda: call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--steps", default="ns.cgroup_create,ns.cgroup_attach")
    args = ap.parse_args()
    steps_kept = tuple(s for s in args.steps.split(",") if s)
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE must name a `space` binary from before the cgroup writes moved")
    servers = {}
    for name, binary in (("broker", harness.SPACE_BIN), ("baseline", base_bin)):
        harness.SPACE_BIN = binary
        servers[name] = harness.Server(extra_args=["--no-egress"]).start()
    try:
        results = {name: {} for name in servers}
        for name, s in servers.items():  # warm up (and build busybox)
            round_on(s, 3, {})
        for r in range(args.rounds):
            order = ["broker", "baseline"] if r % 2 == 0 else ["baseline", "broker"]
            for name in order:
                round_on(servers[name], args.n, results[name], steps_kept)
    finally:
        for s in servers.values():
            s.cleanup()
    print("| operation | n | broker p50 / p90 / p99 ms | baseline p50 / p90 / p99 ms | p50 broker/baseline |")
    print("|---|---|---|---|---|")
    for kind in results["broker"]:
        f, b = results["broker"][kind], results["baseline"].get(kind, [])
        if not b:
            continue
        print("| %s | %d | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2fx |" % (
            kind, len(f), pct(f, 50), pct(f, 90), pct(f, 99), pct(b, 50), pct(b, 90), pct(b, 99),
            pct(f, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
