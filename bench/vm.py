"""The `vm` runtime, interleaved: each round times, for every guest size, a cold boot, a create
restored from the template checkpoint, a restore from a sandbox snapshot and a fork of a
running VM, then one create from the vm warm pool; ratios are against the cold boot of the same
size in the same run. Then the host memory each idle VM restored from one template checkpoint
costs.

    SPACE_BIN=build/bin/space python3 bench/vm.py [--n 30] [--sizes 256,2048] [--idle-vms 4]

Times are client-observed (POST ...?wait=true until the sandbox runs and its guest answered).
Two nodes run side by side: "cold" (SPACE_VM_TEMPLATE_CHECKPOINTS=0, --no-egress: every
create boots the kernel) and "warm" (the defaults, plus --warm-pool busybox:vm=1). Requests
are sequential, never concurrent. The warm pool holds 1-vCPU 512 MiB VMs (docs/vm.md "Warm
pools"), so its row is at 512 MiB whatever --sizes says. The accelerator each node used is
read from its /metrics (space_vm_accelerator).
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Server, node_cgroup_name  # noqa: E402
from stats import pct, pss_bytes, timed_result  # noqa: E402


def accelerator(server):
    _, _, body = server.call("GET", "/metrics")
    m = re.search(r'space_vm_accelerator\{accelerator="([a-z-]+)"\} 1', body.decode())
    return m.group(1) if m else "unknown"


def pool_ready(server):
    _, _, body = server.call("GET", "/metrics")
    m = re.search(r'space_warm_pool_size\{template="busybox",runtime="vm"\} (\d+)', body.decode())
    return int(m.group(1)) if m else 0


def wait_pool(server, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pool_ready(server) >= 1:
            return
        time.sleep(0.1)
    raise RuntimeError("vm warm pool did not fill\n" + server.log_tail())


def create(server, body):
    st, d = server.json("POST", "/v1/sandboxes?wait=true", body, timeout=900)
    if st != 201 or d["sandbox"]["state"] != "running":
        raise RuntimeError("create failed: %s %s\n%s" % (st, d, server.log_tail()))
    return d["sandbox"]


def fork(server, sid):
    st, d = server.json("POST", "/v1/sandboxes/%s/fork?wait=true" % sid, {}, timeout=900)
    if st != 201 or d["sandboxes"][0]["state"] != "running":
        raise RuntimeError("fork failed: %s %s\n%s" % (st, d, server.log_tail()))
    return d["sandboxes"][0]


def snapshot(server, sid):
    st, d = server.json("POST", "/v1/sandboxes/%s/snapshots" % sid, {"label": "bench"}, timeout=900)
    if st != 201:
        raise RuntimeError("snapshot failed: %s %s" % (st, d))
    return d


def destroy(server, sid):
    server.json("DELETE", "/v1/sandboxes/%s?wait=true" % sid, timeout=300)


def vm_memory(server, sid):
    """One vm sandbox's host memory, from its cgroup (v1 memory controller): anonymous memory
    (QEMU's heap, TCG's translation cache), guest RAM file pages mapped by QEMU, other page cache
    (read-ahead of the RAM file and the disk image: reclaimable), in bytes; and the proportional
    set size of its processes (the VMM and its reaper)."""
    parent = node_cgroup_name(server.data_dir) + "-vm"
    d = "/sys/fs/cgroup/memory/%s/%s" % (parent, sid)
    if not os.path.isdir(d):  # cgroup v2: other names for the same counters
        d = "/sys/fs/cgroup/%s/%s" % (parent, sid)
    stat = {}
    with open(d + "/memory.stat") as f:
        for line in f:
            k, v = line.split()
            stat[k] = int(v)
    if "total_rss" not in stat:
        stat = {"total_rss": stat["anon"], "total_mapped_file": stat["file_mapped"], "total_cache": stat["file"]}
    with open(d + "/cgroup.procs") as f:
        pss = sum(pss_bytes(pid) for pid in f.read().split())
    return {"anon": stat["total_rss"], "mapped": stat["total_mapped_file"],
            "other_cache": stat["total_cache"] - stat["total_mapped_file"], "pss": pss}


def row(name, xs, base):
    return "| %s | %d | %.0f | %.0f | %.0f | %.3fx |" % (name, len(xs), pct(xs, 50), pct(xs, 90), pct(xs, 99),
                                                      pct(xs, 50) / pct(base, 50))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--sizes", default="256,2048")
    ap.add_argument("--idle-vms", type=int, default=4)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]

    warm = Server(extra_args=["--warm-pool", "busybox:vm=1"]).start()
    os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"] = "0"
    cold = Server(extra_args=["--no-egress"])
    try:
        cold.start()
        del os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"]
        # Warm-up, untimed: guest assets, template images, a template checkpoint per size, the
        # first pooled VM, and a running origin per size for the forks and snapshots.
        destroy(cold, create(cold, {"template": "busybox", "runtime": "vm", "memory_mb": sizes[0]})["id"])
        origins, snaps = {}, {}
        for m in sizes:
            t = time.perf_counter()
            origins[m] = create(warm, {"template": "busybox", "runtime": "vm", "memory_mb": m})["id"]
            print("first %d MiB create on the warm node (makes the template checkpoint): %.0f ms"
                  % (m, (time.perf_counter() - t) * 1000), flush=True)
            warm.exec(origins[m], ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /dev/shm/n; sleep 1; done &"])
            snaps[m] = snapshot(warm, origins[m])["id"]
        wait_pool(warm)

        rows = {m: {"cold": [], "tmpl": [], "snap": [], "fork": []} for m in sizes}
        pooled = []
        steps = {}
        for i in range(a.n):
            for m in sizes:
                r = rows[m]
                ms, sb = timed_result(lambda: create(cold, {"template": "busybox", "runtime": "vm", "memory_mb": m}))
                r["cold"].append(ms)
                steps["cold %d" % m] = sb["timings"]["steps"]
                destroy(cold, sb["id"])
                ms, sb = timed_result(lambda: create(warm, {"template": "busybox", "runtime": "vm", "memory_mb": m}))
                r["tmpl"].append(ms)
                steps["template checkpoint %d" % m] = sb["timings"]["steps"]
                destroy(warm, sb["id"])
                ms, sb = timed_result(lambda: create(warm, {"from_snapshot": snaps[m]}))
                r["snap"].append(ms)
                destroy(warm, sb["id"])
                ms, sb = timed_result(lambda: fork(warm, origins[m]))
                r["fork"].append(ms)
                destroy(warm, sb["id"])
            wait_pool(warm)
            ms, sb = timed_result(lambda: create(warm, {"template": "busybox", "runtime": "vm"}))
            if "warm_pool" not in sb["timings"]["steps"]:
                raise RuntimeError("create did not come from the pool: %s" % sb["timings"])
            pooled.append(ms)
            destroy(warm, sb["id"])
            print("round %d/%d done" % (i + 1, a.n), flush=True)

        # Host memory per idle VM restored from one template checkpoint.
        idle = [create(warm, {"template": "busybox", "runtime": "vm", "memory_mb": sizes[0]})["id"]
                for _ in range(a.idle_vms)]
        time.sleep(5)
        mem = [vm_memory(warm, sid) for sid in idle]

        accel_cold, accel_warm = accelerator(cold), accelerator(warm)
        print()
        print("vm runtime; accelerator: cold node %s, warm node %s; n=%d per row, interleaved; "
              "ms, client-observed" % (accel_cold, accel_warm, a.n))
        print()
        print("| guest | operation | n | p50 | p90 | p99 | vs cold boot (p50) |")
        print("|---|---|---|---|---|---|---|")
        for m in sizes:
            r = rows[m]
            for key, name in (("cold", "cold boot (kernel + initramfs + spaced hello)"),
                              ("tmpl", "create restored from the template checkpoint"),
                              ("snap", "restore from a sandbox snapshot (from_snapshot)"),
                              ("fork", "fork of a running VM (checkpoint now + restore)")):
                print("| %d MiB %s" % (m, row(name, r[key], r["cold"])))
        print("| 512 MiB %s" % row("create from the vm warm pool (vs the %d MiB cold boot)" % sizes[0], pooled,
                                   rows[sizes[0]]["cold"]))
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            print()
            for key, name in (("tmpl", "template-checkpoint create"), ("snap", "snapshot restore"), ("fork", "fork"),
                              ("cold", "cold boot")):
                print("%s: %d MiB / %d MiB guest (p50): %.2fx" % (name, hi, lo,
                                                                   pct(rows[hi][key], 50) / pct(rows[lo][key], 50)))
        print()
        for sid, m in zip(idle, mem):
            print("idle %d MiB VM %s: anonymous %.1f MiB + mapped RAM file %.1f MiB = %.1f MiB resident; "
                  "other page cache %.1f MiB (reclaimable); PSS of the VMM's processes %.1f MiB"
                  % (sizes[0], sid, m["anon"] / 2**20, m["mapped"] / 2**20, (m["anon"] + m["mapped"]) / 2**20,
                     m["other_cache"] / 2**20, m["pss"] / 2**20))
        for k, v in steps.items():
            print("steps, last %s (ms): %s" % (k, {s: round(x, 1) for s, x in v.items()}))
        for line in warm.log_tail(400000).splitlines():
            if "checkpoint snap_" in line:
                print("node log:", line.strip()[-160:])
    finally:
        warm.cleanup()
        cold.cleanup()


if __name__ == "__main__":
    main()
