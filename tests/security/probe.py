"""Escape attempts made from inside a sandbox. Uploaded into the sandbox and run there with
python3, once as root and once as the unprivileged `user` (uid 1000):

    python3 probe.py '<json config>'

Prints one JSON object per line: {"case", "held", "detail"}. `held` is true when the attempt
failed to do what it tried (the sandbox held). Every case runs in its own forked child with
a time limit, so a case that crashes or hangs is reported (as broken) instead of taking the
rest down. Standard library only (ctypes for raw syscalls); x86_64 syscall numbers.
"""
import ctypes
import ctypes.util
import errno
import json
import mmap
import os
import signal
import socket
import struct
import sys
import time

CFG = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
ROOT = os.geteuid() == 0
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.syscall.restype = ctypes.c_long

NR = {
    "read": 0, "write": 1, "mmap": 9, "ioctl": 16, "clone": 56, "kill": 62, "ptrace": 101, "syslog": 103,
    "setuid": 105, "setresuid": 117, "setresgid": 119, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "settimeofday": 164, "adjtimex": 159,
    "clock_settime": 227, "clock_adjtime": 305, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "finit_module": 313, "sched_setattr": 314, "bpf": 321,
    "kexec_file_load": 320, "userfaultfd": 323, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438,
    "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "lookup_dcookie": 212, "uselib": 134, "nfsservctl": 180, "quotactl_fd": 443,
}
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x2000000
HOST_MARKER = CFG.get("host_marker", "/nonexistent-marker")
CASES = []


def case(name, users=("root", "user")):
    def wrap(fn):
        CASES.append((name, users, fn))
        return fn
    return wrap


def sys_call(name, *args):
    """Raw syscall; returns (rc, errno)."""
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc, ctypes.get_errno()


def refused(name, *args, want=(errno.EPERM,)):
    rc, err = sys_call(name, *args)
    return rc < 0 and err in want, "%s -> rc=%d %s" % (name, rc, errno.errorcode.get(err, err))


def marker_visible():
    """True if the host's marker file can be seen from here (by name, or anywhere near)."""
    return os.path.exists(HOST_MARKER)


def mount(src, target, fstype, flags=0, data=None):
    ctypes.set_errno(0)
    rc = libc.mount(src.encode() if src else None, target.encode(), fstype.encode() if fstype else None,
                    ctypes.c_ulong(flags), data.encode() if data else None)
    return rc, ctypes.get_errno()


def try_write(path, data=b"1"):
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        return False, "open %s: %s" % (path, e.strerror)
    try:
        os.write(fd, data)
        return True, "wrote %s" % path
    except OSError as e:
        return False, "write %s: %s" % (path, e.strerror)
    finally:
        os.close(fd)


# --- filesystem ---------------------------------------------------------------------------

@case("fs.host_marker_by_path")
def _():
    return not marker_visible(), "exists(%s)=%s" % (HOST_MARKER, marker_visible())


@case("fs.host_data_dir_absent")
def _():
    d = CFG.get("data_dir", "/var/lib/space")
    seen = [p for p in ("state.db", "api-key", "credentials.kek", "e2b-token.key") if os.path.exists(os.path.join(d, p))]
    return not seen, "host data files visible: %s" % seen


@case("fs.host_paths_absent")
def _():
    """Paths that exist on the host only (the host checked, as the control): this sandbox's own
    root directory and disk files there, the node's data dir."""
    seen = [p for p in CFG.get("host_paths", []) if os.path.lexists(p)]
    return not seen, "host paths visible here: %s (of %d)" % (seen, len(CFG.get("host_paths", [])))


@case("fs.proc1_root_dotdot")
def _():
    try:
        a, b = os.stat("/proc/1/root/../../.."), os.stat("/")
    except PermissionError:
        return True, "/proc/1/root: permission denied"
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino), "/proc/1/root/../../.. is / of the sandbox"


@case("fs.proc1_exe_write")
def _():
    for p in ("/proc/1/exe", "/proc/self/exe"):
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            os.close(fd)
            st = os.stat(p)
            if st.st_dev != os.stat("/").st_dev:
                return False, "opened %s for writing (not on the sandbox root)" % p
        except OSError:
            pass
    return True, "no binary outside the sandbox root writable via /proc/*/exe"


@case("fs.proc_fd_leak")
def _():
    """No fd of any process here leads to a directory or file outside the sandbox."""
    bad = []
    root_ids = set()
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            link = "/proc/%s/fd/%s" % (pid, fd)
            try:
                target = os.readlink(link)
                st = os.stat(link)
            except OSError:
                continue
            if not target.startswith("/"):
                continue  # socket:, pipe:, anon_inode:
            if target.startswith("/proc/") or target.startswith("/dev/"):
                continue
            try:
                inside = os.stat(target.replace(" (deleted)", ""))
                if (inside.st_dev, inside.st_ino) == (st.st_dev, st.st_ino):
                    continue
            except OSError:
                if target.endswith(" (deleted)"):
                    continue
            bad.append("%s -> %s" % (link, target))
    del root_ids
    return not bad, "fds leading outside: %s" % bad[:5]


@case("fs.proc_fd_dir_dotdot")
def _():
    """Walking up from every directory fd of PID 1 ends at the sandbox's own /."""
    me = os.stat("/")
    try:
        fds = os.listdir("/proc/1/fd")
    except OSError as e:
        return True, "cannot list /proc/1/fd: %s" % e.strerror
    for fd in fds:
        p = "/proc/1/fd/%s" % fd
        try:
            if not os.path.isdir(p):
                continue
            top = os.stat(p + "/.." * 40)
        except OSError:
            continue
        if (top.st_dev, top.st_ino) != (me.st_dev, me.st_ino):
            return False, "%s/.. reaches another root" % p
    return True, "every directory fd of pid 1 stays under /"


@case("fs.chroot_breakout", users=("root", "user"))
def _():
    os.makedirs("/tmp/jail-%d" % os.getuid(), exist_ok=True)
    try:
        os.chroot("/tmp/jail-%d" % os.getuid())
    except OSError as e:
        return True, "chroot: %s" % e.strerror
    for _ in range(64):
        os.chdir("..")
    os.chroot(".")
    return not marker_visible() and os.path.exists("/tmp/jail-%d" % os.getuid()), \
        "after the classic chroot breakout / is still the sandbox root"


@case("fs.new_mountns_umount_root")
def _():
    rc, err = sys_call("unshare", CLONE_NEWNS)
    if rc != 0:
        return True, "unshare(NEWNS): %s" % errno.errorcode.get(err)
    libc.umount2(b"/", 2)  # MNT_DETACH
    os.chdir("/")
    libc.chroot(b".")
    return not marker_visible(), "after unshare+umount -l / the host root is not reachable"


@case("fs.pivot_root_to_old_root")
def _():
    rc, err = sys_call("unshare", CLONE_NEWNS)
    if rc != 0:
        return True, "unshare(NEWNS): %s" % errno.errorcode.get(err)
    mount(None, "/", None, 0x40000 | 0x4000)  # MS_PRIVATE|MS_REC
    os.makedirs("/tmp/newroot", exist_ok=True)
    mount("tmpfs", "/tmp/newroot", "tmpfs")
    os.makedirs("/tmp/newroot/old", exist_ok=True)
    rc = libc.syscall(155, b"/tmp/newroot", b"/tmp/newroot/old")  # pivot_root
    if rc != 0:
        return True, "pivot_root: %s" % errno.errorcode.get(ctypes.get_errno())
    seen = os.path.exists("/old" + HOST_MARKER)
    return not seen, "the old root after pivot_root is the sandbox's, not the host's"


@case("fs.mount_host_block_device")
def _():
    for dev in ("/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/vda1", "/dev/loop0"):
        for fs in ("ext4", "btrfs", "xfs"):
            os.makedirs("/tmp/m", exist_ok=True)
            rc, err = mount(dev, "/tmp/m", fs)
            if rc == 0:
                return False, "mounted %s as %s" % (dev, fs)
    return True, "no host block device mountable"


@case("fs.mknod_block_device")
def _():
    try:
        os.mknod("/tmp/blk-%d" % os.getuid(), 0o600 | 0o060000, os.makedev(253, 0))
    except OSError as e:
        return True, "mknod b 253:0: %s" % e.strerror
    try:
        fd = os.open("/tmp/blk-%d" % os.getuid(), os.O_RDONLY)
        os.close(fd)
        return False, "opened a block device node"
    except OSError as e:
        return True, "node made but open: %s" % e.strerror


@case("fs.mknod_mem_device")
def _():
    try:
        os.mknod("/tmp/mem-%d" % os.getuid(), 0o600 | 0o020000, os.makedev(1, 1))
    except OSError as e:
        return True, "mknod c 1:1: %s" % e.strerror
    try:
        with open("/tmp/mem-%d" % os.getuid(), "rb") as f:
            f.read(16)
        return False, "read /dev/mem through a new node"
    except OSError as e:
        return True, "node made but open: %s" % e.strerror


@case("fs.open_raw_devices")
def _():
    opened = []
    for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/vda", "/dev/sda", "/dev/kmsg", "/dev/kvm",
                "/dev/mapper/control", "/dev/loop-control", "/dev/btrfs-control", "/dev/fuse", "/dev/console"):
        try:
            fd = os.open(dev, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
            opened.append(dev)
        except OSError:
            pass
    return not opened, "opened: %s" % opened


@case("fs.remount_proc_sys_rw")
def _():
    rc, err = mount(None, "/proc/sys", None, 0x20 | 0x1000)  # MS_REMOUNT|MS_BIND, rw
    if rc == 0:
        ok, d = try_write("/proc/sys/kernel/hostname", b"x")
        return not ok, "remount rw succeeded; " + d
    return True, "remount /proc/sys rw: %s" % errno.errorcode.get(err)


@case("fs.umount_masked_proc")
def _():
    libc.umount2(b"/proc/kcore", 2)
    libc.umount2(b"/proc/sysrq-trigger", 2)
    try:
        with open("/proc/kcore", "rb") as f:
            data = f.read(64)
    except OSError as e:
        return True, "kcore: %s" % e.strerror
    return not data, "kcore read %d bytes" % len(data)


@case("fs.fresh_procfs_unmasked")
def _():
    rc, err = sys_call("unshare", CLONE_NEWNS)
    if rc != 0:
        return True, "unshare(NEWNS): %s" % errno.errorcode.get(err)
    os.makedirs("/tmp/p2", exist_ok=True)
    rc, err = mount("proc", "/tmp/p2", "proc")
    if rc != 0:
        return True, "mount proc: %s" % errno.errorcode.get(err)
    ok, d = try_write("/tmp/p2/sysrq-trigger", b"h")
    ok2, d2 = try_write("/tmp/p2/sys/kernel/core_pattern", b"|/tmp/x")
    return not ok and not ok2, d + "; " + d2


@case("fs.name_to_handle_at")
def _():
    buf = ctypes.create_string_buffer(128 + 8)
    struct.pack_into("I", buf, 0, 128)
    mid = ctypes.c_int()
    return refused("name_to_handle_at", -100, b"/", buf, ctypes.byref(mid), 0)


@case("fs.open_by_handle_at")
def _():
    # The "shocker" escape: a handle for the host root directory (inode 2 on ext4).
    # The mount fd is a real one (this root), so only the filter can be why it fails; the run
    # makes the same call on the host, where it works, as the control.
    buf = ctypes.create_string_buffer(8 + 8)
    struct.pack_into("IiQ", buf, 0, 8, 1, 2)
    mount_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        return refused("open_by_handle_at", mount_fd, buf, 0)
    finally:
        os.close(mount_fd)


@case("fs.read_proc_kcore")
def _():
    try:
        with open("/proc/kcore", "rb") as f:
            return not f.read(64), "kcore readable but empty"
    except OSError as e:
        return True, "kcore: %s" % e.strerror


@case("fs.proc_kallsyms_addresses")
def _():
    try:
        with open("/proc/kallsyms") as f:
            lines = [f.readline() for _ in range(50)]
    except OSError as e:
        return True, "kallsyms: %s" % e.strerror
    nonzero = [l for l in lines if l and int(l.split()[0], 16) != 0]
    return not nonzero, "kernel addresses exposed: %d" % len(nonzero)


@case("fs.write_sysrq_trigger")
def _():
    ok, d = try_write("/proc/sysrq-trigger", b"h")
    return not ok, d


@case("fs.write_core_pattern")
def _():
    ok, d = try_write("/proc/sys/kernel/core_pattern", b"|/tmp/pwn")
    return not ok, d


@case("fs.write_modprobe_path")
def _():
    ok, d = try_write("/proc/sys/kernel/modprobe", b"/tmp/pwn")
    return not ok, d


@case("fs.write_proc_sys_vm")
def _():
    ok, d = try_write("/proc/sys/vm/drop_caches", b"3")
    ok2, d2 = try_write("/proc/sys/kernel/panic", b"1")
    return not ok and not ok2, d + "; " + d2


@case("fs.write_sys_kernel")
def _():
    outs = [try_write(p) for p in ("/sys/kernel/uevent_helper", "/sys/power/state", "/sys/kernel/mm/ksm/run",
                                   "/sys/module/kernel/parameters/panic")]
    return not any(o[0] for o in outs), "; ".join(o[1] for o in outs)


@case("fs.cgroup_v1_release_agent")
def _():
    rc, err = sys_call("unshare", CLONE_NEWNS)
    os.makedirs("/tmp/cg1", exist_ok=True)
    for ctl in ("rdma", "memory", "pids", "cpu"):
        rc, err = mount("cgroup", "/tmp/cg1", "cgroup", 0, ctl)
        if rc == 0:
            ok, d = try_write("/tmp/cg1/release_agent", b"/tmp/pwn")
            return not ok, "mounted cgroup v1 %s; %s" % (ctl, d)
    return True, "mount cgroup v1: %s" % errno.errorcode.get(err)


@case("fs.cgroup_move_out")
def _():
    before = open("/proc/self/cgroup").read()
    tried = []
    for p in ("/sys/fs/cgroup/../cgroup.procs", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/init.scope/cgroup.procs"):
        ok, d = try_write(p, str(os.getpid()).encode())
        tried.append(d)
    after = open("/proc/self/cgroup").read()
    return before == after or after.strip() == "0::/", "cgroup before %r after %r (%s)" % (
        before.strip(), after.strip(), "; ".join(tried))


@case("fs.binfmt_misc_register")
def _():
    # Since Linux 6.7 binfmt_misc is per user namespace: a sandbox may mount its own instance
    # and register handlers that apply only inside it. The host-side attempt
    # fs.binfmt_misc_reaches_host checks the host's instance never sees the entry.
    rule = b":spacesec:E::spacesec::/tmp/pwn:"
    os.makedirs("/tmp/bm", exist_ok=True)
    rc, err = mount("binfmt_misc", "/tmp/bm", "binfmt_misc")
    if rc != 0:
        ok, d = try_write("/proc/sys/fs/binfmt_misc/register", rule)
        return not ok, "mount binfmt_misc: %s; %s" % (errno.errorcode.get(err), d)
    ok, d = try_write("/tmp/bm/register", rule)
    if ok and not CFG.get("binfmt_per_userns"):
        return False, d + " on a kernel without per-namespace binfmt_misc"
    return True, d + (" (the sandbox's own per-userns instance)" if ok else "")


@case("fs.mount_debug_filesystems")
def _():
    got = []
    for fs in ("debugfs", "tracefs", "securityfs", "configfs", "bpf", "pstore", "efivarfs", "hugetlbfs"):
        os.makedirs("/tmp/fs-" + fs, exist_ok=True)
        rc, _ = mount(fs, "/tmp/fs-" + fs, fs)
        if rc == 0:
            got.append(fs)
            libc.umount2(("/tmp/fs-" + fs).encode(), 2)
    return not got, "mounted: %s" % got


@case("fs.btrfs_subvolume_create")
def _():
    # BTRFS_IOC_SUBVOL_CREATE = _IOW(0x94, 14, struct btrfs_ioctl_vol_args[4096])
    req = (1 << 30) | (4096 << 16) | (0x94 << 8) | 14
    fd = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    args = ctypes.create_string_buffer(4096)
    args.raw = b"\0" * 8 + b"escape-subvol" + b"\0" * (4096 - 8 - 13)
    rc, err = sys_call("ioctl", fd, req, args)
    os.close(fd)
    return rc < 0 and err in (errno.EPERM, errno.ENOTTY, errno.EOPNOTSUPP), "ioctl SUBVOL_CREATE: %s" % errno.errorcode.get(err)


# --- privilege (user -> root inside) ------------------------------------------------------

@case("priv.setuid0", users=("user",))
def _():
    try:
        os.setuid(0)
        return False, "setuid(0) succeeded"
    except OSError as e:
        return True, "setuid(0): %s" % e.strerror


@case("priv.rewrite_id_maps")
def _():
    # The maps were written once, from the host (by the root broker): the kernel takes no
    # second write, from the sandbox's root least of all. One that worked would map host uid 0.
    got = []
    for path in ("/proc/self/uid_map", "/proc/self/gid_map", "/proc/1/uid_map"):
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            got.append("%s: open %s" % (path, errno.errorcode.get(e.errno)))
            continue
        try:
            os.write(fd, b"0 0 4294967295\n")
            return False, "wrote " + path
        except OSError as e:
            got.append("%s: write %s" % (path, errno.errorcode.get(e.errno)))
        finally:
            os.close(fd)
    return True, "; ".join(got)


@case("priv.become_unmapped_ids")
def _():
    # Ids beyond the sandbox's 65536 would be another sandbox's host uids (or the host's, for
    # the overflow id's neighbours): none is mapped, so no set*id call can reach one.
    got = []
    for name, ident in (("setresuid", 65536), ("setresgid", 65536), ("setresuid", 4294967294)):
        rc, err = sys_call(name, ident, ident, ident)
        if rc == 0:
            return False, "%s(%d) succeeded" % (name, ident)
        got.append("%s(%d): %s" % (name, ident, errno.errorcode.get(err)))
    return True, "; ".join(got)


@case("priv.read_shadow_and_root_home", users=("user",))
def _():
    got = []
    for p in ("/etc/shadow", "/root/.bash_history", "/root"):
        try:
            if os.path.isdir(p):
                os.listdir(p)
            else:
                open(p, "rb").read(1)
            got.append(p)
        except OSError:
            pass
    return not got, "readable: %s" % got


@case("priv.write_etc_passwd", users=("user",))
def _():
    ok, d = try_write("/etc/passwd", b"")
    return not ok, d


@case("priv.setuid_binary_no_new_privs", users=("user",))
def _():
    p = "/tmp/suid-python"
    if not os.path.exists(p):
        return False, "the root run did not prepare %s" % p
    r = os.popen("%s -c 'import os; print(os.geteuid())'" % p).read().strip()
    return r == str(os.getuid()), "setuid-root binary ran with euid %s" % r


@case("priv.file_capabilities_no_new_privs", users=("user",))
def _():
    p = "/tmp/cap-python"
    if not os.path.exists(p):
        return False, "the root run did not prepare %s" % p
    r = os.popen("%s -c \"print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\"" % p).read().strip()
    return r == "0000000000000000", "binary with file capabilities ran with CapEff=%s" % r


@case("priv.ptrace_pid1", users=("user",))
def _():
    return refused("ptrace", 16, 1, 0, 0, want=(errno.EPERM,))  # PTRACE_ATTACH


@case("priv.kill_pid1", users=("user",))
def _():
    try:
        os.kill(1, 0)
        return False, "may signal pid 1"
    except OSError as e:
        return True, "kill(1): %s" % e.strerror


@case("priv.steal_channel_fd", users=("user",))
def _():
    pfd, err = sys_call("pidfd_open", 1, 0)
    if pfd < 0:
        return True, "pidfd_open(1): %s" % errno.errorcode.get(err)
    rc, err = sys_call("pidfd_getfd", pfd, 3, 0)
    return rc < 0, "pidfd_getfd(pid 1, fd 3): %s" % errno.errorcode.get(err)


# --- kernel surface -------------------------------------------------------------------------

@case("k.unshare_user_ns")
def _():
    return refused("unshare", CLONE_NEWUSER)


@case("k.clone_new_user_ns")
def _():
    pid = os.fork()
    if pid == 0:
        rc, err = sys_call("clone", CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
        if rc == 0:
            os._exit(0)
        os._exit(3 if rc > 0 else (1 if err == errno.EPERM else 2))
    _, st = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1
    return code == 1, "clone(CLONE_NEWUSER) child status %d" % code


@case("k.clone3_hidden_flags")
def _():
    # clone3 carries its flags in memory where seccomp cannot see them: it must be refused.
    args = ctypes.create_string_buffer(88)
    struct.pack_into("Q", args, 0, CLONE_NEWUSER)
    struct.pack_into("Q", args, 32, signal.SIGCHLD)  # exit_signal
    rc, err = sys_call("clone3", args, 88)
    if rc == 0:
        os._exit(0)
    return rc < 0 and err == errno.ENOSYS, "clone3: rc=%d %s" % (rc, errno.errorcode.get(err))


@case("k.unshare_other_namespaces")
def _():
    rc, err = sys_call("unshare", CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)
    if rc != 0:
        return True, "unshare: %s" % errno.errorcode.get(err)
    # Allowed for root (owned by the sandbox's user namespace): still nothing of the host.
    return not marker_visible() and os.listdir("/sys/class/net") != [], "new namespaces are the sandbox's own"


@case("k.setns_foreign_namespaces")
def _():
    mine = {n: os.readlink("/proc/self/ns/" + n) for n in os.listdir("/proc/self/ns")}
    foreign = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for n, v in mine.items():
            try:
                if os.readlink("/proc/%s/ns/%s" % (pid, n)) != v and not n.endswith("for_children"):
                    foreign.append("%s/%s" % (pid, n))
            except OSError:
                pass
    return not foreign, "processes in other namespaces visible: %s" % foreign[:5]


@case("k.ptrace_host_pids")
def _():
    # Host pid numbers may also name processes of this sandbox (pid 1 is spaced): those are
    # not host processes, and attaching to them is no escape. Worse, PTRACE_ATTACH sends
    # SIGSTOP, and a DETACH before the stop is seen fails (ESRCH), so the tracer's exit left
    # spaced stopped and every exec of the sandbox hanging until its timeout: the escape
    # suite's intermittent hang. So only a pid whose /proc entry here shows a host program is
    # attached to, and an attach that works is waited for and undone.
    attached = []
    for pid in CFG.get("host_pids", []):
        try:
            comm = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            comm = None  # not visible here: the attach must fail with ESRCH
        if comm is not None and comm not in CFG.get("host_comms", []):
            continue
        rc, err = sys_call("ptrace", 16, pid, 0, 0)
        if rc == 0:
            try:
                os.waitpid(pid, 0x40000000)  # __WALL: the attach stop
            except OSError:
                pass
            sys_call("ptrace", 17, pid, 0, 0)  # DETACH
            os.kill(pid, signal.SIGCONT)
            attached.append("%d(%s)" % (pid, comm))
    return not attached, "attached to host processes: %s" % attached


@case("k.process_vm_readv_host_pids")
def _():
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    buf = ctypes.create_string_buffer(16)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 16)
    remote = (ctypes.c_void_p * 2)(0x400000, 16)
    for pid in CFG.get("host_pids", []):
        try:
            comm = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            continue
        if comm in CFG.get("host_comms", []) and libc.process_vm_readv(pid, local, 1, remote, 1, 0) > 0:
            return False, "read memory of host pid %d" % pid
    return True, "no host process memory readable"


@case("k.visible_processes_are_own")
def _():
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return len(pids) < 30, "%d processes visible" % len(pids)


for _name in ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf",
              "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup",
              "io_uring_enter", "io_uring_register", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
              "lookup_dcookie", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
              "iopl", "ioperm", "fsopen", "fsmount", "fsconfig", "fspick", "open_tree", "move_mount",
              "mount_setattr", "uselib", "nfsservctl"):
    def _make(n):
        def f():
            # Arguments that would do something real if the call were allowed.
            args = {"iopl": (3,), "ioperm": (0x60, 8, 1), "clock_settime": (0, ctypes.create_string_buffer(16)),
                    "settimeofday": (ctypes.create_string_buffer(16), 0), "userfaultfd": (0,),
                    "io_uring_setup": (8, ctypes.create_string_buffer(120)),
                    "bpf": (0, ctypes.create_string_buffer(128), 128), "syslog": (3, ctypes.create_string_buffer(64), 64),
                    "fsopen": (b"tmpfs", 0), "open_tree": (-100, b"/", 1), "keyctl": (0, -3, 0),
                    "perf_event_open": (ctypes.create_string_buffer(128), 0, -1, -1, 0)}.get(n, ())
            return refused(n, *args, want=(errno.EPERM, errno.ENOSYS))
        return f
    case("k.syscall." + _name)(_make(_name))


@case("k.reboot")
def _():
    # LINUX_REBOOT_MAGIC1/2 and CMD_CAD_OFF: harmless if it were allowed, refused anyway.
    return refused("reboot", 0xfee1dead, 672274793, 0)


@case("k.x32_abi_bypass")
def _():
    pid = os.fork()
    if pid == 0:
        libc.syscall(ctypes.c_long(0x40000000 | 101), 16, 1, 0, 0)  # x32 ptrace
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
    return sig == signal.SIGSYS, "x32 syscall: child %s" % ("killed by signal %d" % sig if sig else "exited")


@case("k.i386_int80_bypass")
def _():
    pid = os.fork()
    if pid == 0:
        code = b"\xb8\x1a\x00\x00\x00\xcd\x80\xc3"  # mov eax, 26 (i386 ptrace); int 0x80; ret
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        m.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
    # SIGSYS: the filter's bad-arch action. SIGSEGV only counts when the host itself has no
    # i386 entry (int 0x80 faults there too: no IA32 emulation), which the runner measures.
    held = sig == signal.SIGSYS or (sig == signal.SIGSEGV and CFG.get("host_int80_signal") == signal.SIGSEGV)
    return held, "int 0x80: child %s (host: signal %s)" % ("killed by signal %d" % sig if sig else "exited",
                                                             CFG.get("host_int80_signal"))


@case("k.realtime_scheduling")
def _():
    param = struct.pack("i", 50)
    rc = libc.sched_setscheduler(0, 1, param)  # SCHED_FIFO
    err = ctypes.get_errno()
    return rc != 0, "sched_setscheduler(FIFO): %s" % (errno.errorcode.get(err) if rc else "allowed")


@case("k.negative_nice")
def _():
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
        return os.getpriority(os.PRIO_PROCESS, 0) > -20, "nice -20 allowed"
    except OSError as e:
        return True, "setpriority(-20): %s" % e.strerror


@case("k.host_sysv_ipc")
def _():
    key = CFG.get("shm_key", 0)
    libc.shmget.restype = ctypes.c_int
    rc = libc.shmget(key, 0, 0)
    return rc < 0, "shmget(host key %#x): %s" % (key, "found" if rc >= 0 else errno.errorcode.get(ctypes.get_errno()))


@case("k.host_abstract_unix_socket")
def _():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect("\0" + CFG.get("abstract_name", "space-sec"))
        return False, "connected to the host's abstract socket"
    except OSError as e:
        return True, "connect: %s" % e.strerror
    finally:
        s.close()


@case("k.tiocsti_injection")
def _():
    TIOCSTI = 0x5412
    import fcntl
    for fd in (0, 1, 2):
        try:
            fcntl.ioctl(fd, TIOCSTI, b"x")
            if not os.ttyname(fd).startswith("/dev/pts/"):
                return False, "TIOCSTI on fd %d (%s)" % (fd, os.ttyname(fd))
        except OSError:
            pass
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        os.close(fd)
        return False, "opened a controlling tty"
    except OSError:
        return True, "no host terminal reachable"


@case("k.seccomp_and_no_new_privs")
def _():
    st = open("/proc/self/status").read()
    ok = "NoNewPrivs:\t1" in st and "Seccomp:\t2" in st
    cap = [l for l in st.splitlines() if l.startswith("CapBnd")][0]
    return ok, "status: NoNewPrivs/Seccomp set; %s" % cap


@case("k.uid_map_not_host_root")
def _():
    m = open("/proc/self/uid_map").read().split()
    return m[1] != "0" and int(m[1]) >= (1 << 20), "uid_map %s" % " ".join(m)


# --- resources --------------------------------------------------------------------------------

def cgroup_views():
    """The sandbox's own cgroups as its root can see them: this case's child unshares a mount
    namespace and mounts each hierarchy there (the sandbox mounts no cgroupfs itself, and is in
    a cgroup namespace of its own, so a mount's root is its own cgroup). {name: dir}; None when
    its root may not mount at all (an ns sandbox: no CAP_SYS_ADMIN), so no cgroup file is in
    its reach."""
    rc, err = sys_call("unshare", CLONE_NEWNS)
    if rc != 0:
        return None if err == errno.EPERM else {}
    mount(None, "/", None, 0x40000 | 0x4000)  # MS_PRIVATE|MS_REC
    views = {}
    for name, fstype, opts in (("memory", "cgroup", "memory"), ("pids", "cgroup", "pids"), ("cpu", "cgroup", "cpu"),
                               ("blkio", "cgroup", "blkio"), ("v2", "cgroup2", None)):
        d = "/tmp/cgview-" + name
        os.makedirs(d, exist_ok=True)
        if mount("cgroup", d, fstype, 0, opts)[0] == 0:
            views[name] = d
    return views


def cgroup_file(views, candidates):
    """The first of (view, file) that exists: the file that holds this limit on this host."""
    for view, f in candidates:
        if view in views and os.path.exists(os.path.join(views[view], f)):
            return os.path.join(views[view], f)
    return None


LIMIT_FILES = {
    "memory": [("v2", "memory.max"), ("memory", "memory.limit_in_bytes")],
    "pids": [("v2", "pids.max"), ("pids", "pids.max")],
    "cpu": [("v2", "cpu.max"), ("cpu", "cpu.cfs_quota_us")],
    "io": [("v2", "io.max"), ("blkio", "blkio.throttle.read_bps_device")],
}
UNLIMITED = {"memory.max": b"max", "memory.limit_in_bytes": b"-1", "pids.max": b"max", "cpu.max": b"max 100000",
             "cpu.cfs_quota_us": b"-1", "io.max": b"253:0 rbps=max", "blkio.throttle.read_bps_device": b"253:0 0"}


@case("fs.mount_any_filesystem", users=("root",))
def _():
    """Every filesystem type a sandbox could mount is kernel attack surface of its own (the
    cgroup v1 release_agent escape, overlayfs in user namespaces): an ns sandbox's root has no
    CAP_SYS_ADMIN, so it gets no mount namespace of its own and mounts nothing."""
    rc, err = sys_call("unshare", CLONE_NEWNS)
    if rc != 0:
        return err == errno.EPERM, "unshare(CLONE_NEWNS): %s" % errno.errorcode.get(err)
    mounted = []
    os.makedirs("/tmp/mnt-any", exist_ok=True)
    for src, fstype, data in (("none", "tmpfs", None), ("proc", "proc", None), ("sysfs", "sysfs", None),
                              ("cgroup", "cgroup", "memory"), ("cgroup2", "cgroup2", None), ("mqueue", "mqueue", None),
                              ("overlay", "overlay", "lowerdir=/usr,upperdir=/tmp/u,workdir=/tmp/w"),
                              ("binfmt_misc", "binfmt_misc", None)):
        os.makedirs("/tmp/u", exist_ok=True)
        os.makedirs("/tmp/w", exist_ok=True)
        if mount(src, "/tmp/mnt-any", fstype, 0, data)[0] == 0:
            mounted.append(fstype)
            libc.umount2(b"/tmp/mnt-any", 2)
    if mount("/usr", "/tmp/mnt-any", None, 0x1000)[0] == 0:  # MS_BIND
        mounted.append("bind")
    return not mounted, "mounted: %s" % mounted


for _what in ("memory", "pids", "cpu", "io"):
    def _make(what):
        def g():
            # The control is finding the file: this sandbox's own limit, where a write would raise it.
            views = cgroup_views()
            if views is None:
                return True, "its root may mount no cgroupfs (EPERM): no %s limit file in reach" % what
            f = cgroup_file(views, LIMIT_FILES[what])
            if not f:
                return None, "no cgroup view holds the %s limit on this host" % what
            before = open(f).read()
            ok, d = try_write(f, UNLIMITED[os.path.basename(f)])
            return not ok and open(f).read() == before, "%s (%s)" % (d, f.replace("/tmp/cgview-", ""))
        return g
    case("res.raise_own_" + _what + "_limit", users=("root",))(_make(_what))


@case("res.new_child_cgroup_escapes_limits", users=("root",))
def _():
    views = cgroup_views()
    if views is None:
        return True, "its root may mount no cgroupfs (EPERM): no cgroup to make a child in"
    if "memory" not in views and "v2" not in views:
        return None, "no cgroup view"
    base = views.get("v2") if os.path.exists(os.path.join(views.get("v2", "/nonexistent"), "memory.max")) \
        else views.get("memory")
    try:
        os.mkdir(os.path.join(base, "escape"))
    except OSError as e:
        return True, "mkdir child cgroup in its own: %s" % e.strerror
    # Made: a child is bounded by its parent whatever its own file says; moving into it and
    # unlimiting it must leave the parent's limit in force (v1: hierarchical_memory_limit).
    child = os.path.join(base, "escape")
    try_write(os.path.join(child, "memory.limit_in_bytes" if base == views.get("memory") else "memory.max"), b"-1"
              if base == views.get("memory") else b"max")
    stat = open(os.path.join(child, "memory.stat")).read() if base == views.get("memory") else ""
    limit = [l.split()[1] for l in stat.splitlines() if l.startswith("hierarchical_memory_limit ")]
    return bool(limit) and int(limit[0]) < 1 << 62, "child cgroup made; its effective limit %s" % limit


# --- network ----------------------------------------------------------------------------------

def tcp_banner(ip, port, send=b"GET / HTTP/1.0\r\n\r\n", timeout=3):
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((ip, port))
        s.sendall(send)
        return s.recv(200)
    except OSError as e:
        return None if isinstance(e, OSError) else None
    finally:
        s.close()


@case("net.host_api_port")
def _():
    got = {}
    for ip in CFG.get("host_ips", []) + ["127.0.0.1", CFG.get("gateway", "100.64.0.1")]:
        b = tcp_banner(ip, CFG.get("api_port", 7722))
        if b and b"space" in b.lower():
            got[ip] = b[:60]
    return not got, "API answered at %s" % got


@case("net.host_ssh_and_services")
def _():
    got = {}
    for ip in CFG.get("host_ips", []) + [CFG.get("gateway", "100.64.0.1")]:
        for port in (22, 5432, 111, 2375, 10250):
            b = tcp_banner(ip, port, send=b"", timeout=2)
            if b:
                got["%s:%d" % (ip, port)] = b[:40]
    return not got, "banners: %s" % got


@case("net.metadata_service")
def _():
    b = tcp_banner("169.254.169.254", 80, send=b"GET /latest/meta-data/ HTTP/1.0\r\nHost: 169.254.169.254\r\n\r\n")
    return not b or b"egress_denied" in b or b" 403 " in b, "metadata answer: %r" % (b[:80] if b else b)


@case("net.other_sandbox")
def _():
    ip = CFG.get("other_sandbox_ip")
    if not ip:
        return True, "no other sandbox address given"
    b = tcp_banner(ip, 8000)
    return not b or b"HTTP/1.0 200" not in b, "other sandbox answered: %r" % (b[:60] if b else b)


@case("net.ipv6_out")
def _():
    # Native IPv6 must have no route. An IPv4-mapped address is IPv4 on the wire, so it meets
    # the same gateway as IPv4: it may get the gateway's refusal, never the upstream's answer.
    for ip in ("2001:db8::2", "::ffff:198.51.100.2", "fe80::1", "::1"):
        try:
            b = tcp_banner(ip, 80, send=b"GET /ipv6-out HTTP/1.0\r\nHost: other.test.example\r\n\r\n")
        except Exception:
            b = None
        if b and (ip != "::1") and b"ipv6-out" in b:
            return False, "IPv6 reached the upstream via %s" % ip
    return True, "no IPv6 route out; the mapped address got only the gateway's refusal"


@case("net.dns_direct_to_outside")
def _():
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x05other\x04test\x07example\x00\x00\x01\x00\x01"
    got = []
    # The upstream runs an open resolver on port 53 (testnet.py) that answers this name: the
    # run checks from the host that it does (the control). Only addresses of the test's own.
    for server in (CFG.get("upstream_ip", "198.51.100.2"),) + tuple(CFG.get("host_ips", [])):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1)
        try:
            s.sendto(q, (server, 53))
            d, _ = s.recvfrom(512)
            # An answer with an A record for a name no profile allows would be a leak.
            if len(d) > len(q) and d[3] & 0xF == 0 and struct.unpack(">H", d[6:8])[0] > 0:
                got.append(server)
        except OSError:
            pass
        finally:
            s.close()
    return not got, "resolved a disallowed name via %s" % got


@case("net.dns_disallowed_name")
def _():
    try:
        a = socket.gethostbyname("other.test.example")
        return False, "resolved to %s" % a
    except OSError as e:
        return True, "not resolved: %s" % e


@case("net.raw_spoofed_udp", users=("root",))
def _():
    # A UDP datagram to the upstream with the gateway's source address, built by hand.
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    except OSError as e:
        return True, "raw socket: %s" % e.strerror
    src, dst = socket.inet_aton(CFG.get("gateway", "100.64.0.1")), socket.inet_aton(CFG.get("upstream_ip", "198.51.100.2"))
    payload = b"SPOOFED-RAW"
    udp = struct.pack(">HHHH", 40000, 9999, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, src, dst)
    for _ in range(3):
        try:
            s.sendto(ip + udp, (CFG.get("upstream_ip", "198.51.100.2"), 0))
        except OSError:
            pass
    return True, "sent; the host checks the upstream never saw it"


@case("net.route_around_gateway", users=("root",))
def _():
    # Root may change its own routes and addresses; the firewall outside must still drop it.
    os.system("ip route add 198.51.100.0/30 dev eth0 2>/dev/null; ip addr add 198.51.100.1/30 dev eth0 2>/dev/null")
    b = tcp_banner(CFG.get("upstream_ip", "198.51.100.2"), 80,
                   send=b"GET /route-around HTTP/1.0\r\nHost: other.test.example\r\n\r\n")
    os.system("ip addr del 198.51.100.1/30 dev eth0 2>/dev/null; ip route del 198.51.100.0/30 dev eth0 2>/dev/null")
    return not b or b"route-around" not in b, "answer: %r" % (b[:60] if b else b)


@case("net.raw_socket_sniff_others", users=("root",))
def _():
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    except OSError as e:
        return True, "AF_PACKET: %s" % e.strerror
    s.settimeout(0.2)
    # The control: datagrams of this sandbox's own, sent meanwhile, are seen (the sniffer works).
    # The other sandbox is sending too (the run keeps it busy), on its own link.
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.connect((CFG.get("gateway", "100.64.0.1"), 9))
    mine = socket.inet_aton(probe.getsockname()[0])
    foreign = own = 0
    end = time.time() + 3
    other = CFG.get("other_sandbox_ip", "")
    next_send = 0
    while time.time() < end:
        if time.time() >= next_send:  # 20 a second
            probe.send(b"sniff-control")
            next_send = time.time() + 0.05
        try:
            pkt = s.recv(2048)
        except OSError:
            continue
        if other and socket.inet_aton(other) in pkt[26:34]:
            foreign += 1
        if mine in pkt[26:34]:
            own += 1
    probe.close()
    if own == 0:
        return None, "control: not even this sandbox's own datagrams were seen"
    return foreign == 0, "frames of the other sandbox seen: %d (own, the control: %d)" % (foreign, own)


# --- the hostile guest (runs last: it breaks this sandbox's channel) ---------------------------

@case("guest.forged_frames_to_node", users=("root",))
def _():
    if not CFG.get("forge_frames"):
        return True, "skipped in this sandbox"
    pfd, err = sys_call("pidfd_open", 1, 0)
    if pfd < 0:
        return True, "pidfd_open: %s" % errno.errorcode.get(err)
    # spaced's channel: fd 3, a socket, under ns; in a VM the virtio-console port it holds.
    chan = 3
    if CFG.get("runtime") == "vm":
        ports = [int(fd) for fd in os.listdir("/proc/1/fd")
                 if os.readlink("/proc/1/fd/" + fd).startswith("/dev/vport")]
        if not ports:
            return True, "spaced holds no virtio port"
        chan = ports[0]
    ch, err = sys_call("pidfd_getfd", pfd, chan, 0)
    if ch < 0:
        return True, "pidfd_getfd: %s" % errno.errorcode.get(err)

    class Port:  # a character device written as the socket is
        def sendall(self, b):
            while b:
                b = b[os.write(ch, b):]
    sock = Port() if CFG.get("runtime") == "vm" else socket.socket(fileno=ch)

    def frame(t, stream, payload, version=1, length=None):
        return struct.pack("<BBHII", version, t, 0, stream, len(payload) if length is None else length) + payload
    deep = b"{\"a\":" * 100000 + b"1" + b"}" * 100000
    frames = [frame(16, 1, deep[:1 << 20]), frame(21, 2, b"x" * 65536), frame(16, 0xFFFFFFFF, b"{\"exit_code\":1e999}"),
              frame(11, 3, b"[[[[[[[[[["), frame(1, 0, b"{\"version\":99}"), frame(13, 7, b"", length=0xFFFFFFFF),
              frame(99, 1, b"junk"), b"\xff" * 64]
    try:
        for f in frames:
            sock.sendall(f)
    except OSError as e:
        return True, "send: %s" % e.strerror
    return True, "sent %d hostile frames; the host checks the node survived" % len(frames)


# --- driver -----------------------------------------------------------------------------------

def prepare_as_root():
    """Files the user run needs: a setuid-root and a file-capability copy of python3."""
    import shutil
    py = os.path.realpath(sys.executable)
    for p in ("/tmp/suid-python", "/tmp/cap-python"):
        shutil.copy(py, p)
    os.chmod("/tmp/suid-python", 0o4755)
    # VFS_CAP_REVISION_2, effective bit, permitted = all.
    os.setxattr("/tmp/cap-python", "security.capability", struct.pack("<IIIII", 0x02000001, 0xFFFFFFFF, 0, 0x1FF, 0))


def run_case(name, fn, timeout=20):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # Its own process group, so whatever the case leaves running is ended with it below:
        # a leftover holding the exec's stdout would keep the whole probe's exec from ending.
        os.setpgid(0, 0)
        try:
            held, detail = fn()
            out = {"held": None if held is None else bool(held), "detail": str(detail)[:400]}
        except Exception as e:  # a case that errors is reported as broken, with the reason
            out = {"held": False, "detail": "probe error: %r" % e}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    deadline = time.time() + timeout
    while True:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            st = None
            break
        time.sleep(0.02)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass  # nothing left of it
    # Only what is already written: a process the case left behind may hold the pipe open
    # for ever, and must not hang the whole probe (it ends with the sandbox).
    os.set_blocking(r, False)
    data = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    os.close(r)
    if data:
        res = json.loads(data)
    else:
        res = {"held": False, "detail": "case died (%s)" % ("timeout" if st is None else "status %r" % st)}
    return res


def planned(who):
    """The cases this run makes, in order."""
    only = set(CFG.get("only", []))
    out = []
    for name, users, fn in CASES:
        if who not in users or (only and name not in only):
            continue
        if name.startswith("guest.") and not CFG.get("forge_frames"):
            continue
        if name == "fs.host_paths_absent" and not CFG.get("host_paths"):
            continue  # nothing to look for: the run names them
        out.append((name, fn))
    return out


def main():
    who = "root" if ROOT else "user"
    if ROOT and CFG.get("prepare"):
        prepare_as_root()
    plan = planned(who)
    # First the plan, so a probe that dies halfway is seen to have left cases out.
    print(json.dumps({"plan": [name for name, _ in plan], "user": who}), flush=True)
    for name, fn in plan:
        res = run_case(name, fn)
        print(json.dumps({"case": name, "user": who, **res}), flush=True)


if __name__ == "__main__":
    main()
