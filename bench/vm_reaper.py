"""What the VMM reaper and the broker's kill_child cost a vm sandbox (runtime/vm/vmm_reaper.h):
the same vm lifecycle against two `space dev` binaries side by side, one from before the change
(SPACE_BIN_BASE: QEMU is pid 1 of its namespace with PR_SET_PDEATHSIG, and the node kills it
itself with CAP_KILL) and the current one (SPACE_BIN: a reaper forks QEMU and execs itself as
pid 1, and the node, without CAP_KILL, kills the reaper through its root broker). Rounds
alternate between the two, so the host's drift weighs on both alike.

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/base-build/bin/space python3 bench/vm_reaper.py [--rounds 3 --n 4]

Each round, per server: n creates of a busybox vm sandbox (wait=true: restored from the
template checkpoint), one exec each, then a delete of each (wait=true). A first create per
server, not counted, builds the guest assets and the template checkpoint. Prints
p50/p90/p99 in milliseconds and the p50 ratio current/baseline.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct, timed  # noqa: E402

VM = {"template": "busybox", "runtime": "vm", "memory_mb": 256}


def round_on(s, n, out):
    ids = []

    def create():
        st, d = s.json("POST", "/v1/sandboxes?wait=true", VM, timeout=600)
        assert st == 201 and d["sandbox"]["state"] == "running", d
        ids.append(d["sandbox"]["id"])

    def call(method, path, body=None):
        st, d = s.json(method, path, body, timeout=600)
        assert st in (200, 204), (path, st, d)

    for _ in range(n):
        out.setdefault("vm create-to-ready (wait=true)", []).append(timed(create))
        sid = ids[-1]
        out.setdefault("vm exec echo", []).append(
            timed(lambda: call("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "hi"]})))
    for sid in ids:
        out.setdefault("vm delete (wait=true)", []).append(timed(lambda: call("DELETE", "/v1/sandboxes/%s?wait=true" % sid)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=4)
    a = ap.parse_args()
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE: a space binary from before the VMM reaper (e.g. a build of b58b0cd)")
    servers = {}
    # The harness starts its module-level SPACE_BIN; each server keeps the binary it started.
    for name, binary in (("current", harness.SPACE_BIN), ("baseline", base_bin)):
        harness.SPACE_BIN = binary
        servers[name] = harness.Server(extra_args=["--no-egress"]).start()
    results = {k: {} for k in servers}
    try:
        for s in servers.values():
            round_on(s, 1, {})  # guest assets, template checkpoint
        for r in range(a.rounds):
            for name in (["current", "baseline"] if r % 2 == 0 else ["baseline", "current"]):
                round_on(servers[name], a.n, results[name])
    finally:
        for s in servers.values():
            s.cleanup()
    print("| measure | n | baseline p50 / p90 / p99 ms | current p50 / p90 / p99 ms | p50 ratio |")
    print("|---|---|---|---|---|")
    for measure in results["baseline"]:
        b, c = results["baseline"][measure], results["current"][measure]
        print("| %s | %d+%d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.2fx |" % (
            measure, len(b), len(c), pct(b, 50), pct(b, 90), pct(b, 99), pct(c, 50), pct(c, 90), pct(c, 99),
            pct(c, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
