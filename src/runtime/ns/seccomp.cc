#include "runtime/ns/seccomp.h"

#include <linux/seccomp.h>
#include <sched.h>
#include <linux/btrfs.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::runtime::ns {
namespace {

// A syscall the sandbox may not make, and the errno it gets instead. The sandbox is
// root in its own user namespace; everything here is either host-global (not namespaced,
// so it would reach the host or other sandboxes) or a large kernel attack surface the
// workloads we run do not need. Default-allow keeps new syscalls usable; the cost is that
// new dangerous ones need adding here.
struct Refusal {
  const char* name;
  int err;
};

constexpr Refusal kRefusals[] = {
    // Kernel modules run code in the host kernel (init-ns CAP_SYS_MODULE already needed;
    // refusing early keeps module autoload probing out too).
    {"init_module", EPERM},
    {"finit_module", EPERM},
    {"delete_module", EPERM},
    // Replacing or rebooting the host kernel. reboot() in a pid ns only signals init, but
    // no sandbox needs it.
    {"kexec_load", EPERM},
    {"kexec_file_load", EPERM},
    {"reboot", EPERM},
    // eBPF and perf: large, frequently exploited kernel surfaces; perf also observes
    // other tenants' activity.
    {"bpf", EPERM},
    {"perf_event_open", EPERM},
    // Kernel keyrings are not namespaced: keys could leak between sandboxes.
    {"keyctl", EPERM},
    {"add_key", EPERM},
    {"request_key", EPERM},
    // File handles bypass path-based confinement (the "shocker" container escape).
    {"open_by_handle_at", EPERM},
    {"name_to_handle_at", EPERM},
    // userfaultfd makes kernel races easy to win in exploits; workloads do not need it.
    {"userfaultfd", EPERM},
    // io_uring: a second syscall surface that seccomp cannot see into, with a long CVE
    // history (Docker's and ChromeOS's profiles refuse it too).
    {"io_uring_setup", EPERM},
    {"io_uring_enter", EPERM},
    {"io_uring_register", EPERM},
    // Host-global administration: swap, process accounting, quotas, kernel log, clock.
    {"swapon", EPERM},
    {"swapoff", EPERM},
    {"acct", EPERM},
    {"quotactl", EPERM},
    {"quotactl_fd", EPERM},
    {"lookup_dcookie", EPERM},
    {"syslog", EPERM},
    {"settimeofday", EPERM},
    {"clock_settime", EPERM},
    {"clock_adjtime", EPERM},
    {"adjtimex", EPERM},
    // Raw I/O port access.
    {"iopl", EPERM},
    {"ioperm", EPERM},
    // The new mount API: the runtime sets up every mount before the filter is loaded;
    // sandboxes keep mount(2) for tmpfs and bind mounts inside their own namespace, but
    // the fd-based API (idmapped mounts, detached trees) is surface they do not need.
    {"fsopen", EPERM},
    {"fsmount", EPERM},
    {"fsconfig", EPERM},
    {"fspick", EPERM},
    {"open_tree", EPERM},
    {"move_mount", EPERM},
    {"mount_setattr", EPERM},
    // clone3 passes its flags in memory, which seccomp cannot inspect, so CLONE_NEWUSER
    // could not be refused. ENOSYS makes glibc fall back to clone(2), whose flags we check.
    {"clone3", ENOSYS},
    // Legacy interfaces with a bad security record and no modern users.
    {"vm86", EPERM},
    {"vm86old", EPERM},
    {"nfsservctl", EPERM},
    {"uselib", EPERM},
};

// Allowed on purpose (decisions, not omissions):
// - ptrace, process_vm_readv/writev: debuggers and profilers run inside sandboxes; the
//   pid namespace limits them to the sandbox's own processes, and since Linux 4.8 a
//   traced process cannot use ptrace to skip seccomp checks.
// - setns: a sandbox can only name namespaces it can reach, all of which it owns.
// - pivot_root, mount, umount2: act on the sandbox's own mount namespace only.
// - personality: its flags (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC) weaken only the
//   caller's own hardening, mmap_min_addr is still enforced (CAP_SYS_RAWIO in the init
//   namespace), and libseccomp cannot express "not one of {0, 8, 0xffffffff}" in a
//   default-allow filter (one comparison per argument per rule).

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using ScopedCtx = std::unique_ptr<void, CtxDeleter>;

Status SeccompError(const std::string& what, int rc) {
  // libseccomp returns negative errno values.
  return ErrnoStatus("seccomp " + what, "", -rc);
}

}  // namespace

Result<std::vector<sock_filter>> BuildSeccompFilter() {
  ScopedCtx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Internal("seccomp_init failed");
  // A syscall made through a non-native ABI (i386 int 0x80, x32) would be checked
  // against the wrong numbers: kill the process instead. libseccomp also sends x32
  // numbers (bit 30 set) on x86_64 to this action.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return SeccompError("attr badarch", rc);

  for (const Refusal& r : kRefusals) {
    int nr = seccomp_syscall_resolve_name(r.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a syscall on this architecture
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(r.err), nr, 0);
    if (rc < 0) return SeccompError(std::string("rule ") + r.name, rc);
  }

  // New user namespaces are the entry point of most unprivileged kernel exploits
  // (they unlock CAP_SYS_ADMIN-gated code paths); a sandbox does not need nested ones.
  // Other namespace types stay allowed (they are owned by the sandbox's user ns).
  // clone's first argument on x86_64 is the flags word.
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  if (rc < 0) return SeccompError("rule clone", rc);
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  if (rc < 0) return SeccompError("rule unshare", rc);

  // btrfs lets any user create subvolumes and snapshots inside a directory it owns. A
  // subvolume made inside a sandbox root is outside the root's qgroup (so it escapes the
  // disk limit) and is not part of the root's snapshots: refuse the ioctls that make them.
  // ioctl's second argument is the request number.
  for (unsigned long req : {BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SUBVOL_CREATE_V2, BTRFS_IOC_SNAP_CREATE,
                            BTRFS_IOC_SNAP_CREATE_V2}) {
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                          SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(req)));
    if (rc < 0) return SeccompError("rule ioctl btrfs", rc);
  }

  // libseccomp 2.5 exports only to an fd; a memfd avoids touching the filesystem.
  int raw = ::memfd_create("space-seccomp", MFD_CLOEXEC);
  if (raw < 0) return ErrnoStatus("memfd_create", "space-seccomp", errno);
  UniqueFd fd(raw);
  rc = seccomp_export_bpf(ctx.get(), fd.get());
  if (rc < 0) return SeccompError("export", rc);
  off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    return Internal("seccomp export: bad program size " + std::to_string(size));
  }
  std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
  ssize_t n =
      RetryEintr([&] { return ::pread(fd.get(), prog.data(), static_cast<size_t>(size), 0); });
  if (n != size) return ErrnoStatus("pread", "seccomp program", n < 0 ? errno : EIO);
  if (prog.size() > BPF_MAXINSNS) return Internal("seccomp program too long");
  return prog;
}

int ChildLoadSeccomp(const sock_fprog* prog) {
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) != 0) return errno;
  return 0;
}

}  // namespace space::runtime::ns
