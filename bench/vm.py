"""The `vm` runtime: cold boot against restore from a full checkpoint against fork, in one
run, with the speedup of restore over cold boot, and what a full checkpoint stores.

    SPACE_BIN=build/bin/space python3 bench/vm.py [--n 5] [--memory-mb 256]

Times are client-observed (POST ...?wait=true until the sandbox runs and its guest answered),
so they include the node's work: cold boot = new root + disk clone + VMM start + kernel boot
+ spaced's hello (on a node started with SPACE_VM_TEMPLATE_CHECKPOINTS=0); create from the
template checkpoint = the default create path (reflinks of a saved, booted template VM, then
-incoming), on a second node; restore = create from_snapshot (root from the local snapshot, VMM started
with -incoming, guest resynced); fork = snapshot now (memory checkpoint + disk) + restore.
Under TCG (no /dev/kvm) unless the host has KVM; the output says which.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Server  # noqa: E402
from stats import pct, timed_result  # noqa: E402


def vm_accelerator():
    # As the node decides (src/runtime/vm/kvm_probe.h): the VMM runs as the sandbox's uid and
    # opens /dev/kvm as other (0666) or through its group, which must be read-write and not root's.
    try:
        st = os.stat("/dev/kvm")
    except OSError:
        return "TCG (no /dev/kvm)"
    if st.st_mode & 0o006 != 0o006 and (st.st_gid == 0 or st.st_mode & 0o060 != 0o060):
        return "TCG (/dev/kvm is open neither to all nor to a kvm group)"
    return "KVM"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--memory-mb", type=int, default=256)
    a = ap.parse_args()
    accel = vm_accelerator()
    # Creates from the template checkpoint, on a node that keeps them (the default).
    tmpl = Server().start()
    try:
        body = {"template": "busybox", "runtime": "vm", "memory_mb": a.memory_mb}
        ms_first = None
        from_tmpl = []
        for i in range(a.n + 1):
            t = time.perf_counter()
            st, d = tmpl.json("POST", "/v1/sandboxes?wait=true", body, timeout=600)
            ms = (time.perf_counter() - t) * 1000
            if st != 201 or d["sandbox"]["state"] != "running":
                raise RuntimeError("create failed: %s %s" % (st, d))
            if i == 0:
                ms_first = ms
            else:
                from_tmpl.append(ms)
                steps_tmpl = d["sandbox"]["timings"]["steps"]
            tmpl.json("DELETE", "/v1/sandboxes/%s?wait=true" % d["sandbox"]["id"])
    finally:
        tmpl.cleanup()
    # Everything else with cold boots (no template checkpoints).
    os.environ["SPACE_VM_TEMPLATE_CHECKPOINTS"] = "0"
    s = Server().start()
    vm = {"template": "busybox", "runtime": "vm", "memory_mb": a.memory_mb}
    try:
        def create(body):
            st, d = s.json("POST", "/v1/sandboxes?wait=true", body, timeout=600)
            if st != 201 or d["sandbox"]["state"] != "running":
                raise RuntimeError("create failed: %s %s\n%s" % (st, d, s.log_tail()))
            return d["sandbox"]

        # Warm-up: kernel fetch, initramfs, template image (cached afterwards).
        ms, first = timed_result(lambda: create(vm))
        print("first vm create (builds the cached guest assets): %.0f ms" % ms)
        s.exec(first["id"], ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.2; done &"])
        cold, restore, fork, snap_ms = [], [], [], []
        steps_cold, steps_restore = None, None
        for _ in range(a.n):
            ms, sb = timed_result(lambda: create(vm))
            cold.append(ms)
            steps_cold = sb["timings"]["steps"]
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sb["id"])
        ms, snap = timed_result(lambda: s.json("POST", "/v1/sandboxes/%s/snapshots" % first["id"], {"label": "bench"},
                                               timeout=600)[1])
        snap_ms.append(ms)
        for _ in range(a.n):
            ms, sb = timed_result(lambda: create({"from_snapshot": snap["id"]}))
            restore.append(ms)
            steps_restore = sb["timings"]["steps"]
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sb["id"])
        for _ in range(a.n):
            def do_fork():
                st, d = s.json("POST", "/v1/sandboxes/%s/fork?wait=true" % first["id"], {}, timeout=600)
                if st != 201 or d["sandboxes"][0]["state"] != "running":
                    raise RuntimeError("fork failed: %s %s" % (st, d))
                return d["sandboxes"][0]
            ms, sb = timed_result(do_fork)
            fork.append(ms)
            s.json("DELETE", "/v1/sandboxes/%s?wait=true" % sb["id"])
        # What one full checkpoint stores once exported (incremental, deduplicated, zstd).
        deadline = time.time() + 600
        while time.time() < deadline:
            st, d = s.json("GET", "/v1/snapshots/" + snap["id"])
            if d["state"] in ("restorable", "failed"):
                break
            time.sleep(0.2)
        print()
        print("vm runtime, %s, guest %d MiB, n=%d per row (ms, client-observed)" % (accel, a.memory_mb, a.n))
        print("| operation | p50 | p90 | vs cold boot |")
        print("|---|---|---|---|")
        for name, xs in (("cold boot", cold), ("create from the template checkpoint", from_tmpl),
                         ("restore from a sandbox checkpoint (from_snapshot)", restore),
                         ("fork (checkpoint now + restore)", fork)):
            print("| %s | %.0f | %.0f | %.2fx |" % (name, pct(xs, 50), pct(xs, 90), pct(cold, 50) / pct(xs, 50)))
        print("first create with template checkpoints on (boots, saves the template checkpoint, restores it): %.0f ms"
              % ms_first)
        print("full snapshot of a running VM (checkpoint + disk snapshot): %.0f ms" % snap_ms[0])
        print("speedup of restore over cold boot (p50): %.2fx" % (pct(cold, 50) / pct(restore, 50)))
        print("stored for that snapshot: state %s, %s bytes" % (d["state"], d.get("size_bytes")))
        print("cold boot steps (ms):", json.dumps({k: round(v, 1) for k, v in steps_cold.items()}))
        print("restore steps (ms):", json.dumps({k: round(v, 1) for k, v in steps_restore.items()}))
        print("template-checkpoint create steps (ms):", json.dumps({k: round(v, 1) for k, v in steps_tmpl.items()}))
        for line in s.log_tail(20000).splitlines():
            if "checkpoint snap_" in line or ("exported" in line and snap["id"] in line):
                print("node log:", line.strip()[-200:])
    finally:
        s.cleanup()


if __name__ == "__main__":
    main()
