"""The escape suite on the vm runtime (run.py calls `run_all`): every in-sandbox attempt of
probe.py runs in a vm sandbox too, as its root and as its `user`, with an egress profile and a
credential as the ns sandbox has them.

Inside a VM the sandbox's root is root of a guest kernel of its own: mounting its disk, writing
its /proc/sys, loading its modules, unsharing namespaces are the guest's own business and no
boundary. So the probe's cases split in two:

- boundary cases (BOUNDARY): whether anything of the host, another sandbox, the network or the
  credential is reached. Their verdicts count, as for ns, under the name `vm.<case>`.
- the rest: what the guest kernel lets its root do to itself. Listed (GUEST_OWN), with no
  verdict; what would matter of them is whether they reach the host, and the host checks that
  here (`vm.host_unchanged.*`), each with the guest's own success as its positive control.

Plus the hostile guest on the VM's channel (forged frames on spaced's virtio-console port).
"""
import json
import os
import shutil
import socket

BOUNDARY = {
    "fs.host_marker_by_path", "fs.host_data_dir_absent", "fs.host_paths_absent", "fs.proc1_root_dotdot",
    "fs.proc1_exe_write", "fs.proc_fd_leak", "fs.proc_fd_dir_dotdot", "fs.chroot_breakout",
    "fs.new_mountns_umount_root", "fs.pivot_root_to_old_root", "k.ptrace_host_pids", "k.process_vm_readv_host_pids",
    "k.host_sysv_ipc", "k.host_abstract_unix_socket",
}
GUEST_OWN = []  # (case, user, what the guest allowed), printed by run.py


def is_boundary(case):
    return case in BOUNDARY or case.startswith("net.")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def run_all(ctx, record, run_probe, alive, here, keep_busy=lambda ctx: None):
    """Creates the vm sandboxes, runs the probe in them and the host checks after it."""
    if not shutil.which("qemu-system-x86_64"):
        print("tests/security: no qemu-system-x86_64; the vm runtime's attempts are not run", flush=True)
        return
    host_before = {p: read(p) for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                                        "/proc/sys/kernel/panic")}
    hostname = socket.gethostname()
    v = ctx.create(credentials=["tok"], runtime="vm", memory_mb=512)
    ctx.created.append(v)
    root_dir = os.path.join(ctx.s.data_dir, "pool", "sandboxes", v)
    host_paths = [root_dir] + [os.path.join(root_dir, n) for n in sorted(os.listdir(root_dir))]
    with open(os.path.join(here, "probe.py"), "rb") as f:
        assert ctx.put_file(v, "/tmp/probe.py", f.read()) in (200, 201)
    results = []
    keep_busy(ctx)
    for user in ("root", "user"):
        extra = {"host_paths": host_paths, "runtime": "vm"}
        if user == "root":
            extra["prepare"] = True
        results += run_probe(ctx, v, user, extra, keep=False)
    for r in results:
        if is_boundary(r["case"]):
            record("vm." + r["case"], r["held"], r["detail"], r["user"])
        elif not r["held"]:
            GUEST_OWN.append((r["case"], r["user"], r["detail"]))
    got = {(r["case"], r["user"]): r for r in results}

    def host_check(name, case, control_text, unchanged, detail):
        # The control: the guest did what the case tried (it is root of its own kernel).
        guest = got.get((case, "root"))
        did = guest is not None and not guest["held"] and control_text in guest["detail"]
        if not did:
            record(name, None, "control failed: the guest could not %s (%s), so this proves nothing" %
                   (control_text, guest and guest["detail"][:120]))
            return
        record(name, unchanged, detail)

    host_check("vm.host_unchanged.core_pattern", "fs.write_core_pattern", "wrote /proc/sys/kernel/core_pattern",
               read("/proc/sys/kernel/core_pattern") == host_before["/proc/sys/kernel/core_pattern"],
               "the guest wrote its core_pattern; the host's is %r" % read("/proc/sys/kernel/core_pattern"))
    if host_before["/proc/sys/kernel/modprobe"] is not None:  # a host without modules has none
        host_check("vm.host_unchanged.modprobe", "fs.write_modprobe_path", "wrote /proc/sys/kernel/modprobe",
                   read("/proc/sys/kernel/modprobe") == host_before["/proc/sys/kernel/modprobe"],
                   "the guest wrote its modprobe path; the host's is %r" % read("/proc/sys/kernel/modprobe"))
    host_check("vm.host_unchanged.panic", "fs.write_proc_sys_vm", "wrote /proc/sys/kernel/panic",
               read("/proc/sys/kernel/panic") == host_before["/proc/sys/kernel/panic"],
               "the guest wrote its kernel.panic; the host's is %r" % read("/proc/sys/kernel/panic"))
    # Its hostname and its block device: the guest's own, and the host sees neither change.
    d = ctx.sh(v, "hostname pwned-by-vm && hostname")
    record("vm.host_unchanged.hostname", d["stdout"] == "pwned-by-vm\n" and socket.gethostname() == hostname,
           "guest hostname now %r (the control), the host's %s" % (d["stdout"].strip(), socket.gethostname()))
    # The hostile guest: root of the VM writes forged frames to spaced's channel.
    forging = ctx.create(profiles=None, runtime="vm", memory_mb=256)
    ctx.created.append(forging)
    with open(os.path.join(here, "probe.py"), "rb") as f:
        ctx.put_file(forging, "/tmp/probe.py", f.read())
    cfg = {"forge_frames": True, "only": ["guest.forged_frames_to_node"], "runtime": "vm"}
    st, out = ctx.json("POST", "/v1/sandboxes/%s/exec" % forging,
                       {"cmd": ["python3", "/tmp/probe.py", json.dumps(cfg)], "timeout_s": 60}, timeout=120)
    # The control: the probe reached spaced's port and wrote. When it could not, its exec comes
    # back with the reason; when it did, the channel is wrecked and the exec's answer is lost
    # with it (an error, or a run without the probe's line).
    said = out.get("stdout", "") if isinstance(out, dict) else ""
    could_not = st == 200 and '"held"' in said and "sent" not in said
    ok = alive(ctx) and ctx.sh(ctx.b, "echo ok")["stdout"] == "ok\n" and ctx.sh(v, "echo ok")["stdout"] == "ok\n"
    st2, rec = ctx.json("GET", "/v1/sandboxes/%s" % forging)
    state = rec.get("state") if isinstance(rec, dict) else rec
    error = rec.get("error", "") if isinstance(rec, dict) else ""
    if state == "failed":  # the node refused a frame: it drops the channel and says why
        ok = ok and "guest agent is gone" in error
    if could_not:
        record("vm.guest.forged_frames_node_survives", None, "control failed: the probe sent nothing: " + said[-200:])
    else:
        record("vm.guest.forged_frames_node_survives", ok,
               "node alive, neighbours (ns and vm) work; forging vm now %s (exec -> %s) %s" % (state, st, error[-90:]))

    # Its disk: root of the VM overwrites 64 KiB of its own block device (the control: it reads
    # them back). A VM created afterwards from the same template has its own copy, unchanged.
    seek = "bs=64k seek=16 conv=notrunc,fsync"
    d = ctx.sh(v, "dd if=/dev/urandom of=/tmp/junk bs=64k count=1 2>/dev/null && dd if=/tmp/junk of=/dev/vda %s "
                  "2>/dev/null && sha256sum < /tmp/junk && dd if=/dev/vda bs=64k skip=16 count=1 2>/dev/null | "
                  "sha256sum" % seek)
    sums = d["stdout"].split("\n")
    junk = sums[0].split()[0] if sums and sums[0] else ""
    if d["exit_code"] != 0 or len(sums) < 2 or not junk or sums[1].split()[:1] != [junk]:
        record("vm.disk_writes_stay_in_its_copy", None, "control failed: the guest's write did not land: %r" % d)
        return
    w = ctx.create(profiles=None, runtime="vm", memory_mb=256)
    ctx.created.append(w)
    d = ctx.sh(w, "dd if=/dev/vda bs=64k skip=16 count=1 2>/dev/null | sha256sum")
    record("vm.disk_writes_stay_in_its_copy", d["stdout"].split()[:1] != [junk],
           "the guest wrote %s... on its /dev/vda; a new VM of the template reads %s..." % (junk[:12], d["stdout"][:12]))
