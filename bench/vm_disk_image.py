"""What making a vm template's disk image costs in the build jail (runtime/vm/guest_assets.h
EnsureTemplateDisk: `du` and `mkfs.ext4 -d` of a fresh root), against an earlier `space`
binary where the node ran them itself with CAP_DAC_READ_SEARCH (SPACE_BIN_BASE).

    SPACE_BIN=build/bin/space SPACE_BIN_BASE=/tmp/base-e62/bin/space python3 bench/vm_disk_image.py [--rounds 3]

Each sample is a fresh `space dev` (so an empty image cache) with template checkpoints off,
whose first vm create builds the busybox template's image: the create's `vm.vm_assets` step (the
guest kernel and initramfs are cached host-wide, so it is the image and its clone), then a
second create's `vm_assets` (the clone alone). Rounds alternate the binaries' order, so the
host's drift weighs on both alike. Prints p50/p90/p99 in milliseconds and the p50 ratio
new/baseline of the first create's step.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
import harness  # noqa: E402
from stats import pct  # noqa: E402

VM = {"template": "busybox", "runtime": "vm", "memory_mb": 256}


def sample(binary):
    """(vm_assets ms of the first vm create, of the second) on a fresh node."""
    harness.SPACE_BIN = binary
    s = harness.Server(extra_args=["--no-egress"]).start()
    try:
        out = []
        for _ in range(2):
            st, d = s.json("POST", "/v1/sandboxes?wait=true", VM, timeout=600)
            if st != 201 or d["sandbox"]["state"] != "running":
                raise RuntimeError("create failed: %s %s\n%s" % (st, d, s.log_tail()))
            out.append(float(d["sandbox"]["timings"]["steps"]["vm.vm_assets"]))
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % d["sandbox"]["id"])
        return out
    finally:
        s.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base_bin = os.environ.get("SPACE_BIN_BASE")
    if not base_bin:
        sys.exit("SPACE_BIN_BASE must name an earlier `space` binary to compare against")
    os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"] = "0"
    bins = {"new": harness.SPACE_BIN, "baseline": base_bin}
    first = {name: [] for name in bins}
    warm = {name: [] for name in bins}
    for r in range(args.rounds):
        for name in (["new", "baseline"] if r % 2 == 0 else ["baseline", "new"]):
            a, b = sample(bins[name])
            first[name].append(a)
            warm[name].append(b)
    print("| vm_assets step | n | new p50 / p90 / p99 ms | baseline p50 / p90 / p99 ms | p50 new/baseline |")
    print("|---|---|---|---|---|")
    for label, data in (("first create (builds the image)", first), ("second create (clone only)", warm)):
        n, b = data["new"], data["baseline"]
        print("| %s | %d | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.2fx |" % (
            label, len(n), pct(n, 50), pct(n, 90), pct(n, 99), pct(b, 50), pct(b, 90), pct(b, 99),
            pct(n, 50) / pct(b, 50)))


if __name__ == "__main__":
    main()
